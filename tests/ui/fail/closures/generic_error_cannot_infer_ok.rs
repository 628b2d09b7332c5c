// Why `par_map` takes `Result<U, BoxError>` and not a generic error type:
// against `try_map`'s generic `E: Into<BoxError>`, a closure whose error type
// nothing names cannot be inferred (a type parameter's default does not
// drive inference). The same closure compiles with `par_map`.
use nodes_std::{IterableWrapper, NodeExt};

fn main() {
    let _ = IterableWrapper::new(0..3u32).try_map(|x| Ok(x + 1));
}
