use nodes_std::prelude::*;

struct Handle;

#[derive(Node)]
struct Bad {
    #[node(state)]
    handle: Handle,
}

impl nodes_std::Node for Bad {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
