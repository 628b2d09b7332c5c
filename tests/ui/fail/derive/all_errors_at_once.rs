// Every attribute mistake is reported in one build, not one per build.
use nodes_std::prelude::*;

#[derive(Node)]
#[node(rename_all = "Title Case", version = 1)]
struct Bad {
    #[node(stat)]
    a: u64,
    #[node(state)]
    version: u64,
    #[node(lazy)]
    b: u64,
}

impl nodes_std::Node for Bad {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
