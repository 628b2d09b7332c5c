// Every field has a role: a counter without `#[node(state)]` would be neither
// reset nor saved, so an unannotated field does not compile.
use nodes_std::prelude::*;

#[derive(Node)]
struct Counter<S> {
    #[node(child)]
    source: S,
    /// Items seen this pass.
    seen: u64,
    #[node(config)]
    limit: u64,
}

impl<S: Node> nodes_std::Node for Counter<S> {
    type Item = S::Item;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        self.seen += 1;
        if self.seen > self.limit {
            return Ok(None);
        }
        self.source.next(cx)
    }
}

fn main() {}
