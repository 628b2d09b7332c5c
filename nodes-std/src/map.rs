//! [`Mapper`] and [`TryMapper`]: apply a function to every item, in the
//! caller's thread.

use std::fmt;

use crate::{BoxError, Cx, Error, Node, NodeId, Result};

/// This struct is created by [`NodeExt::map`](crate::NodeExt::map). See its
/// documentation for more.
///
/// Applies a function to every item of its source.
///
/// The function runs in the caller's thread, once per item, in order. A
/// panic in it is not caught: it unwinds through `next` like a panic in an
/// `Iterator::map` closure. Use [`NodeExt::try_map`](crate::NodeExt::try_map)
/// for functions that can fail.
///
/// # State
/// `source`: the source's state. Restore is the source's restore; the
/// function is not re-run.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let items: Vec<u32> = IterableWrapper::new(1..4u32).map(|x| x * 10).start()?.collect::<Result<_>>()?;
/// assert_eq!(items, [10, 20, 30]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[must_use = "nodes do nothing until started"]
pub struct Mapper<S, F> {
    #[node(child)]
    source: S,
    #[node(config)]
    f: F,
}

impl<S: fmt::Debug, F> fmt::Debug for Mapper<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapper")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl<S, F> Mapper<S, F> {
    pub(crate) fn new(source: S, f: F) -> Self {
        Mapper { source, f }
    }
}

impl<S, F, U> Node for Mapper<S, F>
where
    S: Node,
    F: FnMut(S::Item) -> U + Send,
{
    type Item = U;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        cx.observe(NodeId::of(self), "Mapper", |cx| {
            Ok(self.source.next(cx)?.map(&mut self.f))
        })
    }
}

/// This struct is created by [`NodeExt::try_map`](crate::NodeExt::try_map).
/// See its documentation for more.
///
/// Applies a fallible function to every item of its source.
///
/// # State
/// `source`: the source's state; `num_seen`: items taken from the source
/// this pass (the index reported with an error). Restore is the source's
/// restore.
///
/// # Errors
/// An `Err` from the function is returned as [`Error::User`] naming
/// `TryMapper` and the item's index in this pass (counting from 0). The node
/// does not stop: the next call maps the next item.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let mut running = IterableWrapper::new(["1", "x", "3"])
///     .try_map(|s: &str| s.parse::<u32>())
///     .start()?;
/// assert_eq!(running.next().transpose()?, Some(1));
/// let err = running.next().unwrap().unwrap_err();
/// assert_eq!(err.to_string(), "user function failed in TryMapper at item 1: invalid digit found in string");
/// assert_eq!(running.next().transpose()?, Some(3));
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[must_use = "nodes do nothing until started"]
pub struct TryMapper<S, F> {
    #[node(child)]
    source: S,
    #[node(state)]
    num_seen: u64,
    #[node(config)]
    f: F,
}

impl<S: fmt::Debug, F> fmt::Debug for TryMapper<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TryMapper")
            .field("source", &self.source)
            .field("num_seen", &self.num_seen)
            .finish_non_exhaustive()
    }
}

impl<S, F> TryMapper<S, F> {
    pub(crate) fn new(source: S, f: F) -> Self {
        TryMapper {
            source,
            num_seen: 0,
            f,
        }
    }
}

impl<S, F, U, E> Node for TryMapper<S, F>
where
    S: Node,
    F: FnMut(S::Item) -> std::result::Result<U, E> + Send,
    E: Into<BoxError>,
{
    type Item = U;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        cx.observe(NodeId::of(self), "TryMapper", |cx| {
            let Some(item) = self.source.next(cx)? else {
                return Ok(None);
            };
            let index = self.num_seen;
            // Saturating: a restored state may hold any count.
            self.num_seen = self.num_seen.saturating_add(1);
            match (self.f)(item) {
                Ok(out) => Ok(Some(out)),
                Err(e) => Err(Error::user("TryMapper", Some(index), e)),
            }
        })
    }
}
