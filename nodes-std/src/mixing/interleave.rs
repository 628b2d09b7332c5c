//! [`Interleave`]: read several inner nodes, made from the items of an outer
//! node, a block at a time in turn (tf.data's and Grain's `interleave`).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nodes_core::{Count, Tally};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::policy::is_bad_record;
use crate::transforms::{debug_fields, require};
use crate::{
    Cx, Description, Error, Node, NodeId, Replay, ResetFlag, Result, Resume, State, Stateful,
};

const NAME: &str = "Interleave";
const SOURCE: &str = "source";
const CYCLE_INDEX: &str = "cycle_index";
const BLOCK_INDEX: &str = "block_index";
const END_OF_INPUT: &str = "end_of_input";
const SLOTS_USED: &str = "slots_used";
const SLOTS: &str = "slots";
const ITEM: &str = "item";
const STATE: &str = "state";
const KEYS: [&str; 6] = [
    SOURCE,
    CYCLE_INDEX,
    BLOCK_INDEX,
    END_OF_INPUT,
    SLOTS_USED,
    SLOTS,
];

/// One open inner node, the outer item it was made from, and the outer
/// node's state from before that item.
struct Slot<O, N> {
    item: O,
    before: State,
    node: N,
}

/// This struct is created by
/// [`NodeExt::interleave`](crate::NodeExt::interleave). See its
/// documentation for more.
///
/// Makes an inner node from each item of its source (the outer node) with a
/// function, keeps up to `cycle_length` inner nodes open at once, and takes
/// up to `block_length` items from each in turn: a corpus of many files
/// read with locality (a block of consecutive records of one file) and
/// mixing (several files at a time).
///
/// The order is tf.data's `interleave`, item for item: the slots are visited
/// in a cycle `0, 1, ..., cycle_length - 1, 0, ...`; an empty slot is filled
/// with an inner node made from the next outer item when the cycle reaches
/// it (so inner nodes are opened lazily, in slot order); `block_length`
/// items are taken from a slot before the cycle moves on; an inner node
/// that ends is dropped, its slot is empty again, and the cycle moves on.
/// Once the outer node has ended, empty slots are passed over, and the pass
/// ends when every slot is empty.
///
/// The function runs in the caller's thread, once per outer item (and once
/// per open slot when a state is restored); a panic in it is not caught.
/// Interleave starts each inner node it makes (`reset(None)`), forwards
/// `shutdown` to the open ones, and drops them when they end.
///
/// # State
/// `source`: the outer node's state; `cycle_index`: the slot the cycle
/// stands at; `block_index`: the items taken from it in the current block;
/// `end_of_input`: whether the outer node has ended; `slots_used`: how many
/// slots were filled at least once this pass; `slots`: the open slots, by
/// index (`"0"`, `"1"`, ...), each with the outer `item` it was made from
/// (serialised, hence the serde bounds on the outer item type), the outer
/// node's state from before that item (`source`) and the inner node's
/// `state`. Restore makes each open inner node again and restores its
/// state: O(open slots) calls of the function. Its item is pulled again
/// from the outer node at the slot's `source` state, so that a dataset
/// that moved resumes from its new place (a file list yields the new
/// paths); over an outer node whose order varies between runs (an
/// out-of-order parallel map of paths) the saved `item` is used instead.
/// A state [`elastic`](crate::elastic) wrote may open more slots than
/// `cycle_length` (the files several old ranks began): the cycle visits
/// them all, and fills only the first `cycle_length` again.
///
/// # Parallel reading
/// Prefetch each inner node in the function, e.g.
/// `.interleave(4, 16, |path| read(path).prefetch(64).expect("64 > 0"))`:
/// each open inner node then reads ahead on a thread of its own (the
/// threaded core of [`Prefetcher`](crate::Prefetcher)) while the cycle
/// takes from the others, and the output order stays exactly the
/// sequential one (the cycle still decides which slot each item comes
/// from). A slot's thread is stopped when its inner node ends, and all of
/// them at `reset` and `shutdown`. The inner states are then the
/// prefetchers' (a state from a pipeline without the prefetch does not
/// restore into one with it).
///
/// An inner node whose order varies between runs (an out-of-order
/// parallel map inside the function) cannot be seen before it is made: a
/// [`flat_map`](crate::NodeExt::flat_map) or
/// [`unbatch`](crate::NodeExt::unbatch) above the interleave, which asks
/// when it starts, is then not refused and does not resume exactly. Keep
/// the inner nodes' order fixed (in-order parallel maps, prefetches), or
/// put such nodes above the interleave.
///
/// `describe()` shows `cycle_length`, `block_length` and the outer node;
/// the inner nodes are made by the function and are not shown (closures
/// never are), so a restore does not check their shape.
///
/// # Errors
/// An error from the outer node is returned at once; the slot the cycle
/// stands at stays empty and is filled by the next call. A bad record from
/// an inner node ([`Error::User`], [`Error::Panicked`]) is one of its items
/// (it counts in the block); any other error from an inner node is
/// returned as it is. A state with a slot index out of range, an open slot
/// beyond `slots_used`, or a cycle or block index out of range is a bad
/// state.
///
/// ```
/// use nodes_std::prelude::*;
///
/// // Three "files" (a name and a record count), two open at a time, two
/// // records per turn.
/// let files = vec![("a".to_owned(), 3), ("b".to_owned(), 1), ("c".to_owned(), 2)];
/// let records: Vec<String> = IterableWrapper::new(files)
///     .interleave(2, 2, |(name, n): (String, u32)| {
///         IterableWrapper::new((1..=n).map(move |i| format!("{name}{i}")))
///     })?
///     .start()?
///     .collect::<Result<_>>()?;
/// assert_eq!(records, ["a1", "a2", "b1", "a3", "c1", "c2"]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
// Written by hand: its children (the open inner nodes) come and go while it
// runs and are rebuilt by a closure on restore, which `#[node(children)]`
// cannot express, and its restore checks the indices against each other.
#[must_use = "nodes do nothing until started"]
pub struct Interleave<S: Node, F, N> {
    source: S,
    f: F,
    cycle_length: usize,
    block_length: usize,
    /// The slots filled at least once this pass, in order (the cycle fills
    /// them in order, so the rest of the `cycle_length` are all empty and
    /// never allocated).
    slots: Vec<Option<Slot<S::Item, N>>>,
    cycle_index: usize,
    block_index: usize,
    end_of_input: bool,
    flag: ResetFlag,
    /// The open inner nodes' descriptions, for progress.
    inner: Arc<InnerTallies>,
    /// An inner node was made and has not yet been pulled (its file not
    /// yet opened): the tally says so until it is.
    opening: bool,
}

/// What the open inner nodes count, for progress: no description holds
/// them (they come and go), so this node's tally sums theirs, and keeps
/// what closed ones finished until the next reset.
#[derive(Debug, Default)]
struct InnerTallies(Mutex<Inner>);

#[derive(Debug, Default)]
struct Inner {
    open: Vec<(usize, Description)>,
    retired: Count,
    /// Between pulling an item and the first pull of the inner node made
    /// from it (see [`Count::pulling`]).
    pulling: bool,
}

impl InnerTallies {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn opened(&self, slot: usize, node: &impl Stateful) {
        self.lock().open.push((slot, node.describe()));
    }

    fn closed(&self, slot: usize) {
        let mut inner = self.lock();
        if let Some(at) = inner.open.iter().position(|(s, _)| *s == slot) {
            let (_, desc) = inner.open.swap_remove(at);
            inner.retired = inner.retired + reads_of(&desc);
        }
    }

    fn pulling(&self, pulling: bool) {
        self.lock().pulling = pulling;
    }
}

/// An inner node's reads: a list of its own (one file listed again) is
/// not part of this pass's list.
fn reads_of(desc: &Description) -> Count {
    Count {
        listed: None,
        ..desc.count()
    }
}

impl Tally for InnerTallies {
    fn count(&self, _shard: Option<(u64, u64)>) -> Count {
        let inner = self.lock();
        let pulling = Count {
            pulling: u64::from(inner.pulling),
            ..inner.retired
        };
        let open = inner.open.iter().map(|(_, desc)| reads_of(desc));
        open.fold(pulling, |sum, count| sum + count)
    }
}

impl<S: Node + fmt::Debug, F, N> fmt::Debug for Interleave<S, F, N> {
    debug_fields!(NAME, finish_non_exhaustive;
        source, cycle_length, block_length, cycle_index, block_index, end_of_input,
        open = (slots.iter().flatten().count()));
}

// The compile-time "start it first" guard the derive gives derived nodes.
nodes_core::__started_guards!(impl[S: Node, F, N] Interleave<S, F, N>);

impl<S: Node, F, N> Interleave<S, F, N> {
    pub(crate) fn new(source: S, cycle_length: usize, block_length: usize, f: F) -> Result<Self> {
        require(cycle_length > 0, NAME, "cycle_length must be at least 1")?;
        require(block_length > 0, NAME, "block_length must be at least 1")?;
        Ok(Interleave {
            source,
            f,
            cycle_length,
            block_length,
            slots: Vec::new(),
            cycle_index: 0,
            block_index: 0,
            end_of_input: false,
            flag: ResetFlag::default(),
            inner: Arc::default(),
            opening: false,
        })
    }

    /// The most inner nodes open at once.
    pub fn cycle_length(&self) -> usize {
        self.cycle_length
    }

    /// The items taken from an inner node before moving to the next.
    pub fn block_length(&self) -> usize {
        self.block_length
    }

    /// Moves the cycle to the next slot, starting a new block. The cycle
    /// also visits the slots past `cycle_length` a reshard opened (see
    /// [`elastic`](crate::elastic)) until they end.
    fn advance_to_next_in_cycle(&mut self) {
        self.block_index = 0;
        self.cycle_index += 1;
        // Past the last slot (the extra ones may just have gone), back to 0.
        // Slots never filled are empty: once the outer node has ended,
        // nothing will fill them, so the cycle goes on at slot 0.
        let end = match self.end_of_input {
            true => self.slots.len(),
            false => self.cycle_length.max(self.slots.len()),
        };
        if self.cycle_index >= end {
            self.cycle_index = 0;
        }
    }

    /// Decodes `state` and checks its indices against each other and the
    /// configuration, without applying anything.
    fn decode(&self, state: &State) -> Result<Decoded<S::Item>>
    where
        S::Item: DeserializeOwned,
    {
        state.expect_keys(NAME, &KEYS)?;
        let source = state.child(SOURCE)?;
        let cycle_index: usize = state.get(CYCLE_INDEX)?;
        let block_index: usize = state.get(BLOCK_INDEX)?;
        let end_of_input: bool = state.get(END_OF_INPUT)?;
        let slots_used: usize = state.get(SLOTS_USED)?;
        let bad = |key: &str, why: String| Err(Error::bad_state(state.path_of(key), why));
        let (cycle, block) = (self.cycle_length, self.block_length);
        if cycle_index >= cycle.max(slots_used) || cycle_index > slots_used {
            let why = format!(
                "the cycle cannot stand at slot {cycle_index} with {slots_used} slots used and cycle_length {cycle}"
            );
            return bad(CYCLE_INDEX, why);
        }
        if block_index >= block {
            let why = format!("{block_index} items into a block, but block_length is {block}");
            return bad(BLOCK_INDEX, why);
        }
        let slots = state.child(SLOTS)?;
        let mut open = Vec::new();
        for key in slots.keys() {
            let used = key.parse().ok().filter(|&i: &usize| i < slots_used);
            // Written as an index is written: "01" is not slot 1.
            let Some(index) = used.filter(|i| key == i.to_string()) else {
                let why = format!("not the index of a used slot (0 to {slots_used}, exclusive)");
                return Err(Error::bad_state(slots.path_of(key), why));
            };
            let slot = slots.child(key)?;
            slot.expect_keys(NAME, &[ITEM, SOURCE, STATE])?;
            let item: S::Item = slot.get(ITEM)?;
            open.push((index, item, slot.child(SOURCE)?, slot.child(STATE)?));
        }
        open.sort_by_key(|(index, ..)| *index);
        // Slots past `cycle_length` come from a reshard, open until they end.
        if slots_used > cycle && open.iter().filter(|o| o.0 >= cycle).count() < slots_used - cycle {
            let why = format!(
                "{slots_used} slots used, but cycle_length is {cycle} and not every slot past it is open"
            );
            return bad(SLOTS_USED, why);
        }
        Ok(Decoded {
            source,
            cycle_index,
            block_index,
            end_of_input,
            slots_used,
            open,
        })
    }
}

impl<S, F, N> Node for Interleave<S, F, N>
where
    S: Node,
    S::Item: Serialize + DeserializeOwned + Clone + Send,
    F: FnMut(S::Item) -> N + Send,
    N: Node,
{
    type Item = N::Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<N::Item>> {
        cx.observe(NodeId::of(self), NAME, |cx| {
            self.flag.check(NAME)?;
            loop {
                let at = self.cycle_index;
                if let Some(Some(slot)) = self.slots.get_mut(at) {
                    let result = slot.node.next(cx);
                    if std::mem::take(&mut self.opening) {
                        self.inner.pulling(false);
                    }
                    match &result {
                        Ok(None) => {
                            slot.node.shutdown();
                            self.slots[at] = None;
                            self.inner.closed(at);
                            // Slots past `cycle_length` are never filled again.
                            let used = self.slots.iter().rposition(Option::is_some);
                            let used = used.map_or(0, |last| last + 1);
                            self.slots.truncate(used.max(self.cycle_length));
                            self.advance_to_next_in_cycle();
                        }
                        Err(error) if !is_bad_record(error) => return result,
                        // An item, or a bad record in its place.
                        _ => {
                            self.block_index += 1;
                            if self.block_index >= self.block_length {
                                self.advance_to_next_in_cycle();
                            }
                            return result;
                        }
                    }
                } else if !self.end_of_input && at < self.cycle_length {
                    // At the outer node's end the slot stays empty: the next
                    // turn passes it over.
                    let before = self.source.get_state(cx)?;
                    self.inner.pulling(true);
                    let node = self.source.next(cx).and_then(|item| {
                        let Some(item) = item else { return Ok(None) };
                        let mut node = (self.f)(item.clone());
                        node.reset(None)?;
                        Ok(Some((item, node)))
                    });
                    if !matches!(node, Ok(Some(_))) {
                        self.inner.pulling(false);
                    }
                    let Some((item, node)) = node? else {
                        self.end_of_input = true;
                        continue;
                    };
                    self.inner.opened(at, &node);
                    self.opening = true;
                    // The cycle fills the slots in order.
                    self.slots
                        .resize_with(self.slots.len().max(at + 1), || None);
                    self.slots[at] = Some(Slot { item, before, node });
                } else if self.end_of_input && self.slots.iter().all(Option::is_none) {
                    // The outer node has ended and no inner node is open.
                    return Ok(None);
                } else {
                    self.advance_to_next_in_cycle();
                }
            }
        })
    }
}

impl<S: Node, F, N> nodes_core::NodeName for Interleave<S, F, N> {
    const NAME: &'static str = NAME;
}

/// A restored state, decoded and checked but not applied.
struct Decoded<O> {
    source: State,
    cycle_index: usize,
    block_index: usize,
    end_of_input: bool,
    slots_used: usize,
    /// Each open slot: its index, saved item, outer state before the item,
    /// and inner state.
    open: Vec<(usize, O, State, State)>,
}

impl<S, F, N> Stateful for Interleave<S, F, N>
where
    S: Node,
    S::Item: Serialize + DeserializeOwned + Clone,
    F: FnMut(S::Item) -> N,
    N: Node,
{
    /// The inner nodes' states are checked when they are built, in `reset`
    /// (their nodes exist only then).
    fn check_state(&self, state: &State) -> Result<()> {
        let decoded = self.decode(state)?;
        for (_, _, before, _) in &decoded.open {
            self.source.check_state(before)?;
        }
        self.source.check_state(&decoded.source)
    }

    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        // Checked in full before anything is applied.
        let decoded = state.map(|state| self.decode(state)).transpose()?;
        for mut slot in self.slots.drain(..).flatten() {
            slot.node.shutdown();
        }
        *self.inner.lock() = Inner::default();
        self.opening = false;
        self.cycle_index = 0;
        self.block_index = 0;
        self.end_of_input = false;
        let Some(decoded) = decoded else {
            self.source.reset(None)?;
            self.flag.mark();
            return Ok(());
        };
        // Built aside: if an inner node refuses its state, this node stays
        // consistent (no slot open) until the next reset.
        let mut slots: Vec<_> = (0..decoded.slots_used).map(|_| None).collect();
        // The open slots' tallies, shown once the whole state is applied.
        let mut opened = Vec::new();
        let replays = self.source.describe().varying_order().is_none();
        for (index, saved, before, inner) in decoded.open {
            let item = if replays {
                let mut outer = Replay::reset(&mut self.source, Some(&before))?;
                outer.next()?.ok_or_else(|| {
                    let why = "the source ends before the item this slot was reading";
                    Error::bad_state(before.path(), format!("{NAME}: {why}"))
                })?
            } else {
                saved
            };
            let mut node = (self.f)(item.clone());
            node.reset(Some(&inner))?;
            opened.push((index, node.describe()));
            slots[index] = Some(Slot { item, before, node });
        }
        self.source.reset(Some(&decoded.source))?;
        self.inner.lock().open = opened;
        self.slots = slots;
        self.cycle_index = decoded.cycle_index;
        self.block_index = decoded.block_index;
        self.end_of_input = decoded.end_of_input;
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        self.flag.check(NAME)?;
        cx.check_live(NAME)?;
        let mut out = State::new();
        out.insert_child(SOURCE, self.source.get_state(cx)?);
        out.insert(CYCLE_INDEX, self.cycle_index)?;
        out.insert(BLOCK_INDEX, self.block_index)?;
        out.insert(END_OF_INPUT, self.end_of_input)?;
        out.insert(SLOTS_USED, self.slots.len())?;
        let mut slots = State::new();
        for (index, slot) in self.slots.iter().enumerate() {
            if let Some(slot) = slot {
                let mut saved = State::new().with(ITEM, &slot.item)?;
                saved.insert_child(SOURCE, slot.before.clone());
                saved.insert_child(STATE, slot.node.get_state(cx)?);
                slots.insert_child(index.to_string(), saved);
            }
        }
        out.insert_child(SLOTS, slots);
        Ok(out)
    }

    fn describe(&self) -> Description {
        Description::new(NAME)
            .param("cycle_length", self.cycle_length)
            .param("block_length", self.block_length)
            .child(SOURCE, self.source.describe())
            .with_resume(self.resume())
            .with_tally(self.inner.clone())
    }

    /// Its inner nodes are made from items at run time, so no description
    /// holds them: while an open one's order varies, so does this node's.
    fn resume(&self) -> Resume {
        let mut open = self.slots.iter().flatten();
        if open.any(|slot| slot.node.describe().varying_order().is_some()) {
            Resume::VaryingOrder
        } else {
            Resume::Interleaves
        }
    }

    fn shutdown(&mut self) {
        self.source.shutdown();
        for slot in self.slots.iter_mut().flatten() {
            slot.node.shutdown();
        }
    }
}
