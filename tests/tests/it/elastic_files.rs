//! Elastic resume of a file-sharded streaming pipeline: `Files` (shuffled)
//! → `shard(rank, world)` → `read_lines`, with a `filter`, `shuffle`,
//! `batch`, `par_map` or `prefetch` (nested too) above, saved on N ranks
//! mid-file and resumed on M, then K: every
//! line of the epoch is delivered exactly once over all ranks of all
//! generations, by its provenance (file, line). A file another rank began
//! is finished from its saved offset, and one that changed since is
//! refused by name.

use std::path::{Path, PathBuf};

use nodes_std::prelude::*;
use nodes_std::{
    Files, IterableWrapper, MultiNodeWeightedSampler, ParallelOptions, ReadLines, Sharder,
    StopCriteria, elastic,
};
use proptest::prelude::*;

use crate::support::faulty::uneven;
use crate::support::watch::config;

/// What stands above the reader.
#[derive(Clone, Copy, Debug)]
enum Above {
    Nothing,
    /// Drops the lines whose number is a multiple of 3.
    Filter,
    /// The same, as a `filter_map`.
    FilterMap,
    Shuffle,
    Batch,
    /// An in-order `par_map` right above the reader.
    ParMap,
    /// An out-of-order `par_map` right above the reader, slow on some
    /// lines so that it delivers lines ahead of a gap.
    ParMapUnordered,
    /// The same above `batch(2)` over the reader.
    ParMapUnorderedBatched,
    /// The same right above the reader, under a `prefetch(2)`.
    ParMapUnorderedPrefetched,
    /// `par_map` → `batch(2)` → `prefetch(2)`: threaded nodes nested.
    Nested,
    /// Three tokens per line, packed by 4 (the last chunk may be short).
    Pack,
    /// The same with `pack_exact`: each rank drops its short tail.
    PackExact,
    /// A weighted mix of the even and the odd files, each read as above.
    Mix,
    /// `interleave(2, 2, read_lines)` of the files, then `pack`.
    Interleave,
    /// `interleave(3, 1, …)` with a `prefetch` in the function.
    InterleavePrefetched,
    /// Each line's three tokens through a `flat_map`, one item each.
    FlatMap,
    /// The same over a `filter`: the item part way through may come from a
    /// file after the one the state before it was in.
    FlatMapFiltered,
    /// The same over a `shuffle`.
    FlatMapShuffled,
    /// The same over an in-order `par_map`, and over an interleave.
    FlatMapParMap,
    FlatMapInterleaved,
    /// `batch(3)` → `unbatch()`.
    Unbatch,
}

/// A directory of `lines.len()` files; file `f` holds `lines[f]` lines
/// `f:<line>`.
pub(crate) struct Corpus {
    pub(crate) dir: PathBuf,
}

impl Corpus {
    fn new(tag: &str, lines: &[u32]) -> Corpus {
        let corpus = Corpus::empty(tag);
        for (f, &n) in lines.iter().enumerate() {
            let text: String = (0..n).map(|l| format!("{f}:{l}\n")).collect();
            std::fs::write(corpus.dir.join(format!("{f:02}.txt")), text).unwrap();
        }
        corpus
    }

    /// A new empty directory, named after `tag`, the process and the thread.
    pub(crate) fn empty(tag: &str) -> Corpus {
        let dir = std::env::temp_dir().join(format!(
            "nodes-elastic-files-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Corpus { dir }
    }
}

impl Drop for Corpus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the `filter` keeps line `f:l`: `l` is not a multiple of 3.
fn kept(line: &str) -> bool {
    let number = line.split(':').nth(1).and_then(|l| l.parse::<u32>().ok());
    !number.unwrap().is_multiple_of(3)
}

/// Two workers that deliver as they finish.
fn unordered() -> ParallelOptions {
    ParallelOptions::new(2).in_order(false)
}

/// A line's tokens, for the packers.
fn tokens(line: String) -> Vec<String> {
    (0..3).map(|t| format!("{line}#{t}")).collect()
}

/// The lines of `files` for one rank, shuffled and sharded.
fn read(files: Files, rank: u64, world: u64) -> ReadLines<Sharder<Files>> {
    files
        .shuffle_files(17)
        .shard(rank, world)
        .unwrap()
        .read_lines()
}

/// One file's lines, an interleave's inner node.
fn one_file(path: PathBuf) -> ReadLines<IterableWrapper<Vec<PathBuf>>> {
    IterableWrapper::new(vec![path]).read_lines()
}

/// Each rank's pipeline, its items as vectors of lines or tokens.
fn build(dir: &Path, above: Above, rank: u64, world: u64) -> Box<dyn Node<Item = Vec<String>>> {
    let sharded = || {
        let files = Files::in_dir(dir).unwrap().shuffle_files(17);
        files.shard(rank, world).unwrap()
    };
    let lines = read(Files::in_dir(dir).unwrap(), rank, world);
    let one = |l: String| vec![l];
    let split = |l: String| tokens(l).into_iter().map(|t| vec![t]).collect::<Vec<_>>();
    match above {
        Above::FlatMap => lines.flat_map(split).boxed(),
        Above::FlatMapFiltered => lines.filter(|l: &String| kept(l)).flat_map(split).boxed(),
        Above::FlatMapShuffled => lines.shuffle(3, 5).unwrap().flat_map(split).boxed(),
        Above::FlatMapParMap => lines
            .par_map(Ok, ParallelOptions::new(2))
            .unwrap()
            .flat_map(split)
            .boxed(),
        Above::FlatMapInterleaved => sharded()
            .interleave(2, 2, one_file)
            .unwrap()
            .flat_map(split)
            .boxed(),
        Above::Unbatch => lines.batch(3).unwrap().unbatch().map(one).boxed(),
        Above::Nothing => lines.map(one).boxed(),
        Above::Filter => lines.filter(|l: &String| kept(l)).map(one).boxed(),
        Above::FilterMap => lines.filter_map(|l| kept(&l).then(|| vec![l])).boxed(),
        Above::Shuffle => lines.shuffle(3, 5).unwrap().map(one).boxed(),
        Above::Batch => lines.batch(2).unwrap().boxed(),
        Above::ParMap => lines
            .par_map(|l| Ok(vec![l]), ParallelOptions::new(2))
            .unwrap()
            .boxed(),
        Above::ParMapUnordered => lines
            .par_map(|l| uneven(vec![l]), unordered())
            .unwrap()
            .boxed(),
        Above::ParMapUnorderedBatched => lines
            .batch(2)
            .unwrap()
            .par_map(uneven, unordered())
            .unwrap()
            .boxed(),
        Above::ParMapUnorderedPrefetched => lines
            .par_map(|l| uneven(vec![l]), unordered())
            .unwrap()
            .prefetch(2)
            .unwrap()
            .boxed(),
        Above::Nested => lines
            .par_map(|l: String| Ok(l), ParallelOptions::new(2))
            .unwrap()
            .batch(2)
            .unwrap()
            .prefetch(2)
            .unwrap()
            .boxed(),
        Above::Pack => lines.map(tokens).pack(4).unwrap().boxed(),
        Above::PackExact => lines.map(tokens).pack_exact(4).unwrap().boxed(),
        Above::Interleave => sharded()
            .interleave(2, 2, one_file)
            .unwrap()
            .map(tokens)
            .pack(4)
            .unwrap()
            .boxed(),
        Above::InterleavePrefetched => sharded()
            .interleave(3, 1, |path| one_file(path).prefetch(2).unwrap())
            .unwrap()
            .map(one)
            .boxed(),
        Above::Mix => {
            let all: Vec<PathBuf> = Files::in_dir(dir).unwrap().paths().collect();
            let half = |parity: usize| {
                let mine = all
                    .iter()
                    .skip(parity)
                    .step_by(2)
                    .cloned()
                    .collect::<Vec<_>>();
                // An empty half reads the whole list again: not this case's.
                read(
                    Files::list(if mine.is_empty() { all.clone() } else { mine }).unwrap(),
                    rank,
                    world,
                )
                .map(one)
            };
            MultiNodeWeightedSampler::new(
                [("even", half(0)), ("odd", half(1))],
                [("even", 0.7), ("odd", 0.3)],
            )
            .unwrap()
            .stop_criteria(StopCriteria::AllDatasetsExhausted)
            .seed(3)
            .rank(rank, world)
            .unwrap()
            .boxed()
        }
    }
}

pub(crate) fn stored(state: &State) -> State {
    State::from_json(&state.to_json().unwrap()).unwrap()
}

/// Loads new rank `rank` of `world`'s share of `old` into `loader`,
/// settling the states with `build` first where `settle` (in one call).
pub(crate) fn load_share<N: Node, M: Node>(
    loader: &mut Loader<N>,
    build: &dyn Fn(u64, u64) -> M,
    old: &[State],
    (rank, world): (u64, u64),
    settle: bool,
) {
    if settle {
        let build = |r, w| Ok(build(r, w));
        elastic::load_resharded_with(loader, build, old, rank, world).unwrap();
    } else {
        elastic::load_resharded(loader, old, rank, world).unwrap();
    }
}

/// One generation of `world` ranks: each loads its share of `old` (or
/// starts fresh), takes `take[rank]` items (all of them when `None`), and
/// saves.
pub(crate) fn generation(
    build: &dyn Fn(u64, u64) -> Box<dyn Node<Item = Vec<String>>>,
    old: Option<&[State]>,
    world: u64,
    take: Option<&[usize]>,
    delivered: &mut Vec<String>,
    settle: bool,
) -> Vec<State> {
    (0..world)
        .map(|rank| {
            let mut loader = Loader::new(build(rank, world));
            if let Some(old) = old {
                load_share(&mut loader, build, old, (rank, world), settle);
            }
            let mut epoch = loader.epoch();
            assert_eq!(epoch.index(), 0, "rank {rank} of {world} left the epoch");
            let n = take.map_or(usize::MAX, |t| t[rank as usize]);
            for item in epoch.by_ref().take(n) {
                delivered.extend(item.unwrap());
            }
            stored(&epoch.state_dict().unwrap())
        })
        .collect()
}

/// Every line (or token) the epoch delivers, sorted.
fn expected(lines: &[u32], above: Above) -> Vec<String> {
    let filtered = matches!(
        above,
        Above::Filter | Above::FilterMap | Above::FlatMapFiltered
    );
    let mut all: Vec<String> = lines
        .iter()
        .enumerate()
        .flat_map(|(f, &n)| (0..n).map(move |l| format!("{f}:{l}")))
        .filter(|line| !filtered || kept(line))
        .flat_map(|line| match above {
            Above::Pack
            | Above::PackExact
            | Above::Interleave
            | Above::FlatMap
            | Above::FlatMapFiltered
            | Above::FlatMapShuffled
            | Above::FlatMapParMap
            | Above::FlatMapInterleaved => tokens(line),
            _ => vec![line],
        })
        .collect();
    if lines.len() == 1 && matches!(above, Above::Mix) {
        // Both halves read the one file.
        all.extend(all.clone());
    }
    all.sort();
    all
}

/// Checks what the ranks of every generation delivered against the
/// epoch: everything exactly once, but for what `pack_exact` drops by its
/// configuration: at most a short tail (3 tokens) per rank of the epoch,
/// of any generation (`ranks` in all), that reached the end of its share.
fn check_delivered(
    mut delivered: Vec<String>,
    lines: &[u32],
    above: Above,
    ranks: u64,
) -> std::result::Result<(), String> {
    delivered.sort();
    let expected = expected(lines, above);
    if !matches!(above, Above::PackExact) {
        return (delivered == expected)
            .then_some(())
            .ok_or_else(|| format!("delivered {delivered:?}, expected {expected:?}"));
    }
    if let Some(twice) = delivered.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("{} delivered twice", twice[0]));
    }
    if let Some(stray) = delivered
        .iter()
        .find(|t| expected.binary_search(t).is_err())
    {
        return Err(format!("{stray} is not in the epoch"));
    }
    let dropped = expected.len() - delivered.len();
    (dropped as u64 <= 3 * ranks)
        .then_some(())
        .ok_or_else(|| format!("{dropped} tokens dropped by {ranks} ranks"))
}

fn above() -> impl Strategy<Value = Above> {
    prop_oneof![
        Just(Above::Nothing),
        Just(Above::Filter),
        Just(Above::Shuffle),
        Just(Above::Batch),
        Just(Above::ParMap),
        Just(Above::ParMapUnordered),
        Just(Above::ParMapUnorderedBatched),
        Just(Above::ParMapUnorderedPrefetched),
        Just(Above::Nested),
        Just(Above::FilterMap),
        Just(Above::Pack),
        Just(Above::PackExact),
        Just(Above::Mix),
        Just(Above::Interleave),
        Just(Above::InterleavePrefetched),
        Just(Above::FlatMap),
        Just(Above::FlatMapFiltered),
        Just(Above::FlatMapShuffled),
        Just(Above::FlatMapParMap),
        Just(Above::FlatMapInterleaved),
        Just(Above::Unbatch),
    ]
}

proptest! {
    #![proptest_config(config(256, 0xf11e_5eed))]

    #[test]
    fn every_line_exactly_once_across_reshards(
        lines in prop::collection::vec(0u32..12, 1..9),
        above in above(),
        n in 1u64..=5,
        m in 1u64..=6,
        k in 1u64..=4,
        takes in prop::collection::vec(0usize..14, 11),
    ) {
        let corpus = Corpus::new("prop", &lines);
        let mut delivered = Vec::new();
        let first = generation(&|r, w| build(&corpus.dir, above, r, w), None, n, Some(&takes[..n as usize]), &mut delivered, false);
        let second = generation(&|r, w| build(&corpus.dir, above, r, w), Some(&first), m, Some(&takes[5..5 + m as usize]), &mut delivered, false);
        let last = generation(&|r, w| build(&corpus.dir, above, r, w), Some(&second), k, None, &mut delivered, false);
        prop_assert_eq!(check_delivered(delivered, &lines, above, n + m + k), Ok(()));
        // The next epoch is an ordinary one of K ranks.
        let mut next = Vec::new();
        for (rank, state) in last.iter().enumerate() {
            let mut loader = Loader::new(build(&corpus.dir, above, rank as u64, k));
            loader.load_state_dict(state).unwrap();
            let epoch = loader.epoch();
            prop_assert_eq!(epoch.index(), 1);
            for item in epoch {
                next.extend(item.unwrap());
            }
        }
        prop_assert_eq!(check_delivered(next, &lines, above, k), Ok(()));
    }
}

/// A file a rank began and another finishes must be the file it began: one
/// rewritten between save and resume is an error naming it, not other data.
#[test]
fn a_begun_file_that_changed_is_refused_where_it_resumes() {
    let corpus = Corpus::new("changed", &[6, 6]);
    let mut delivered = Vec::new();
    let old = generation(
        &|r, w| build(&corpus.dir, Above::Nothing, r, w),
        None,
        2,
        Some(&[2, 2]),
        &mut delivered,
        false,
    );
    for f in 0..2 {
        std::fs::write(
            corpus.dir.join(format!("{f:02}.txt")),
            "other\ndata\nhere\nnow\n",
        )
        .unwrap();
    }
    let mut loader = Loader::new(build(&corpus.dir, Above::Nothing, 0, 1));
    elastic::load_resharded(&mut loader, &old, 0, 1).unwrap();
    let err = loader.epoch().find_map(Result::err).expect("an error");
    let message = err.to_string();
    assert!(message.contains("cannot resume in"), "{message}");
    assert!(
        message.contains("changed since the state was saved"),
        "{message}"
    );
}

/// A checkpoint damaged after it was written is refused by the reshard at
/// its checksum, naming it, where no other check would see the damage (the
/// files next to the last one yielded, `near`, serve only messages); with
/// `verify_checksum(false)` it reshards.
#[test]
fn a_damaged_old_state_is_refused_at_its_checksum() {
    fn damage(value: &mut serde_json::Value) -> bool {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(near) = map.get_mut("near") {
                    *near = serde_json::json!(["elsewhere.txt"]);
                    return true;
                }
                map.values_mut().any(damage)
            }
            _ => false,
        }
    }
    let corpus = Corpus::new("damaged", &[4, 4, 4]);
    let old = generation(
        &|r, w| build(&corpus.dir, Above::Nothing, r, w),
        None,
        2,
        Some(&[2, 2]),
        &mut Vec::new(),
        false,
    );
    let mut value: serde_json::Value = serde_json::from_str(&old[1].to_json().unwrap()).unwrap();
    assert!(damage(&mut value));
    let damaged = [
        old[0].clone(),
        State::from_json(&value.to_string()).unwrap(),
    ];
    let err = elastic::reshard(&damaged, 3).unwrap_err();
    let message = err.to_string();
    assert_eq!(err.state_path(), Some("/checksum"), "{message}");
    assert!(
        message.contains("state #1") && message.contains("does not match its checksum"),
        "{message}"
    );
    assert!(
        message.contains("Reshard::verify_checksum(false)"),
        "{message}"
    );
    let states = elastic::Reshard::new(&damaged)
        .verify_checksum(false)
        .states(3)
        .unwrap();
    assert_eq!(states.len(), 3);
    elastic::reshard(&old, 3).unwrap();
}

/// `check` accepts the pipeline, with a `par_map` or `prefetch` above an
/// interleave of files or above a filter over a reader too, and an
/// out-of-order `par_map` anywhere (where no state would show its gap, it
/// runs in order), and names what it cannot reshard: a state that says an
/// out-of-order `par_map` ran there, a mix that stops at its first end.
#[test]
fn check_accepts_a_sharded_file_reader_and_names_what_it_cannot_reshard() {
    let corpus = Corpus::new("check", &[2, 2]);
    elastic::check(&build(&corpus.dir, Above::Filter, 0, 2).describe()).unwrap();
    let unsharded = Files::in_dir(&corpus.dir).unwrap().read_lines();
    let err = elastic::check(&unsharded.describe())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ReadLines at /root cannot be resharded"),
        "{err}"
    );
    let sharded = || {
        Files::in_dir(&corpus.dir)
            .unwrap()
            .shard(0, 2)
            .unwrap()
            .read_lines()
    };
    elastic::check(&sharded().prefetch(2).unwrap().describe()).unwrap();
    // An out-of-order par_map right above a reader (maps and batches may
    // stand between): the reader passes over what it delivered ahead of a
    // gap.
    let ahead = sharded().par_map(|l: String| Ok(l), unordered()).unwrap();
    let out_of_order = Resume::ReadsAhead { in_order: false };
    assert_eq!(*ahead.describe().resume(), out_of_order);
    elastic::check(&ahead.describe()).unwrap();
    let batched = sharded().map(|l: String| l).batch(2).unwrap();
    elastic::check(&batched.par_map(Ok, unordered()).unwrap().describe()).unwrap();
    // A threaded node above it takes its state with every item.
    let ahead = sharded().par_map(|l: String| Ok(l), unordered()).unwrap();
    elastic::check(&ahead.prefetch(2).unwrap().describe()).unwrap();
    // Where no state of the files would show its gap (above a filter, an
    // interleave or another out-of-order par_map), it runs in order, says
    // so, and reshards as an in-order one.
    let filtered = sharded().filter(|l: &String| kept(l));
    let over_filter = filtered.par_map(|l: String| Ok(l), unordered()).unwrap();
    let files = Files::in_dir(&corpus.dir).unwrap().shard(0, 2).unwrap();
    let interleaved = files.interleave(2, 1, one_file).unwrap();
    let over_interleave = interleaved.par_map(|l: String| Ok(l), unordered()).unwrap();
    let ahead = sharded().par_map(|l: String| Ok(l), unordered()).unwrap();
    let twice = ahead.par_map(|l: String| Ok(l), unordered()).unwrap();
    let in_order = Resume::ReadsAhead { in_order: true };
    for (what, desc) in [
        ("over a filter", over_filter.describe()),
        ("over an interleave", over_interleave.describe()),
        ("over another", twice.describe()),
    ] {
        assert_eq!(*desc.resume(), in_order, "{what}");
        elastic::check(&desc).unwrap();
        // A state edited to say it ran out of order there is refused.
        let mut edited = serde_json::to_value(&desc).unwrap();
        edited["resume"]["reads_ahead"]["in_order"] = false.into();
        let edited: Description = serde_json::from_value(edited).unwrap();
        let err = elastic::check(&edited).unwrap_err().to_string();
        assert!(
            err.contains("where no state shows what it delivered past a gap"),
            "{what}: {err}"
        );
    }
    let interleave = || {
        let files = Files::in_dir(&corpus.dir).unwrap().shard(0, 2).unwrap();
        files.interleave(2, 1, one_file).unwrap()
    };
    elastic::check(&interleave().describe()).unwrap();
    // Above an interleave or a filter, a threaded node's states are settled
    // before a reshard (see `unsettled_states_are_refused_until_settled`).
    elastic::check(&interleave().prefetch(2).unwrap().describe()).unwrap();
    let over_filter = sharded().filter(|l: &String| kept(l)).prefetch(2).unwrap();
    elastic::check(&over_filter.describe()).unwrap();
    // A flat_map reshards, over a mix too: its state says where the item it
    // is part way through came from.
    let split = sharded().flat_map(|l: String| l.chars().collect::<Vec<_>>());
    elastic::check(&split.describe()).unwrap();
    // A mix that restarts its sources (a CYCLE_* stop criterion, the
    // default) reshards its sources' first runs (see `elastic_cycling`),
    // under a flat_map too, which may be part way through an item that
    // spans a restart (its old rank's runs are replayed); a mix that ends
    // at its first source's end does not.
    let mix = || {
        MultiNodeWeightedSampler::new(
            [("a", sharded()), ("b", sharded())],
            [("a", 0.5), ("b", 0.5)],
        )
        .unwrap()
    };
    elastic::check(&mix().describe()).unwrap();
    let split = mix().flat_map(|l: String| l.chars().collect::<Vec<_>>());
    elastic::check(&split.describe()).unwrap();
    let first = mix().stop_criteria(StopCriteria::FirstDatasetExhausted);
    let err = elastic::check(&first.describe()).unwrap_err().to_string();
    assert!(
        err.contains("MultiNodeWeightedSampler at /root cannot be resharded"),
        "{err}"
    );
    assert!(
        err.contains("FirstDatasetExhausted ends each rank's pass at its first source's end"),
        "{err}"
    );
}

/// A `par_map` above a filter over a reader delivered lines past its
/// snapshot that no count of lines shows: `reshard` refuses the states by
/// name until `settle` replays those lines into them, and the settled
/// states reshard exactly once (nested, a `par_map` over another, takes a
/// second load to settle). The `par_map`s snapshot only where the reader
/// asks (at each file's first item): their snapshot frequency is beyond
/// the epoch, so no pacing by time decides what the states hold.
#[test]
fn unsettled_states_are_refused_until_settled() {
    let lines = [7, 5, 9, 4, 8];
    let corpus = Corpus::new("settle", &lines);
    for nested in [false, true] {
        let build = |rank, world| -> Box<dyn Node<Item = Vec<String>>> {
            let filtered =
                read(Files::in_dir(&corpus.dir).unwrap(), rank, world).filter(|l: &String| kept(l));
            let rare = || ParallelOptions::new(1).snapshot_frequency(1 << 20);
            let lines: Box<dyn Node<Item = String>> = if nested {
                Box::new(filtered.par_map(|l: String| Ok(l), rare()).unwrap())
            } else {
                Box::new(filtered)
            };
            let outer = lines.par_map(|l: String| Ok(vec![l]), rare()).unwrap();
            Box::new(outer)
        };
        let mut delivered = Vec::new();
        // Two lines of each rank's first file (each keeps at least two):
        // the second is past the snapshot taken at the first.
        let states: Vec<State> = (0..2)
            .map(|rank| {
                let mut loader = Loader::new(build(rank, 2));
                let mut epoch = loader.epoch();
                for item in epoch.by_ref().take(2) {
                    delivered.extend(item.unwrap());
                }
                stored(&epoch.state_dict().unwrap())
            })
            .collect();
        let err = elastic::reshard(&states, 3).unwrap_err().to_string();
        assert!(err.contains("elastic::settle"), "{err}");
        assert!(err.contains("cannot be resharded"), "{err}");
        let settled = elastic::settle(|r, w| Ok(build(r, w)), &states).unwrap();
        assert_ne!(settled, states, "nothing was replayed");
        for (rank, state) in elastic::reshard(&settled, 3).unwrap().iter().enumerate() {
            let mut loader = Loader::new(build(rank as u64, 3));
            if nested {
                // The same in one call, from the unsettled states.
                let settling = |r, w| Ok(build(r, w));
                elastic::load_resharded_with(&mut loader, settling, &states, rank as u64, 3)
                    .unwrap();
                let mut two_steps = Loader::new(build(rank as u64, 3));
                two_steps.load_state_dict(state).unwrap();
                assert_eq!(
                    loader.state_dict().unwrap(),
                    two_steps.state_dict().unwrap()
                );
            } else {
                loader.load_state_dict(state).unwrap();
            }
            for item in loader.epoch() {
                delivered.extend(item.unwrap());
            }
        }
        check_delivered(delivered, &lines, Above::Filter, 5).unwrap();
    }
}

/// Sets the first `planned_runs` found in `state` (a loader state) to `to`.
fn with_planned(state: &State, to: u64) -> State {
    fn set(value: &mut serde_json::Value, to: u64) -> bool {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(planned) = map.get_mut("planned_runs") {
                    *planned = to.into();
                    return true;
                }
                map.values_mut().any(|v| set(v, to))
            }
            _ => false,
        }
    }
    let mut value = state.to_value();
    assert!(set(&mut value, to), "no shard in {value}");
    State::from_value(value).unwrap()
}

/// A shard's `planned_runs` and its `Files`' plan come together: an edit
/// that sets one without the other, or counts another number of runs than
/// the plan lists (which would drop or repeat files), is refused at
/// `planned_runs`.
#[test]
fn a_plan_without_planned_or_planned_without_a_plan_is_refused() {
    let corpus = Corpus::new("planned", &[3, 3, 3]);
    let build = |r, w| build(&corpus.dir, Above::Nothing, r, w);
    let old = generation(&build, None, 2, Some(&[1, 1]), &mut Vec::new(), false);
    let resharded = elastic::reshard_rank(&old, 0, 3).unwrap();
    for (state, world, to) in [(&resharded, 3, 0), (&resharded, 3, 2), (&old[0], 2, 1)] {
        let edited = with_planned(state, to);
        let mut loader = Loader::new(build(0, world)).verify_checksum(false);
        let err = loader.load_state_dict(&edited).unwrap_err();
        assert!(err.is_bad_state(), "{err}");
        assert!(err.to_string().contains("/planned_runs"), "{err}");
        // Unedited, it loads.
        Loader::new(build(0, world)).load_state_dict(state).unwrap();
    }
    // The runs after a planned one (`then`, which a reshard writes into a
    // replayed item's source) count among the planned runs, and their
    // positions are checked against the list like the plan's own.
    for (then, runs, at) in [(3, 2, "/plan"), (0, 1, "/planned_runs")] {
        let mut value = with_planned(&resharded, runs).to_value();
        let plan = first_plan(&mut value).expect("a Files with a plan");
        plan["then"] = serde_json::json!([[then]]);
        let edited = State::from_value(value).unwrap();
        let mut loader = Loader::new(build(0, 3)).verify_checksum(false);
        let err = loader.load_state_dict(&edited).unwrap_err();
        assert!(err.is_bad_state(), "{err}");
        assert!(err.to_string().contains(at), "{at}: {err}");
    }
}

/// The first plan in `value` that is not null.
fn first_plan(value: &mut serde_json::Value) -> Option<&mut serde_json::Value> {
    let map = value.as_object_mut()?;
    if map.get("plan").is_some_and(|p| !p.is_null()) {
        return map.get_mut("plan");
    }
    map.values_mut().find_map(first_plan)
}
