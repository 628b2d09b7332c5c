//! Writing your own node with `#[derive(Node)]`, then checkpointing it.
//!
//! A running sum over a source, run through a `Loader`, checkpointed to a JSON
//! file mid-epoch, restored into a freshly built pipeline, and checked to
//! continue exactly where it stopped. Exits non-zero if it does not.
//!
//! Run with `cargo run --example custom_node`.

use std::process::ExitCode;

use nodes_std::IterableWrapper;
use nodes_std::prelude::*;

// --- the node: this is all the code a stateful node needs ---
/// Yields the running sum of its source's items.
#[derive(Node)]
struct RunningSum<S> {
    #[node(child)]
    source: S,
    #[node(state)]
    sum: u64,
}

impl<S: Node<Item = u64>> Node for RunningSum<S> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        let item = self.source.next(cx)?;
        self.sum += item.unwrap_or(0);
        Ok(item.map(|_| self.sum))
    }
}
// --- end of the node ---

fn pipeline() -> RunningSum<IterableWrapper<std::ops::Range<u64>>> {
    RunningSum {
        source: IterableWrapper::new(1..21),
        sum: 0,
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("custom_node: FAILED: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> std::result::Result<(), String> {
    let fail = |e: Error| e.to_string();

    // The reference: one uninterrupted epoch.
    let mut loader = Loader::new(pipeline());
    let expected: Vec<u64> = loader.epoch().collect::<Result<_>>().map_err(fail)?;

    // Run 7 items, checkpoint to a file, stop.
    let path = std::env::temp_dir().join(format!("custom_node.{}.ckpt.json", std::process::id()));
    let mut first_part = Vec::new();
    {
        let mut loader = Loader::new(pipeline());
        let mut epoch = loader.epoch();
        while let Some(item) = epoch.next() {
            first_part.push(item.map_err(fail)?);
            if first_part.len() == 7 {
                let state = epoch.state_dict().map_err(fail)?;
                let json = state.to_json_pretty().map_err(fail)?;
                std::fs::write(&path, json).map_err(|e| e.to_string())?;
                println!("checkpoint after 7 items -> {}", path.display());
                break;
            }
        }
    }

    // A freshly built pipeline, restored from the file, continues.
    let json = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&path);
    let mut loader = Loader::new(pipeline());
    loader
        .load_state_dict(&State::from_json(&json).map_err(fail)?)
        .map_err(fail)?;
    let rest: Vec<u64> = loader.epoch().collect::<Result<_>>().map_err(fail)?;

    println!("before checkpoint: {first_part:?}");
    println!("after restore:     {rest:?}");
    let joined: Vec<u64> = first_part.into_iter().chain(rest).collect();
    if joined != expected {
        return Err(format!(
            "resumed run {joined:?} != uninterrupted {expected:?}"
        ));
    }
    println!(
        "resumed run matches the uninterrupted run ({} items)",
        expected.len()
    );
    Ok(())
}
