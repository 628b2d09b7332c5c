//! [`Unbatcher`]: flatten a node of collections into their elements.

use std::fmt;

use crate::{Cx, Description, Error, Node, NodeId, Replay, ResetFlag, Result, State, Stateful};

const NAME: &str = "Unbatcher";
const SOURCE: &str = "source";
const BATCH_IDX: &str = "batch_idx";
/// Why an unbatcher refuses a source whose order varies, and what to build.
const REFUSAL: &str = concat!(
    "it restores by pulling its current batch again, which over a source whose order varies ",
    "between runs gives other items; deliver in order with `ParallelOptions::in_order(true)`, ",
    "or put the out-of-order par_map above the `.unbatch()`",
);

/// This struct is created by [`NodeExt::unbatch`](crate::NodeExt::unbatch).
/// See its documentation for more.
///
/// Yields the elements of each collection its source yields, in order;
/// empty collections are skipped.
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
/// batch began): one `get_state` of the source per batch.
///
/// # Errors
/// An error from the source is returned in place of the batch it stands for;
/// a state taken after it resumes after it.
///
/// Restoring needs a source that produces the same batch again:
/// [`reset`](Stateful::reset) (from the start too) refuses a source whose
/// output order varies between runs (an out-of-order
/// [`ParallelMapper`](crate::ParallelMapper) with workers, see
/// [`Stateful::varying_order`]) with [`Error::InvalidPipeline`] naming it.
/// Deliver in order (`ParallelOptions::in_order(true)`), or put the
/// out-of-order map above the unbatch.
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
// Written by hand: its state nests, under `source`, the source's state from
// *before* the current batch rather than the source's current state, which
// `#[node(child)]` cannot express (the derive always asks the child).
#[must_use = "nodes do nothing until started"]
pub struct Unbatcher<S: Node>
where
    S::Item: IntoIterator,
{
    source: S,
    /// The current batch and the source's state from before it was pulled.
    current: Option<(<S::Item as IntoIterator>::IntoIter, State)>,
    /// Elements returned from the current batch.
    idx: u64,
    flag: ResetFlag,
}

impl<S: Node + fmt::Debug> fmt::Debug for Unbatcher<S>
where
    S::Item: IntoIterator,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unbatcher")
            .field("source", &self.source)
            .field("batch_idx", &self.idx)
            .finish_non_exhaustive()
    }
}

// The compile-time "start it first" guard the derive gives derived nodes.
nodes_core::__started_guards!(impl[S: Node] Unbatcher<S> where [S::Item: IntoIterator]);

impl<S: Node> Unbatcher<S>
where
    S::Item: IntoIterator,
{
    pub(crate) fn new(source: S) -> Self {
        Unbatcher {
            source,
            current: None,
            idx: 0,
            flag: ResetFlag::default(),
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
        cx.observe(NodeId::of(self), NAME, |cx| {
            self.flag.check(NAME)?;
            loop {
                if let Some((batch, _)) = &mut self.current
                    && let Some(item) = batch.next()
                {
                    self.idx += 1;
                    return Ok(Some(item));
                }
                let before = self.source.get_state(cx)?;
                // Whatever comes next, the previous batch is done: a state
                // taken after an end or an error stands where the source does.
                self.current = None;
                self.idx = 0;
                let Some(batch) = self.source.next(cx)? else {
                    return Ok(None);
                };
                self.current = Some((batch.into_iter(), before));
            }
        })
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
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        if let Some(below) = self.source.varying_order() {
            return Err(Error::InvalidPipeline {
                node: NAME,
                below,
                message: REFUSAL.to_owned(),
            });
        }
        let Some(state) = state else {
            self.source.reset(None)?;
            self.current = None;
            self.idx = 0;
            self.flag.mark();
            return Ok(());
        };
        state.expect_keys(NAME, &[SOURCE, BATCH_IDX])?;
        let before = state.child(SOURCE)?;
        let idx: u64 = state.get(BATCH_IDX)?;
        self.current = None;
        self.idx = 0;
        let mut replay = Replay::reset(&mut self.source, Some(&before))?;
        if idx > 0 {
            // Re-pull the batch the state stands in.
            let Some(batch) = replay.next()? else {
                return Err(Error::bad_state(
                    state.path_of(BATCH_IDX),
                    format!(
                        "Unbatcher is {idx} elements into a batch, but the source has none left"
                    ),
                ));
            };
            let mut batch = batch.into_iter();
            let landed = usize::try_from(idx - 1)
                .ok()
                .and_then(|n| batch.nth(n))
                .is_some();
            if !landed {
                return Err(Error::bad_state(
                    state.path_of(BATCH_IDX),
                    format!("Unbatcher cannot skip {idx} elements: the batch is shorter"),
                ));
            }
            self.current = Some((batch, before));
            self.idx = idx;
        }
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        self.flag.check(NAME)?;
        let mut out = State::new();
        match &self.current {
            Some((_, before)) => {
                out.insert_child(SOURCE, before.clone());
                out.insert(BATCH_IDX, self.idx)?;
            }
            // No batch pulled since the reset (or the source ended): the
            // source stands where the next batch begins.
            None => {
                out.insert_child(SOURCE, self.source.get_state(cx)?);
                out.insert(BATCH_IDX, 0u64)?;
            }
        }
        Ok(out)
    }

    fn describe(&self) -> Description {
        Description::new(NAME).child(SOURCE, self.source.describe())
    }

    fn shutdown(&mut self) {
        self.source.shutdown();
    }

    fn varying_order(&self) -> Option<String> {
        self.source.varying_order()
    }
}
