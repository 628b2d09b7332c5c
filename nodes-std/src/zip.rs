//! [`Zip`]: pair up the items of two nodes.

use std::fmt;

use crate::{Cx, Node, Result, Step};

/// Yields pairs of one item from each of two nodes, until either ends.
///
/// This struct is created by [`NodeExt::zip`](crate::NodeExt::zip). See its
/// documentation for more.
///
/// Like [`Iterator::zip`], `left` is pulled first: when `right` ends, the
/// item just taken from `left` is dropped.
///
/// # State
/// `left` and `right`: the two sources' states. Restore is their restores.
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
}

impl<A: fmt::Debug, B: fmt::Debug> fmt::Debug for Zip<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Zip")
            .field("left", &self.left)
            .field("right", &self.right)
            .finish()
    }
}

impl<A, B> Zip<A, B> {
    pub(crate) fn new(left: A, right: B) -> Self {
        Zip { left, right }
    }
}

impl<A: Node, B: Node> Step for Zip<A, B> {
    type Item = (A::Item, B::Item);

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<(A::Item, B::Item)>> {
        let Some(a) = self.left.next(cx)? else {
            return Ok(None);
        };
        let Some(b) = self.right.next(cx)? else {
            return Ok(None);
        };
        Ok(Some((a, b)))
    }
}
