//! [`Batcher`]: group consecutive items into `Vec`s.

use crate::policy::{HeldErrors, is_bad_record};
use crate::transforms::require;
use crate::{Cx, Hint, Node, NodeId, NodeName, Result};

/// This struct is created by [`NodeExt::batch`](crate::NodeExt::batch) (the
/// last batch may be shorter, like [`slice::chunks`]) and
/// [`NodeExt::batch_exact`](crate::NodeExt::batch_exact) (a short last batch
/// is dropped, like [`slice::chunks_exact`]; torchdata's default
/// `drop_last=True`). See their documentation for more.
///
/// Groups consecutive items of its source into `Vec`s of `batch_size`.
///
/// A full batch is returned as soon as it is full; the source is not polled
/// further. Memory for a batch is reserved as its items arrive (at most 1 MiB
/// up front), so a huge `batch_size` costs nothing until items come.
///
/// # Errors
/// An error from the source that is a bad record
/// ([`Error::User`](crate::Error::User),
/// [`Error::Panicked`](crate::Error::Panicked)) is one item of the pass:
/// - at a batch boundary (no item of the next batch taken yet) it is returned
///   in its place;
/// - in the middle of a batch it is held, the batch goes on filling, and the
///   held errors are returned, in order, right after that batch (after the
///   end of the pass, if a short last batch is dropped). No item is lost and
///   batch boundaries do not move.
///
/// If 1024 errors arrive while one batch is filling, that batch is returned
/// short (`batch`) or dropped (`batch_exact`, which returns no short batch),
/// followed by the errors: a source that keeps failing cannot hold the
/// batcher forever. Any other error (a pipeline that cannot go on, such
/// as a source used after `shutdown`) is returned at once and the partial
/// batch is dropped.
///
/// # State
/// `source`: the source's state; `pending_errors`: the held errors not yet
/// returned (each with its kind, node, index and message), usually `[]`. A
/// batch is never held across calls. Restore is the source's restore.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let batches: Vec<Vec<u32>> = IterableWrapper::new(0..5u32).batch(2)?.start()?.collect::<Result<_>>()?;
/// assert_eq!(batches, [vec![0, 1], vec![2, 3], vec![4]]);
///
/// let exact: Vec<Vec<u32>> = IterableWrapper::new(0..5u32).batch_exact(2)?.start()?.collect::<Result<_>>()?;
/// assert_eq!(exact, [vec![0, 1], vec![2, 3]]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Debug, Node)]
#[node(size_hint, resume = crate::Resume::Groups(self.batch_size as u64))]
#[must_use = "nodes do nothing until started"]
pub struct Batcher<S> {
    #[node(child)]
    source: S,
    #[node(param)]
    batch_size: usize,
    #[node(param)]
    drop_last: bool,
    /// Bad records taken while the last batch was filling, returned next.
    #[node(state)]
    pending_errors: HeldErrors,
}

impl<S> Batcher<S> {
    pub(crate) fn new(source: S, batch_size: usize, drop_last: bool) -> Result<Self> {
        require(batch_size > 0, "Batcher", "batch_size must be at least 1")?;
        Ok(Batcher {
            source,
            batch_size,
            drop_last,
            pending_errors: HeldErrors::default(),
        })
    }

    /// The number of items in a full batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Whether a short last batch is dropped.
    pub fn drop_last(&self) -> bool {
        self.drop_last
    }
}

/// The most memory a batch reserves before its items arrive.
const MAX_RESERVE_BYTES: usize = 1 << 20;

/// The capacity a new batch starts with: `batch_size`, or as many items as
/// fit in [`MAX_RESERVE_BYTES`] (the `Vec` grows from there).
fn initial_capacity<T>(batch_size: usize) -> usize {
    batch_size.min(MAX_RESERVE_BYTES / std::mem::size_of::<T>().max(1))
}

impl<S: Node> Node for Batcher<S> {
    type Item = Vec<S::Item>;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Vec<S::Item>>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            if let Some(error) = self.pending_errors.pop() {
                return Err(error);
            }
            let mut batch = Vec::with_capacity(initial_capacity::<S::Item>(self.batch_size));
            while batch.len() < self.batch_size {
                match self.source.next(cx) {
                    Ok(Some(item)) => batch.push(item),
                    Ok(None) if batch.is_empty() || self.drop_last => {
                        return self.pending_errors.pop().map_or(Ok(None), Err);
                    }
                    Ok(None) => break,
                    // At a batch boundary an error takes its own place.
                    Err(error) if batch.is_empty() => return Err(error),
                    Err(error) if is_bad_record(&error) => {
                        self.pending_errors.push(error);
                        if self.pending_errors.is_full() {
                            break;
                        }
                    }
                    // The pipeline cannot go on: the partial batch is dropped.
                    Err(error) => return Err(error),
                }
            }
            if batch.len() < self.batch_size && self.drop_last {
                // Cut short by held errors: `batch_exact` returns no short batch.
                return self.pending_errors.pop().map_or(Ok(None), Err);
            }
            Ok(Some(batch))
        })
    }
}

/// The held errors, then the source's items in batches. Exact when the
/// source's hint is and it cannot fail. An error from the source is an
/// extra item (held and returned after its batch), so over a source that
/// may fail the upper bound is one item per source item; errors never lower
/// the count below the batches of the lower bound.
impl<S: Node> crate::SizeHint for Batcher<S> {
    fn size_hint(&self) -> Hint {
        let size = self.batch_size as u64;
        // Whole batches only with `drop_last`.
        let batches =
            |n: u64| n.div_ceil(size) - u64::from(self.drop_last && !n.is_multiple_of(size));
        let source = self.source.size_hint();
        let upper = source
            .upper
            .map(|n| if source.may_fail { n } else { batches(n) });
        self.pending_errors.hint().then(Hint {
            lower: batches(source.lower),
            upper,
            ..source
        })
    }
}
