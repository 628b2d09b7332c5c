//! Header: limits, counters, save/load, and errors as items.

use crate::common::{RangeNode, collect, save_load_at_cuts};
use crate::scripted::{BROKEN, Broken, Item, Script, assert_resumes_at_every_cut, pass};
use nodes_std::prelude::*;
use nodes_std::testing;

#[test]
fn header_limits_each_pass() {
    assert_eq!(
        collect(IterableWrapper::new(0..10u8).header(5)),
        [0, 1, 2, 3, 4]
    );
    assert_eq!(collect(IterableWrapper::new(0..3u8).header(10)), [0, 1, 2]);
    assert!(collect(IterableWrapper::new(0..3u8).header(0)).is_empty());
    let all = crate::common::epochs(RangeNode::new(20).header(7), 2);
    assert_eq!(
        all[1].iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..7).collect::<Vec<_>>()
    );
}

#[test]
fn header_stops_without_pulling_the_source() {
    let mut running = RangeNode::new(10).header(2).start().unwrap();
    running.by_ref().for_each(drop);
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"source":{"i":2,"resets":1},"num_yielded":2}"#
    );
}

#[test]
fn header_save_load() {
    save_load_at_cuts(|| RangeNode::new(50).header(20));
    save_load_at_cuts(|| RangeNode::new(5).header(20));
    save_load_at_cuts(|| RangeNode::new(5).header(0));
    for cut in [0, 3, 7] {
        testing::assert_save_load(|| RangeNode::new(50).header(20), cut);
    }
    // An endless source is fine under a header.
    save_load_at_cuts(|| RangeNode::new(3).cycle().header(8));
}

#[test]
fn a_bad_record_is_one_of_the_n_items() {
    // Before: errors were not counted, so `header(3)` returned 3 items and
    // the error.
    let out = pass(Script::with_bad(6, &[1]).header(3));
    assert_eq!(
        out,
        [
            Ok(0),
            Err("user function failed in Script at item 1: bad".to_owned()),
            Ok(2)
        ]
    );
    let mut running = Script::with_bad(6, &[1]).header(3).start().unwrap();
    running.by_ref().for_each(drop);
    assert_eq!(
        running.get_state().unwrap().to_json().unwrap(),
        r#"{"source":{"i":3},"num_yielded":3}"#
    );
}

#[test]
fn header_with_errors_resumes_exactly_at_every_cut() {
    for bad in [&[0][..], &[2], &[1, 2], &[4, 5]] {
        assert_resumes_at_every_cut(|| Script::with_bad(8, bad).header(5));
    }
}

#[test]
fn other_errors_are_not_counted() {
    let out = pass(Script::new([Item(0), Broken, Item(1), Item(2)]).header(2));
    assert_eq!(out, [Ok(0), Err(BROKEN.to_owned()), Ok(1)]);
}
