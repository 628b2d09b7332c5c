use nodes_std::prelude::*;

#[derive(Node)]
#[node(size_hint = "source")]
struct Bad<S> {
    #[node(child)]
    source: S,
}

impl<S: Node<Item = u64>> Node for Bad<S> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        self.source.next(cx)
    }
}

fn main() {}
