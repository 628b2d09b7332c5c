//! [`settle`]: the items a threaded node delivered past its last snapshot
//! of a file pipeline, replayed into the old ranks' states.

use nodes_core::{Description, Error, Loader, Node, Result, Resume, State};

use crate::elastic::walk::{RESHARD, child_at, reads_files};

/// A load settles one level of nested threaded nodes: the outer node's
/// replay leaves the inner one with items past its fresh snapshot, which
/// the next load replays.
const MAX_LOADS: usize = 8;

/// Replays into each old rank's state the items its `par_map`s and
/// `prefetch`es over files delivered past their last snapshots, so that
/// [`reshard`](crate::elastic::reshard) can read every position from the
/// states: loads each such state into the pipeline `build(rank,
/// world_size)` makes for its rank (the threaded nodes pull those items
/// again and snapshot their sources there) and takes its state again.
/// Other states are returned as they are.
///
/// Needed where such a node stands above a filter, `try_map`, shuffle,
/// pack, mix or interleave over a file reader: what it delivered past its
/// snapshot is then no count of lines, and `reshard` refuses the state
/// until it is settled. Offline, once, on the job's saved states; the
/// files must be readable, as they must be to resume.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::{Files, elastic};
///
/// let dir = std::env::temp_dir().join(format!("nodes-settle-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// for f in 0..4 {
///     std::fs::write(dir.join(format!("{f}.txt")), "1\n2\n3\n4\n5\n6\n")?;
/// }
/// let build = |rank, world| -> Result<_> {
///     let lines = Files::in_dir(&dir)?.shard(rank, world)?.read_lines();
///     lines.filter(|l: &String| l != "3").prefetch(2)
/// };
/// let mut states = Vec::new();
/// for rank in 0..2 {
///     let mut loader = Loader::new(build(rank, 2)?);
///     let mut epoch = loader.epoch();
///     for _ in 0..4 {
///         epoch.next().transpose()?;
///     }
///     states.push(epoch.state_dict()?);
/// }
/// let states = elastic::settle(build, &states)?;
/// let mut loader = Loader::new(build(0, 3)?);
/// elastic::load_resharded(&mut loader, &states, 0, 3)?;
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`Loader::load_state_dict`] for a state that does not fit the
/// pipeline `build` makes, an error of `build`, and
/// [`Error::InvalidArgument`] for a state with a threaded node over files
/// but no `shard` to take the rank from.
pub fn settle<N: Node>(
    mut build: impl FnMut(u64, u64) -> Result<N>,
    old_states: &[State],
) -> Result<Vec<State>> {
    let mut settled = Vec::with_capacity(old_states.len());
    for (i, state) in old_states.iter().enumerate() {
        let pipeline: Description = state.get("pipeline")?;
        if !unsettled(&pipeline, &state.child("root")?)? {
            settled.push(state.clone());
            continue;
        }
        let (rank, world_size) = rank_of(&pipeline).ok_or_else(|| {
            let why = format!("state #{i} reads files without a `shard` to take its rank from");
            Error::invalid_argument(RESHARD, why)
        })?;
        let mut loader = Loader::new(build(rank, world_size)?);
        let mut state = state.clone();
        let mut loads = 0;
        while unsettled(&pipeline, &state.child("root")?)? {
            if loads == MAX_LOADS {
                let why = format!(
                    "state #{i}: a threaded node still delivered items past its snapshot after {MAX_LOADS} loads (more nested threaded nodes than that)"
                );
                return Err(Error::invalid_argument(RESHARD, why));
            }
            loader.load_state_dict(&state)?;
            state = loader.state_dict()?;
            loads += 1;
        }
        settled.push(state);
    }
    Ok(settled)
}

/// [`settle`]s the old ranks' states with `build` where they need it, then
/// loads rank `rank`'s share of them into `loader` as
/// [`load_resharded`](crate::elastic::load_resharded) does: resuming any
/// pipeline the reshard accepts on another number of ranks in one call.
/// Settling costs each new rank the loads `settle` makes (none where no
/// state needs them); `settle` once offline and `load_resharded` on each
/// rank spends them once.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::{Files, elastic};
///
/// let dir = std::env::temp_dir().join(format!("nodes-settle-load-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// for f in 0..4 {
///     std::fs::write(dir.join(format!("{f}.txt")), "1\n2\n3\n4\n5\n6\n")?;
/// }
/// let build = |rank, world| -> Result<_> {
///     let lines = Files::in_dir(&dir)?.shard(rank, world)?.read_lines();
///     lines.filter(|l: &String| l != "3").prefetch(2)
/// };
/// let mut states = Vec::new();
/// for rank in 0..2 {
///     let mut loader = Loader::new(build(rank, 2)?);
///     let mut epoch = loader.epoch();
///     epoch.next().transpose()?;
///     states.push(epoch.state_dict()?);
/// }
/// let mut loader = Loader::new(build(2, 3)?);
/// elastic::load_resharded_with(&mut loader, build, &states, 2, 3)?;
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`settle`] and [`load_resharded`](crate::elastic::load_resharded).
pub fn load_resharded_with<N: Node, M: Node>(
    loader: &mut Loader<N>,
    build: impl FnMut(u64, u64) -> Result<M>,
    old_states: &[State],
    rank: u64,
    new_world_size: u64,
) -> Result<()> {
    let settled = settle(build, old_states)?;
    crate::elastic::load_resharded(loader, &settled, rank, new_world_size)
}

/// Whether a threaded node with a file reader below it delivered items
/// past its snapshot.
fn unsettled(desc: &Description, state: &State) -> Result<bool> {
    if let Resume::ReadsAhead { .. } = desc.resume()
        && state.get::<u64>("steps_since_snapshot")? > 0
        && reads_files(desc)
    {
        return Ok(true);
    }
    if *desc.resume() == Resume::Expands && state.contains("after") {
        // Part way through an item: its source stands at `after` (the
        // state before the item is only replayed, never dealt).
        let (_, child) = desc.children().next().expect("one child");
        return unsettled(child, &state.child("after")?);
    }
    for (key, child) in desc.children() {
        if unsettled(child, &child_at(state, key)?)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The rank and world size of the first shard in the pipeline.
fn rank_of(pipeline: &Description) -> Option<(u64, u64)> {
    let shard = pipeline.subtree().find(|d| *d.resume() == Resume::Shards)?;
    let param = |key| shard.get_param(key)?.parse().ok();
    Some((param("rank")?, param("world_size")?))
}
