//! [`reshard`]: the old ranks' states in, the new ranks' states out.

use std::collections::BTreeMap;

use nodes_core::__private::first_differing_node;
use nodes_core::{Description, Error, Loader, Node, Result, Resume, State};
use serde_json::Value;

use crate::elastic::Plan;
use crate::elastic::batches::{self, BatchSizes};
use crate::elastic::pending::{
    Pending, expansion_key, planned, planned_sampler, rewind, walked_source,
};
use crate::elastic::plan::{Dealing, OldRank, deal, share};
use crate::elastic::walk::{
    Begun, ByPath, Found, RESHARD, check as check_description, child_at, dealt_source,
    position_keys, replace_at, walk,
};
use crate::mixing::FIRST_ENDS;
use crate::policy::Counts;
use crate::sources::reader::{AHEAD, SKIP};

/// What the new ranks' states are written from, besides the template (old
/// rank 0's state), each by the path of a node's state.
struct Dealt {
    /// The rest of the epoch of every source, to deal into new plans.
    plans: BTreeMap<String, Dealing>,
    /// The files every old rank began and did not finish (with their
    /// positions), by the path of their reader's or interleave's state, in
    /// the order they are dealt.
    begun: BTreeMap<String, Vec<(u64, Begun)>>,
    /// The items every old rank's shuffler buffered, and the pieces every
    /// packer carried, in the order they are dealt (see [`share`]).
    buffers: BTreeMap<String, Vec<Value>>,
    /// The bad records every old rank skipped this pass, summed.
    skipped: BTreeMap<String, u64>,
    /// The items every old rank's `flat_map`s and `unbatch`es were part
    /// way through, in the order they are dealt.
    pending: BTreeMap<String, Vec<Pending>>,
    /// The epoch each source under a restarting mix moves to at its next
    /// restart: past every epoch any old rank's restarts read.
    next_epochs: BTreeMap<String, u64>,
}

/// One old rank's loader state, read.
struct Old {
    rank: u64,
    world_size: u64,
    epoch_index: u64,
    root: State,
    pipeline: Description,
    found: Found,
}

/// What a pipeline needs to change its number of ranks.
const NO_SOURCE: &str = "only pipelines that read map-style datasets through an ElasticSampler, or files through `Files` (maybe shuffled), `shard(rank, world_size)` and `read_lines`/`read_jsonl`/`read_parquet`, can change their number of ranks";

fn invalid(message: String) -> Error {
    Error::invalid_argument(RESHARD, message)
}

/// Reads one loader state: its place in the job and its cuts.
fn read(i: usize, state: &State) -> Result<Old> {
    let root = state.child("root")?;
    let epoch_index: u64 = state.get("epoch_index")?;
    let pipeline: Description = state.get("pipeline")?;
    let mut found = Found::default();
    walk(&pipeline, &root, &[], false, &mut found)?;
    let mut cuts = found.cuts.iter();
    let Some(first) = cuts.next() else {
        return Err(invalid(format!(
            "state #{i} has no ElasticSampler and no Files read through a shard: {NO_SOURCE}"
        )));
    };
    let (rank, world_size) = (first.old.rank, first.world_size);
    if let Some(c) = cuts.find(|c| (c.old.rank, c.world_size) != (rank, world_size)) {
        return Err(invalid(format!(
            "state #{i}: the {} at {} is rank {} of {}, the {} at {} rank {rank} of {world_size}",
            c.node, c.path, c.old.rank, c.world_size, first.node, first.path
        )));
    }
    Ok(Old {
        rank,
        world_size,
        epoch_index,
        root,
        pipeline,
        found,
    })
}

/// The description with the weighted mixes' and the shards' rank and world
/// size replaced, and the batch nodes' sizes by the next of `batch_sizes`
/// (the only parameters of a supported pipeline that differ between
/// ranks).
fn for_rank(
    desc: &Description,
    rank: u64,
    world_size: u64,
    batch_sizes: &mut dyn Iterator<Item = u64>,
) -> Description {
    let ranked = matches!(desc.resume(), Resume::Mixes { .. } | Resume::Shards);
    let mut resume = desc.resume().clone();
    let mut batch_size = None;
    if let Resume::Groups(size) = &mut resume {
        *size = batch_sizes.next().unwrap_or(*size);
        batch_size = Some(*size);
    }
    let mut out = Description::new(desc.name()).with_resume(resume);
    for (key, value) in desc.params() {
        out = match (key, batch_size) {
            ("rank", _) if ranked => out.param(key, rank),
            ("world_size", _) if ranked => out.param(key, world_size),
            ("batch_size", Some(size)) => out.param(key, size),
            _ => out.param(key, value),
        };
    }
    for (key, child) in desc.children() {
        out = out.child(key, for_rank(child, rank, world_size, batch_sizes));
    }
    out
}

/// The shape every old rank's pipeline must share: the description of
/// rank 0 of 1, batch sizes left out where the ranks' sizes are `dealt`
/// (ranks resharded with [`BatchSizes::KeepGlobalUneven`] batch unevenly).
fn shape(desc: &Description, dealt: bool) -> Description {
    match dealt {
        true => for_rank(desc, 0, 1, &mut std::iter::repeat(0)),
        false => for_rank(desc, 0, 1, &mut std::iter::empty()),
    }
}

/// The epochs of an old rank's samplers and file lists, then of its
/// shufflers, each with its node's name and path.
fn epochs(old: &Old) -> impl Iterator<Item = (&str, &str, u64)> {
    let (cuts, shuffles) = (old.found.cuts.iter(), old.found.shuffle_epochs.iter());
    let cuts = cuts.map(|c| (c.node, &*c.path, c.epoch));
    cuts.chain(shuffles.map(|(path, epoch)| ("Shuffler", &**path, *epoch)))
}

/// Checks that `olds` are the complete state set of one job, in one epoch,
/// and puts them in rank order.
fn check_set(mut olds: Vec<Old>) -> Result<Vec<Old>> {
    let world = olds[0].world_size;
    if let Some(o) = olds.iter().find(|o| o.world_size != world) {
        return Err(invalid(format!(
            "the states are from jobs of different sizes: rank {} of {}, rank {} of {world}",
            o.rank, o.world_size, olds[0].rank
        )));
    }
    olds.sort_by_key(|o| o.rank);
    for expected in 0..world {
        let what = match olds.get(expected as usize) {
            Some(o) if o.rank == expected => continue,
            Some(o) if o.rank < expected => format!("rank {} is given twice", o.rank),
            _ => format!("the state of rank {expected} is missing"),
        };
        return Err(invalid(format!(
            "incomplete state set: {what} (a job of {world} ranks needs one state per rank)"
        )));
    }
    if olds.len() as u64 > world {
        return Err(invalid(format!(
            "incomplete state set: {} states given for a job of {world} ranks (a rank is given twice)",
            olds.len()
        )));
    }
    let pipelines: Vec<&Description> = olds.iter().map(|o| &o.pipeline).collect();
    let dealt = batches::dealt_evenly(&pipelines);
    let first = shape(&olds[0].pipeline, dealt);
    for o in &olds[1..] {
        // The same comparison as `==`, telling where they differ.
        let other = shape(&o.pipeline, dealt);
        if let Some((at, a, b)) = first_differing_node(&first, &other, "") {
            let rank = o.rank;
            return Err(invalid(format!(
                "the state of rank {rank} is from another pipeline than rank 0's (at {at}: rank 0 has {a}, rank {rank} {b})"
            )));
        }
        if o.epoch_index != olds[0].epoch_index {
            return Err(invalid(format!(
                "the states are from different epochs: rank 0 is in epoch {}, rank {} in epoch {}",
                olds[0].epoch_index, o.rank, o.epoch_index
            )));
        }
        for ((node, path, a), (_, _, b)) in epochs(&olds[0]).zip(epochs(o)) {
            if a != b {
                return Err(invalid(format!(
                    "the states are from different epochs: the {node} at {path} is in epoch {a} on rank 0, {b} on rank {}",
                    o.rank
                )));
            }
        }
    }
    Ok(olds)
}

/// The new plans of every source, the shares of every shuffle buffer and
/// the summed skips of every error budget, by the path of the node's state.
///
/// The buffered items of a shuffler are taken old rank by old rank (in rank
/// order), each rank's in buffer order, and the `j`-th goes to new rank
/// `j mod new_world`. Nothing here costs per new rank: a rank's share is
/// taken when its state is written.
fn deal_all(olds: &mut [Old], new_world: u64) -> Result<Dealt> {
    let world = olds[0].world_size;
    let mut plans = BTreeMap::new();
    for (s, cut) in olds[0].found.cuts.iter().enumerate() {
        let old: Vec<OldRank> = olds.iter().map(|o| o.found.cuts[s].old.clone()).collect();
        let what = format!("the {} at {}", cut.node, cut.path);
        let new = deal(&what, &old, world, cut.len, new_world)?;
        plans.insert(cut.path.clone(), new);
    }
    let begun = gather(olds, |found| &mut found.begun);
    let buffers = gather(olds, |found| &mut found.buffers);
    let pending = gather(olds, |found| &mut found.pending);
    let mut skipped = BTreeMap::new();
    for (s, (path, _)) in olds[0].found.skipped.iter().enumerate() {
        let each = olds.iter().map(|o| o.found.skipped[s].1);
        skipped.insert(path.clone(), each.fold(0, u64::saturating_add));
    }
    let mut next_epochs = BTreeMap::new();
    for (path, next) in olds.iter().flat_map(|o| &o.found.next_epochs) {
        let max = next_epochs.entry(path.clone()).or_insert(*next);
        *max = (*max).max(*next);
    }
    Ok(Dealt {
        plans,
        begun,
        buffers,
        skipped,
        pending,
        next_epochs,
    })
}

/// Every old rank's list under each path of the lists `lists` picks, joined
/// in rank order. Moved, not copied: the old ranks' items are needed only
/// here.
fn gather<T>(
    olds: &mut [Old],
    lists: fn(&mut Found) -> &mut ByPath<T>,
) -> BTreeMap<String, Vec<T>> {
    let paths: Vec<String> = lists(&mut olds[0].found)
        .iter()
        .map(|l| l.0.clone())
        .collect();
    let joined = paths.into_iter().enumerate().map(|(s, path)| {
        let all = olds
            .iter_mut()
            .flat_map(|o| std::mem::take(&mut lists(&mut o.found)[s].1));
        (path, all.collect())
    });
    joined.collect()
}

/// `template` (an old rank's state of the node `desc`) rewritten for new
/// rank `rank` of `world`: sources at their new plans, shufflers with their
/// share of the buffered items, error budgets with their share of the
/// skips, every other position at the start of the rest of the epoch.
fn rebuild(
    desc: &Description,
    template: &State,
    rank: u64,
    world: u64,
    dealt: &Dealt,
) -> Result<State> {
    if *desc.resume() == Resume::Expands {
        return rebuild_expands(desc, template, rank, world, dealt);
    }
    let mut out = template.clone();
    if *desc.resume() == Resume::Redistributable {
        let mut plan = dealt.plans[template.path()].plan(rank, world);
        plan.next_epoch = dealt.next_epochs.get(template.path()).copied();
        return planned_sampler(out, &plan, rank, world);
    }
    if let Some(begun) = dealt.begun.get(template.path()) {
        out = rebuild_files(desc, out, share(begun, rank, world), rank, world, dealt)?;
    } else {
        for (key, child) in desc.children() {
            let source = dealt_source(desc, template, key)?;
            let new = rebuild(child, &source, rank, world, dealt)?;
            out = replace_at(out, key, new)?;
        }
    }
    if let Some(&total) = dealt.skipped.get(template.path()) {
        // This rank's share of the skipped records: `total / world`, plus
        // one on the first `total % world` ranks, so the shares add up.
        let share = total / world + u64::from(rank < total % world);
        Counts::skipped_so_far(share).save(&mut out)?;
    }
    match desc.resume() {
        // A `try_map`'s count of the items it saw this pass.
        Resume::Drops if out.contains("num_seen") => out.insert("num_seen", 0u64)?,
        Resume::Carries => {
            out.insert("carry", share(&dealt.buffers[template.path()], rank, world))?;
        }
        Resume::Buffers => {
            let buffer = share(&dealt.buffers[template.path()], rank, world);
            out.insert("buffer", buffer)?;
            // The same seed, on a stream of this new rank's own.
            let epoch: u64 = template.get("epoch")?;
            let mut rng = template.child("rng")?;
            rng.insert("stream", crate::seed::reshard_stream(epoch, rank, world))?;
            rng.insert("word_pos", 0u64)?;
            out.insert_child("rng", rng);
            out.insert("started", true)?;
        }
        Resume::ReadsAhead { .. } => {
            out.insert("steps_since_snapshot", 0u64)?;
            if out.contains("snapshot_index") {
                out.insert("snapshot_index", 0u64)?;
            }
            if out.contains("delivered_ahead") {
                out.insert("delivered_ahead", Vec::<u64>::new())?;
            }
        }
        Resume::Mixes { .. } => {
            // No source has ended in the new rank's pass.
            if out.contains(FIRST_ENDS) {
                out = without(&out, &[FIRST_ENDS])?;
            }
            let mut flags = State::new();
            for key in out.get::<Vec<String>>("dataset_keys")? {
                flags.insert(key, false)?;
            }
            out.insert_child("datasets_exhausted", flags.clone());
            out.insert_child("datasets_empty", flags);
            // The weighted mix draws from a random stream; the round-robin
            // one takes turns.
            if out.contains("rng") {
                out.insert("num_yielded", 0u64)?;
                out.insert("started", true)?;
                // A new stream: (seed, epoch, new rank, new world size).
                let mut rng = out.child("rng")?;
                rng.insert("rank", rank)?;
                rng.insert("world_size", world)?;
                let ranks = crate::rank::Rank::new(RESHARD, rank, world)?;
                let stream = crate::seed::PassRng::pass_stream(out.get("epoch")?, ranks);
                rng.insert("stream", stream)?;
                rng.insert("word_pos", 0u64)?;
                out.insert_child("rng", rng);
            } else {
                out.insert("current_dataset_index", 0u64)?;
            }
        }
        _ => {}
    }
    Ok(out)
}

/// A file reader's or interleave's state (`out`, an old rank's) rewritten
/// for new rank `rank` of `world`: the files other ranks began that fall
/// to it (`begun`) to be finished first (a reader's first in its plan,
/// with where to resume each; an interleave's each in a slot of its own),
/// then the rest of its `Files` plan, all of it passed on by the shard.
fn rebuild_files(
    desc: &Description,
    mut out: State,
    begun: Vec<(u64, Begun)>,
    rank: u64,
    world: u64,
    dealt: &Dealt,
) -> Result<State> {
    let (shard_key, shard) = desc.children().next().expect("checked by the walk");
    let (files_key, _) = shard.children().next().expect("checked by the walk");
    let shard_state = child_at(&out, shard_key)?;
    let files = child_at(&shard_state, files_key)?;
    let planned = |plan: Plan| planned(&shard_state, files_key, plan, world);
    let mut plan = dealt.plans[files.path()].plan(rank, world);
    plan.next_epoch = dealt.next_epochs.get(files.path()).copied();
    if *desc.resume() == Resume::ReadsFiles {
        let reader = |(position, at)| match at {
            Begun::Reader(at) => (position, at),
            Begun::Slot { .. } => unreachable!("a reader's cut"),
        };
        let (positions, resume_at): (Vec<u64>, Vec<Value>) = begun.into_iter().map(reader).unzip();
        plan.owed.splice(0..0, positions);
        out = replace_at(out, shard_key, planned(plan)?)?;
        // Between files (see `position_keys`).
        let keys: Vec<String> = position_keys(&out).map(str::to_owned).collect();
        for key in keys {
            match key.as_str() {
                "path" | "identity" => out.insert(key, Value::Null)?,
                _ => out.insert(key, 0u64)?,
            }
        }
        // Items to pass over were in the file the old rank had open.
        if out.contains(SKIP) || out.contains(AHEAD) {
            out = without(&out, &[SKIP, AHEAD])?;
        }
        // Empty on a rank that got none: its next state leaves the key out.
        out.insert("resume_at", resume_at)?;
        return Ok(out);
    }
    // Each slot's outer state yields its one file (so that a restore pulls
    // it again from the list, which may have moved), after which the
    // interleave reads the rest of the plan.
    let len: u64 = files.child("files")?.get("count")?;
    let mut slots = State::new();
    let used = begun.len();
    for (i, (position, at)) in begun.into_iter().enumerate() {
        let Begun::Slot { item, inner } = at else {
            unreachable!("an interleave's cut")
        };
        let one = Plan::only(vec![position], len);
        let mut slot = State::new().with("item", item)?;
        slot.insert_child("source", planned(one)?);
        slot.insert_child("state", inner);
        slots.insert_child(i.to_string(), slot);
    }
    out = replace_at(out, shard_key, planned(plan)?)?;
    out.insert("cycle_index", 0u64)?;
    out.insert("block_index", 0u64)?;
    out.insert("end_of_input", false)?;
    out.insert("slots_used", used)?;
    out.insert_child("slots", slots);
    Ok(out)
}

/// `state` without the keys `left_out`.
fn without(state: &State, left_out: &[&str]) -> Result<State> {
    let mut out = State::new();
    for key in state.keys().filter(|key| !left_out.contains(key)) {
        match state.child(key) {
            Ok(child) => out.insert_child(key.to_owned(), child),
            Err(_) => out.insert(key.to_owned(), state.value_ref(key)?)?,
        }
    }
    Ok(out)
}

/// A `flat_map`'s or `unbatch`'s state (`template`, old rank 0's) for new
/// rank `rank` of `world`: its source rebuilt from where it stood after
/// the item it was part way through, no item begun, and the pending items
/// dealt to this rank.
fn rebuild_expands(
    desc: &Description,
    template: &State,
    rank: u64,
    world: u64,
    dealt: &Dealt,
) -> Result<State> {
    let (key, child) = desc.children().next().expect("checked by the walk");
    let idx_key = expansion_key(template)?.to_owned();
    let source = rebuild(child, &walked_source(template, key)?, rank, world, dealt)?;
    let mut out = replace_at(State::new(), key, source)?;
    out.insert(idx_key, 0u64)?;
    let all = dealt.pending.get(template.path());
    let mine = share(all.map_or(&[][..], Vec::as_slice), rank, world);
    if !mine.is_empty() {
        let mut list = State::new();
        for (i, item) in mine.iter().enumerate() {
            let mut entry = State::new();
            entry.insert_child("source", rewind(item, rank, world)?);
            entry.insert("skip", item.skip)?;
            list.insert_child(i.to_string(), entry);
        }
        out.insert_child("pending", list);
    }
    Ok(out)
}

/// Reads the old states and checks that they are one job's, in rank order.
fn read_set(old_states: &[State], new_world: u64, verify: bool) -> Result<Vec<Old>> {
    crate::rank::Rank::new(RESHARD, 0, new_world)?;
    if old_states.is_empty() {
        return Err(invalid("no states given".to_owned()));
    }
    let olds = old_states.iter().enumerate().map(|(i, s)| {
        let old = read(i, s)?;
        // After the walk's checks, which name a damaged value at its path.
        if verify {
            let skips = "`Reshard::verify_checksum(false)`";
            nodes_core::__private::verify_checksum(s, skips).map_err(|e| match e {
                Error::BadState { path, message } => {
                    Error::bad_state(path, format!("state #{i}: {message}"))
                }
                e => e,
            })?;
        }
        Ok(old)
    });
    check_set(olds.collect::<Result<_>>()?)
}

/// The old ranks, read and checked, and the rest of the epoch dealt.
struct Prepared {
    olds: Vec<Old>,
    dealt: Dealt,
    /// The global batch of every batch node (see [`batches::globals`]).
    globals: Vec<u64>,
}

impl Prepared {
    fn new(old_states: &[State], new_world: u64, verify: bool) -> Result<Prepared> {
        let mut olds = read_set(old_states, new_world, verify)?;
        let dealt = deal_all(&mut olds, new_world)?;
        let globals = batches::globals(olds.iter().map(|o| &o.pipeline));
        Ok(Prepared {
            olds,
            dealt,
            globals,
        })
    }

    fn state_for(&self, sizes: BatchSizes, rank: u64, world: u64) -> Result<State> {
        let template = &self.olds[0];
        let new = sizes.for_rank(&template.pipeline, &self.globals, rank, world)?;
        let root = rebuild(&template.pipeline, &template.root, rank, world, &self.dealt)?;
        let pipeline = for_rank(&template.pipeline, rank, world, &mut new.into_iter());
        nodes_core::__private::loader_state(root, 0, template.epoch_index, &pipeline)
    }
}

/// A reshard with its options: [`reshard`], [`reshard_rank`] and
/// [`load_resharded`] are this one with the defaults.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::{ElasticSampler, elastic};
/// use nodes_std::elastic::{BatchSizes, Reshard};
///
/// let build = |rank, world, batch_size| -> Result<_> {
///     let sampler = ElasticSampler::new(SequentialSampler::new(24), rank, world)?;
///     MapStyleWrapper::new((0..24).collect::<Vec<u32>>(), sampler).batch(batch_size)
/// };
/// // Two ranks of 6: a global batch of 12.
/// let mut states = Vec::new();
/// for rank in 0..2 {
///     let mut loader = Loader::new(build(rank, 2, 6)?);
///     states.push(loader.state_dict()?);
/// }
/// // Three ranks of 4 keep it.
/// let reshard = Reshard::new(&states).batch_sizes(BatchSizes::KeepGlobal);
/// assert_eq!(reshard.new_batch_size(0, 3)?, Some(4));
/// let mut loader = Loader::new(build(0, 3, 4)?);
/// reshard.load(&mut loader, 0, 3)?;
/// let batches: Vec<Vec<u32>> = loader.epoch().collect::<Result<_>>()?;
/// assert_eq!(batches, [vec![0, 3, 6, 9], vec![12, 15, 18, 21]]);
/// // Five ranks cannot each batch 12 / 5 items.
/// let err = reshard.new_batch_size(0, 5).unwrap_err().to_string();
/// assert!(err.contains("4 or 6 ranks do"), "{err}");
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
#[must_use = "a reshard does nothing until asked for states"]
pub struct Reshard<'s> {
    old_states: &'s [State],
    batch_sizes: BatchSizes,
    verify_checksum: bool,
}

impl<'s> Reshard<'s> {
    /// A reshard of the loader states of every rank of a job, in any order.
    pub fn new(old_states: &'s [State]) -> Self {
        Reshard {
            old_states,
            batch_sizes: BatchSizes::PerRank,
            verify_checksum: true,
        }
    }

    /// Checks each old state against its checksum, as
    /// [`Loader::verify_checksum`] does (the default): a checkpoint damaged
    /// or edited after it was written is refused at its `/checksum`, naming
    /// it (`state #i`), rather than dealt to the new ranks. Turn it off to
    /// reshard states edited by hand.
    pub fn verify_checksum(mut self, verify: bool) -> Self {
        self.verify_checksum = verify;
        self
    }

    /// Sets what happens to the size of every `batch` (see [`BatchSizes`];
    /// [`BatchSizes::PerRank`] by default).
    pub fn batch_sizes(mut self, batch_sizes: BatchSizes) -> Self {
        self.batch_sizes = batch_sizes;
        self
    }

    /// The states of `new_world_size` ranks that read the rest of the
    /// epoch exactly once between them; state `m` is for rank `m`. See
    /// [`reshard`].
    ///
    /// # Errors
    /// As [`reshard`], and [`Error::InvalidArgument`] for batch sizes the
    /// new ranks cannot keep (see [`BatchSizes`]).
    pub fn states(&self, new_world_size: u64) -> Result<Vec<State>> {
        // It holds every new rank's state; `rank_state` writes one of any world.
        if new_world_size > 1 << 20 {
            return Err(invalid(format!(
                "new_world_size {new_world_size} is more than the 2^20 states `reshard` writes at once: call `reshard_rank` on each new rank"
            )));
        }
        let prepared = Prepared::new(self.old_states, new_world_size, self.verify_checksum)?;
        (0..new_world_size)
            .map(|m| prepared.state_for(self.batch_sizes, m, new_world_size))
            .collect()
    }

    /// The state of one new rank: `states(new_world_size)[rank]`, for a
    /// rank that combines the old states itself. See [`reshard_rank`].
    ///
    /// # Errors
    /// As [`reshard_rank`], and [`Error::InvalidArgument`] for batch sizes
    /// the new ranks cannot keep (see [`BatchSizes`]).
    pub fn rank_state(&self, rank: u64, new_world_size: u64) -> Result<State> {
        crate::rank::Rank::new(RESHARD, rank, new_world_size)?;
        let prepared = Prepared::new(self.old_states, new_world_size, self.verify_checksum)?;
        prepared.state_for(self.batch_sizes, rank, new_world_size)
    }

    /// Loads rank `rank`'s state ([`rank_state`](Self::rank_state)) into
    /// `loader`, built for that rank with its
    /// [`new_batch_size`](Self::new_batch_size). See [`load_resharded`].
    ///
    /// # Errors
    /// As [`rank_state`](Self::rank_state), and as
    /// [`Loader::load_state_dict`].
    pub fn load<N: Node>(
        &self,
        loader: &mut Loader<N>,
        rank: u64,
        new_world_size: u64,
    ) -> Result<()> {
        loader.load_state_dict(&self.rank_state(rank, new_world_size)?)
    }

    /// The size of the outermost `batch` on new rank `rank` of
    /// `new_world_size` (`None` for a pipeline without one): what to build
    /// that rank's pipeline with. Reads the old states, and deals nothing.
    ///
    /// # Errors
    /// As [`rank_state`](Self::rank_state).
    pub fn new_batch_size(&self, rank: u64, new_world_size: u64) -> Result<Option<usize>> {
        crate::rank::Rank::new(RESHARD, rank, new_world_size)?;
        let olds = read_set(self.old_states, new_world_size, self.verify_checksum)?;
        let globals = batches::globals(olds.iter().map(|o| &o.pipeline));
        let sizes = self
            .batch_sizes
            .for_rank(&olds[0].pipeline, &globals, rank, new_world_size)?;
        Ok(sizes.first().map(|&size| size as usize))
    }
}

/// Checks, before any state is taken, that a pipeline can change its number
/// of ranks: `Ok` if [`reshard`] will accept its states (once
/// [`settle`](crate::elastic::settle)d, where a threaded node read ahead
/// over files), else the
/// [`Error::InvalidArgument`] naming the first node that stops it and its
/// path in the state (the same error `reshard` would give). Pass it
/// `loader.describe()` (or a node's `describe()`).
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::{ElasticSampler, elastic};
///
/// let sampler = ElasticSampler::new(SequentialSampler::new(10), 0, 2)?;
/// let good = MapStyleWrapper::new((0..10).collect::<Vec<u32>>(), sampler).batch(2)?;
/// elastic::check(&good.describe())?;
///
/// let bad = IterableWrapper::new(0..10u32).batch(2)?;
/// let err = elastic::check(&bad.describe()).unwrap_err().to_string();
/// assert!(err.contains("IterableWrapper at /root/source cannot be resharded"), "{err}");
/// # Ok::<(), nodes_std::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] for a node whose position is not a function
/// of global indices or files, or a pipeline without an
/// [`ElasticSampler`](crate::ElasticSampler) or a [`Files`](crate::Files)
/// read through a shard.
pub fn check(pipeline: &Description) -> Result<()> {
    if check_description(pipeline, "/root")? == 0 {
        return Err(invalid(format!(
            "the pipeline has no ElasticSampler and no Files read through a shard: {NO_SOURCE}"
        )));
    }
    Ok(())
}

/// Combines the loader states of every rank of a job (in any order) into the
/// states of `new_world_size` ranks that read the rest of the epoch exactly
/// once between them; state `m` is for rank `m`. See the
/// [module documentation](crate::elastic) for what is supported.
///
/// # Errors
/// [`Error::InvalidArgument`] (naming what is wrong, never a fallback) for:
/// `new_world_size` 0; no states; a rank missing or given twice; states from
/// jobs of different sizes, other pipelines or different epochs (or from
/// different runs: plans that do not fit together); a pipeline with a
/// node whose position is not a function of global indices (the error names
/// it and its path); a state in which a `par_map` or `prefetch` over files
/// delivered items past its snapshot that no count of lines shows (pass
/// the states through [`settle`](crate::elastic::settle) first); and a
/// `new_world_size` above 2^20 (one state per new rank: use
/// [`reshard_rank`] on each rank). A state that does not parse as
/// a loader state, or that does not match its checksum (damaged or edited
/// after it was written; see [`Reshard::verify_checksum`]), is an
/// [`Error::BadState`] at its path.
pub fn reshard(old_states: &[State], new_world_size: u64) -> Result<Vec<State>> {
    Reshard::new(old_states).states(new_world_size)
}

/// The state of one new rank: `reshard(old_states, new_world_size)[rank]`,
/// for a rank that combines the old states itself. Its cost does not grow
/// with `new_world_size`, which may be any number of ranks.
///
/// # Errors
/// As [`reshard`] (but for the 2^20 ranks), and [`Error::InvalidArgument`]
/// if `rank >= new_world_size` or the new ranks' positions would pass 2^64.
pub fn reshard_rank(old_states: &[State], rank: u64, new_world_size: u64) -> Result<State> {
    Reshard::new(old_states).rank_state(rank, new_world_size)
}

/// Reshards and loads in one call: `loader`, built for rank `rank` of
/// `new_world_size`, takes its share of the rest of the epoch of the job
/// whose ranks saved `old_states` (the state [`reshard_rank`] writes for
/// it).
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::{ElasticSampler, elastic};
///
/// let build = |rank, world| -> Result<_> {
///     let sampler = ElasticSampler::new(SequentialSampler::new(10), rank, world)?;
///     MapStyleWrapper::new((0..10).collect::<Vec<u32>>(), sampler).batch(2)
/// };
/// let mut states = Vec::new();
/// for rank in 0..2 {
///     let mut loader = Loader::new(build(rank, 2)?);
///     states.push(loader.state_dict()?);
/// }
/// let mut loader = Loader::new(build(0, 3)?);
/// elastic::load_resharded(&mut loader, &states, 0, 3)?;
/// let batches: Vec<Vec<u32>> = loader.epoch().collect::<Result<_>>()?;
/// assert_eq!(batches, [vec![0, 3], vec![6, 9]]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
///
/// # Errors
/// As [`reshard_rank`], and as [`Loader::load_state_dict`] (a `loader`
/// built for another rank, world size or pipeline).
pub fn load_resharded<N: Node>(
    loader: &mut Loader<N>,
    old_states: &[State],
    rank: u64,
    new_world_size: u64,
) -> Result<()> {
    Reshard::new(old_states).load(loader, rank, new_world_size)
}
