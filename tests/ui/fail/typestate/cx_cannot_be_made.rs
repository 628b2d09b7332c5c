// User code cannot forge the context that proves a pipeline was reset.
use nodes_std::Cx;

fn main() {
    let _cx = Cx { _private: () };
}
