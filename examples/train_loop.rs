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
//!
//! Both loops are driven by the loader's epoch number, `epoch.index()`, which
//! every checkpoint carries: a checkpoint taken mid-epoch resumes that epoch,
//! one taken at the end of an epoch resumes with the next, and the loop stops
//! after `EPOCHS` whatever the point it resumed from. (A loop counting epochs
//! itself would run one epoch too many after an end-of-epoch checkpoint.)
//!
//! `--resume` trusts nothing in the file: it reads at most
//! `MAX_CHECKPOINT_BYTES`, the loader verifies its state (shape, ranges,
//! checksum), and what the file claims was consumed must agree with that
//! state before the run goes on, and with the uninterrupted run at the end.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use nodes_std::prelude::*;
use nodes_std::{BoxError, Dataset, ParallelOptions};
use serde::{Deserialize, Serialize};

pub(crate) const RECORDS: usize = 4096;
const RECORD_BYTES: usize = 4096;
pub(crate) const BATCH: usize = 32;
pub(crate) const EPOCHS: u64 = 2;
pub(crate) const SEED: u64 = 2024;
/// Batches in an epoch.
pub(crate) const BATCHES_PER_EPOCH: u64 = RECORDS.div_ceil(BATCH) as u64;
/// Where the first process stops: the epoch, and how many batches into it.
const STOP_AT: (u64, u64) = (1, 50);
/// The largest checkpoint file `--resume` reads. This example's are under
/// 100 KiB; anything near the limit is not one of them.
pub(crate) const MAX_CHECKPOINT_BYTES: u64 = 16 << 20;

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

/// What the first process saves.
#[derive(Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    pub(crate) loader: State,
    /// The ids consumed before the checkpoint, per epoch (the last one is
    /// the epoch the loader state is in).
    pub(crate) consumed: Vec<Vec<u32>>,
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

pub(crate) type Res<T> = std::result::Result<T, BoxError>;

/// Trains until `STOP_AT`, then saves a checkpoint file.
fn first_part() -> Res<PathBuf> {
    let checkpoint = train_until(STOP_AT)?;
    let file = std::env::temp_dir().join(format!("train_loop.{}.ckpt.json", std::process::id()));
    std::fs::write(&file, serde_json::to_string_pretty(&checkpoint)?)?;
    let (epoch, batches) = STOP_AT;
    println!(
        "checkpoint at epoch {epoch}, batch {batches} -> {}",
        file.display()
    );
    Ok(file)
}

/// Trains from the start until `batches` batches into epoch `stop_epoch`
/// (`BATCHES_PER_EPOCH` for its end), and returns the checkpoint taken there.
pub(crate) fn train_until((stop_epoch, stop_batches): (u64, u64)) -> Res<Checkpoint> {
    let mut loader = Loader::new(pipeline()?);
    let mut consumed: Vec<Vec<u32>> = Vec::new();
    loop {
        let mut epoch = loader.epoch();
        let index = epoch.index();
        if index >= EPOCHS {
            return Err("the run ended before the checkpoint point".into());
        }
        let mut ids = Vec::new();
        let started = (Instant::now(), 0);
        while let Some(batch) = epoch.next() {
            ids.extend(train_step(&batch?));
            progress(index, epoch.num_yielded(), ids.len(), started);
            if (index, epoch.num_yielded()) == (stop_epoch, stop_batches) {
                println!();
                consumed.push(ids);
                return Ok(Checkpoint {
                    loader: epoch.state_dict()?,
                    consumed,
                });
            }
        }
        println!();
        consumed.push(ids);
    }
}

/// Reads a checkpoint file, refusing one larger than `MAX_CHECKPOINT_BYTES`
/// (without reading more than that of it: `--resume /dev/zero` fails at once).
pub(crate) fn read_checkpoint(file: &Path) -> Res<Checkpoint> {
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_CHECKPOINT_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| format!("reading {}: {e}", file.display()))?;
    if text.len() as u64 > MAX_CHECKPOINT_BYTES {
        return Err(format!(
            "{} is larger than {} MiB: not a checkpoint of this example",
            file.display(),
            MAX_CHECKPOINT_BYTES >> 20
        )
        .into());
    }
    serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a checkpoint: {e}", file.display()).into())
}

/// Restores the checkpoint in `file` into a fresh pipeline, finishes, and checks.
fn resume(file: &Path) -> Res<()> {
    resume_from(read_checkpoint(file)?)
}

/// Checks what a checkpoint claims was consumed against its loader state
/// (which the loader has verified): one list of ids per epoch up to the
/// state's, as many ids as the state's batches, each a record, none twice.
fn check_claims(checkpoint: &Checkpoint) -> Res<()> {
    let epoch: u64 = checkpoint.loader.get("epoch_index")?;
    let batches: u64 = checkpoint.loader.get("num_yielded")?;
    let claimed = checkpoint.consumed.len();
    if epoch >= EPOCHS || claimed as u64 != epoch + 1 {
        return Err(format!(
            "the checkpoint lists ids for {claimed} epochs, but its loader state is in epoch {epoch} \
             (of {EPOCHS}): it should list {}",
            epoch + 1
        )
        .into());
    }
    if batches > BATCHES_PER_EPOCH {
        return Err(format!(
            "the checkpoint's loader state is {batches} batches into an epoch of {BATCHES_PER_EPOCH}"
        )
        .into());
    }
    for (e, ids) in checkpoint.consumed.iter().enumerate() {
        let expected = if e == claimed - 1 {
            (batches as usize * BATCH).min(RECORDS)
        } else {
            RECORDS
        };
        if ids.len() != expected {
            return Err(format!(
                "the checkpoint lists {} ids for epoch {e}; its loader state says {expected} were consumed",
                ids.len()
            )
            .into());
        }
        let mut seen = vec![false; RECORDS];
        for &id in ids {
            match seen.get_mut(id as usize) {
                None => return Err(format!("epoch {e}: id {id} is not a record").into()),
                Some(true) => return Err(format!("epoch {e}: id {id} is listed twice").into()),
                Some(slot) => *slot = true,
            }
        }
    }
    Ok(())
}

/// Restores a checkpoint into a fresh pipeline, finishes the run, and checks
/// the joined output against an uninterrupted run.
pub(crate) fn resume_from(checkpoint: Checkpoint) -> Res<()> {
    let mut loader = Loader::new(pipeline()?);
    loader.load_state_dict(&checkpoint.loader)?;
    check_claims(&checkpoint)?;
    let mut consumed = checkpoint.consumed;
    println!(
        "resumed into a fresh pipeline:\n{}",
        loader.describe().render_text()
    );
    // Driven by the epoch number: the checkpoint's epoch continues, or, if
    // it was taken at an epoch's end, the next one starts.
    loop {
        let mut epoch = loader.epoch();
        let index = epoch.index();
        if index >= EPOCHS {
            break;
        }
        let slot = usize::try_from(index)?;
        if slot == consumed.len() {
            consumed.push(Vec::new());
        }
        if slot + 1 != consumed.len() {
            return Err(format!(
                "the loader is in epoch {index}, after {} epochs",
                consumed.len()
            )
            .into());
        }
        let ids = &mut consumed[slot];
        let started = (Instant::now(), ids.len());
        while let Some(batch) = epoch.next() {
            ids.extend(train_step(&batch?));
            progress(index, epoch.num_yielded(), ids.len(), started);
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
    if consumed.len() != expected.len() {
        return Err(format!(
            "the resumed run has {} epochs, the uninterrupted one {}",
            consumed.len(),
            expected.len()
        )
        .into());
    }
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

/// One progress line: rewritten in place on a terminal, whole lines (every
/// 64th batch) when the output is captured, so logs do not run together.
/// The rate counts samples since `from`.
fn progress(epoch: u64, batches: u64, samples: usize, (started, from): (Instant, usize)) {
    use std::io::{IsTerminal as _, Write as _};
    let terminal = std::io::stdout().is_terminal();
    let every = if terminal { 16 } else { 64 };
    if batches.is_multiple_of(every) {
        let rate = (samples - from) as f64 / started.elapsed().as_secs_f64().max(1e-9);
        let line = format!(
            "epoch {epoch}  batch {batches:>4}  samples {samples:>5}/{RECORDS}  {rate:>9.0} samples/s"
        );
        if terminal {
            print!("\r{line}");
            let _ = std::io::stdout().flush();
        } else {
            println!("{line}");
        }
    }
}
