//! `Prefetcher`'s reader stepping aside: the source runs on the consumer's
//! thread while that is faster (the opt-in `inline_when_faster`), and comes
//! back to a reader later. The switch must keep every item, the order, and exact
//! states on either side of it. `switch_every(n)` forces a switch every `n`
//! items, so that these tests reach it on any machine; the random
//! pipelines of `exactly_once` draw it too.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use nodes_std::prelude::*;
use nodes_std::testing::check_save_load;
use nodes_std::{MultiNodeWeightedSampler, Prefetcher, StopCriteria};

/// A pipeline with state in every layer: two shuffled datasets mixed by a
/// seeded weighted draw, so that an item lost, repeated or reordered across
/// a switch shows, and so does a restore into the wrong epoch.
fn mixed(len: u64) -> impl Node<Item = u64> + 'static {
    let numbers = |from: u64, seed: u64| {
        IterableWrapper::new((from..from + len).collect::<Vec<_>>())
            .shuffle(4, seed)
            .unwrap()
    };
    MultiNodeWeightedSampler::new(
        [("low", numbers(0, 1)), ("high", numbers(1000, 2))],
        [("low", 2.0), ("high", 1.0)],
    )
    .unwrap()
    .stop_criteria(StopCriteria::AllDatasetsExhausted)
    .seed(7)
}

/// `node` with its reader pinned (`None`) or switching every `n` items.
fn reader<N>(node: Prefetcher<N>, every: Option<u64>) -> Box<dyn Node<Item = N::Item>>
where
    N: Node + 'static,
    N::Item: Send + 'static,
{
    match every {
        None => node.boxed(),
        Some(n) => node.switch_every(n).boxed(),
    }
}

/// The prefetching pipeline, with the reader pinned (`None`) or switching
/// every `n` items.
fn prefetched(len: u64, factor: usize, every: Option<u64>) -> Box<dyn Node<Item = u64>> {
    reader(mixed(len).prefetch(factor).unwrap(), every)
}

/// Three whole passes, one after another.
fn three_epochs(node: Box<dyn Node<Item = u64>>) -> Vec<Vec<u64>> {
    let mut run = node.start().unwrap();
    let mut epochs = Vec::new();
    for epoch in 0..3 {
        if epoch > 0 {
            run.reset(None).unwrap();
        }
        epochs.push(run.by_ref().collect::<Result<Vec<_>>>().unwrap());
    }
    epochs
}

const EVERY: [u64; 5] = [1, 2, 3, 5, 16];
const FACTORS: [usize; 3] = [1, 2, 16];

#[test]
fn switching_hands_out_every_item_once_in_order() {
    let pinned = three_epochs(prefetched(20, 2, None));
    assert_eq!(pinned[0].len(), 40);
    assert_ne!(
        pinned[0], pinned[1],
        "epochs differ, so a mixed-up epoch shows"
    );
    for every in EVERY {
        for factor in FACTORS {
            assert_eq!(
                three_epochs(prefetched(20, factor, Some(every))),
                pinned,
                "prefetch({factor}), switching every {every} items"
            );
        }
    }
}

#[test]
fn a_state_on_either_side_of_a_switch_resumes_exactly() {
    for every in EVERY {
        for factor in FACTORS {
            for cut in 0..=41 {
                check_save_load(|| prefetched(20, factor, Some(every)), cut).unwrap_or_else(|e| {
                    panic!("prefetch({factor}), switching every {every} items, cut at {cut}: {e}")
                });
            }
        }
    }
}

/// A state taken while switching restores into a pipeline that switches
/// elsewhere, or not at all: the state does not depend on where the source
/// ran.
#[test]
fn a_state_restores_whatever_the_reader_of_either_side() {
    let pinned = three_epochs(prefetched(12, 2, None));
    let whole: Vec<u64> = pinned.concat();
    let readers = [None, Some(1), Some(3)];
    for saved_with in readers {
        for restored_with in readers {
            for cut in 0..=24 {
                let mut run = prefetched(12, 2, saved_with).start().unwrap();
                let head: Vec<u64> = run.by_ref().take(cut).collect::<Result<_>>().unwrap();
                let state = run.get_state().unwrap();
                let mut resumed = prefetched(12, 2, restored_with).start_from(&state).unwrap();
                let mut got = head;
                got.extend(resumed.by_ref().collect::<Result<Vec<_>>>().unwrap());
                resumed.reset(None).unwrap();
                got.extend(resumed.by_ref().collect::<Result<Vec<_>>>().unwrap());
                assert_eq!(
                    got,
                    whole[..got.len()],
                    "saved with {saved_with:?}, restored with {restored_with:?}, cut at {cut}"
                );
                assert_eq!(got.len(), 48, "the rest of epoch 0, then epoch 1");
            }
        }
    }
}

/// A pass the consumer stops early, on the reader's side or inline (where
/// no read-ahead needs putting back), starts the next pass as the pinned
/// reader does.
#[test]
fn a_pass_stopped_early_starts_the_same_next_pass() {
    let expected = |stop: usize| {
        let mut run = prefetched(12, 3, None).start().unwrap();
        run.by_ref().take(stop).for_each(drop);
        run.reset(None).unwrap();
        run.collect::<Result<Vec<_>>>().unwrap()
    };
    for stop in 0..=24 {
        let want = expected(stop);
        for every in EVERY {
            let mut run = prefetched(12, 3, Some(every)).start().unwrap();
            run.by_ref().take(stop).for_each(drop);
            run.reset(None).unwrap();
            let got: Vec<u64> = run.collect::<Result<_>>().unwrap();
            assert_eq!(got, want, "stopped after {stop}, switching every {every}");
        }
    }
}

/// The same with a source whose next pass depends on how far the last one
/// got: an endless cycle over a shuffle, cut by a header. Each wrap-around
/// moves the shuffle to its next epoch, so putting the source back to the
/// wrong place before the next pass (the read-ahead's position, or where
/// the reader last took over) changes that pass.
#[test]
fn a_pass_stopped_early_after_a_wrap_around_starts_the_same_next_pass() {
    let build = |every: Option<u64>| {
        let node = IterableWrapper::new(0..5u64)
            .shuffle(3, 9)
            .unwrap()
            .cycle()
            .header(40)
            .prefetch(3)
            .unwrap();
        reader(node, every)
    };
    let run_with = |every: Option<u64>, stop: usize| {
        let mut run = build(every).start().unwrap();
        run.by_ref().take(stop).for_each(drop);
        run.reset(None).unwrap();
        run.collect::<Result<Vec<_>>>().unwrap()
    };
    let passes: HashSet<Vec<u64>> = (0..=40).map(|stop| run_with(None, stop)).collect();
    assert!(passes.len() > 3, "where a pass stops changes the next one");
    for stop in 0..=40 {
        let want = run_with(None, stop);
        for every in EVERY {
            assert_eq!(
                run_with(Some(every), stop),
                want,
                "stopped after {stop}, switching every {every}"
            );
        }
    }
}

/// Records the thread each item was made on.
fn recorded(
    len: u64,
    threads: &Arc<Mutex<Vec<ThreadId>>>,
    work: u64,
) -> impl Node<Item = u64> + 'static {
    let threads = Arc::clone(threads);
    IterableWrapper::new(0..len).map(move |x| {
        threads.lock().unwrap().push(std::thread::current().id());
        // Load only: a source that takes a while per item, so the consumer
        // waits; a fixed amount of work, not a time, so no clock is read.
        let mut acc = x;
        for _ in 0..work {
            acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        std::hint::black_box(acc);
        x
    })
}

#[test]
fn the_default_reader_never_runs_the_source_on_the_consumers_thread() {
    let threads = Arc::new(Mutex::new(Vec::new()));
    let node = recorded(2_000, &threads, 20_000).prefetch(2).unwrap();
    let got: Vec<u64> = node.start().unwrap().collect::<Result<_>>().unwrap();
    assert_eq!(got, (0..2_000).collect::<Vec<_>>());
    let me = std::thread::current().id();
    assert!(threads.lock().unwrap().iter().all(|&t| t != me));
}
