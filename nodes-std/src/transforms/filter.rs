//! [`Filter`]: keep the items a predicate accepts.

use std::fmt;

use crate::{Cx, Node, NodeId, NodeName, Result};
use nodes_core::Hint;

/// This struct is created by [`NodeExt::filter`](crate::NodeExt::filter). See
/// its documentation for more.
///
/// Yields only the items of its source for which a predicate returns `true`.
///
/// The predicate runs in the caller's thread; a panic in it is not caught.
///
/// # State
/// `source`: the source's state, nothing else. Restore is the source's
/// restore; the predicate is not re-run. (torchdata's Filter also keeps
/// `num_yielded`/`num_filtered` counters; they are not needed to resume, and
/// two counter updates per item cost a third of the throughput of a
/// `map -> filter -> batch` chain, so this one keeps none: count in the
/// predicate if you need them.)
///
/// ```
/// use nodes_std::prelude::*;
///
/// let evens: Vec<u32> = IterableWrapper::new(0..10u32).filter(|x| x % 2 == 0).start()?.collect::<Result<_>>()?;
/// assert_eq!(evens, [0, 2, 4, 6, 8]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(size_hint, resume = crate::Resume::Drops)]
#[must_use = "nodes do nothing until started"]
pub struct Filter<S, F> {
    #[node(child)]
    source: S,
    #[node(config)]
    f: F,
}

impl<S: fmt::Debug, F> fmt::Debug for Filter<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Filter")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl<S, F> Filter<S, F> {
    pub(crate) fn new(source: S, f: F) -> Self {
        Filter { source, f }
    }
}

impl<S, F> Node for Filter<S, F>
where
    S: Node,
    F: FnMut(&S::Item) -> bool + Send,
{
    type Item = S::Item;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            while let Some(item) = self.source.next(cx)? {
                if (self.f)(&item) {
                    return Ok(Some(item));
                }
            }
            Ok(None)
        })
    }
}

/// Any number of the source's items may be dropped: at most the source's
/// count (its errors pass through, one item each).
impl<S: Node, F> crate::SizeHint for Filter<S, F> {
    fn size_hint(&self) -> Hint {
        self.source.size_hint().at_most()
    }
}
