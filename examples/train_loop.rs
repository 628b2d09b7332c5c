//! The main example: a training-style loop over a map-style dataset, with a
//! checkpoint taken mid-epoch and resumed by a second process.
//!
//! Pipeline: a dataset of synthetic 4 KiB "images" → seeded shuffle (a random
//! sampler) → `ParallelMapper` decode on 4 threads → `Batcher` (32) → `Loader`,
//! for two epochs.
//!
//! `cargo run --release --example train_loop` runs the first part: it trains
//! until the middle of the second epoch, writes the loader's state (and what
//! it has consumed so far) to a JSON file, and stops. It then starts itself
//! again as a new process with `--resume FILE`, which restores the state into
//! a freshly built pipeline, finishes both epochs, and checks that the joined
//! output equals an uninterrupted run. Exits non-zero if it does not.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use nodes_std::prelude::*;
use nodes_std::{BoxError, Dataset, ParallelOptions};
use serde::{Deserialize, Serialize};

pub(crate) const RECORDS: usize = 4096;
const RECORD_BYTES: usize = 4096;
pub(crate) const BATCH: usize = 32;
const EPOCHS: u64 = 2;
pub(crate) const SEED: u64 = 2024;
/// Where the first process stops: this many batches into the second epoch.
const STOP_AT_BATCH: usize = 50;

/// Synthetic images: record `i` is 4 KiB of bytes derived from `i`.
struct SyntheticImages;

impl Dataset for SyntheticImages {
    type Item = (u32, Vec<u8>);

    fn len(&self) -> usize {
        RECORDS
    }

    fn get_item(&self, index: usize) -> Result<(u32, Vec<u8>), BoxError> {
        let mut x = (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let bytes = (0..RECORD_BYTES)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        Ok((u32::try_from(index)?, bytes))
    }
}

/// A decoded sample: the record id, a label and a few features.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    id: u32,
    label: u8,
    features: [f32; 4],
}

/// "Decoding": a pass over the bytes, as a real decoder would make.
fn decode((id, bytes): (u32, Vec<u8>)) -> Result<Sample, BoxError> {
    if bytes.len() != RECORD_BYTES {
        return Err(format!("record {id} has {} bytes", bytes.len()).into());
    }
    let mut sums = [0u64; 4];
    for (i, b) in bytes.iter().enumerate() {
        sums[i % 4] += u64::from(*b);
    }
    let per = (RECORD_BYTES / 4) as f32;
    Ok(Sample {
        id,
        label: bytes[0] % 10,
        features: sums.map(|s| s as f32 / per),
    })
}

/// The pipeline (the `describe` example prints its graph).
pub(crate) fn pipeline() -> Result<impl Node<Item = Vec<Sample>>> {
    MapStyleWrapper::shuffled(SyntheticImages, SEED)
        .par_map(decode, ParallelOptions::new(4))?
        .batch(BATCH)
}

/// What a "training step" keeps of a batch: the ids it saw, in order.
fn train_step(batch: &[Sample]) -> Vec<u32> {
    batch.iter().map(|s| s.id).collect()
}

#[derive(Serialize, Deserialize)]
struct Checkpoint {
    loader: State,
    /// The ids consumed before the checkpoint, per epoch.
    consumed: Vec<Vec<u32>>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("--resume") => match args.get(2) {
            Some(file) => resume(Path::new(file)),
            None => Err("--resume needs a checkpoint file".into()),
        },
        Some(other) => {
            Err(format!("unknown argument {other:?}; use no argument or --resume FILE").into())
        }
        None => first_part().and_then(|file| {
            println!("starting a second process: --resume {}", file.display());
            let status = Command::new(std::env::current_exe()?)
                .arg("--resume")
                .arg(&file)
                .status()?;
            let _ = std::fs::remove_file(&file);
            if status.success() {
                Ok(())
            } else {
                Err(format!("the resumed process failed: {status}").into())
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("train_loop: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T> = std::result::Result<T, BoxError>;

/// Trains until `STOP_AT_BATCH` batches into the second epoch, then saves.
fn first_part() -> Res<PathBuf> {
    let mut loader = Loader::new(pipeline()?);
    let mut consumed: Vec<Vec<u32>> = Vec::new();
    for epoch_no in 0..EPOCHS {
        let mut ids = Vec::new();
        let mut epoch = loader.epoch();
        let started = (Instant::now(), 0);
        let mut batches = 0;
        while let Some(batch) = epoch.next() {
            ids.extend(train_step(&batch?));
            batches += 1;
            progress(epoch_no, epoch.num_yielded(), ids.len(), started);
            if epoch_no == 1 && batches == STOP_AT_BATCH {
                let state = epoch.state_dict()?;
                consumed.push(ids);
                let file = std::env::temp_dir()
                    .join(format!("train_loop.{}.ckpt.json", std::process::id()));
                let json = serde_json::to_string_pretty(&Checkpoint {
                    loader: state,
                    consumed,
                })?;
                std::fs::write(&file, json)?;
                println!(
                    "\ncheckpoint at epoch {epoch_no}, batch {batches} -> {}",
                    file.display()
                );
                return Ok(file);
            }
        }
        println!();
        consumed.push(ids);
    }
    Err("the run ended before the checkpoint point".into())
}

/// Restores the checkpoint into a fresh pipeline, finishes, and checks.
fn resume(file: &Path) -> Res<()> {
    let checkpoint: Checkpoint = serde_json::from_str(&std::fs::read_to_string(file)?)?;
    let mut consumed = checkpoint.consumed;
    let mut loader = Loader::new(pipeline()?);
    loader.load_state_dict(&checkpoint.loader)?;
    println!(
        "resumed into a fresh pipeline:\n{}",
        loader.describe().render_text()
    );
    let first_epoch = consumed.len() as u64 - 1;
    for epoch_no in first_epoch..EPOCHS {
        if epoch_no > first_epoch {
            consumed.push(Vec::new());
        }
        let ids = consumed.last_mut().ok_or("no epoch in the checkpoint")?;
        let mut epoch = loader.epoch();
        let started = (Instant::now(), ids.len());
        while let Some(batch) = epoch.next() {
            ids.extend(train_step(&batch?));
            progress(epoch_no, epoch.num_yielded(), ids.len(), started);
        }
        println!();
    }

    // The reference: the same pipeline, uninterrupted, in this process.
    let mut reference = Loader::new(pipeline()?);
    let expected: Vec<Vec<u32>> = (0..EPOCHS)
        .map(|_| {
            reference
                .epoch()
                .map(|b| b.map(|b| train_step(&b)))
                .collect::<Result<Vec<_>>>()
                .map(|v| v.concat())
        })
        .collect::<Result<_>>()?;
    for (e, (got, want)) in consumed.iter().zip(&expected).enumerate() {
        let mut sorted = want.clone();
        sorted.sort_unstable();
        if sorted != (0..RECORDS as u32).collect::<Vec<_>>() {
            return Err(format!("epoch {e} of the reference run is not a permutation").into());
        }
        if got != want {
            let at = got
                .iter()
                .zip(want)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(want.len()));
            return Err(format!(
                "epoch {e}: resumed run differs from the uninterrupted one at sample {at} ({} vs {} samples)",
                got.len(),
                want.len()
            )
            .into());
        }
    }
    if expected[0] == expected[1] {
        return Err("both epochs have the same order: the shuffle did not advance".into());
    }
    println!(
        "OK: the resumed run joined with the first part equals the uninterrupted run ({} epochs x {RECORDS} samples, each exactly once)",
        EPOCHS
    );
    Ok(())
}

/// One progress line, rewritten in place; the rate counts samples since `from`.
fn progress(epoch: u64, batches: u64, samples: usize, (started, from): (Instant, usize)) {
    if batches.is_multiple_of(16) {
        let rate = (samples - from) as f64 / started.elapsed().as_secs_f64().max(1e-9);
        print!(
            "\repoch {epoch}  batch {batches:>4}  samples {samples:>5}/{RECORDS}  {rate:>9.0} samples/s"
        );
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
}
