//! Shuffler: seeded orders, epochs, buffer behaviour, bad input and save/load.

use crate::common::{RangeNode, collect, epochs, save_load_at_cuts};
use crate::scripted::{Script, assert_resumes_at_every_cut, pass};
use nodes_std::prelude::*;
use nodes_std::testing;

#[test]
fn shuffle_is_a_permutation_and_same_seed_same_order() {
    let out = collect(IterableWrapper::new(0..50u32).shuffle(10, 3).unwrap());
    let mut sorted = out.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..50).collect::<Vec<_>>());
    assert_ne!(out, sorted);
    assert_eq!(
        out,
        collect(IterableWrapper::new(0..50u32).shuffle(10, 3).unwrap())
    );
    assert_ne!(
        out,
        collect(IterableWrapper::new(0..50u32).shuffle(10, 4).unwrap())
    );
}

#[test]
fn shuffle_order_is_pinned() {
    // A change here changes every user's data order.
    assert_eq!(
        collect(IterableWrapper::new(0..10u32).shuffle(4, 0).unwrap()),
        PINNED
    );
}

const PINNED: [u32; 10] = [2, 3, 4, 1, 5, 7, 8, 0, 9, 6];

#[test]
fn shuffle_new_epoch_new_order() {
    let all = epochs(IterableWrapper::new(0..30u32).shuffle(30, 1).unwrap(), 3);
    assert_ne!(all[0], all[1]);
    assert_ne!(all[1], all[2]);
    assert_eq!(
        all,
        epochs(IterableWrapper::new(0..30u32).shuffle(30, 1).unwrap(), 3)
    );
}

#[test]
fn shuffle_buffer_bounds_displacement() {
    // An item can only come out once it entered the buffer.
    let out = collect(IterableWrapper::new(0..100u32).shuffle(5, 9).unwrap());
    for (pos, item) in out.iter().enumerate() {
        assert!((*item as usize) < pos + 5, "item {item} at {pos}");
    }
    assert_eq!(
        collect(IterableWrapper::new(0..10u32).shuffle(1, 9).unwrap()),
        (0..10).collect::<Vec<_>>()
    );
}

#[test]
fn shuffle_buffer_size_zero_is_an_error() {
    let err = IterableWrapper::new(0..3u8).shuffle(0, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid argument for Shuffler: buffer_size must be at least 1"
    );
}

#[test]
fn shuffle_save_load() {
    save_load_at_cuts(|| RangeNode::new(20).shuffle(5, 7).unwrap());
    save_load_at_cuts(|| RangeNode::new(20).shuffle(64, 7).unwrap());
    save_load_at_cuts(|| RangeNode::new(3).shuffle(1, 7).unwrap());
    save_load_at_cuts(|| RangeNode::new(0).shuffle(4, 7).unwrap());
    for cut in [0, 5, 19, 20] {
        testing::assert_save_load(
            || RangeNode::new(20).batch(3).unwrap().shuffle(4, 2).unwrap(),
            cut,
        );
    }
}

#[test]
fn shuffle_state_holds_the_buffer() {
    let mut running = IterableWrapper::new(0..10u32)
        .shuffle(3, 5)
        .unwrap()
        .start()
        .unwrap();
    running.next();
    let state = running.get_state().unwrap();
    assert_eq!(
        state
            .child("source")
            .unwrap()
            .get::<u64>("num_yielded")
            .unwrap(),
        3
    );
    assert_eq!(state.get::<Vec<u32>>("buffer").unwrap().len(), 2);
    assert_eq!(state.get::<u64>("epoch").unwrap(), 0);
    // A buffer larger than this shuffler's is rejected.
    let mut big = state.clone();
    big.insert("buffer", [1u32, 2, 3, 4]).unwrap();
    let err = IterableWrapper::new(0..10u32)
        .shuffle(3, 5)
        .unwrap()
        .start_from(&big)
        .unwrap_err();
    assert!(err.is_bad_state(), "{err}");
}

#[test]
fn shuffle_passes_errors_on_and_loses_no_item() {
    // An error is returned when it is pulled (while filling the buffer); the
    // buffered items stay.
    let out = pass(Script::with_bad(20, &[0, 7, 8, 19]).shuffle(5, 3).unwrap());
    let mut ok: Vec<u64> = out
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    ok.sort_unstable();
    let want: Vec<u64> = (0..20).filter(|i| ![0, 7, 8, 19].contains(i)).collect();
    assert_eq!(ok, want);
    assert_eq!(out.iter().filter(|r| r.is_err()).count(), 4);
    for bad in [&[0][..], &[3, 4], &[9]] {
        assert_resumes_at_every_cut(|| Script::with_bad(10, bad).shuffle(4, 1).unwrap());
    }
}

/// States kept alive while the shuffle goes on (the buffer's chunks are
/// then frozen under them) still resume exactly where they were taken, from
/// memory and through JSON, with buffers of one chunk and of many.
#[test]
fn shuffle_states_kept_alive_resume_exactly() {
    for buffer in [3, 64, 200] {
        let pipeline = || {
            IterableWrapper::new((0..600u64).map(|i| (i, format!("item {i}"))))
                .shuffle(buffer, 11)
                .unwrap()
        };
        let mut running = pipeline().start().unwrap();
        let mut seen = Vec::new();
        let mut kept = Vec::new();
        while let Some(item) = running.try_next().unwrap() {
            seen.push(item);
            if seen.len() % 37 == 1 {
                kept.push((seen.len(), running.get_state().unwrap()));
            }
        }
        assert_eq!(seen.len(), 600);
        for (at, state) in &kept {
            let through_json = State::from_json(&state.to_json().unwrap()).unwrap();
            assert_eq!(&through_json, state);
            for from in [state, &through_json] {
                let rest: Vec<(u64, String)> = pipeline()
                    .start_from(from)
                    .unwrap()
                    .collect::<Result<_>>()
                    .unwrap();
                assert_eq!(rest, seen[*at..], "buffer {buffer}, cut at {at}");
            }
        }
    }
}
