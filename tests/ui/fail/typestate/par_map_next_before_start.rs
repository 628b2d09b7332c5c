// A hand-written threaded node that was only constructed cannot be advanced
// either: the same message as for derived nodes.
use nodes_std::{IterableWrapper, NodeExt, ParallelOptions};

fn main() {
    let mut node = IterableWrapper::new(0..3u32)
        .par_map(|x| Ok(x + 1), ParallelOptions::new(2))
        .unwrap();
    let _ = node.next();
}
