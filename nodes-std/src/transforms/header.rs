//! [`Header`]: the first `n` items of a pass.

use crate::policy::is_item;
use crate::{Cx, Hint, Node, NodeId, NodeName, Result};

/// This struct is created by [`NodeExt::header`](crate::NodeExt::header). See
/// its documentation for more.
///
/// Yields at most the first `n` items of each pass of its source.
///
/// Once `n` items were returned, `next` returns the end without touching the
/// source (so a header over an endless source ends). `n = 0` yields nothing
/// and never pulls.
///
/// # Errors
/// A bad record from the source ([`Error::User`](crate::Error::User),
/// [`Error::Panicked`](crate::Error::Panicked)) is one of the `n` items: it
/// is returned and counted. Any other error is returned without counting.
///
/// # State
/// `source`: the source's state; `num_yielded`: items (bad records
/// included) returned this pass.
/// Restore is the source's restore.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let items: Vec<u32> = IterableWrapper::new(0..10u32).header(3).start()?.collect::<Result<_>>()?;
/// assert_eq!(items, [0, 1, 2]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Debug, Node)]
#[node(size_hint)]
#[must_use = "nodes do nothing until started"]
pub struct Header<S> {
    #[node(child)]
    source: S,
    #[node(state)]
    num_yielded: u64,
    #[node(param)]
    n: u64,
}

impl<S> Header<S> {
    pub(crate) fn new(source: S, n: u64) -> Self {
        Header {
            source,
            num_yielded: 0,
            n,
        }
    }

    /// Items returned this pass, bad records included.
    pub fn num_yielded(&self) -> u64 {
        self.num_yielded
    }
}

impl<S: Node> Node for Header<S> {
    type Item = S::Item;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            if self.num_yielded >= self.n {
                return Ok(None);
            }
            let item = self.source.next(cx);
            if is_item(&item) {
                // Saturating: a restored state may hold any count.
                self.num_yielded = self.num_yielded.saturating_add(1);
            }
            item
        })
    }
}

/// The source's hint, cut at what is left of the `n` items.
impl<S: Node> crate::SizeHint for Header<S> {
    fn size_hint(&self) -> Hint {
        let left = self.n.saturating_sub(self.num_yielded);
        self.source.size_hint().take(left)
    }
}
