//! Prefetcher: order, exact resume across chunk boundaries, bounds and
//! errors (the scenarios every thread-backed node shares, no deadlocks among
//! them, are in `threaded`). Every test that could hang runs under a watchdog.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::support::{Counting, collect, drain_within_bound, panicked, take, user_error, watchdog};
use nodes_std::{Error, NodeExt, ParallelOptions, Prefetcher, Running, State, testing};

fn started(source: Counting, factor: usize) -> Running<Prefetcher<Counting>> {
    source.prefetch(factor).unwrap().start().unwrap()
}

/// The items a state counts as received: those in the snapshot and the
/// steps after it.
fn received(state: &State) -> u64 {
    let snapshot: u64 = state.child("snapshot").unwrap().get("n").unwrap();
    let steps: u64 = state.get("steps_since_snapshot").unwrap();
    snapshot + steps
}

#[test]
fn output_is_the_source_in_order() {
    watchdog("order", || {
        // Small factors hand over item by item: fewer items keep this quick.
        for (factor, len) in [(1, 100), (2, 100), (3, 100), (16, 500), (5000, 20_000)] {
            let mut run = started(Counting::new(len), factor);
            assert_eq!(collect(&mut run), (0..len).collect::<Vec<_>>());
            assert!(run.next().is_none());
            run.reset(None).unwrap();
            assert_eq!(collect(&mut run), (0..len).collect::<Vec<_>>());
        }
    });
}

#[test]
fn save_load_at_many_cut_points() {
    watchdog("save/load", || {
        for factor in [1, 2, 8] {
            for midpoint in [0, 1, 2, 3, 4, 5, 11, 12, 13] {
                testing::assert_save_load(|| Counting::new(12).prefetch(factor).unwrap(), midpoint);
            }
        }
    });
}

/// Large chunks: cut points inside and at the edges of chunks.
#[test]
fn save_load_inside_large_chunks() {
    watchdog("save/load large", || {
        for midpoint in [0, 511, 512, 513, 1023, 1024, 1500, 2999, 3000] {
            testing::assert_save_load(|| Counting::new(3000).prefetch(4096).unwrap(), midpoint);
        }
    });
}

#[test]
fn save_load_through_parallel_mapper_and_nested_prefetchers() {
    watchdog("nested", || {
        for midpoint in [0, 4, 17, 40] {
            testing::assert_save_load(
                || {
                    Counting::new(40)
                        .prefetch(3)
                        .unwrap()
                        .par_map(
                            |x| Ok(x * 10),
                            ParallelOptions::new(3).snapshot_frequency(4),
                        )
                        .unwrap()
                        .prefetch(5)
                        .unwrap()
                },
                midpoint,
            );
        }
    });
}

#[test]
fn state_counts_only_items_received() {
    watchdog("state", || {
        let pulled = Arc::new(AtomicU64::new(0));
        let mut run = started(Counting::new(5000).counted(&pulled), 100);
        take(&mut run, 10);
        // The reader runs ahead: wait until it has.
        while pulled.load(std::sync::atomic::Ordering::SeqCst) < 60 {
            std::thread::yield_now();
        }
        let state = run.get_state().unwrap();
        assert_eq!(received(&state), 10, "{state}");
        // A fresh node resumes with item 10.
        let mut resumed = Counting::new(5000)
            .prefetch(100)
            .unwrap()
            .start_from(&state)
            .unwrap();
        assert_eq!(take(&mut resumed, 2), [10, 11]);
    });
}

#[test]
fn read_ahead_never_exceeds_the_prefetch_factor() {
    watchdog("bound", || {
        for (factor, len) in [(1, 200), (2, 200), (7, 400), (64, 2000)] {
            let pulled = Arc::new(AtomicU64::new(0));
            let mut run = started(Counting::new(len).counted(&pulled), factor);
            let pauses = (100, Duration::from_micros(300));
            let received = drain_within_bound(&mut run, &pulled, factor, pauses);
            assert_eq!(received, len, "factor {factor}");
        }
    });
}

#[test]
fn source_errors_arrive_after_the_items_before_them() {
    watchdog("errors", || {
        for factor in [1, 4, 100] {
            let mut run = started(Counting::new(50).fail_at(20), factor);
            assert_eq!(take(&mut run, 20), (0..20).collect::<Vec<_>>());
            let err = run.next().unwrap().unwrap_err();
            assert_eq!(user_error(&err), ("Counting", Some(20)));
            // The error is one item: the state stands after it, and the
            // pass goes on.
            let state = run.get_state().unwrap();
            assert_eq!(received(&state), 21);
            assert_eq!(collect(&mut run), (21..50).collect::<Vec<_>>());
            run.reset(Some(&state)).unwrap();
            assert_eq!(collect(&mut run), (21..50).collect::<Vec<_>>());
            run.reset(None).unwrap();
            assert_eq!(take(&mut run, 3), [0, 1, 2]);

            let mut run = started(Counting::new(50).panic_at(5), factor);
            assert_eq!(take(&mut run, 5), [0, 1, 2, 3, 4]);
            let (node, _, message) = panicked(run.next().unwrap().unwrap_err());
            assert_eq!(node, "Prefetcher");
            assert_eq!(message, "source panicked at 5");
            assert!(run.next().is_none());
        }
    });
}

#[test]
fn bad_arguments_are_rejected_at_construction() {
    match Counting::new(3).prefetch(0) {
        Err(Error::InvalidArgument { node, .. }) => assert_eq!(node, "Prefetcher"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn describe_shows_the_source() {
    let node = Counting::new(5).prefetch(2).unwrap();
    assert_eq!(
        nodes_std::Stateful::describe(&node).render_text(),
        "Prefetcher\n  source: Counting(len=5)  [state: snapshot]\n"
    );
    assert!(format!("{node:?}").contains("prefetch_factor: 2"));
}

/// One epoch of `pipeline` through a loader with stats: `len` items come.
fn epoch_stats<N: nodes_std::Node + 'static>(pipeline: N, len: usize) -> nodes_std::Stats {
    let mut loader = nodes_std::Loader::new(pipeline).record_stats();
    assert_eq!(loader.epoch().count(), len);
    loader.stats().unwrap()
}

fn row<'a>(stats: &'a nodes_std::Stats, path: &str, what: &str) -> &'a nodes_std::NodeStats {
    stats
        .get(path)
        .unwrap_or_else(|| panic!("a row for {what}: {stats}"))
}

#[test]
fn stats_report_items_and_blocked_time() {
    watchdog("stats", || {
        let pipeline = Counting::new(200)
            .par_map(
                |x| {
                    std::thread::sleep(Duration::from_micros(50));
                    Ok(x)
                },
                ParallelOptions::new(2),
            )
            .unwrap()
            .prefetch(8)
            .unwrap();
        let stats = epoch_stats(pipeline, 200);
        let prefetch = stats.get("Prefetcher").expect("a Prefetcher row");
        assert_eq!(prefetch.items, 200);
        assert!(prefetch.mean_queue_depth().is_some());
        // The mapper runs on the reader thread; its context is forked from
        // the loader's, so it shows under the prefetcher.
        let mapper = row(
            &stats,
            "Prefetcher/ParallelMapper",
            "the mapper on the reader thread",
        );
        assert_eq!(mapper.items, 200, "{stats}");
        assert!(prefetch.blocked > Duration::ZERO, "{stats}");

        // Two levels of threads: a map on the workers of a par_map on the
        // reader thread of a prefetch.
        let pipeline = nodes_std::IterableWrapper::new(0..300u64)
            .map(|x| x + 1)
            .par_map(Ok, ParallelOptions::new(2))
            .unwrap()
            .prefetch(8)
            .unwrap();
        let stats = epoch_stats(pipeline, 300);
        let inner = row(
            &stats,
            "Prefetcher/ParallelMapper/Mapper",
            "the map on the workers",
        );
        assert_eq!(inner.items, 300, "{stats}");

        let stats = epoch_stats(
            Counting::new(50)
                .par_map(Ok, ParallelOptions::new(2))
                .unwrap(),
            50,
        );
        assert_eq!(stats.get("ParallelMapper").expect("a row").items, 50);
    });
}

/// Nothing is sized by the read-ahead: any factor works on a short source.
#[test]
fn any_prefetch_factor_works_on_a_short_source() {
    watchdog("huge factors", || {
        for factor in [1 << 40, usize::MAX] {
            let got = collect(&mut started(Counting::new(3), factor));
            assert_eq!(got, [0, 1, 2], "prefetch({factor})");
        }
    });
}
