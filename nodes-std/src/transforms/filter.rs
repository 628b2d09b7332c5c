//! [`Filter`]: keep the items a predicate accepts; [`FilterMapper`]: map
//! every item to an `Option` and keep the `Some`s.

use crate::{Cx, Hint, Node, NodeId, NodeName, Result};

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

crate::transforms::debug_source!(Filter);

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
#[node(size_hint, resume = crate::Resume::Drops)]
#[must_use = "nodes do nothing until started"]
pub struct FilterMapper<S, F> {
    #[node(child)]
    source: S,
    #[node(config)]
    f: F,
}

crate::transforms::debug_source!(FilterMapper);

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
