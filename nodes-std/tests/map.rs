//! Mapper and TryMapper: order, errors with indices, panics and save/load.

mod common;

use common::{RangeNode, collect, save_load_at_cuts};
use nodes_std::prelude::*;

#[test]
fn map_applies_in_order() {
    let out = collect(IterableWrapper::new(0..5u32).map(|x| x * 2).map(|x| x + 1));
    assert_eq!(out, [1, 3, 5, 7, 9]);
}

#[test]
fn map_save_load() {
    save_load_at_cuts(|| RangeNode::new(6).map(|(i, r)| i * 100 + r));
    save_load_at_cuts(|| IterableWrapper::new(vec!["a", "b", "c"]).map(str::to_uppercase));
}

#[test]
fn try_map_errors_carry_node_and_index_and_do_not_stop_the_node() {
    let mut running = IterableWrapper::new(vec!["1", "2", "x", "4", "y"])
        .try_map(|s: &str| s.parse::<u32>())
        .start()
        .unwrap();
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for item in &mut running {
        match item {
            Ok(v) => ok.push(v),
            Err(Error::User { node, index, .. }) => failed.push((node, index)),
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(ok, [1, 2, 4]);
    assert_eq!(failed, [("TryMapper", Some(2)), ("TryMapper", Some(4))]);
}

#[test]
fn try_map_index_survives_restore() {
    let build = || IterableWrapper::new(vec![1i32, 2, -3, 4]).try_map(u8::try_from);
    let mut running = build().start().unwrap();
    running.next();
    let state = running.get_state().unwrap();
    assert_eq!(state.get::<u64>("num_seen").unwrap(), 1);
    let mut resumed = build().start_from(&state).unwrap();
    assert_eq!(resumed.next().transpose().unwrap(), Some(2));
    assert!(matches!(
        resumed.next(),
        Some(Err(Error::User { index: Some(2), .. }))
    ));
    assert_eq!(resumed.next().transpose().unwrap(), Some(4));
}

#[test]
fn try_map_save_load() {
    save_load_at_cuts(|| RangeNode::new(5).try_map(|(i, r)| Ok::<_, std::io::Error>(i + r)));
}

#[test]
fn map_panics_are_not_caught() {
    let result = std::panic::catch_unwind(|| {
        collect(IterableWrapper::new(0..3u8).map(|x| {
            assert!(x < 2, "boom at {x}");
            x
        }))
    });
    let payload = result.unwrap_err();
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("boom at 2")
    );
}
