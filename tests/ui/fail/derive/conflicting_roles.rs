use nodes_std::prelude::*;

#[derive(Node)]
struct Bad<S> {
    #[node(child, state)]
    source: S,
    #[node(default = 3)]
    limit: u64,
}

impl<S: Node<Item = u64>> nodes_std::Node for Bad<S> {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
