// The expansion is safe code: it compiles in a crate that forbids unsafe, and
// is lint-clean under strict lints.
#![forbid(unsafe_code)]
#![deny(unused_qualifications, unused_results, clippy::all)]

use nodes_std::prelude::*;

#[derive(Node)]
#[node(init)]
struct Counter {
    #[node(state, default = 10)]
    n: u64,
    #[node(lazy)]
    step: Lazy<u64>,
}

impl Init for Counter {
    fn init(&mut self, _restored: bool) -> Result<()> {
        self.step.set(5);
        Ok(())
    }
}

impl Node for Counter {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        self.n += *self.step.get()?;
        Ok(Some(self.n))
    }
}

fn main() -> Result<()> {
    let mut running = Counter { n: 0, step: Lazy::new() }.start()?;
    assert_eq!(running.next().transpose()?, Some(15));
    Ok(())
}
