// `par_map` takes `Result<U, BoxError>`: a function with an error type of
// its own does not go in as it is (wrap it: `boxed_err(parse)`).
use nodes_std::{IterableWrapper, NodeExt, ParallelOptions};

fn parse(text: &str) -> Result<u8, std::num::ParseIntError> {
    text.parse()
}

fn main() {
    let _ = IterableWrapper::new(["1"]).par_map(parse, ParallelOptions::new(2));
}
