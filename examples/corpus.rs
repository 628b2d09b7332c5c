//! Real files, a real mix, and a process killed with `SIGKILL` mid-run,
//! several times: every resume continues exactly where the last checkpoint
//! was taken.
//!
//! `cargo run --release --example corpus` writes a small JSON-lines corpus
//! to a temporary directory: a large "common" dataset (6 files) and a small
//! "rare" one (2 files), records `{"id": ..., "text": "..."}`. Each dataset
//! is read by
//!
//! ```text
//! Files::in_dir → shuffle_files → interleave(2, 4, read_jsonl) → par_map(tokenize) → shuffle(64)
//! ```
//!
//! and the two are mixed 0.8 / 0.2 by a `MultiNodeWeightedSampler`, packed
//! into chunks of `SEQ_LEN` tokens and batched by 4, for `EPOCHS` epochs.
//!
//! The orchestrator (no arguments) first runs the whole thing uninterrupted,
//! in-process, for the expected log: one line per batch (epoch, batch, a
//! digest of its tokens). It then starts itself as a worker,
//! `--child STATE_FILE LOG_FILE DATA_DIR`, which resumes from `STATE_FILE`
//! if there is one, "trains" (a short sleep per batch), appends a line per
//! batch to `LOG_FILE`, and every `CHECKPOINT_EVERY` batches replaces
//! `STATE_FILE` atomically (a temporary file, then a rename) with the
//! loader's state and the number of log lines it covers. The orchestrator
//! kills the worker (`Child::kill`: `SIGKILL` on Unix) after a seeded random
//! delay, so the kill lands anywhere between two checkpoints, truncates the
//! log to the lines the last checkpoint covers, and starts a new worker; it
//! does this `KILLS` times, then lets the last worker finish. It exits
//! non-zero unless the log equals the uninterrupted run's, line for line.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use nodes_std::BoxError;
use nodes_std::prelude::*;
use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

const SEED: u64 = 2025;
/// Records per file of the common dataset, and its file count.
const COMMON: (usize, usize) = (6, 1000);
/// The same for the rare dataset.
const RARE: (usize, usize) = (2, 200);
/// Ids of the rare dataset start here (the common one's start at 0).
const RARE_ID_BASE: u32 = 1_000_000;
const VOCAB: u32 = 32_000;
const SEQ_LEN: usize = 64;
const BATCH: usize = 4;
const EPOCHS: u64 = 2;
/// A checkpoint every this many batches.
const CHECKPOINT_EVERY: u64 = 25;
/// A "training step": how long the worker sleeps per batch.
const STEP: Duration = Duration::from_millis(2);
/// How many times the worker is killed before one is let finish.
const KILLS: usize = 6;
/// The delay before a kill is drawn from this range (milliseconds).
const KILL_DELAY_MS: std::ops::Range<u64> = 120..360;

type Res<T> = std::result::Result<T, BoxError>;

/// One record of the corpus.
#[derive(Debug, Serialize, Deserialize)]
struct Rec {
    id: u32,
    text: String,
}

/// What the worker saves: the loader's state and how many log lines (batches)
/// were written when it was taken.
#[derive(Serialize, Deserialize)]
struct Checkpoint {
    loader: State,
    lines: u64,
}

/// A small xorshift generator for the corpus text (deterministic, no seed file).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Writes `dir/common/part-{0..5}.jsonl` and `dir/rare/part-{0..1}.jsonl`.
fn write_corpus(dir: &Path) -> Res<()> {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "sha", "pe", "qua", "do", "fi", "gu", "xe",
        "bo",
    ];
    for (name, (files, per_file), id_base) in [("common", COMMON, 0), ("rare", RARE, RARE_ID_BASE)]
    {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub)?;
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ u64::from(id_base));
        for f in 0..files {
            let mut out = std::io::BufWriter::new(std::fs::File::create(
                sub.join(format!("part-{f}.jsonl")),
            )?);
            for r in 0..per_file {
                let id = id_base + u32::try_from(f * per_file + r)?;
                let words = 4 + rng.next() % 20;
                let text: Vec<String> = (0..words)
                    .map(|_| {
                        let syllables = 1 + rng.next() % 3;
                        (0..syllables)
                            .map(|_| SYLLABLES[(rng.next() % 16) as usize])
                            .collect()
                    })
                    .collect();
                let rec = Rec {
                    id,
                    text: text.join(" "),
                };
                serde_json::to_writer(&mut out, &rec)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
        }
    }
    Ok(())
}

fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut hash = nodes_std::Fnv1a64::default();
    bytes
        .into_iter()
        .for_each(|b| std::hash::Hasher::write_u8(&mut hash, b));
    std::hash::Hasher::finish(&hash)
}

/// The record id as the first token, then each word's FNV-1a hash mod `VOCAB`.
fn tokenize(rec: Rec) -> Res<Vec<u32>> {
    let mut tokens = vec![rec.id];
    tokens.extend(
        rec.text
            .split_whitespace()
            .map(|w| (fnv1a(w.bytes()) % u64::from(VOCAB)) as u32),
    );
    Ok(tokens)
}

/// One dataset: its files in a new order each epoch, two read at a time
/// (4 records from each in turn), tokenized on 2 threads, shuffled.
fn dataset(dir: &Path, seed: u64) -> Result<impl Node<Item = Vec<u32>> + use<>> {
    Files::in_dir(dir)?
        .shuffle_files(seed)
        .interleave(2, 4, |path: PathBuf| {
            IterableWrapper::new(vec![path]).read_jsonl::<Rec>()
        })?
        .par_map(tokenize, ParallelOptions::new(2))?
        .shuffle(64, seed ^ 0x5EED)
}

/// The whole pipeline over the corpus in `dir`.
fn pipeline(dir: &Path) -> Result<impl Node<Item = Vec<Vec<u32>>> + use<>> {
    let sources = [
        ("common", dataset(&dir.join("common"), SEED)?),
        ("rare", dataset(&dir.join("rare"), SEED + 1)?),
    ];
    MultiNodeWeightedSampler::new(sources, [("common", 0.8), ("rare", 0.2)])?
        .seed(SEED)
        .rank(0, 1)?
        .pack(SEQ_LEN)?
        .batch(BATCH)
}

/// A batch's log line: epoch, batch number in the epoch, and a digest of its tokens.
fn log_line(epoch: u64, batch: u64, chunks: &[Vec<u32>]) -> String {
    let digest = fnv1a(chunks.iter().flat_map(|c| {
        c.iter()
            .flat_map(|t| t.to_le_bytes())
            .chain(u32::MAX.to_le_bytes())
    }));
    let tokens: usize = chunks.iter().map(Vec::len).sum();
    format!("{epoch} {batch} {tokens} {digest:016x}")
}

/// The uninterrupted run, in this process: the expected log.
fn reference(data: &Path) -> Res<Vec<String>> {
    let mut loader = Loader::new(pipeline(data)?);
    let mut lines = Vec::new();
    for _ in 0..EPOCHS {
        let mut epoch = loader.epoch();
        let index = epoch.index();
        while let Some(batch) = epoch.next() {
            lines.push(log_line(index, epoch.num_yielded(), &batch?));
        }
    }
    Ok(lines)
}

fn read_checkpoint(file: &Path) -> Res<Option<Checkpoint>> {
    match std::fs::read_to_string(file) {
        Ok(text) => {
            Ok(Some(serde_json::from_str(&text).map_err(|e| {
                format!("{}: not a checkpoint: {e}", file.display())
            })?))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", file.display()).into()),
    }
}

/// The worker: resumes from `state_file` if it exists, trains to the end,
/// logs every batch, checkpoints every `CHECKPOINT_EVERY` batches.
fn child(state_file: &Path, log_file: &Path, data: &Path) -> Res<()> {
    let mut loader = Loader::new(pipeline(data)?);
    let mut lines = 0;
    if let Some(checkpoint) = read_checkpoint(state_file)? {
        loader.load_state_dict(&checkpoint.loader)?;
        lines = checkpoint.lines;
    }
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_file)?;
    let tmp = state_file.with_extension("tmp");
    loop {
        let mut epoch = loader.epoch();
        let index = epoch.index();
        if index >= EPOCHS {
            return Ok(());
        }
        while let Some(batch) = epoch.next() {
            let line = log_line(index, epoch.num_yielded(), &batch?);
            std::thread::sleep(STEP); // the training step
            // Unbuffered: once written, a line survives a SIGKILL.
            log.write_all(format!("{line}\n").as_bytes())?;
            lines += 1;
            if lines % CHECKPOINT_EVERY == 0 {
                let checkpoint = Checkpoint {
                    loader: epoch.state_dict()?,
                    lines,
                };
                std::fs::write(&tmp, serde_json::to_vec(&checkpoint)?)?;
                std::fs::rename(&tmp, state_file)?;
            }
        }
    }
}

/// Cuts the log to the lines the last checkpoint covers; returns how many
/// lines were cut (the batches trained since that checkpoint, lost with the kill).
fn truncate_log(state_file: &Path, log_file: &Path) -> Res<usize> {
    let keep = read_checkpoint(state_file)?.map_or(0, |c| c.lines as usize);
    let text = match std::fs::read_to_string(log_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e.into()),
    };
    // A kill can land mid-write: only whole lines count.
    let whole: Vec<&str> = text
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .collect();
    if whole.len() < keep {
        return Err(format!(
            "the checkpoint covers {keep} log lines, the log has {}",
            whole.len()
        )
        .into());
    }
    std::fs::write(log_file, whole[..keep].concat())?;
    Ok(whole.len() - keep)
}

fn orchestrate(work: &Path) -> Res<()> {
    let data = work.join("data");
    write_corpus(&data)?;
    let started = Instant::now();
    let expected = reference(&data)?;
    println!(
        "uninterrupted run: {} batches over {EPOCHS} epochs ({:.2} s)",
        expected.len(),
        started.elapsed().as_secs_f64()
    );
    if expected.len() < 10 * CHECKPOINT_EVERY as usize {
        return Err("the run is too short for the test to mean anything".into());
    }

    let state_file = work.join("state.json");
    let log_file = work.join("consumed.log");
    let exe = std::env::current_exe()?;
    let spawn = || {
        Command::new(&exe)
            .arg("--child")
            .arg(&state_file)
            .arg(&log_file)
            .arg(&data)
            .spawn()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let (mut kills, mut lost, mut finished) = (0, 0, false);
    let started = Instant::now();
    for _ in 0..KILLS {
        let mut worker = spawn()?;
        let delay = Duration::from_millis(rng.random_range(KILL_DELAY_MS));
        std::thread::sleep(delay);
        if let Some(status) = worker.try_wait()? {
            // It finished before the kill: nothing left to interrupt.
            if !status.success() {
                return Err(format!("a worker failed: {status}").into());
            }
            finished = true;
            break;
        }
        worker.kill()?; // SIGKILL on Unix
        worker.wait()?;
        kills += 1;
        let cut = truncate_log(&state_file, &log_file)?;
        lost += cut;
        let at = read_checkpoint(&state_file)?.map_or(0, |c| c.lines);
        println!(
            "kill {kills} after {} ms: resuming from the checkpoint at batch {at}, {cut} logged batches after it discarded",
            delay.as_millis()
        );
    }
    if !finished {
        let status = spawn()?.wait()?;
        if !status.success() {
            return Err(format!("the last worker failed: {status}").into());
        }
    }
    let elapsed = started.elapsed();

    let text = std::fs::read_to_string(&log_file)?;
    let got: Vec<&str> = text.lines().collect();
    if let Some(at) = got.iter().zip(&expected).position(|(a, b)| a != b) {
        return Err(format!(
            "batch {at} differs from the uninterrupted run: {:?} vs {:?}",
            got[at], expected[at]
        )
        .into());
    }
    if got.len() != expected.len() {
        return Err(format!(
            "the interrupted run logged {} batches, the uninterrupted one {}",
            got.len(),
            expected.len()
        )
        .into());
    }
    if kills == 0 {
        return Err("no worker was killed: the test did not test anything".into());
    }
    println!(
        "OK: {kills} kills (SIGKILL), {} batches, a checkpoint every {CHECKPOINT_EVERY} ({} in all), \
         {lost} batches retrained after kills; the joined log equals the uninterrupted run ({:.2} s)",
        got.len(),
        got.len() as u64 / CHECKPOINT_EVERY,
        elapsed.as_secs_f64()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("--child") => match &args[2..] {
            [state, log, data] => child(Path::new(state), Path::new(log), Path::new(data)),
            _ => Err("usage: --child STATE_FILE LOG_FILE DATA_DIR".into()),
        },
        Some(other) => Err(format!("unknown argument {other:?}; run with no argument").into()),
        None => {
            let work = std::env::temp_dir().join(format!("nodes-corpus-{}", std::process::id()));
            let result = orchestrate(&work);
            if result.is_ok() {
                let _ = std::fs::remove_dir_all(&work);
            } else {
                eprintln!("left {} for inspection", work.display());
            }
            result
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corpus: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
