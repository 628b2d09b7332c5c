//! Unbatcher: flattening, empty batches, resume inside a batch, bad states.

mod common;

use common::{RangeNode, collect, save_load_at_cuts};
use nodes_std::prelude::*;
use nodes_std::testing;

#[test]
fn unbatch_flattens_and_skips_empty_batches() {
    let out = collect(
        IterableWrapper::new(vec![vec![], vec![1u8, 2], vec![], vec![], vec![3], vec![]]).unbatch(),
    );
    assert_eq!(out, [1, 2, 3]);
    let out = collect(IterableWrapper::new(0..20u32).batch(6).unwrap().unbatch());
    assert_eq!(out, (0..20).collect::<Vec<_>>());
}

#[test]
fn unbatch_state_is_source_before_batch_plus_index() {
    let mut running = IterableWrapper::new(0..20u32)
        .batch(4)
        .unwrap()
        .unbatch()
        .start()
        .unwrap();
    for _ in 0..5 {
        running.next();
    }
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"source":{"source":{"num_yielded":4},"pending_errors":[]},"batch_idx":1}"#
    );
    let rest: Vec<u32> = IterableWrapper::new(0..20u32)
        .batch(4)
        .unwrap()
        .unbatch()
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, (5..20).collect::<Vec<_>>());
}

#[test]
fn unbatch_save_load() {
    for batch in [1, 3, 6, 25] {
        save_load_at_cuts(|| RangeNode::new(20).batch(batch).unwrap().unbatch());
        save_load_at_cuts(|| RangeNode::new(20).batch_exact(batch).unwrap().unbatch());
    }
    for cut in [0, 2, 5, 6, 7] {
        testing::assert_save_load(
            || {
                IterableWrapper::new(vec![
                    vec![],
                    vec![1u8, 2, 3],
                    vec![],
                    vec![4],
                    vec![],
                    vec![5, 6],
                ])
                .unbatch()
            },
            cut,
        );
    }
}

#[test]
fn unbatch_rejects_an_index_past_the_batch() {
    let state = State::from_json(
        r#"{"source":{"source":{"num_yielded":20},"pending_errors":[]},"batch_idx":1}"#,
    )
    .unwrap();
    let err = IterableWrapper::new(0..20u32)
        .batch(4)
        .unwrap()
        .unbatch()
        .start_from(&state)
        .unwrap_err();
    assert!(
        err.to_string().contains("the source has none left"),
        "{err}"
    );
    let state = State::from_json(
        r#"{"source":{"source":{"num_yielded":0},"pending_errors":[]},"batch_idx":9}"#,
    )
    .unwrap();
    let err = IterableWrapper::new(0..20u32)
        .batch(4)
        .unwrap()
        .unbatch()
        .start_from(&state)
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/batch_idx"), "{err}");
    assert!(err.is_bad_state(), "{err}");
    let state = State::from_json(
        r#"{"source":{"source":{"num_yielded":0},"pending_errors":[]},"batch":1}"#,
    )
    .unwrap();
    let err = IterableWrapper::new(0..20u32)
        .batch(4)
        .unwrap()
        .unbatch()
        .start_from(&state)
        .unwrap_err();
    assert!(err.is_bad_state(), "{err}");
}

