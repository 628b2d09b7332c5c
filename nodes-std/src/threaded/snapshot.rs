//! The consumer's position: a source snapshot plus what was received since.
//!
//! Workers run ahead of the consumer, so the source's own state describes the
//! read-ahead position, not what the consumer has seen. The thread-backed
//! nodes therefore use torchdata's snapshot protocol: the thread that pulls
//! from the source numbers every item (0, 1, 2, ... from the start of the
//! pass) and, every `snapshot_frequency` items, records the source's state
//! right after pulling an item and sends it along with that item. The consumer
//! adopts a snapshot once every item before it has been delivered, and counts
//! what it delivered since.
//!
//! Unlike torchdata, the position stays exact when items are delivered out of
//! order: besides the contiguous count after the snapshot, the [`Cursor`]
//! remembers the indices delivered beyond the first gap (at most
//! `max_concurrent` of them), and a snapshot is only adopted when everything
//! before it was delivered. Restoring skips exactly the delivered items.

use std::collections::{BTreeMap, BTreeSet};

use nodes_core::{Error, Node, Replay, Result, State};

/// Key of the source snapshot.
pub(crate) const SNAPSHOT: &str = "snapshot";
/// Key of the index of the first item after the snapshot.
pub(crate) const SNAPSHOT_INDEX: &str = "snapshot_index";
/// Key of the count of items after the snapshot that were all delivered.
pub(crate) const STEPS: &str = "steps_since_snapshot";
/// Key of the offsets (from the snapshot) of items delivered beyond that count.
pub(crate) const DELIVERED_AHEAD: &str = "delivered_ahead";
/// Key of the largest offset from the snapshot that the node which wrote the
/// state could have recorded in `steps_since_snapshot` (given its snapshot
/// frequency, its read-ahead and the skips it was restored with) or wrote
/// in `delivered_ahead`. A restore replays at most this many items.
pub(crate) const MAX_OFFSET: &str = "max_offset";

/// The most items a paced snapshot protocol (`prefetch`) lets pass between
/// two snapshots, whatever the timing: the largest `steps_since_snapshot` a
/// `Prefetcher` writes, and so the longest replay a restore of one does.
pub(crate) const MAX_PACED_STEPS: u64 = 1 << 16;

/// A saved position, decoded and checked but not applied yet.
#[derive(Debug)]
pub(crate) struct Saved {
    /// The source state to reset the source to.
    pub(crate) snapshot: State,
    /// The index (from the start of the pass) of the first item after `snapshot`.
    pub(crate) snapshot_index: u64,
    /// Items right after the snapshot that were delivered: skip them.
    pub(crate) steps: u64,
    /// Indices (from the start of the pass, ascending, all beyond
    /// `snapshot_index + steps`) of items delivered out of order: skip them too.
    pub(crate) ahead: Vec<u64>,
    /// The JSON paths of `steps` and `ahead` in the checkpoint, for errors
    /// found while applying them.
    pub(crate) steps_path: String,
    pub(crate) ahead_path: String,
}

/// The largest offset from the snapshot a state may name, and where that
/// bound comes from (for the error).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bound {
    /// `steps_since_snapshot` and every `delivered_ahead` offset are at most this.
    pub(crate) max_offset: u64,
    /// Whether the bound was recorded in the state (else it is the
    /// restoring node's own).
    pub(crate) recorded: bool,
}

/// An error unless `value <= bound.max_offset`.
fn check_bound(value: u64, bound: Bound, path: String, what: &str) -> Result<()> {
    if value <= bound.max_offset {
        return Ok(());
    }
    let source = if bound.recorded {
        format!("the {MAX_OFFSET} ({}) recorded with it", bound.max_offset)
    } else {
        format!(
            "what this node records (at most {} items after a snapshot)",
            bound.max_offset
        )
    };
    Err(Error::bad_state(
        path,
        format!(
            "{what} {value} is beyond {source}: the state is damaged or from another pipeline (a restore would replay that many items)"
        ),
    ))
}

/// The largest item index a restored position may name. No pass comes near
/// 2^63 items, and the headroom keeps the index arithmetic of the pass that
/// follows (one increment per item) from overflowing.
const MAX_INDEX: u64 = i64::MAX as u64;

/// An error unless `index <= MAX_INDEX`.
fn check_index(index: Option<u64>, path: String, what: &str) -> Result<u64> {
    match index {
        Some(i) if i <= MAX_INDEX => Ok(i),
        _ => Err(Error::bad_state(
            path,
            format!("{what} is beyond any pass (at most 2^63 - 1 items)"),
        )),
    }
}

impl Saved {
    /// Decodes `{snapshot, snapshot_index, steps_since_snapshot,
    /// delivered_ahead, max_offset}`. `optional` are further keys the node
    /// may keep beside these (decoded by it).
    pub(crate) fn decode(node: &str, state: &State, optional: &[&str]) -> Result<Saved> {
        let mut keys = vec![SNAPSHOT, SNAPSHOT_INDEX, STEPS, DELIVERED_AHEAD, MAX_OFFSET];
        keys.extend(optional.iter().filter(|k| state.contains(k)));
        state.expect_keys(node, &keys)?;
        let bound = Bound {
            max_offset: state.get(MAX_OFFSET)?,
            recorded: true,
        };
        let snapshot_index: u64 = state.get(SNAPSHOT_INDEX)?;
        let steps: u64 = state.get(STEPS)?;
        check_bound(steps, bound, state.path_of(STEPS), STEPS)?;
        let offsets: Vec<u64> = state.get(DELIVERED_AHEAD)?;
        let snapshot = state.child(SNAPSHOT)?;
        check_index(
            Some(snapshot_index),
            state.path_of(SNAPSHOT_INDEX),
            "snapshot_index",
        )?;
        let resume = check_index(
            snapshot_index.checked_add(steps),
            state.path_of(STEPS),
            "snapshot_index + steps_since_snapshot",
        )?;
        let mut ahead = Vec::with_capacity(offsets.len());
        let mut previous = steps;
        for (i, &offset) in offsets.iter().enumerate() {
            let path = format!("{}/{i}", state.path_of(DELIVERED_AHEAD));
            if offset <= previous {
                return Err(Error::bad_state(
                    path,
                    format!(
                        "offsets must be ascending and greater than {STEPS} ({steps}), found {offset} after {previous}"
                    ),
                ));
            }
            check_bound(offset, bound, path.clone(), "offset")?;
            previous = offset;
            ahead.push(check_index(
                snapshot_index.checked_add(offset),
                path,
                "snapshot_index + offset",
            )?);
        }
        debug_assert!(ahead.first().is_none_or(|&a| a > resume));
        Ok(Saved {
            snapshot,
            snapshot_index,
            steps,
            ahead,
            steps_path: state.path_of(STEPS),
            ahead_path: state.path_of(DELIVERED_AHEAD),
        })
    }

    /// Decodes the two-key form `{snapshot, steps_since_snapshot}` (a node
    /// that delivers strictly in order and needs no absolute index), whose
    /// steps are at most `max_steps` (what such a node writes).
    pub(crate) fn decode_in_order(
        node: &str,
        state: &State,
        optional: &[&str],
        max_steps: u64,
    ) -> Result<Saved> {
        let mut keys = vec![SNAPSHOT, STEPS];
        keys.extend(optional.iter().filter(|k| state.contains(k)));
        state.expect_keys(node, &keys)?;
        let steps: u64 = state.get(STEPS)?;
        let bound = Bound {
            max_offset: max_steps,
            recorded: false,
        };
        check_bound(steps, bound, state.path_of(STEPS), STEPS)?;
        Ok(Saved {
            snapshot: state.child(SNAPSHOT)?,
            snapshot_index: 0,
            steps,
            ahead: Vec::new(),
            steps_path: state.path_of(STEPS),
            ahead_path: state.path_of(DELIVERED_AHEAD),
        })
    }

    /// The index of the first item that was not delivered.
    pub(crate) fn resume_index(&self) -> u64 {
        self.snapshot_index.saturating_add(self.steps)
    }
}

/// Puts `source` back where the consumer stands: reset to `snapshot`, then
/// `steps` items pulled again.
///
/// A thread-backed node calls this before starting a new pass when the
/// previous one was not read to its end. Its source may have run ahead of the
/// consumer, and what it did there can outlive the pass: a `Cycler` below it
/// resets its own source on every wrap, which moves a sampler to its next
/// epoch. Without the rewind, how far the workers happened to read ahead would
/// decide the next pass's order, and a pipeline restored from a checkpoint
/// (which stands at the consumer's position) would disagree with one that ran
/// straight through. Costs at most the replay of one snapshot interval.
pub(crate) fn rewind<N: Node>(source: &mut N, snapshot: &State, steps: u64) -> Result<()> {
    let mut replay = Replay::reset(source, Some(snapshot))?;
    for _ in 0..steps {
        // An `Err` was an item of the pass too.
        if let Ok(None) = replay.next() {
            break;
        }
    }
    Ok(())
}

/// Encodes the five-key form that [`Saved::decode`] reads; `max_offset` is
/// the writer's bound on the steps it records (raised to the largest offset
/// delivered ahead).
pub(crate) fn encode(
    snapshot: &State,
    snapshot_index: u64,
    low: u64,
    ahead: impl Iterator<Item = u64>,
    max_offset: u64,
) -> Result<State> {
    let mut state = State::new();
    state.insert_child(SNAPSHOT, snapshot.clone());
    state.insert(SNAPSHOT_INDEX, snapshot_index)?;
    state.insert(STEPS, low - snapshot_index)?;
    let ahead: Vec<u64> = ahead.map(|i| i - snapshot_index).collect();
    // Out of order, how far items run ahead of a slow one depends on timing:
    // the bound covers the offsets actually written.
    let max_offset = max_offset.max(ahead.last().copied().unwrap_or(0));
    debug_assert!(
        low - snapshot_index <= max_offset && ahead.iter().all(|&o| o <= max_offset),
        "a position beyond its own bound {max_offset}: {} steps, ahead {ahead:?}",
        low - snapshot_index
    );
    state.insert(DELIVERED_AHEAD, ahead)?;
    state.insert(MAX_OFFSET, max_offset)?;
    Ok(state)
}

/// Encodes the two-key form that [`Saved::decode_in_order`] reads.
pub(crate) fn encode_in_order(snapshot: &State, steps: u64) -> Result<State> {
    let mut state = State::new();
    state.insert_child(SNAPSHOT, snapshot.clone());
    state.insert(STEPS, steps)?;
    Ok(state)
}

/// What the consumer has received, as a resumable position.
#[derive(Debug)]
pub(crate) struct Cursor {
    /// The adopted source snapshot.
    snapshot: State,
    /// Index of the first item after `snapshot`.
    base: u64,
    /// Every index below this was delivered (or skipped on restore).
    low: u64,
    /// Delivered indices above `low` (out-of-order delivery, or restored skips).
    ahead: BTreeSet<u64>,
    /// Snapshots that arrived before everything ahead of them was delivered,
    /// keyed by the index of the first item after them.
    pending: BTreeMap<u64, State>,
}

impl Cursor {
    /// A cursor standing right after `snapshot`, which was taken before item
    /// `base`; `skip` are indices above `base` that count as delivered.
    pub(crate) fn new(snapshot: State, base: u64, skip: impl IntoIterator<Item = u64>) -> Self {
        Cursor {
            snapshot,
            base,
            low: base,
            ahead: skip.into_iter().filter(|&i| i > base).collect(),
            pending: BTreeMap::new(),
        }
    }

    /// The first index not delivered yet: the next one in order.
    pub(crate) fn low(&self) -> u64 {
        self.low
    }

    /// The adopted snapshot and the count of items received in order after it.
    pub(crate) fn position(&self) -> (&State, u64) {
        (&self.snapshot, self.low - self.base)
    }

    /// Records that item `index` was returned to the consumer; `snapshot` is
    /// the source state taken right after that item was pulled, if one was.
    #[inline]
    pub(crate) fn deliver(&mut self, index: u64, snapshot: Option<State>) {
        if snapshot.is_none()
            && index == self.low
            && self.ahead.is_empty()
            && self.pending.is_empty()
        {
            // In order, nothing to adopt: the per-item path.
            self.low += 1;
        } else {
            self.deliver_slow(index, snapshot);
        }
    }

    /// [`deliver`](Self::deliver) out of order, or with a snapshot to adopt.
    #[inline(never)]
    fn deliver_slow(&mut self, index: u64, snapshot: Option<State>) {
        if index == self.low {
            self.low += 1;
            if !self.ahead.is_empty() {
                while self.ahead.remove(&self.low) {
                    self.low += 1;
                }
            }
        } else if index > self.low {
            self.ahead.insert(index);
        }
        if let Some(snapshot) = snapshot {
            let after = index + 1;
            if after <= self.low && self.pending.is_empty() {
                // The in-order fast path: adopt at once.
                if after > self.base {
                    self.snapshot = snapshot;
                    self.base = after;
                }
                return;
            }
            if after > self.base {
                self.pending.insert(after, snapshot);
            }
        }
        // Adopt the newest snapshot that everything before it was delivered for.
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > self.low {
                break;
            }
            let (base, snapshot) = entry.remove_entry();
            self.snapshot = snapshot;
            self.base = base;
        }
    }

    /// The position as `(snapshot, index after it, first undelivered
    /// index, delivered indices beyond that)`, for [`encode`].
    pub(crate) fn parts(&self) -> (&State, u64, u64, impl Iterator<Item = u64> + '_) {
        (
            &self.snapshot,
            self.base,
            self.low,
            self.ahead.iter().copied(),
        )
    }

    /// The position as a state (see [`encode`]).
    #[cfg(test)]
    pub(crate) fn to_state(&self) -> Result<State> {
        let (snapshot, base, low, ahead) = self.parts();
        encode(snapshot, base, low, ahead, 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(n: u64) -> State {
        State::new().with("n", n).unwrap()
    }

    fn decoded(cursor: &Cursor) -> (u64, u64, u64, Vec<u64>) {
        let state = State::from_json(&cursor.to_state().unwrap().to_json().unwrap()).unwrap();
        let saved = Saved::decode("Test", &state, &[]).unwrap();
        let n: u64 = saved.snapshot.get("n").unwrap();
        (n, saved.snapshot_index, saved.steps, saved.ahead)
    }

    #[test]
    fn in_order_adopts_each_snapshot() {
        let mut c = Cursor::new(snap(0), 0, []);
        c.deliver(0, None);
        c.deliver(1, None);
        assert_eq!(decoded(&c), (0, 0, 2, vec![]));
        c.deliver(2, Some(snap(3)));
        assert_eq!(decoded(&c), (3, 3, 0, vec![]));
    }

    #[test]
    fn out_of_order_waits_for_the_gap_to_close() {
        let mut c = Cursor::new(snap(0), 0, []);
        // Items 1 and 2 arrive before 0; item 2 carries the snapshot after 3 items.
        c.deliver(1, None);
        c.deliver(2, Some(snap(3)));
        assert_eq!(decoded(&c), (0, 0, 0, vec![1, 2]));
        c.deliver(4, None);
        c.deliver(0, None);
        assert_eq!(decoded(&c), (3, 3, 0, vec![4]));
        c.deliver(3, None);
        assert_eq!(decoded(&c), (3, 3, 2, vec![]));
    }

    /// A snapshot that arrives out of order is adopted only once every
    /// item before it was delivered, and a later one supersedes it.
    #[test]
    fn a_pending_snapshot_waits_for_its_prefix_and_the_newest_wins() {
        let mut c = Cursor::new(snap(0), 0, []);
        c.deliver(0, Some(snap(1)));
        c.deliver(1, Some(snap(2)));
        assert_eq!(decoded(&c), (2, 2, 0, vec![]));
        c.deliver(3, Some(snap(4)));
        assert_eq!(decoded(&c), (2, 2, 0, vec![3]), "item 2 is missing");
        c.deliver(2, Some(snap(3)));
        assert_eq!(decoded(&c), (4, 4, 0, vec![]));
        // A snapshot from before the adopted one changes nothing.
        c.deliver(4, None);
        c.deliver(1, Some(snap(2)));
        assert_eq!(decoded(&c), (4, 4, 1, vec![]));
    }

    #[test]
    fn restored_skips_count_as_delivered() {
        let mut c = Cursor::new(snap(5), 5, [7, 9]);
        assert_eq!(decoded(&c), (5, 5, 0, vec![7, 9]));
        c.deliver(5, None);
        c.deliver(6, None);
        assert_eq!(c.low(), 8);
        c.deliver(8, Some(snap(9)));
        assert_eq!(decoded(&c), (9, 9, 1, vec![]));
    }

    /// An indexed state at snapshot 0, with `max_offset` when given.
    fn indexed(steps: u64, ahead: Vec<u64>, max: Option<u64>) -> State {
        let s = State::new()
            .with(SNAPSHOT, State::new())
            .unwrap()
            .with(SNAPSHOT_INDEX, 0u64)
            .unwrap()
            .with(STEPS, steps)
            .unwrap()
            .with(DELIVERED_AHEAD, ahead)
            .unwrap();
        match max {
            Some(m) => s.with(MAX_OFFSET, m).unwrap(),
            None => s,
        }
    }

    #[test]
    fn decode_rejects_bad_offsets() {
        let state = |steps: u64, ahead: Vec<u64>| indexed(steps, ahead, Some(5));
        assert!(Saved::decode("T", &state(2, vec![3, 5]), &[]).is_ok());
        let err = Saved::decode("T", &state(2, vec![2]), &[]).unwrap_err();
        assert_eq!(err.state_path(), Some("/delivered_ahead/0"));
        let err = Saved::decode("T", &state(2, vec![4, 4]), &[]).unwrap_err();
        assert_eq!(err.state_path(), Some("/delivered_ahead/1"));
        let err = Saved::decode("T", &state(0, vec![]).with("extra", 1).unwrap(), &[]).unwrap_err();
        assert_eq!(err.state_path(), Some("/extra"));
    }

    #[test]
    fn decode_rejects_offsets_beyond_the_bound() {
        let state = indexed;
        // The bound is required.
        let err = Saved::decode("T", &state(0, vec![], None), &[]).unwrap_err();
        assert_eq!(err.state_path(), Some("/max_offset"));
        assert!(Saved::decode("T", &state(6, vec![9], Some(9)), &[]).is_ok());
        let err = Saved::decode("T", &state(6, vec![], Some(5)), &[]).unwrap_err();
        assert_eq!(err.state_path(), Some("/steps_since_snapshot"));
        let err = Saved::decode("T", &state(1, vec![6], Some(5)), &[]).unwrap_err();
        assert_eq!(err.state_path(), Some("/delivered_ahead/0"));
        let err = Saved::decode("T", &state(1 << 50, vec![], Some(100)), &[]).unwrap_err();
        assert!(err.to_string().contains("max_offset (100)"), "{err}");
        let in_order = State::new()
            .with(SNAPSHOT, State::new())
            .unwrap()
            .with(STEPS, MAX_PACED_STEPS + 1)
            .unwrap();
        let err = Saved::decode_in_order("T", &in_order, &[], MAX_PACED_STEPS).unwrap_err();
        assert_eq!(err.state_path(), Some("/steps_since_snapshot"));
    }
}
