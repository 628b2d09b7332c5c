//! Batcher: batch sizes, drop_last, bad arguments and save/load.

mod common;

use common::{RangeNode, collect, save_load_at_cuts};
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
