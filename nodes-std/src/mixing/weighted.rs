//! [`MultiNodeWeightedSampler`]: a seeded weighted mix of several sources.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;

use nodes_core::__private::{Fields, SharedSnapshot};
use nodes_core::Hint;
use nodes_core::{Cx, Description, Error, Node, NodeId, ResetFlag, Result, State, Stateful};

use super::{Checked, DATASET_KEYS, EMPTY, EXHAUSTED, NODE_STATES};
use super::{OutputMode, Plain, Sources, StopCriteria, WithSource};
use crate::rank::Rank;
use crate::seed::{PassRng, epoch_after};
use crate::transforms::{debug_fields, require};

const NAME: &str = "MultiNodeWeightedSampler";

const EPOCH: &str = "epoch";
const NUM_YIELDED: &str = "num_yielded";
const STARTED: &str = "started";
const RNG: &str = "rng";
const KEYS: [&str; 8] = [
    EPOCH,
    NUM_YIELDED,
    STARTED,
    RNG,
    DATASET_KEYS,
    EXHAUSTED,
    EMPTY,
    NODE_STATES,
];

const RNG_KEYS: [&str; 5] = ["seed", "rank", "world_size", "stream", "word_pos"];
/// The key `elastic::reshard` adds to the generator of a state that replays
/// another rank's draws (the source state of a `flat_map`'s pending item):
/// the saved rank and world size then name the stream, whatever this
/// sampler's own.
pub(crate) const REPLAY: &str = "replay";
const REPLAY_KEYS: [&str; 6] = ["seed", "rank", "world_size", "stream", "word_pos", REPLAY];

/// The generator as saved under [`RNG`], in the order of [`RNG_KEYS`]: a
/// deferred entry, so that taking a state copies five numbers and the JSON
/// object is built only when the state is serialised or read.
#[derive(serde::Serialize)]
struct SavedRng {
    seed: u64,
    rank: u64,
    world_size: u64,
    stream: u64,
    word_pos: u64,
}

/// Mixes several named sources, choosing the source of each item at random in
/// proportion to its weight, from a seeded generator (torchdata's
/// `MultiNodeWeightedSampler`).
///
/// It has no single upstream, so it is built with [`new`](Self::new) and
/// configured with [`seed`](Self::seed), [`rank`](Self::rank) and
/// [`stop_criteria`](Self::stop_criteria); [`tagged`](Self::tagged) makes it
/// yield [`Tagged`](crate::Tagged) items naming their source.
///
/// # Semantics
///
/// - Sources are an ordered list of `(name, node)` pairs with distinct names;
///   weights are `(name, weight)` pairs for exactly the same names, in any
///   order (a `HashMap` is fine). Weights are finite, non-negative `f64`s, at
///   least one positive; they need not sum to 1. A source of weight 0 is never
///   drawn (it is still reset, and its state kept) and takes no part in the
///   stop criterion.
/// - For each item one source is drawn: a uniform `f64` in `[0, 1)` made from
///   the top 53 bits of the generator's next `u64`, scaled by the total weight
///   of the sources still drawn from, and looked up in their cumulative
///   weights (in source order).
/// - When a source ends, what happens depends on the [`StopCriteria`]:
///   `CycleUntilAllDatasetsExhausted` (the default) restarts it and keeps
///   drawing until every source has ended at least once;
///   `AllDatasetsExhausted` stops drawing from it (every item of every source
///   is yielded exactly once); `FirstDatasetExhausted` ends the pass;
///   `CycleForever` restarts it forever. A source that ends again right after
///   a restart is *empty* and is no longer drawn from in this pass (a pass of
///   `CycleForever` ends only when every source is empty).
/// - **Randomness.** A pass draws from ChaCha8 keyed by the `seed` (expanded
///   with PCG32 as `rand_core` 0.9 did, written in this crate so it cannot
///   change under a dependency upgrade) on stream number
///   `epoch × world_size + rank` (wrapping): every epoch and every rank of a
///   job gets its own independent stream. The epoch starts at 0 and advances
///   on `reset(None)` if the previous pass had started (a `next` was called),
///   as in torchdata.
/// - Same seed, rank, world size, sources and state ⇒ the same sequence, on
///   any machine.
///
/// # State
///
/// ```json
/// {
///   "epoch": 1,
///   "num_yielded": 5,
///   "started": true,
///   "rng": {"seed": 0, "rank": 0, "world_size": 1, "word_pos": 10},
///   "dataset_keys": ["a", "b"],
///   "datasets_exhausted": {"a": false, "b": false},
///   "datasets_empty": {"a": false, "b": false},
///   "dataset_node_states": {"a": {"...": "..."}, "b": {"...": "..."}}
/// }
/// ```
///
/// `word_pos` is the generator's position in its stream (in 32-bit words, two
/// per draw): restoring jumps straight there, in constant time however many
/// items were drawn, and restores each source from its own state. Tagging
/// does not change the state. A state written by `elastic::reshard` for a
/// `flat_map`'s pending item may add `"replay": true` to `rng`: its `rank`
/// and `world_size` then name the old rank whose draws it makes again.
///
/// # Errors
///
/// - [`new`](Self::new) and [`rank`](Self::rank) return
///   [`Error::InvalidArgument`] for: no sources, duplicate source names,
///   weights whose names differ from the sources', negative or non-finite
///   weights, all weights zero, weights whose sum overflows, `world_size` 0,
///   `rank >= world_size`.
/// - `reset(Some(state))` returns [`Error::BadState`] (naming the JSON path)
///   for a state that does not fit: unknown or missing keys, other source
///   names or order, or a state taken with another seed, rank or world size.
///   Nothing is changed until the whole state has been checked.
/// - `next` and `get_state` return [`Error::NotReset`] before the first reset.
/// - An error from a source is one item: it is returned in place of the item
///   the draw asked for (the draw is spent, as for an item), and the pass goes
///   on with the next draw. So with sources whose errors take the place of
///   their items (every stock fallible node), the output is the fault-free
///   output with the failed items replaced by their errors, and a state taken
///   right after an error resumes after it. An error while restarting a
///   source that ended (its `reset` or first item) is returned the same way;
///   the source stays marked as ended. `num_yielded` counts items, not errors.
///
/// # Examples
///
/// ```
/// use nodes_std::{IterableWrapper, MultiNodeWeightedSampler, NodeExt, Result, StopCriteria};
/// let build = || -> Result<_> {
///     Ok(MultiNodeWeightedSampler::new(
///         [("small", IterableWrapper::new(0..3u32)), ("large", IterableWrapper::new(100..110))],
///         [("small", 0.25), ("large", 0.75)],
///     )?
///     .stop_criteria(StopCriteria::AllDatasetsExhausted)
///     .seed(7))
/// };
///
/// // Every item of every source exactly once, in a seeded random interleaving.
/// let mut run = build()?.start()?;
/// let first: Vec<u32> = run.by_ref().take(4).collect::<Result<_>>()?;
/// let state = run.get_state()?;
/// let rest: Vec<u32> = run.collect::<Result<_>>()?;
/// assert_eq!(first.len() + rest.len(), 13);
///
/// // A checkpoint resumes exactly.
/// let resumed: Vec<u32> = build()?.start_from(&state)?.collect::<Result<_>>()?;
/// assert_eq!(resumed, rest);
///
/// // Tagged items name their source.
/// for tagged in build()?.tagged().start()? {
///     let tagged = tagged?;
///     assert_eq!(&*tagged.source, if tagged.item < 100 { "small" } else { "large" });
/// }
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[must_use = "nodes do nothing until started"]
pub struct MultiNodeWeightedSampler<N, O = Plain> {
    sources: Sources<N>,
    weights: Vec<f64>,
    seed: u64,
    ranks: Rank,
    // Per pass.
    epoch: u64,
    num_yielded: u64,
    started: bool,
    rng: PassRng,
    /// Running sums of the weights of the sources still drawn from, in source
    /// order (a source not drawn from adds 0).
    cumulative: Vec<f64>,
    /// The last source still drawn from, if any.
    last_live: Option<usize>,
    /// `sources.is_over()`, kept up to date where its inputs change (on
    /// reset and when a source ends), so that the per-item path reads one
    /// flag.
    over: bool,
    _mode: PhantomData<fn() -> O>,
}

impl<N: Node> MultiNodeWeightedSampler<N, Plain> {
    /// A sampler over `sources` (ordered `(name, node)` pairs) with the given
    /// weights (`(name, weight)` pairs naming exactly the same sources),
    /// `CycleUntilAllDatasetsExhausted`, seed 0, and the rank of the
    /// `RANK`/`WORLD_SIZE` environment variables (rank 0 of 1 when they are
    /// not set).
    ///
    /// To mix different node types, box them with
    /// [`NodeExt::boxed`](crate::NodeExt::boxed).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no sources, duplicate names, weights
    /// whose names differ from the sources', a negative or non-finite weight,
    /// all weights zero, or weights whose sum is not finite; and for
    /// malformed `RANK`/`WORLD_SIZE` environment variables (see
    /// [`rank`](Self::rank)).
    pub fn new<K, W>(
        sources: impl IntoIterator<Item = (K, N)>,
        weights: impl IntoIterator<Item = (W, f64)>,
    ) -> Result<Self>
    where
        K: Into<String>,
        W: AsRef<str>,
    {
        let mut sources = Sources::new(NAME, sources)?;
        let n = sources.len();
        let position: HashMap<&str, usize> = sources.names.iter().map(|s| &**s).zip(0..).collect();
        let mut by_index: Vec<Option<f64>> = vec![None; n];
        for (name, weight) in weights {
            let name = name.as_ref();
            let why = match position.get(name) {
                None => format!(
                    "the names of sources and weights must be the same: weight given for {name:?}, which is not a source (sources: {})",
                    sources.names.join(", ")
                ),
                Some(&i) if by_index[i].is_some() => {
                    format!("weight for {name:?} given more than once")
                }
                Some(_) if !weight.is_finite() || weight < 0.0 => {
                    format!("weight for {name:?} must be finite and non-negative, got {weight}")
                }
                Some(&i) => {
                    by_index[i] = Some(weight);
                    continue;
                }
            };
            return Err(Error::invalid_argument(NAME, why));
        }
        if let Some(i) = by_index.iter().position(Option::is_none) {
            let why = format!(
                "the names of sources and weights must be the same: no weight for source {:?}",
                &*sources.names[i]
            );
            return Err(Error::invalid_argument(NAME, why));
        }
        let weights: Vec<f64> = by_index.into_iter().flatten().collect();
        let active: Vec<bool> = weights.iter().map(|&w| w > 0.0).collect();
        let why = "at least one weight must be positive (all weights are zero)";
        require(active.contains(&true), NAME, why)?;
        let finite = weights.iter().sum::<f64>().is_finite();
        require(finite, NAME, "the weights must have a finite sum")?;
        // Only the sources with a positive weight are drawn from and count
        // for the stop criterion.
        sources.set_active(active);
        // As torchdata does: each rank of a launched job draws its own stream
        // unless told otherwise.
        Ok(MultiNodeWeightedSampler {
            ranks: Rank::from_env()?,
            sources,
            weights,
            seed: 0,
            epoch: 0,
            num_yielded: 0,
            started: false,
            rng: PassRng::new(0, 0),
            cumulative: vec![0.0; n],
            last_live: None,
            over: false,
            _mode: PhantomData,
        })
    }

    tagged_method! {
        MultiNodeWeightedSampler { sources, weights, seed, ranks, epoch, num_yielded, started, rng,
            cumulative, last_live, over }
    }
}

impl<N: Node, O> MultiNodeWeightedSampler<N, O> {
    stop_criteria_methods!();

    /// Sets the seed (default 0). The node must be reset afterwards.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self.sources.reconfigured();
        self
    }

    /// Sets this process's rank among `world_size`: each rank draws from its
    /// own random stream. The node must be reset afterwards.
    ///
    /// The default is the launcher's `RANK` and `WORLD_SIZE` environment
    /// variables when they are set (as `torchrun` sets them, and as
    /// torchdata reads them), else rank 0 of 1. The same seed, rank and world
    /// size give the same sequence on any machine; call this to pin them
    /// (e.g. `.rank(0, 1)` for one stream whatever the environment).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `world_size` is 0 or `rank >= world_size`.
    pub fn rank(mut self, rank: u64, world_size: u64) -> Result<Self> {
        self.ranks = Rank::new(NAME, rank, world_size)?;
        self.sources.reconfigured();
        Ok(self)
    }

    /// The seed.
    pub fn get_seed(&self) -> u64 {
        self.seed
    }

    /// This process's rank.
    pub fn get_rank(&self) -> u64 {
        self.ranks.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> u64 {
        self.ranks.world_size
    }

    /// The current epoch (0 for the first pass).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Items yielded in the current pass.
    pub fn num_yielded(&self) -> u64 {
        self.num_yielded
    }

    /// Recomputes the draw table from the weights and flags. Runs on reset
    /// and when a source stops being drawn from, never per item.
    fn rebuild_table(&mut self) {
        let mut sum = 0.0;
        self.last_live = None;
        for i in 0..self.weights.len() {
            if self.sources.is_live(i) {
                sum += self.weights[i];
                self.last_live = Some(i);
            }
            self.cumulative[i] = sum;
        }
        self.over = self.sources.is_over();
    }

    /// Draws the index of the next source (one `u64` from the generator).
    #[inline]
    fn draw(&mut self) -> Option<usize> {
        let last = self.last_live?;
        // Sources after the last live one add nothing to the running sums.
        let cumulative = &self.cumulative[..=last];
        let total = cumulative[last];
        // The top 53 bits as a uniform f64 in [0, 1), scaled.
        let x = self.rng.unit() * total;
        // The first source whose running sum exceeds `x`, i.e. the number of
        // sums at or below it (they are sorted). Counted without branches:
        // the source drawn is random, so a branch on it would mispredict.
        let i = if cumulative.len() <= 8 {
            cumulative.iter().map(|&c| usize::from(c <= x)).sum()
        } else {
            cumulative.partition_point(|&c| c <= x)
        };
        // `x` can round up to `total`: that is the last live source.
        Some(i.min(last))
    }

    /// After source `i` (just drawn) signalled its end: what
    /// [`Sources::source_ended`] says. `Ok(None)` means "draw again" (the
    /// caller then checks the stop criterion); an error is the draw's item.
    /// Off the per-item path.
    #[cold]
    #[inline(never)]
    fn source_ended(&mut self, i: usize, cx: &mut Cx) -> Result<Option<N::Item>> {
        let first = self.sources.source_ended(i, cx);
        // Only a source no longer drawn from changes the draw table.
        if self.sources.is_live(i) {
            self.over = self.sources.is_over();
        } else {
            self.rebuild_table();
        }
        first
    }

    /// The next item with the index of its source.
    #[inline]
    fn next_indexed(&mut self, cx: &mut Cx) -> Result<Option<(usize, N::Item)>> {
        self.sources.flag.check(NAME)?;
        self.started = true;
        while !self.over {
            let Some(i) = self.draw() else { break };
            // An error is this draw's item: the draw stays spent.
            let item = match self.sources.pull(i, cx)? {
                Some(item) => item,
                None => match self.source_ended(i, cx)? {
                    Some(item) => item,
                    None => continue,
                },
            };
            // Saturating: a restored state may hold any count.
            self.num_yielded = self.num_yielded.saturating_add(1);
            return Ok(Some((i, item)));
        }
        Ok(None)
    }

    /// Only an upper bound, and only when no source restarts
    /// (`AllDatasetsExhausted`, `FirstDatasetExhausted`): every item comes
    /// from a source that has not ended in this pass, so at most what they
    /// have left. No lower bound can be promised: which source a draw picks
    /// is random, a source of weight 0 is never drawn from, and the pass may
    /// end at a source's end (or, with a cycling criterion, go on through
    /// passes of the sources whose lengths are not known yet).
    fn hint_left(&self) -> Hint {
        if self.sources.stop.restarts() {
            self.sources.unbounded_hint(0)
        } else {
            self.sources.hint_sum(&self.sources.exhausted).at_most()
        }
    }

    /// Saves the sampler's own part of a state.
    fn save_own(&self, out: &mut Fields<'_>) -> Result<()> {
        out.field(EPOCH, &self.epoch)?;
        out.field(NUM_YIELDED, &self.num_yielded)?;
        out.field(STARTED, &self.started)?;
        let rng = SavedRng {
            seed: self.seed,
            rank: self.ranks.rank,
            world_size: self.ranks.world_size,
            stream: self.rng.stream(),
            word_pos: self.rng.word_pos(),
        };
        out.shared(RNG, &SharedSnapshot::new(rng));
        Ok(())
    }

    /// The own part of a new pass (the next epoch if the last one had
    /// started).
    fn fresh(&self) -> Own {
        Own {
            epoch: epoch_after(self.epoch, self.started),
            num_yielded: 0,
            started: false,
            word_pos: 0,
            ranks: self.ranks,
        }
    }

    /// Applies the sampler's own part of a checked state.
    fn apply(&mut self, own: Own) {
        self.epoch = own.epoch;
        self.num_yielded = own.num_yielded;
        self.started = own.started;
        self.rng = PassRng::for_pass(self.seed, own.epoch, own.ranks);
        self.rng.seek(own.word_pos);
        self.rebuild_table();
    }

    /// Checks the sampler's own part of `state` and decodes it, without
    /// applying anything.
    fn check(&self, state: &State) -> Result<Checked<Own>> {
        super::expect_keys(state, NAME, &KEYS)?;
        let epoch: u64 = state.get(EPOCH)?;
        let num_yielded: u64 = state.get(NUM_YIELDED)?;
        let started: bool = state.get(STARTED)?;
        let rng = state.child(RNG)?;
        let replay = rng.contains(REPLAY) && rng.get::<bool>(REPLAY)?;
        rng.expect_keys(NAME, if replay { &REPLAY_KEYS } else { &RNG_KEYS })?;
        let ranks = if replay {
            let (rank, world_size) = (rng.get("rank")?, rng.get("world_size")?);
            let bad = |e: Error| Error::bad_state(rng.path_of("rank"), e.to_string());
            Rank::new(NAME, rank, world_size).map_err(bad)?
        } else {
            self.ranks
        };
        for (key, ours, what) in [
            ("rank", ranks.rank, "rank"),
            ("world_size", ranks.world_size, "world size"),
        ] {
            let theirs: u64 = rng.get(key)?;
            if theirs != ours {
                let why = format!(
                    "the state was taken with {what} {theirs}, this {NAME} has {what} {ours}"
                );
                return Err(Error::bad_state(rng.path_of(key), why));
            }
        }
        let stream = PassRng::pass_stream(epoch, ranks);
        let word_pos = PassRng::check_saved(NAME, &rng, self.seed, stream)?;
        // Every draw is one `u64` (two words), at least one per item; a pass
        // that has not started has drawn nothing.
        if word_pos % 2 == 1 || word_pos / 2 < num_yielded || (!started && word_pos > 0) {
            let why = format!(
                "generator position {word_pos} cannot follow {num_yielded} items (each takes a two-word draw) in a pass started: {started}"
            );
            return Err(Error::bad_state(rng.path_of("word_pos"), why));
        }
        let own = Own {
            epoch,
            num_yielded,
            started,
            word_pos,
            ranks,
        };
        let checked = self.sources.decode(state, own)?;
        // Sources that count their items returned every item of the pass
        // between them, or fewer if one ended and restarted.
        if let Some((sum, all)) = checked.counted(&self.sources.nodes)?
            && (sum > num_yielded || (all && sum != num_yielded))
        {
            let why =
                format!("{NAME} returned {num_yielded} items, its sources' states count {sum}");
            return Err(Error::bad_state(state.path_of(NUM_YIELDED), why));
        }
        Ok(checked)
    }
}

impl<N, O> MultiNodeWeightedSampler<N, O> {
    /// The weights by source name, in source order.
    fn named_weights(&self) -> Vec<(&str, f64)> {
        let names = self.sources.names.iter().map(|n| &**n);
        names.zip(self.weights.iter().copied()).collect()
    }
}

/// The sampler's own part of a state, checked and decoded but not applied.
struct Own {
    epoch: u64,
    num_yielded: u64,
    started: bool,
    word_pos: u64,
    /// Whose stream it draws from: this sampler's rank, or the one a
    /// replayed state names.
    ranks: Rank,
}

sampler_node!(MultiNodeWeightedSampler);

impl<N: Node, O: OutputMode<N::Item>> Stateful for MultiNodeWeightedSampler<N, O> {
    stateful_by_sources!();

    /// The weights are listed by source name (the order of the sources is
    /// the order of the children), so a reordering is reported as one.
    fn describe(&self) -> Description {
        let mut weights = self.named_weights();
        weights.sort_by(|a, b| a.0.cmp(b.0));
        let weights: Vec<String> = weights.iter().map(|(n, w)| format!("{n}: {w}")).collect();
        let d = Description::new(NAME)
            .param("weights", format!("{{{}}}", weights.join(", ")))
            .param("stop_criteria", self.sources.stop)
            .param("seed", self.seed)
            .param("rank", self.ranks.rank)
            .param("world_size", self.ranks.world_size)
            .param("tag_output", O::TAGGED);
        self.sources.describe_into(d).with_resume(self.resume())
    }
}

impl<N, O> fmt::Debug for MultiNodeWeightedSampler<N, O> {
    debug_fields!(NAME, finish_non_exhaustive;
        weights = (named_weights()), stop_criteria = (sources.stop), seed, rank = (ranks.rank),
        world_size = (ranks.world_size), output = { std::any::type_name::<O>() }, epoch,
        num_yielded, sources = (sources.debug_flags()), flag = (sources.flag));
}
