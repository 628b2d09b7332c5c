//! IterableWrapper: save/load conformance and bad states.

use nodes_std::prelude::*;
use nodes_std::{IterableWrapper, testing};

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
fn iterable_wrapper_restore_past_end_is_bad_state() {
    let state = State::new().with("num_yielded", 9u64).unwrap();
    let err = IterableWrapper::new(0..3u8).start_from(&state).unwrap_err();
    assert!(err.is_bad_state(), "{err}");
}
