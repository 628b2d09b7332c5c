//! Reading one old rank's state: which positions of which source it
//! consumed, the items its shuffle buffers hold and the bad records its
//! error budgets skipped, found by walking the saved pipeline description
//! and the state side by side (a child's key in a description is where its
//! state lives).

use nodes_core::{Description, Error, Result, Resume, State};
use serde_json::Value;

use crate::elastic::Plan;
use crate::elastic::pending::{FilesAt, Pending, walk_expands};
use crate::elastic::plan::{Consumed, OldRank};
use crate::sources::files::RankPlan;
use crate::sources::reader::{AHEAD, SKIP};

pub(crate) const RESHARD: &str = "reshard";

/// One source of global positions in one old rank's state: an
/// `ElasticSampler`, or a `Files` read through a shard.
pub(crate) struct Cut {
    /// The node's name, for errors.
    pub(crate) node: &'static str,
    /// Where its state is, in the loader state (the same on every rank).
    pub(crate) path: String,
    pub(crate) epoch: u64,
    pub(crate) world_size: u64,
    pub(crate) len: u64,
    /// The rank, its plan and what it consumed of it.
    pub(crate) old: OldRank,
    /// The sampler's, reader's or interleave's state path, and for files
    /// where the `Files` is below it.
    pub(crate) node_path: String,
    pub(crate) files: Option<FilesAt>,
    /// The first step of the plan this state reads (a reader's open file),
    /// and the step past the last one it read from (its open file).
    pub(crate) from: u64,
    pub(crate) through: u64,
}

/// A file one old rank began, to be finished by a new rank.
#[derive(Clone)]
pub(crate) enum Begun {
    /// In a file reader: where to resume it, in the reader's own keys (its
    /// state's position keys, and `skip`; see [`position_keys`]).
    Reader(Value),
    /// In an interleave's slot: the outer item it was made from and the
    /// inner node's state.
    Slot { item: Value, inner: State },
}

/// Lists of things found under nodes, by the path of each node's state.
pub(crate) type ByPath<T> = Vec<(String, Vec<T>)>;

/// What one old rank's state holds that a reshard carries over.
#[derive(Default)]
pub(crate) struct Found {
    /// One per `ElasticSampler` and per `Files` read through a shard, in
    /// description order.
    pub(crate) cuts: Vec<Cut>,
    /// The files each file reader or interleave (by the path of its state)
    /// began and did not finish, with their positions, in description order.
    pub(crate) begun: ByPath<(u64, Begun)>,
    /// The items each `Shuffler` held at the save (pulled, not yet
    /// delivered, in buffer order) and the pieces each `Packer` carried
    /// (parts of documents not yet packed), by the path of its state, in
    /// description order: they go to the new ranks' nodes at the same path.
    pub(crate) buffers: ByPath<Value>,
    /// The epoch of each `Shuffler`, by the path of its state.
    pub(crate) shuffle_epochs: Vec<(String, u64)>,
    /// Bad records skipped this pass under an `ErrorPolicy`, by the path of
    /// the node's state (a `try_map`, `par_map` or `prefetch` whose state
    /// has an `errors` entry).
    pub(crate) skipped: Vec<(String, u64)>,
    /// The items each `flat_map` or `unbatch` (by the path of its state)
    /// was part way through, or was dealt by an earlier reshard.
    pub(crate) pending: ByPath<Pending>,
    /// Only the cursors are wanted: items a threaded node delivered past
    /// its snapshot are not counted (a pending item's state replays them).
    pub(super) cursors_only: bool,
    /// Sources under a mix that restarts them are read where they stand,
    /// not from where their first runs ended: for the positions a pending
    /// item read, which may span restarts.
    pub(super) raw_restarts: bool,
    /// With `cursors_only`, the paths of the weighted mixes' states.
    pub(super) weighted: Vec<String>,
    /// The epoch each sampler and `Files` under a mix that restarts its
    /// sources moves to at its next restart, by the path of its state.
    pub(crate) next_epochs: Vec<(String, u64)>,
}

/// The error for the node `name` whose state is at `path`.
pub(super) fn refuse(path: &str, name: &str, why: &str) -> Error {
    let path = if path.is_empty() { "/" } else { path };
    let message = format!("{name} at {path} cannot be resharded: {why}");
    Error::invalid_argument(RESHARD, message)
}

/// The state of the child under `key` (`a` or `a/b`; `state` for `""`).
pub(crate) fn child_at(state: &State, key: &str) -> Result<State> {
    let mut parts = key.split('/').filter(|part| !part.is_empty());
    parts.try_fold(state.clone(), |at, part| at.child(part))
}

/// `state` with the child under `key` (`a` or `a/b`) replaced (`child`
/// itself for `""`).
pub(crate) fn replace_at(mut state: State, key: &str, child: State) -> Result<State> {
    if key.is_empty() {
        return Ok(child);
    }
    let (head, child) = match key.split_once('/') {
        None => (key, child),
        Some((head, rest)) => (head, replace_at(state.child(head)?, rest, child)?),
    };
    state.insert_child(head.to_owned(), child);
    Ok(state)
}

/// Why a node of this description cannot be resharded, if it cannot,
/// whatever its state: decided by its [`Resume`] capability alone.
pub(crate) fn refusal(desc: &Description) -> Option<&'static str> {
    match desc.resume() {
        Resume::Redistributable
        | Resume::ForwardsCount
        | Resume::OneToOne
        | Resume::Drops
        | Resume::Groups(_)
        | Resume::Buffers
        | Resume::Carries
        | Resume::ReadsAhead { .. }
        | Resume::ReadsFiles
        | Resume::Interleaves
        | Resume::Expands
        | Resume::Mixes {
            stops_at_first_end: false,
            ..
        } => None,
        Resume::ListsFiles | Resume::Shards => Some(
            "a list of files or a shard reshards only as `Files` (maybe shuffled) under `shard(rank, world_size)`, read by `read_lines`, `read_jsonl` or `read_parquet` right above",
        ),
        Resume::Mixes { .. } => Some(
            "StopCriteria::FirstDatasetExhausted ends each rank's pass at its first source's end, leaving the other sources' rest unread wherever its own draws stop: what a pass reads then depends on the number of ranks",
        ),
        Resume::CountsItems(_) => Some(
            "its position counts its own items, not global indices: read a MapStyleWrapper over an ElasticSampler (ShardedSampler -> ElasticSampler::new(inner, rank, world_size))",
        ),
        _ => Some(
            "its state is not one a reshard can deal to other ranks: elastic resume supports a MapStyleWrapper over an ElasticSampler, or Files under shard read by read_lines, read_jsonl, read_parquet or interleave, with map, try_map, filter, filter_map, batch, shuffle, pack, par_map, prefetch and the weighted or round-robin mix above",
        ),
    }
}

/// Whether `desc` is a mix that restarts its sources (the `CYCLE_*` stop
/// criteria).
pub(super) fn restarts(desc: &Description) -> bool {
    *desc.resume()
        == Resume::Mixes {
            each_once: false,
            stops_at_first_end: false,
        }
}

/// The state a reshard deals the source under `key` of a mix (`desc`,
/// `state`) from, at the source's path. Under a mix that restarts its
/// sources, a source that ended in this pass is dealt from where its first
/// run ended, with nothing left: only first runs read the pass's epoch on
/// every rank, and the runs after them are not dealt.
pub(crate) fn dealt_source(desc: &Description, state: &State, key: &str) -> Result<State> {
    use crate::mixing::{EXHAUSTED, FIRST_ENDS, NODE_STATES, first_end_mismatch};
    let name = key
        .strip_prefix(NODE_STATES)
        .map(|k| k.trim_start_matches('/'));
    let (true, Some(name)) = (restarts(desc), name) else {
        return child_at(state, key);
    };
    let exhausted: bool = state.child(EXHAUSTED)?.get(name)?;
    let ends = match state.contains(FIRST_ENDS) {
        true => Some(state.child(FIRST_ENDS)?),
        false => None,
    };
    match (exhausted, ends.filter(|ends| ends.contains(name))) {
        (false, None) => child_at(state, key),
        (true, Some(ends)) => {
            let at_source = replace_at(state.clone(), key, ends.child(name)?)?;
            child_at(&at_source, key)
        }
        (true, None) => {
            let why = first_end_mismatch(name, true);
            Err(Error::bad_state(state.path_of(FIRST_ENDS), why))
        }
        (false, Some(ends)) => {
            let why = first_end_mismatch(name, false);
            Err(Error::bad_state(ends.path_of(name), why))
        }
    }
}

/// Records, for each sampler and `Files` below `desc` (a restarting
/// mix's source, as it stands now), the epoch its next restart moves to
/// (the new rank's source counts as started, whatever the old one did).
fn push_next_epochs(desc: &Description, state: &State, out: &mut Found) -> Result<()> {
    match desc.resume() {
        Resume::Redistributable => {
            let plan: Plan = state.get("plan")?;
            let next = plan.next_epoch(state.get("epoch")?, true);
            out.next_epochs.push((state.path().to_owned(), next));
        }
        Resume::ListsFiles => {
            let plan: Option<RankPlan> = state.get("plan")?;
            let next = RankPlan::next_epoch(plan.as_ref(), state.get("epoch")?, true);
            out.next_epochs.push((state.path().to_owned(), next));
        }
        _ => {
            for (key, child) in desc.children() {
                push_next_epochs(child, &child_at(state, key)?, out)?;
            }
        }
    }
    Ok(())
}

/// Checks a pipeline's description against [`refusal`]: `path` is where
/// the node's state is.
pub(crate) fn check(desc: &Description, path: &str) -> Result<usize> {
    if let Some(why) = refusal(desc) {
        return Err(refuse(path, desc.name(), why));
    }
    if *desc.resume() == (Resume::ReadsAhead { in_order: false })
        && desc
            .children()
            .any(|(_, source)| hides_gaps_over_files(source))
    {
        // A threaded node runs in order over such a source (see
        // `threaded::plan`): only an edited state says otherwise.
        return Err(refuse(path, desc.name(), GAP));
    }
    if matches!(desc.resume(), Resume::ReadsFiles | Resume::Interleaves) {
        return files_below(desc)
            .map_err(|why| refuse(path, desc.name(), why))
            .map(|_| 1);
    }
    let mut samplers = usize::from(*desc.resume() == Resume::Redistributable);
    for (key, child) in desc.children() {
        let at = nodes_core::__private::pointer_join(path, key);
        samplers += check(child, &at)?;
    }
    Ok(samplers)
}

const GAP: &str = "it delivers out of order over a filter, try_map, shuffle, pack, mix, interleave, flat_map or another out-of-order par_map over files, where no state shows what it delivered past a gap: this library runs such a par_map in order, so the state was edited";

/// Whether an out-of-order `par_map` over `source` would deliver items past
/// a gap that no state of the files below shows: its items there do not
/// map one to one onto a reader's lines (a node that does not count its
/// source's items stands between, or an interleave reads the files). Right
/// above a reader (maps, batches and in-order threaded nodes between), the
/// reader passes over the lines delivered past a gap.
pub(crate) fn hides_gaps_over_files(source: &Description) -> bool {
    fn below(desc: &Description, hidden: bool) -> bool {
        match desc.resume() {
            Resume::ReadsFiles => hidden,
            Resume::Interleaves => true,
            resume => {
                let hidden = hidden || !resume.counts_positions();
                desc.children().any(|(_, child)| below(child, hidden))
            }
        }
    }
    below(source, false)
}

/// Whether a file reader or an interleave of files stands in the subtree.
pub(crate) fn reads_files(desc: &Description) -> bool {
    desc.subtree()
        .any(|d| matches!(d.resume(), Resume::ReadsFiles | Resume::Interleaves))
}

/// What a threaded node above delivered past its snapshot, where no count
/// of lines tells what it was: [`settle`](crate::elastic::settle) replays
/// it into the state.
const UNSETTLED: &str = "a par_map or prefetch above delivered items past its snapshot that no count of lines shows (it stands above a filter, try_map, shuffle, pack, mix, interleave or flat_map): pass the states through `elastic::settle` first, which replays them into the states";

/// The shard and the `Files` below a file reader or an interleave, with
/// their keys, if the node can be resharded.
fn files_below(desc: &Description) -> std::result::Result<[(&str, &Description); 2], &'static str> {
    fn only(d: &Description, resume: Resume) -> Option<(&str, &Description)> {
        let mut children = d.children();
        match (children.next(), children.next()) {
            (Some((key, child)), None) if *child.resume() == resume => Some((key, child)),
            _ => None,
        }
    }
    let shard = only(desc, Resume::Shards);
    let files = shard.and_then(|(_, s)| only(s, Resume::ListsFiles));
    match shard.zip(files) {
        Some((shard, files)) => Ok([shard, files]),
        None => Err(
            "it reads from another source than `Files` (maybe shuffled) under `shard(rank, world_size)`",
        ),
    }
}

/// Where one rank's `Files` stands: its rank and world size (from the
/// shard's description), its plan, and how many steps of the plan it
/// yielded through the shard.
struct FileCursor {
    rank: u64,
    world_size: u64,
    plan: Plan,
    steps: u64,
}

impl FileCursor {
    /// Reads it from `files` (a `Files` state) under the shard `shard`,
    /// whose state `shard_state` errors name.
    fn read(shard: &Description, shard_state: &State, files: &State) -> Result<FileCursor> {
        let param = |key: &str| {
            let value = shard.get_param(key).and_then(|v| v.parse::<u64>().ok());
            value.ok_or_else(|| {
                let why = format!("the shard's description has no `{key}`");
                Error::bad_state(shard_state.path().to_owned(), why)
            })
        };
        let (rank, world_size) = (param("rank")?, param("world_size")?);
        let pulled: u64 = files.get("num_yielded")?;
        let (plan, steps) = match files.get::<Option<RankPlan>>("plan")? {
            Some(p) if p.world_size == world_size => (p.plan, pulled),
            Some(p) => {
                let why = format!(
                    "a plan for {} ranks under a shard of {world_size}",
                    p.world_size
                );
                return Err(Error::bad_state(files.path_of("plan"), why));
            }
            // Every position, of which the shard kept those of its rank.
            None => (
                Plan::fresh(rank),
                (pulled + world_size - 1 - rank) / world_size,
            ),
        };
        Ok(FileCursor {
            rank,
            world_size,
            plan,
            steps,
        })
    }

    /// The position in the epoch's order of step `i`.
    fn position(&self, i: u64) -> u64 {
        self.plan.position(i, self.world_size)
    }
}

/// The keys of a file reader's state that say where it stands in its
/// file: `path`, `identity` and its own position (`offset` and `line` of a
/// line reader, `row_group` and `row` of a Parquet reader). Between files,
/// `path` and `identity` are null and the rest 0. A begun file's resume
/// point is these keys, and `skip`.
pub(crate) fn position_keys(state: &State) -> impl Iterator<Item = &str> {
    let other = |k: &str| matches!(k, "source" | "errors" | "resume_at" | SKIP | AHEAD);
    state.keys().filter(move |k| !other(k))
}

/// The items past a reader's position that were delivered, by their count
/// among the items it reads from there: those it was still to pass over
/// itself (the next `skip`, then `ahead`) and those a threaded node above
/// delivered (`relative`, counted among the items the reader makes, which
/// leave out the ones it passes over). Returned as the count of the first
/// ones and the rest, in the form of a reader's state.
pub(crate) fn delivered_items(skip: u64, ahead: &[u64], relative: &[u64]) -> (u64, Vec<u64>) {
    let mut own = ahead.iter().copied().peekable();
    let mut all = Vec::with_capacity(ahead.len() + relative.len());
    // The next item read, and its count among the items made.
    let (mut read, mut made) = (skip, 0);
    for &wanted in relative {
        loop {
            if own.next_if_eq(&read).is_some() {
                all.push(read);
            } else if made == wanted {
                break;
            } else {
                made += 1;
            }
            read += 1;
        }
        all.push(read);
        (read, made) = (read + 1, made + 1);
    }
    all.extend(own);
    let first = all.iter().zip(skip..).take_while(|(a, i)| *a == i).count();
    (skip + first as u64, all.split_off(first))
}

/// Records one old rank's file reader or interleave of files: what its
/// `Files` yielded to this rank, and the files it began and did not finish.
/// `relative`: the items a threaded node above delivered past `state`.
fn walk_files(desc: &Description, state: &State, relative: &[u64], out: &mut Found) -> Result<()> {
    let reader = *desc.resume() == Resume::ReadsFiles;
    if !reader && !relative.is_empty() {
        return Err(refuse(state.path(), desc.name(), UNSETTLED));
    }
    let [(shard_key, shard), (files_key, _)] =
        files_below(desc).map_err(|why| refuse(state.path(), desc.name(), why))?;
    push_skipped(state, out)?;
    let shard_state = child_at(state, shard_key)?;
    let files = child_at(&shard_state, files_key)?;
    let cursor = FileCursor::read(shard, &shard_state, &files)?;
    let mut begun = Vec::new();
    let mut steps = cursor.steps;
    let open = reader && state.get::<Option<String>>("path")?.is_some();
    if reader {
        // The open file (the step after the source's saved state), then the
        // files a previous reshard dealt here, the steps after it.
        let own: Vec<u64> = state.get_opt(AHEAD)?.unwrap_or_default();
        let own_skip = state.get_opt(SKIP)?.unwrap_or(0);
        let (skip, ahead) = delivered_items(own_skip, &own, relative);
        let mut resumed = Vec::new();
        if open {
            let at = position_keys(state).map(|key| Ok((key.to_owned(), state.value(key)?)));
            let mut at: serde_json::Map<String, Value> = at.collect::<Result<_>>()?;
            if skip > 0 {
                at.insert(SKIP.to_owned(), skip.into());
            }
            if !ahead.is_empty() {
                at.insert(AHEAD.to_owned(), ahead.into());
            }
            resumed.push(Value::Object(at));
        } else if skip > 0 || !ahead.is_empty() {
            let n = skip + ahead.len() as u64;
            let why = format!(
                "{n} items past this state were delivered, but it has no file open to read them from"
            );
            return Err(Error::bad_state(state.path_of("path"), why));
        }
        let dealt: Option<Vec<Value>> = state.get_opt("resume_at")?;
        resumed.extend(dealt.into_iter().flatten());
        for at in resumed {
            begun.push((cursor.position(steps), Begun::Reader(at)));
            steps += 1;
        }
    } else {
        // Each open slot: its file is the step after its outer state.
        let slots = state.child("slots")?;
        for key in slots.keys() {
            let slot = slots.child(key)?;
            let before = child_at(&child_at(&slot, "source")?, files_key)?;
            let own = FileCursor::read(shard, &shard_state, &before)?;
            let (item, inner) = (slot.value("item")?, slot.child("state")?);
            begun.push((own.position(own.steps), Begun::Slot { item, inner }));
        }
    }
    out.begun.push((state.path().to_owned(), begun));
    out.cuts.push(Cut {
        node: "Files",
        path: files.path().to_owned(),
        epoch: files.get("epoch")?,
        world_size: cursor.world_size,
        len: files.child("files")?.get("count")?,
        node_path: state.path().to_owned(),
        files: Some(FilesAt {
            shard_key: shard_key.to_owned(),
            files_key: files_key.to_owned(),
            interleaves: !reader,
        }),
        from: cursor.steps,
        through: cursor.steps + u64::from(open),
        old: OldRank {
            rank: cursor.rank,
            consumed: Consumed::new(steps, &[]),
            plan: cursor.plan,
        },
    });
    Ok(())
}

/// Records the bad records skipped this pass, if `state` (of a node that
/// applies an `ErrorPolicy`) saves its error budget.
fn push_skipped(state: &State, out: &mut Found) -> Result<()> {
    use crate::policy::{Counts, ERRORS};
    if state.contains(ERRORS) {
        let skipped = state.get::<Counts>(ERRORS)?.skipped();
        out.skipped.push((state.path().to_owned(), skipped));
    }
    Ok(())
}

/// Collects the cuts, shuffle buffers and skip counts below `desc`/`state`.
/// `relative` (ascending) are the
/// items this node yields after `state` that a threaded node above already
/// delivered: they count as consumed too. `threaded_above`: a `par_map` or
/// `prefetch` stands above (its items after its snapshot count as consumed).
pub(crate) fn walk(
    desc: &Description,
    state: &State,
    relative: &[u64],
    threaded_above: bool,
    out: &mut Found,
) -> Result<()> {
    let name = desc.name();
    if let Some(why) = refusal(desc) {
        return Err(refuse(state.path(), name, why));
    }
    let files = matches!(desc.resume(), Resume::ReadsFiles | Resume::Interleaves);
    let counted = desc.resume().counts_positions() || files;
    if threaded_above && !relative.is_empty() && !counted {
        // A threaded node above recorded items past its snapshot, which
        // this node may have drawn any number of positions for. Over an
        // ElasticSampler threaded nodes record a snapshot per item over such
        // a subtree (see `threaded::plan::needs_exact_snapshots`); over
        // files `settle` replays them into the state.
        let why = if reads_files(desc) {
            UNSETTLED
        } else {
            "the threaded node above recorded items past its snapshot, and how many positions stand behind them here is not known (over an ElasticSampler, a state that does not snapshot every item over a filter, try_map or mix)"
        };
        return Err(refuse(state.path(), name, why));
    }
    // What the one child below yields that counts as consumed, and whether
    // a threaded node stands above it.
    let (relative, threaded) = match desc.resume() {
        Resume::ReadsFiles | Resume::Interleaves => return walk_files(desc, state, relative, out),
        Resume::Redistributable => {
            let num_yielded: u64 = state.get("num_yielded")?;
            let consumed = Consumed::new(num_yielded, relative);
            out.cuts.push(Cut {
                node: "ElasticSampler",
                path: state.path().to_owned(),
                epoch: state.get("epoch")?,
                world_size: state.get("world_size")?,
                len: state.get("len")?,
                node_path: state.path().to_owned(),
                files: None,
                from: num_yielded,
                through: consumed.prefix,
                old: OldRank {
                    rank: state.get("rank")?,
                    plan: state.get("plan")?,
                    consumed,
                },
            });
            return Ok(());
        }
        // A threaded node above that delivered items past its snapshot was
        // refused above (a flat_map's items count no positions).
        Resume::Expands => return walk_expands(desc, state, threaded_above, out),
        Resume::ForwardsCount | Resume::OneToOne | Resume::Drops => {
            push_skipped(state, out)?;
            (relative.to_vec(), threaded_above)
        }
        &Resume::Groups(size) => {
            let pending = state.value("pending_errors")?;
            if pending.as_array().is_some_and(|a| !a.is_empty()) {
                let why = "it holds errors not yet delivered (take the state after they are)";
                return Err(refuse(state.path(), name, why));
            }
            let expanded = relative.iter().flat_map(|&b| b * size..(b + 1) * size);
            (expanded.collect(), threaded_above)
        }
        Resume::Buffers | Resume::Carries => {
            // Every item below was pulled: the positions behind the buffered
            // items (or carried pieces) and the ones it returned count as
            // consumed alike (a threaded node above snapshots every item over
            // a shuffle, so `relative` is empty here; see the threaded core's
            // `needs_exact_snapshots`). What it holds is dealt to the new
            // ranks.
            let shuffles = *desc.resume() == Resume::Buffers;
            let (key, what) = match shuffles {
                true => ("buffer", "buffered items"),
                false => ("carry", "carried pieces"),
            };
            let Value::Array(items) = state.value(key)? else {
                let why = format!("expected the array of {what}");
                return Err(Error::bad_state(state.path_of(key), why));
            };
            if shuffles {
                out.shuffle_epochs
                    .push((state.path().to_owned(), state.get("epoch")?));
            }
            out.buffers.push((state.path().to_owned(), items));
            (relative.to_vec(), threaded_above)
        }
        Resume::ReadsAhead { .. } if out.cursors_only => (Vec::new(), false),
        &Resume::ReadsAhead { in_order } => {
            push_skipped(state, out)?;
            let steps: u64 = state.get("steps_since_snapshot")?;
            let ahead: Vec<u64> = state.get_opt("delivered_ahead")?.unwrap_or_default();
            let mut delivered: Vec<u64> = (0..steps).chain(ahead.iter().copied()).collect();
            if !relative.is_empty() {
                if !in_order || !ahead.is_empty() {
                    let why = "it delivers out of order below another threaded node";
                    return Err(refuse(state.path(), name, why));
                }
                // In order, the items it yields next are the ones after `steps`.
                delivered.extend(relative.iter().map(|&r| steps + r));
            }
            let counted = !delivered.is_empty();
            (delivered, counted)
        }
        // The mixes (`refusal` let only these through).
        _ => {
            if out.cursors_only && state.contains("rng") {
                out.weighted.push(state.path().to_owned());
            }
            for (key, child) in desc.children() {
                let source = match out.raw_restarts {
                    true => child_at(state, key)?,
                    false => dealt_source(desc, state, key)?,
                };
                walk(child, &source, relative, threaded_above, out)?;
                if restarts(desc) {
                    push_next_epochs(child, &child_at(state, key)?, out)?;
                }
            }
            return Ok(());
        }
    };
    let mut children = desc.children();
    let (Some((key, child)), None) = (children.next(), children.next()) else {
        let why = "expected one child in its description";
        return Err(refuse(state.path(), name, why));
    };
    walk(child, &child_at(state, key)?, &relative, threaded, out)
}

#[cfg(test)]
mod tests {
    use super::delivered_items;

    /// The items a reader reads from its position: `skip` and `ahead` it
    /// passes over, the rest it makes, and of those `relative` (by their
    /// count among the made ones) were delivered above.
    fn by_hand(skip: u64, ahead: &[u64], relative: &[u64], len: u64) -> Vec<u64> {
        let passed = |i: u64| i < skip || ahead.contains(&i);
        let made: Vec<u64> = (0..len).filter(|&i| !passed(i)).collect();
        let mut all: Vec<u64> = (0..len).filter(|&i| passed(i)).collect();
        all.extend(relative.iter().map(|&r| made[r as usize]));
        all.sort_unstable();
        all
    }

    #[test]
    fn delivered_items_count_what_the_reader_passes_over_and_what_was_delivered_above() {
        let cases: [(u64, &[u64], &[u64]); 7] = [
            (0, &[], &[]),
            (0, &[], &[0, 1, 2]),
            (2, &[4], &[0, 1, 3]),
            (0, &[1, 3], &[0, 2]),
            (3, &[], &[1, 4]),
            (0, &[0, 5], &[0, 1, 2, 3]),
            (1, &[2, 3, 9], &[2, 6]),
        ];
        for (skip, ahead, relative) in cases {
            let all = by_hand(skip, ahead, relative, 20);
            let (first, rest) = delivered_items(skip, ahead, relative);
            let mut got: Vec<u64> = (0..first).collect();
            got.extend(&rest);
            assert_eq!(
                got, all,
                "skip {skip}, ahead {ahead:?}, relative {relative:?}"
            );
            assert!(
                rest.first().is_none_or(|&r| r > first),
                "{rest:?} after {first}"
            );
        }
        assert_eq!(delivered_items(2, &[4], &[0, 1, 3]), (5, vec![6]));
    }
}
