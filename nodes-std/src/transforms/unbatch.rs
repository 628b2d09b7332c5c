//! [`Unbatcher`]: flatten a node of collections into their elements.

use std::fmt;

use crate::transforms::flat_map::FlatMapper;
use crate::{Cx, Node, NodeId, Result, State, Stateful};

const NAME: &str = "Unbatcher";
const BATCH_IDX: &str = "batch_idx";

/// This struct is created by [`NodeExt::unbatch`](crate::NodeExt::unbatch).
/// See its documentation for more.
///
/// Yields the elements of each collection its source yields, in order;
/// empty collections are skipped. It is
/// [`flat_map`](crate::NodeExt::flat_map) with the identity function (the
/// two share their mechanism), under its own name and torchdata's state
/// layout.
///
/// # State
/// `source`: the source's state from just before the current batch was
/// pulled; `batch_idx`: how many elements of that batch were returned
/// (torchdata's layout). Restore resets the source to that state, pulls that
/// one batch again at once (as torchdata does, so the source stands exactly
/// where it stood, flags included) and skips `batch_idx` elements with `nth`:
/// O(1) in the position, plus re-producing one batch.
///
/// Pulling a batch also takes the source's state (to remember where the
/// batch began): one `get_state` of the source per batch. Part way
/// through a batch, and after a reshard, the state also holds `after` and
/// `pending`, as a [`FlatMapper`](crate::FlatMapper)'s does.
///
/// # Errors
/// An error from the source is returned in place of the batch it stands for;
/// a state taken after it resumes after it.
///
/// Restoring needs a source that produces the same batch again:
/// [`reset`](Stateful::reset) (from the start too) refuses a source whose
/// output order varies between runs (an out-of-order
/// [`ParallelMapper`](crate::ParallelMapper) with workers, see
/// [`Description::varying_order`](crate::Description::varying_order)) with [`Error::InvalidPipeline`](crate::Error::InvalidPipeline)
/// naming it. Deliver in order (`ParallelOptions::in_order(true)`), or put
/// the out-of-order map above the unbatch.
///
/// Restoring a `batch_idx` larger than the re-pulled batch is a bad state;
/// so is a `batch_idx` above 0 where the source has no batch left. Errors
/// from the source while re-pulling come out of `reset`.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let items: Vec<u32> = IterableWrapper::new(vec![vec![1, 2], vec![], vec![3]])
///     .unbatch()
///     .start()?
///     .collect::<Result<_>>()?;
/// assert_eq!(items, [1, 2, 3]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
// Written by hand (on the mechanism of `FlatMapper`): its state nests, under
// `source`, the source's state from *before* the current batch rather than
// the source's current state, which `#[node(child)]` cannot express.
#[must_use = "nodes do nothing until started"]
pub struct Unbatcher<S: Node>
where
    S::Item: IntoIterator,
{
    inner: FlatMapper<S, Identity<S::Item>, S::Item>,
}

/// The function an unbatcher expands with: a batch is its own output.
type Identity<T> = fn(T) -> T;

impl<S: Node + fmt::Debug> fmt::Debug for Unbatcher<S>
where
    S::Item: IntoIterator,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

// The compile-time "start it first" guard the derive gives derived nodes.
nodes_core::__started_guards!(impl[S: Node] Unbatcher<S> where [S::Item: IntoIterator]);

impl<S: Node> Unbatcher<S>
where
    S::Item: IntoIterator,
{
    pub(crate) fn new(source: S) -> Self {
        let identity: Identity<S::Item> = |batch| batch;
        Unbatcher {
            inner: FlatMapper::named(NAME, BATCH_IDX, ".unbatch()", source, identity),
        }
    }
}

impl<S> Node for Unbatcher<S>
where
    S: Node,
    S::Item: IntoIterator,
    <S::Item as IntoIterator>::IntoIter: Send,
{
    type Item = <S::Item as IntoIterator>::Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<Self::Item>> {
        cx.observe(NodeId::of(self), NAME, |cx| self.inner.expand_next(cx))
    }
}

impl<S: Node> nodes_core::NodeName for Unbatcher<S>
where
    S::Item: IntoIterator,
{
    const NAME: &'static str = NAME;
}

impl<S> Stateful for Unbatcher<S>
where
    S: Node,
    S::Item: IntoIterator,
{
    crate::delegate::delegate_stateful!(inner: reset, check_state, describe, shutdown, size_hint);

    // Named in full: a `FlatMapper` that is not started has a `get_state`
    // of its own, the compile-time guard.
    fn get_state(&self, cx: &Cx) -> Result<State> {
        Stateful::get_state(&self.inner, cx)
    }
}
