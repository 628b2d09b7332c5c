// What a `#[derive(Node)]` of another release emits first: nodes-core stops
// with an error naming both versions instead of failing inside the
// generated code.
nodes_std::__require_derive_version!("0.2.0");

fn main() {}
