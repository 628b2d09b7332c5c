//! Resharding mixes that restart their sources (the `CYCLE_*` stop
//! criteria), checked per source pass: every record's item carries the
//! epoch of the `Files` run it was read in, and over all ranks of all
//! generations, the first run of each source in each pass delivers every
//! record exactly once; a later run (a restart) delivers a record at most
//! once; and the next pass's first runs again deliver every record once.

use nodes_std::prelude::*;
use nodes_std::{
    ElasticSampler, Files, MapStyleWrapper, MultiNodeRoundRobinSampler, MultiNodeWeightedSampler,
    ParallelOptions, RandomSampler, Resume, StopCriteria, elastic,
};
use proptest::prelude::*;
use serde_json::Value;

use crate::elastic_files::{load_share, stored};
use crate::support::corpus::TempDir;
use crate::support::watch::config;

/// A record and the epoch of the `Files` run it was read in.
type Tagged = (u64, String);

/// A mix's source whose items carry the epoch its `Files` stood at when
/// the run began. Its state is its source's, nested, and it returns one
/// item per item of its source: a reshard passes through it like a `map`.
pub(crate) struct Tag<N> {
    source: N,
    /// Read from the source's state at the first item after a reset.
    epoch: Option<u64>,
}

impl<N> Tag<N> {
    pub(crate) fn new(source: N) -> Tag<N> {
        Tag {
            source,
            epoch: None,
        }
    }
}

/// The epoch of the first `Files` or `ElasticSampler` state in `state`
/// (depth first).
fn files_epoch(state: &Value) -> Option<u64> {
    let map = state.as_object()?;
    if map.contains_key("plan") && map.contains_key("epoch") {
        return map["epoch"].as_u64();
    }
    map.values().find_map(files_epoch)
}

impl<N: Node> Node for Tag<N> {
    type Item = (u64, N::Item);

    fn next(&mut self, cx: &mut Cx) -> Result<Option<(u64, N::Item)>> {
        if self.epoch.is_none() {
            let state = self.source.get_state(cx)?.to_value();
            self.epoch = Some(files_epoch(&state).expect("a Files below"));
        }
        let epoch = self.epoch.unwrap();
        Ok(self.source.next(cx)?.map(|record| (epoch, record)))
    }
}

impl<N: Node> Stateful for Tag<N> {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.epoch = None;
        match state {
            Some(state) => {
                state.expect_keys("Tag", &["source"])?;
                self.source.reset(Some(&state.child("source")?))
            }
            None => self.source.reset(None),
        }
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        let mut state = State::new();
        state.insert_child("source", self.source.get_state(cx)?);
        Ok(state)
    }

    fn describe(&self) -> Description {
        let source = self.source.describe();
        Description::new("Tag")
            .with_resume(Resume::ForwardsCount)
            .child("source", source)
    }

    fn shutdown(&mut self) {
        self.source.shutdown();
    }

    fn resume(&self) -> Resume {
        Resume::ForwardsCount
    }

    fn size_hint(&self) -> Hint {
        self.source.size_hint()
    }
}

#[derive(Clone, Copy, Debug)]
enum Mix {
    Weighted,
    RoundRobin,
    /// Round-robin under `CycleForever`: the pass never ends.
    Forever,
}

/// What stands between the reader and the tag.
#[derive(Clone, Copy, Debug)]
enum Inside {
    None,
    /// The records read as a map-style dataset through an `ElasticSampler`
    /// (shuffled) instead of from the files.
    MapStyle,
    ParMap,
    Shuffle,
    Filter,
}

/// What stands above the mix.
#[derive(Clone, Copy, Debug)]
enum Above {
    None,
    Batch,
    /// A `prefetch`: its states need `elastic::settle` before a reshard.
    Prefetch,
    /// Batches of 3 split again by an `unbatch`, which may be part way
    /// through a batch drawn across a restart.
    Unbatch,
}

#[derive(Clone, Copy, Debug)]
struct Shape {
    mix: Mix,
    inside: Inside,
    above: Above,
}

/// A line's number (a record is `f:l`).
fn kept(record: &str) -> bool {
    let line: u32 = record.split(':').nth(1).unwrap().parse().unwrap();
    !line.is_multiple_of(3)
}

/// The source reading the files with `parity` (even or odd numbers).
fn source(
    shape: Shape,
    dir: &TempDir,
    parity: usize,
    rank: u64,
    world: u64,
) -> Tag<Box<dyn Node<Item = String>>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    let paths: Vec<_> = paths.into_iter().skip(parity).step_by(2).collect();
    if let Inside::MapStyle = shape.inside {
        let read = |p: &std::path::PathBuf| std::fs::read_to_string(p).unwrap();
        let text: String = paths.iter().map(read).collect();
        let records: Vec<String> = text.lines().map(str::to_owned).collect();
        let order = RandomSampler::new(records.len(), 3);
        let sampler = ElasticSampler::new(order, rank, world).unwrap();
        return Tag::new(MapStyleWrapper::new(records, sampler).boxed());
    }
    let files = Files::list(paths).unwrap().shuffle_files(3);
    let lines = files.shard(rank, world).unwrap().read_lines();
    let source = match shape.inside {
        Inside::None | Inside::MapStyle => lines.boxed(),
        Inside::ParMap => lines.par_map(Ok, ParallelOptions::new(2)).unwrap().boxed(),
        Inside::Shuffle => lines.shuffle(3, 7).unwrap().boxed(),
        Inside::Filter => lines.filter(|r: &String| kept(r)).boxed(),
    };
    Tag::new(source)
}

fn build(shape: Shape, dir: &TempDir, rank: u64, world: u64) -> Box<dyn Node<Item = Vec<Tagged>>> {
    let sources = [
        ("even", source(shape, dir, 0, rank, world)),
        ("odd", source(shape, dir, 1, rank, world)),
    ];
    let stop = match shape.mix {
        Mix::Forever => StopCriteria::CycleForever,
        _ => StopCriteria::CycleUntilAllDatasetsExhausted,
    };
    let mixed = match shape.mix {
        Mix::Weighted => MultiNodeWeightedSampler::new(sources, [("even", 0.7), ("odd", 0.3)])
            .unwrap()
            .stop_criteria(stop)
            .seed(5)
            .rank(rank, world)
            .unwrap()
            .boxed(),
        Mix::RoundRobin | Mix::Forever => MultiNodeRoundRobinSampler::new(sources)
            .unwrap()
            .stop_criteria(stop)
            .boxed(),
    };
    match shape.above {
        Above::None => mixed.map(|t: Tagged| vec![t]).boxed(),
        Above::Batch => mixed.batch(2).unwrap().boxed(),
        Above::Prefetch => mixed.map(|t: Tagged| vec![t]).prefetch(2).unwrap().boxed(),
        Above::Unbatch => mixed
            .batch(3)
            .unwrap()
            .unbatch()
            .map(|t: Tagged| vec![t])
            .boxed(),
    }
}

/// One generation of `world` ranks: each loads its share of `old` (or
/// starts fresh) and takes `take[rank]` items of each of `passes` passes
/// (`usize::MAX`: to the end); it records `(pass, epoch, record)` for each
/// record and saves.
fn generation(
    build: &dyn Fn(u64, u64) -> Box<dyn Node<Item = Vec<Tagged>>>,
    old: Option<&[State]>,
    world: u64,
    (take, passes): (&[usize], u64),
    settle: bool,
    delivered: &mut Vec<(u64, u64, String)>,
) -> Vec<State> {
    (0..world)
        .map(|rank| {
            let mut loader = Loader::new(build(rank, world));
            if let Some(old) = old {
                load_share(&mut loader, build, old, (rank, world), settle);
            }
            let mut state = None;
            for _ in 0..passes {
                let mut epoch = loader.epoch();
                let pass = epoch.index();
                for item in epoch.by_ref().take(take[rank as usize]) {
                    delivered.extend(item.unwrap().into_iter().map(|(e, r)| (pass, e, r)));
                }
                state = Some(stored(&epoch.state_dict().unwrap()));
            }
            state.unwrap()
        })
        .collect()
}

/// Checks one source's records in one pass: the run with the lowest epoch
/// (its first, the same on every rank) delivers `all` exactly once, and
/// every other run each record at most once.
fn check_pass(
    mut got: Vec<(u64, String)>,
    all: &[String],
    what: &str,
) -> std::result::Result<(), String> {
    got.sort();
    if let Some(w) = got.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("{what}: {:?} delivered twice in one run", w[0]));
    }
    let Some(first) = got.first().map(|g| g.0) else {
        return match all.is_empty() {
            true => Ok(()),
            false => Err(format!("{what}: nothing delivered")),
        };
    };
    let first_run: Vec<&String> = got.iter().filter(|g| g.0 == first).map(|g| &g.1).collect();
    let all: Vec<&String> = all.iter().collect();
    if first_run != all {
        return Err(format!(
            "{what}: first run (epoch {first}) delivered {first_run:?}, expected {all:?}"
        ));
    }
    if let Some(stray) = got.iter().find(|g| !all.contains(&&g.1)) {
        return Err(format!("{what}: {stray:?} is not a record of the source"));
    }
    Ok(())
}

fn shape() -> impl Strategy<Value = Shape> {
    let mix = prop_oneof![
        Just(Mix::Weighted),
        Just(Mix::RoundRobin),
        Just(Mix::Forever)
    ];
    let inside = prop_oneof![
        Just(Inside::None),
        Just(Inside::MapStyle),
        Just(Inside::ParMap),
        Just(Inside::Shuffle),
        Just(Inside::Filter)
    ];
    let above = prop_oneof![
        Just(Above::None),
        Just(Above::Batch),
        Just(Above::Prefetch),
        Just(Above::Unbatch)
    ];
    (mix, inside, above).prop_map(|(mix, inside, above)| Shape { mix, inside, above })
}

proptest! {
    #![proptest_config(config(512, 0x0c1c_1e5e))]

    #[test]
    fn a_cycling_mix_reshards_each_first_run_exactly_once(
        shape in shape(),
        lines in prop::collection::vec(0u32..5, 2..9),
        n in 1u64..=4,
        m in 1u64..=5,
        k in 1u64..=3,
        takes in prop::collection::vec(0usize..16, 9),
    ) {
        let dir = TempDir::new("elastic-cycling");
        for (f, &count) in lines.iter().enumerate() {
            let text: String = (0..count).map(|l| format!("{f}:{l}\n")).collect();
            dir.write(&format!("{f:02}.txt"), text);
        }
        let builder = |rank, world| build(shape, &dir, rank, world);
        elastic::check(&builder(0, n).describe()).unwrap();
        let settle = matches!(shape.above, Above::Prefetch);
        let mut delivered = Vec::new();
        let first = generation(&builder, None, n, (&takes[..n as usize], 1), settle, &mut delivered);
        let second = generation(&builder, Some(&first), m, (&takes[4..4 + m as usize], 1), settle, &mut delivered);
        // To the end of this pass and through the next; an endless pass
        // far enough that each rank ends its first runs (it reads at least
        // one record per item, from each source in turn).
        let total = lines.iter().sum::<u32>() as usize;
        let last = match shape.mix {
            Mix::Forever => ([2 * total + 4; 3], 1),
            _ => ([usize::MAX; 3], 2),
        };
        generation(&builder, Some(&second), k, (&last.0, last.1), settle, &mut delivered);
        let filtered = matches!(shape.inside, Inside::Filter);
        for (parity, name) in [(0, "even"), (1, "odd")] {
            let mut all: Vec<String> = lines
                .iter()
                .enumerate()
                .filter(|(f, _)| f % 2 == parity)
                .flat_map(|(f, &count)| (0..count).map(move |l| format!("{f}:{l}")))
                .filter(|r| !filtered || kept(r))
                .collect();
            all.sort();
            for pass in 0..last.1 {
                let got = delivered
                    .iter()
                    .filter(|(p, _, r)| *p == pass && r.split(':').next().unwrap().parse::<usize>().unwrap() % 2 == parity)
                    .map(|(_, e, r)| (*e, r.clone()))
                    .collect();
                let what = format!("{shape:?}, {n} -> {m} -> {k} ranks: source {name}, pass {pass}");
                check_pass(got, &all, &what).map_err(TestCaseError::fail)?;
            }
        }
    }
}

/// Every object in `value` that has `key`, depth first.
fn objects_with<'v>(value: &'v mut Value, key: &str, out: &mut Vec<&'v mut Value>) {
    match value {
        Value::Object(map) if map.contains_key(key) => out.push(value),
        Value::Object(map) => map.values_mut().for_each(|v| objects_with(v, key, out)),
        Value::Array(items) => items.iter_mut().for_each(|v| objects_with(v, key, out)),
        _ => {}
    }
}

/// `state` edited by `edit` (on its JSON), stored again.
fn edited(state: &State, edit: impl FnOnce(&mut Value)) -> State {
    let mut value = state.to_value();
    edit(&mut value);
    State::from_value(value).unwrap()
}

/// `state` with its first mix that kept first run ends edited by `edit`.
fn edited_mix(state: &State, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> State {
    edited(state, |v| {
        let mut mixes = Vec::new();
        objects_with(v, "dataset_first_pass_ends", &mut mixes);
        edit(mixes[0].as_object_mut().unwrap());
    })
}

/// A reshard refuses old states whose first run ends do not match their
/// exhausted flags, naming the key; a new rank refuses a restart epoch that
/// is not after its epoch, naming the plan.
#[test]
fn damaged_first_run_ends_and_restart_epochs_are_refused_at_their_keys() {
    for inside in [Inside::None, Inside::MapStyle] {
        let dir = TempDir::new("elastic-cycling-damaged");
        for (f, count) in [3, 2, 4, 2].into_iter().enumerate() {
            let text: String = (0..count).map(|l| format!("{f}:{l}\n")).collect();
            dir.write(&format!("{f:02}.txt"), text);
        }
        let shape = Shape {
            mix: Mix::Weighted,
            inside,
            above: Above::None,
        };
        let builder = |rank, world| build(shape, &dir, rank, world);
        let old = generation(&builder, None, 2, (&[12, 12], 1), false, &mut Vec::new());
        let mut ends = Vec::new();
        let mut value = old[0].to_value();
        objects_with(&mut value, "dataset_first_pass_ends", &mut ends);
        assert_eq!(ends.len(), 1, "{inside:?}: rank 0 restarted a source");

        let without_ends = edited_mix(&old[0], |mix| {
            mix.remove("dataset_first_pass_ends");
        });
        let err = elastic::reshard(&[without_ends, old[1].clone()], 3)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/dataset_first_pass_ends"),
            "{inside:?}: {err}"
        );
        assert!(
            err.contains("its first run's end is missing"),
            "{inside:?}: {err}"
        );

        let not_exhausted = edited_mix(&old[0], |mix| {
            let name = mix["dataset_first_pass_ends"]
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap()
                .clone();
            mix["datasets_exhausted"][&name] = Value::Bool(false);
        });
        let err = elastic::reshard(&[not_exhausted, old[1].clone()], 3)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has not ended in this pass"),
            "{inside:?}: {err}"
        );

        let new = elastic::reshard(&old, 3).unwrap();
        let mut plans = Vec::new();
        let mut value = new[0].to_value();
        objects_with(&mut value, "plan", &mut plans);
        let planned = plans
            .iter()
            .filter(|p| p["plan"].get("next_epoch").is_some())
            .count();
        assert_eq!(planned, 2, "{inside:?}: each source's next restart is set");
        let stuck = edited(&new[0], |v| {
            let mut plans = Vec::new();
            objects_with(v, "plan", &mut plans);
            let node = plans
                .into_iter()
                .find(|p| p["plan"].get("next_epoch").is_some())
                .unwrap();
            node["plan"]["next_epoch"] = node["epoch"].clone();
        });
        // Past the checksum, which an edit by hand also breaks.
        let mut loader = Loader::new(builder(0, 3)).verify_checksum(false);
        let err = loader.load_state_dict(&stuck).unwrap_err().to_string();
        assert!(err.contains("/plan"), "{inside:?}: {err}");
        assert!(err.contains("is not after epoch"), "{inside:?}: {err}");
    }
}
