//! Batcher: batch sizes, drop_last, bad arguments, save/load, and errors
//! from the source (held until the batch they interrupted is complete).

use crate::common::{RangeNode, collect, save_load_at_cuts};
use crate::scripted::{BROKEN, Broken, Item, Script, assert_resumes_at_every_cut, pass};
use nodes_std::prelude::*;
use nodes_std::testing;

#[test]
fn batch_keeps_and_batch_exact_drops_the_short_last_batch() {
    let kept = collect(IterableWrapper::new(0..20u32).batch(6).unwrap());
    assert_eq!(kept.iter().map(Vec::len).collect::<Vec<_>>(), [6, 6, 6, 2]);
    assert_eq!(kept.concat(), (0..20).collect::<Vec<_>>());
    let exact = collect(IterableWrapper::new(0..20u32).batch_exact(6).unwrap());
    assert_eq!(exact.iter().map(Vec::len).collect::<Vec<_>>(), [6, 6, 6]);
    assert_eq!(exact.concat(), (0..18).collect::<Vec<_>>());
    assert_eq!(
        collect(IterableWrapper::new(0..4u8).batch(2).unwrap()),
        [vec![0, 1], vec![2, 3]]
    );
    assert!(collect(IterableWrapper::new(0..0u8).batch(2).unwrap()).is_empty());
    assert!(collect(IterableWrapper::new(0..1u8).batch_exact(2).unwrap()).is_empty());
}

#[test]
fn batch_size_zero_is_an_error() {
    let err = IterableWrapper::new(0..3u8).batch(0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid argument for Batcher: batch_size must be at least 1"
    );
    assert!(IterableWrapper::new(0..3u8).batch_exact(0).is_err());
}

#[test]
fn batch_end_is_idempotent() {
    let mut running = IterableWrapper::new(0..3u8)
        .batch(2)
        .unwrap()
        .start()
        .unwrap();
    assert_eq!(running.by_ref().count(), 2);
    assert!(running.next().is_none());
    assert!(running.next().is_none());
}

#[test]
fn batch_save_load() {
    save_load_at_cuts(|| RangeNode::new(20).batch(6).unwrap());
    save_load_at_cuts(|| RangeNode::new(20).batch_exact(6).unwrap());
    save_load_at_cuts(|| RangeNode::new(3).batch(5).unwrap());
    for cut in [0, 2] {
        testing::assert_save_load(|| RangeNode::new(20).batch_exact(6).unwrap(), cut);
    }
}

#[test]
fn batch_describes_itself() {
    let node = IterableWrapper::new(0..3u8).batch_exact(4).unwrap();
    assert_eq!(
        node.describe().to_string(),
        "Batcher(batch_size=4, drop_last=true)"
    );
}

/// The error text a `Script` bad record at `at` renders as.
fn bad_at(at: u64) -> String {
    format!("user function failed in Script at item {at}: bad")
}

#[test]
fn an_error_mid_batch_keeps_the_batch_and_follows_it() {
    // Before: the error dropped the partial batch [0, 1].
    let out = pass(Script::with_bad(6, &[2]).batch(3).unwrap());
    assert_eq!(
        out,
        [Ok(vec![0, 1, 3]), Err(bad_at(2)), Ok(vec![4, 5])],
        "the batch keeps filling; the error comes right after it"
    );
    let out = pass(Script::with_bad(7, &[1, 2, 5]).batch(2).unwrap());
    assert_eq!(
        out,
        [
            Ok(vec![0, 3]),
            Err(bad_at(1)),
            Err(bad_at(2)),
            Ok(vec![4, 6]),
            Err(bad_at(5)),
        ]
    );
}

#[test]
fn an_error_at_a_batch_boundary_takes_its_own_place() {
    let out = pass(Script::with_bad(6, &[0, 3]).batch(2).unwrap());
    assert_eq!(
        out,
        [
            Err(bad_at(0)),
            Ok(vec![1, 2]),
            Err(bad_at(3)),
            Ok(vec![4, 5])
        ]
    );
}

#[test]
fn errors_held_by_the_last_batch_come_before_the_end() {
    // Kept short last batch: the error follows it.
    let out = pass(Script::with_bad(4, &[3]).batch(3).unwrap());
    assert_eq!(out, [Ok(vec![0, 1, 2]), Err(bad_at(3))]);
    let out = pass(Script::with_bad(4, &[2]).batch(3).unwrap());
    assert_eq!(out, [Ok(vec![0, 1, 3]), Err(bad_at(2))]);
    // Dropped short last batch: the error is still delivered.
    let out = pass(Script::with_bad(5, &[3]).batch_exact(2).unwrap());
    assert_eq!(out, [Ok(vec![0, 1]), Ok(vec![2, 4]), Err(bad_at(3))]);
    let out = pass(Script::with_bad(4, &[3]).batch_exact(3).unwrap());
    assert_eq!(out, [Ok(vec![0, 1, 2]), Err(bad_at(3))]);
    let out = pass(Script::with_bad(5, &[4]).batch_exact(3).unwrap());
    assert_eq!(out, [Ok(vec![0, 1, 2]), Err(bad_at(4))]);
}

#[test]
fn batch_with_errors_resumes_exactly_at_every_cut() {
    // Includes the cuts between a batch and the errors it held: the state
    // carries them, so they are delivered after the restore.
    for (len, bad, size) in [
        (10, &[2][..], 3),
        (10, &[1, 2, 7], 2),
        (9, &[0, 3, 8], 3),
        (6, &[1, 2, 3, 4], 4),
        (7, &[6], 4),
    ] {
        assert_resumes_at_every_cut(|| Script::with_bad(len, bad).batch(size).unwrap());
        assert_resumes_at_every_cut(|| Script::with_bad(len, bad).batch_exact(size).unwrap());
    }
}

#[test]
fn held_errors_are_in_the_state() {
    let mut running = Script::with_bad(6, &[2]).batch(3).unwrap().start().unwrap();
    assert_eq!(running.next().transpose().unwrap(), Some(vec![0, 1, 3]));
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"source":{"i":4},"pending_errors":[{"kind":"user","node":"Script","index":2,"message":"bad"}]}"#
    );
    let mut resumed = Script::with_bad(6, &[2])
        .batch(3)
        .unwrap()
        .start_from(&state)
        .unwrap();
    match resumed.next() {
        Some(Err(Error::User {
            node,
            index: Some(2),
            source,
        })) if node == "Script" => assert_eq!(source.to_string(), "bad"),
        other => panic!("want the held error, got {other:?}"),
    }
    assert_eq!(resumed.next().transpose().unwrap(), Some(vec![4, 5]));
    assert!(resumed.next().is_none());
}

#[test]
fn a_bad_held_error_in_a_state_is_rejected_at_its_path() {
    let build = || Script::with_bad(6, &[2]).batch(3).unwrap();
    for bad in [
        r#"[{"kind":"oops","node":"Script","index":2,"message":"bad"}]"#,
        r#"[{"kind":"user","node":"Script","index":2}]"#,
        r#"[{"kind":"user","node":"Script","index":2,"message":"bad","extra":1}]"#,
        r#"{"kind":"user"}"#,
    ] {
        let state =
            State::from_json(&format!(r#"{{"source":{{"i":4}},"pending_errors":{bad}}}"#)).unwrap();
        let err = build().start_from(&state).unwrap_err();
        assert_eq!(err.state_path(), Some("/pending_errors"), "{bad}: {err}");
    }
    let many = vec![r#"{"kind":"user","node":"Script","index":2,"message":"bad"}"#; 1025].join(",");
    let state = State::from_json(&format!(
        r#"{{"source":{{"i":4}},"pending_errors":[{many}]}}"#
    ))
    .unwrap();
    let err = build().start_from(&state).unwrap_err();
    assert!(err.to_string().contains("at most 1024"), "{err}");
}

#[test]
fn a_source_that_keeps_failing_cuts_the_batch_short() {
    // 1100 bad records after one item: the batch is returned short after
    // 1024 of them, then the errors; the rest come one per call.
    let script = || Script::with_bad(1102, &(1..1101).collect::<Vec<_>>());
    let out = pass(script().batch(4).unwrap());
    assert_eq!(out.len(), 1 + 1100 + 1);
    assert_eq!(out[0], Ok(vec![0]));
    assert!(out[1..1101].iter().all(Result::is_err));
    assert_eq!(out[1101], Ok(vec![1101]));
    // `batch_exact` drops the short batch instead.
    let out = pass(script().batch_exact(4).unwrap());
    assert_eq!(out.len(), 1100);
    assert!(out.iter().all(Result::is_err));
}

#[test]
fn huge_batch_sizes_allocate_as_items_arrive() {
    // Before: `1 << 40` aborted the process (allocation failure) and
    // `usize::MAX` panicked (capacity overflow), even over an empty source.
    for size in [1 << 40, usize::MAX] {
        assert_eq!(
            collect(IterableWrapper::new(0..3u64).batch(size).unwrap()),
            [vec![0, 1, 2]]
        );
        assert!(collect(IterableWrapper::new(0..0u64).batch(size).unwrap()).is_empty());
        assert!(collect(IterableWrapper::new(0..3u64).batch_exact(size).unwrap()).is_empty());
    }
    let items = collect(IterableWrapper::new(0..5000u32).batch(1 << 40).unwrap());
    assert_eq!(items, [(0..5000).collect::<Vec<_>>()]);
}

#[test]
fn other_errors_are_returned_at_once() {
    // A pipeline that cannot go on: the error is not held, and the partial
    // batch is dropped.
    let out = pass(
        Script::new([Item(0), Broken, Item(1), Item(2)])
            .batch(3)
            .unwrap(),
    );
    assert_eq!(out, [Err(BROKEN.to_owned()), Ok(vec![1, 2])]);
}
