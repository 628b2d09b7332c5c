// User code cannot forge the context that proves a pipeline was reset: it has
// no public constructor, no `Default`, and private fields.
use nodes_std::Cx;

fn main() {
    let _cx = Cx::default();
}
