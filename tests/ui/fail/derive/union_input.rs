use nodes_std::prelude::*;

#[derive(Node)]
union Bad {
    a: u32,
    b: f32,
}

fn main() {}
