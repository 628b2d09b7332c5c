//! Fuzz target: arbitrary bytes as a checkpoint.
//!
//! The first byte chooses a pipeline (of stock nodes, threaded ones
//! included) and how the state is offered; the rest is parsed with
//! `State::from_json` and loaded with `Loader::load_state_dict` (shape check
//! on or off) or, as a root state, with `Running::reset`. Then a few items
//! are pulled. The properties: no panic (a panic inside a worker thread
//! comes back as `Error::Panicked`, which is a failure here too), a rejected
//! state is a `BadState` error naming a path, and a rejected state leaves
//! the pipeline usable. Hangs are caught by libFuzzer's `-timeout`.
//!
//! Run from `fuzz/` (see README, "Reliability suite"):
//! `cargo +nightly fuzz run load_state -- -dict=load_state.dict -timeout=10`
#![no_main]

use libfuzzer_sys::fuzz_target;
use nodes_std::prelude::*;
use nodes_std::{MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, ParallelOptions, StopCriteria};

type Pipeline = Box<dyn Node<Item = u64>>;

/// The pipelines a state can be offered to.
fn pipeline(pick: u8) -> Pipeline {
    let numbers = || IterableWrapper::new((0..20u64).collect::<Vec<_>>());
    match pick % 5 {
        0 => numbers()
            .map(|x| x + 1)
            .filter(|x| x % 5 != 0)
            .batch(3)
            .expect("batch size > 0")
            .unbatch()
            .header(15)
            .shuffle(4, 1)
            .expect("buffer > 0")
            .boxed(),
        1 => MapStyleWrapper::shuffled((0..10u64).collect::<Vec<_>>(), 7)
            .cycle_n(2)
            .expect("cycles > 0")
            .shard(0, 2)
            .expect("rank < world")
            .zip(IterableWrapper::seekable(0..50u64))
            .map(|(a, b)| a * 100 + b)
            .boxed(),
        2 => {
            let sharded =
                ShardedSampler::new(RandomSampler::new(9, 3), 1, 2, Remainder::Pad).expect("valid shard");
            MultiNodeWeightedSampler::new(
                [
                    ("a", numbers().boxed()),
                    ("b", SamplerWrapper::new(sharded).map(|i| i as u64).boxed()),
                ],
                [("a", 1.0), ("b", 2.0)],
            )
            .expect("valid weights")
            .seed(5)
            .tagged()
            .map(|t| t.item)
            .boxed()
        }
        3 => MultiNodeRoundRobinSampler::new([
            ("a", numbers().cycle().header(30).boxed()),
            ("b", numbers().shuffle(3, 2).expect("buffer > 0").boxed()),
        ])
        .expect("distinct names")
        .stop_criteria(StopCriteria::AllDatasetsExhausted)
        .boxed(),
        _ => numbers()
            .try_map(|x| Ok::<u64, std::io::Error>(x * 3))
            .prefetch(4)
            .expect("factor > 0")
            .par_map(
                Ok,
                ParallelOptions::new(2).in_order(false).snapshot_frequency(3),
            )
            .expect("valid options")
            .boxed(),
    }
}

/// Pulls up to `n` items; an item error is fine, a panic is not.
fn pull<I: Iterator<Item = Result<u64>>>(items: I, n: usize) {
    for item in items.take(n) {
        if let Err(err) = item {
            assert!(!matches!(err, Error::Panicked { .. }), "{err}");
        }
    }
}

fn check_rejection(err: &Error) {
    let path = err.state_path();
    assert!(
        path.is_some_and(|p| p.starts_with('/')),
        "a rejected state must name its path: {err}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let state = match State::from_json(text) {
        Ok(state) => state,
        Err(err) => {
            assert_eq!(err.state_path(), Some("/"), "{err}");
            return;
        }
    };
    let check_shape = mode & 0x08 == 0;
    let as_root = mode & 0x10 != 0;
    let mid_epoch = mode & 0x20 != 0;

    if as_root {
        let Ok(mut run) = pipeline(mode).start() else {
            return;
        };
        if mid_epoch {
            pull(run.by_ref(), 3);
        }
        if let Err(err) = run.reset(Some(&state)) {
            check_rejection(&err);
        }
        pull(run, 64);
        return;
    }

    let mut loader = Loader::new(pipeline(mode)).check_shape(check_shape);
    if mid_epoch {
        pull(loader.epoch(), 3);
    }
    if let Err(err) = loader.load_state_dict(&state) {
        check_rejection(&err);
    }
    pull(loader.epoch(), 64);
    pull(loader.epoch(), 8);
});
