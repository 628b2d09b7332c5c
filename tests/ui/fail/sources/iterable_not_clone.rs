// An iterator that is not `Clone` cannot be wrapped with `new`: the error is
// at the call, says "Clone", and names `from_fn` as the way out.
use std::io::BufRead;

use nodes_std::IterableWrapper;

fn main() {
    let lines = "a\nb\n".as_bytes().lines();
    let _source = IterableWrapper::new(lines);
}
