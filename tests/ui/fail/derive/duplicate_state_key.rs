use nodes_std::prelude::*;

#[derive(Node)]
struct Bad {
    #[node(state)]
    count: u64,
    #[node(state, rename = "count")]
    total: u64,
}

impl nodes_std::Node for Bad {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
