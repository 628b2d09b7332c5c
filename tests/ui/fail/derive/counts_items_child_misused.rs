use nodes_std::prelude::*;

// `counts_items = "child"` on a node with state of its own, and an unknown
// source for it.
#[derive(Node)]
#[node(counts_items = "child")]
struct Counting<S: Node<Item = u64>> {
    #[node(child)]
    source: S,
    #[node(state)]
    seen: u64,
}

#[derive(Node)]
#[node(counts_items = "parent")]
struct Unknown<S: Node<Item = u64>> {
    #[node(child)]
    source: S,
}

impl<S: Node<Item = u64>> nodes_std::Node for Counting<S> {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

impl<S: Node<Item = u64>> nodes_std::Node for Unknown<S> {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
