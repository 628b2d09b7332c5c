//! ParallelMapper: ordering, exact resume (in and out of order), errors,
//! bounds, arguments, and no deadlocks (with the scenarios every thread-backed
//! node shares in `threaded`). Every test that could hang runs under a
//! watchdog.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::{
    Counting, Gate, assert_each_once, collect, drain_within_bound, jitter, panicked, take,
    user_error, watchdog,
};
use nodes_std::{Error, NodeExt, ParallelMapper, ParallelOptions, Result, State, testing};

#[test]
fn in_order_output_equals_the_serial_map() {
    watchdog("in order", || {
        let want: Vec<u64> = (0..60).map(|x| x * 3 + 1).collect();
        for workers in [0, 1, 2, 4, 8] {
            for max_concurrent in [None, Some(1), Some(3), Some(64)] {
                let mut options = ParallelOptions::new(workers);
                if let Some(m) = max_concurrent {
                    options = options.max_concurrent(m);
                }
                let node = Counting::new(60)
                    .par_map(
                        |x| {
                            jitter(x);
                            Ok(x * 3 + 1)
                        },
                        options,
                    )
                    .unwrap();
                let mut run = node.start().unwrap();
                assert_eq!(
                    collect(&mut run),
                    want,
                    "{workers} workers, {max_concurrent:?}"
                );
                // End is idempotent, and a second pass is identical.
                assert!(run.next().is_none());
                run.reset(None).unwrap();
                assert_eq!(collect(&mut run), want, "second pass");
            }
        }
    });
}

#[test]
fn out_of_order_yields_every_item_once_as_they_complete() {
    watchdog("out of order", || {
        let gate = Gate::default();
        let g = gate.clone();
        let node = Counting::new(200)
            .par_map(
                move |x| {
                    if x == 0 {
                        g.wait();
                    }
                    jitter(x);
                    Ok(x)
                },
                ParallelOptions::new(4).in_order(false),
            )
            .unwrap();
        let mut run = node.start().unwrap();
        // Item 0 is held back, so the first items are others: completion order.
        let mut items = take(&mut run, 3);
        assert!(!items.contains(&0));
        gate.open();
        items.extend(collect(&mut run));
        assert_each_once(items, 200);
    });
}

#[test]
fn inline_mode_maps_on_the_callers_thread() {
    let caller = std::thread::current().id();
    let node = Counting::new(5)
        .par_map(
            move |x| {
                assert_eq!(std::thread::current().id(), caller);
                Ok(x + 1)
            },
            ParallelOptions::new(0),
        )
        .unwrap();
    let mut run = node.start().unwrap();
    assert_eq!(collect(&mut run), [1, 2, 3, 4, 5]);
}

#[test]
fn save_load_in_order_at_many_cut_points_and_snapshot_frequencies() {
    watchdog("save/load", || {
        for workers in [0, 1, 3] {
            for freq in [1, 7, 100] {
                for midpoint in [0, 1, 6, 7, 8, 15, 16, 17] {
                    testing::assert_save_load(
                        || {
                            Counting::new(16)
                                .par_map(
                                    |x| Ok(x * 2),
                                    ParallelOptions::new(workers).snapshot_frequency(freq),
                                )
                                .unwrap()
                        },
                        midpoint,
                    );
                }
            }
        }
    });
}

#[test]
fn save_load_with_slow_items_and_small_bounds() {
    watchdog("save/load slow", || {
        for (workers, max_concurrent, freq) in [(4, 2, 1), (2, 8, 3), (8, 1, 5)] {
            for midpoint in [0, 5, 11, 12] {
                testing::assert_save_load(
                    || {
                        jittery(
                            Counting::new(12),
                            ParallelOptions::new(workers)
                                .max_concurrent(max_concurrent)
                                .snapshot_frequency(freq),
                        )
                    },
                    midpoint,
                );
            }
        }
    });
}

/// `source` through a `par_map` whose function jitters.
fn jittery(source: Counting, options: ParallelOptions) -> ParallelMapper<Counting, u64> {
    let f = |x| (jitter(x), Ok(x)).1;
    source.par_map(f, options).unwrap()
}

fn gated(gate: &Gate, options: ParallelOptions) -> ParallelMapper<Counting, u64> {
    let gate = gate.clone();
    Counting::new(40)
        .par_map(
            move |x| {
                if x == 0 {
                    gate.wait();
                }
                Ok(x)
            },
            options,
        )
        .unwrap()
}

/// The restore is exact out of order: while item 0 is held back, the state
/// records the items delivered beyond it, and a restored run yields exactly
/// the others, each once — into an out-of-order, an in-order or an inline node.
#[test]
fn out_of_order_resume_is_exact() {
    watchdog("out-of-order resume", || {
        for freq in [1, 3, 100] {
            for cut in [1, 2, 5, 10, 20, 39] {
                let gate = Gate::default();
                let options = ParallelOptions::new(4)
                    .in_order(false)
                    .max_concurrent(8)
                    .snapshot_frequency(freq);
                let mut run = gated(&gate, options).start().unwrap();
                let first = take(&mut run, cut);
                assert!(!first.contains(&0));
                let state = run.get_state().unwrap();
                let ahead: Vec<u64> = state.get("delivered_ahead").unwrap();
                assert_eq!(ahead.len(), cut, "{state}");
                gate.open();
                drop(run);

                let open = Gate::default();
                open.open();
                let targets = [
                    options,
                    ParallelOptions::new(3).snapshot_frequency(freq),
                    ParallelOptions::new(0),
                ];
                for (i, target) in targets.into_iter().enumerate() {
                    let json = state.to_json().unwrap();
                    let state = State::from_json(&json).unwrap();
                    let mut run = gated(&open, target).start_from(&state).unwrap();
                    let rest = collect(&mut run);
                    if i > 0 {
                        // In order: exactly the undelivered items, ascending.
                        let want: Vec<u64> = (0..40).filter(|x| !first.contains(x)).collect();
                        assert_eq!(rest, want, "freq {freq}, cut {cut}, target {i}");
                    }
                    let mut all = first.clone();
                    all.extend(rest);
                    assert_each_once(all, 40);
                }
            }
        }
    });
}

/// Chained restores at arbitrary points with real out-of-order completion:
/// take some, save, restore into a fresh node (and save right away), take
/// some more, save, restore again, drain. Every item exactly once.
#[test]
fn out_of_order_chained_restores_lose_and_repeat_nothing() {
    watchdog("chained restores", || {
        let build = |freq: usize| {
            Counting::new(64)
                .par_map(
                    |x| {
                        jitter(x * 7 + 3);
                        Ok(x)
                    },
                    ParallelOptions::new(5)
                        .in_order(false)
                        .max_concurrent(10)
                        .snapshot_frequency(freq),
                )
                .unwrap()
        };
        for freq in [1, 2, 7, 1000] {
            for (a, b) in [(0, 0), (1, 1), (3, 10), (17, 5), (40, 23), (63, 1), (64, 0)] {
                let mut got = Vec::new();
                let mut run = build(freq).start().unwrap();
                got.extend(take(&mut run, a));
                let s1 = run.get_state().unwrap();
                drop(run);
                let run = build(freq).start_from(&s1).unwrap();
                let again = run.get_state().unwrap();
                let mut run = build(freq).start_from(&again).unwrap();
                got.extend(take(&mut run, b));
                let s2 = run.get_state().unwrap();
                // The same state restored twice gives the same rest (as a set).
                let mut rest1 = collect(&mut build(freq).start_from(&s2).unwrap());
                let mut rest2 = collect(&mut build(freq).start_from(&s2).unwrap());
                rest1.sort_unstable();
                rest2.sort_unstable();
                assert_eq!(rest1, rest2);
                got.extend(rest1);
                assert_each_once(got, 64);
            }
        }
    });
}

#[test]
fn state_reflects_only_what_the_consumer_received() {
    watchdog("state", || {
        // Workers race ahead of a consumer that has taken 3 items: wait
        // until they filled the window.
        let pulled = Arc::new(AtomicU64::new(0));
        let node = Counting::new(100)
            .counted(&pulled)
            .par_map(
                Ok,
                ParallelOptions::new(4)
                    .max_concurrent(16)
                    .snapshot_frequency(1),
            )
            .unwrap();
        let mut run = node.start().unwrap();
        assert_eq!(take(&mut run, 3), [0, 1, 2]);
        while pulled.load(Ordering::SeqCst) < 16 {
            std::thread::yield_now();
        }
        let state = run.get_state().unwrap();
        assert_eq!(state.child("snapshot").unwrap().get::<u64>("n").unwrap(), 3);
        assert_eq!(state.get::<u64>("snapshot_index").unwrap(), 3);
        assert_eq!(state.get::<u64>("steps_since_snapshot").unwrap(), 0);

        let node = Counting::new(100)
            .par_map(Ok, ParallelOptions::new(4).snapshot_frequency(7))
            .unwrap();
        let mut run = node.start().unwrap();
        take(&mut run, 10);
        let state = run.get_state().unwrap();
        assert_eq!(state.child("snapshot").unwrap().get::<u64>("n").unwrap(), 7);
        assert_eq!(state.get::<u64>("steps_since_snapshot").unwrap(), 3);
    });
}

#[test]
fn in_flight_items_never_exceed_max_concurrent() {
    watchdog("bound", || {
        for in_order in [true, false] {
            let pulled = Arc::new(AtomicU64::new(0));
            let max_concurrent = 5;
            let node = Counting::new(300)
                .counted(&pulled)
                .par_map(
                    Ok,
                    ParallelOptions::new(8)
                        .in_order(in_order)
                        .max_concurrent(max_concurrent),
                )
                .unwrap();
            let mut run = node.start().unwrap();
            let pauses = (10, Duration::from_micros(200));
            let received = drain_within_bound(&mut run, &pulled, max_concurrent, pauses);
            assert_eq!(received, 300, "in order {in_order}");
        }
    });
}

#[track_caller]
fn expect_user_error(err: &Error, index: u64, text: &str) {
    assert_eq!(user_error(err), ("ParallelMapper", Some(index)));
    let source = std::error::Error::source(err).expect("the user's error");
    assert!(source.to_string().contains(text), "{source}");
}

#[test]
fn user_error_arrives_at_its_position_then_the_pass_ends_until_reset() {
    watchdog("user error", || {
        let fail = Arc::new(AtomicBool::new(true));
        let f2 = Arc::clone(&fail);
        let node = Counting::new(20)
            .par_map(
                move |x| {
                    if x < 5 {
                        // Load, not order: earlier items tend to finish
                        // last, and the assertions hold whatever the order.
                        std::thread::sleep(Duration::from_millis(5 - x));
                    }
                    if x == 5 && f2.load(Ordering::SeqCst) {
                        return Err(format!("bad item {x}").into());
                    }
                    Ok(x)
                },
                ParallelOptions::new(4),
            )
            .unwrap();
        let mut run = node.start().unwrap();
        assert_eq!(take(&mut run, 5), [0, 1, 2, 3, 4]);
        let err = run.next().unwrap().unwrap_err();
        expect_user_error(&err, 5, "bad item 5");
        assert!(err.to_string().contains("at item 5"), "{err}");
        // The error is one item: the pass goes on, and a state taken after
        // it resumes after it.
        let state = run.get_state().unwrap();
        assert_eq!(take(&mut run, 3), [6, 7, 8]);
        fail.store(false, Ordering::SeqCst);
        run.reset(Some(&state)).unwrap();
        assert_eq!(collect(&mut run), (6..20).collect::<Vec<_>>());
        run.reset(None).unwrap();
        assert_eq!(collect(&mut run), (0..20).collect::<Vec<_>>());
    });
}

#[test]
fn panicking_function_becomes_an_error_with_message_and_index() {
    watchdog("panic", || {
        for workers in [0, 3] {
            let node = Counting::new(10)
                .par_map(
                    |x| {
                        if x == 6 {
                            panic!("boom at {x}");
                        }
                        Ok(x)
                    },
                    ParallelOptions::new(workers),
                )
                .unwrap();
            let mut run = node.start().unwrap();
            assert_eq!(take(&mut run, 6), [0, 1, 2, 3, 4, 5]);
            let (node, index, message) = panicked(run.next().unwrap().unwrap_err());
            assert_eq!((node.as_str(), index), ("ParallelMapper", Some(6)));
            assert_eq!(message, "boom at 6");
            // A panic in the function is one item, with or without workers.
            assert_eq!(collect(&mut run), [7, 8, 9]);
            // And the node works again after a reset.
            run.reset(None).unwrap();
            assert_eq!(take(&mut run, 3), [0, 1, 2]);
        }
    });
}

#[test]
fn source_errors_and_panics_arrive_in_position() {
    watchdog("source errors", || {
        for workers in [1, 4] {
            let node = jittery(Counting::new(20).fail_at(7), ParallelOptions::new(workers));
            let mut run = node.start().unwrap();
            assert_eq!(take(&mut run, 7), (0..7).collect::<Vec<_>>());
            // The source's own error, unchanged.
            let err = run.next().unwrap().unwrap_err();
            assert_eq!(user_error(&err), ("Counting", Some(7)));
            // One item: the pass goes on.
            assert_eq!(collect(&mut run), (8..20).collect::<Vec<_>>());

            let node = Counting::new(20)
                .panic_at(3)
                .par_map(Ok, ParallelOptions::new(workers))
                .unwrap();
            let mut run = node.start().unwrap();
            assert_eq!(take(&mut run, 3), [0, 1, 2]);
            let (_, index, message) = panicked(run.next().unwrap().unwrap_err());
            assert_eq!(index, Some(3));
            assert_eq!(message, "source panicked at 3");
            assert!(run.next().is_none());
            run.reset(None).unwrap();
            assert_eq!(take(&mut run, 3), [0, 1, 2]);
        }
    });
}

#[test]
fn out_of_order_error_reaches_the_consumer_and_resume_stays_exact() {
    watchdog("out-of-order error", || {
        let fail = Arc::new(AtomicBool::new(true));
        let build = |fail: Arc<AtomicBool>| {
            Counting::new(50)
                .par_map(
                    move |x| {
                        jitter(x);
                        if x == 20 && fail.load(Ordering::SeqCst) {
                            return Err("item 20 is bad".into());
                        }
                        Ok(x)
                    },
                    ParallelOptions::new(4).in_order(false),
                )
                .unwrap()
        };
        let mut run = build(Arc::clone(&fail)).start().unwrap();
        let mut got = Vec::new();
        let err = loop {
            match run.next().expect("the error comes before the end") {
                Ok(x) => got.push(x),
                Err(e) => break e,
            }
        };
        expect_user_error(&err, 20, "item 20 is bad");
        // A state taken after the error resumes after it: the failed item
        // is not retried, and the rest comes exactly once.
        let state = run.get_state().unwrap();
        fail.store(false, Ordering::SeqCst);
        got.extend(collect(&mut build(fail).start_from(&state).unwrap()));
        got.push(20);
        assert_each_once(got, 50);
    });
}

#[test]
fn a_failing_policy_stops_the_other_workers() {
    watchdog("error stops workers", || {
        let pulled = Arc::new(AtomicU64::new(0));
        let node = Counting::new(10_000)
            .counted(&pulled)
            .par_map(
                |x| {
                    std::thread::sleep(Duration::from_micros(200));
                    if x == 30 {
                        return Err("stop here".into());
                    }
                    Ok(x)
                },
                ParallelOptions::new(4)
                    .max_concurrent(8)
                    .on_error(nodes_std::ErrorPolicy::Fail),
            )
            .unwrap();
        let mut run = node.start().unwrap();
        let err = run.find_map(|r| r.err()).unwrap();
        assert!(run.next().is_none(), "the policy ends the pass");
        expect_user_error(&err, 30, "stop here");
        // The workers were joined before the error was returned.
        let after = pulled.load(Ordering::SeqCst);
        assert!(after <= 31 + 8, "{after} items pulled");
        // Time for a worker that was not joined to pull more: the count
        // must not move, however long this takes.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(pulled.load(Ordering::SeqCst), after);
    });
}

#[test]
fn bad_arguments_are_rejected_at_construction() {
    let bad = [
        ParallelOptions::new(2).max_concurrent(0),
        ParallelOptions::new(0).max_concurrent(0),
        ParallelOptions::new(2).snapshot_frequency(0),
        ParallelOptions::new(ParallelOptions::MAX_WORKERS + 1),
    ];
    for options in bad {
        match Counting::new(3).par_map(Ok, options) {
            Err(Error::InvalidArgument { node, message }) => {
                assert_eq!(node, "ParallelMapper");
                assert!(!message.is_empty());
            }
            other => panic!("{options:?} accepted: {other:?}"),
        }
    }
    // More workers than permits is fine: the extra workers wait.
    let node = Counting::new(5)
        .par_map(Ok, ParallelOptions::new(8).max_concurrent(1))
        .unwrap();
    assert_eq!(collect(&mut node.start().unwrap()), [0, 1, 2, 3, 4]);
}

/// A rejected state leaves the run where it stood (the bad states every
/// thread-backed node refuses are in `threaded`); a state claiming items past
/// the end surfaces as an error, not a hang.
#[test]
fn a_state_past_the_end_is_an_error_not_a_hang() {
    watchdog("a state past the end", || {
        let node = Counting::new(10)
            .par_map(Ok, ParallelOptions::new(2))
            .unwrap();
        let mut run = node.start().unwrap();
        assert_eq!(take(&mut run, 2), [0, 1]);
        let mut beyond_end = run.get_state().unwrap();
        beyond_end
            .insert("delivered_ahead", vec![3u64, 30])
            .unwrap();
        assert!(run.reset(Some(&State::new())).is_err());
        let before: u64 = run.get_state().unwrap().get("snapshot_index").unwrap();
        assert_eq!(run.next().unwrap().unwrap(), before);
        run.reset(Some(&beyond_end)).unwrap();
        let items: Vec<Result<u64>> = run.by_ref().collect();
        assert!(items.last().unwrap().as_ref().unwrap_err().is_bad_state());
    });
}

#[test]
fn describe_shows_order_and_source() {
    let node = Counting::new(5)
        .par_map(Ok, ParallelOptions::new(2).in_order(false))
        .unwrap();
    let d = nodes_std::Stateful::describe(&node);
    assert_eq!(
        d.render_text(),
        "ParallelMapper(in_order=false)\n  source: Counting(len=5)  [state: snapshot]\n"
    );
    let debug = format!("{node:?}");
    assert!(debug.contains("num_workers: 2"), "{debug}");
}

// ---- No deadlocks: every scenario under the watchdog. ----

#[test]
fn no_deadlock_across_loader_epochs_with_early_stops() {
    watchdog("loader epochs", || {
        let node = jittery(Counting::new(50), ParallelOptions::new(3));
        let mut loader = nodes_std::Loader::new(node);
        for epoch in 0..6 {
            let got: Vec<u64> = loader.epoch().take(epoch * 7).map(|r| r.unwrap()).collect();
            assert_eq!(got, (0..(epoch as u64 * 7).min(50)).collect::<Vec<_>>());
        }
    });
}

/// A delay that varies by item and call, so that out-of-order workers finish
/// in a different order on every run.
fn wobble(x: u64) {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let micros = (x.wrapping_mul(7919) ^ n.wrapping_mul(104_729)) % 300;
    std::thread::sleep(Duration::from_micros(micros));
}

fn out_of_order(workers: usize) -> ParallelOptions {
    ParallelOptions::new(workers).in_order(false)
}

/// `0..120` through a `par_map` whose function wobbles.
fn wobbly(options: ParallelOptions) -> ParallelMapper<Counting, u64> {
    let f = |x| (wobble(x), Ok(x)).1;
    Counting::new(120).par_map(f, options).unwrap()
}

/// Reads `cut` items through a Loader, saves, restores into a fresh
/// pipeline, reads the rest of the epoch; returns everything read.
fn cut_and_resume<N: nodes_std::Node>(build: impl Fn() -> N, cut: usize) -> Vec<N::Item> {
    let mut loader = nodes_std::Loader::new(build());
    let mut epoch = loader.epoch();
    let mut got: Vec<N::Item> = (0..cut)
        .map_while(|_| epoch.next().map(|r| r.expect("no error expected")))
        .collect();
    let json = epoch.state_dict().unwrap().to_json().unwrap();
    drop(loader);
    let mut resumed = nodes_std::Loader::new(build());
    resumed
        .load_state_dict(&State::from_json(&json).unwrap())
        .unwrap();
    got.extend(resumed.epoch().map(|r| r.expect("no error expected")));
    got
}

/// Issue 11's reproductions: parents that used to replay an out-of-order
/// `par_map` (a read-ahead, an in-order `par_map` snapshotting every few
/// items, another out-of-order `par_map`) now resume exactly: they record
/// its position per item instead of replaying it.
#[test]
fn replaying_parents_over_an_out_of_order_map_resume_exactly() {
    watchdog("replaying parents over out-of-order maps", || {
        type Build = Box<dyn Fn() -> Box<dyn nodes_std::Node<Item = Vec<u64>>>>;
        let shapes: Vec<(&str, Build)> = vec![
            (
                "par_map(ooo).batch(4).prefetch(64)",
                Box::new(|| {
                    let mapped = wobbly(out_of_order(4)).batch(4).unwrap();
                    mapped.prefetch(64).unwrap().boxed()
                }),
            ),
            (
                "par_map(ooo).prefetch(1024)",
                Box::new(|| {
                    let mapped = wobbly(out_of_order(3)).prefetch(1024).unwrap();
                    mapped.map(|x| vec![x]).boxed()
                }),
            ),
            (
                "par_map(ooo) under par_map(in order, snapshot_frequency 7)",
                Box::new(|| {
                    let options = ParallelOptions::new(3).snapshot_frequency(7);
                    let f = |x| Ok(vec![x]);
                    wobbly(out_of_order(2)).par_map(f, options).unwrap().boxed()
                }),
            ),
            (
                "par_map(ooo) under par_map(ooo)",
                Box::new(|| {
                    let options = out_of_order(3).snapshot_frequency(5);
                    let f = |x| (wobble(x), Ok(vec![x])).1;
                    wobbly(out_of_order(2)).par_map(f, options).unwrap().boxed()
                }),
            ),
        ];
        for (what, build) in &shapes {
            let uninterrupted: Vec<u64> =
                build().start().unwrap().flat_map(Result::unwrap).collect();
            assert_each_once(uninterrupted, 120);
            // A cut at the end resumes into the next epoch, which is whole:
            // so the last cut is one before the end.
            let len = build().start().unwrap().count();
            let cuts = [0, 1, 5, 17, 29, 59, len / 2, len - 2, len - 1];
            for cut in cuts.into_iter().filter(|&c| c < len) {
                let mut got: Vec<u64> = cut_and_resume(build, cut).into_iter().flatten().collect();
                got.sort_unstable();
                assert_eq!(got, (0..120).collect::<Vec<_>>(), "{what}, cut at {cut}");
            }
        }
    });
}

/// One error semantics: an `Err` is one item in every mode, so the Ok items
/// (and where the errors fall, in order) are the same for every worker
/// count, with or without a read-ahead on top.
#[test]
fn the_same_items_and_errors_for_every_worker_count() {
    watchdog("errors across worker counts", || {
        let bad = |x: u64| x % 9 == 4;
        let run = |workers: usize, prefetch: bool| -> Vec<std::result::Result<u64, String>> {
            let mapped = Counting::new(60)
                .fail_at(30)
                .par_map(
                    move |x| {
                        wobble(x);
                        if bad(x) {
                            Err(format!("bad {x}").into())
                        } else {
                            Ok(x)
                        }
                    },
                    ParallelOptions::new(workers),
                )
                .unwrap();
            let node = if prefetch {
                mapped.prefetch(3).unwrap().boxed()
            } else {
                mapped.boxed()
            };
            node.start()
                .unwrap()
                .map(|r| r.map_err(|e| e.to_string()))
                .collect()
        };
        let reference = run(0, false);
        assert_eq!(reference.len(), 60, "every item, errors included");
        assert_eq!(reference.iter().filter(|r| r.is_err()).count(), 8);
        for workers in [0, 1, 2, 4] {
            for prefetch in [false, true] {
                assert_eq!(
                    run(workers, prefetch),
                    reference,
                    "{workers} workers, prefetch {prefetch}"
                );
            }
        }
    });
}

/// The skip budget is part of the state: a resume neither forgets the
/// records already skipped nor counts them twice.
#[test]
fn the_skip_budget_survives_a_restore() {
    watchdog("skip budget", || {
        for workers in [0, 3] {
            let build = || {
                Counting::new(40)
                    .par_map(
                        |x| {
                            if x % 10 == 3 {
                                Err("bad".into())
                            } else {
                                Ok(x)
                            }
                        },
                        ParallelOptions::new(workers)
                            .on_error(nodes_std::ErrorPolicy::SkipAtMost(2)),
                    )
                    .unwrap()
            };
            // Uninterrupted: 3 and 13 are skipped, 23 is delivered and ends the pass.
            let straight: Vec<std::result::Result<u64, ()>> = build()
                .start()
                .unwrap()
                .map(|r| r.map_err(|_| ()))
                .collect();
            let mut want: Vec<std::result::Result<u64, ()>> =
                (0..23).filter(|x| x % 10 != 3).map(Ok).collect();
            want.push(Err(()));
            assert_eq!(straight, want, "{workers} workers");
            // Cut after the first skip: the restored run still ends at 23.
            let mut run = build().start().unwrap();
            assert_eq!(take(&mut run, 5), [0, 1, 2, 4, 5]);
            let state = State::from_json(&run.get_state().unwrap().to_json().unwrap()).unwrap();
            drop(run);
            let rest: Vec<std::result::Result<u64, ()>> = build()
                .start_from(&state)
                .unwrap()
                .map(|r| r.map_err(|_| ()))
                .collect();
            assert_eq!(rest, want[5..], "{workers} workers");
        }
    });
}

/// A panic payload whose own `Drop` panics used to kill a worker without a
/// word, and the consumer waited forever (issue 12). It is now an error
/// item like any panic, and the node goes on.
#[test]
fn a_panic_payload_that_panics_on_drop_is_an_error_not_a_hang() {
    struct Nasty;
    impl Drop for Nasty {
        fn drop(&mut self) {
            panic!("the payload's drop panics too");
        }
    }
    watchdog("nasty panic payload", || {
        for workers in [1, 4] {
            let mut run = Counting::new(20)
                .par_map(
                    |x| {
                        if x == 5 {
                            std::panic::panic_any(Nasty);
                        }
                        Ok(x)
                    },
                    ParallelOptions::new(workers),
                )
                .unwrap()
                .start()
                .unwrap();
            let items: Vec<Result<u64>> = run.by_ref().collect();
            assert_eq!(items.len(), 20, "{workers} workers");
            assert!(matches!(
                items[5],
                Err(Error::Panicked { index: Some(5), .. })
            ));
            run.reset(None).unwrap();
            assert_eq!(take(&mut run, 2), [0, 1]);
        }
    });
}

/// `prebatch(k)` hands items over `k` at a time, and positions stay per
/// item: a cut anywhere (also inside a chunk) resumes exactly.
#[test]
fn prebatch_resumes_exactly_at_every_cut() {
    watchdog("prebatch", || {
        for in_order in [true, false] {
            for k in [1, 3, 16] {
                let build = || {
                    Counting::new(50)
                        .par_map(
                            |x| {
                                jitter(x);
                                Ok(x * 2)
                            },
                            ParallelOptions::new(2).prebatch(k).in_order(in_order),
                        )
                        .unwrap()
                };
                let want: Vec<u64> = (0..50).map(|x| x * 2).collect();
                for cut in [0, 1, 2, 3, 15, 16, 17, 48, 49] {
                    let mut got = cut_and_resume(build, cut);
                    if !in_order {
                        got.sort_unstable();
                    }
                    assert_eq!(got, want, "in order {in_order}, prebatch {k}, cut {cut}");
                }
            }
        }
        assert!(
            Counting::new(1)
                .par_map(Ok, ParallelOptions::new(2).prebatch(0))
                .is_err()
        );
    });
}

/// Nothing is sized by the bound: any `max_concurrent` works on a short
/// source, in order and out of order.
#[test]
fn any_max_concurrent_works_on_a_short_source() {
    watchdog("huge bound", || {
        for in_order in [true, false] {
            let options = ParallelOptions::new(2)
                .in_order(in_order)
                .max_concurrent(1 << 40);
            let mut got = collect(
                &mut Counting::new(3)
                    .par_map(Ok, options)
                    .unwrap()
                    .start()
                    .unwrap(),
            );
            got.sort_unstable();
            assert_eq!(got, [0, 1, 2], "in order: {in_order}");
        }
    });
}
