//! Wide pipelines: taking and restoring the state of a
//! `MultiNodeWeightedSampler` does a bounded amount of work per source.
//!
//! The work is counted, not timed ([`testing::state_work`]: entries
//! visited by lookups, entries written or copied, nested states opened,
//! checksum steps), so the test cannot flake on a busy machine. A step that
//! did work proportional to the number of sources *for each source* (a scan
//! of the whole state per key, a copy of a level per child) shows as a
//! count per source that grows with the number of sources. The timing
//! itself is `cargo run --release --example wide_restore`.

use nodes_std::prelude::*;
use nodes_std::testing;
use nodes_std::{IterableWrapper, MultiNodeWeightedSampler};

fn sampler(n: usize) -> MultiNodeWeightedSampler<IterableWrapper<std::ops::Range<u64>>> {
    let sources = (0..n).map(|i| (format!("s{i:05}"), IterableWrapper::new(0..100u64)));
    let weights = (0..n).map(|i| (format!("s{i:05}"), 1.0 + (i % 7) as f64));
    MultiNodeWeightedSampler::new(sources, weights)
        .unwrap()
        .seed(5)
}

/// Work per source of: `state_dict`, `load_state_dict` of the state read
/// back into a fresh loader, and again into the same loader, for a sampler
/// over `n` sources.
fn per_source(n: usize) -> [f64; 3] {
    let mut loader = Loader::new(sampler(n));
    let mut epoch = loader.epoch();
    for _ in 0..(3 * n) {
        epoch.next().transpose().unwrap();
    }
    let (take, state) = testing::state_work(|| epoch.state_dict().unwrap());
    let parsed = State::from_json(&state.to_json().unwrap()).unwrap();
    let mut target = Loader::new(sampler(n));
    let (load, ()) = testing::state_work(|| target.load_state_dict(&parsed).unwrap());
    let (again, ()) = testing::state_work(|| target.load_state_dict(&parsed).unwrap());
    let n = n as f64;
    [take as f64 / n, load as f64 / n, again as f64 / n]
}

#[test]
fn state_and_restore_do_a_bounded_amount_of_work_per_source() {
    let small = per_source(1_000);
    let large = per_source(10_000);
    eprintln!("work per source at 1,000 and 10,000 sources: {small:?} {large:?}");
    for (what, (s, l)) in ["state_dict", "load_state_dict", "load again"]
        .iter()
        .zip(small.iter().zip(&large))
    {
        assert!(*s > 1.0, "{what}: the work is counted ({s} per source)");
        // Linear: ten times the sources, ten times the work, give or take
        // the per-call constant spread over 1,000 sources.
        assert!(
            *l <= s * 1.01 + 0.1,
            "{what}: {s:.2} units of work per source at 1,000 sources, {l:.2} at 10,000"
        );
    }
}
