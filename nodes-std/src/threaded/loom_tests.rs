//! Model-checked tests of the threaded core: loom runs each body over the
//! interleavings of its threads (bounded by `LOOM_MAX_PREEMPTIONS`), with
//! the real nodes built on loom's primitives (see `sync.rs`). Each test is
//! named after the property it proves. Run by `.ci/run`:
//! `RUSTFLAGS="--cfg loom" cargo test -p nodes-std --lib --release loom`.

#[cfg(test)]
mod model {
    use crate::prelude::*;
    use crate::{Error, ErrorPolicy, Running};

    /// Runs `body` under loom.
    fn model(body: impl Fn() + Sync + Send + 'static) {
        loom::model(body);
    }

    fn items<N: Node>(run: &mut Running<N>) -> Vec<N::Item> {
        run.by_ref().map(|r| r.unwrap()).collect()
    }

    #[test]
    fn loom_no_lost_wakeup_between_credits_and_chunks() {
        // A read-ahead of one: every item needs the credit the consumer gives
        // back, and every chunk wakes the consumer.
        model(|| {
            let mut run = IterableWrapper::new(0..3u64)
                .prefetch(1)
                .unwrap()
                .start()
                .unwrap();
            assert_eq!(items(&mut run), [0, 1, 2]);
        });
    }

    #[test]
    fn loom_no_lost_wakeup_with_two_workers_reordering() {
        model(|| {
            let options = ParallelOptions::new(2).max_concurrent(2).prebatch(1);
            let node = IterableWrapper::new(0..3u64).par_map(|x| Ok(x * 10), options);
            let mut run = node.unwrap().start().unwrap();
            assert_eq!(items(&mut run), [0, 10, 20]);
        });
    }

    #[test]
    fn loom_no_deadlock_on_drop_mid_pass() {
        model(|| {
            let mut run = IterableWrapper::new(0..3u64)
                .prefetch(1)
                .unwrap()
                .start()
                .unwrap();
            assert_eq!(run.next().transpose().unwrap(), Some(0));
            drop(run);
        });
    }

    #[test]
    fn loom_no_deadlock_on_error() {
        model(|| {
            let options = ParallelOptions::new(2)
                .prebatch(1)
                .on_error(ErrorPolicy::Fail);
            let fail = |x: u64| if x == 1 { Err("bad".into()) } else { Ok(x) };
            let node = IterableWrapper::new(0..3u64)
                .par_map(fail, options)
                .unwrap();
            let mut run = node.start().unwrap();
            assert_eq!(run.next().transpose().unwrap(), Some(0));
            assert!(matches!(run.next(), Some(Err(Error::User { .. }))));
            assert!(run.next().is_none(), "the policy ends the pass");
        });
    }

    #[test]
    fn loom_no_deadlock_on_panic() {
        model(|| {
            let source = IterableWrapper::new(0..3u64).map(|x| {
                assert!(x != 1, "the source breaks");
                x
            });
            let mut run = source.prefetch(1).unwrap().start().unwrap();
            assert_eq!(run.next().transpose().unwrap(), Some(0));
            assert!(matches!(run.next(), Some(Err(Error::Panicked { .. }))));
            assert!(run.next().is_none(), "a panic ends the pass");
        });
    }

    #[test]
    fn loom_a_snapshot_holds_exactly_the_delivered_prefix() {
        model(|| {
            let node = || IterableWrapper::new(0..3u64).prefetch(2).unwrap();
            let mut run = node().start().unwrap();
            assert_eq!(run.next().transpose().unwrap(), Some(0));
            // Whatever the reader pulled ahead, the state counts one item.
            let state = run.get_state().unwrap();
            drop(run);
            let mut resumed = node().start_from(&state).unwrap();
            assert_eq!(items(&mut resumed), [1, 2]);
        });
    }

    #[test]
    fn loom_restart_after_restore_delivers_the_rest_once() {
        model(|| {
            let options = ParallelOptions::new(2).prebatch(1).max_concurrent(2);
            let node = IterableWrapper::new(0..3u64).par_map(Ok, options).unwrap();
            let mut run = node.start().unwrap();
            assert_eq!(run.next().transpose().unwrap(), Some(0));
            let state = run.get_state().unwrap();
            run.reset(Some(&state)).unwrap();
            assert_eq!(items(&mut run), [1, 2]);
        });
    }

    #[test]
    fn loom_a_cancel_wakes_the_waiting_consumer() {
        model(|| {
            let node = IterableWrapper::new(0..2u64).prefetch(1).unwrap();
            let cancel = node.cancel_handle();
            let mut run = node.start().unwrap();
            let canceller = loom::thread::spawn(move || cancel.cancel());
            // The cancel ends one wait, now or at the next; nothing is lost.
            let mut got = Vec::new();
            let mut cancelled = 0;
            for item in run.by_ref() {
                match item {
                    Ok(x) => got.push(x),
                    Err(Error::Cancelled { .. }) => cancelled += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            canceller.join().unwrap();
            assert_eq!(got, [0, 1]);
            assert!(cancelled <= 1);
        });
    }
}
