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
    Files, MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, NodeId, ParallelOptions,
    Remainder, ShardedSampler, StopCriteria,
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
/// kinds), `Unbatcher`, `Prefetcher`, `Zip`, `Header`, and `Files` read by
/// `ReadJsonl`.
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
            .stop_criteria(StopCriteria::FirstDatasetExhausted)
            .seed(3);
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
    let corpus = crate::support::corpus::shared_corpus();
    let lines = Files::list([corpus.join("f0.txt"), corpus.join("f3.txt")])
        .unwrap()
        .shuffle_files(5)
        .read_jsonl::<u64>();
    let round_robin = MultiNodeRoundRobinSampler::new([
        ("left", IterableWrapper::new(0..1000u64).boxed()),
        ("right", IterableWrapper::new(5000..6000u64).boxed()),
        ("lines", lines.boxed()),
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
        serde_json::from_value::<Description>(d.to_json()).unwrap(),
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
        "ReadJsonl(max_line_bytes=16777216)",
        "Files(seed=Some(5))",
    ] {
        assert!(
            text.lines().any(|l| {
                // `role: Node`, or `role: Node  [state: key]`.
                let l = l.split("  [state: ").next().unwrap_or(l);
                l.ends_with(&format!(": {node}")) || l == node
            }),
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

/// Every checkpoint records the pipeline as `describe()` shows it (its JSON)
/// and a fingerprint of that JSON; both are pinned here for the pipeline with
/// every stock node, so a change to a stock node's name, parameters or
/// parameter renderings (which would make saved states unloadable) shows up.
#[test]
fn the_checkpoint_records_the_description_and_a_pinned_fingerprint() {
    let d = every_node(PLAIN).describe();
    let state = Loader::new(every_node(PLAIN)).state_dict().unwrap();
    assert_eq!(state.value("pipeline").unwrap(), d.to_json());
    assert_eq!(state.get::<u32>("format").unwrap(), 3);
    // FNV-1a 64 over the compact JSON of `snapshots/every_node.json`.
    assert_eq!(
        state.get::<String>("fingerprint").unwrap(),
        "b7467ed83e25dd19"
    );
}

/// The statistics label of every stock node is its description's name: both
/// come from one `NodeName::NAME`.
#[test]
fn statistics_rows_are_named_as_the_description_names_them() {
    fn names(d: &Description, out: &mut Vec<String>) {
        out.push(d.name().to_owned());
        for (_, child) in d.children() {
            names(child, out);
        }
    }
    // The stock nodes that run on the consumer's thread (a node below a
    // `ParallelMapper` or a `Prefetcher` runs on a worker and is not recorded).
    let mixed = MultiNodeWeightedSampler::new(
        vec![
            (
                "a",
                MapStyleWrapper::sequential((0..20u64).collect::<Vec<_>>()).boxed(),
            ),
            (
                "b",
                IterableWrapper::new(0..50u64)
                    .shard(0, 2)
                    .unwrap()
                    .cycle_n(2)
                    .unwrap()
                    .boxed(),
            ),
        ],
        [("a", 0.5), ("b", 0.5)],
    )
    .unwrap();
    let corpus = crate::support::corpus::shared_corpus();
    let lines = Files::list([corpus.join("f0.txt"), corpus.join("f3.txt")])
        .unwrap()
        .shuffle_files(5)
        .read_jsonl::<u64>();
    let round_robin = MultiNodeRoundRobinSampler::new([
        ("left", IterableWrapper::new(0..1000u64).boxed()),
        ("right", IterableWrapper::new(5000..6000u64).boxed()),
        ("lines", lines.boxed()),
    ])
    .unwrap();
    let pipeline = mixed
        .map(|x: u64| x + 1)
        .try_map(|x: u64| u32::try_from(x))
        .filter(|x| x % 3 != 0)
        .shuffle(8, 1)
        .unwrap()
        .batch(4)
        .unwrap()
        .unbatch()
        .zip(round_robin)
        .header(30)
        .batch_exact(4)
        .unwrap();
    let mut described = Vec::new();
    names(&pipeline.describe(), &mut described);
    let mut loader = Loader::new(pipeline).record_stats();
    loader.epoch().collect::<Result<Vec<_>>>().unwrap();
    let stats = loader.stats().unwrap();
    let mut reported: Vec<&str> = stats.nodes.iter().map(|row| row.name).collect();
    reported.sort_unstable();
    reported.dedup();
    assert_eq!(reported.len(), 17, "{reported:?}");
    for name in reported {
        assert!(
            described.iter().any(|n| n == name),
            "statistics row {name} is not a node of the description {described:?}"
        );
    }
    assert_eq!(
        <nodes_std::Batcher<IterableWrapper<Vec<u8>>>>::NAME,
        "Batcher"
    );
}

/// A parameter type whose `Debug` and `Param` renderings differ.
#[derive(Debug, Clone, Copy)]
enum Resize {
    Crop,
}

impl Param for Resize {
    fn render(&self, out: &mut String) {
        out.push_str(match self {
            Resize::Crop => "crop",
        });
    }
}

/// The same `Param` rendering with another `Debug`: `Resize` after its
/// `Debug` output changed (a derive that shows more, a new Rust version).
#[derive(Clone, Copy)]
struct ResizeWithOtherDebug;

impl std::fmt::Debug for ResizeWithOtherDebug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resize { mode: \"crop\", version: 2 }")
    }
}

impl Param for ResizeWithOtherDebug {
    fn render(&self, out: &mut String) {
        out.push_str("crop");
    }
}

#[derive(Node)]
struct Images<S, R> {
    #[node(child)]
    source: S,
    #[node(param)]
    resize: R,
    #[node(param)]
    size: u32,
    #[node(param)]
    scale: f64,
    #[node(param)]
    limit: Option<u64>,
    #[node(param)]
    split: &'static str,
    #[node(param)]
    remainder: Remainder,
    #[node(param)]
    stop: StopCriteria,
    #[node(param)]
    on_error: ErrorPolicy,
}

impl<S: Node, R: Param + Send> Node for Images<S, R> {
    type Item = S::Item;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| self.source.next(cx))
    }
}

fn images<R: Param + Send>(resize: R) -> Images<IterableWrapper<std::ops::Range<u32>>, R> {
    Images {
        source: IterableWrapper::new(0..4u32),
        resize,
        size: 224,
        scale: 0.1 + 0.2,
        limit: Some(3),
        split: "train",
        remainder: Remainder::Drop,
        stop: StopCriteria::AllDatasetsExhausted,
        on_error: ErrorPolicy::SkipAtMost(2),
    }
}

/// `describe()` and the fingerprint come from `Param`, never from `Debug`:
/// pinned, and the same when a parameter type's `Debug` changes.
#[test]
fn description_and_fingerprint_do_not_depend_on_debug() {
    let label = "Images(resize=crop, size=224, scale=0.30000000000000004, limit=Some(3), split=train, remainder=Drop, stop=ALL_DATASETS_EXHAUSTED, on_error=SkipAtMost(2))";
    let fingerprint = |d: Description| {
        // The fingerprint as a checkpoint records it.
        struct Shape(Description);
        impl Stateful for Shape {
            fn reset(&mut self, _: Option<&State>) -> Result<()> {
                Ok(())
            }
            fn get_state(&self, _: &Cx) -> Result<State> {
                Ok(State::new())
            }
            fn describe(&self) -> Description {
                self.0.clone()
            }
        }
        impl Node for Shape {
            type Item = ();
            fn next(&mut self, _: &mut Cx) -> Result<Option<()>> {
                Ok(None)
            }
        }
        let state = Loader::new(Shape(d)).state_dict().unwrap();
        state.get::<String>("fingerprint").unwrap()
    };
    let (a, b) = (
        images(Resize::Crop).describe(),
        images(ResizeWithOtherDebug).describe(),
    );
    assert_ne!(
        format!("{:?}", Resize::Crop),
        format!("{ResizeWithOtherDebug:?}")
    );
    assert_eq!(a.to_string(), label);
    assert_eq!(a, b);
    assert_eq!(
        a.render_text(),
        format!("{label}\n  source: IterableWrapper\n")
    );
    assert_eq!(fingerprint(a.clone()), "f9596c22442c8faf");
    assert_eq!(fingerprint(b), fingerprint(a));
}

/// A state taken twice at the same moment is the same state, and reads
/// back from its JSON as itself (derived and hand-written nodes alike, with
/// deferred entries and shared children), at any point of the pass.
#[test]
fn a_state_taken_twice_is_the_same_and_reads_back_as_itself() {
    let chain = || {
        IterableWrapper::new(0..500u64)
            .map(|x| x * 3)
            .try_map(|x| if x % 7 == 0 { Err("sevens") } else { Ok(x) })
            .filter(|x| x % 2 == 0)
            .shuffle(8, 5)
            .unwrap()
            .batch(4)
            .unwrap()
            .unbatch()
            .header(100)
            .boxed()
    };
    compare_at_every_item("every_node", || every_node(PLAIN));
    compare_at_every_item("derived chain", chain);
    // Stock nodes that write into the record by hand: `try_map`s that skip
    // bad records (non-zero counts in the state), both samplers over them.
    let source = |start: u64| {
        IterableWrapper::new(start..start + 300)
            .try_map(|x| if x % 5 == 0 { Err("fives") } else { Ok(x) })
            .on_error(ErrorPolicy::SkipAtMost(1_000))
            .shuffle(4, start)
            .unwrap()
            .boxed()
    };
    // A `try_map` with counts, under a derived parent and at the root
    // (where its own `get_state` builds the nested form).
    compare_at_every_item("try_map that skips", || source(0));
    compare_at_every_item("try_map at the root", || {
        IterableWrapper::new(0..300u64)
            .try_map(|x| if x % 5 == 0 { Err("fives") } else { Ok(x) })
            .on_error(ErrorPolicy::SkipAtMost(1_000))
            .boxed()
    });
    // The samplers' `get_state` writes a record too.
    compare_at_every_item("weighted sampler", || {
        MultiNodeWeightedSampler::new(
            [("a", source(0)), ("b", source(1000))],
            [("a", 0.7), ("b", 0.3)],
        )
        .unwrap()
        .seed(9)
        .batch(3)
        .unwrap()
        .boxed()
    });
    compare_at_every_item("round robin", || {
        MultiNodeRoundRobinSampler::new([("a", source(0)), ("b", source(1000))])
            .unwrap()
            .batch(3)
            .unwrap()
            .boxed()
    });
}

fn compare_at_every_item<T>(name: &str, make: impl Fn() -> Box<dyn Node<Item = T>>) {
    // One pipeline, both captures at the same moment: a threaded node's
    // state depends on which snapshots it took, which two runs need not
    // share.
    let mut running = make().start().unwrap();
    let mut taken = 0;
    loop {
        let own = running.get_state().unwrap();
        assert_eq!(running.get_state().unwrap(), own, "{name}: taken twice");
        let written = State::from_json(&own.to_json().unwrap()).unwrap();
        assert_eq!(written, own, "{name}: states differ after {taken} items");
        assert_eq!(
            written.to_json().unwrap(),
            own.to_json().unwrap(),
            "{name}: serialised states differ after {taken} items"
        );
        if running.next().is_none() {
            break;
        }
        taken += 1;
    }
    assert!(taken >= 5, "{name}: only {taken} items");
}
