//! [`FlatMapper`]: map every item to a collection and yield its elements;
//! and the one-to-many mechanism it shares with
//! [`Unbatcher`](crate::Unbatcher).

use std::fmt;

use crate::{
    Cx, Description, Error, Hint, Node, NodeId, Replay, ResetFlag, Result, State, Stateful,
};

const NAME: &str = "FlatMapper";
const SOURCE: &str = "source";
const OUTPUT_IDX: &str = "output_idx";

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
    flag: ResetFlag,
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

    /// The source's state and the position that `state` holds, checked.
    fn read(&self, state: &State) -> Result<(State, u64)> {
        state.expect_keys(self.name, &[SOURCE, self.idx_key])?;
        Ok((state.child(SOURCE)?, state.get(self.idx_key)?))
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
        self.source.check_state(&self.read(state)?.0)
    }

    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        replayable(&self.source, self.name, self.method)?;
        let restore = state.map(|s| self.read(s)).transpose()?;
        self.current = None;
        self.idx = 0;
        let (Some(state), Some((before, idx))) = (state, restore) else {
            self.source.reset(None)?;
            self.flag.mark();
            return Ok(());
        };
        let name = self.name;
        let mut replay = Replay::reset(&mut self.source, Some(&before))?;
        if idx > 0 {
            // Pull the item the state stands in again.
            let Some(item) = replay.next()? else {
                let why = format!(
                    "{name} is {idx} elements into an item's output, but the source has none left"
                );
                return Err(Error::bad_state(state.path_of(self.idx_key), why));
            };
            let mut output = (self.f)(item).into_iter();
            let landed = usize::try_from(idx - 1)
                .ok()
                .and_then(|n| output.nth(n))
                .is_some();
            if !landed {
                let why = format!("{name} cannot skip {idx} elements: the output is shorter");
                return Err(Error::bad_state(state.path_of(self.idx_key), why));
            }
            self.current = Some((output, before));
            self.idx = idx;
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
        Ok(out)
    }

    fn describe(&self) -> Description {
        Description::new(self.name).child(SOURCE, self.source.describe())
    }

    fn shutdown(&mut self) {
        self.source.shutdown();
    }

    /// What is left of the current item's output (its iterator's own hint),
    /// and no upper bound while the source may still yield: an item may
    /// expand to any number of elements.
    fn size_hint(&self) -> Hint {
        let current = self.current.as_ref().map_or(Hint::exact(0), |(output, _)| {
            Hint::from_iterator(output.size_hint())
        });
        // The expansion itself cannot fail: only the source's errors come.
        let source = self.source.size_hint();
        Hint {
            upper: current.upper.filter(|_| source.upper == Some(0)),
            may_fail: source.may_fail,
            ..current
        }
    }
}
