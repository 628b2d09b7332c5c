use nodes_std::prelude::*;

// `#[node(size_hint)]` asks for the author's `SizeHint` impl.
#[derive(Node)]
#[node(size_hint)]
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
