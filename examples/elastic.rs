//! Changing the number of ranks mid-epoch: 4 ranks (threads) read a mix of
//! two map-style datasets (par_map decode, shuffle buffer, filter, batch),
//! save at different per-rank progress, resume on 3 ranks, save again,
//! resume on 6 ranks and finish the epoch. The items in the shuffle buffers
//! at each save travel in the states to the new ranks. Exits non-zero unless every item of the epoch was
//! delivered exactly once across the job, checked item by item.
//!
//! `cargo run --release --example elastic`

use std::collections::BTreeMap;
use std::process::ExitCode;

use nodes_std::prelude::*;
use nodes_std::{ElasticSampler, MultiNodeWeightedSampler, StopCriteria, elastic};

const SEED: u64 = 2026;
const BOOKS: u32 = 3_000;
const WEB: u32 = 1_200;
const BATCH: usize = 16;

/// An item: its source and its index there.
type Item = (u8, u32);

/// Whether the filter keeps an item (it drops one in seven).
fn keep(item: &Item) -> bool {
    item.1 % 7 != 3
}

/// Rank `rank` of `world`'s pipeline: two map-style sources, each read
/// through an ElasticSampler, decoded on 2 threads and shuffled in a buffer
/// of 64, mixed 0.7/0.3 until both are exhausted, filtered, batched.
fn pipeline(rank: u64, world: u64) -> Result<impl Node<Item = Vec<Item>>> {
    let source = |tag: u8, len: u32, seed: u64| -> Result<_> {
        let data: Vec<u32> = (0..len).collect();
        let sampler = ElasticSampler::new(RandomSampler::new(len as usize, seed), rank, world)?;
        MapStyleWrapper::new(data, sampler)
            .par_map(
                move |i| Ok((tag, i)),
                ParallelOptions::new(2).in_order(tag == 0),
            )?
            .shuffle(64, seed ^ 0x5eed)
    };
    MultiNodeWeightedSampler::new(
        [
            ("books", source(0, BOOKS, SEED)?),
            ("web", source(1, WEB, SEED + 1)?),
        ],
        [("books", 0.7), ("web", 0.3)],
    )?
    .stop_criteria(StopCriteria::AllDatasetsExhausted)
    .seed(SEED)
    .rank(rank, world)?
    .filter(keep)
    .batch(BATCH)
}

/// Runs `world` ranks on threads. Rank `r` resumes its share of the job
/// that saved `states` (or starts the epoch), takes at most `steps(r)`
/// batches and saves its state as JSON. Returns the items each rank trained
/// on and the saved states.
fn run_ranks(
    world: u64,
    states: Option<&[State]>,
    steps: impl Fn(u64) -> usize + Sync,
) -> Result<(Vec<Item>, Vec<String>)> {
    let results: Vec<Result<(Vec<Item>, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let steps = &steps;
                scope.spawn(move || -> Result<(Vec<Item>, String)> {
                    let mut loader = Loader::new(pipeline(rank, world)?);
                    if let Some(states) = states {
                        elastic::load_resharded(&mut loader, states, rank, world)?;
                    }
                    let mut trained = Vec::new();
                    // Still epoch 0, for a rank with nothing left of it too.
                    let mut epoch = loader.epoch();
                    assert_eq!(epoch.index(), 0, "rank {rank} of {world}");
                    for _ in 0..steps(rank) {
                        match epoch.next() {
                            Some(batch) => trained.extend(batch?),
                            None => break,
                        }
                    }
                    Ok((trained, epoch.state_dict()?.to_json()?))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank panicked"))
            .collect()
    });
    let mut items = Vec::new();
    let mut saved = Vec::new();
    for (rank, result) in results.into_iter().enumerate() {
        let (trained, state) = result?;
        println!("  rank {rank}: {} items", trained.len());
        items.extend(trained);
        saved.push(state);
    }
    Ok((items, saved))
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("elastic: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let mut delivered: Vec<Item> = Vec::new();

    println!("4 ranks, unequal progress, then save:");
    let (items, saved) = run_ranks(4, None, |rank| 5 + 6 * rank as usize)?;
    delivered.extend(items);
    let states: Vec<State> = saved
        .iter()
        .map(|s| State::from_json(s))
        .collect::<Result<_>>()?;

    println!("resume on 3 ranks, unequal progress, then save:");
    let (items, saved) = run_ranks(3, Some(&states), |rank| 8 + 5 * rank as usize)?;
    delivered.extend(items);
    let states: Vec<State> = saved
        .iter()
        .map(|s| State::from_json(s))
        .collect::<Result<_>>()?;

    println!("resume on 6 ranks, to the end of the epoch:");
    let (items, _) = run_ranks(6, Some(&states), |_| usize::MAX)?;
    delivered.extend(items);

    // Item by item: every item of the epoch that the filter keeps, once.
    let mut counts: BTreeMap<Item, u32> = BTreeMap::new();
    for item in &delivered {
        *counts.entry(*item).or_default() += 1;
    }
    let expected: Vec<Item> = (0..BOOKS)
        .map(|i| (0, i))
        .chain((0..WEB).map(|i| (1, i)))
        .filter(keep)
        .collect();
    let repeated: Vec<_> = counts.iter().filter(|&(_, &c)| c > 1).collect();
    let lost: Vec<_> = expected
        .iter()
        .filter(|i| !counts.contains_key(i))
        .collect();
    let foreign = counts.keys().filter(|i| !keep(i)).count();
    println!(
        "epoch 0: {} items delivered across 4 -> 3 -> 6 ranks, {} expected; {} lost, {} repeated, {} filtered items delivered",
        delivered.len(),
        expected.len(),
        lost.len(),
        repeated.len(),
        foreign
    );
    if !lost.is_empty() || !repeated.is_empty() || foreign > 0 || delivered.len() != expected.len()
    {
        return Err(format!(
            "not exactly once: lost {:?}, repeated {:?}",
            &lost[..lost.len().min(10)],
            &repeated[..repeated.len().min(10)]
        )
        .into());
    }
    println!("every item of the epoch exactly once");
    Ok(())
}
