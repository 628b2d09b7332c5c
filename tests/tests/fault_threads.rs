//! No thread is leaked by a fault: after a user function or a source fails
//! or panics inside thread-backed stages, after a failed restore, and when
//! the consumer drops the loader mid-epoch while workers are busy, the
//! process's thread count (from /proc/self/task) goes back to its baseline,
//! and nothing hangs.
//!
//! This binary holds a single test, so that no other test's threads come and
//! go while it counts; the scenarios run one after another inside it, first
//! those of every stock threaded node (`fault_threads/stock_nodes.rs`).
//! `NODES_RELIABILITY_LONG=1` runs ten times the random pipelines.

#[path = "it/support/mod.rs"]
mod support;

#[path = "fault_threads/stock_nodes.rs"]
mod stock_nodes;

use std::time::Duration;

use nodes_std::prelude::*;
use nodes_std::testing::{settle_threads, thread_count};
use nodes_std::{BoxError, ParallelOptions, Running};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use support::faulty::{Fault, FaultKind, Faulty, quiet_injected_panics};
use support::spec::{Grammar, build, spec_strategy};
use support::watch::{config, watchdog};

/// Waits for the thread count to come back to `baseline`.
#[track_caller]
fn expect_baseline(baseline: usize, what: &str) {
    let now = settle_threads(baseline, Duration::from_secs(10));
    assert_eq!(now, baseline, "{what}: {now} threads, baseline {baseline}");
}

type Boxed = Box<dyn Node<Item = u64>>;

fn options(workers: usize, in_order: bool) -> ParallelOptions {
    ParallelOptions::new(workers).in_order(in_order)
}

/// A map function that fails at `fault`'s item.
fn failing(
    fault: &Fault,
) -> impl Fn(u64) -> std::result::Result<u64, BoxError> + Send + Sync + use<> {
    let fault = fault.clone();
    move |x| {
        fault.hit(x)?;
        Ok(x)
    }
}

/// Reads the whole pass (an error is one item, the pass goes on after it);
/// returns how many errors came.
fn read_pass<N: Node>(run: &mut Running<N>) -> usize {
    run.by_ref().filter(Result::is_err).count()
}

fn function_faults(baseline: usize) {
    for workers in [1, 3] {
        for in_order in [true, false] {
            for at in [0, 5, 17] {
                for kind in [FaultKind::Err, FaultKind::Panic] {
                    let what = format!(
                        "map fails ({kind:?}) at {at}, {workers} workers, in order {in_order}"
                    );
                    let fault = Fault::new(at, kind);
                    let mut run = IterableWrapper::new(0..40u64)
                        .par_map(failing(&fault), options(workers, in_order))
                        .unwrap()
                        .prefetch(2)
                        .unwrap()
                        .start()
                        .unwrap();
                    assert_eq!(read_pass(&mut run), 1, "{what}: errors");
                    // The pass is over: every thread is joined while the
                    // pipeline is still alive.
                    expect_baseline(baseline, &format!("{what}, after the pass"));
                    // Restoring the end-of-pass state, then a new pass,
                    // starts threads again; dropping joins them.
                    let state = run.get_state().unwrap();
                    run.reset(Some(&state)).unwrap();
                    assert!(run.next().is_none(), "{what}: items after the end");
                    run.reset(None).unwrap();
                    assert!(run.next().is_some(), "{what}: nothing in the next pass");
                    drop(run);
                    expect_baseline(baseline, &format!("{what}, dropped"));
                }
            }
        }
    }
}

fn source_faults(baseline: usize) {
    for at in [0, 9] {
        for kind in [FaultKind::Err, FaultKind::Panic] {
            for layout in 0..3 {
                let what = format!("source fails ({kind:?}) at {at}, layout {layout}");
                let fault = Fault::new(at, kind);
                let source = Faulty::new(30).fault(fault);
                let node: Boxed = match layout {
                    0 => source.prefetch(4).unwrap().boxed(),
                    1 => source.par_map(Ok, options(3, true)).unwrap().boxed(),
                    _ => source
                        .prefetch(3)
                        .unwrap()
                        .par_map(Ok, options(2, false))
                        .unwrap()
                        .prefetch(5)
                        .unwrap()
                        .boxed(),
                };
                let mut run = node.start().unwrap();
                assert!(read_pass(&mut run) >= 1, "{what}: no error");
                expect_baseline(baseline, &format!("{what}, after the pass"));
                drop(run);
                expect_baseline(baseline, &format!("{what}, dropped"));
            }
        }
    }
}

/// Every worker is inside a slow call when the consumer lets go.
fn busy_pipeline() -> Boxed {
    Faulty::new(100_000)
        .sleep(Duration::from_micros(200))
        .prefetch(8)
        .unwrap()
        .par_map(
            |x| {
                std::thread::sleep(Duration::from_millis(2));
                Ok(x)
            },
            options(4, false),
        )
        .unwrap()
        .prefetch(4)
        .unwrap()
        .boxed()
}

fn dropped_mid_epoch(baseline: usize) {
    for read in [0, 1, 9] {
        let what = format!("loader dropped after {read} items, workers busy");
        let mut loader = Loader::new(busy_pipeline());
        let mut epoch = loader.epoch();
        for _ in 0..read {
            epoch.next().unwrap().unwrap();
        }
        drop(epoch);
        drop(loader);
        expect_baseline(baseline, &what);
    }
    // Dropped between epochs, and after a checkpoint taken mid-epoch.
    let mut loader = Loader::new(busy_pipeline().header(5).boxed());
    assert_eq!(loader.epoch().count(), 5);
    let mut epoch = loader.epoch();
    epoch.next().unwrap().unwrap();
    let _ = epoch.state_dict().unwrap();
    drop(loader);
    expect_baseline(baseline, "loader dropped after a checkpoint");
}

fn failed_restores(baseline: usize) {
    let pipeline = || -> Boxed {
        IterableWrapper::new(0..50u64)
            .prefetch(4)
            .unwrap()
            .par_map(Ok, options(3, true))
            .unwrap()
            .boxed()
    };
    let mut loader = Loader::new(pipeline());
    let mut epoch = loader.epoch();
    for _ in 0..10 {
        epoch.next().unwrap().unwrap();
    }
    let good = epoch.state_dict().unwrap();
    let mut bad = good.clone().into_value();
    bad["root"]["snapshot"]["steps_since_snapshot"] = serde_json::json!(1000);
    let bad = State::from_value(bad).unwrap();
    drop(loader);
    expect_baseline(baseline, "donor dropped");

    // Into a fresh loader, one that loaded a state, one mid-epoch.
    for setup in 0..3 {
        let mut loader = Loader::new(pipeline());
        match setup {
            0 => {}
            1 => loader.load_state_dict(&good).unwrap(),
            _ => {
                let _ = loader.epoch().take(3).count();
            }
        }
        assert!(loader.load_state_dict(&bad).is_err());
        assert!(loader.epoch().next().is_some());
        drop(loader);
        expect_baseline(baseline, &format!("failed restore, setup {setup}"));
    }
    // Running::reset rolls back and restarts the workers.
    let mut run = pipeline().start().unwrap();
    run.next().unwrap().unwrap();
    assert!(run.reset(Some(&bad.child("root").unwrap())).is_err());
    assert_eq!(run.next().unwrap().unwrap(), 1);
    drop(run);
    expect_baseline(baseline, "failed Running::reset");
}

fn random_pipelines_dropped(baseline: usize) {
    let mut runner = TestRunner::new(config(256, 0x5eed_0004));
    let strategy = (
        spec_strategy(Grammar::every_shape(4, 12, 3)),
        0usize..20,
        any::<bool>(),
    );
    let result = runner.run(&strategy, |(spec, read, checkpoint)| {
        let mut loader = Loader::new(build(&spec));
        let mut epoch = loader.epoch();
        let mut refused = false;
        for item in epoch.by_ref().take(read) {
            // Bad records and a refused pipeline are items like any other here.
            match item {
                Ok(_) | Err(Error::User { .. }) => {}
                Err(Error::InvalidPipeline { .. }) => refused = true,
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            }
        }
        if checkpoint {
            match epoch.state_dict() {
                Ok(_) => {}
                // A refused pipeline never started: it has no state to take
                // (whether or not its refusal was read above).
                Err(Error::NotReset { .. }) if refused || read == 0 => {}
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            }
        }
        drop(epoch);
        drop(loader);
        let now = settle_threads(baseline, Duration::from_secs(10));
        prop_assert_eq!(
            now,
            baseline,
            "threads after dropping {:?} after {} items",
            spec,
            read
        );
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn faults_and_drops_leak_no_thread() {
    quiet_injected_panics();
    watchdog("thread counts", Duration::from_secs(240), || {
        let baseline = thread_count();
        assert!(baseline > 0, "cannot read /proc/self/task");
        stock_nodes::threads_return_to_baseline(baseline);
        function_faults(baseline);
        source_faults(baseline);
        dropped_mid_epoch(baseline);
        failed_restores(baseline);
        random_pipelines_dropped(baseline);
    });
}
