//! [`Dataset`] (random access by index) and [`MapStyleWrapper`], a source that
//! reads a dataset in the order given by a node of indices.

use std::fmt;
use std::sync::Arc;

use crate::sources::sampler_wrapper::{RandomSampler, SamplerWrapper, SequentialSampler};
use crate::{BoxError, Cx, Error, Node, NodeId, NodeName, Result};

/// A collection with random access by index: torch's map-style dataset.
///
/// `get_item` may fail (a missing file, a corrupt record): return any error and
/// [`MapStyleWrapper`] reports it as [`Error::User`] with the index.
///
/// Implemented for `Vec<T>`, slices and `Arc<D>` of a dataset (items are
/// cloned out).
///
/// ```
/// use nodes_std::BoxError;
/// use nodes_std::prelude::*;
///
/// /// The squares 0, 1, 4, 9, ... up to `n` items, computed on demand.
/// struct Squares { n: usize }
///
/// impl Dataset for Squares {
///     type Item = u64;
///     fn len(&self) -> usize { self.n }
///     fn get_item(&self, index: usize) -> std::result::Result<u64, BoxError> {
///         if index >= self.n { return Err(format!("no square #{index}").into()) }
///         Ok((index as u64).pow(2))
///     }
/// }
///
/// let items: Vec<u64> = MapStyleWrapper::sequential(Squares { n: 4 }).start()?.collect::<Result<_>>()?;
/// assert_eq!(items, [0, 1, 4, 9]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
pub trait Dataset: Send {
    /// What `get_item` returns.
    type Item;

    /// The number of items; valid indices are `0..len()`.
    fn len(&self) -> usize;

    /// Whether the dataset has no items.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The item at `index`.
    fn get_item(&self, index: usize) -> std::result::Result<Self::Item, BoxError>;
}

fn out_of_range(index: usize, len: usize) -> BoxError {
    format!("index {index} is out of range for a dataset of {len} items").into()
}

impl<T: Clone + Send> Dataset for Vec<T> {
    type Item = T;

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn get_item(&self, index: usize) -> std::result::Result<T, BoxError> {
        self.as_slice()
            .get(index)
            .cloned()
            .ok_or_else(|| out_of_range(index, self.as_slice().len()))
    }
}

impl<T: Clone + Sync> Dataset for &[T] {
    type Item = T;

    fn len(&self) -> usize {
        <[T]>::len(self)
    }

    fn get_item(&self, index: usize) -> std::result::Result<T, BoxError> {
        <[T]>::get(self, index)
            .cloned()
            .ok_or_else(|| out_of_range(index, <[T]>::len(self)))
    }
}

impl<D: Dataset + Sync> Dataset for Arc<D> {
    type Item = D::Item;

    fn len(&self) -> usize {
        (**self).len()
    }

    fn get_item(&self, index: usize) -> std::result::Result<D::Item, BoxError> {
        (**self).get_item(index)
    }
}

/// A source that yields `dataset.get_item(i)` for each index `i` its sampler node
/// yields: torchdata's `MapStyleWrapper`.
///
/// The sampler is any node of `usize` indices: usually a
/// [`SamplerWrapper`] over a [`SequentialSampler`], [`RandomSampler`] or
/// [`ShardedSampler`](crate::ShardedSampler), but an
/// [`IterableWrapper`](crate::IterableWrapper) over a list of indices works too.
///
/// # State
/// `sampler`: the sampler's state. Restore costs what the sampler's does
/// (O(1) for `SamplerWrapper`); no item is fetched while restoring.
///
/// # Errors
/// An error from [`Dataset::get_item`] is an [`Error::User`] naming
/// `MapStyleWrapper` with the dataset index; the next call goes on with the
/// next index.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let words = vec!["a", "b", "c", "d"];
/// let sampler = SamplerWrapper::new(RandomSampler::new(words.len(), 7));
/// let mut loader = Loader::new(MapStyleWrapper::new(words, sampler));
/// let mut epoch0: Vec<&str> = loader.epoch().collect::<Result<_>>()?;
/// epoch0.sort();
/// assert_eq!(epoch0, ["a", "b", "c", "d"]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[must_use = "nodes do nothing until started"]
pub struct MapStyleWrapper<D, S> {
    #[node(config)]
    dataset: D,
    #[node(child)]
    sampler: S,
}

impl<D, S: fmt::Debug> fmt::Debug for MapStyleWrapper<D, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapStyleWrapper")
            .field("dataset", &std::any::type_name::<D>())
            .field("sampler", &self.sampler)
            .finish()
    }
}

impl<D: Dataset, S: Node<Item = usize>> MapStyleWrapper<D, S> {
    /// Reads `dataset` at the indices `sampler` yields.
    pub fn new(dataset: D, sampler: S) -> Self {
        MapStyleWrapper { dataset, sampler }
    }
}

impl<D: Dataset> MapStyleWrapper<D, SamplerWrapper<SequentialSampler>> {
    /// Reads the whole dataset in index order, every epoch.
    pub fn sequential(dataset: D) -> Self {
        let sampler = SamplerWrapper::new(SequentialSampler::new(dataset.len()));
        MapStyleWrapper { dataset, sampler }
    }
}

impl<D: Dataset> MapStyleWrapper<D, SamplerWrapper<RandomSampler>> {
    /// Reads the whole dataset in a seeded random order, a new one each epoch.
    pub fn shuffled(dataset: D, seed: u64) -> Self {
        let sampler = SamplerWrapper::new(RandomSampler::new(dataset.len(), seed));
        MapStyleWrapper { dataset, sampler }
    }
}

impl<D: Dataset, S> MapStyleWrapper<D, S> {
    /// The dataset.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }

    /// The sampler node.
    pub fn sampler(&self) -> &S {
        &self.sampler
    }
}

impl<D: Dataset, S: Node<Item = usize>> Node for MapStyleWrapper<D, S> {
    type Item = D::Item;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<D::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            let Some(index) = self.sampler.next(cx)? else {
                return Ok(None);
            };
            match self.dataset.get_item(index) {
                Ok(item) => Ok(Some(item)),
                Err(e) => Err(Error::user("MapStyleWrapper", Some(index as u64), e)),
            }
        })
    }
}
