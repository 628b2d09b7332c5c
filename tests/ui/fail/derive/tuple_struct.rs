use nodes_std::prelude::*;

#[derive(Node)]
struct Bad(u64);

fn main() {}
