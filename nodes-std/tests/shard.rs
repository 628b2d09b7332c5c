//! Sharder: disjoint shards covering the source, exact resume, bad arguments.

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
