//! Sharder: disjoint shards covering the source, exact resume, bad
//! arguments, and bad records as positions.

use crate::scripted::{BROKEN, Broken, Item, Script, assert_resumes_at_every_cut, pass};
use nodes_std::prelude::*;
use nodes_std::testing;

#[test]
fn shards_are_disjoint_and_cover_the_source() {
    let world = 4;
    let mut all = Vec::new();
    for rank in 0..world {
        let shard: Vec<u32> = IterableWrapper::new(0..23u32)
            .shard(rank, world)
            .unwrap()
            .start()
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert!(
            shard.iter().all(|x| u64::from(*x) % world == rank),
            "{shard:?}"
        );
        all.extend(shard);
    }
    all.sort_unstable();
    assert_eq!(all, (0..23).collect::<Vec<_>>());
}

#[test]
fn shard_save_load() {
    for midpoint in [0, 1, 4, 5, 7] {
        testing::assert_save_load(
            || IterableWrapper::new(0..17u32).shard(2, 3).unwrap(),
            midpoint,
        );
    }
}

#[test]
fn bad_arguments_are_errors() {
    assert!(IterableWrapper::new(0..3u8).shard(0, 0).is_err());
    let err = IterableWrapper::new(0..3u8).shard(5, 2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid argument for Sharder: rank 5 is not below world_size 2"
    );
}

#[test]
fn a_bad_record_takes_a_position_on_one_rank() {
    // Before: every rank returned the error, and the positions after it
    // shifted (rank 0 got 0, err, 3, 5: item 3 belongs to rank 1).
    let bad = "user function failed in Script at item 2: bad".to_owned();
    let rank0 = pass(Script::with_bad(6, &[2]).shard(0, 2).unwrap());
    assert_eq!(rank0, [Ok(0), Err(bad), Ok(4)]);
    let rank1 = pass(Script::with_bad(6, &[2]).shard(1, 2).unwrap());
    assert_eq!(rank1, [Ok(1), Ok(3), Ok(5)]);
}

#[test]
fn shard_with_errors_resumes_exactly_at_every_cut() {
    for rank in 0..3 {
        assert_resumes_at_every_cut(|| Script::with_bad(11, &[0, 4, 5, 9]).shard(rank, 3).unwrap());
    }
}

#[test]
fn other_errors_reach_every_rank_without_taking_a_position() {
    for rank in 0..2 {
        let out = pass(
            Script::new([Item(0), Item(1), Broken, Item(2), Item(3)])
                .shard(rank, 2)
                .unwrap(),
        );
        assert_eq!(out, [Ok(rank), Err(BROKEN.to_owned()), Ok(rank + 2)]);
    }
}
