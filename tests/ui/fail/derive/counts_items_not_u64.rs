use nodes_std::prelude::*;

// The counted field must be a `u64`: the error points at its type.
#[derive(Node)]
struct Signed {
    #[node(state, counts_items)]
    n: i32,
}

impl nodes_std::Node for Signed {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(None)
    }
}

fn main() {}
