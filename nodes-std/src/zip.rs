//! [`Zip`]: pair up the items of two nodes.

use std::fmt;

use crate::{Cx, Node, NodeId, Result};

/// This struct is created by [`NodeExt::zip`](crate::NodeExt::zip). See its
/// documentation for more.
///
/// Yields pairs of one item from each of two nodes, until either ends.
///
/// Like [`Iterator::zip`], `left` is pulled first: when `right` ends, the
/// item just taken from `left` is dropped. Once either side has ended, the
/// zip stays ended without pulling either side again until its next reset
/// (so the end does not keep consuming, and resetting, `left`).
///
/// # State
/// `left` and `right` (the two sources' states) and `ended`. Restore is
/// their restores.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let pairs: Vec<(u32, char)> = IterableWrapper::new(0..5u32)
///     .zip(IterableWrapper::new(['a', 'b', 'c']))
///     .start()?
///     .collect::<Result<_>>()?;
/// assert_eq!(pairs, [(0, 'a'), (1, 'b'), (2, 'c')]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[must_use = "nodes do nothing until started"]
pub struct Zip<A, B> {
    #[node(child)]
    left: A,
    #[node(child)]
    right: B,
    #[node(state)]
    ended: bool,
}

impl<A: fmt::Debug, B: fmt::Debug> fmt::Debug for Zip<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Zip")
            .field("left", &self.left)
            .field("right", &self.right)
            .field("ended", &self.ended)
            .finish()
    }
}

impl<A, B> Zip<A, B> {
    pub(crate) fn new(left: A, right: B) -> Self {
        Zip {
            left,
            right,
            ended: false,
        }
    }
}

impl<A: Node, B: Node> Node for Zip<A, B> {
    type Item = (A::Item, B::Item);

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<(A::Item, B::Item)>> {
        cx.observe(NodeId::of(self), "Zip", |cx| {
            if self.ended {
                return Ok(None);
            }
            if let Some(a) = self.left.next(cx)?
                && let Some(b) = self.right.next(cx)?
            {
                return Ok(Some((a, b)));
            }
            self.ended = true;
            Ok(None)
        })
    }
}
