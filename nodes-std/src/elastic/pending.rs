//! The items old ranks' `flat_map`s (and `unbatch`es) were part way
//! through: found by the walk (the source's positions read from the state
//! after the item, the item kept as a [`Pending`]), and each rewound into a
//! state of the new rank's pipeline that yields it again.

use std::ops::Range;

use nodes_core::{Description, Error, Result, Resume, State};
use serde_json::Value;

use crate::elastic::Plan;
use crate::elastic::walk::{
    Begun, ByPath, Cut, Found, child_at, refuse, replace_at, restarts, walk,
};
use crate::sources::files::RankPlan;
use crate::transforms::shard::PLANNED;

/// An item an old rank's `flat_map` (or `unbatch`) was part way through:
/// `before`, a state of its source that yields the item first once the
/// `rewinds` make it one of a new rank's pipeline, and the elements
/// already returned.
#[derive(Clone)]
pub(crate) struct Pending {
    pub(crate) before: State,
    pub(crate) skip: u64,
    pub(crate) rewinds: Vec<Rewind>,
    /// The pending items of the `flat_map`s below, by the path of their
    /// state relative to `before`'s.
    pub(crate) nested: ByPath<Pending>,
    /// The weighted mixes below, by the path of their state relative to
    /// `before`'s: they draw again on the old rank's stream.
    pub(crate) replays: Vec<String>,
}

/// Where the `Files` below a file reader or an interleave is: the shard's
/// key in the node's state, and the `Files`' in the shard's.
#[derive(Clone)]
pub(crate) struct FilesAt {
    pub(crate) shard_key: String,
    pub(crate) files_key: String,
    pub(crate) interleaves: bool,
}

/// A sampler, file reader or interleave below a pending item's state, made
/// to read only the positions of its plan that the item came from.
#[derive(Clone)]
pub(crate) struct Rewind {
    /// Its state's path, relative to the pending state's.
    pub(crate) at: String,
    /// For a reader or an interleave, where its `Files` is.
    pub(crate) files: Option<FilesAt>,
    /// The positions to read, in order.
    pub(crate) positions: Vec<u64>,
    /// Those of each run after it, where a mix restarted the source while
    /// it read the item.
    pub(crate) then: Vec<Vec<u64>>,
    /// The epoch the first restart moves to, as the old rank's plan said.
    pub(crate) next_epoch: Option<u64>,
    /// The positions of an interleave's open slots, in slot order.
    pub(crate) slots: Vec<u64>,
    /// The length of the epoch's order.
    pub(crate) len: u64,
}

/// Records one old rank's `flat_map` or `unbatch`: its source as it stands
/// after the item it is part way through (which counts as consumed), that
/// item as a [`Pending`], and the pending items an earlier reshard dealt it.
pub(super) fn walk_expands(
    desc: &Description,
    state: &State,
    threaded_above: bool,
    out: &mut Found,
) -> Result<()> {
    let name = desc.name();
    let Some((key, child)) = desc.children().next() else {
        let why = "expected one child in its description";
        return Err(refuse(state.path(), name, why));
    };
    let mut pending = Vec::new();
    if state.contains("pending") {
        let list = state.child("pending")?;
        for entry in list.keys() {
            let entry = list.child(entry)?;
            let before = entry.child("source")?;
            pending.push(rewound(child, before, entry.get("skip")?, None)?);
        }
    }
    let idx: u64 = state.get(expansion_key(state)?)?;
    let before = child_at(state, key)?;
    if out.cursors_only {
        // Below another pending item, whose state restores this one's
        // pending items and then `before`.
        out.pending.push((state.path().to_owned(), pending));
        return walk(child, &before, &[], false, out);
    }
    let first = out.cuts.len();
    let source = walked_source(state, key)?;
    walk(child, &source, &[], threaded_above, out)?;
    if idx > 0 {
        let raw;
        let after = match child.subtree().any(restarts) {
            // The item may span restarts: where the sources stand, not
            // where their first runs ended (which the dealing reads).
            true => {
                let mut found = Found {
                    raw_restarts: true,
                    ..Found::default()
                };
                walk(child, &source, &[], threaded_above, &mut found)?;
                raw = found.cuts;
                &raw[..]
            }
            false => &out.cuts[first..],
        };
        pending.push(rewound(child, before, idx, Some(after))?);
    }
    out.pending.push((state.path().to_owned(), pending));
    Ok(())
}

/// The pending item whose source state is `before`, with `skip` elements
/// returned: each source below reads from where `before` stands to where
/// `after` (the cuts of the state after the item) stands, or, for an item
/// an earlier reshard dealt, to the end of its plan.
fn rewound(desc: &Description, before: State, skip: u64, after: Option<&[Cut]>) -> Result<Pending> {
    let mut found = Found {
        cursors_only: true,
        raw_restarts: true,
        ..Found::default()
    };
    walk(desc, &before, &[], false, &mut found)?;
    let base = before.path().to_owned();
    let before = without_after(desc, before)?;
    let relative = |path: &str| {
        let at = path.strip_prefix(&base).unwrap_or(path);
        at.trim_start_matches('/').to_owned()
    };
    let nested = found.pending.iter().filter(|(_, items)| !items.is_empty());
    let nested = nested.map(|(path, items)| (relative(path), items.clone()));
    let nested = nested.collect();
    let replays = found.weighted.iter().map(|path| relative(path)).collect();
    let mut rewinds = Vec::new();
    for (i, cut) in found.cuts.iter().enumerate() {
        let plan = &cut.old.plan;
        let (positions, then) = match after.map(|cuts| cuts.get(i)) {
            Some(Some(after)) => spans(cut, after)?,
            Some(None) => {
                let why = "the source's state after the item has fewer sources than before it";
                return Err(Error::bad_state(base, why));
            }
            None => (
                read(cut, plan, cut.from..plan.len(cut.len, cut.world_size)),
                plan.then.clone(),
            ),
        };
        let slots = found
            .begun
            .iter()
            .filter(|(path, _)| *path == cut.node_path)
            .flat_map(|(_, begun)| begun.iter())
            .filter(|(_, b)| matches!(b, Begun::Slot { .. }))
            .map(|&(position, _)| position);
        rewinds.push(Rewind {
            at: relative(&cut.node_path),
            files: cut.files.clone(),
            positions,
            then,
            next_epoch: plan.next_epoch,
            slots: slots.collect(),
            len: cut.len,
        });
    }
    Ok(Pending {
        before,
        skip,
        rewinds,
        nested,
        replays,
    })
}

/// The positions of `plan` (of `cut`'s source) at `steps`.
fn read(cut: &Cut, plan: &Plan, steps: Range<u64>) -> Vec<u64> {
    steps.map(|s| plan.position(s, cut.world_size)).collect()
}

/// The most positions a pending item's later runs may list: what an edited
/// state can make a reshard allocate (a real item spans about one run per
/// record it holds).
const MAX_LATER_POSITIONS: u64 = 1 << 24;

/// The positions a pending item's source read, from where it stood before
/// the item (`cut`) to where it stood after (`after`): those of its run,
/// then, for each restart a mix made while it read the item, those of the
/// old rank's share of the new run it read (every run in full but the last).
fn spans(cut: &Cut, after: &Cut) -> Result<(Vec<u64>, Vec<Vec<u64>>)> {
    let plan = &cut.old.plan;
    if after.epoch == cut.epoch {
        return Ok((read(cut, plan, cut.from..after.through), Vec::new()));
    }
    // The first restart moves to the epoch the plan says, the next ones
    // each to the epoch after.
    let restart = plan.next_epoch(cut.epoch, true);
    let fresh = Plan::fresh(cut.old.rank);
    let share = fresh.len(cut.len, cut.world_size);
    let full = after.epoch.checked_sub(restart);
    let total = full.and_then(|n| n.checked_mul(share)?.checked_add(after.through));
    let Some(full) = full.filter(|_| total.is_some_and(|t| t <= MAX_LATER_POSITIONS)) else {
        let why = format!(
            "the source is in epoch {} after the item and in epoch {} before it (restarting from epoch {restart}): not the runs of one item",
            after.epoch, cut.epoch
        );
        return Err(Error::bad_state(after.path.clone(), why));
    };
    let all = read(cut, &fresh, 0..share);
    let mut then = vec![all; full as usize];
    then.push(read(cut, &after.old.plan, 0..after.through));
    let first = read(cut, plan, cut.from..plan.len(cut.len, cut.world_size));
    Ok((first, then))
}

/// The state a reshard reads a `flat_map`'s or `unbatch`'s source from,
/// at the source's path `key` (where the new ranks' states are written):
/// part way through an item, the state after it (`after`), else `source`.
pub(super) fn walked_source(state: &State, key: &str) -> Result<State> {
    let idx: u64 = state.get(expansion_key(state)?)?;
    if idx == 0 {
        return child_at(state, key);
    }
    let mut at_source = state.clone();
    at_source.insert_child(key.to_owned(), state.child("after")?);
    child_at(&at_source, key)
}

/// A sampler's state (`state`, an `ElasticSampler`'s) made to read `plan`
/// as rank `rank` of `world`, nothing read yet.
pub(super) fn planned_sampler(
    mut state: State,
    plan: &Plan,
    rank: u64,
    world: u64,
) -> Result<State> {
    state.insert("num_yielded", 0u64)?;
    // Started: a rank with nothing left moves on to the next epoch.
    state.insert("started", true)?;
    state.insert("rank", rank)?;
    state.insert("world_size", world)?;
    state.insert("plan", plan)?;
    Ok(state)
}

/// The key of a `flat_map`'s (`output_idx`) or `unbatch`'s (`batch_idx`)
/// position in the current item: the one key of its state that is not
/// `source`, `after` or `pending`.
pub(crate) fn expansion_key(state: &State) -> Result<&str> {
    let mut keys = state.keys();
    let key = keys.find(|k| !matches!(*k, "source" | "after" | "pending"));
    key.ok_or_else(|| {
        let why = "expected the position in the current item";
        Error::bad_state(state.path().to_owned(), why)
    })
}

/// `state` (of `desc`) with the `after` of every `flat_map` or `unbatch`
/// in it left out: a pending item's source restores the states before
/// their items, whose sources the reshard rewinds, and only those.
fn without_after(desc: &Description, state: State) -> Result<State> {
    let mut state = state;
    if *desc.resume() == Resume::Expands && state.contains("after") {
        let key = expansion_key(&state)?.to_owned();
        let mut bare = State::new();
        bare.insert_child("source", state.child("source")?);
        let position = state.value(&key)?;
        bare.insert(key, position)?;
        if state.contains("pending") {
            bare.insert_child("pending", state.child("pending")?);
        }
        state = bare;
    }
    for (key, child) in desc.children() {
        if child.subtree().any(|d| *d.resume() == Resume::Expands) {
            let below = without_after(child, child_at(&state, key)?)?;
            state = replace_at(state, key, below)?;
        }
    }
    Ok(state)
}

/// `shard_state` (a shard's, over a `Files` under `files_key`) made to
/// yield the files at the positions of `plan` (for a rank of `world`),
/// none of them yielded yet.
pub(super) fn planned(
    shard_state: &State,
    files_key: &str,
    plan: Plan,
    world: u64,
) -> Result<State> {
    let mut files = child_at(shard_state, files_key)?;
    let world_size = world;
    let runs = 1 + plan.then.len() as u64;
    files.insert("plan", RankPlan { plan, world_size })?;
    files.insert("num_yielded", 0u64)?;
    files.insert("started", true)?;
    files.insert("path", None::<String>)?;
    files.insert("near", Vec::<String>::new())?;
    let mut shard_state = replace_at(shard_state.clone(), files_key, files)?;
    shard_state.insert("seen", 0u64)?;
    shard_state.insert(PLANNED, runs)?;
    Ok(shard_state)
}

/// The state of a pending item's source for new rank `rank` of `world`:
/// the old rank's, with each sampler and file list below reading only the
/// positions the item came from.
pub(super) fn rewind(item: &Pending, rank: u64, world: u64) -> Result<State> {
    let mut state = item.before.clone();
    for rewind in &item.rewinds {
        let node = child_at(&state, &rewind.at)?;
        let plan = Plan {
            next_epoch: rewind.next_epoch,
            then: rewind.then.clone(),
            ..Plan::only(rewind.positions.clone(), rewind.len)
        };
        let new = match &rewind.files {
            None => planned_sampler(node, &plan, rank, world)?,
            Some(files) => rewind_files(node, files, plan, &rewind.slots, world)?,
        };
        state = replace_at(state, &rewind.at, new)?;
    }
    for at in &item.replays {
        // The old rank's draws, on its stream (its rank stays in the state).
        let mut mix = child_at(&state, at)?;
        let mut rng = mix.child("rng")?;
        rng.insert(crate::mixing::weighted::REPLAY, true)?;
        mix.insert_child("rng", rng);
        state = replace_at(state, at, mix)?;
    }
    for (at, items) in &item.nested {
        let mut node = child_at(&state, at)?;
        let (old, mut new) = (node.child("pending")?, State::new());
        for (key, nested) in old.keys().zip(items) {
            let mut entry = old.child(key)?;
            entry.insert_child("source", rewind(nested, rank, world)?);
            new.insert_child(key.to_owned(), entry);
        }
        node.insert_child("pending", new);
        state = replace_at(state, at, node)?;
    }
    Ok(state)
}

/// A reader's or interleave's state (`node`) made to read the files at the
/// positions of `plan`: an interleave's open slots each pull their file
/// (at `slots`) again, a reader resumes only the files it reads.
fn rewind_files(
    node: State,
    files: &FilesAt,
    plan: Plan,
    slots: &[u64],
    world: u64,
) -> Result<State> {
    let (shard_key, files_key) = (files.shard_key.as_str(), files.files_key.as_str());
    let len = plan.tail;
    let count = plan.owed.len();
    let outer = planned(&child_at(&node, shard_key)?, files_key, plan, world)?;
    let mut node = replace_at(node, shard_key, outer)?;
    if files.interleaves {
        let old = node.child("slots")?;
        let mut new = State::new();
        for (key, &position) in old.keys().zip(slots) {
            let one = Plan::only(vec![position], len);
            let slot = old.child(key)?;
            let source = planned(&slot.child("source")?, files_key, one, world)?;
            new.insert_child(key.to_owned(), replace_at(slot, "source", source)?);
        }
        node.insert_child("slots", new);
    } else if node.contains("resume_at") {
        // Where files another rank began resume: those it reads after its open one.
        let open = node.get::<Option<String>>("path")?.is_some();
        let mut resume_at: Vec<Value> = node.get("resume_at")?;
        resume_at.truncate(count.saturating_sub(usize::from(open)));
        node.insert("resume_at", resume_at)?;
    }
    Ok(node)
}
