//! Mixing three sources by weight, under each stop criterion, printing the
//! per-source counts and the realised mix. Exits non-zero if a criterion does
//! not behave as documented.
//!
//! `cargo run --release --example mixing`

use std::collections::BTreeMap;
use std::process::ExitCode;

use nodes_std::prelude::*;
use nodes_std::{MultiNodeWeightedSampler, StopCriteria, Tagged};

const SIZES: [(&str, u32); 3] = [("books", 400), ("code", 150), ("web", 1000)];
const WEIGHTS: [(&str, f64); 3] = [("books", 0.3), ("code", 0.2), ("web", 0.5)];

fn mix(stop: StopCriteria) -> Result<impl Node<Item = Tagged<u32>>> {
    let sources = SIZES.map(|(name, n)| (name, IterableWrapper::new(0..n)));
    Ok(MultiNodeWeightedSampler::new(sources, WEIGHTS)?
        .stop_criteria(stop)
        .seed(11)
        .tagged())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mixing: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> std::result::Result<(), Box<dyn std::error::Error>> {
    println!("sources: {SIZES:?}\nweights: {WEIGHTS:?}\n");
    for stop in [
        StopCriteria::FirstDatasetExhausted,
        StopCriteria::AllDatasetsExhausted,
        StopCriteria::CycleUntilAllDatasetsExhausted,
    ] {
        let mut loader = Loader::new(mix(stop)?);
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut total = 0u64;
        for item in loader.epoch() {
            *counts.entry(item?.source.to_string()).or_default() += 1;
            total += 1;
        }
        println!("{stop}: {total} items");
        for (name, weight) in WEIGHTS {
            let n = counts.get(name).copied().unwrap_or(0);
            println!(
                "  {name:<6} {n:>5} items  share {:>5.1}%  (weight {:>4.1}%)",
                100.0 * n as f64 / total as f64,
                100.0 * weight
            );
        }
        let size = |name: &str| {
            SIZES
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |(_, s)| u64::from(*s))
        };
        let exhausted = |name: &str| counts.get(name).copied().unwrap_or(0) >= size(name);
        let ok = match stop {
            // Stops as soon as one source runs out: exactly one is exhausted.
            StopCriteria::FirstDatasetExhausted => {
                SIZES.iter().filter(|(n, _)| exhausted(n)).count() == 1
            }
            // Every source is drained, none repeated.
            StopCriteria::AllDatasetsExhausted => {
                SIZES.iter().all(|(n, s)| counts[*n] == u64::from(*s))
            }
            // Every source seen at least once in full; smaller ones cycled.
            _ => {
                SIZES.iter().all(|(n, _)| exhausted(n))
                    && total > SIZES.iter().map(|(_, s)| u64::from(*s)).sum()
            }
        };
        if !ok {
            return Err(format!("{stop} did not stop as documented: {counts:?}").into());
        }
    }

    // CycleForever never ends by itself: take a fixed number and check the mix.
    let n = 100_000;
    let mut loader = Loader::new(mix(StopCriteria::CycleForever)?.header(n));
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for item in loader.epoch() {
        *counts.entry(item?.source.to_string()).or_default() += 1;
    }
    println!(
        "{}: {n} items (taken with .header({n}))",
        StopCriteria::CycleForever
    );
    for (name, weight) in WEIGHTS {
        let share = counts[name] as f64 / n as f64;
        println!(
            "  {name:<6} share {:>5.2}%  (weight {:>4.1}%)",
            100.0 * share,
            100.0 * weight
        );
        if (share - weight).abs() > 0.01 {
            return Err(
                format!("{name}: realised share {share} is not within 1% of {weight}").into(),
            );
        }
    }
    Ok(())
}
