//! [`Batcher`]: group consecutive items into `Vec`s.

use std::fmt;

use crate::{Cx, Error, Node, NodeId, Result};

/// This struct is created by [`NodeExt::batch`](crate::NodeExt::batch) (the
/// last batch may be shorter, like [`slice::chunks`]) and
/// [`NodeExt::batch_exact`](crate::NodeExt::batch_exact) (a short last batch
/// is dropped, like [`slice::chunks_exact`]; torchdata's default
/// `drop_last=True`). See their documentation for more.
///
/// Groups consecutive items of its source into `Vec`s of `batch_size`.
///
/// A full batch is returned as soon as it is full; the source is not polled
/// further.
///
/// # State
/// `source`: the source's state, nothing else (a batch is never held across
/// calls). Restore is the source's restore.
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
#[derive(Node)]
#[must_use = "nodes do nothing until started"]
pub struct Batcher<S> {
    #[node(child)]
    source: S,
    #[node(param)]
    batch_size: usize,
    #[node(param)]
    drop_last: bool,
}

impl<S: fmt::Debug> fmt::Debug for Batcher<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batcher")
            .field("source", &self.source)
            .field("batch_size", &self.batch_size)
            .field("drop_last", &self.drop_last)
            .finish()
    }
}

impl<S> Batcher<S> {
    pub(crate) fn new(source: S, batch_size: usize, drop_last: bool) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::invalid_argument(
                "Batcher",
                "batch_size must be at least 1",
            ));
        }
        Ok(Batcher {
            source,
            batch_size,
            drop_last,
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

impl<S: Node> Node for Batcher<S> {
    type Item = Vec<S::Item>;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Vec<S::Item>>> {
        cx.observe(NodeId::of(self), "Batcher", |cx| {
            let mut batch = Vec::with_capacity(self.batch_size);
            while batch.len() < self.batch_size {
                match self.source.next(cx)? {
                    Some(item) => batch.push(item),
                    None if batch.is_empty() || self.drop_last => return Ok(None),
                    None => break,
                }
            }
            Ok(Some(batch))
        })
    }
}
