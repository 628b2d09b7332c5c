//! Header: limits, counters and save/load.

mod common;

use common::{RangeNode, collect, save_load_at_cuts};
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
    let all = common::epochs(RangeNode::new(20).header(7), 2);
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
