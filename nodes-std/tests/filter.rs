//! Filter: selection, counters and save/load.

mod common;

use common::{RangeNode, collect, save_load_at_cuts};
use nodes_std::prelude::*;
use nodes_std::testing;

#[test]
fn filter_basic_and_counters() {
    let mut running = IterableWrapper::new(0..10u32)
        .filter(|x| x % 2 == 0)
        .start()
        .unwrap();
    let out: Vec<u32> = running.by_ref().collect::<Result<_>>().unwrap();
    assert_eq!(out, [0, 2, 4, 6, 8]);
    assert_eq!(
        (running.node().num_yielded(), running.node().num_filtered()),
        (5, 5)
    );
    assert_eq!(
        collect(IterableWrapper::new(0..10u32).filter(|x| *x > 5)),
        [6, 7, 8, 9]
    );
    assert!(collect(IterableWrapper::new(0..10u32).filter(|_| false)).is_empty());
}

#[test]
fn filter_counters_reset_and_restore() {
    let mut running = IterableWrapper::new(0..10u32)
        .filter(|x| x % 2 == 0)
        .start()
        .unwrap();
    running.next();
    running.next();
    let state = running.get_state().unwrap();
    assert_eq!(state.get::<u64>("num_yielded").unwrap(), 2);
    assert_eq!(state.get::<u64>("num_filtered").unwrap(), 1);
    let rest: Vec<u32> = IterableWrapper::new(0..10u32)
        .filter(|x| x % 2 == 0)
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, [4, 6, 8]);
    running.reset(None).unwrap();
    assert_eq!(
        (running.node().num_yielded(), running.node().num_filtered()),
        (0, 0)
    );
}

#[test]
fn filter_save_load() {
    save_load_at_cuts(|| RangeNode::new(20).filter(|(i, _)| i % 3 == 0));
    for cut in [0, 3, 7] {
        testing::assert_save_load(|| RangeNode::new(50).filter(|(i, _)| i % 3 == 0), cut);
    }
    save_load_at_cuts(|| RangeNode::new(10).filter(|_| false));
}

#[test]
fn filter_over_batches() {
    let out = collect(
        IterableWrapper::new(0..20u32)
            .batch(4)
            .unwrap()
            .filter(|b| b.iter().sum::<u32>() % 10 == 0),
    );
    assert_eq!(out, [vec![16, 17, 18, 19]]);
}
