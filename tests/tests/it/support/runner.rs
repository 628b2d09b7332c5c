//! Runs random cases the way the reliability suite wants: each under a
//! watchdog, counting how many ran, were refused or skipped, shrinking a
//! failure to a small case (a timing-dependent one is retried before it
//! counts as passing), and printing the counts even when output is captured.
//!
//! `NODES_SURVEY=n` keeps going after a failure and reports up to `n`
//! failing cases, each shrunk (for finding every failing shape at once);
//! `NODES_SHRINK_SECS=s` bounds the shrinking of each (120 by default).

use std::fmt;
use std::io::Write;
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

use super::watch::{config, with_watchdog};

/// How a case that passed went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Checked in full.
    Ran,
    /// The pipeline was refused when it started, as it may be.
    Refused,
    /// Too long a run to check (nested cycles multiply small sources).
    Skipped,
}

/// Runs `cases` (scaled by the long mode) cases drawn from `strategy`
/// (with the fixed `seed` in CI), each under a watchdog of `limit`; panics
/// with the shrunk failures. Prints `name: N cases, R refused, S skipped`.
pub(crate) fn run_cases<T>(
    name: &str,
    cases: u32,
    seed: u64,
    limit: Duration,
    strategy: impl Strategy<Value = T>,
    check: fn(&T) -> Result<Outcome, String>,
) where
    T: Clone + fmt::Display + fmt::Debug + Send + 'static,
{
    let config = config(cases, seed);
    let cases = config.cases;
    let mut runner = TestRunner::new(config);
    let survey: usize = std::env::var("NODES_SURVEY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let started = Instant::now();
    let (mut ran, mut refused, mut skipped) = (0u32, 0u32, 0u32);
    let mut failures = Vec::new();
    for i in 0..cases {
        let mut tree = match strategy.new_tree(&mut runner) {
            Ok(tree) => tree,
            Err(e) => panic!("{name}: cannot draw a case: {e}"),
        };
        let case = tree.current();
        match run_one(&case, limit, check) {
            Ok(Outcome::Ran) => ran += 1,
            Ok(Outcome::Refused) => refused += 1,
            Ok(Outcome::Skipped) => skipped += 1,
            Err(message) => {
                let (small, small_message) =
                    shrink(&mut tree, case.clone(), message.clone(), limit, check);
                failures.push(format!(
                    "case {i}:\n  {message}\n  pipeline {case}\n\n  shrunk to:\n  {small_message}\n  pipeline {small}\n  {small:?}"
                ));
                if failures.len() > survey {
                    break;
                }
            }
        }
    }
    let summary = format!(
        "{name}: {} cases in {:.1} s: {ran} ran, {refused} refused, {skipped} skipped, {} failed",
        ran + refused + skipped + failures.len() as u32,
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    // Straight to the process's stderr: the test harness captures `eprintln!`.
    let _ = writeln!(std::io::stderr(), "{summary}");
    if !failures.is_empty() {
        panic!("{summary}\n\n{}", failures.join("\n\n"));
    }
}

fn run_one<T: Clone + Send + 'static>(
    case: &T,
    limit: Duration,
    check: fn(&T) -> Result<Outcome, String>,
) -> Result<Outcome, String> {
    let case = case.clone();
    with_watchdog(limit, move || check(&case)).and_then(|r| r)
}

/// proptest's shrinking loop, where a simpler case counts as failing if any
/// of three tries fails (a timing-dependent failure may pass once). Bounded
/// to two minutes (see the module docs).
fn shrink<T: Clone + Send + 'static>(
    tree: &mut impl ValueTree<Value = T>,
    mut best: T,
    mut message: String,
    limit: Duration,
    check: fn(&T) -> Result<Outcome, String>,
) -> (T, String) {
    let secs = std::env::var("NODES_SHRINK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let deadline = Instant::now() + Duration::from_secs(secs);
    if !tree.simplify() {
        return (best, message);
    }
    while Instant::now() < deadline {
        let candidate = tree.current();
        let failed = (0..3).find_map(|_| run_one(&candidate, limit, check).err());
        match failed {
            Some(m) => {
                best = candidate;
                message = m;
                if !tree.simplify() {
                    break;
                }
            }
            None => {
                if !tree.complicate() {
                    break;
                }
            }
        }
    }
    (best, message)
}
