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
//! into chunks of `SEQ_LEN` tokens and batched by 4, for 2 epochs.
//!
//! The harness (`nodes_examples::kill_resume`) runs it uninterrupted for
//! the expected log, then in worker processes killed with `SIGKILL`
//! 6 times between checkpoints, and exits non-zero unless the joined
//! log equals the uninterrupted run's, line for line.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use nodes_examples::kill_resume::{self, Res, Run, fnv1a};
use nodes_std::prelude::*;
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
/// How the run is checkpointed and killed.
fn run() -> Run {
    Run {
        name: "corpus",
        epochs: 2,
        checkpoint_every: 25,
        step: Duration::from_millis(2),
        kills: 6,
        kill_delay_ms: 120..360,
        seed: SEED,
    }
}

/// One record of the corpus.
#[derive(Debug, Serialize, Deserialize)]
struct Rec {
    id: u32,
    text: String,
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

fn main() -> ExitCode {
    let prepare = |work: &Path| -> Res<Vec<String>> {
        let data = work.join("data");
        write_corpus(&data)?;
        Ok(vec![data.display().to_string()])
    };
    kill_resume::main(&run(), prepare, |args: &[String]| match args {
        [data] => Ok(pipeline(Path::new(data))?),
        _ => Err("usage: --child STATE_FILE LOG_FILE DATA_DIR".into()),
    })
}
