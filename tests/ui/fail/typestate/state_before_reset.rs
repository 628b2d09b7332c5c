// Reading the state of a node that was only constructed does not compile either.
use nodes_std::IterableWrapper;


fn main() {
    let node = IterableWrapper::new(0..3u32);
    let _ = node.get_state();
}
