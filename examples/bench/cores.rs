//! `effective_cores`: the parallelism the machine delivers right now.
//!
//! Two threads run the same CPU-bound work at the same time, and one thread
//! runs it alone; `effective_cores` is the ratio of their throughputs (2 on
//! two idle cores, about 1 when another process takes a core, below 1 when
//! the machine is overloaded). `available_parallelism` says how many cores a
//! process may use; this says what two of them give, which is what a
//! two-worker case can hope for.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Res;

/// Calls of `cpu_bound` (about 12 µs each) per thread and measurement: about
/// 20 ms of work, long against a scheduler tick, short against the run.
const CALLS: u64 = 1_600;

/// Timings per measurement; the best of each is kept.
const RUNS: usize = 3;

/// `effective_cores` measured before a case and after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cores {
    before: f64,
    after: f64,
}

impl Cores {
    /// The figure a case is judged by: the smaller of the two.
    pub(crate) fn used(self) -> f64 {
        self.before.min(self.after)
    }

    /// The fields every line of a parallel case carries.
    pub(crate) fn json(self) -> Value {
        json!({
            "effective_cores": self.used(),
            "effective_cores_before_after": [self.before, self.after],
        })
    }
}

/// Runs `case` between two measurements of `effective_cores`.
pub(crate) fn around<T>(case: impl FnOnce() -> Res<T>) -> Res<(T, Cores)> {
    let before = effective_cores();
    let out = case()?;
    let after = effective_cores();
    Ok((out, Cores { before, after }))
}

/// Measures once (about 150 ms): best of 3 timings of one thread alone and of
/// two threads at once, alternated.
fn effective_cores() -> f64 {
    let mut one = Duration::MAX;
    let mut two = Duration::MAX;
    for round in 0..RUNS as u64 {
        one = one.min(timed_threads(1, round));
        two = two.min(timed_threads(2, round));
    }
    crate::round_to(2.0 * one.as_secs_f64() / two.as_secs_f64(), 2)
}

/// Wall time for `threads` threads each doing the same `CALLS` calls.
fn timed_threads(threads: u64, round: u64) -> Duration {
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                let seed = (round * 2 + t) * CALLS;
                let mut acc = 0u64;
                for i in 0..CALLS {
                    acc ^= crate::cpu_bound(black_box(seed + i));
                }
                black_box(acc)
            });
        }
    });
    start.elapsed()
}
