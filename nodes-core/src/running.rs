//! [`Running`]: a started pipeline, usable as a plain iterator.

use std::fmt;

use crate::error::Result;
use crate::node::{Cx, Node};
use crate::state::State;
use crate::trace;

/// A started pipeline: the root node, reset, plus the context that proves it.
///
/// An `Iterator<Item = Result<N::Item>>` with [`get_state`](Running::get_state),
/// [`reset`](Running::reset) and [`shutdown`](Running::shutdown). Dropping it
/// shuts the pipeline down (joins worker threads). Use a
/// [`Loader`](crate::Loader) when you want epochs.
///
/// A failed [`reset`](Running::reset) rolls back: the pipeline continues from
/// where it stood, as if the bad state had never been offered.
pub struct Running<N: Node> {
    node: N,
    cx: Cx,
}

impl<N: Node> fmt::Debug for Running<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running")
            .field("node", &std::any::type_name::<N>())
            .finish_non_exhaustive()
    }
}

impl<N: Node> Running<N> {
    /// Resets `node` to the beginning and starts it.
    pub fn start(node: N) -> Result<Self> {
        Self::started(node, None)
    }

    /// Resets `node` from `state` and starts it.
    pub fn start_from(node: N, state: &State) -> Result<Self> {
        Self::started(node, Some(state))
    }

    /// Resets `node` from `state` (a reset to the start is not logged as a
    /// restore) and starts it.
    fn started(mut node: N, state: Option<&State>) -> Result<Self> {
        let outcome = node.reset(state);
        trace::node_restored(&node, state, &outcome);
        outcome?;
        Ok(Running {
            node,
            cx: Cx::new_running(),
        })
    }

    /// The state that resumes right after the last item returned.
    pub fn get_state(&self) -> Result<State> {
        self.node.get_state(&self.cx)
    }

    /// Starts over (`None`) or resumes from `state`. On error the pipeline is
    /// rolled back to where it stood.
    pub fn reset(&mut self, state: Option<&State>) -> Result<()> {
        let outcome = reset_with_rollback(&mut self.node, &self.cx, state, None);
        trace::node_restored(&self.node, state, &outcome);
        outcome
    }

    /// Stops background work; the pipeline can be reset and used again.
    pub fn shutdown(&mut self) {
        self.node.shutdown();
    }

    /// The root node.
    pub fn node(&self) -> &N {
        &self.node
    }

    /// How many more items the pass returns (`Err` items included), as
    /// [`Stateful::size_hint`](crate::Stateful::size_hint) of the root says:
    /// a lower bound and, if known, an upper bound.
    pub fn size_hint(&self) -> (u64, Option<u64>) {
        let hint = self.node.size_hint();
        (hint.lower, hint.upper)
    }

    /// The next item, as [`Node::next`] reports it (`Ok(None)` at the end).
    pub fn try_next(&mut self) -> Result<Option<N::Item>> {
        self.node.next(&mut self.cx)
    }
}

/// Resets `node` from `state`; if that fails, puts it back where it stood:
/// at `resting`, the node's own state when the caller knows it (no need to
/// take it), else at the state taken before the reset. After a reset that
/// succeeded, the contexts forked before it are stale; after one rolled
/// back, the pipeline goes on in the same pass.
pub(crate) fn reset_with_rollback<N: Node>(
    node: &mut N,
    cx: &Cx,
    state: Option<&State>,
    resting: Option<State>,
) -> Result<()> {
    let before = resting.map_or_else(|| node.get_state(cx), Ok);
    node.reset(state).inspect(|()| cx.renew()).inspect_err(|_| {
        if let Ok(before) = before {
            // The saved state came from this very node, so it fits; if the
            // node cannot even take that back, report the original error.
            let _ = node.reset(Some(&before));
        }
    })
}

impl<N: Node> Iterator for Running<N> {
    type Item = Result<N::Item>;

    fn next(&mut self) -> Option<Self::Item> {
        self.try_next().transpose()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let hint = self.node.size_hint();
        crate::hint::usize_bounds(hint.lower, hint.upper)
    }
}

impl<N: Node> Drop for Running<N> {
    fn drop(&mut self) {
        self.node.shutdown();
        self.cx.renew();
    }
}

/// A node that was just reset, pulled on behalf of the node that owns it:
/// how a node that restores by replaying its source (a read-ahead skipping
/// what was already delivered, an unbatcher pulling its batch again) pulls
/// inside `reset`, which has no [`Cx`].
///
/// The only way to make one is [`Replay::reset`], which resets the node
/// first, and the context inside never leaves it: only the node that was
/// reset can be pulled.
///
/// ```
/// use nodes_core::{Node, Replay, Result, Stateful};
///
/// fn skip_first<N: Node>(source: &mut N, n: usize) -> Result<()> {
///     let mut replay = Replay::reset(source, None)?;
///     for _ in 0..n {
///         replay.next()?;
///     }
///     Ok(())
/// }
/// # Ok::<(), nodes_core::Error>(())
/// ```
pub struct Replay<'a, N: ?Sized> {
    node: &'a mut N,
    cx: Cx,
}

impl<N: ?Sized> fmt::Debug for Replay<'_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("node", &std::any::type_name::<N>())
            .finish_non_exhaustive()
    }
}

impl<'a, N: Node + ?Sized> Replay<'a, N> {
    /// Resets `node` to `state` (or to its start) and returns it ready to pull.
    pub fn reset(node: &'a mut N, state: Option<&State>) -> Result<Self> {
        node.reset(state)?;
        Ok(Replay {
            node,
            cx: Cx::new_running(),
        })
    }

    /// The node's next item.
    // Named after `Node::next`, whose result it returns; not an iterator.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<N::Item>> {
        self.node.next(&mut self.cx)
    }

    /// The node's state where it stands.
    pub fn get_state(&self) -> Result<State> {
        self.node.get_state(&self.cx)
    }
}
