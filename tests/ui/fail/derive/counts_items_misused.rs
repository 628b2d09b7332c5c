use nodes_std::prelude::*;

// `counts_items` on a field that is not plain state, twice, and in a node
// with a child: each is refused at its attribute.
#[derive(Node)]
struct NotState {
    #[node(config, counts_items)]
    n: u64,
}

#[derive(Node)]
struct Twice {
    #[node(state, counts_items)]
    a: u64,
    #[node(state, counts_items)]
    b: u64,
}

#[derive(Node)]
struct WithChild<S: Node<Item = u64>> {
    #[node(child)]
    source: S,
    #[node(state, counts_items)]
    n: u64,
}

impl nodes_std::Node for NotState {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

impl nodes_std::Node for Twice {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

impl<S: Node<Item = u64>> nodes_std::Node for WithChild<S> {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
