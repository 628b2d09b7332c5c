// The derive writes `Stateful` only: a node without `impl Node` is told to
// write one wherever it is used as a node.
use nodes_std::prelude::*;
use nodes_std::IterableWrapper;

#[derive(Node)]
struct Sum<S> {
    #[node(child)]
    source: S,
    #[node(state)]
    sum: u64,
}

fn main() {
    let _ = Loader::new(Sum {
        source: IterableWrapper::new(0..3u64),
        sum: 0,
    });
    let _ = Sum {
        source: IterableWrapper::new(0..3u64),
        sum: 0,
    }
    .start();
}
