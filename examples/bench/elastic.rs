//! `reshard`: combining the states of 64 ranks into those of 48
//! (`nodes_std::elastic::reshard`), after unequal per-rank progress. Its cost
//! is linear in the positions past the job's common prefix, not in the
//! epoch's length; the baseline is parsing the 64 JSON checkpoints it reads.
//!
//! `reshard_stream`: the same over a streaming pipeline of 10,000 files
//! (shuffled, sharded, read by lines, shuffled in a 256-item buffer,
//! tokenized, packed, batched), every rank mid-file with a full shuffle
//! buffer and a partial pack; target 50 ms, JSON parsing excluded.

use std::hint::black_box;

use nodes_std::prelude::*;
use nodes_std::{BoxError, ElasticSampler, Files, elastic};
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

/// The streaming pipeline of `reshard_stream` over the files in `dir`.
fn streaming(
    dir: &std::path::Path,
    rank: u64,
    world: u64,
) -> Result<impl Node<Item = Vec<Vec<u32>>> + use<>> {
    let files = Files::in_dir(dir)?.shuffle_files(7).shard(rank, world)?;
    let tokens = files.read_lines().shuffle(256, 3)?.map(|line: String| {
        line.split(' ')
            .map(|w| w.len() as u32)
            .collect::<Vec<u32>>()
    });
    tokens.pack(100)?.batch(4)
}

/// `reshard_stream`: 64 ranks' states of [`streaming`] over `files` files
/// of 64 lines, resharded into 48.
fn reshard_stream(files: usize) -> Res<()> {
    let (old, new) = (64u64, 48u64);
    let dir =
        std::env::temp_dir().join(format!("nodes-bench-reshard-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = (|| -> Res<()> {
        for f in 0..files {
            let text: String = (0..64)
                .map(|l| format!("{f} {l} the quick brown fox\n"))
                .collect();
            std::fs::write(dir.join(format!("{f:05}.txt")), text)?;
        }
        let mut states = Vec::new();
        for rank in 0..old {
            let mut loader = Loader::new(streaming(&dir, rank, old)?);
            let mut epoch = loader.epoch();
            // Ranks a few batches apart, each past the buffer's first fill,
            // mid-file (files of 64 lines) with a pack begun.
            let mut steps = 1 + rank % 5;
            let mut state = None;
            for _ in 0..100 {
                for _ in 0..steps {
                    black_box(epoch.next().transpose()?);
                }
                let saved = State::from_json(&epoch.state_dict()?.to_json()?)?;
                if mid_everything(&saved) {
                    state = Some(saved);
                    break;
                }
                steps = 1;
            }
            let state = state.ok_or("no state mid-file with a full buffer and a partial pack")?;
            states.push(state);
        }
        let (took, out) = best_of(5, || Ok(elastic::reshard(&states, new)?))?;
        assert_eq!(out.len(), new as usize);
        let ms = took.as_secs_f64() * 1e3;
        println!(
            "{}",
            json!({
                "case": "reshard_stream",
                "variant": format!("N={old} M={new} files={files} shuffle=256 pack=100"),
                "items": files * 64,
                "reshard_ms": round_to(ms, 3),
                "framework_per_s": (1.0 / took.as_secs_f64()).round(),
                "baseline_per_s": null,
                "ratio": null,
                "target": null,
                "target_ms": STREAM_TARGET_MS,
                "met": ms <= STREAM_TARGET_MS,
            })
        );
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Whether a state of [`streaming`] has a full shuffle buffer (all but the
/// item just returned), a partial pack and a file begun.
fn mid_everything(state: &State) -> bool {
    let json = state.to_value();
    let len = |at: &str| {
        json.pointer(at)
            .and_then(|v| v.as_array())
            .map_or(0, Vec::len)
    };
    let reading = json.pointer("/root/source/source/source/source/path");
    len("/root/source/source/source/buffer") >= 255
        && len("/root/source/carry") > 0
        && reading.is_some_and(|p| !p.is_null())
}

/// The longest acceptable `reshard_stream`.
const STREAM_TARGET_MS: f64 = 50.0;

pub(crate) fn run(quick: bool) -> Res<()> {
    reshard_stream(if quick { 1_000 } else { 10_000 })?;
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
