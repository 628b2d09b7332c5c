//! Zip: pairing, uneven lengths, save/load, and errors from either side.

use crate::common::{RangeNode, collect, save_load_at_cuts};
use crate::scripted::{BROKEN, Bad, Broken, Item, Script, assert_resumes_at_every_cut, pass};
use nodes_std::prelude::*;

#[test]
fn zip_pairs_until_the_shorter_ends() {
    assert_eq!(
        collect(IterableWrapper::new(0..3u8).zip(IterableWrapper::new(["a", "b", "c", "d"]))),
        [(0, "a"), (1, "b"), (2, "c")]
    );
    assert_eq!(
        collect(IterableWrapper::new(0..5u8).zip(IterableWrapper::new(0..2u8))).len(),
        2
    );
    assert!(collect(IterableWrapper::new(0..0u8).zip(IterableWrapper::new(0..2u8))).is_empty());
}

#[test]
fn zip_save_load() {
    save_load_at_cuts(|| RangeNode::new(6).zip(RangeNode::new(6)));
    save_load_at_cuts(|| RangeNode::new(4).zip(RangeNode::new(7)));
    save_load_at_cuts(|| RangeNode::new(7).zip(RangeNode::new(4)));
    save_load_at_cuts(|| {
        SamplerWrapper::new(RandomSampler::new(5, 1))
            .zip(SamplerWrapper::new(RandomSampler::new(5, 2)))
    });
}

#[test]
fn zip_state_nests_both_sides() {
    let mut running = IterableWrapper::new(0..3u8)
        .zip(IterableWrapper::new(0..3u8))
        .start()
        .unwrap();
    running.next();
    assert_eq!(
        running.get_state().unwrap().to_json().unwrap(),
        r#"{"left":{"num_yielded":1},"right":{"num_yielded":1},"ended":false,"pending_errors":[]}"#
    );
}

fn bad_at(at: u64) -> String {
    format!("user function failed in Script at item {at}: bad")
}

#[test]
fn an_error_on_the_right_keeps_the_left_item() {
    // Before: the left item taken for the failed right item was lost, and
    // every later pair shifted.
    let out = pass(Script::with_bad(4, &[]).zip(Script::with_bad(5, &[1]).map(|x| x + 10)));
    assert_eq!(
        out,
        [
            Ok((0, 10)),
            Ok((1, 12)),
            Err(bad_at(1)),
            Ok((2, 13)),
            Ok((3, 14))
        ]
    );
    let out = pass(Script::with_bad(3, &[]).zip(Script::with_bad(6, &[0, 1, 3])));
    assert_eq!(
        out,
        [
            Ok((0, 2)),
            Err(bad_at(0)),
            Err(bad_at(1)),
            Ok((1, 4)),
            Err(bad_at(3)),
            Ok((2, 5)),
        ]
    );
}

#[test]
fn an_error_on_the_left_takes_its_own_place() {
    let out = pass(Script::with_bad(4, &[1]).zip(Script::with_bad(3, &[]).map(|x| x + 10)));
    assert_eq!(out, [Ok((0, 10)), Err(bad_at(1)), Ok((2, 11)), Ok((3, 12))]);
}

#[test]
fn errors_before_the_right_side_ends_are_delivered_before_the_end() {
    let out = pass(Script::with_bad(3, &[]).zip(Script::new([Item(10), Bad("bad")])));
    assert_eq!(out, [Ok((0, 10)), Err(bad_at(1))]);
    let mut running = Script::with_bad(3, &[])
        .zip(Script::new([Bad("bad")]))
        .start()
        .unwrap();
    assert!(running.next().unwrap().is_err());
    assert!(running.next().is_none());
    assert!(running.next().is_none(), "the end is idempotent");
}

#[test]
fn zip_with_errors_resumes_exactly_at_every_cut() {
    for (left, right) in [
        (&[][..], &[1][..]),
        (&[1], &[]),
        (&[0, 3], &[1, 2, 5]),
        (&[2], &[2]),
        (&[], &[5]),
    ] {
        assert_resumes_at_every_cut(|| {
            Script::with_bad(5, left).zip(Script::with_bad(6, right).map(|x| x + 10))
        });
    }
}

#[test]
fn a_right_side_that_keeps_failing_does_not_hold_the_zip() {
    let out =
        pass(Script::with_bad(3, &[]).zip(Script::with_bad(1030, &(0..1029).collect::<Vec<_>>())));
    // 1024 errors and the left item 0 dropped; then (1, 1029) and the 5
    // errors taken while building it.
    assert_eq!(out.len(), 1029 + 1);
    assert_eq!(out[1024], Ok((1, 1029)));
    assert_eq!(out.iter().filter(|r| r.is_err()).count(), 1029);
}

#[test]
fn other_errors_on_the_right_are_returned_at_once() {
    let out = pass(Script::with_bad(3, &[]).zip(Script::new([Item(10), Broken, Item(11)])));
    assert_eq!(out, [Ok((0, 10)), Err(BROKEN.to_owned()), Ok((2, 11))]);
}
