//! Seeing the pipeline: `describe()` of every stock node (a snapshot of its
//! text, DOT and JSON renderings), the Loader's shape check on restore
//! (changed parameter, inserted, removed and reordered nodes, each named at
//! its state path), and what may change between a save and a restore.
//!
//! Re-bless the snapshots in `tests/snapshots/` with
//! `NODES_BLESS=1 cargo test -p nodes-tests --test it -- describe::` and review the diff.

use std::path::PathBuf;

use nodes_std::prelude::*;
use nodes_std::{
    MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, ParallelOptions, Remainder,
    ShardedSampler, StopCriteria,
};

/// Where a source goes in [`every_node`]: the only part that the shape tests vary.
#[derive(Clone, Copy)]
struct Knobs {
    /// Batch size of the inner `Batcher`.
    batch: usize,
    /// An extra `Mapper` right above the `Shuffler`.
    extra_map: bool,
    /// The `Filter` is left out.
    no_filter: bool,
    /// The weighted sampler's sources in reverse order.
    reversed_sources: bool,
    /// Settings that must stay free to change between a save and a restore.
    workers: usize,
    max_concurrent: usize,
    snapshot_frequency: usize,
    prefetch_factor: usize,
}

const PLAIN: Knobs = Knobs {
    batch: 4,
    extra_map: false,
    no_filter: false,
    reversed_sources: false,
    workers: 2,
    max_concurrent: 4,
    snapshot_frequency: 1,
    prefetch_factor: 8,
};

/// A pipeline with every stock node: the three index samplers under two
/// `SamplerWrapper`s and `MapStyleWrapper`s, `IterableWrapper`, `Sharder`,
/// `Cycler` (bounded and endless), both multi-source samplers, `Mapper`,
/// `TryMapper`, `Filter`, `Shuffler`, `ParallelMapper`, `Batcher` (both
/// kinds), `Unbatcher`, `Prefetcher`, `Zip` and `Header`.
fn every_node(k: Knobs) -> Box<dyn Node<Item = Vec<(u64, u64)>>> {
    let images = MapStyleWrapper::new(
        (0..64u64).collect::<Vec<_>>(),
        SamplerWrapper::new(
            ShardedSampler::new(RandomSampler::new(64, 7), 0, 2, Remainder::Pad).unwrap(),
        ),
    );
    let text = MapStyleWrapper::sequential((100..120u64).collect::<Vec<_>>())
        .cycle_n(2)
        .unwrap();
    let numbers = IterableWrapper::new(1000..1100u64)
        .shard(1, 4)
        .unwrap()
        .cycle();
    let mut sources = vec![
        ("images", images.boxed()),
        ("text", text.boxed()),
        ("numbers", numbers.boxed()),
    ];
    if k.reversed_sources {
        sources.reverse();
    }
    let mixed =
        MultiNodeWeightedSampler::new(sources, [("images", 0.5), ("text", 0.3), ("numbers", 0.2)])
            .unwrap()
            .with_stop_criteria(StopCriteria::FirstDatasetExhausted)
            .with_seed(3);
    let mapped = mixed.map(|x: u64| x * 2).try_map(|x: u64| u32::try_from(x));
    let filtered = if k.no_filter {
        mapped.boxed()
    } else {
        mapped.filter(|x| x % 3 != 0).boxed()
    };
    let shuffled = filtered.shuffle(16, 11).unwrap();
    let shuffled = if k.extra_map {
        shuffled.map(|x| x + 1).boxed()
    } else {
        shuffled.boxed()
    };
    let options = ParallelOptions::new(k.workers)
        .max_concurrent(k.max_concurrent)
        .snapshot_frequency(k.snapshot_frequency);
    let round_robin = MultiNodeRoundRobinSampler::new([
        ("left", IterableWrapper::new(0..1000u64)),
        ("right", IterableWrapper::new(5000..6000u64)),
    ])
    .unwrap();
    shuffled
        .par_map(|x| Ok(u64::from(x)), options)
        .unwrap()
        .batch(k.batch)
        .unwrap()
        .unbatch()
        .prefetch(k.prefetch_factor)
        .unwrap()
        .zip(round_robin)
        .header(60)
        .batch_exact(8)
        .unwrap()
        .boxed()
}

fn snapshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("snapshots")
        .join(name)
}

/// Compares `actual` with the stored snapshot, or stores it under `NODES_BLESS=1`.
fn assert_snapshot(name: &str, actual: &str) {
    let path = snapshot_path(name);
    if std::env::var_os("NODES_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; bless with NODES_BLESS=1",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{name} differs from {} (bless with NODES_BLESS=1 and review the diff):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

#[test]
fn every_stock_node_renders_as_text_dot_and_json() {
    let d = every_node(PLAIN).describe();
    assert_snapshot("every_node.txt", &d.render_text());
    assert_snapshot("every_node.dot", &d.to_dot());
    let json = serde_json::to_string_pretty(&d.to_json()).unwrap() + "\n";
    assert_snapshot("every_node.json", &json);
    // The JSON form is what a state carries: it reads back to the same tree.
    assert_eq!(
        Description::from_json(&d.to_json(), "/pipeline").unwrap(),
        d
    );
}

#[test]
fn every_stock_node_appears_once_with_its_parameters() {
    let text = every_node(PLAIN).describe().render_text();
    for node in [
        "Batcher(batch_size=8, drop_last=true)",
        "Header(n=60)",
        "Zip",
        "MultiNodeRoundRobinSampler(stop_criteria=CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED, tag_output=false)",
        "Prefetcher",
        "Unbatcher",
        "Batcher(batch_size=4, drop_last=false)",
        "ParallelMapper(in_order=true)",
        "Shuffler(buffer_size=16, seed=11)",
        "Filter",
        "TryMapper",
        "Mapper",
        "MultiNodeWeightedSampler(weights={images: 0.5, numbers: 0.2, text: 0.3}, stop_criteria=FIRST_DATASET_EXHAUSTED, seed=3, rank=0, world_size=1, tag_output=false)",
        "MapStyleWrapper",
        "SamplerWrapper(sampler=ShardedSampler(rank=0, world_size=2, remainder=Pad, inner=RandomSampler(len=64, seed=7)))",
        "SamplerWrapper(sampler=SequentialSampler(len=20))",
        "Cycler(max_cycles=Some(2))",
        "Cycler(max_cycles=None)",
        "Sharder(rank=1, world_size=4)",
        "IterableWrapper",
    ] {
        assert!(
            text.lines()
                .any(|l| l.ends_with(&format!(": {node}")) || l == node),
            "no line for {node} in\n{text}"
        );
    }
    // Settings that may change between a save and a restore are not shown.
    for hidden in [
        "num_workers",
        "max_concurrent",
        "snapshot_frequency",
        "prefetch_factor",
    ] {
        assert!(!text.contains(hidden), "{hidden} in\n{text}");
    }
}

#[test]
fn a_running_pipeline_describes_itself_as_a_fresh_one() {
    let fresh = every_node(PLAIN).describe();
    let mut loader = Loader::new(every_node(PLAIN));
    let batches: Vec<Vec<(u64, u64)>> = loader.epoch().collect::<Result<_>>().unwrap();
    assert!(!batches.is_empty());
    assert_eq!(loader.root().describe(), fresh);
    let mut epoch = loader.epoch();
    let _ = epoch.next().unwrap().unwrap();
    drop(epoch);
    assert_eq!(loader.root().describe(), fresh);
    assert_eq!(loader.describe(), &fresh);
}

/// A mid-epoch state of the plain pipeline (after 3 batches), and the 4th batch.
fn saved_state() -> (State, Vec<(u64, u64)>) {
    let mut loader = Loader::new(every_node(PLAIN));
    let mut epoch = loader.epoch();
    for _ in 0..3 {
        epoch.next().unwrap().unwrap();
    }
    let state = epoch.state_dict().unwrap();
    let fourth = epoch.next().unwrap().unwrap();
    // Through JSON, as a checkpoint file would carry it.
    let state = State::from_json(&state.to_json().unwrap()).unwrap();
    (state, fourth)
}

/// Loads `state` into `every_node(knobs)` and returns the error.
fn rejected(state: &State, knobs: Knobs) -> Error {
    let mut loader = Loader::new(every_node(knobs));
    let err = loader
        .load_state_dict(state)
        .expect_err("a state from another shape must be rejected");
    assert!(err.is_bad_state(), "{err}");
    assert!(
        err.to_string().contains("Loader::check_shape(false)"),
        "{err}"
    );
    // The path points into the state, at the node's own state.
    let path = err.state_path().expect("a path");
    let json: serde_json::Value = serde_json::from_str(&state.to_json().unwrap()).unwrap();
    assert!(
        json.pointer(path).is_some_and(serde_json::Value::is_object),
        "{path} is not a node state in the saved state"
    );
    // Nothing was applied: the loader runs its first epoch from the start.
    let first = loader.epoch().next().unwrap().unwrap();
    let mut reference = Loader::new(every_node(knobs));
    assert_eq!(first, reference.epoch().next().unwrap().unwrap());
    err
}

/// State paths (see `tests/snapshots/every_node.txt`) of the inner `Batcher`
/// and of the `Shuffler` under the `ParallelMapper` below it.
const BATCHER: &str = "/root/source/source/left/snapshot/source";
const SHUFFLER: &str = "/root/source/source/left/snapshot/source/source/snapshot";

#[test]
fn the_unchanged_pipeline_accepts_the_state_and_resumes_exactly() {
    let (state, fourth) = saved_state();
    let mut loader = Loader::new(every_node(PLAIN));
    loader.load_state_dict(&state).unwrap();
    assert_eq!(loader.epoch().next().unwrap().unwrap(), fourth);
}

#[test]
fn a_changed_parameter_is_named_at_its_node() {
    let (state, _) = saved_state();
    let err = rejected(&state, Knobs { batch: 5, ..PLAIN });
    assert_eq!(err.state_path(), Some(BATCHER), "{err}");
    assert!(
        err.to_string().contains(
            "state is from Batcher(batch_size=4, drop_last=false), pipeline has Batcher(batch_size=5, drop_last=false)"
        ),
        "{err}"
    );
}

#[test]
fn an_inserted_node_is_named_where_the_chains_part() {
    let (state, _) = saved_state();
    let err = rejected(
        &state,
        Knobs {
            extra_map: true,
            ..PLAIN
        },
    );
    assert_eq!(err.state_path(), Some(SHUFFLER), "{err}");
    assert!(
        err.to_string()
            .contains("state is from Shuffler(buffer_size=16, seed=11), pipeline has Mapper"),
        "{err}"
    );
}

#[test]
fn a_removed_node_is_named_where_the_chains_part() {
    let (state, _) = saved_state();
    let err = rejected(
        &state,
        Knobs {
            no_filter: true,
            ..PLAIN
        },
    );
    let path = format!("{SHUFFLER}/source");
    assert_eq!(err.state_path(), Some(path.as_str()), "{err}");
    assert!(
        err.to_string()
            .contains("state is from Filter, pipeline has TryMapper"),
        "{err}"
    );
}

#[test]
fn reordered_sources_are_named_at_their_sampler() {
    let (state, _) = saved_state();
    let err = rejected(
        &state,
        Knobs {
            reversed_sources: true,
            ..PLAIN
        },
    );
    let path = format!("{SHUFFLER}/source/source/source/source");
    assert_eq!(err.state_path(), Some(path.as_str()), "{err}");
    assert!(
        err.to_string().contains(
            "has children [dataset_node_states/images, dataset_node_states/text, dataset_node_states/numbers] in the state, \
             [dataset_node_states/numbers, dataset_node_states/text, dataset_node_states/images] in the pipeline"
        ),
        "{err}"
    );
}

#[test]
fn worker_counts_bounds_and_read_ahead_may_change_between_save_and_restore() {
    let (state, fourth) = saved_state();
    for knobs in [
        Knobs {
            workers: 0,
            ..PLAIN
        },
        Knobs {
            workers: 3,
            max_concurrent: 9,
            snapshot_frequency: 3,
            prefetch_factor: 2,
            ..PLAIN
        },
        Knobs {
            workers: 1,
            max_concurrent: 1,
            snapshot_frequency: 100,
            prefetch_factor: 64,
            ..PLAIN
        },
    ] {
        let mut loader = Loader::new(every_node(knobs));
        loader.load_state_dict(&state).unwrap();
        assert_eq!(loader.epoch().next().unwrap().unwrap(), fourth);
    }
}

#[test]
fn the_opt_out_accepts_a_deliberate_change() {
    let (state, _) = saved_state();
    let mut loader = Loader::new(every_node(Knobs { batch: 5, ..PLAIN })).check_shape(false);
    loader.load_state_dict(&state).unwrap();
    assert!(loader.epoch().next().unwrap().is_ok());
}
