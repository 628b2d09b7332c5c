// Only the derive's own error is reported: the fallback impl keeps the code
// that uses `Bad` as a node type-checking.
use nodes_std::prelude::*;

#[derive(Node)]
enum Bad {
    A,
    B,
}

impl Node for Bad {
    type Item = u8;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u8>> {
        Ok(None)
    }
}

fn takes_node<N: Node>(_: N) {}

fn main() {
    takes_node(Bad::A);
    let _ = Bad::B;
}
