use nodes_std::prelude::*;

#[derive(Node)]
#[node(init)]
struct Bad {
    #[node(state)]
    n: u64,
}

impl Node for Bad {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
