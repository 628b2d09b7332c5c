//! [`FlatMapper`]: map every item to a collection and yield its elements;
//! and the one-to-many mechanism it shares with
//! [`Unbatcher`](crate::Unbatcher).

use std::collections::VecDeque;
use std::fmt;

use crate::{
    Cx, Description, Error, Hint, Node, NodeId, Replay, ResetFlag, Result, Resume, State, Stateful,
};

const NAME: &str = "FlatMapper";
const SOURCE: &str = "source";
const OUTPUT_IDX: &str = "output_idx";
/// The source's current state, saved part way through an item.
const AFTER: &str = "after";
/// Items another rank was part way through (see [`Pending`]).
const PENDING: &str = "pending";
/// Keys of one pending item.
const SKIP: &str = "skip";

/// Refuses, for node `name` (made by `method`) that restores by pulling
/// its current source item again, a `source` whose order varies.
pub(crate) fn replayable(source: &impl Stateful, name: &'static str, method: &str) -> Result<()> {
    let Some(below) = source.describe().varying_order() else {
        return Ok(());
    };
    Err(Error::InvalidPipeline {
        node: name,
        below,
        message: format!(
            "it restores by pulling its current source item again, which over a source whose order \
             varies between runs gives another item; deliver in order with \
             `ParallelOptions::in_order(true)`, or put the out-of-order par_map above the `{method}`"
        ),
    })
}

/// This struct is created by [`NodeExt::flat_map`](crate::NodeExt::flat_map).
/// See its documentation for more.
///
/// Maps every item of its source to a collection (any [`IntoIterator`]) and
/// yields the collection's elements, in order; empty collections are
/// skipped (tf.data's and Grain's `flat_map`).
///
/// The function runs in the caller's thread, once per item (and once more
/// for the item a restore stands in); a panic in it is not caught. The
/// output iterator is advanced lazily, one element per `next`.
///
/// # State
/// `source`: the source's state from just before the current item was
/// pulled; `output_idx`: how many elements of that item's output were
/// returned. Restore resets the source to that state, pulls that one item
/// again, runs the function on it and skips `output_idx` elements with
/// `nth`: O(1) in the position, plus re-producing one item and its output.
/// Pulling an item also takes the source's state: one `get_state` of the
/// source per item.
///
/// # Errors
/// An error from the source is returned in place of the item it stands for;
/// a state taken after it resumes after it.
///
/// Restoring needs a source that produces the same item again:
/// [`reset`](Stateful::reset) (from the start too) refuses a source whose
/// output order varies between runs (an out-of-order
/// [`ParallelMapper`](crate::ParallelMapper) with workers, see
/// [`Description::varying_order`](crate::Description::varying_order)) with [`Error::InvalidPipeline`] naming it.
/// Deliver in order (`ParallelOptions::in_order(true)`), or put the
/// out-of-order map above the flat_map. The function must give the same
/// output for the same item (a pure function of the item).
///
/// Restoring an `output_idx` larger than the re-made output is a bad state;
/// so is an `output_idx` above 0 where the source has no item left. Errors
/// from the source while re-pulling come out of `reset`.
///
/// # Changing the number of ranks
/// Part way through an item, the state also holds `after`, the source's
/// state after that item, so that [`elastic::reshard`](crate::elastic::reshard)
/// can tell which records the item came from. A resharded state may hold
/// `pending`: items old ranks were part way through, each as a state of
/// the source that yields it first (`source`) and the elements already
/// returned (`skip`). Restore re-makes each (one reset and one pull of the
/// source per item), and they are returned first.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let items: Vec<u32> = IterableWrapper::new(0..4u32)
///     .flat_map(|x| vec![x; x as usize])
///     .start()?
///     .collect::<Result<_>>()?;
/// assert_eq!(items, [1, 2, 2, 3, 3, 3]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
// Written by hand: its state nests, under `source`, the source's state from
// *before* the current item rather than the source's current state, which
// `#[node(child)]` cannot express (the derive always asks the child).
//
// It is the mechanism of both one-to-many nodes (an `Unbatcher` holds one
// under its own name): pull an item, expand it with `f`, yield the
// elements; remember the source's state from before the item and how many
// elements were yielded, and restore by re-pulling that one item.
#[must_use = "nodes do nothing until started"]
pub struct FlatMapper<S: Node, F, I: IntoIterator> {
    /// The node's name (`FlatMapper`, or `Unbatcher`).
    name: &'static str,
    /// The state key of the position within the current item's output.
    idx_key: &'static str,
    /// The method that builds the node, for the refusal message.
    method: &'static str,
    source: S,
    f: F,
    /// The current item's remaining output and the source's state from
    /// before the item was pulled.
    current: Option<(I::IntoIter, State)>,
    /// Elements of the current item's output returned so far.
    idx: u64,
    /// Items an old rank was part way through, dealt here by a reshard:
    /// returned before anything else.
    pending: VecDeque<Pending<I::IntoIter>>,
    flag: ResetFlag,
}

/// An item another rank was part way through: the rest of its output,
/// the source state it is pulled from first and the elements returned.
struct Pending<O> {
    output: O,
    source: State,
    skip: u64,
}

/// A restored state: the source's state from before the current item, the
/// position in its output, and the pending items' source states, skips and
/// the paths of their skips.
struct Read {
    before: State,
    idx: u64,
    after: Option<State>,
    pending: Vec<(State, u64, String)>,
}

/// The node's `Debug`: its name, its source and the position in the
/// current item's output, under the state's key.
impl<S: Node + fmt::Debug, F, I: IntoIterator> fmt::Debug for FlatMapper<S, F, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.name)
            .field("source", &self.source)
            .field(self.idx_key, &self.idx)
            .finish_non_exhaustive()
    }
}

impl<S: Node, F, I: IntoIterator> FlatMapper<S, F, I> {
    pub(crate) fn new(source: S, f: F) -> Self {
        Self::named(NAME, OUTPUT_IDX, ".flat_map(f)", source, f)
    }

    /// The mechanism under another node's name, state key for the position
    /// and method (for the refusal message): [`Unbatcher`](crate::Unbatcher).
    pub(crate) fn named(
        name: &'static str,
        idx_key: &'static str,
        method: &'static str,
        source: S,
        f: F,
    ) -> Self {
        FlatMapper {
            name,
            idx_key,
            method,
            source,
            f,
            current: None,
            idx: 0,
            pending: VecDeque::new(),
            flag: ResetFlag::default(),
        }
    }

    /// The next element, without the node's `observe` (which `next`, or
    /// the unbatcher's, does).
    pub(crate) fn expand_next(&mut self, cx: &mut Cx) -> Result<Option<I::Item>>
    where
        F: FnMut(S::Item) -> I,
    {
        self.flag.check(self.name)?;
        if !self.pending.is_empty()
            && let Some(item) = self.next_pending()
        {
            return Ok(Some(item));
        }
        loop {
            if let Some((output, _)) = &mut self.current
                && let Some(item) = output.next()
            {
                self.idx += 1;
                return Ok(Some(item));
            }
            let before = self.source.get_state(cx)?;
            // Whatever comes next, the previous item is done: a state taken
            // after an end or an error stands where the source does.
            self.current = None;
            self.idx = 0;
            let Some(item) = self.source.next(cx)? else {
                return Ok(None);
            };
            self.current = Some(((self.f)(item).into_iter(), before));
        }
    }

    /// The next element of the pending items, dropping those done.
    #[cold]
    fn next_pending(&mut self) -> Option<I::Item> {
        while let Some(front) = self.pending.front_mut() {
            if let Some(item) = front.output.next() {
                front.skip += 1;
                return Some(item);
            }
            self.pending.pop_front();
        }
        None
    }

    /// What `state` holds, checked: `after` only part way through an item.
    fn read(&self, state: &State) -> Result<Read> {
        let (after, pending) = (state.contains(AFTER), state.contains(PENDING));
        let idx_key = self.idx_key;
        let keys: &[&str] = match (after, pending) {
            (false, false) => &[SOURCE, idx_key],
            (true, false) => &[SOURCE, idx_key, AFTER],
            (false, true) => &[SOURCE, idx_key, PENDING],
            (true, true) => &[SOURCE, idx_key, AFTER, PENDING],
        };
        state.expect_keys(self.name, keys)?;
        let idx: u64 = state.get(idx_key)?;
        // Only part way through an item (where a restore needs it only to
        // settle a threaded node below: a state without it loads).
        if after && idx == 0 {
            let why = format!("`{AFTER}` without an item part way through (`{idx_key}` is 0)");
            return Err(Error::bad_state(state.path_of(AFTER), why));
        }
        let mut items = Vec::new();
        if pending {
            let list = state.child(PENDING)?;
            for (i, key) in list.keys().enumerate() {
                let entry = list.child(key)?;
                if key != i.to_string() {
                    let why = format!("expected the pending items numbered from 0, found `{key}`");
                    return Err(Error::bad_state(entry.path().to_owned(), why));
                }
                entry.expect_keys(self.name, &[SOURCE, SKIP])?;
                items.push((entry.child(SOURCE)?, entry.get(SKIP)?, entry.path_of(SKIP)));
            }
        }
        Ok(Read {
            before: state.child(SOURCE)?,
            idx,
            after: after.then(|| state.child(AFTER)).transpose()?,
            pending: items,
        })
    }

    /// Pulls the item `source` (a state of the source) yields first again
    /// and skips `skip` elements of its output; `at` is where errors point.
    fn remake(&mut self, source: &State, skip: u64, at: String) -> Result<I::IntoIter>
    where
        F: FnMut(S::Item) -> I,
    {
        let name = self.name;
        let mut replay = Replay::reset(&mut self.source, Some(source))?;
        let Some(item) = replay.next()? else {
            let why = format!(
                "{name} is {skip} elements into an item's output, but the source has none left"
            );
            return Err(Error::bad_state(at, why));
        };
        let mut output = (self.f)(item).into_iter();
        let landed = skip == 0
            || usize::try_from(skip - 1)
                .ok()
                .and_then(|n| output.nth(n))
                .is_some();
        if !landed {
            let why = format!("{name} cannot skip {skip} elements: the output is shorter");
            return Err(Error::bad_state(at, why));
        }
        Ok(output)
    }
}

// The compile-time "start it first" guard the derive gives derived nodes.
nodes_core::__started_guards!(impl[S: Node, F, I: IntoIterator] FlatMapper<S, F, I>);

impl<S, F, I> Node for FlatMapper<S, F, I>
where
    S: Node,
    F: FnMut(S::Item) -> I + Send,
    I: IntoIterator,
    I::IntoIter: Send,
{
    type Item = I::Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<I::Item>> {
        cx.observe(NodeId::of(self), NAME, |cx| self.expand_next(cx))
    }
}

impl<S: Node, F, I: IntoIterator> nodes_core::NodeName for FlatMapper<S, F, I> {
    const NAME: &'static str = NAME;
}

impl<S, F, I> Stateful for FlatMapper<S, F, I>
where
    S: Node,
    F: FnMut(S::Item) -> I,
    I: IntoIterator,
{
    fn check_state(&self, state: &State) -> Result<()> {
        let read = self.read(state)?;
        for (source, ..) in &read.pending {
            self.source.check_state(source)?;
        }
        if let Some(after) = &read.after {
            self.source.check_state(after)?;
        }
        self.source.check_state(&read.before)
    }

    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        replayable(&self.source, self.name, self.method)?;
        let restore = state.map(|s| self.read(s)).transpose()?;
        self.current = None;
        self.idx = 0;
        self.pending.clear();
        let (Some(state), Some(read)) = (state, restore) else {
            self.source.reset(None)?;
            self.flag.mark();
            return Ok(());
        };
        for (source, skip, at) in read.pending {
            let output = self.remake(&source, skip, at)?;
            self.pending.push_back(Pending {
                output,
                source,
                skip,
            });
        }
        let Read {
            before, idx, after, ..
        } = read;
        if idx > 0 {
            // Pull the item the state stands in again.
            let output = self.remake(&before, idx, state.path_of(self.idx_key))?;
            if let Some(after) = after {
                // Where the pull left the source, restored as such: so it
                // is checked in full (a reshard reads positions from it),
                // and a threaded node below snapshots there, which is what
                // `elastic::settle` needs of it.
                self.source.reset(Some(&after))?;
            }
            self.current = Some((output, before));
            self.idx = idx;
        } else {
            self.source.reset(Some(&before))?;
        }
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        self.flag.check(self.name)?;
        cx.check_live(self.name)?;
        let before = match &self.current {
            Some((_, before)) => before.clone(),
            // No item pulled since the reset (or the source ended): the
            // source stands where the next item begins, and `idx` is 0.
            None => self.source.get_state(cx)?,
        };
        let mut out = State::new();
        out.insert_child(SOURCE, before);
        out.insert(self.idx_key, self.idx)?;
        if self.idx > 0 {
            // The source has not moved since it yielded the current item.
            out.insert_child(AFTER, self.source.get_state(cx)?);
        }
        if !self.pending.is_empty() {
            let mut list = State::new();
            for (i, p) in self.pending.iter().enumerate() {
                let mut entry = State::new();
                entry.insert_child(SOURCE, p.source.clone());
                entry.insert(SKIP, p.skip)?;
                list.insert_child(i.to_string(), entry);
            }
            out.insert_child(PENDING, list);
        }
        Ok(out)
    }

    fn describe(&self) -> Description {
        Description::new(self.name)
            .with_resume(Resume::Expands)
            .child(SOURCE, self.source.describe())
    }

    fn shutdown(&mut self) {
        self.source.shutdown();
    }

    /// What is left of the current item's output (its iterator's own hint),
    /// and no upper bound while the source may still yield: an item may
    /// expand to any number of elements.
    fn size_hint(&self) -> Hint {
        let pending = self.pending.iter().fold(Hint::exact(0), |hint, p| {
            hint.then(Hint::from_iterator(p.output.size_hint()))
        });
        let current = self.current.as_ref().map_or(Hint::exact(0), |(output, _)| {
            Hint::from_iterator(output.size_hint())
        });
        let current = pending.then(current);
        // The expansion itself cannot fail: only the source's errors come.
        let source = self.source.size_hint();
        Hint {
            upper: current.upper.filter(|_| source.upper == Some(0)),
            may_fail: source.may_fail,
            ..current
        }
    }
}
