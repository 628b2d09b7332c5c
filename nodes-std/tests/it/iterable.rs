//! IterableWrapper and SeekableIterator: save/load conformance, O(1) seeking
//! and bad states.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::common::{collect, save_load_at_cuts};
use nodes_std::prelude::*;
use nodes_std::testing;

#[test]
fn iterable_wrapper_save_load() {
    for midpoint in [0, 1, 4, 5, 7] {
        testing::assert_save_load(
            || IterableWrapper::new(vec![10u32, 11, 12, 13, 14]),
            midpoint,
        );
    }
}

#[test]
fn seekable_wrapper_save_load() {
    save_load_at_cuts(|| IterableWrapper::seekable(3..11u8));
    save_load_at_cuts(|| IterableWrapper::seekable(vec!['a', 'b', 'c']));
    static DATA: [u16; 4] = [7, 8, 9, 10];
    save_load_at_cuts(|| IterableWrapper::seekable(DATA.iter().copied()));
    save_load_at_cuts(|| IterableWrapper::seekable(&DATA[..]));
    save_load_at_cuts(|| IterableWrapper::seekable(Vec::<u8>::new()));
}

#[test]
fn iterable_wrapper_epochs_repeat() {
    let epochs = crate::common::epochs(IterableWrapper::new(0..20u32), 2);
    assert_eq!(epochs[0], (0..20).collect::<Vec<_>>());
    assert_eq!(epochs[0], epochs[1]);
}

#[test]
fn iterable_wrapper_restore_past_end_is_bad_state() {
    let state = State::new().with("num_yielded", 9u64).unwrap();
    let err = IterableWrapper::new(0..3u8).start_from(&state).unwrap_err();
    assert!(err.is_bad_state(), "{err}");
    let err = IterableWrapper::seekable(0..3u8)
        .start_from(&state)
        .unwrap_err();
    assert!(err.is_bad_state(), "{err}");
    assert!(err.to_string().contains("has only 3 items"), "{err}");
    // A skip by `nth` jumps in one step, so it cannot say how far it got: the
    // length comes from the iterator (it said "has only 0" for 100 items).
    let state = State::new().with("num_yielded", 4000u64).unwrap();
    for err in [
        IterableWrapper::new(0..100u64)
            .start_from(&state)
            .unwrap_err(),
        IterableWrapper::new((0..100u64).collect::<Vec<_>>())
            .start_from(&state)
            .unwrap_err(),
    ] {
        assert_eq!(
            err.to_string(),
            "bad state at /num_yielded: IterableWrapper cannot skip 4000 items: the iterable has only 100 items"
        );
    }
    let err = IterableWrapper::new((0..100u64).filter(|x| x % 2 == 0))
        .start_from(&state)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad state at /num_yielded: IterableWrapper cannot skip 4000 items: the iterable has fewer items"
    );
}

#[test]
fn seekable_restore_far_into_a_huge_range_is_immediate() {
    // Replaying 2^62 items would never finish: this only passes if restore seeks.
    let far = 1u64 << 62;
    let state = State::new().with("num_yielded", far).unwrap();
    let mut it = IterableWrapper::seekable(0..u64::MAX)
        .start_from(&state)
        .unwrap();
    assert_eq!(it.next().transpose().unwrap(), Some(far));
    assert_eq!(
        it.get_state().unwrap().get::<u64>("num_yielded").unwrap(),
        far + 1
    );
    // `new` skips with `nth`, which std also makes O(1) for ranges.
    let mut it = IterableWrapper::new(0..u64::MAX)
        .start_from(&state)
        .unwrap();
    assert_eq!(it.next().transpose().unwrap(), Some(far));
}

#[test]
fn new_replays_non_seekable_iterators_and_seekable_rejects_them_at_compile_time() {
    // Adapters (`map`, `inspect`...) re-run their closure on skipped items
    // when restored through `nth`.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let iterable = (0..10u32).inspect(move |_| {
        counted.fetch_add(1, Ordering::Relaxed);
    });
    let state = State::new().with("num_yielded", 6u64).unwrap();
    let rest: Vec<u32> = IterableWrapper::new(iterable)
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, [6, 7, 8, 9]);
    assert_eq!(calls.load(Ordering::Relaxed), 10);
    // (`IterableWrapper::seekable(iterable)` would not compile: `Inspect` is not
    // a `SeekableIterator`.)
}

#[test]
fn skip_ahead_counts_what_was_skipped() {
    let mut r = 5..9i8;
    assert_eq!(r.skip_ahead(0), 0);
    assert_eq!(r.skip_ahead(3), 3);
    assert_eq!(r.next(), Some(8));
    assert_eq!(r.skip_ahead(1), 0);

    let mut r = -3..=3i64;
    assert_eq!(r.skip_ahead(6), 6);
    assert_eq!(r.next(), Some(3));
    assert_eq!(r.skip_ahead(2), 0);
    let mut r = 0..=u64::MAX;
    assert_eq!(r.skip_ahead(u64::MAX), u64::MAX);
    assert_eq!(r.next(), Some(u64::MAX));
    assert_eq!(r.next(), None);

    let mut r = 10usize..;
    assert_eq!(r.skip_ahead(1000), 1000);
    assert_eq!(r.next(), Some(1010));

    let data = [1u8, 2, 3, 4];
    let mut s = data.iter();
    assert_eq!(s.skip_ahead(2), 2);
    assert_eq!(s.next(), Some(&3));
    let mut s = data.iter().copied();
    assert_eq!(s.skip_ahead(9), 4);
    assert_eq!(s.next(), None);

    let mut v = vec![String::from("a"), String::from("b"), String::from("c")].into_iter();
    assert_eq!(v.skip_ahead(2), 2);
    assert_eq!(v.next().as_deref(), Some("c"));
    assert_eq!(v.skip_ahead(5), 0);
}

/// A user iterator over fixed-size records: seeking is arithmetic.
#[derive(Clone)]
struct Records {
    next: u64,
    end: u64,
    decoded: Arc<AtomicUsize>,
}

impl Iterator for Records {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        (self.next < self.end).then(|| {
            self.decoded.fetch_add(1, Ordering::Relaxed);
            self.next += 1;
            self.next * 100
        })
    }
}

impl SeekableIterator for Records {
    fn skip_ahead(&mut self, n: u64) -> u64 {
        let k = n.min(self.end - self.next);
        self.next += k;
        k
    }
}

#[test]
fn user_seekable_iterator_restores_without_decoding() {
    let decoded = Arc::new(AtomicUsize::new(0));
    let records = Records {
        next: 0,
        end: 1000,
        decoded: decoded.clone(),
    };
    let state = State::new().with("num_yielded", 997u64).unwrap();
    let rest: Vec<u64> = IterableWrapper::seekable(records.clone())
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, [99800, 99900, 100000]);
    assert_eq!(decoded.load(Ordering::Relaxed), 3);
    save_load_at_cuts(|| {
        IterableWrapper::seekable(Records {
            end: 6,
            ..records.clone()
        })
    });
    assert_eq!(collect(IterableWrapper::seekable(records)).len(), 1000);
}

/// Yields `0..5` but panics once at 2 (the first time, across clones);
/// skips in O(1) without producing items, so a restore never panics.
#[derive(Debug, Clone)]
struct PanicsOnce {
    next: u64,
    armed: Arc<AtomicBool>,
}

impl Iterator for PanicsOnce {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.next == 5 {
            return None;
        }
        self.next += 1;
        if self.next == 3 && self.armed.swap(false, Ordering::SeqCst) {
            panic!("item 2 is cursed");
        }
        Some(self.next - 1)
    }

    fn nth(&mut self, n: usize) -> Option<u64> {
        self.next = (self.next + n as u64).min(5);
        self.next()
    }
}

#[test]
fn an_item_that_panicked_counts_as_returned() {
    // Before: the count moved only when `next` returned, so a state taken
    // after a caught panic pointed before the failed item, and a resume
    // asked for it again (the uninterrupted iterator had moved past it).
    let armed = Arc::new(AtomicBool::new(true));
    let build = || {
        IterableWrapper::new(PanicsOnce {
            next: 0,
            armed: Arc::clone(&armed),
        })
    };
    let mut running = build().start().unwrap();
    assert_eq!(running.next().transpose().unwrap(), Some(0));
    assert_eq!(running.next().transpose().unwrap(), Some(1));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| running.next()));
    assert!(caught.is_err(), "item 2 panics");
    let state = running.get_state().unwrap();
    assert_eq!(state.to_json().unwrap(), r#"{"num_yielded":3}"#);
    let rest: Vec<u64> = build()
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    let carried_on: Vec<u64> = running.collect::<Result<_>>().unwrap();
    assert_eq!(rest, [3, 4]);
    assert_eq!(
        carried_on, rest,
        "the resumed run goes on as the uninterrupted one"
    );
}
