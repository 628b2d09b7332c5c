use nodes_std::prelude::*;

#[derive(Node)]
struct Bad {
    #[node(lazy)]
    cache: Lazy<Vec<u8>>,
}

impl Node for Bad {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
