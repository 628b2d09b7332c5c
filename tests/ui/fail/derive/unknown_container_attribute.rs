use nodes_std::prelude::*;

#[derive(Node)]
#[node(verison = 2)]
struct Bad {
    #[node(state)]
    n: u64,
}

impl nodes_std::Node for Bad {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
