//! `reshard`: combining the states of 64 ranks into those of 48
//! (`nodes_std::elastic::reshard`), after unequal per-rank progress. Its cost
//! is linear in the positions past the job's common prefix, not in the
//! epoch's length; the baseline is parsing the 64 JSON checkpoints it reads.

use std::hint::black_box;

use nodes_std::prelude::*;
use nodes_std::{BoxError, ElasticSampler, elastic};
use serde_json::json;

use crate::{Res, best_of, round_to};

/// Dataset size: the epoch is far longer than what any reshard looks at.
const LEN: usize = 10_000_000;
const BATCH: usize = 32;
const TARGET_MS: f64 = 10.0;

/// Items computed from their index: no memory per item.
struct Ids;

impl Dataset for Ids {
    type Item = u64;
    fn len(&self) -> usize {
        LEN
    }
    fn get_item(&self, index: usize) -> std::result::Result<u64, BoxError> {
        Ok(index as u64)
    }
}

fn pipeline(rank: u64, world: u64) -> Result<impl Node<Item = Vec<u64>>> {
    let sampler = ElasticSampler::new(RandomSampler::new(LEN, 7), rank, world)?;
    MapStyleWrapper::new(Ids, sampler)
        .par_map(Ok, ParallelOptions::new(2).in_order(false))?
        .filter(|x| x % 11 != 0)
        .batch(BATCH)
}

/// The JSON checkpoints of `world` ranks, rank `r` after `steps(r)` batches.
fn checkpoints(world: u64, steps: impl Fn(u64) -> u64) -> Res<Vec<String>> {
    (0..world)
        .map(|rank| {
            let mut loader = Loader::new(pipeline(rank, world)?);
            let mut epoch = loader.epoch();
            for _ in 0..steps(rank) {
                black_box(epoch.next().transpose()?);
            }
            Ok(epoch.state_dict()?.to_json()?)
        })
        .collect()
}

pub(crate) fn run(quick: bool) -> Res<()> {
    let (old, new) = (64u64, 48u64);
    // Ranks of a data-parallel job move in step, a few batches apart (plus
    // the par_map's read-ahead); the wide variant spreads them over 400.
    // The target applies to the first; the second shows the cost growing
    // with the positions past the prefix (not with the epoch's length).
    let spreads: &[(&str, u64, Option<f64>)] = if quick {
        &[("skew 0-8 batches", 8, Some(TARGET_MS))]
    } else {
        &[
            ("skew 0-8 batches", 8, Some(TARGET_MS)),
            ("skew 0-400 batches", 400, None),
        ]
    };
    for &(label, spread, target_ms) in spreads {
        let jsons = checkpoints(old, |r| 100 + (r * 2_654_435_761) % (spread + 1))?;
        let (parse, states) = best_of(5, || {
            jsons
                .iter()
                .map(|j| State::from_json(j).map_err(Into::into))
                .collect::<Res<Vec<State>>>()
        })?;
        let (took, out) = best_of(5, || Ok(elastic::reshard(&states, new)?))?;
        assert_eq!(out.len(), new as usize);
        // What the reshard had to look at: the positions between the first
        // one no rank read and the last one some rank did.
        let consumed: Vec<(u64, u64)> = (0..old)
            .map(|r| {
                let k = 100 + (r * 2_654_435_761) % (spread + 1);
                (r, k)
            })
            .collect();
        let items_read = |k: u64| k * BATCH as u64 * 11 / 10;
        let low = consumed
            .iter()
            .map(|&(_, k)| items_read(k))
            .min()
            .unwrap_or(0)
            * old;
        let high = consumed
            .iter()
            .map(|&(_, k)| items_read(k))
            .max()
            .unwrap_or(0)
            * old;
        let ms = took.as_secs_f64() * 1e3;
        println!(
            "{}",
            json!({
                "case": "reshard",
                "variant": format!("N={old} M={new} {label}"),
                "items": LEN,
                "reshard_ms": round_to(ms, 3),
                "parse_ms": round_to(parse.as_secs_f64() * 1e3, 3),
                "positions_past_prefix_approx": high - low,
                "framework_per_s": (1.0 / took.as_secs_f64()).round(),
                "baseline_per_s": (1.0 / parse.as_secs_f64()).round(),
                "ratio": round_to(parse.as_secs_f64() / took.as_secs_f64(), 3),
                "target": null,
                "target_ms": target_ms,
                "met": target_ms.map(|t| ms <= t),
            })
        );
    }
    Ok(())
}
