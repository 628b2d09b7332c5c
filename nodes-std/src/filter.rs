//! [`Filter`]: keep the items a predicate accepts.

use std::fmt;

use crate::{Cx, Node, Result, Step};

/// Yields only the items of its source for which a predicate returns `true`.
///
/// This struct is created by [`NodeExt::filter`](crate::NodeExt::filter). See
/// its documentation for more.
///
/// The predicate runs in the caller's thread; a panic in it is not caught.
///
/// # State
/// `source`: the source's state; `num_yielded` and `num_filtered`: items
/// accepted and rejected this pass (torchdata's counters). Restore is the
/// source's restore; the predicate is not re-run.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let evens: Vec<u32> = IterableWrapper::new(0..10u32).filter(|x| x % 2 == 0).start()?.collect::<Result<_>>()?;
/// assert_eq!(evens, [0, 2, 4, 6, 8]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[must_use = "nodes do nothing until started"]
pub struct Filter<S, F> {
    #[node(child)]
    source: S,
    #[node(state)]
    num_yielded: u64,
    #[node(state)]
    num_filtered: u64,
    f: F,
}

impl<S: fmt::Debug, F> fmt::Debug for Filter<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Filter")
            .field("source", &self.source)
            .field("num_yielded", &self.num_yielded)
            .field("num_filtered", &self.num_filtered)
            .finish_non_exhaustive()
    }
}

impl<S, F> Filter<S, F> {
    pub(crate) fn new(source: S, f: F) -> Self {
        Filter {
            source,
            num_yielded: 0,
            num_filtered: 0,
            f,
        }
    }

    /// Items accepted this pass.
    pub fn num_yielded(&self) -> u64 {
        self.num_yielded
    }

    /// Items rejected this pass.
    pub fn num_filtered(&self) -> u64 {
        self.num_filtered
    }
}

impl<S, F> Step for Filter<S, F>
where
    S: Node,
    F: FnMut(&S::Item) -> bool + Send,
{
    type Item = S::Item;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        while let Some(item) = self.source.next(cx)? {
            if (self.f)(&item) {
                self.num_yielded += 1;
                return Ok(Some(item));
            }
            self.num_filtered += 1;
        }
        Ok(None)
    }
}
