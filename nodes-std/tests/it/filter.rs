//! Filter: selection, state, save/load, and errors from the source.

use crate::common::{RangeNode, collect, save_load_at_cuts};
use crate::scripted::{Script, assert_resumes_at_every_cut, pass};
use nodes_std::prelude::*;
use nodes_std::testing;

#[test]
fn filter_keeps_what_the_predicate_accepts() {
    assert_eq!(
        collect(IterableWrapper::new(0..10u32).filter(|x| x % 2 == 0)),
        [0, 2, 4, 6, 8]
    );
    assert_eq!(
        collect(IterableWrapper::new(0..10u32).filter(|x| *x > 5)),
        [6, 7, 8, 9]
    );
    assert!(collect(IterableWrapper::new(0..10u32).filter(|_| false)).is_empty());
    let all = crate::common::epochs(RangeNode::new(20).filter(|(i, _)| i % 3 == 0), 2);
    assert_eq!(all[0].len(), 7);
    assert_eq!(
        all[1].iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        [0, 3, 6, 9, 12, 15, 18]
    );
}

#[test]
fn filter_state_is_the_source_state_and_restores() {
    let mut running = IterableWrapper::new(0..10u32)
        .filter(|x| x % 2 == 0)
        .start()
        .unwrap();
    running.next();
    running.next();
    let state = running.get_state().unwrap();
    assert_eq!(state.to_json().unwrap(), r#"{"source":{"num_yielded":3}}"#);
    let rest: Vec<u32> = IterableWrapper::new(0..10u32)
        .filter(|x| x % 2 == 0)
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, [4, 6, 8]);
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

#[test]
fn filter_passes_errors_on_in_their_place() {
    let out = pass(Script::with_bad(7, &[1, 2, 5]).filter(|x| x % 2 == 0));
    let bad = |at| Err(format!("user function failed in Script at item {at}: bad"));
    assert_eq!(out, [Ok(0), bad(1), bad(2), Ok(4), bad(5), Ok(6)]);
    for bad in [&[0][..], &[1, 2], &[3, 6]] {
        assert_resumes_at_every_cut(|| Script::with_bad(7, bad).filter(|x| x % 3 != 1));
    }
}
