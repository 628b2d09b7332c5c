//! Elastic resume (`nodes_std::elastic`): a job saved on N ranks resumes on
//! M ranks with every item of the epoch delivered exactly once across the
//! job, through filters, threaded nodes, batches and mixes; and state sets
//! that are incomplete, mixed or foreign are refused.
//!
//! The property test runs 512 cases by default (`NODES_RELIABILITY_LONG`
//! multiplies them): N, M, M2 in 1..=8, a dataset of 0..80 items per
//! source, random per-rank progress before each save, cuts in epoch 0 or 1,
//! and one of fifteen pipelines (filters, `try_map` and mixes above and
//! below threaded nodes; shuffles over a filter, under and over a
//! `par_map`, under a mix's sources and over batches). Items are checked one by one: the union of
//! what every rank of every generation delivered in the cut epoch is the
//! epoch's items, each once; the epoch after is an ordinary epoch of the
//! last world size.

use std::collections::BTreeMap;

use nodes_std::prelude::*;
use nodes_std::{ElasticSampler, IterableWrapper, elastic};
use proptest::prelude::*;

use crate::support::faulty::uneven;
use crate::support::watch::config;

/// A source's items: `base + index`.
fn source(
    base: u32,
    len: usize,
    seed: u64,
    rank: u64,
    world: u64,
) -> Result<MapStyleWrapper<Vec<u32>, ElasticSampler<RandomSampler>>> {
    let data: Vec<u32> = (0..len as u32).map(|i| base + i).collect();
    let sampler = ElasticSampler::new(RandomSampler::new(len, seed), rank, world)?;
    Ok(MapStyleWrapper::new(data, sampler))
}

fn keep(x: &u32) -> bool {
    x % 3 != 1
}

/// The pipelines of the property test.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// map-style -> batch
    Plain,
    /// map-style -> map -> filter -> batch
    Filter,
    /// map-style -> par_map (in or out of order) -> filter -> batch
    ParMap {
        workers: usize,
        in_order: bool,
        freq: usize,
    },
    /// map-style -> map -> batch -> prefetch
    Prefetch,
    /// map-style -> batch -> par_map out of order (batches delivered ahead)
    BatchParMap { workers: usize, freq: usize },
    /// two sources, each par_map -> weighted mix -> filter -> batch
    Weighted { workers: usize, in_order: bool },
    /// two sources -> round-robin mix -> batch
    RoundRobin,
    /// prefetch -> par_map in order -> map-style (nested threaded nodes)
    Nested { workers: usize },
    /// map-style -> filter -> try_map -> par_map (in or out of order) ->
    /// batch: positions behind each item unknown to the threaded node
    FilterBelow {
        workers: usize,
        in_order: bool,
        freq: usize,
    },
    /// two sources -> weighted mix -> filter -> par_map -> prefetch ->
    /// batch: the mix and the filter below two threaded nodes
    MixBelow { workers: usize, in_order: bool },
    /// map-style -> filter -> try_map -> shuffle -> batch: buffered items
    /// whose positions a filter thinned
    ShuffleOverFilter { buffer: usize },
    /// map-style -> shuffle -> par_map (in or out of order) -> batch: the
    /// threaded node reads ahead of the shuffle
    ShuffleUnderParMap {
        buffer: usize,
        workers: usize,
        in_order: bool,
    },
    /// map-style -> par_map -> filter -> shuffle -> batch: the shuffle
    /// buffers what the threaded node delivered
    ShuffleOverParMap { buffer: usize, workers: usize },
    /// two sources, each shuffled -> weighted (or round-robin) mix -> batch
    ShuffleMix { buffer: usize, round_robin: bool },
    /// map-style -> batch -> shuffle -> prefetch: whole batches buffered
    ShuffleOverBatch { buffer: usize },
    /// map-style -> filter -> flat_map (three items each) -> batch
    FlatMap,
    /// map-style -> par_map in order -> flat_map -> prefetch -> batch: a
    /// threaded node on each side of the flat_map
    FlatMapParMap { workers: usize },
    /// map-style -> batch(3) -> shuffle -> unbatch -> batch
    Unbatch { buffer: usize },
}

/// An item's three elements, for the flat_maps.
fn three(x: u32) -> [u32; 3] {
    [3 * x, 3 * x + 1, 3 * x + 2]
}

#[derive(Clone, Copy, Debug)]
struct Job {
    kind: Kind,
    len: usize,
    batch: usize,
    seed: u64,
}

type Boxed = Box<dyn Node<Item = Vec<u32>>>;

impl Job {
    fn build(&self, rank: u64, world: u64) -> Result<Boxed> {
        let Job {
            kind,
            len,
            batch,
            seed,
        } = *self;
        let one = || source(0, len, seed, rank, world);
        Ok(match kind {
            Kind::Plain => one()?.batch(batch)?.boxed(),
            Kind::Filter => one()?.map(|x| x).filter(keep).batch(batch)?.boxed(),
            Kind::ParMap {
                workers,
                in_order,
                freq,
            } => one()?
                .par_map(
                    uneven,
                    ParallelOptions::new(workers)
                        .in_order(in_order)
                        .snapshot_frequency(freq),
                )?
                .filter(keep)
                .batch(batch)?
                .boxed(),
            Kind::Prefetch => one()?.map(|x| x).batch(batch)?.prefetch(2)?.boxed(),
            Kind::BatchParMap { workers, freq } => one()?
                .batch(batch)?
                .par_map(
                    uneven,
                    ParallelOptions::new(workers)
                        .in_order(false)
                        .snapshot_frequency(freq),
                )?
                .boxed(),
            Kind::Weighted { workers, in_order } => {
                let options = ParallelOptions::new(workers).in_order(in_order);
                let a = source(0, len, seed, rank, world)?.par_map(uneven, options)?;
                let b =
                    source(1000, len / 2 + 1, seed ^ 1, rank, world)?.par_map(uneven, options)?;
                MultiNodeWeightedSampler::new([("a", a), ("b", b)], [("a", 0.6), ("b", 0.4)])?
                    .stop_criteria(StopCriteria::AllDatasetsExhausted)
                    .seed(seed)
                    .rank(rank, world)?
                    .filter(keep)
                    .batch(batch)?
                    .boxed()
            }
            Kind::RoundRobin => {
                let a = source(0, len, seed, rank, world)?;
                let b = source(1000, len / 3, seed ^ 2, rank, world)?;
                MultiNodeRoundRobinSampler::new([("a", a), ("b", b)])?
                    .stop_criteria(StopCriteria::AllDatasetsExhausted)
                    .batch(batch)?
                    .boxed()
            }
            Kind::Nested { workers } => one()?
                .par_map(Ok, ParallelOptions::new(workers).snapshot_frequency(2))?
                .prefetch(3)?
                .batch(batch)?
                .boxed(),
            Kind::FilterBelow {
                workers,
                in_order,
                freq,
            } => one()?
                .filter(keep)
                .try_map(Ok::<_, nodes_std::BoxError>)
                .par_map(
                    uneven,
                    ParallelOptions::new(workers)
                        .in_order(in_order)
                        .snapshot_frequency(freq),
                )?
                .batch(batch)?
                .boxed(),
            Kind::MixBelow { workers, in_order } => {
                let a = source(0, len, seed, rank, world)?;
                let b = source(1000, len / 2 + 1, seed ^ 1, rank, world)?;
                MultiNodeWeightedSampler::new([("a", a), ("b", b)], [("a", 0.6), ("b", 0.4)])?
                    .stop_criteria(StopCriteria::AllDatasetsExhausted)
                    .seed(seed)
                    .rank(rank, world)?
                    .filter(keep)
                    .par_map(uneven, ParallelOptions::new(workers).in_order(in_order))?
                    .prefetch(2)?
                    .batch(batch)?
                    .boxed()
            }
            Kind::ShuffleOverFilter { buffer } => one()?
                .filter(keep)
                .try_map(Ok::<_, nodes_std::BoxError>)
                .shuffle(buffer, seed ^ 3)?
                .batch(batch)?
                .boxed(),
            Kind::ShuffleUnderParMap {
                buffer,
                workers,
                in_order,
            } => one()?
                .shuffle(buffer, seed ^ 3)?
                .par_map(uneven, ParallelOptions::new(workers).in_order(in_order))?
                .batch(batch)?
                .boxed(),
            Kind::ShuffleOverParMap { buffer, workers } => one()?
                .par_map(uneven, ParallelOptions::new(workers).in_order(false))?
                .filter(keep)
                .shuffle(buffer, seed ^ 3)?
                .batch(batch)?
                .boxed(),
            Kind::ShuffleMix {
                buffer,
                round_robin,
            } => {
                let a = source(0, len, seed, rank, world)?.shuffle(buffer, seed ^ 3)?;
                let b = source(1000, len / 2 + 1, seed ^ 1, rank, world)?
                    .shuffle(buffer + 1, seed ^ 4)?;
                if round_robin {
                    MultiNodeRoundRobinSampler::new([("a", a), ("b", b)])?
                        .stop_criteria(StopCriteria::AllDatasetsExhausted)
                        .batch(batch)?
                        .boxed()
                } else {
                    MultiNodeWeightedSampler::new([("a", a), ("b", b)], [("a", 0.6), ("b", 0.4)])?
                        .stop_criteria(StopCriteria::AllDatasetsExhausted)
                        .seed(seed)
                        .rank(rank, world)?
                        .batch(batch)?
                        .boxed()
                }
            }
            Kind::ShuffleOverBatch { buffer } => one()?
                .batch(batch)?
                .shuffle(buffer, seed ^ 3)?
                .prefetch(2)?
                .boxed(),
            Kind::FlatMap => one()?.filter(keep).flat_map(three).batch(batch)?.boxed(),
            Kind::FlatMapParMap { workers } => one()?
                .par_map(uneven, ParallelOptions::new(workers))?
                .flat_map(three)
                .prefetch(2)?
                .batch(batch)?
                .boxed(),
            Kind::Unbatch { buffer } => one()?
                .batch(3)?
                .shuffle(buffer, seed ^ 3)?
                .unbatch()
                .batch(batch)?
                .boxed(),
        })
    }

    /// Every item of one epoch, sorted.
    fn epoch_items(&self) -> Vec<u32> {
        let mut all: Vec<u32> = (0..self.len as u32).collect();
        match self.kind {
            Kind::Weighted { .. } | Kind::MixBelow { .. } | Kind::ShuffleMix { .. } => {
                all.extend((0..(self.len / 2 + 1) as u32).map(|i| 1000 + i));
            }
            Kind::RoundRobin => all.extend((0..(self.len / 3) as u32).map(|i| 1000 + i)),
            _ => {}
        }
        if matches!(
            self.kind,
            Kind::Filter
                | Kind::ParMap { .. }
                | Kind::Weighted { .. }
                | Kind::FilterBelow { .. }
                | Kind::MixBelow { .. }
                | Kind::ShuffleOverFilter { .. }
                | Kind::ShuffleOverParMap { .. }
                | Kind::FlatMap
        ) {
            all.retain(keep);
        }
        if matches!(self.kind, Kind::FlatMap | Kind::FlatMapParMap { .. }) {
            all = all.into_iter().flat_map(three).collect();
        }
        all.sort_unstable();
        all
    }
}

/// A checkpoint as it would be stored: through JSON, checksum and all.
fn stored(state: &State) -> State {
    State::from_json(&state.to_json().unwrap()).unwrap()
}

/// Runs `states.len()` ranks of a generation: each resumes from its state
/// (or starts fresh and runs `before` whole epochs), takes up to
/// `progress[r]` batches of the cut epoch, and saves. Returns the items
/// delivered in the cut epoch and the saved states.
fn generation(
    job: &Job,
    world: u64,
    states: Option<&[State]>,
    before: u64,
    progress: &[usize],
    delivered: &mut Vec<u32>,
) -> Vec<State> {
    (0..world)
        .map(|rank| {
            let mut loader = Loader::new(job.build(rank, world).unwrap());
            match states {
                Some(states) => loader.load_state_dict(&states[rank as usize]).unwrap(),
                None => {
                    for _ in 0..before {
                        for item in loader.epoch() {
                            item.unwrap();
                        }
                    }
                }
            }
            let take = progress[rank as usize % progress.len()];
            if take == 0 && states.is_some() {
                // Saved right after the restore, at the resharded position.
                return stored(&loader.state_dict().unwrap());
            }
            let mut epoch = loader.epoch();
            // A rank whose share of the cut epoch is empty is still in it,
            // with nothing left: its state reshards with its peers'.
            assert_eq!(epoch.index(), before, "rank {rank} of {world}");
            for _ in 0..take {
                match epoch.next() {
                    Some(batch) => delivered.extend(batch.unwrap()),
                    None => break,
                }
            }
            stored(&epoch.state_dict().unwrap())
        })
        .collect()
}

/// Resumes every state and runs its epoch to the end, then one more epoch;
/// returns (items of the rest of the cut epoch, items of the next epoch).
fn finish(job: &Job, states: &[State], before: u64) -> (Vec<u32>, Vec<u32>) {
    let world = states.len() as u64;
    let (mut rest, mut next) = (Vec::new(), Vec::new());
    for (rank, state) in states.iter().enumerate() {
        let mut loader = Loader::new(job.build(rank as u64, world).unwrap());
        loader.load_state_dict(state).unwrap();
        let mut epoch = loader.epoch();
        if epoch.index() == before {
            for batch in epoch.by_ref() {
                rest.extend(batch.unwrap());
            }
            drop(epoch);
            epoch = loader.epoch();
        }
        // The epoch after is an ordinary epoch of this world size (a rank
        // with nothing left of the cut epoch starts it right away).
        assert_eq!(epoch.index(), before + 1);
        for batch in epoch.by_ref() {
            next.extend(batch.unwrap());
        }
    }
    (rest, next)
}

/// Sorted, and every item once: `None` names the first repeat.
fn exactly_once(mut items: Vec<u32>) -> std::result::Result<Vec<u32>, u32> {
    items.sort_unstable();
    match items.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(w[0]),
        None => Ok(items),
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Plain),
        Just(Kind::Filter),
        (0usize..3, any::<bool>(), 1usize..5).prop_map(|(workers, in_order, freq)| Kind::ParMap {
            workers,
            in_order,
            freq
        }),
        Just(Kind::Prefetch),
        (1usize..3, 1usize..4).prop_map(|(workers, freq)| Kind::BatchParMap { workers, freq }),
        (0usize..3, any::<bool>())
            .prop_map(|(workers, in_order)| Kind::Weighted { workers, in_order }),
        Just(Kind::RoundRobin),
        (1usize..3).prop_map(|workers| Kind::Nested { workers }),
        (0usize..3, any::<bool>(), 1usize..5).prop_map(|(workers, in_order, freq)| {
            Kind::FilterBelow {
                workers,
                in_order,
                freq,
            }
        }),
        (0usize..3, any::<bool>())
            .prop_map(|(workers, in_order)| Kind::MixBelow { workers, in_order }),
        (1usize..9).prop_map(|buffer| Kind::ShuffleOverFilter { buffer }),
        (1usize..9, 0usize..3, any::<bool>()).prop_map(|(buffer, workers, in_order)| {
            Kind::ShuffleUnderParMap {
                buffer,
                workers,
                in_order,
            }
        }),
        (1usize..9, 0usize..3)
            .prop_map(|(buffer, workers)| Kind::ShuffleOverParMap { buffer, workers }),
        (1usize..9, any::<bool>()).prop_map(|(buffer, round_robin)| Kind::ShuffleMix {
            buffer,
            round_robin
        }),
        (1usize..6).prop_map(|buffer| Kind::ShuffleOverBatch { buffer }),
        Just(Kind::FlatMap),
        (0usize..3).prop_map(|workers| Kind::FlatMapParMap { workers }),
        (1usize..4).prop_map(|buffer| Kind::Unbatch { buffer }),
    ]
}

fn job() -> impl Strategy<Value = Job> {
    (kind(), 0usize..80, 1usize..5, any::<u64>()).prop_map(|(kind, len, batch, seed)| Job {
        kind,
        len,
        batch,
        seed,
    })
}

/// Runs one job: N ranks, reshard to M, reshard to M2, finish; checks the
/// cut epoch item by item and the next epoch.
fn run_job(
    job: Job,
    worlds: (u64, u64, u64),
    before: u64,
    progress: (&[usize], &[usize]),
) -> std::result::Result<(), String> {
    let (n, m, m2) = worlds;
    elastic::check(&job.build(0, 1).unwrap().describe()).map_err(|e| e.to_string())?;
    let mut cut = Vec::new();
    let first = generation(&job, n, None, before, progress.0, &mut cut);
    let second_states: Vec<State> = elastic::reshard(&first, m)
        .map_err(|e| e.to_string())?
        .iter()
        .map(stored)
        .collect();
    let second = generation(&job, m, Some(&second_states), before, progress.1, &mut cut);
    let third: Vec<State> = elastic::reshard(&second, m2)
        .map_err(|e| e.to_string())?
        .iter()
        .map(stored)
        .collect();
    let (rest, next) = finish(&job, &third, before);
    cut.extend(rest);
    let expected = job.epoch_items();
    let cut =
        exactly_once(cut).map_err(|x| format!("item {x} delivered twice in the cut epoch"))?;
    if cut != expected {
        let lost: Vec<&u32> = expected
            .iter()
            .filter(|x| cut.binary_search(x).is_err())
            .collect();
        return Err(format!("cut epoch: lost {lost:?}"));
    }
    let next = exactly_once(next).map_err(|x| format!("item {x} twice in the next epoch"))?;
    if next != expected {
        return Err(format!(
            "next epoch: {} items, expected {}",
            next.len(),
            expected.len()
        ));
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512, 0x5eed_e1a5))]

    #[test]
    fn every_item_exactly_once_across_reshards(
        job in job(),
        n in 1u64..=8,
        m in 1u64..=8,
        m2 in 1u64..=8,
        before in 0u64..=1,
        progress0 in prop::collection::vec(0usize..12, 1..8),
        progress1 in prop::collection::vec(0usize..12, 1..8),
    ) {
        if let Err(e) = run_job(job, (n, m, m2), before, (&progress0, &progress1)) {
            prop_assert!(false, "{job:?} N={n} M={m} M2={m2} before={before}: {e}");
        }
    }
}

/// The states of a 4-rank job of `kind` after unequal progress.
fn four_ranks(job: &Job) -> Vec<State> {
    generation(job, 4, None, 0, &[1, 3, 0, 2], &mut Vec::new())
}

fn plain(len: usize) -> Job {
    Job {
        kind: Kind::Filter,
        len,
        batch: 2,
        seed: 5,
    }
}

fn reshard_err(states: &[State], m: u64) -> String {
    elastic::reshard(states, m).unwrap_err().to_string()
}

#[test]
fn incomplete_state_sets_are_refused() {
    let states = four_ranks(&plain(40));
    let err = reshard_err(&states[..3], 2);
    assert!(err.contains("the state of rank 3 is missing"), "{err}");
    let err = reshard_err(
        &[states[0].clone(), states[2].clone(), states[3].clone()],
        2,
    );
    assert!(err.contains("the state of rank 1 is missing"), "{err}");
    let mut twice = states.clone();
    twice[2] = states[1].clone();
    let err = reshard_err(&twice, 2);
    assert!(err.contains("rank 1 is given twice"), "{err}");
    let mut extra = states.clone();
    extra.push(states[0].clone());
    let err = reshard_err(&extra, 2);
    assert!(err.contains("incomplete state set"), "{err}");
    let err = reshard_err(&[], 2);
    assert!(err.contains("no states"), "{err}");
    let err = reshard_err(&states, 0);
    assert!(err.contains("world_size must be at least 1"), "{err}");
    // In any order, the complete set is accepted.
    let mut shuffled = states.clone();
    shuffled.reverse();
    assert_eq!(elastic::reshard(&shuffled, 3).unwrap().len(), 3);
}

#[test]
fn states_of_other_pipelines_are_refused() {
    let states = four_ranks(&plain(40));
    let other = four_ranks(&Job {
        batch: 3,
        ..plain(40)
    });
    let mut mixed = states.clone();
    mixed[2] = other[2].clone();
    let err = reshard_err(&mixed, 2);
    assert!(err.contains("rank 2 is from another pipeline"), "{err}");
    assert!(err.contains("batch_size=3"), "{err}");
    // Another seed: another global order.
    let other = four_ranks(&Job {
        seed: 6,
        ..plain(40)
    });
    mixed[2] = other[2].clone();
    let err = reshard_err(&mixed, 2);
    assert!(err.contains("rank 2 is from another pipeline"), "{err}");
    // Another job size.
    let two = generation(&plain(40), 2, None, 0, &[1], &mut Vec::new());
    mixed[2] = two[1].clone();
    let err = reshard_err(&mixed, 2);
    assert!(err.contains("jobs of different sizes"), "{err}");
}

#[test]
fn states_of_different_epochs_are_refused() {
    let job = plain(40);
    let states = four_ranks(&job);
    let later = generation(&job, 4, None, 1, &[1], &mut Vec::new());
    let mut mixed = states.clone();
    mixed[3] = later[3].clone();
    let err = reshard_err(&mixed, 2);
    assert!(err.contains("different epochs"), "{err}");
    assert!(err.contains("rank 3 in epoch 1"), "{err}");
}

#[test]
fn states_of_different_runs_are_refused() {
    let job = plain(40);
    let first = four_ranks(&job);
    // A state of a resharded run, with one of a plain run of the same size.
    let resharded = elastic::reshard(&first, 2).unwrap();
    let a = generation(&job, 2, Some(&resharded), 0, &[1, 2], &mut Vec::new());
    let plain_run = generation(&job, 2, None, 0, &[1, 1], &mut Vec::new());
    let err = reshard_err(&[a[0].clone(), plain_run[1].clone()], 3);
    assert!(err.contains("different runs or reshards"), "{err}");
    assert!(elastic::reshard(&a, 3).is_ok());
}

#[test]
fn pipelines_not_indexed_by_global_positions_are_refused() {
    let save = |root: Box<dyn Node<Item = u32>>| {
        let mut loader = Loader::new(root);
        let mut epoch = loader.epoch();
        let _ = epoch.next();
        epoch.state_dict().unwrap()
    };
    let data: Vec<u32> = (0..10).collect();
    let elastic_source = || source(0, 10, 1, 0, 1).unwrap();
    let cases: Vec<(Box<dyn Node<Item = u32>>, &str)> = vec![
        (
            IterableWrapper::new(0..10u32).boxed(),
            "IterableWrapper at /root",
        ),
        (
            MapStyleWrapper::new(
                data.clone(),
                SamplerWrapper::new(
                    ShardedSampler::new(SequentialSampler::new(10), 0, 1, Remainder::Pad).unwrap(),
                ),
            )
            .boxed(),
            "SamplerWrapper at /root/sampler",
        ),
        (elastic_source().cycle().boxed(), "Cycler at /root"),
        (
            IterableWrapper::new(0..10u32)
                .shuffle(4, 1)
                .unwrap()
                .boxed(),
            "IterableWrapper at /root/source",
        ),
        (
            MultiNodeWeightedSampler::new([("a", elastic_source())], [("a", 1.0)])
                .unwrap()
                .stop_criteria(StopCriteria::FirstDatasetExhausted)
                .boxed(),
            "FirstDatasetExhausted ends each rank's pass at its first source's end",
        ),
        (elastic_source().header(3).boxed(), "Header at /root"),
    ];
    for (root, needle) in cases {
        // Known from the description alone, before any state is taken.
        let err = elastic::check(&root.describe()).unwrap_err().to_string();
        assert!(err.contains(needle), "{needle}: {err}");
        let state = save(root);
        let err = reshard_err(&[state], 2);
        assert!(err.contains(needle), "{needle}: {err}");
        assert!(err.contains("cannot be resharded"), "{err}");
    }
}

#[test]
fn a_state_loads_only_into_its_own_rank() {
    let job = plain(20);
    let states = generation(&job, 4, None, 0, &[1], &mut Vec::new());
    let mut loader = Loader::new(job.build(1, 3).unwrap());
    let err = loader.load_state_dict(&states[2]).unwrap_err().to_string();
    assert!(err.contains("rank 2 of 4"), "{err}");
    assert!(err.contains("elastic::reshard"), "{err}");
    // The resharded state loads into the new rank's pipeline.
    let new = elastic::reshard(&states, 3).unwrap();
    loader.load_state_dict(&stored(&new[1])).unwrap();
}

#[test]
fn one_rank_combines_the_old_states_itself() {
    let job = Job {
        kind: Kind::Weighted {
            workers: 1,
            in_order: false,
        },
        ..plain(30)
    };
    let states = four_ranks(&job);
    let all = elastic::reshard(&states, 3).unwrap();
    for rank in 0..3 {
        let one = elastic::reshard_rank(&states, rank, 3).unwrap();
        assert_eq!(
            one.to_json().unwrap(),
            all[rank as usize].to_json().unwrap()
        );
    }
    let err = elastic::reshard_rank(&states, 3, 3)
        .unwrap_err()
        .to_string();
    assert!(err.contains("rank 3 is not below world_size 3"), "{err}");
}

#[test]
fn one_call_reshards_and_loads_and_a_plain_load_names_it() {
    let job = Job {
        kind: Kind::Weighted {
            workers: 1,
            in_order: false,
        },
        ..plain(30)
    };
    let mut delivered = Vec::new();
    let states = generation(&job, 4, None, 0, &[1, 3, 0, 2], &mut delivered);
    // Loaded as it is into a rank of another world size, the state is
    // refused at the first node that differs, naming the call that fits.
    let mut plain_load = Loader::new(job.build(1, 3).unwrap());
    let err = plain_load.load_state_dict(&states[1]).unwrap_err();
    assert!(matches!(err, Error::BadState { .. }), "{err}");
    assert!(err.to_string().contains("elastic::load_resharded"), "{err}");
    assert!(
        err.to_string()
            .contains("from a job of 4 ranks, this one has 3"),
        "{err}"
    );
    let resharded = elastic::reshard(&states, 3).unwrap();
    for rank in 0..3u64 {
        let mut loader = Loader::new(job.build(rank, 3).unwrap());
        elastic::load_resharded(&mut loader, &states, rank, 3).unwrap();
        // It holds what loading `reshard`'s state for this rank gives.
        let mut by_hand = Loader::new(job.build(rank, 3).unwrap());
        by_hand.load_state_dict(&resharded[rank as usize]).unwrap();
        assert_eq!(
            loader.state_dict().unwrap().to_json().unwrap(),
            by_hand.state_dict().unwrap().to_json().unwrap()
        );
        let epoch = loader.epoch();
        assert_eq!(epoch.index(), 0);
        for batch in epoch {
            delivered.extend(batch.unwrap());
        }
    }
    assert_eq!(exactly_once(delivered), Ok(job.epoch_items()));
    // A loader of another rank than the one named is refused, naming both.
    let mut wrong = Loader::new(job.build(0, 3).unwrap());
    let err = elastic::load_resharded(&mut wrong, &states, 1, 3)
        .unwrap_err()
        .to_string();
    assert!(err.contains("rank=1") && err.contains("rank=0"), "{err}");
}

#[test]
fn a_rank_with_an_empty_share_stays_in_its_peers_epoch() {
    let job = plain(8);
    let mut delivered = Vec::new();
    let old = generation(&job, 2, None, 0, &[3, 2], &mut delivered);
    let mut empty_shares = 0;
    let mut after = Vec::new();
    for rank in 0..8u64 {
        let mut loader = Loader::new(job.build(rank, 8).unwrap());
        elastic::load_resharded(&mut loader, &old, rank, 8).unwrap();
        // A state saved before the epoch starts still says it is the rest
        // of the epoch, and loads as such.
        let saved = stored(&loader.state_dict().unwrap());
        assert!(saved.get::<bool>("rest_of_epoch").unwrap());
        let mut again = Loader::new(job.build(rank, 8).unwrap());
        again.load_state_dict(&saved).unwrap();
        let mut epoch = again.epoch();
        assert_eq!(epoch.index(), 0, "rank {rank} of 8 left the cut epoch");
        let before = delivered.len();
        for batch in epoch.by_ref() {
            delivered.extend(batch.unwrap());
        }
        empty_shares += usize::from(delivered.len() == before);
        let end = stored(&epoch.state_dict().unwrap());
        assert!(!end.contains("rest_of_epoch"));
        after.push(end);
    }
    assert!(empty_shares > 0, "the case needs a rank with nothing left");
    assert_eq!(exactly_once(delivered), Ok(job.epoch_items()));
    // Every rank is in epoch 0, so the next checkpoint set reshards again.
    elastic::reshard(&after, 2).unwrap();
}

/// A new world size too large for one state per rank is refused by
/// `reshard` (it aborted on `capacity overflow`); `reshard_rank` writes one
/// rank's state of 2^40 ranks at no cost per rank, and the ranks that get
/// anything read the rest of the epoch exactly once between them.
#[test]
fn a_huge_new_world_is_refused_by_reshard_and_dealt_one_rank_at_a_time() {
    for job in [
        plain(30),
        Job {
            kind: Kind::ShuffleOverFilter { buffer: 4 },
            ..plain(30)
        },
    ] {
        let mut cut = Vec::new();
        let states = generation(&job, 4, None, 0, &[1, 3, 0, 2], &mut cut);
        for m in [u64::MAX, 1 << 40, (1 << 20) + 1] {
            let err = elastic::reshard(&states, m).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
            assert!(err.to_string().contains("call `reshard_rank`"), "{err}");
        }
        let err = elastic::reshard_rank(&states, 0, u64::MAX).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        assert!(err.to_string().contains("too many"), "{err}");
        let huge = 1u64 << 40;
        // Past the first 60 ranks (more than the positions left, holes
        // included), a rank's share is empty.
        for rank in (0..60).chain([huge - 1]) {
            let state = elastic::reshard_rank(&states, rank, huge).unwrap();
            let mut loader = Loader::new(job.build(rank, huge).unwrap());
            loader.load_state_dict(&stored(&state)).unwrap();
            let epoch = loader.epoch();
            // A rank with nothing left of the cut epoch is at the next one.
            if epoch.index() == 0 {
                cut.extend(epoch.flat_map(|batch| batch.unwrap()));
            }
        }
        cut.sort_unstable();
        assert_eq!(cut, job.epoch_items(), "{job:?}");
    }
}

/// The mixes of the new ranks draw from new streams: the same (seed, epoch,
/// rank, world size) as a fresh epoch of that rank, at its start.
#[test]
fn new_ranks_draw_from_their_own_streams() {
    let job = Job {
        kind: Kind::Weighted {
            workers: 0,
            in_order: true,
        },
        ..plain(30)
    };
    let states = four_ranks(&job);
    let new = elastic::reshard(&states, 2).unwrap();
    let rng = |s: &State| -> BTreeMap<String, u64> {
        let rng = s
            .child("root")
            .and_then(|r| r.child("source"))
            .and_then(|r| r.child("source"))
            .and_then(|r| r.child("rng"))
            .unwrap();
        rng.keys()
            .map(|k| (k.to_owned(), rng.get(k).unwrap()))
            .collect()
    };
    for (rank, state) in new.iter().enumerate() {
        let rng = rng(state);
        assert_eq!(rng["rank"], rank as u64);
        assert_eq!(rng["world_size"], 2);
        assert_eq!(rng["word_pos"], 0);
        assert_eq!(rng["seed"], job.seed);
    }
}

/// The state of the node at `keys` below the loader state's root.
fn node_at(state: &State, keys: &[&str]) -> State {
    keys.iter()
        .fold(state.child("root").unwrap(), |s, k| s.child(k).unwrap())
}

/// How many items the shuffler at `keys` holds in its buffer.
fn buffered(state: &State, keys: &[&str]) -> usize {
    node_at(state, keys)
        .value("buffer")
        .unwrap()
        .as_array()
        .unwrap()
        .len()
}

/// A shuffle of 6 over a filter, in batches of 2: its shuffler is at
/// `root/source`.
fn shuffled(len: usize) -> Job {
    Job {
        kind: Kind::ShuffleOverFilter { buffer: 6 },
        len,
        batch: 2,
        seed: 11,
    }
}

/// 8 ranks with full shuffle buffers into 1: the new rank holds all 40
/// buffered items (its buffer is 6), returns them before it pulls again,
/// saves and restores while over-full, and the job still delivers every
/// item once.
#[test]
fn eight_full_buffers_into_one_drain_before_pulling() {
    let job = shuffled(200);
    let mut delivered = Vec::new();
    let old = generation(&job, 8, None, 0, &[1, 2, 1, 3, 1, 1, 2, 1], &mut delivered);
    for state in &old {
        assert_eq!(buffered(state, &["source"]), 5, "a full buffer holds 5");
    }
    let new = elastic::reshard(&old, 1).unwrap();
    assert_eq!(buffered(&new[0], &["source"]), 40);
    let sampler_yielded = |state: &State| -> u64 {
        node_at(state, &["source", "source", "source", "source", "sampler"])
            .get("num_yielded")
            .unwrap()
    };
    assert_eq!(sampler_yielded(&new[0]), 0);

    // 6 batches (12 items) come from the buffer alone: the sampler has not
    // moved, and the saved buffer is still over-full.
    let mut loader = Loader::new(job.build(0, 1).unwrap());
    loader.load_state_dict(&stored(&new[0])).unwrap();
    let mut epoch = loader.epoch();
    for _ in 0..6 {
        delivered.extend(epoch.next().unwrap().unwrap());
    }
    let mid = stored(&epoch.state_dict().unwrap());
    drop(epoch);
    assert_eq!(buffered(&mid, &["source"]), 28);
    assert_eq!(sampler_yielded(&mid), 0, "it pulled while over-full");

    // The over-full state loads again; the rest of the epoch follows.
    let (rest, next) = finish(&job, &[mid], 0);
    delivered.extend(rest);
    assert_eq!(exactly_once(delivered), Ok(job.epoch_items()));
    assert_eq!(exactly_once(next), Ok(job.epoch_items()));
}

/// 2 ranks into 7: the 10 buffered items are dealt round-robin (ranks
/// differ by at most one), each new rank's shuffler on a stream of its own,
/// and the job delivers every item once.
#[test]
fn two_buffers_into_seven_ranks() {
    let job = shuffled(120);
    let mut delivered = Vec::new();
    let old = generation(&job, 2, None, 0, &[3, 1], &mut delivered);
    let new: Vec<State> = elastic::reshard(&old, 7)
        .unwrap()
        .iter()
        .map(stored)
        .collect();
    let shares: Vec<usize> = new.iter().map(|s| buffered(s, &["source"])).collect();
    assert_eq!(shares, [2, 2, 2, 1, 1, 1, 1]);
    let streams: std::collections::BTreeSet<u64> = new
        .iter()
        .map(|s| {
            node_at(s, &["source"])
                .child("rng")
                .unwrap()
                .get("stream")
                .unwrap()
        })
        .collect();
    assert_eq!(streams.len(), 7, "{streams:?}");
    let (rest, next) = finish(&job, &new, 0);
    delivered.extend(rest);
    assert_eq!(exactly_once(delivered), Ok(job.epoch_items()));
    assert_eq!(exactly_once(next), Ok(job.epoch_items()));
}

/// An over-full buffer in a state `reshard` did not write is still a bad
/// state, named at its path.
#[test]
fn an_over_full_buffer_of_an_ordinary_state_is_refused() {
    let build = || source(0, 40, 3, 0, 1).unwrap().shuffle(4, 9).unwrap();
    let mut loader = Loader::new(build());
    let mut epoch = loader.epoch();
    epoch.next().unwrap().unwrap();
    let mut state = stored(&epoch.state_dict().unwrap());
    drop(epoch);
    let mut root = state.child("root").unwrap();
    root.insert("buffer", [1u32, 2, 3, 4, 5, 6]).unwrap();
    state.insert_child("root", root);
    let mut fresh = Loader::new(build()).verify_checksum(false);
    let err = fresh.load_state_dict(&state).unwrap_err().to_string();
    assert!(
        err.contains("/root/buffer") && err.contains("a buffer of 4 items, the state holds 6"),
        "{err}"
    );
}

/// A `try_map` under `ErrorPolicy::SkipAtMost`: ranks read a sequential
/// order, and every third item is a bad record.
fn skipping(rank: u64, world: u64, at_most: u64) -> Result<Boxed> {
    let data: Vec<u32> = (0..90).collect();
    let sampler = ElasticSampler::new(SequentialSampler::new(data.len()), rank, world)?;
    Ok(MapStyleWrapper::new(data, sampler)
        .try_map(|x: u32| {
            if x.is_multiple_of(3) {
                Err(nodes_std::BoxError::from("bad"))
            } else {
                Ok(x)
            }
        })
        .on_error(ErrorPolicy::SkipAtMost(at_most))
        .batch(1)?
        .boxed())
}

/// The states of 4 ranks of `skipping` after `progress[r]` batches each.
fn skipping_states(at_most: u64, progress: [usize; 4]) -> Vec<State> {
    (0..4u64)
        .map(|rank| {
            let mut loader = Loader::new(skipping(rank, 4, at_most).unwrap());
            let mut epoch = loader.epoch();
            for _ in 0..progress[rank as usize] {
                epoch.next().unwrap().unwrap();
            }
            stored(&epoch.state_dict().unwrap())
        })
        .collect()
}

fn skipped(state: &State) -> u64 {
    node_at(state, &["source"])
        .child("errors")
        .unwrap()
        .get("skipped")
        .unwrap()
}

/// The job's skips so far are kept across a reshard, spread as evenly as
/// possible over the new ranks (not rank 0's count copied to every rank).
#[test]
fn skip_budgets_are_summed_and_spread() {
    let old = skipping_states(100, [3, 5, 0, 7]);
    let total: u64 = old.iter().map(skipped).sum();
    assert!(total >= 5, "{total}");
    for m in 1..=8u64 {
        let new = elastic::reshard(&old, m).unwrap();
        let shares: Vec<u64> = new.iter().map(skipped).collect();
        assert_eq!(shares.iter().sum::<u64>(), total, "M = {m}: {shares:?}");
        let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
        assert!(hi - lo <= 1, "M = {m}: {shares:?}");
        // The larger shares go to the first ranks.
        assert!(shares.windows(2).all(|w| w[0] >= w[1]), "{shares:?}");
    }
}

/// A new rank whose share of the job's skips reaches its budget ends its
/// pass at the next bad record, which no old rank would have yet.
#[test]
fn a_spent_job_budget_ends_the_new_rank_at_the_next_bad_record() {
    let old = skipping_states(4, [4, 4, 4, 4]);
    let counts: Vec<u64> = old.iter().map(skipped).collect();
    assert!(counts.iter().all(|&c| c < 4), "{counts:?}");
    assert!(counts.iter().sum::<u64>() >= 4, "{counts:?}");
    let new = elastic::reshard(&old, 1).unwrap();
    let mut loader = Loader::new(skipping(0, 1, 4).unwrap());
    loader.load_state_dict(&stored(&new[0])).unwrap();
    let items: Vec<Result<Vec<u32>>> = loader.epoch().collect();
    assert!(
        matches!(items.last(), Some(Err(_))),
        "the pass should end on a bad record: {items:?}"
    );
    assert!(items[..items.len() - 1].iter().all(Result::is_ok));
}

/// A node of the user's own that passes items through one for one, and says
/// so with `resume`.
#[derive(Node)]
#[node(resume = nodes_std::Resume::ForwardsCount)]
struct Tap<S> {
    #[node(child)]
    source: S,
}

impl<S: Node<Item = u32>> Node for Tap<S> {
    type Item = u32;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u32>> {
        self.source.next(cx)
    }
}

/// The same node without the promise.
#[derive(Node)]
struct Opaque<S> {
    #[node(child)]
    source: S,
}

impl<S: Node<Item = u32>> Node for Opaque<S> {
    type Item = u32;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u32>> {
        self.source.next(cx)
    }
}

/// Resharding dispatches on each node's declared `Resume`, never on its
/// name: a node the library has never heard of is resharded once it
/// promises to pass items through, and refused, by name and path, when it
/// does not.
#[test]
fn resharding_follows_the_declared_capability_not_the_name() {
    let tap = |rank, world| Tap {
        source: source(0, 10, 3, rank, world).unwrap(),
    };
    elastic::check(&tap(0, 1).describe()).unwrap();
    let opaque = Opaque {
        source: source(0, 10, 3, 0, 1).unwrap(),
    };
    let err = elastic::check(&opaque.describe()).unwrap_err().to_string();
    assert!(err.contains("Opaque at /"), "{err}");
    assert!(err.contains("cannot be resharded"), "{err}");

    // Two ranks read a little and save; three ranks finish the epoch.
    let mut delivered = Vec::new();
    let old: Vec<State> = (0..2)
        .map(|rank| {
            let mut loader = Loader::new(tap(rank, 2));
            let mut epoch = loader.epoch();
            for _ in 0..2 {
                delivered.push(epoch.next().unwrap().unwrap());
            }
            stored(&epoch.state_dict().unwrap())
        })
        .collect();
    let new = elastic::reshard(&old, 3).unwrap();
    for (rank, state) in new.iter().enumerate() {
        let mut loader = Loader::new(tap(rank as u64, 3));
        loader.load_state_dict(&stored(state)).unwrap();
        let epoch = loader.epoch();
        if epoch.index() != 0 {
            continue;
        }
        delivered.extend(epoch.map(Result::unwrap));
    }
    delivered.sort_unstable();
    assert_eq!(delivered, (0..10).collect::<Vec<u32>>());
}
