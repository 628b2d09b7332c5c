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

use nodes_core::{Error, Result, State};

use super::plan::Layout;
use crate::policy::ERRORS;

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
    /// The index (from the start of the pass) of the first item that was
    /// not delivered.
    pub(crate) resume: u64,
    /// Items right after the snapshot that were delivered: skip them.
    pub(crate) steps: u64,
    /// Indices (from the start of the pass, ascending, all beyond `resume`)
    /// of items delivered out of order: skip them too.
    pub(crate) ahead: Vec<u64>,
    /// The JSON paths of `steps` and `ahead` in the checkpoint, for errors
    /// found while applying them.
    pub(crate) steps_path: String,
    pub(crate) ahead_path: String,
}

/// An error unless `value` is at most the `max_offset` recorded with the
/// state (`recorded`), or else at most what this node records
/// ([`MAX_PACED_STEPS`] items after a snapshot), and at most `limit`, the
/// longest replay the reading node allows: a bound the state cannot raise.
fn check_bound(
    value: u64,
    recorded: Option<u64>,
    limit: u64,
    path: String,
    what: &str,
) -> Result<()> {
    let bound = recorded.unwrap_or(MAX_PACED_STEPS);
    if value <= bound.min(limit) {
        return Ok(());
    }
    let source = match recorded {
        _ if value > limit => format!("what this node replays (at most {limit} items)"),
        Some(_) => format!("the {MAX_OFFSET} ({bound}) recorded with it"),
        None => format!("what this node records (at most {bound} items after a snapshot)"),
    };
    let why = format!(
        "{what} {value} is beyond {source}: the state is damaged or from another pipeline (a restore would replay that many items)"
    );
    Err(Error::bad_state(path, why))
}

/// The largest item index a restored position may name. No pass comes near
/// 2^63 items, and the headroom keeps the index arithmetic of the pass that
/// follows (one increment per item) from overflowing.
const MAX_INDEX: u64 = i64::MAX as u64;

/// An error unless `index <= MAX_INDEX`.
fn check_index(index: Option<u64>, path: String, what: &str) -> Result<u64> {
    let why = || format!("{what} is beyond any pass (at most 2^63 - 1 items)");
    index
        .filter(|&i| i <= MAX_INDEX)
        .ok_or_else(|| Error::bad_state(path, why()))
}

impl Saved {
    /// Decodes a state in `layout`, beside which the node may keep its
    /// error counts ([`ERRORS`], decoded by it): [`Layout::Indexed`]'s five
    /// keys, or [`Layout::InOrder`]'s `{snapshot, steps_since_snapshot}`
    /// (a node that delivers strictly in order and needs no absolute
    /// index), whose steps are at most [`MAX_PACED_STEPS`] (what such a
    /// node writes). No count may exceed `limit`, whatever the state says
    /// (see [`Plan::replay_limit`](super::plan::Plan::replay_limit)).
    pub(crate) fn decode(node: &str, state: &State, layout: Layout, limit: u64) -> Result<Saved> {
        let indexed = layout == Layout::Indexed;
        let mut keys = match layout {
            Layout::Indexed => vec![SNAPSHOT, SNAPSHOT_INDEX, STEPS, DELIVERED_AHEAD, MAX_OFFSET],
            Layout::InOrder => vec![SNAPSHOT, STEPS],
        };
        if state.contains(ERRORS) {
            keys.push(ERRORS);
        }
        state.expect_keys(node, &keys)?;
        let get = |key| indexed.then(|| state.get::<u64>(key)).transpose();
        let recorded = get(MAX_OFFSET)?;
        let snapshot_index = get(SNAPSHOT_INDEX)?.unwrap_or(0);
        let (steps, steps_path) = (state.get(STEPS)?, state.path_of(STEPS));
        check_bound(steps, recorded, limit, steps_path.clone(), STEPS)?;
        let offsets: Option<Vec<u64>> = indexed.then(|| state.get(DELIVERED_AHEAD)).transpose()?;
        let snapshot = state.child(SNAPSHOT)?;
        let index_path = state.path_of(SNAPSHOT_INDEX);
        check_index(Some(snapshot_index), index_path, "snapshot_index")?;
        let what = "snapshot_index + steps_since_snapshot";
        let resume = check_index(snapshot_index.checked_add(steps), steps_path.clone(), what)?;
        let (mut ahead, mut previous) = (Vec::new(), steps);
        let ahead_path = state.path_of(DELIVERED_AHEAD);
        for (i, &offset) in offsets.iter().flatten().enumerate() {
            let path = format!("{ahead_path}/{i}");
            if offset <= previous {
                let why = format!(
                    "offsets must be ascending and greater than {STEPS} ({steps}), found {offset} after {previous}"
                );
                return Err(Error::bad_state(path, why));
            }
            check_bound(offset, recorded, limit, path.clone(), "offset")?;
            previous = offset;
            let index = snapshot_index.checked_add(offset);
            ahead.push(check_index(index, path, "snapshot_index + offset")?);
        }
        Ok(Saved {
            snapshot,
            resume,
            steps,
            ahead,
            steps_path,
            ahead_path,
        })
    }
}

/// Encodes the position that [`Saved::decode`] reads in `layout`:
/// `snapshot`, taken before item `base`, every item below `low` received
/// since, and (indexed only) `ahead`, received beyond `low`. `max_offset` is
/// the writer's bound on the steps it records (raised to the largest offset
/// delivered ahead).
pub(crate) fn encode(
    layout: Layout,
    snapshot: &State,
    base: u64,
    low: u64,
    ahead: impl Iterator<Item = u64>,
    max_offset: u64,
) -> Result<State> {
    let mut state = State::new();
    state.insert_child(SNAPSHOT, snapshot.clone());
    if layout == Layout::InOrder {
        state.insert(STEPS, low - base)?;
        return Ok(state);
    }
    state.insert(SNAPSHOT_INDEX, base)?;
    state.insert(STEPS, low - base)?;
    let ahead: Vec<u64> = ahead.map(|i| i - base).collect();
    // Out of order, how far items run ahead of a slow one depends on timing:
    // the bound covers the offsets actually written.
    let max_offset = max_offset.max(ahead.last().copied().unwrap_or(0));
    debug_assert!(
        low - base <= max_offset,
        "a position beyond its own bound {max_offset}: {} steps",
        low - base
    );
    state.insert(DELIVERED_AHEAD, ahead)?;
    state.insert(MAX_OFFSET, max_offset)?;
    Ok(state)
}

/// What the consumer has received, as a resumable position.
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
    /// `base`; `skip` are indices from `base` on that count as delivered.
    pub(crate) fn new(snapshot: State, base: u64, skip: impl IntoIterator<Item = u64>) -> Self {
        let mut cursor = Cursor {
            snapshot,
            base,
            low: base,
            ahead: skip.into_iter().filter(|&i| i >= base).collect(),
            pending: BTreeMap::new(),
        };
        while cursor.ahead.remove(&cursor.low) {
            cursor.low += 1;
        }
        cursor
    }

    /// The first index not delivered yet: the next one in order.
    pub(crate) fn low(&self) -> u64 {
        self.low
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
        if index >= self.low {
            self.ahead.insert(index);
        }
        while self.ahead.remove(&self.low) {
            self.low += 1;
        }
        // A snapshot is taken after its item: one before the adopted one
        // changes nothing.
        if let Some(snapshot) = snapshot
            && index >= self.base
        {
            if index < self.low && self.pending.is_empty() {
                // The in-order fast path: adopt at once.
                self.snapshot = snapshot;
                self.base = index + 1;
                return;
            }
            self.pending.insert(index + 1, snapshot);
        }
        // Adopt the newest snapshot that everything before it was delivered
        // for (the older ones go).
        let adoptable = self.pending.extract_if(..=self.low, |_, _| true);
        if let Some((base, snapshot)) = adoptable.last() {
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
        encode(Layout::Indexed, snapshot, base, low, ahead, 100)
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
        let saved = Saved::decode("Test", &state, Layout::Indexed, u64::MAX).unwrap();
        let n: u64 = saved.snapshot.get("n").unwrap();
        (n, saved.resume - saved.steps, saved.steps, saved.ahead)
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
        assert!(Saved::decode("T", &state(2, vec![3, 5]), Layout::Indexed, u64::MAX).is_ok());
        let err = Saved::decode("T", &state(2, vec![2]), Layout::Indexed, u64::MAX).unwrap_err();
        assert_eq!(err.state_path(), Some("/delivered_ahead/0"));
        let err = Saved::decode("T", &state(2, vec![4, 4]), Layout::Indexed, u64::MAX).unwrap_err();
        assert_eq!(err.state_path(), Some("/delivered_ahead/1"));
        let err = Saved::decode(
            "T",
            &state(0, vec![]).with("extra", 1).unwrap(),
            Layout::Indexed,
            u64::MAX,
        )
        .unwrap_err();
        assert_eq!(err.state_path(), Some("/extra"));
    }

    #[test]
    fn decode_rejects_offsets_beyond_the_bound() {
        let state = indexed;
        // The bound is required.
        let err =
            Saved::decode("T", &state(0, vec![], None), Layout::Indexed, u64::MAX).unwrap_err();
        assert_eq!(err.state_path(), Some("/max_offset"));
        assert!(Saved::decode("T", &state(6, vec![9], Some(9)), Layout::Indexed, u64::MAX).is_ok());
        let err =
            Saved::decode("T", &state(6, vec![], Some(5)), Layout::Indexed, u64::MAX).unwrap_err();
        assert_eq!(err.state_path(), Some("/steps_since_snapshot"));
        let err =
            Saved::decode("T", &state(1, vec![6], Some(5)), Layout::Indexed, u64::MAX).unwrap_err();
        assert_eq!(err.state_path(), Some("/delivered_ahead/0"));
        let err = Saved::decode(
            "T",
            &state(1 << 50, vec![], Some(100)),
            Layout::Indexed,
            u64::MAX,
        )
        .unwrap_err();
        assert!(err.to_string().contains("max_offset (100)"), "{err}");
        // The reader's limit holds whatever bound the state records.
        let raised = state(1 << 50, vec![], Some(1 << 50));
        let err = Saved::decode("T", &raised, Layout::Indexed, 1000).unwrap_err();
        assert_eq!(err.state_path(), Some("/steps_since_snapshot"));
        assert!(err.to_string().contains("at most 1000 items"), "{err}");
        let err = Saved::decode(
            "T",
            &state(6, vec![1001], Some(1 << 50)),
            Layout::Indexed,
            1000,
        )
        .unwrap_err();
        assert_eq!(err.state_path(), Some("/delivered_ahead/0"));
        assert!(
            Saved::decode(
                "T",
                &state(6, vec![1000], Some(1 << 50)),
                Layout::Indexed,
                1000
            )
            .is_ok()
        );
        let in_order = State::new()
            .with(SNAPSHOT, State::new())
            .unwrap()
            .with(STEPS, MAX_PACED_STEPS + 1)
            .unwrap();
        let err = Saved::decode("T", &in_order, Layout::InOrder, u64::MAX).unwrap_err();
        assert_eq!(err.state_path(), Some("/steps_since_snapshot"));
    }
}
