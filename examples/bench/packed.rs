//! `realistic_packed`: the realistic corpus packed for training, every
//! stage a stock node: `Files` → `read_jsonl` → tokenize → shuffle 256 →
//! weighted mix 0.8/0.2 → `pack(512)` → `batch(8)`. It is the Rust side of
//! the Python bench (`nodes-py/bench/bench.py`), which builds the same
//! pipeline from Python and reads these figures from the same run: with
//! `BENCH_PACKED_FILES=common.jsonl,rare.jsonl` it reads those files
//! instead of generating the corpus, so that both sides read the same bytes.
//!
//! Printed: records per second (`framework_per_s`), batches, tokens, and a
//! checksum of the batches (`sum`) that the Python side reproduces.

use std::path::PathBuf;

use nodes_std::prelude::*;
use serde::Deserialize;
use serde_json::json;

use crate::corpus::{Corpus, VOCAB_SIZE, fnv1a};
use crate::{Res, best_of, round_to};

const SEQ_LEN: usize = 512;
const BATCH: usize = 8;
const SHUFFLE: usize = 256;
const SEEDS: [u64; 2] = [11, 12];
const MIX_SEED: u64 = 13;
const RUNS: usize = 3;

#[derive(Deserialize)]
struct Record {
    text: String,
}

fn tokens(record: Record) -> Vec<u32> {
    let words = record.text.split_whitespace();
    words
        .map(|w| (fnv1a(w.as_bytes()) % VOCAB_SIZE) as u32)
        .collect()
}

fn pipeline(files: &[PathBuf; 2]) -> Res<impl Node<Item = Vec<Vec<u32>>> + use<>> {
    let source = |file: &PathBuf, seed: u64| -> Res<_> {
        Ok(Files::list([file])?
            .read_jsonl::<Record>()
            .map(tokens)
            .shuffle(SHUFFLE, seed)?)
    };
    let sources = [
        ("common", source(&files[0], SEEDS[0])?),
        ("rare", source(&files[1], SEEDS[1])?),
    ];
    let mix = MultiNodeWeightedSampler::new(sources, [("common", 0.8), ("rare", 0.2)])?
        .stop_criteria(StopCriteria::AllDatasetsExhausted)
        .seed(MIX_SEED);
    Ok(mix.pack(SEQ_LEN)?.batch(BATCH)?)
}

/// Runs the case over the corpus, or over `BENCH_PACKED_FILES`.
pub(crate) fn run(quick: bool) -> Res<()> {
    let (files, _corpus, records) = match std::env::var("BENCH_PACKED_FILES") {
        Ok(list) => {
            let paths: Vec<PathBuf> = list.split(',').map(PathBuf::from).collect();
            let [common, rare] = <[PathBuf; 2]>::try_from(paths).map_err(|_| "two files")?;
            let records = [&common, &rare]
                .iter()
                .map(|p| Ok(std::fs::read_to_string(p)?.lines().count() as u64))
                .sum::<Res<u64>>()?;
            ([common, rare], None, records)
        }
        Err(_) => {
            let corpus = Corpus::generate(if quick { 10 } else { 1 })?;
            let paths = [
                corpus.files[0].path().to_owned(),
                corpus.files[1].path().to_owned(),
            ];
            let records = corpus.total_records();
            (paths, Some(corpus), records)
        }
    };
    let (took, (batches, tokens, sum)) = best_of(RUNS, || {
        let (mut batches, mut tokens, mut sum) = (0u64, 0u64, 0u64);
        for batch in pipeline(&files)?.start()? {
            let batch = batch?;
            batches += 1;
            for row in &batch {
                tokens += row.len() as u64;
                sum = row
                    .iter()
                    .fold(sum, |s, &t| s.wrapping_mul(31).wrapping_add(u64::from(t)));
            }
        }
        Ok((batches, tokens, sum))
    })?;
    let best = took.as_secs_f64();
    println!(
        "{}",
        json!({
            "case": "realistic_packed",
            "items": records,
            "framework_per_s": (records as f64 / best).round(),
            "unit": "records",
            "seconds": round_to(best, 4),
            "batches": batches,
            "tokens": tokens,
            "sum": sum.to_string(),
            "pipeline": "Files -> read_jsonl -> tokenize -> shuffle 256 -> mix 0.8/0.2 -> pack 512 -> batch 8",
            "compare": "nodes-py/bench/bench.py runs the same pipeline from Python against this line",
        })
    );
    Ok(())
}
