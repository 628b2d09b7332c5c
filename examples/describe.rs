//! Seeing a pipeline: the `train_loop` example's pipeline drawn without
//! running it (as indented text, Graphviz DOT and JSON), then one epoch of it
//! with per-node statistics, printed as a table with the bottleneck first.
//!
//! `cargo run --release --example describe`. To draw the graph, save the DOT
//! part to a file and run `dot -Tsvg pipeline.dot > pipeline.svg`.
//!
//! The graph is what every checkpoint records: a `Loader` refuses a state
//! taken from a pipeline of another shape, naming the first node that
//! differs. Exits non-zero if what it shows does not hold.

use std::process::ExitCode;
use std::time::Instant;

use nodes_std::BoxError;
use nodes_std::prelude::*;

// The train_loop example's own code, so that this is exactly its pipeline
// (its `main` and checkpoint logic are not used here).
#[allow(dead_code)]
#[path = "train_loop.rs"]
mod train_loop;

use train_loop::{BATCH, RECORDS, SEED};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("describe: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), BoxError> {
    let mut loader = Loader::new(train_loop::pipeline()?).record_stats();

    // 1. The graph, before anything runs.
    let description = loader.describe().clone();
    let text = description.render_text();
    println!("== describe(): text ==\n{text}");
    println!("== describe(): Graphviz DOT ==\n{}", description.to_dot());
    println!(
        "== describe(): JSON ==\n{}\n",
        serde_json::to_string_pretty(&description.to_json())?
    );
    // Every checkpoint records the graph (as the JSON above) and its fingerprint.
    let checkpoint = loader.state_dict()?;
    println!(
        "fingerprint (stored in every checkpoint): {}\n",
        checkpoint.get::<String>("fingerprint")?
    );
    if checkpoint.value("pipeline")? != description.to_json() {
        return Err("the checkpoint does not record the graph as describe() shows it".into());
    }
    let expected = format!(
        "Batcher(batch_size={BATCH}, drop_last=false)\n  \
         source: ParallelMapper(in_order=true)\n    \
         snapshot: MapStyleWrapper\n      \
         sampler: SamplerWrapper(sampler=RandomSampler(len={RECORDS}, seed={SEED}))\n"
    );
    if text != expected {
        return Err(format!("unexpected graph:\n{text}\nexpected:\n{expected}").into());
    }

    // 2. One epoch with statistics on (from where `state_dict` put the root).
    let started = Instant::now();
    let (mut batches, mut samples) = (0u64, 0usize);
    for batch in loader.epoch() {
        samples += batch?.len();
        batches += 1;
    }
    let took = started.elapsed();
    let stats = loader
        .stats()
        .ok_or("record_stats() was called, yet there are no statistics")?;
    println!(
        "== one epoch: {samples} samples in {batches} batches, {:.0} ms ({:.0} samples/s) ==",
        took.as_secs_f64() * 1e3,
        samples as f64 / took.as_secs_f64()
    );
    println!("{stats}");
    println!(
        "(The sampler and the dataset run on the ParallelMapper's worker threads, \
         whose reads are not recorded; the mapper's blocked time is the consumer \
         waiting for them.)"
    );

    // What the table shows holds: one row per node on the consumer's thread,
    // counting the items each produced.
    if samples != RECORDS {
        return Err(format!("one epoch gave {samples} samples, not {RECORDS}").into());
    }
    let row = |node: &str| {
        stats
            .nodes
            .iter()
            .find(|n| n.node == node)
            .ok_or_else(|| format!("no statistics for {node}:\n{stats}"))
    };
    let batcher = row("Batcher")?;
    let mapper = row("Batcher/ParallelMapper")?;
    if batcher.items != batches || mapper.items != RECORDS as u64 {
        return Err(format!(
            "counts: Batcher {} (expected {batches}), ParallelMapper {} (expected {RECORDS})",
            batcher.items, mapper.items
        )
        .into());
    }
    if mapper.mean_queue_depth().is_none() {
        return Err("ParallelMapper reported no queue depth".into());
    }
    println!(
        "OK: the graph names every node and its parameters; the counts are the items produced"
    );
    Ok(())
}
