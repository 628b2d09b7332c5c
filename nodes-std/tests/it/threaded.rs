//! The scenarios every thread-backed node must pass, written once and run
//! for each of them: `par_map` in order and out of order with workers,
//! `par_map` inline, and `prefetch` with several factors. What only one node
//! does is tested in its own module (`par_map`, `prefetch`). Every test that
//! could hang runs under a watchdog.

use std::time::Duration;

use crate::support::{
    Counting, Epochs, Gate, assert_each_once, collect, jitter, slowly, take, watchdog,
};
use nodes_std::{Error, Node, NodeExt, ParallelOptions, Result, testing};

type Boxed = Box<dyn Node<Item = u64>>;

/// Work done for every item on the node's own thread(s): inside the mapped
/// function of a `par_map`, on the reader thread (a map before it) of a
/// `prefetch`.
type Work = fn(u64);

/// One thread-backed node over a source.
#[derive(Clone, Copy)]
struct Threaded {
    /// For failure messages.
    what: &'static str,
    /// The node's name in its errors.
    node: &'static str,
    /// Whether it yields the items in the source's order.
    in_order: bool,
    build: fn(Boxed, Option<Work>) -> Boxed,
}

impl Threaded {
    fn over(self, source: impl Node<Item = u64> + 'static, work: Option<Work>) -> Boxed {
        (self.build)(source.boxed(), work)
    }

    /// `items` are `0..len`: in that order for a node that keeps the order,
    /// each once for one that does not.
    #[track_caller]
    fn assert_all(self, items: Vec<u64>, len: u64) {
        if self.in_order {
            assert_eq!(items, (0..len).collect::<Vec<_>>(), "{}", self.what);
        } else {
            assert_each_once(items, len);
        }
    }
}

fn par_map(source: Boxed, work: Option<Work>, options: ParallelOptions) -> Boxed {
    let f = move |x| {
        if let Some(work) = work {
            work(x);
        }
        Ok(x)
    };
    source.par_map(f, options).unwrap().boxed()
}

fn prefetch(source: Boxed, work: Option<Work>, factor: usize) -> Boxed {
    let source = match work {
        Some(work) => source.map(move |x| (work(x), x).1).boxed(),
        None => source,
    };
    source.prefetch(factor).unwrap().boxed()
}

/// Every thread-backed node, in the shapes the scenarios run.
fn threaded() -> [Threaded; 9] {
    const MAPPER: &str = "ParallelMapper";
    const PREFETCHER: &str = "Prefetcher";
    [
        Threaded {
            what: "par_map, 2 workers in order, a snapshot every 3 items",
            node: MAPPER,
            in_order: true,
            build: |s, w| par_map(s, w, ParallelOptions::new(2).snapshot_frequency(3)),
        },
        Threaded {
            what: "par_map, 8 workers in order",
            node: MAPPER,
            in_order: true,
            build: |s, w| par_map(s, w, ParallelOptions::new(8)),
        },
        Threaded {
            what: "par_map, 4 workers out of order, at most 6 in flight",
            node: MAPPER,
            in_order: false,
            build: |s, w| {
                par_map(
                    s,
                    w,
                    ParallelOptions::new(4).in_order(false).max_concurrent(6),
                )
            },
        },
        Threaded {
            what: "par_map, 8 workers out of order",
            node: MAPPER,
            in_order: false,
            build: |s, w| par_map(s, w, ParallelOptions::new(8).in_order(false)),
        },
        Threaded {
            what: "par_map inline",
            node: MAPPER,
            in_order: true,
            build: |s, w| par_map(s, w, ParallelOptions::new(0)),
        },
        Threaded {
            what: "prefetch(1)",
            node: PREFETCHER,
            in_order: true,
            build: |s, w| prefetch(s, w, 1),
        },
        Threaded {
            what: "prefetch(4)",
            node: PREFETCHER,
            in_order: true,
            build: |s, w| prefetch(s, w, 4),
        },
        Threaded {
            what: "prefetch(16)",
            node: PREFETCHER,
            in_order: true,
            build: |s, w| prefetch(s, w, 16),
        },
        Threaded {
            what: "prefetch(1000)",
            node: PREFETCHER,
            in_order: true,
            build: |s, w| prefetch(s, w, 1000),
        },
    ]
}

/// Load: an item that takes a while (no test orders events by it).
fn slow(_: u64) {
    std::thread::sleep(Duration::from_millis(1));
}

/// Load: an item that takes longer.
fn busy(_: u64) {
    std::thread::sleep(Duration::from_millis(2));
}

/// The read-ahead (here through a `Cycler`, which resets its source on every
/// wrap) must not change what the next pass yields: after a pass the consumer
/// stopped early, the next one is the same as without the thread-backed node,
/// and the same after a restore.
#[test]
fn the_next_pass_does_not_depend_on_how_far_the_workers_read_ahead() {
    watchdog("read-ahead and the next pass", || {
        let epochs = |threaded: Option<Threaded>| {
            let source = Epochs::new(2).cycle();
            let node = match threaded {
                Some(t) => t.over(source, None),
                None => source.boxed(),
            };
            let mut loader = nodes_std::Loader::new(node.header(3));
            // A slow consumer: the workers read as far ahead as allowed.
            let pause = Duration::from_millis(2);
            (0..4)
                .map(|_| slowly(loader.epoch(), pause))
                .collect::<Vec<_>>()
        };
        let reference = epochs(None);
        assert_eq!(reference[0], [0, 1, 1000]);
        // Out of order, which items a cut-short pass yields depends on
        // which workers finish first: the guarantee is for in-order nodes.
        for t in threaded().into_iter().filter(|t| t.in_order) {
            assert_eq!(epochs(Some(t)), reference, "{}", t.what);
            for midpoint in [0, 1, 2, 3] {
                testing::assert_save_load(
                    || t.over(Epochs::new(2).cycle(), None).header(3),
                    midpoint,
                );
            }
        }
    });
}

#[test]
fn shutdown_then_reset_resumes() {
    watchdog("shutdown", || {
        for t in threaded() {
            for len in [10, 100] {
                let mut run = t.over(Counting::new(len), None).start().unwrap();
                let mut got = take(&mut run, 4);
                if t.in_order {
                    assert_eq!(got, [0, 1, 2, 3], "{}", t.what);
                }
                run.shutdown();
                assert!(
                    matches!(run.next(), Some(Err(Error::ShutDown { node })) if node == t.node),
                    "{}",
                    t.what
                );
                let state = run.get_state().unwrap();
                run.reset(Some(&state)).unwrap();
                got.extend(collect(&mut run));
                t.assert_all(got, len);
            }
        }
    });
}

#[test]
fn bad_states_are_rejected_and_the_run_continues() {
    watchdog("bad states", || {
        for t in threaded() {
            let mut run = t.over(Counting::new(10), None).start().unwrap();
            let mut got = take(&mut run, 2);
            let good = run.get_state().unwrap();
            let mut wrong_key = good.clone();
            wrong_key.insert("it_state", 1).unwrap();
            let mut too_far = good.clone();
            too_far.insert("steps_since_snapshot", 50u64).unwrap();
            // With items delivered ahead of the cut (out of order, as far as
            // the workers ran), their offsets would be out of line with the
            // new count too, and they are checked first when the bound on
            // the count allows 50: keep the count the only bad field.
            if too_far.contains("delivered_ahead") {
                too_far
                    .insert("delivered_ahead", Vec::<u64>::new())
                    .unwrap();
            }
            let mut wrong_type = good.clone();
            wrong_type.insert("steps_since_snapshot", "three").unwrap();
            let mut inner = good.clone();
            let n = nodes_std::State::new().with("n", 99u64).unwrap();
            inner.insert("snapshot", n).unwrap();
            for (bad, path) in [
                (wrong_key, "/it_state"),
                (too_far, "/steps_since_snapshot"),
                (wrong_type, "/steps_since_snapshot"),
                (inner, "/snapshot/n"),
                (nodes_std::State::new(), "/snapshot"),
            ] {
                let err = run.reset(Some(&bad)).unwrap_err();
                assert_eq!(err.state_path(), Some(path), "{}: {err}", t.what);
                // Rolled back: the run continues where it stood.
                got.push(run.next().unwrap().unwrap());
            }
            got.extend(collect(&mut run));
            t.assert_all(got, 10);
        }
    });
}

// ---- No deadlocks: every scenario under the watchdog. ----

#[test]
fn no_deadlock_when_the_consumer_stops_early() {
    watchdog("consumer stops early", || {
        for t in threaded() {
            for work in [None, Some(slow as Work)] {
                for taken in [0, 1, 5, 10] {
                    let mut run = t.over(Counting::new(u64::MAX), work).start().unwrap();
                    take(&mut run, taken);
                    drop(run);
                }
            }
        }
    });
}

#[test]
fn no_deadlock_with_a_slow_source_or_a_slow_consumer() {
    watchdog("slow source", || {
        for t in threaded() {
            let source = Counting::new(40).sleep(Duration::from_millis(1));
            let mut run = t.over(source, None).start().unwrap();
            t.assert_all(collect(&mut run), 40);
            let run = t.over(Counting::new(40), None).start().unwrap();
            t.assert_all(slowly(run, Duration::from_micros(500)), 40);
        }
    });
}

#[test]
fn no_deadlock_on_reset_mid_epoch() {
    watchdog("reset mid-epoch", || {
        for t in threaded() {
            let mut run = t.over(Counting::new(300), Some(jitter)).start().unwrap();
            for k in 0..15 {
                take(&mut run, k * 3);
                let state = run.get_state().unwrap();
                if k % 2 == 0 {
                    run.reset(None).unwrap();
                } else {
                    run.reset(Some(&state)).unwrap();
                    let next = take(&mut run, 1);
                    if t.in_order {
                        assert_eq!(next, [k as u64 * 3], "{}", t.what);
                    }
                }
            }
            run.reset(None).unwrap();
            t.assert_all(collect(&mut run), 300);
        }
    });
}

#[test]
fn no_deadlock_when_the_source_errors_with_workers_busy() {
    watchdog("source error, busy workers", || {
        for t in threaded() {
            for fail_at in [0, 10] {
                let source = Counting::new(100).fail_at(fail_at);
                let results: Vec<Result<u64>> =
                    t.over(source, Some(busy)).start().unwrap().collect();
                assert_eq!(results.len(), 100, "{}", t.what);
                assert_eq!(
                    results.iter().filter(|r| r.is_err()).count(),
                    1,
                    "{}",
                    t.what
                );
                if t.in_order {
                    assert!(results[fail_at as usize].is_err(), "{}", t.what);
                }
            }
        }
    });
}

/// A consumer blocked in `next` (the source waits at a gate the test
/// holds shut) is woken by the node's cancel handle from another thread
/// with `Error::Cancelled`, and loses nothing: the state taken then counts
/// the items received, and once the gate opens `next` goes on with every
/// item, in order.
#[test]
fn a_cancel_handle_wakes_a_blocked_consumer_and_nothing_is_lost() {
    watchdog("cancel", || {
        check_cancel("Prefetcher", |gate| {
            let node = gated_source(gate).prefetch(2).unwrap();
            (node.cancel_handle(), node.boxed())
        });
        // Chunks of one: item 1 does not wait in a chunk with item 2.
        check_cancel("ParallelMapper", |gate| {
            let node = gated_source(gate)
                .par_map(Ok, ParallelOptions::new(2).prebatch(1))
                .unwrap();
            (node.cancel_handle(), node.boxed())
        });
    });
}

fn check_cancel(name: &str, build: impl Fn(&Gate) -> (nodes_std::CancelHandle, Boxed)) {
    let gate = Gate::default();
    let (cancel, node) = build(&gate);
    let mut run = node.start().unwrap();
    assert_eq!(take(&mut run, 2), [0, 1], "{name}");
    // Item 2 waits at the gate: the consumer blocks until the cancel.
    let consumer = std::thread::spawn(move || {
        let woken = run.next().map(|r| r.map_err(|e| e.to_string()));
        (woken, run)
    });
    cancel.cancel();
    let (woken, mut run) = consumer.join().unwrap();
    match woken {
        Some(Err(message)) => assert!(message.contains("cancelled"), "{name}: {message}"),
        other => panic!("{name}: expected a cancelled wait, got {other:?}"),
    }
    let state = run.get_state().unwrap();
    gate.open();
    assert_eq!(collect(&mut run), [2, 3, 4], "{name}");
    let (_, node) = build(&gate);
    let mut resumed = node.start_from(&state).unwrap();
    assert_eq!(collect(&mut resumed), [2, 3, 4], "{name}: resumed");
}

/// `0..5` whose item 2 waits at `gate`.
fn gated_source(gate: &Gate) -> impl Node<Item = u64> + 'static {
    let gate = gate.clone();
    Counting::new(5).map(move |x| {
        if x == 2 {
            gate.wait();
        }
        x
    })
}
