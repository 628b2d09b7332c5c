//! [`SamplerWrapper`] and the index samplers: [`Sampler`],
//! [`SequentialSampler`], [`RandomSampler`], [`ShardedSampler`].

use std::fmt;
use std::sync::Arc;

use crate::rank::Rank;
use crate::sources::permute::Permutation;
use crate::transforms::debug_fields;
use crate::{Cx, Description, Error, Init, Node, NodeId, NodeName, Param, Result, State, Validate};
use nodes_core::Hint;

/// An epoch-aware order of dataset indices with random access: position
/// `pos` of the current epoch maps to a dataset index.
///
/// Random access is what makes [`SamplerWrapper`] restore in O(1) at any
/// position: there is no iterator to replay. `set_epoch` is torch's
/// `Sampler.set_epoch`: the wrapper calls it at every reset with the epoch
/// it is about to run (or has restored).
///
/// ```
/// use nodes_std::prelude::*;
///
/// /// Every index twice in a row: 0, 0, 1, 1, ...
/// #[derive(Debug)]
/// struct Twice { n: usize }
///
/// impl Sampler for Twice {
///     fn len(&self) -> usize { 2 * self.n }
///     fn index(&self, pos: usize) -> usize { pos / 2 }
/// }
///
/// let order: Vec<usize> = SamplerWrapper::new(Twice { n: 2 }).start()?.collect::<Result<_>>()?;
/// assert_eq!(order, [0, 0, 1, 1]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
///
/// # Description
///
/// [`describe`](Sampler::describe) says what decides the order (a length, a
/// seed...). The wrapper shows it as its `sampler` parameter, so it is part of
/// the pipeline's graph and of the shape a [`Loader`](crate::Loader) checks
/// when it restores a state. The default is the type's name alone; override
/// it to add your parameters:
///
/// ```
/// use nodes_std::prelude::*;
///
/// struct Twice { n: usize }
///
/// impl Sampler for Twice {
///     fn len(&self) -> usize { 2 * self.n }
///     fn index(&self, pos: usize) -> usize { pos / 2 }
///     fn describe(&self) -> Description {
///         Description::new("Twice").param("n", self.n)
///     }
/// }
///
/// let wrapper = SamplerWrapper::new(Twice { n: 3 });
/// assert_eq!(wrapper.describe().to_string(), "SamplerWrapper(sampler=Twice(n=3))");
/// ```
pub trait Sampler: Send {
    /// How many indices an epoch yields.
    fn len(&self) -> usize;

    /// Whether an epoch yields nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Prepares the order of `epoch`. Called at every reset of the wrapper,
    /// before any `index`; the default ignores it (the order is the same
    /// every epoch).
    fn set_epoch(&mut self, epoch: u64) {
        let _ = epoch;
    }

    /// The index at position `pos` of the current epoch, for `pos < len()`.
    /// Must be a pure function of the epoch and `pos`.
    fn index(&self, pos: usize) -> usize;

    /// What decides the order: a name and the parameters (not the epoch,
    /// which is the wrapper's state). The default is the type's name, without
    /// its path and generic arguments.
    fn describe(&self) -> Description {
        Description::new(short_type_name(std::any::type_name::<Self>()))
    }
}

/// `a::b::Name<c::D>` -> `Name`.
fn short_type_name(full: &str) -> &str {
    let path = full.split('<').next().unwrap_or(full);
    path.rsplit("::").next().unwrap_or(path)
}

impl<S: Sampler + ?Sized> Sampler for Box<S> {
    fn len(&self) -> usize {
        (**self).len()
    }

    fn set_epoch(&mut self, epoch: u64) {
        (**self).set_epoch(epoch);
    }

    fn index(&self, pos: usize) -> usize {
        (**self).index(pos)
    }

    fn describe(&self) -> Description {
        (**self).describe()
    }
}

/// A source node of dataset indices from a [`Sampler`], counting epochs:
/// torchdata's `SamplerWrapper`.
///
/// Each epoch yields `sampler.index(0)`, `sampler.index(1)`, ... up to
/// `sampler.len()` indices. The epoch starts at 0 (or
/// [`with_initial_epoch`](SamplerWrapper::with_initial_epoch)) and advances
/// on `reset(None)` only if the previous pass was started (`next` was
/// called at least once since the last reset, even if it returned the end),
/// so resets without iteration do not skip epochs, and restoring a state
/// taken at the end of an epoch continues with the next epoch.
///
/// # State
/// `epoch`, `num_yielded` and `started` (whether the pass was started, which
/// decides whether the next `reset(None)` advances the epoch; torchdata
/// clears it on restore instead, which loses an epoch when nothing pulls
/// from the wrapper between the restore and the next reset). Restore is
/// O(1): it sets the epoch on the sampler and the position.
///
/// # Errors
/// Restoring a `num_yielded` larger than the sampler's length is a bad state.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let mut loader = Loader::new(SamplerWrapper::new(RandomSampler::new(5, 42)));
/// let epoch0: Vec<usize> = loader.epoch().collect::<Result<_>>()?;
/// let epoch1: Vec<usize> = loader.epoch().collect::<Result<_>>()?;
/// assert_ne!(epoch0, epoch1);
/// assert_eq!(loader.root().epoch(), 1);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(init, validate, size_hint)]
#[must_use = "nodes do nothing until started"]
pub struct SamplerWrapper<S> {
    /// Shown in `describe()` as `sampler=<its description>`.
    #[node(param)]
    sampler: Described<S>,
    // Declared before `started`: its default reads the value `started` had
    // before the reset.
    #[node(state, default = self.next_epoch())]
    epoch: u64,
    #[node(state)]
    num_yielded: u64,
    /// Whether `next` ran since the last `reset(None)`. Part of the state so
    /// that a restored wrapper advances its epoch exactly when the original
    /// would have, even if no `next` reaches it before the next reset (under
    /// a `Header` that has hit its limit, for example).
    #[node(state)]
    started: bool,
    /// Chooses the next pass's epoch from the last one (`None`: `epoch + 1`).
    #[node(config)]
    epoch_updater: Option<EpochUpdater>,
}

/// A user function choosing the next epoch number.
type EpochUpdater = Arc<dyn Fn(u64) -> u64 + Send + Sync>;

/// A sampler shown as a parameter: the label of its [`Sampler::describe`].
pub(crate) struct Described<S>(pub(crate) S);

impl<S: Sampler> Param for Described<S> {
    fn render(&self, out: &mut String) {
        self.0.describe().render(out);
    }
}

impl<S: fmt::Debug> fmt::Debug for SamplerWrapper<S> {
    debug_fields!("SamplerWrapper", finish; sampler = (sampler.0), epoch, num_yielded);
}

impl<S: Sampler> SamplerWrapper<S> {
    /// Wraps `sampler`, starting at epoch 0.
    pub fn new(sampler: S) -> Self {
        SamplerWrapper::with_initial_epoch(sampler, 0)
    }

    /// Wraps `sampler`, starting at `epoch`.
    pub fn with_initial_epoch(sampler: S, epoch: u64) -> Self {
        SamplerWrapper {
            sampler: Described(sampler),
            epoch,
            num_yielded: 0,
            started: false,
            epoch_updater: None,
        }
    }

    /// Sets the function that chooses the epoch of each new pass from the
    /// previous one (torchdata's `epoch_updater`); the default adds 1. It
    /// is called when a pass that was started is followed by a new one, and
    /// not on a restore (the state holds the epoch).
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// // Even epochs only.
    /// let wrapper = SamplerWrapper::new(RandomSampler::new(4, 1)).epoch_updater(|e| e + 2);
    /// let mut loader = Loader::new(wrapper);
    /// for want in [0, 2, 4] {
    ///     loader.epoch().for_each(drop);
    ///     assert_eq!(loader.root().epoch(), want);
    /// }
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    pub fn epoch_updater(mut self, f: impl Fn(u64) -> u64 + Send + Sync + 'static) -> Self {
        self.epoch_updater = Some(Arc::new(f));
        self
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The sampler.
    pub fn sampler(&self) -> &S {
        &self.sampler.0
    }
}

impl<S> SamplerWrapper<S> {
    /// The epoch a `reset(None)` moves to (used by the derived reset).
    fn next_epoch(&self) -> u64 {
        match (&self.epoch_updater, self.started) {
            (Some(update), true) => update(self.epoch),
            _ => crate::seed::epoch_after(self.epoch, self.started),
        }
    }
}

impl<S: Sampler> Node for SamplerWrapper<S> {
    type Item = usize;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<usize>> {
        cx.observe(NodeId::of(self), Self::NAME, |_cx| {
            self.started = true;
            // `validate` checked that the position fits in the sampler's length.
            let pos = self.num_yielded as usize;
            if pos >= self.sampler.0.len() {
                return Ok(None);
            }
            self.num_yielded += 1;
            Ok(Some(self.sampler.0.index(pos)))
        })
    }
}

/// Rejects a position past the sampler's end, before anything is applied.
impl<S: Sampler> Validate for SamplerWrapper<S> {
    fn validate(&self, state: &State) -> Result<()> {
        let num_yielded: u64 = state.get("num_yielded")?;
        let len = self.sampler.0.len();
        if usize::try_from(num_yielded).map_or(true, |n| n > len) {
            let why = format!(
                "SamplerWrapper cannot resume after {num_yielded} indices: the sampler has {len}"
            );
            return Err(Error::bad_state(state.path_of("num_yielded"), why));
        }
        Ok(())
    }
}

/// Sets the sampler's epoch.
/// Exact: the sampler's positions not yet returned this epoch (for every
/// sampler, sharded or not: its `len` is this rank's share). It never fails.
impl<S: Sampler> crate::SizeHint for SamplerWrapper<S> {
    fn size_hint(&self) -> Hint {
        let len = self.sampler.0.len() as u64;
        Hint::exact(len.saturating_sub(self.num_yielded))
    }
}

impl<S: Sampler> Init for SamplerWrapper<S> {
    fn init(&mut self, _restored: bool) -> Result<()> {
        self.sampler.0.set_epoch(self.epoch);
        Ok(())
    }
}

/// The indices `0, 1, ..., len - 1`, in order, every epoch.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let order: Vec<usize> = SamplerWrapper::new(SequentialSampler::new(3)).start()?.collect::<Result<_>>()?;
/// assert_eq!(order, [0, 1, 2]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequentialSampler {
    len: usize,
}

impl SequentialSampler {
    /// The indices of a dataset of `len` items, in order.
    pub fn new(len: usize) -> Self {
        SequentialSampler { len }
    }
}

impl Sampler for SequentialSampler {
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn index(&self, pos: usize) -> usize {
        pos
    }

    fn describe(&self) -> Description {
        Description::new("SequentialSampler").param("len", self.len)
    }
}

/// A seeded random permutation of `0..len`, a different one every epoch.
///
/// The order of an epoch depends only on `(seed, epoch)`: the same on every
/// run and machine. The permutation is never materialised: each index is
/// computed on demand (a keyed Feistel network over the next even power of
/// two, cycle-walked into `0..len`), so it takes O(1) memory whatever the
/// dataset size and position `pos` is reached in O(1) — which is what lets
/// [`SamplerWrapper`] restore anywhere in O(1). It is a well-mixed
/// pseudo-random permutation, not a cryptographic or exactly uniform one.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let mut sampler = RandomSampler::new(10, 7);
/// let epoch0: Vec<usize> = (0..10).map(|i| sampler.index(i)).collect();
/// let mut sorted = epoch0.clone();
/// sorted.sort();
/// assert_eq!(sorted, (0..10).collect::<Vec<_>>());
///
/// sampler.set_epoch(1);
/// let epoch1: Vec<usize> = (0..10).map(|i| sampler.index(i)).collect();
/// assert_ne!(epoch0, epoch1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RandomSampler {
    seed: u64,
    epoch: u64,
    perm: Permutation,
}

impl RandomSampler {
    /// A shuffled order of `0..len` for `seed`, starting at epoch 0. (`len`
    /// may be 0: every epoch is then empty.)
    pub fn new(len: usize, seed: u64) -> Self {
        RandomSampler {
            seed,
            epoch: 0,
            perm: Permutation::new(len as u64, seed, 0),
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The epoch whose order `index` gives.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

impl Sampler for RandomSampler {
    fn len(&self) -> usize {
        self.perm.len() as usize
    }

    fn set_epoch(&mut self, epoch: u64) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.perm = Permutation::new(self.perm.len(), self.seed, epoch);
        }
    }

    #[inline]
    fn index(&self, pos: usize) -> usize {
        self.perm.get(pos as u64) as usize
    }

    fn describe(&self) -> Description {
        Description::new("RandomSampler")
            .param("len", self.perm.len())
            .param("seed", self.seed)
    }
}

/// What [`ShardedSampler`] does when the length does not divide evenly
/// between the ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Remainder {
    /// Every rank gets `ceil(len / world_size)` indices; the last ones wrap
    /// around to the start of the order (some indices are seen twice).
    /// torch's `DistributedSampler(drop_last=False)`.
    Pad,
    /// Every rank gets `floor(len / world_size)` indices; the tail of the
    /// order is dropped. torch's `DistributedSampler(drop_last=True)`.
    Drop,
}

/// As a node parameter: the variant's name.
impl Param for Remainder {
    fn render(&self, out: &mut String) {
        // The derived `Debug` is exactly that.
        out.push_str(&format!("{self:?}"));
    }
}

/// One rank's share of another sampler's order: positions `rank`,
/// `rank + world_size`, `rank + 2 * world_size`, ... of it, as torch's
/// `DistributedSampler` splits.
///
/// All ranks see the same inner order (same seed, same epoch), so their
/// shards are disjoint and, with [`Remainder::Pad`], together cover every
/// index. Compose it with a [`RandomSampler`] to shuffle globally, then
/// shard.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let shard = |rank| -> Result<Vec<usize>> {
///     let sampler = ShardedSampler::new(RandomSampler::new(10, 3), rank, 3, Remainder::Pad)?;
///     SamplerWrapper::new(sampler).start()?.collect()
/// };
/// let (a, b, c) = (shard(0)?, shard(1)?, shard(2)?);
/// assert_eq!((a.len(), b.len(), c.len()), (4, 4, 4)); // 10 padded to 12
/// let mut all: Vec<usize> = [a, b, c].concat();
/// all.sort();
/// all.dedup();
/// assert_eq!(all, (0..10).collect::<Vec<_>>());
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardedSampler<S> {
    inner: S,
    rank: u64,
    world_size: u64,
    remainder: Remainder,
}

impl<S: Sampler> ShardedSampler<S> {
    /// Rank `rank` of `world_size` ranks over `inner`'s order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `world_size` is 0, `rank >= world_size`,
    /// or `inner` is empty with [`Remainder::Pad`] (there is nothing to pad
    /// with).
    pub fn new(inner: S, rank: u64, world_size: u64, remainder: Remainder) -> Result<Self> {
        const NODE: &str = "ShardedSampler";
        let Rank { rank, world_size } = Rank::new(NODE, rank, world_size)?;
        let why = "cannot pad an empty sampler to an even split; use Remainder::Drop";
        crate::transforms::require(remainder == Remainder::Drop || !inner.is_empty(), NODE, why)?;
        Ok(ShardedSampler {
            inner,
            rank,
            world_size,
            remainder,
        })
    }

    /// This shard's rank.
    pub fn rank(&self) -> u64 {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> u64 {
        self.world_size
    }

    /// The sampler being sharded.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Sampler> Sampler for ShardedSampler<S> {
    fn len(&self) -> usize {
        let n = self.inner.len() as u64;
        // The quotient is at most `n`, a usize.
        (match self.remainder {
            Remainder::Pad => n.div_ceil(self.world_size),
            Remainder::Drop => n / self.world_size,
        }) as usize
    }

    fn set_epoch(&mut self, epoch: u64) {
        self.inner.set_epoch(epoch);
    }

    #[inline]
    fn index(&self, pos: usize) -> usize {
        // Position in the (padded or truncated) global order; padding wraps
        // around to its start (several times if world_size > len).
        let n = self.inner.len() as u64;
        let global = match (pos as u64)
            .checked_mul(self.world_size)
            .and_then(|g| g.checked_add(self.rank))
        {
            Some(g) => g % n,
            // Only for lengths near u64::MAX.
            None => {
                ((pos as u128 * u128::from(self.world_size) + u128::from(self.rank))
                    % u128::from(n)) as u64
            }
        };
        // Below `n`, a usize.
        self.inner.index(global as usize)
    }

    fn describe(&self) -> Description {
        Description::new("ShardedSampler")
            .param("rank", self.rank)
            .param("world_size", self.world_size)
            .param("remainder", self.remainder)
            .param("inner", self.inner.describe())
    }
}
