//! [`FilterMapper`]: map every item to an `Option` and keep the `Some`s.

use std::fmt;

use crate::{Cx, Node, NodeId, NodeName, Result};
use nodes_core::Hint;

/// This struct is created by
/// [`NodeExt::filter_map`](crate::NodeExt::filter_map). See its
/// documentation for more.
///
/// Applies a function returning an [`Option`] to every item of its source
/// and yields the values inside the `Some`s (`Iterator::filter_map`).
///
/// The function runs in the caller's thread, once per item; a panic in it
/// is not caught. At most one output per item, so there is no position
/// within an item to remember: unlike [`FlatMapper`](crate::FlatMapper),
/// it never pulls an item again, and works over any source (one whose order
/// varies too).
///
/// # State
/// `source`: the source's state, nothing else. Restore is the source's
/// restore; the function is not re-run.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let numbers: Vec<u32> = IterableWrapper::new(["1", "x", "3"])
///     .filter_map(|s| s.parse().ok())
///     .start()?
///     .collect::<Result<_>>()?;
/// assert_eq!(numbers, [1, 3]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(size_hint)]
#[must_use = "nodes do nothing until started"]
pub struct FilterMapper<S, F> {
    #[node(child)]
    source: S,
    #[node(config)]
    f: F,
}

impl<S: fmt::Debug, F> fmt::Debug for FilterMapper<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilterMapper")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl<S, F> FilterMapper<S, F> {
    pub(crate) fn new(source: S, f: F) -> Self {
        FilterMapper { source, f }
    }
}

impl<S, F, U> Node for FilterMapper<S, F>
where
    S: Node,
    F: FnMut(S::Item) -> Option<U> + Send,
{
    type Item = U;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            while let Some(item) = self.source.next(cx)? {
                if let Some(out) = (self.f)(item) {
                    return Ok(Some(out));
                }
            }
            Ok(None)
        })
    }
}

/// Any number of the source's items may be dropped: at most the source's
/// count (its errors pass through, one item each).
impl<S: Node, F> crate::SizeHint for FilterMapper<S, F> {
    fn size_hint(&self) -> Hint {
        self.source.size_hint().at_most()
    }
}
