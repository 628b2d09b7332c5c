//! Zip: pairing, uneven lengths and save/load.

mod common;

use common::{RangeNode, collect, save_load_at_cuts};
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
        r#"{"left":{"num_yielded":1},"right":{"num_yielded":1},"ended":false}"#
    );
}
