use nodes_std::prelude::*;

// `resume = ...` says in full what the state promises: `counts_items` on the
// container or on a field would say it twice.
#[derive(Node)]
#[node(counts_items = "child", resume = nodes_std::Resume::ForwardsCount)]
struct Twice<S: Node<Item = u64>> {
    #[node(child)]
    source: S,
}

#[derive(Node)]
#[node(resume = nodes_std::Resume::Replays)]
struct Counted {
    #[node(state, counts_items)]
    seen: u64,
}

impl<S: Node<Item = u64>> nodes_std::Node for Twice<S> {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

impl nodes_std::Node for Counted {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
