//! Edited states never yield wrong data (issue 35, item 6).
//!
//! Every single-field edit of every golden checkpoint (a number ±1, 0, the
//! maximum or negative; a flipped bool; a value of another JSON type; a
//! removed key), loaded as if resealed with a valid checksum, either fails
//! naming a path inside the state, or resumes exactly like a pipeline that
//! was advanced until its own `state_dict()` equalled the edited state.
//!
//! "Resumes exactly like a pipeline advanced to the edited state" is checked
//! on the items: the next items must be those that follow some position of
//! the pipeline's first epochs. An edit of the loader's own count or epoch
//! number where nothing else counts (a shuffle's output) changes what the
//! loader reports, not the items, and passes.
//!
//! Two parts of a state are not fields: the writer's `version` (informational,
//! see `golden::the_writer_version_is_informational`) and the items a node
//! holds in a buffer (a shuffle buffer's items are the user's data, carried
//! as they are; only the checksum can tell an edited item).
//!
//! [`UNDETECTABLE`] lists the edits that load and resume elsewhere, each
//! with why no check can tell them from a real position; the test fails if
//! one of them is refused (the list is then out of date) or any other edit
//! loads and yields items of no position. docs/checkpointing.md lists them
//! for users.

use std::time::Duration;

use crate::golden::cases;
use crate::support::watch::with_watchdog;
use nodes_std::prelude::*;
use serde_json::{Value, json};

/// Items compared after a resume.
const AFTER: usize = 100;
/// Epochs a resumed run reads at most (the one it resumes and the next).
const EPOCHS: u64 = 2;
/// Epochs whose every position is a candidate for an accepted edit: the
/// golden checkpoints are in epoch 1, a resume reads on into the next.
const REACHED: u64 = 4;

/// Edits no check can refuse: (case, path, value, why). Resealed, each
/// loads and resumes at a position no run of this pipeline reaches.
const UNDETECTABLE: &[(&str, &str, &str, &str)] = &[
    // Any epoch is a valid start (`with_initial_epoch`, `epoch_updater`).
    (
        "random_sampler",
        "/root/source/epoch",
        "18446744073709551615",
        EPOCH,
    ),
    (
        "sharded_sampler",
        "/root/source/epoch",
        "18446744073709551615",
        EPOCH,
    ),
    // A draw takes one word, or two when it rejects: the source's count and
    // the generator's position are checked against each other only up to
    // that slack.
    ("shuffler", "/root/source/source/num_yielded", "69", DRAWS),
    ("shuffler", "/root/source/rng/word_pos", "8", DRAWS),
    (
        "shuffle_par_map_batch",
        "/root/source/source/snapshot/source/num_yielded",
        "58",
        DRAWS,
    ),
    (
        "shuffle_par_map_batch",
        "/root/source/source/snapshot/rng/word_pos",
        "29",
        DRAWS,
    ),
    // `elastic::reshard` gives each rank's shuffle a stream of its own,
    // which is not derived from anything else in the state.
    (
        "shuffler",
        "/root/source/rng/stream",
        "18446744073709551615",
        RESHARD,
    ),
    (
        "shuffle_par_map_batch",
        "/root/source/source/snapshot/rng/stream",
        "18446744073709551615",
        RESHARD,
    ),
    // An error result counts as an item for the parallel map, not for
    // the loader: the two counts bound each other only one way.
    (
        "shuffle_par_map_batch",
        "/root/source/source/steps_since_snapshot",
        "1",
        ERRORS,
    ),
    // An error spends a turn of the round-robin mix, and a source that
    // ended restarts (this mix cycles until all are exhausted): its turn
    // and its sources' positions imply nothing of each other.
    (
        "round_robin",
        "/root/source/source/current_dataset_index",
        "2",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/current_dataset_index",
        "0",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/dataset_node_states/x/num_yielded",
        "4",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/dataset_node_states/x/num_yielded",
        "2",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/dataset_node_states/x/num_yielded",
        "0",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/dataset_node_states/y/num_yielded",
        "3",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/dataset_node_states/y/num_yielded",
        "1",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/dataset_node_states/y/num_yielded",
        "0",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/dataset_node_states/z/num_yielded",
        "3",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/dataset_node_states/z/num_yielded",
        "1",
        TURNS,
    ),
    (
        "round_robin",
        "/root/source/source/dataset_node_states/z/num_yielded",
        "0",
        TURNS,
    ),
];
const EPOCH: &str = "a seeded node's epoch";
const DRAWS: &str = "a shuffle's position within one draw's slack";
const RESHARD: &str = "a resharded shuffle's stream";
const ERRORS: &str = "items a parallel map delivered since its snapshot";
const TURNS: &str = "a round-robin mix's turn and its sources' positions";

/// Whether `edit` of `case` is listed in [`UNDETECTABLE`].
fn undetectable(case: &str, edit: &Edit) -> bool {
    let Edit::Set(path, value) = edit else {
        return false;
    };
    let value = value.to_string();
    UNDETECTABLE
        .iter()
        .any(|&(c, p, v, _)| (c, p, v) == (case, path.as_str(), value.as_str()))
}

/// One edit: where (a JSON pointer) and what.
#[derive(Clone, Debug)]
enum Edit {
    Set(String, Value),
    Remove(String),
}

/// Every single-field edit of `state`.
fn edits(state: &Value) -> Vec<Edit> {
    let mut out = Vec::new();
    walk(state, String::new(), &mut out);
    out
}

fn walk(value: &Value, path: String, out: &mut Vec<Edit>) {
    let leaf = |v: Value| Edit::Set(path.clone(), v);
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let child_path = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                if key == "version" && path.is_empty() {
                    continue;
                }
                out.push(Edit::Remove(child_path.clone()));
                walk(child, child_path, out);
            }
            if !path.is_empty() {
                out.push(leaf(json!("edited")));
            }
        }
        Value::Array(items) => {
            // A buffer's items are data; the buffer itself is a field.
            if !path.ends_with("/buffer") {
                for (i, child) in items.iter().enumerate() {
                    walk(child, format!("{path}/{i}"), out);
                }
            }
            out.push(leaf(json!(null)));
        }
        Value::Number(n) => {
            let n = n.as_i64().unwrap_or(i64::MAX);
            for v in [
                json!(n.saturating_add(1)),
                json!(n - 1),
                json!(0),
                json!(u64::MAX),
                json!(-1),
                json!(1.5),
                json!("7"),
            ] {
                out.push(leaf(v));
            }
        }
        Value::Bool(b) => {
            out.push(leaf(json!(!b)));
            out.push(leaf(json!(1)));
        }
        Value::String(_) => {
            out.push(leaf(json!(5)));
            out.push(leaf(json!("edited")));
        }
        Value::Null => out.push(leaf(json!(0))),
    }
}

fn apply(state: &Value, edit: &Edit) -> Value {
    let mut edited = state.clone();
    match edit {
        Edit::Set(path, v) => *edited.pointer_mut(path).expect("edit path exists") = v.clone(),
        Edit::Remove(path) => {
            let (parent, key) = path.rsplit_once('/').unwrap();
            let key = key.replace("~1", "/").replace("~0", "~");
            edited
                .pointer_mut(parent)
                .and_then(Value::as_object_mut)
                .expect("parent is an object")
                .shift_remove(&key);
        }
    }
    edited
}

/// Every item a fresh pipeline yields in its first `REACHED` epochs.
fn reachable(build: fn() -> Box<dyn Node<Item = Value>>) -> Vec<Value> {
    let mut loader = Loader::new(build());
    (0..REACHED)
        .flat_map(|_| loader.epoch().map(Result::unwrap).collect::<Vec<_>>())
        .collect()
}

/// Whether `got` is what the pipeline yields after some position of its
/// first `REACHED` epochs.
fn continues(items: &[Value], got: &[Value]) -> bool {
    (0..=items.len()).any(|at| items[at..(at + got.len()).min(items.len())] == *got)
}

/// The next `AFTER` items of a loader resumed from a state, across epochs.
fn resume(loader: &mut Loader<Box<dyn Node<Item = Value>>>) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for _ in 0..EPOCHS {
        for item in loader.epoch() {
            out.push(item?);
            if out.len() == AFTER {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

#[test]
fn every_single_field_edit_of_a_golden_checkpoint_is_refused_or_resumes_a_real_position() {
    let wrong = with_watchdog(Duration::from_secs(600), || {
        let mut wrong = Vec::new();
        for (case, build) in cases() {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("golden/checkpoints")
                .join(format!("{case}.json"));
            let golden: Value =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            let items = reachable(build);
            for edit in edits(&golden) {
                let edited = apply(&golden, &edit);
                let mut loader = Loader::new(build()).verify_checksum(false);
                let loaded = State::from_value(edited.clone())
                    .and_then(|state| loader.load_state_dict(&state));
                let listed = undetectable(case, &edit);
                let outcome = match loaded {
                    Err(e) if e.state_path().is_none() => {
                        Some(format!("refused without a path: {e}"))
                    }
                    Err(_) => listed.then(|| "refused, but listed as undetectable".to_owned()),
                    Ok(()) => match resume(&mut loader) {
                        Ok(got) if continues(&items, &got) => listed.then(|| {
                            "listed as undetectable, but resumed at a real position".to_owned()
                        }),
                        Ok(_) if listed => None,
                        Ok(_) => Some(
                            "loaded, then yielded items that follow no position of the pipeline"
                                .to_owned(),
                        ),
                        Err(e) => Some(format!("loaded, then failed: {e}")),
                    },
                };
                if let Some(what) = outcome {
                    wrong.push(format!("{case} {edit:?}: {what}"));
                }
            }
        }
        wrong
    })
    .expect("no edited state hangs");
    assert!(
        wrong.is_empty(),
        "{} edits went wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
