use nodes_std::prelude::*;

// `size_hint = "child"` needs exactly one `child` field to forward from.
#[derive(Node)]
#[node(size_hint = "child")]
struct Pair<A, B> {
    #[node(child)]
    left: A,
    #[node(child)]
    right: B,
}

impl<A: Node<Item = u64>, B: Node<Item = u64>> Node for Pair<A, B> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        self.left.next(cx)
    }
}

#[derive(Node)]
#[node(size_hint = "child")]
struct Source {
    #[node(state)]
    n: u64,
}

impl Node for Source {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
