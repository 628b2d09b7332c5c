//! SamplerWrapper and the index samplers: epochs, seeded orders, sharding,
//! bad arguments and save/load.

use std::collections::BTreeSet;

use crate::common::{collect, epochs, save_load_at_cuts};
use nodes_std::prelude::*;
use nodes_std::{Running, testing};

fn order(sampler: &impl Sampler) -> Vec<usize> {
    (0..sampler.len()).map(|i| sampler.index(i)).collect()
}

#[test]
fn sequential_sampler_yields_indices_in_order_every_epoch() {
    let all = epochs(SamplerWrapper::new(SequentialSampler::new(5)), 2);
    assert_eq!(all, [vec![0, 1, 2, 3, 4], vec![0, 1, 2, 3, 4]]);
    assert!(collect(SamplerWrapper::new(SequentialSampler::new(0))).is_empty());
}

#[test]
fn random_sampler_same_seed_same_order_on_every_run() {
    // Pinned: a change here changes every user's data order.
    let sampler = RandomSampler::new(10, 0);
    assert_eq!(order(&sampler), PINNED_SEED0_EPOCH0);
    assert_eq!(order(&RandomSampler::new(10, 0)), order(&sampler));
    assert_ne!(order(&RandomSampler::new(10, 1)), order(&sampler));
}

const PINNED_SEED0_EPOCH0: [usize; 10] = [4, 6, 7, 1, 8, 2, 3, 5, 0, 9];

#[test]
fn random_sampler_new_epoch_new_permutation() {
    let all = epochs(SamplerWrapper::new(RandomSampler::new(20, 9)), 4);
    for epoch in &all {
        let mut sorted = epoch.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..20).collect::<Vec<_>>());
    }
    let distinct: BTreeSet<&Vec<usize>> = all.iter().collect();
    assert_eq!(distinct.len(), 4, "{all:?}");
    // The wrapper's epoch drives the sampler's.
    let mut sampler = RandomSampler::new(20, 9);
    for (e, epoch) in all.iter().enumerate() {
        sampler.set_epoch(e as u64);
        assert_eq!(&order(&sampler), epoch);
    }
}

#[test]
fn random_sampler_covers_large_and_odd_sizes() {
    for n in [1usize, 2, 3, 63, 64, 65, 1000] {
        let mut sorted = order(&RandomSampler::new(n, 4));
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n={n}");
    }
}

#[test]
fn epoch_advances_only_after_iteration_started() {
    let mut running = SamplerWrapper::new(SequentialSampler::new(3))
        .start()
        .unwrap();
    assert_eq!(running.node().epoch(), 0);
    running.reset(None).unwrap();
    running.reset(None).unwrap();
    assert_eq!(
        running.node().epoch(),
        0,
        "resets without next keep the epoch"
    );
    running.next();
    running.reset(None).unwrap();
    assert_eq!(running.node().epoch(), 1);
    // An empty sampler still counts a pass that was started.
    let mut running = SamplerWrapper::new(SequentialSampler::new(0))
        .start()
        .unwrap();
    assert!(running.next().is_none());
    running.reset(None).unwrap();
    assert_eq!(running.node().epoch(), 1);
    // Restoring brings back whether the pass had started.
    for (started, next_epoch) in [(false, 7), (true, 8)] {
        let state = State::new()
            .with("epoch", 7u64)
            .unwrap()
            .with("num_yielded", 0u64)
            .unwrap()
            .with("started", started)
            .unwrap();
        running.reset(Some(&state)).unwrap();
        assert_eq!(running.node().epoch(), 7);
        running.reset(None).unwrap();
        assert_eq!(running.node().epoch(), next_epoch);
    }
}

#[test]
fn initial_epoch_is_kept_by_the_first_reset() {
    let wrapper = SamplerWrapper::with_initial_epoch(RandomSampler::new(8, 2), 5);
    let all = epochs(wrapper, 2);
    let mut sampler = RandomSampler::new(8, 2);
    sampler.set_epoch(5);
    assert_eq!(all[0], order(&sampler));
    sampler.set_epoch(6);
    assert_eq!(all[1], order(&sampler));
}

fn shards(n: usize, world_size: usize, remainder: Remainder, seed: Option<u64>) -> Vec<Vec<usize>> {
    (0..world_size)
        .map(|rank| match seed {
            Some(seed) => collect(SamplerWrapper::new(
                ShardedSampler::new(
                    RandomSampler::new(n, seed),
                    rank as u64,
                    world_size as u64,
                    remainder,
                )
                .unwrap(),
            )),
            None => collect(SamplerWrapper::new(
                ShardedSampler::new(
                    SequentialSampler::new(n),
                    rank as u64,
                    world_size as u64,
                    remainder,
                )
                .unwrap(),
            )),
        })
        .collect()
}

#[test]
fn sharded_ranks_are_disjoint_and_cover_the_dataset() {
    for n in [1usize, 2, 7, 10, 12, 25] {
        for world_size in [1usize, 2, 3, 4, 8] {
            for seed in [None, Some(3)] {
                // Drop: equal shares, disjoint, covering all but the tail.
                let dropped = shards(n, world_size, Remainder::Drop, seed);
                let share = n / world_size;
                assert!(dropped.iter().all(|s| s.len() == share));
                let union: BTreeSet<usize> = dropped.iter().flatten().copied().collect();
                assert_eq!(
                    union.len(),
                    share * world_size,
                    "n={n} ws={world_size} {dropped:?}"
                );
                // Pad: equal shares covering everything; only padding repeats.
                let padded = shards(n, world_size, Remainder::Pad, seed);
                let share = n.div_ceil(world_size);
                assert!(padded.iter().all(|s| s.len() == share));
                let union: BTreeSet<usize> = padded.iter().flatten().copied().collect();
                assert_eq!(union, (0..n).collect(), "n={n} ws={world_size} {padded:?}");
                if n % world_size == 0 {
                    assert_eq!(padded, dropped);
                }
            }
        }
    }
}

#[test]
fn sharded_matches_torch_distributed_sampler_layout() {
    // torch: indices padded by wrapping to a multiple of world_size, then
    // rank r takes indices[r::world_size].
    assert_eq!(
        shards(10, 4, Remainder::Pad, None),
        [vec![0, 4, 8], vec![1, 5, 9], vec![2, 6, 0], vec![3, 7, 1]]
    );
    assert_eq!(
        shards(10, 4, Remainder::Drop, None),
        [vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
    assert_eq!(
        shards(2, 5, Remainder::Pad, None),
        [vec![0], vec![1], vec![0], vec![1], vec![0]]
    );
}

#[test]
fn sharded_random_shards_change_per_epoch_and_stay_disjoint() {
    let per_rank: Vec<Vec<Vec<usize>>> = (0..3)
        .map(|rank| {
            epochs(
                SamplerWrapper::new(
                    ShardedSampler::new(RandomSampler::new(12, 8), rank, 3, Remainder::Pad)
                        .unwrap(),
                ),
                2,
            )
        })
        .collect();
    for epoch in 0..2 {
        let union: BTreeSet<usize> = per_rank
            .iter()
            .flat_map(|r| r[epoch].iter().copied())
            .collect();
        assert_eq!(union, (0..12).collect());
    }
    assert_ne!(per_rank[0][0], per_rank[0][1]);
}

#[test]
fn bad_sharding_arguments_are_errors() {
    let err = ShardedSampler::new(SequentialSampler::new(4), 0, 0, Remainder::Pad).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid argument for ShardedSampler: world_size must be at least 1"
    );
    let err = ShardedSampler::new(SequentialSampler::new(4), 2, 2, Remainder::Drop).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid argument for ShardedSampler: rank 2 is not below world_size 2"
    );
    let err = ShardedSampler::new(SequentialSampler::new(0), 0, 2, Remainder::Pad).unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidArgument {
            node: "ShardedSampler",
            ..
        }
    ));
    // Dropping over an empty sampler is fine: every shard is empty.
    let empty = ShardedSampler::new(SequentialSampler::new(0), 1, 2, Remainder::Drop).unwrap();
    assert!(collect(SamplerWrapper::new(empty)).is_empty());
}

#[test]
fn sampler_wrapper_save_load() {
    save_load_at_cuts(|| SamplerWrapper::new(SequentialSampler::new(6)));
    save_load_at_cuts(|| SamplerWrapper::new(RandomSampler::new(6, 1)));
    save_load_at_cuts(|| SamplerWrapper::with_initial_epoch(RandomSampler::new(5, 2), 3));
    save_load_at_cuts(|| {
        SamplerWrapper::new(
            ShardedSampler::new(RandomSampler::new(11, 4), 2, 3, Remainder::Pad).unwrap(),
        )
    });
    save_load_at_cuts(|| {
        SamplerWrapper::new(
            ShardedSampler::new(RandomSampler::new(11, 4), 0, 3, Remainder::Drop).unwrap(),
        )
    });
    save_load_at_cuts(|| SamplerWrapper::new(SequentialSampler::new(0)));
    testing::assert_save_load(|| SamplerWrapper::new(RandomSampler::new(40, 3)), 20);
}

#[test]
fn sampler_wrapper_restores_in_constant_time() {
    // A billion-index epoch, restored near its end: no replay.
    let state = State::from_json(r#"{"epoch":2,"num_yielded":999999998,"started":true}"#).unwrap();
    let rest: Vec<usize> = SamplerWrapper::new(RandomSampler::new(1_000_000_000, 5))
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    let mut sampler = RandomSampler::new(1_000_000_000, 5);
    sampler.set_epoch(2);
    assert_eq!(
        rest,
        [sampler.index(999_999_998), sampler.index(999_999_999)]
    );
}

#[test]
fn sampler_wrapper_rejects_positions_past_the_end() {
    let state = State::from_json(r#"{"epoch":0,"num_yielded":4,"started":true}"#).unwrap();
    let err = SamplerWrapper::new(SequentialSampler::new(3))
        .start_from(&state)
        .unwrap_err();
    assert!(err.is_bad_state(), "{err}");
    let state = State::from_json(r#"{"epoch":0,"started":true}"#).unwrap();
    let err = SamplerWrapper::new(SequentialSampler::new(3))
        .start_from(&state)
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/num_yielded"));
}

/// One error semantics, for the index samplers: a `Sampler` cannot fail
/// (`index` returns an index), so the errors of a sampler-driven source are
/// its consumer's, e.g. a `MapStyleWrapper` whose dataset fails on some
/// indices. Each such error takes the place of its index: the pass goes on
/// with the next index, the indices are those of the fault-free run, and a
/// state taken right after an error resumes after it (the wrapper counted
/// the index the error consumed), into the next epoch too.
#[test]
fn an_error_at_an_index_is_one_item_and_a_state_after_it_resumes_after_it() {
    struct Flaky;
    impl Dataset for Flaky {
        type Item = usize;
        fn len(&self) -> usize {
            12
        }
        fn get_item(&self, index: usize) -> std::result::Result<usize, nodes_std::BoxError> {
            if index % 5 == 3 {
                return Err(format!("bad record {index}").into());
            }
            Ok(index)
        }
    }
    type Outcome = std::result::Result<usize, String>;
    let build = || MapStyleWrapper::new(Flaky, SamplerWrapper::new(RandomSampler::new(12, 7)));
    // Up to `n` outcomes of the current pass, going on after errors.
    let take = |run: &mut Running<_>, n: usize| -> Vec<Outcome> {
        let mut out = Vec::new();
        while out.len() < n {
            match run.try_next() {
                Ok(Some(i)) => out.push(Ok(i)),
                Ok(None) => break,
                Err(e) => out.push(Err(e.to_string())),
            }
        }
        out
    };
    // Two epochs, uninterrupted.
    let mut run = build().start().unwrap();
    let mut all = take(&mut run, usize::MAX);
    run.reset(None).unwrap();
    all.extend(take(&mut run, usize::MAX));
    let mut sampler = RandomSampler::new(12, 7);
    let mut order: Vec<usize> = (0..12).map(|i| sampler.index(i)).collect();
    sampler.set_epoch(1);
    order.extend((0..12).map(|i| sampler.index(i)));
    let expected: Vec<std::result::Result<usize, ()>> = order
        .iter()
        .map(|&i| if i % 5 == 3 { Err(()) } else { Ok(i) })
        .collect();
    let shape: Vec<std::result::Result<usize, ()>> =
        all.iter().map(|r| r.clone().map_err(|_| ())).collect();
    assert_eq!(shape, expected);
    assert_eq!(shape.iter().filter(|r| r.is_err()).count(), 4);
    for cut in 0..=12 {
        let mut first = build().start().unwrap();
        assert_eq!(take(&mut first, cut), all[..cut]);
        let state = first.get_state().unwrap();
        let state = State::from_json(&state.to_json().unwrap()).unwrap();
        let mut resumed = Running::start_from(build(), &state).unwrap();
        let mut rest = take(&mut resumed, usize::MAX);
        resumed.reset(None).unwrap();
        rest.extend(take(&mut resumed, usize::MAX));
        assert_eq!(rest, all[cut..], "cut {cut}");
    }
}

#[test]
fn epoch_updater_chooses_the_next_epochs_and_resumes_exactly() {
    let build = || SamplerWrapper::new(RandomSampler::new(6, 3)).epoch_updater(|e| e * 10 + 1);
    let mut loader = nodes_std::Loader::new(build());
    let mut seen = Vec::new();
    for _ in 0..3 {
        loader.epoch().for_each(drop);
        seen.push(loader.root().epoch());
    }
    assert_eq!(seen, [0, 1, 11]);
    // The orders are those of the chosen epochs.
    let mut sampler = RandomSampler::new(6, 3);
    sampler.set_epoch(11);
    let mut fresh = nodes_std::Loader::new(build());
    let orders: Vec<Vec<usize>> = (0..3)
        .map(|_| fresh.epoch().map(Result::unwrap).collect())
        .collect();
    assert_eq!(orders[2], order(&sampler));
    for midpoint in [0, 1, 5, 6] {
        testing::assert_save_load(build, midpoint);
    }
}
