//! Golden streams and golden checkpoints (issue 15, item 7): what a seeded
//! pipeline yields, and checkpoints written by an earlier build, pinned in
//! `tests/golden/`. A change to a seeded node's order, to a parameter's
//! rendering (the fingerprint) or to a state's layout fails here, printing
//! the first difference.
//!
//! - `tests/golden/streams/<case>.json`: the first items of epochs 0 and 1
//!   of a freshly built pipeline, and the items after the golden checkpoint.
//! - `tests/golden/checkpoints/<case>.json`: a checkpoint taken mid-epoch 1,
//!   exactly as `to_json` wrote it (checksum included). Every later build must
//!   load it and resume with the stored items.
//!
//! Bless deliberately (see `tests/golden/README.md`):
//! `NODES_BLESS=1 cargo test -p nodes-tests --test it -- golden::`, then
//! review the diff. A blessed checkpoint that changes is a compatibility
//! break: say so in CHANGELOG.md, or keep the old one loading (migrate it).

use std::path::PathBuf;

use nodes_std::prelude::*;
use nodes_std::{
    Epoch, IterableWrapper, MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, ParallelOptions,
    RandomSampler, Remainder, SamplerWrapper, ShardedSampler,
};
use serde_json::{Value, json};

/// Items read from each epoch for the stream files.
const STREAM_LEN: usize = 40;
/// Where in epoch 1 the golden checkpoint is taken.
const CUT: usize = 7;
/// Items stored after the checkpoint.
const REST_LEN: usize = 40;

type Case = (&'static str, fn() -> Box<dyn Node<Item = Value>>);

/// Every seeded stock node, plus round-robin mixing and a seeded
/// shuffle + parallel map pipeline. Items are JSON so that one file format
/// fits all.
pub(crate) fn cases() -> Vec<Case> {
    fn json<N>(node: N) -> Box<dyn Node<Item = Value>>
    where
        N: Node + 'static,
        N::Item: serde::Serialize,
    {
        node.map(|item| serde_json::to_value(item).expect("items are JSON"))
            .boxed()
    }
    vec![
        ("random_sampler", || {
            json(SamplerWrapper::new(RandomSampler::new(1000, 42)))
        }),
        ("shuffler", || {
            json(IterableWrapper::new(0..500u64).shuffle(64, 7).unwrap())
        }),
        ("weighted_sampler", || {
            let sources = [
                ("a", IterableWrapper::new(0..100u64)),
                ("b", IterableWrapper::new(1000..1050u64)),
                ("c", IterableWrapper::new(2000..2200u64)),
            ];
            json(
                MultiNodeWeightedSampler::new(sources, [("a", 0.5), ("b", 0.2), ("c", 0.3)])
                    .unwrap()
                    .seed(3)
                    .tagged()
                    .map(|t| (t.source.to_string(), t.item)),
            )
        }),
        ("weighted_sampler_rank", || {
            let sources = [
                ("a", IterableWrapper::new(0..100u64)),
                ("b", IterableWrapper::new(1000..1050u64)),
            ];
            json(
                MultiNodeWeightedSampler::new(sources, [("a", 0.7), ("b", 0.3)])
                    .unwrap()
                    .seed(11)
                    .rank(1, 4)
                    .unwrap(),
            )
        }),
        ("sharded_sampler", || {
            json(SamplerWrapper::new(
                ShardedSampler::new(RandomSampler::new(103, 9), 1, 4, Remainder::Pad).unwrap(),
            ))
        }),
        ("round_robin", || {
            let sources = [
                ("x", IterableWrapper::new(0..30u64)),
                ("y", IterableWrapper::new(100..110u64)),
                ("z", IterableWrapper::new(200..250u64)),
            ];
            json(
                MultiNodeRoundRobinSampler::new(sources)
                    .unwrap()
                    .tagged()
                    .map(|t| (t.source.to_string(), t.item)),
            )
        }),
        ("shuffle_par_map_batch", || {
            json(
                IterableWrapper::new(0..300u64)
                    .shuffle(32, 11)
                    .unwrap()
                    .par_map(|x| Ok(x * 3 + 1), ParallelOptions::new(2))
                    .unwrap()
                    .batch(4)
                    .unwrap(),
            )
        }),
    ]
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn blessing() -> bool {
    std::env::var_os("NODES_BLESS").is_some()
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; bless the golden files with NODES_BLESS=1 (see tests/golden/README.md)",
            path.display()
        )
    })
}

fn write(path: &PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Panics naming the first differing item of `what`.
fn compare(case: &str, what: &str, expected: &[Value], actual: &[Value]) {
    if let Some(i) =
        (0..expected.len().max(actual.len())).find(|&i| expected.get(i) != actual.get(i))
    {
        panic!(
            "{case}: {what} differs from the golden file at item {i}: expected {}, found {} \
             (if the change is deliberate, bless with NODES_BLESS=1, review the diff and say so in CHANGELOG.md)",
            expected
                .get(i)
                .map_or("nothing".to_owned(), Value::to_string),
            actual.get(i).map_or("nothing".to_owned(), Value::to_string),
        );
    }
}

fn take(epoch: &mut Epoch<'_, Box<dyn Node<Item = Value>>>, n: usize) -> Vec<Value> {
    epoch
        .by_ref()
        .take(n)
        .collect::<Result<_>>()
        .expect("golden pipelines have no bad records")
}

/// What a fresh pipeline does now: the streams of epochs 0 and 1, the
/// checkpoint after `CUT` items of epoch 1, and the items after it.
fn run(build: fn() -> Box<dyn Node<Item = Value>>) -> (Vec<Value>, Vec<Value>, String, Vec<Value>) {
    let mut loader = Loader::new(build());
    let mut epoch = loader.epoch();
    let epoch0 = take(&mut epoch, STREAM_LEN);
    drop(epoch);
    let mut epoch = loader.epoch();
    assert_eq!(epoch.index(), 1);
    let epoch1 = take(&mut epoch, STREAM_LEN);
    drop(epoch);
    let mut loader = Loader::new(build());
    let _ = loader.epoch().count();
    let mut epoch = loader.epoch();
    let _ = take(&mut epoch, CUT);
    let checkpoint = epoch.state_dict().unwrap().to_json_pretty().unwrap();
    let rest = take(&mut epoch, REST_LEN);
    (epoch0, epoch1, checkpoint, rest)
}

#[test]
fn seeded_streams_and_checkpoints_match_the_golden_files() {
    for (case, build) in cases() {
        let (epoch0, epoch1, checkpoint, rest) = run(build);
        let stream_path = golden_dir().join("streams").join(format!("{case}.json"));
        let checkpoint_path = golden_dir()
            .join("checkpoints")
            .join(format!("{case}.json"));
        if blessing() {
            let stream = json!({
                "epoch_0": epoch0,
                "epoch_1": epoch1,
                "after_checkpoint": rest,
            });
            write(
                &stream_path,
                &(serde_json::to_string_pretty(&stream).unwrap() + "\n"),
            );
            write(&checkpoint_path, &(checkpoint + "\n"));
            continue;
        }
        let stream: Value = serde_json::from_str(&read(&stream_path)).unwrap();
        let list = |key: &str| stream[key].as_array().cloned().unwrap_or_default();
        compare(case, "epoch 0", &list("epoch_0"), &epoch0);
        compare(case, "epoch 1", &list("epoch_1"), &epoch1);
        compare(
            case,
            "the run after the checkpoint",
            &list("after_checkpoint"),
            &rest,
        );

        // The golden checkpoint, as an earlier build wrote it, loads into a
        // pipeline built now and resumes with the stored items.
        let golden = State::from_json(&read(&checkpoint_path))
            .unwrap_or_else(|e| panic!("{case}: the golden checkpoint does not parse: {e}"));
        let mut resumed = Loader::new(build());
        resumed.load_state_dict(&golden).unwrap_or_else(|e| {
            panic!(
                "{case}: the golden checkpoint no longer loads: {e} (a compatibility break: keep it loading, or migrate it, and say so in CHANGELOG.md)"
            )
        });
        let mut epoch = resumed.epoch();
        assert_eq!(epoch.index(), 1, "{case}");
        let resumed_rest = take(&mut epoch, REST_LEN);
        compare(
            case,
            "the resume from the golden checkpoint",
            &list("after_checkpoint"),
            &resumed_rest,
        );
    }
}

/// The golden checkpoints are real: each names the crate version that wrote
/// it, and a damaged copy is refused.
#[test]
fn golden_checkpoints_carry_the_writer_version_and_are_sealed() {
    if blessing() {
        return;
    }
    for (case, build) in cases() {
        let path = golden_dir()
            .join("checkpoints")
            .join(format!("{case}.json"));
        let text = read(&path);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert!(value["version"].is_string(), "{case}: no writer version");
        assert!(value["checksum"].is_string(), "{case}: no checksum");
        refused_when_damaged(case, build, &value);
    }
}

/// A checkpoint sealed with `fnv1a64` (the checksum of builds before
/// 0.1.0, no longer read) is refused at `/checksum`, naming the algorithm;
/// with verification off, its content resumes with the stored items.
#[test]
fn checkpoints_sealed_by_the_removed_fnv_checksum_are_refused_naming_it() {
    for (case, build) in cases() {
        let path = golden_dir()
            .join("checkpoints")
            .join(format!("{case}.json"));
        let mut value: Value = serde_json::from_str(&read(&path)).unwrap();
        value["checksum"] = json!("fnv1a64:0123456789abcdef");
        let legacy = State::from_value(value).unwrap();
        let err = Loader::new(build()).load_state_dict(&legacy).unwrap_err();
        assert_eq!(err.state_path(), Some("/checksum"), "{case}: {err}");
        assert!(
            err.to_string()
                .contains("algorithm \"fnv1a64\" is not supported"),
            "{case}: {err}"
        );
        let mut resumed = Loader::new(build()).verify_checksum(false);
        resumed
            .load_state_dict(&legacy)
            .unwrap_or_else(|e| panic!("{case}: the content no longer loads: {e}"));
        if !blessing() {
            let stream_path = golden_dir().join("streams").join(format!("{case}.json"));
            let stream: Value = serde_json::from_str(&read(&stream_path)).unwrap();
            let expected = stream["after_checkpoint"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut epoch = resumed.epoch();
            compare(
                case,
                "the resume from the fnv1a64 checkpoint",
                &expected,
                &take(&mut epoch, REST_LEN),
            );
        }
    }
}

/// The error loading `checkpoint` into a fresh `build()` gives once its
/// `num_yielded` is changed (still in range: only the checksum tells), which
/// must be at `/checksum`.
fn refused_when_damaged(
    case: &str,
    build: fn() -> Box<dyn Node<Item = Value>>,
    checkpoint: &Value,
) -> Error {
    let mut damaged = checkpoint.clone();
    damaged["num_yielded"] = json!(checkpoint["num_yielded"].as_u64().unwrap() + 1);
    let err = Loader::new(build())
        .load_state_dict(&State::from_value(damaged).unwrap())
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/checksum"), "{case}: {err}");
    err
}

/// The writer's version is informational: a state without it, or written
/// by another version, loads (the checksum aside) and resumes the same.
#[test]
fn the_writer_version_is_informational() {
    let build = || IterableWrapper::new(0..10u64).shuffle(4, 1).unwrap();
    let mut loader = Loader::new(build());
    let mut epoch = loader.epoch();
    let _ = epoch.by_ref().take(3).count();
    let state = epoch.state_dict().unwrap();
    let rest: Vec<u64> = epoch.collect::<Result<_>>().unwrap();
    let value = state.into_value();
    assert_eq!(value["version"], json!(env!("CARGO_PKG_VERSION")));
    for edit in [None, Some(json!("0.0.1")), Some(json!("99.0.0-dev"))] {
        let mut edited = value.clone();
        let map = edited.as_object_mut().unwrap();
        match edit {
            None => drop(map.shift_remove("version")),
            Some(v) => drop(map.insert("version".into(), v)),
        }
        let mut resumed = Loader::new(build()).verify_checksum(false);
        resumed
            .load_state_dict(&State::from_value(edited).unwrap())
            .unwrap();
        assert_eq!(resumed.epoch().collect::<Result<Vec<_>>>().unwrap(), rest);
    }
    let mut edited = value.clone();
    edited["version"] = json!(3);
    let err = Loader::new(build())
        .verify_checksum(false)
        .load_state_dict(&State::from_value(edited).unwrap())
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/version"), "{err}");
}
