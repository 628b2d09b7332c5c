//! Progress bars across a checkpoint: one sized by the epoch's size hint,
//! one over a file pipeline by bytes read.
//!
//! The bar's length comes from `Epoch::remaining()` (the pipeline's
//! `size_hint`: exact here, since every node of it knows its count and
//! nothing in it can fail). Half-way through the epoch the example takes a
//! checkpoint and stops; a freshly built pipeline loads the checkpoint, and
//! the new bar starts where the first one stopped (`num_yielded()` done,
//! `remaining()` to go).
//!
//! A pipeline over files has no item count before it reads them, so its
//! bar follows `Epoch::progress()`: files done of their total and bytes
//! read of theirs, from the listing and the readers. It too is checkpointed
//! half-way and resumed, and the resumed bar starts in the file where the
//! first one stopped.
//!
//! Where stderr is not a terminal (CI, a pipe) indicatif draws nothing, and
//! the plain lines on stdout tell the same story. Exits non-zero if the
//! resumed run returns another number of batches than the hint said, if
//! an item is lost or repeated across the checkpoint, or if the file bar
//! does not resume in the same file and end at the files' totals.
//!
//! Run with `cargo run --example progress`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use nodes_std::prelude::*;
use nodes_std::{Epoch, Progress};

/// Items in the epoch, and the batch size (the last batch is short).
const ITEMS: u32 = 1000;
const BATCH: usize = 32;

/// Shuffled, mapped, batched: every node forwards an exact count.
fn pipeline() -> Result<impl Node<Item = Vec<u32>> + use<>> {
    IterableWrapper::new(0..ITEMS)
        .shuffle(64, 7)?
        .map(|x| x * 2)
        .batch(BATCH)
}

/// A bar of `len` batches, at `done` already.
fn bar(len: u64, done: u64, label: &'static str) -> ProgressBar {
    let style = ProgressStyle::with_template("{prefix:>8} [{bar:40}] {pos}/{len} batches")
        .expect("the template is valid")
        .progress_chars("=> ");
    let bar = ProgressBar::new(len).with_style(style).with_prefix(label);
    bar.set_position(done);
    bar
}

/// Pretends to train on a batch (slow enough for the bar to be seen).
fn train(_batch: &[u32]) {
    std::thread::sleep(Duration::from_millis(3));
}

fn run() -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut seen: Vec<u32> = Vec::new();

    // First run: the bar's length is the hint, taken before the first batch.
    let mut loader = Loader::new(pipeline()?);
    let mut epoch = loader.epoch();
    let (lower, upper) = epoch.remaining();
    let total = match upper {
        Some(upper) if upper == lower => upper,
        _ => {
            problems.push(format!(
                "the hint is ({lower}, {upper:?}), not exact: every node of this pipeline knows its count"
            ));
            lower
        }
    };
    let first = bar(total, 0, "first");
    let stop_at = total / 2;
    while first.position() < stop_at {
        let Some(batch) = epoch.next() else { break };
        let batch = batch?;
        train(&batch);
        seen.extend(&batch);
        first.inc(1);
    }
    let checkpoint = epoch.state_dict()?.to_json()?;
    first.abandon();
    println!(
        "first run: {} of {total} batches, checkpoint of {} bytes taken",
        first.position(),
        checkpoint.len()
    );
    drop(loader);

    // Later (another process, in real life): resume, and the bar goes on
    // from where the first one stopped.
    let mut resumed = Loader::new(pipeline()?);
    resumed.load_state_dict(&State::from_json(&checkpoint)?)?;
    let mut epoch = resumed.epoch();
    let done = epoch.num_yielded();
    let (left, left_upper) = epoch.remaining();
    if left_upper != Some(left) {
        problems.push(format!(
            "after the restore the hint is ({left}, {left_upper:?}), not exact"
        ));
    }
    let second = bar(done + left, done, "resumed");
    let mut read = 0u64;
    for batch in epoch.by_ref() {
        let batch = batch?;
        train(&batch);
        seen.extend(&batch);
        second.inc(1);
        read += 1;
    }
    second.finish();
    println!(
        "resumed: started at {done}, the hint said {left} to go, read {read}: {} of {} batches",
        second.position(),
        second.length().unwrap_or_default()
    );

    if read != left {
        problems.push(format!(
            "the resumed run read {read} batches, the hint said {left}"
        ));
    }
    if done + read != total {
        problems.push(format!(
            "{done} + {read} batches across the checkpoint, but the epoch has {total}"
        ));
    }
    seen.sort_unstable();
    let expected: Vec<u32> = (0..ITEMS).map(|x| x * 2).collect();
    if seen != expected {
        problems.push(format!(
            "{} items across the checkpoint, not each of the {ITEMS} exactly once",
            seen.len()
        ));
    }
    Ok(problems)
}

/// Files of the file pipeline, and lines in each (about 100 bytes a line).
const FILES: usize = 8;
const LINES: usize = 2000;

/// JSONL files in a fresh temporary directory.
fn write_corpus() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("nodes-progress-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    for file in 0..FILES {
        let lines: String = (0..LINES)
            .map(|line| {
                format!(
                    "{{\"file\": {file}, \"line\": {line}, \"text\": \"{:>60}\"}}\n",
                    line
                )
            })
            .collect();
        std::fs::write(dir.join(format!("part-{file:02}.jsonl")), lines)?;
    }
    Ok(dir)
}

#[derive(serde::Deserialize)]
struct Record {
    file: usize,
    line: usize,
}

/// Files in a seeded order, parsed, batched, read ahead on a thread.
fn file_pipeline(dir: &Path) -> Result<impl Node<Item = Vec<Record>> + use<>> {
    Files::in_dir(dir)?
        .shuffle_files(3)
        .read_jsonl::<Record>()
        .batch(BATCH)?
        .prefetch(4)
}

/// A bar of the bytes of `progress`, showing its files done.
fn bytes_bar(progress: Progress, label: &'static str) -> ProgressBar {
    let style = ProgressStyle::with_template("{prefix:>8} [{bar:40}] {bytes}/{total_bytes} {msg}")
        .expect("the template is valid")
        .progress_chars("=> ");
    let bar = ProgressBar::new(progress.bytes_total.unwrap_or(0))
        .with_style(style)
        .with_prefix(label);
    show(&bar, progress);
    bar
}

fn show(bar: &ProgressBar, progress: Progress) {
    bar.set_position(progress.bytes_read);
    let files = progress.files_total.unwrap_or(0);
    bar.set_message(format!("{}/{files} files", progress.files_done));
}

/// Reads the file pipeline to `stop` batches (all with `None`) with a bar,
/// recording each record as (file, line); returns the progress where it
/// stopped and a checkpoint there.
fn read_files(
    epoch: &mut Epoch<'_, impl Node<Item = Vec<Record>>>,
    label: &'static str,
    stop: Option<u64>,
    seen: &mut Vec<(usize, usize)>,
) -> Result<(Progress, String)> {
    let bar = bytes_bar(epoch.progress(), label);
    while stop.is_none_or(|stop| epoch.num_yielded() < stop) {
        let Some(batch) = epoch.next() else { break };
        seen.extend(batch?.iter().map(|r| (r.file, r.line)));
        // Reading the progress walks the pipeline: not on every batch.
        if epoch.num_yielded().is_multiple_of(8) {
            show(&bar, epoch.progress());
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let progress = epoch.progress();
    show(&bar, progress);
    bar.abandon();
    Ok((progress, epoch.state_dict()?.to_json()?))
}

fn run_files() -> Result<Vec<String>> {
    let dir = write_corpus().map_err(|e| Error::user("progress example", None, e))?;
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    let batches = (FILES * LINES).div_ceil(BATCH) as u64;

    let mut loader = Loader::new(file_pipeline(&dir)?);
    let (stopped, checkpoint) =
        read_files(&mut loader.epoch(), "files", Some(batches / 2), &mut seen)?;
    println!("file run: stopped at {stopped:?}");
    drop(loader);

    let mut resumed = Loader::new(file_pipeline(&dir)?);
    resumed.load_state_dict(&State::from_json(&checkpoint)?)?;
    let mut epoch = resumed.epoch();
    let start = epoch.progress();
    println!("resumed file run: starts at {start:?}");
    // The first run read ahead of its checkpoint; the resumed one reads
    // from it: both are in the same file.
    if start.files_done > stopped.files_done || start.files_total != stopped.files_total {
        problems.push(format!("resumed at {start:?}, but stopped at {stopped:?}"));
    }
    let (end, _) = read_files(&mut epoch, "resumed", None, &mut seen)?;
    let bytes: u64 = std::fs::read_dir(&dir)
        .and_then(|entries| entries.map(|e| Ok(e?.metadata()?.len())).sum())
        .map_err(|e| Error::user("progress example", None, e))?;
    let finished = Progress {
        files_done: FILES as u64,
        files_total: Some(FILES as u64),
        bytes_read: bytes,
        bytes_total: Some(bytes),
    };
    if end != finished {
        problems.push(format!("the epoch ended at {end:?}, not {finished:?}"));
    }
    seen.sort_unstable();
    let expected: Vec<(usize, usize)> = (0..FILES)
        .flat_map(|file| (0..LINES).map(move |line| (file, line)))
        .collect();
    if seen != expected {
        problems.push(format!(
            "{} records across the checkpoint, not each of the {} exactly once",
            seen.len(),
            expected.len()
        ));
    }
    std::fs::remove_dir_all(&dir).map_err(|e| Error::user("progress example", None, e))?;
    Ok(problems)
}

fn main() -> ExitCode {
    match run().and_then(|mut problems| {
        problems.extend(run_files()?);
        Ok(problems)
    }) {
        Ok(problems) if problems.is_empty() => {
            println!("ok: both bars continued where they stopped");
            ExitCode::SUCCESS
        }
        Ok(problems) => {
            for problem in problems {
                eprintln!("FAILED: {problem}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
