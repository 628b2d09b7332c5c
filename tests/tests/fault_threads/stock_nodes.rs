//! Every thread-backed node joins all of its threads on drop, `shutdown`,
//! `reset` (also mid-epoch), at the end of a pass and after an error: the
//! process's thread count (from /proc/self/task) goes back to its baseline.
//!
//! Run from the single test of `fault_threads.rs`, so that no other test's
//! threads come and go while it counts.

use std::time::Duration;

use nodes_std::testing::{Counting, settle_threads as settle_within, thread_count};
use nodes_std::{Loader, Node, NodeExt, ParallelOptions, Running};

fn settle_threads(want: usize) -> usize {
    settle_within(want, Duration::from_secs(10))
}

/// Runs a scenario and checks the thread count afterwards.
#[track_caller]
fn check(baseline: usize, what: &str, scenario: impl FnOnce()) {
    scenario();
    let now = settle_threads(baseline);
    assert_eq!(now, baseline, "{what}: {now} threads, baseline {baseline}");
}

/// Waits until exactly `extra` threads beyond the baseline are running.
#[track_caller]
fn expect_running(baseline: usize, extra: usize, what: &str) {
    let now = settle_threads(baseline + extra);
    assert_eq!(
        now,
        baseline + extra,
        "{what}: {now} threads, want {baseline} + {extra}"
    );
}

fn slow_map(workers: usize, in_order: bool) -> impl Node<Item = u64> {
    Counting::new(1_000_000)
        .par_map(
            |x| {
                std::thread::sleep(Duration::from_micros(300));
                Ok(x)
            },
            ParallelOptions::new(workers).in_order(in_order),
        )
        .unwrap()
}

fn take<N: Node>(run: &mut Running<N>, n: usize) {
    for _ in 0..n {
        run.next().unwrap().unwrap();
    }
}

/// Every stock threaded node, in every way it can stop.
pub(crate) fn threads_return_to_baseline(baseline: usize) {
    {
        for in_order in [true, false] {
            check(baseline, "par_map dropped mid-epoch", || {
                let mut run = slow_map(3, in_order).start().unwrap();
                // Workers start with the first `next`, from its context.
                assert_eq!(thread_count(), baseline, "par_map started, not pulled");
                take(&mut run, 1);
                expect_running(baseline, 3, "par_map running");
                take(&mut run, 5);
                drop(run);
            });
            check(baseline, "par_map shut down", || {
                let mut run = slow_map(4, in_order).start().unwrap();
                take(&mut run, 2);
                run.shutdown();
                assert_eq!(
                    settle_threads(baseline),
                    baseline,
                    "after shutdown, before drop"
                );
                // Reset restarts the workers; drop joins them again.
                run.reset(None).unwrap();
                take(&mut run, 1);
                expect_running(baseline, 4, "par_map after shutdown and reset");
            });
            check(baseline, "par_map reset mid-epoch", || {
                let mut run = slow_map(3, in_order).start().unwrap();
                for k in 0..5 {
                    take(&mut run, k);
                    let state = run.get_state().unwrap();
                    run.reset(Some(&state)).unwrap();
                    take(&mut run, 1);
                    // The old workers are gone: exactly one pool runs.
                    expect_running(baseline, 3, "par_map after a reset mid-epoch");
                }
            });
        }

        check(baseline, "par_map at the end of a pass", || {
            let mut run = Counting::new(50)
                .par_map(Ok, ParallelOptions::new(4))
                .unwrap()
                .start()
                .unwrap();
            assert_eq!(run.by_ref().count(), 50);
            // The pass ended: workers are joined although the node is alive.
            assert_eq!(
                settle_threads(baseline),
                baseline,
                "after the end, node alive"
            );
        });

        check(baseline, "par_map after a user error", || {
            let mut run = Counting::new(100)
                .par_map(
                    |x| if x == 7 { Err("bad".into()) } else { Ok(x) },
                    ParallelOptions::new(4),
                )
                .unwrap()
                .start()
                .unwrap();
            // The error is one item; at the end of the pass the workers are
            // joined although the node is alive.
            assert_eq!(run.by_ref().filter(|r| r.is_err()).count(), 1);
            assert_eq!(
                settle_threads(baseline),
                baseline,
                "after the error and the end, node alive"
            );
        });

        check(baseline, "par_map after a panic", || {
            let mut run = Counting::new(100)
                .par_map(
                    |x| if x == 7 { panic!("boom") } else { Ok(x) },
                    ParallelOptions::new(4).in_order(false),
                )
                .unwrap()
                .start()
                .unwrap();
            assert_eq!(run.by_ref().filter(|r| r.is_err()).count(), 1);
            assert_eq!(
                settle_threads(baseline),
                baseline,
                "after the panic and the end, node alive"
            );
        });

        check(baseline, "par_map inline starts no thread", || {
            let mut run = Counting::new(10)
                .par_map(Ok, ParallelOptions::new(0))
                .unwrap()
                .start()
                .unwrap();
            take(&mut run, 3);
            assert_eq!(thread_count(), baseline);
        });

        check(baseline, "prefetch dropped, shut down, reset", || {
            let mut run = Counting::new(u64::MAX)
                .prefetch(4)
                .unwrap()
                .start()
                .unwrap();
            take(&mut run, 1);
            expect_running(baseline, 1, "prefetch running");
            take(&mut run, 10);
            let state = run.get_state().unwrap();
            run.reset(Some(&state)).unwrap();
            take(&mut run, 1);
            expect_running(baseline, 1, "prefetch after a reset mid-epoch");
            run.shutdown();
            assert_eq!(
                settle_threads(baseline),
                baseline,
                "prefetch after shutdown"
            );
            run.reset(None).unwrap();
            take(&mut run, 1);
            expect_running(baseline, 1, "prefetch after shutdown and reset");
        });

        check(baseline, "prefetch at the end and after an error", || {
            let mut run = Counting::new(20).prefetch(4).unwrap().start().unwrap();
            assert_eq!(run.by_ref().count(), 20);
            assert_eq!(settle_threads(baseline), baseline, "prefetch after the end");
            let mut run = Counting::new(20)
                .fail_at(3)
                .prefetch(4)
                .unwrap()
                .start()
                .unwrap();
            assert_eq!(run.by_ref().filter(|r| r.is_err()).count(), 1);
            assert_eq!(
                settle_threads(baseline),
                baseline,
                "prefetch after an error and the end"
            );
        });

        // Joining, not just stopping: workers are inside a long call when the
        // node lets go, so a node that did not wait for them would leave them
        // running for most of a second. The short grace only covers the
        // moment a joined thread may still be listed.
        let strict = |what: &str| {
            let now = settle_within(baseline, Duration::from_millis(150));
            assert_eq!(now, baseline, "{what} returned before its threads ended");
        };
        let busy_map = |in_order: bool| {
            Counting::new(1_000)
                .par_map(
                    |x| {
                        std::thread::sleep(Duration::from_millis(if x < 2 { 0 } else { 800 }));
                        Ok(x)
                    },
                    ParallelOptions::new(3).in_order(in_order),
                )
                .unwrap()
        };
        check(baseline, "drop and shutdown join busy workers", || {
            let mut run = busy_map(false).start().unwrap();
            take(&mut run, 2);
            drop(run);
            strict("drop of ParallelMapper");
            let mut run = busy_map(true).start().unwrap();
            take(&mut run, 2);
            run.shutdown();
            strict("ParallelMapper::shutdown");
            let mut run = Counting::new(10)
                .sleep(Duration::from_millis(800))
                .prefetch(2)
                .unwrap()
                .start()
                .unwrap();
            std::thread::sleep(Duration::from_millis(50));
            run.shutdown();
            strict("Prefetcher::shutdown");
        });

        check(baseline, "nested pipeline in a loader", || {
            // More items than all the read-ahead together (par_map's window
            // grows to 512 per worker): no thread reaches the end of the
            // source, so all five are alive mid-epoch whatever the timing.
            let pipeline = Counting::new(1_000_000)
                .prefetch(8)
                .unwrap()
                .par_map(Ok, ParallelOptions::new(3))
                .unwrap()
                .prefetch(8)
                .unwrap();
            let mut loader = Loader::new(pipeline);
            for _ in 0..3 {
                let n = loader.epoch().take(25).count();
                assert_eq!(n, 25);
            }
            expect_running(baseline, 5, "nested pipeline mid-epoch");
            drop(loader);
        });
    }
}
