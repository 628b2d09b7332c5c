//! A progress bar sized by the epoch's size hint, across a checkpoint.
//!
//! The bar's length comes from `Epoch::remaining()` (the pipeline's
//! `size_hint`: exact here, since every node of it knows its count and
//! nothing in it can fail). Half-way through the epoch the example takes a
//! checkpoint and stops; a freshly built pipeline loads the checkpoint, and
//! the new bar starts where the first one stopped (`num_yielded()` done,
//! `remaining()` to go).
//!
//! Where stderr is not a terminal (CI, a pipe) indicatif draws nothing, and
//! the plain lines on stdout tell the same story. Exits non-zero if the
//! resumed run returns another number of batches than the hint said, or if
//! an item is lost or repeated across the checkpoint.
//!
//! Run with `cargo run --example progress`.

use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use nodes_std::prelude::*;

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

fn main() -> ExitCode {
    match run() {
        Ok(problems) if problems.is_empty() => {
            println!("ok: the bar continued exactly where it stopped");
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
