//! [`Dataset`] (random access by index) and [`MapStyleWrapper`], a source that
//! reads a dataset in the order given by a node of indices.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasher, Hash};
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

    /// The item at `index`. `?` converts any error into [`BoxError`] (see
    /// [errors from user functions](crate::NodeExt#errors-from-user-functions)).
    fn get_item(&self, index: usize) -> std::result::Result<Self::Item, BoxError>;
}

/// Random access by key: what [`MapStyleWrapper`] reads, at the keys its
/// sampler node yields. Every [`Dataset`] is a `Lookup<usize>`; a `HashMap`
/// or `BTreeMap` is a lookup by its own key type (torchdata's datasets keyed
/// by something other than an index).
///
/// ```
/// use std::collections::BTreeMap;
/// use nodes_std::prelude::*;
///
/// let ages = BTreeMap::from([("ann", 31), ("bob", 42), ("cy", 27)]);
/// let keys = IterableWrapper::new(vec!["cy", "ann", "dan"]);
/// let out: Vec<_> = MapStyleWrapper::new(ages, keys).start()?.collect();
/// assert_eq!(out[0].as_ref().ok(), Some(&27));
/// assert_eq!(out[1].as_ref().ok(), Some(&31));
/// let missing = out[2].as_ref().unwrap_err().to_string();
/// assert!(missing.contains("\"dan\""), "{missing}");
/// # Ok::<(), nodes_std::Error>(())
/// ```
pub trait Lookup<K>: Send {
    /// What a lookup returns.
    type Item;

    /// The item under `key`; an error is reported as [`Error::User`]. `?`
    /// converts any error into [`BoxError`] (see [errors from user
    /// functions](crate::NodeExt#errors-from-user-functions)).
    fn lookup(&self, key: &K) -> std::result::Result<Self::Item, BoxError>;

    /// The key as an item index for error messages, where it is one.
    fn index_of(_key: &K) -> Option<u64> {
        None
    }
}

impl<D: Dataset> Lookup<usize> for D {
    type Item = D::Item;

    #[inline]
    fn lookup(&self, key: &usize) -> std::result::Result<D::Item, BoxError> {
        self.get_item(*key)
    }

    fn index_of(key: &usize) -> Option<u64> {
        Some(*key as u64)
    }
}

impl<K, V, H> Lookup<K> for HashMap<K, V, H>
where
    K: Eq + Hash + fmt::Debug + Send,
    V: Clone + Send,
    H: BuildHasher + Send,
{
    type Item = V;

    fn lookup(&self, key: &K) -> std::result::Result<V, BoxError> {
        self.get(key).cloned().ok_or_else(|| missing_key(key))
    }
}

impl<K, V> Lookup<K> for BTreeMap<K, V>
where
    K: Ord + fmt::Debug + Send,
    V: Clone + Send,
{
    type Item = V;

    fn lookup(&self, key: &K) -> std::result::Result<V, BoxError> {
        self.get(key).cloned().ok_or_else(|| missing_key(key))
    }
}

fn missing_key(key: &dyn fmt::Debug) -> BoxError {
    format!("no item under key {key:?}").into()
}

/// The item at `index` of `items`, cloned, or the out-of-range error.
fn cloned_at<T: Clone>(items: &[T], index: usize) -> std::result::Result<T, BoxError> {
    let len = items.len();
    let missing = || format!("index {index} is out of range for a dataset of {len} items").into();
    items.get(index).cloned().ok_or_else(missing)
}

impl<T: Clone + Send> Dataset for Vec<T> {
    type Item = T;

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn get_item(&self, index: usize) -> std::result::Result<T, BoxError> {
        cloned_at(self, index)
    }
}

impl<T: Clone + Sync> Dataset for &[T] {
    type Item = T;

    fn len(&self) -> usize {
        <[T]>::len(self)
    }

    fn get_item(&self, index: usize) -> std::result::Result<T, BoxError> {
        cloned_at(self, index)
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
/// The dataset is a [`Dataset`] read by index, or any [`Lookup`] (a
/// `HashMap`, a `BTreeMap`) read by the keys the sampler node yields.
///
/// For a dataset, the sampler is any node of `usize` indices: usually a
/// [`SamplerWrapper`] over a [`SequentialSampler`], [`RandomSampler`] or
/// [`ShardedSampler`](crate::ShardedSampler), but an
/// [`IterableWrapper`](crate::IterableWrapper) over a list of indices works too.
///
/// # State
/// `sampler`: the sampler's state. Restore costs what the sampler's does
/// (O(1) for `SamplerWrapper`); no item is fetched while restoring.
///
/// # Errors
/// An error from [`Dataset::get_item`] (or [`Lookup::lookup`]) is an
/// [`Error::User`] naming `MapStyleWrapper` with the dataset index (for
/// other keys, the key is in the message); the next call goes on with the
/// next key.
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
// One item (or one lookup error) per key: the sampler's hint is this
// node's.
#[derive(Node)]
#[node(size_hint = "child", resume = crate::Resume::OneToOne)]
#[must_use = "nodes do nothing until started"]
pub struct MapStyleWrapper<D, S> {
    #[node(config)]
    dataset: D,
    #[node(child)]
    sampler: S,
}

impl<D, S: fmt::Debug> fmt::Debug for MapStyleWrapper<D, S> {
    crate::transforms::debug_fields!("MapStyleWrapper", finish;
        dataset = {std::any::type_name::<D>()}, sampler);
}

impl<D: Lookup<S::Item>, S: Node> MapStyleWrapper<D, S> {
    /// Reads `dataset` at the indices (or keys) `sampler` yields.
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

impl<D, S> MapStyleWrapper<D, S> {
    /// The dataset.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }

    /// The sampler node.
    pub fn sampler(&self) -> &S {
        &self.sampler
    }
}

impl<D: Lookup<S::Item>, S: Node> Node for MapStyleWrapper<D, S> {
    type Item = D::Item;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<D::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            let Some(key) = self.sampler.next(cx)? else {
                return Ok(None);
            };
            match self.dataset.lookup(&key) {
                Ok(item) => Ok(Some(item)),
                Err(e) => Err(Error::user("MapStyleWrapper", D::index_of(&key), e)),
            }
        })
    }
}
