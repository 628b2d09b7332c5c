use nodes_std::prelude::*;

#[derive(Node)]
struct Bad {
    #[node(param, deferred)]
    n: u64,
}

impl nodes_std::Node for Bad {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
