//! [`Zip`]: pair up the items of two nodes.

use crate::policy::{HeldErrors, is_bad_record};
use crate::{Cx, Hint, Node, NodeId, NodeName, Result};

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
/// # Errors
/// An error from `left` is returned in its place; `right` is not pulled for
/// it. A bad record ([`Error::User`](crate::Error::User),
/// [`Error::Panicked`](crate::Error::Panicked)) from `right`, after an item
/// was taken from `left`, is held: `right` is pulled again, the pair is
/// returned, and the held errors right after it, so the item from `left` is
/// not lost and no pair is shifted. If `right` then ends, the left item is
/// dropped as usual and the held errors come before the end.
///
/// If `right` fails 1024 times in a row, the item from `left` is dropped and
/// the errors are returned (a side that keeps failing cannot hold the zip
/// forever). Any other error (a pipeline that cannot go on) is returned at
/// once, and a left item taken for it is dropped.
///
/// # State
/// `left` and `right` (the two sources' states), `ended`, and
/// `pending_errors` (held errors not yet returned, usually `[]`). Restore is
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
#[derive(Node, Debug)]
#[node(size_hint)]
#[must_use = "nodes do nothing until started"]
pub struct Zip<A, B> {
    #[node(child)]
    left: A,
    #[node(child)]
    right: B,
    #[node(state)]
    ended: bool,
    /// Bad records from `right` taken while building the last pair.
    #[node(state)]
    pending_errors: HeldErrors,
}

impl<A, B> Zip<A, B> {
    pub(crate) fn new(left: A, right: B) -> Self {
        Zip {
            left,
            right,
            ended: false,
            pending_errors: HeldErrors::default(),
        }
    }
}

impl<A: Node, B: Node> Node for Zip<A, B> {
    type Item = (A::Item, B::Item);

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<(A::Item, B::Item)>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            if let Some(error) = self.pending_errors.pop() {
                return Err(error);
            }
            if self.ended {
                return Ok(None);
            }
            let Some(a) = self.left.next(cx)? else {
                self.ended = true;
                return Ok(None);
            };
            loop {
                match self.right.next(cx) {
                    Ok(Some(b)) => return Ok(Some((a, b))),
                    Ok(None) => break,
                    Err(error) if is_bad_record(&error) => {
                        self.pending_errors.push(error);
                        if self.pending_errors.is_full() {
                            return self.pending_errors.pop().map_or(Ok(None), Err);
                        }
                    }
                    Err(error) => return Err(error),
                }
            }
            self.ended = true;
            self.pending_errors.pop().map_or(Ok(None), Err)
        })
    }
}

/// The held errors, then a pair per item of the shorter side. An error is
/// an extra item (from the left in place of a pair, from the right held),
/// so over sides that may fail only the upper bound, every result of
/// either side, is known.
impl<A: Node, B: Node> crate::SizeHint for Zip<A, B> {
    fn size_hint(&self) -> Hint {
        let held = self.pending_errors.hint();
        if self.ended {
            return held;
        }
        let (left, right) = (self.left.size_hint(), self.right.size_hint());
        let both = left.then(right);
        let pairs = if both.may_fail {
            both.at_most()
        } else {
            Hint {
                lower: left.lower.min(right.lower),
                // The smaller of the known bounds, if any is.
                upper: left.upper.into_iter().chain(right.upper).min(),
                may_fail: false,
            }
        };
        held.then(pairs)
    }
}
