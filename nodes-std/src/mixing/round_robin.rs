//! [`MultiNodeRoundRobinSampler`]: takes one item from each source in turn.

use std::fmt;
use std::marker::PhantomData;

use nodes_core::__private::Fields;
use nodes_core::{Cx, Description, Error, Hint, Node, NodeId, ResetFlag, Result, State, Stateful};

use super::{Checked, DATASET_KEYS, EMPTY, EXHAUSTED, NODE_STATES};
use super::{OutputMode, Plain, Sources, StopCriteria, WithSource};
use crate::transforms::debug_fields;

const NAME: &str = "MultiNodeRoundRobinSampler";

const CURSOR: &str = "current_dataset_index";
const KEYS: [&str; 5] = [CURSOR, DATASET_KEYS, EXHAUSTED, EMPTY, NODE_STATES];

/// Mixes several named sources by taking one item from each in turn, in source
/// order (torchdata's `MultiNodeRoundRobinSampler`).
///
/// It has no single upstream, so it is built with [`new`](Self::new);
/// [`tagged`](Self::tagged) makes it yield [`Tagged`](crate::Tagged) items
/// naming their source.
///
/// # Semantics
///
/// - A cursor walks the sources in order; each turn pulls one item from the
///   cursor's source and moves the cursor on. A source is found exhausted only
///   when it signals its end on its own turn.
/// - When a source ends, the [`StopCriteria`] decides:
///   `CycleUntilAllDatasetsExhausted` (the default) restarts it and takes its
///   first item on the same turn, until every source has ended at least once;
///   `AllDatasetsExhausted` skips it from then on (every item of every source
///   exactly once); `FirstDatasetExhausted` ends the pass; `CycleForever`
///   restarts it forever (torchdata rejects this criterion here). A source that
///   ends again right after a restart is *empty* and is skipped for the rest of
///   the pass.
/// - For sources of sizes 1, 2, 3: `AllDatasetsExhausted` yields 6 items,
///   `FirstDatasetExhausted` 3, `CycleUntilAllDatasetsExhausted` 11.
/// - There is no randomness and no epoch: every pass is the same.
///
/// # State
///
/// ```json
/// {
///   "current_dataset_index": 1,
///   "dataset_keys": ["a", "b"],
///   "datasets_exhausted": {"a": false, "b": false},
///   "datasets_empty": {"a": false, "b": false},
///   "dataset_node_states": {"a": {"...": "..."}, "b": {"...": "..."}}
/// }
/// ```
///
/// The sources' states are keyed by name (torchdata keys them by position).
/// Tagging does not change the state.
///
/// # Errors
///
/// - [`new`](Self::new) returns [`Error::InvalidArgument`] for no sources or
///   duplicate source names.
/// - `reset(Some(state))` returns [`Error::BadState`] for a state that does
///   not fit, in particular one whose `dataset_keys` differ from this
///   sampler's names or their order ("mismatch between the dataset keys").
///   Nothing is changed until the whole state has been checked.
/// - `next` and `get_state` return [`Error::NotReset`] before the first reset.
/// - An error from a source is one item: it is returned in place of the item
///   the source's turn asked for (the turn is spent, as for an item), and the
///   pass goes on with the next source. So with sources whose errors take the
///   place of their items (every stock fallible node), the output is the
///   fault-free output with the failed items replaced by their errors, and a
///   state taken right after an error resumes after it. An error while
///   restarting a source that ended (its `reset` or first item) is returned
///   the same way; the source stays marked as ended.
///
/// # Examples
///
/// ```
/// use nodes_std::{IterableWrapper, MultiNodeRoundRobinSampler, NodeExt, Result, StopCriteria};
/// let sources = || {
///     [
///         ("a", IterableWrapper::new(0..1u32)),
///         ("b", IterableWrapper::new(10..12)),
///         ("c", IterableWrapper::new(20..23)),
///     ]
/// };
///
/// let all = MultiNodeRoundRobinSampler::new(sources())?
///     .stop_criteria(StopCriteria::AllDatasetsExhausted);
/// let items: Vec<u32> = all.start()?.collect::<Result<_>>()?;
/// assert_eq!(items, [0, 10, 20, 11, 21, 22]);
///
/// let cycle = MultiNodeRoundRobinSampler::new(sources())?; // CycleUntilAllDatasetsExhausted
/// let items: Vec<u32> = cycle.start()?.collect::<Result<_>>()?;
/// assert_eq!(items, [0, 10, 20, 0, 11, 21, 0, 10, 22, 0, 11]);
///
/// let tagged = MultiNodeRoundRobinSampler::new(sources())?.tagged();
/// let first = tagged.start()?.next().unwrap()?;
/// assert_eq!((&*first.source, first.item), ("a", 0));
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[must_use = "nodes do nothing until started"]
pub struct MultiNodeRoundRobinSampler<N, O = Plain> {
    sources: Sources<N>,
    cursor: usize,
    _mode: PhantomData<fn() -> O>,
}

impl<N: Node> MultiNodeRoundRobinSampler<N, Plain> {
    /// A round-robin sampler over `sources` (ordered `(name, node)` pairs),
    /// with `CycleUntilAllDatasetsExhausted`.
    ///
    /// To mix different node types, box them with
    /// [`NodeExt::boxed`](crate::NodeExt::boxed).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no sources or duplicate names.
    pub fn new<K: Into<String>>(sources: impl IntoIterator<Item = (K, N)>) -> Result<Self> {
        Ok(MultiNodeRoundRobinSampler {
            sources: Sources::new(NAME, sources)?,
            cursor: 0,
            _mode: PhantomData,
        })
    }

    /// A round-robin sampler over a plain list of sources, named `ds_0`,
    /// `ds_1`, … in list order (torchdata's `MultiNodeRoundRobinSampler`
    /// over a list). The names key the sources' states in a checkpoint, so
    /// the list order must be the same when a state is restored.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let a = IterableWrapper::new(vec![1, 2]);
    /// let b = IterableWrapper::new(vec![10, 20]);
    /// let sampler = MultiNodeRoundRobinSampler::from_list([a, b])?.tagged();
    /// let out: Vec<(String, i32)> = sampler
    ///     .start()?
    ///     .map(|t| t.map(|t| (t.source.to_string(), t.item)))
    ///     .collect::<Result<_>>()?;
    /// assert_eq!(out[..2], [("ds_0".into(), 1), ("ds_1".into(), 10)]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty list.
    pub fn from_list(sources: impl IntoIterator<Item = N>) -> Result<Self> {
        let numbered = sources.into_iter().enumerate();
        Self::new(numbered.map(|(i, node)| (format!("ds_{i}"), node)))
    }

    tagged_method!(MultiNodeRoundRobinSampler { sources, cursor });
}

impl<N: Node, O> MultiNodeRoundRobinSampler<N, O> {
    stop_criteria_methods!();

    /// The index of the source whose turn is next.
    pub fn current_index(&self) -> usize {
        self.cursor
    }

    fn advance(&mut self) {
        self.cursor = (self.cursor + 1) % self.sources.len();
    }

    /// The next item with the index of its source.
    fn next_indexed(&mut self, cx: &mut Cx) -> Result<Option<(usize, N::Item)>> {
        self.sources.flag.check(NAME)?;
        while !self.sources.is_over() {
            let i = self.cursor;
            if !self.sources.is_live(i) {
                self.advance();
                continue;
            }
            let turn = match self.sources.pull(i, cx) {
                Ok(None) => self.sources.source_ended(i, cx),
                turn => turn,
            };
            // An item, or an error in its place, spends the turn, and so
            // does a restarted source that is empty; a source that ended
            // is skipped from now on, or ends the pass.
            if !matches!(turn, Ok(None)) || self.sources.empty[i] {
                self.advance();
            }
            if let Some(item) = turn? {
                return Ok(Some((i, item)));
            }
        }
        Ok(None)
    }

    /// Checks the sampler's own part of `state` (the cursor) and decodes
    /// it, without applying anything.
    fn check(&self, state: &State) -> Result<Checked<usize>> {
        super::expect_keys(state, NAME, &KEYS)?;
        let cursor: usize = state.get(CURSOR)?;
        let checked = self.sources.decode(state, cursor)?;
        let n = self.sources.len();
        if cursor >= n {
            let why = format!("index {cursor} is out of range for {n} sources");
            return Err(Error::bad_state(state.path_of(CURSOR), why));
        }
        Ok(checked)
    }

    /// By stop criterion (a turn gives one item or one error, and a source
    /// that has not ended in this pass gives what its hint says before it
    /// does):
    /// - `AllDatasetsExhausted`: exact, the sum over the sources that have
    ///   not ended yet;
    /// - `FirstDatasetExhausted`: at most that sum (the pass may end at any
    ///   source's end);
    /// - `CycleUntilAllDatasetsExhausted`: at least that sum (each of them
    ///   must end before the pass does), no upper bound (restarted sources
    ///   start passes whose length is not known yet);
    /// - `CycleForever`: at least what the non-empty sources have left.
    fn hint_left(&self) -> Hint {
        let sources = &self.sources;
        let left = sources.hint_sum(&sources.exhausted);
        match sources.stop {
            StopCriteria::AllDatasetsExhausted => left,
            StopCriteria::FirstDatasetExhausted => left.at_most(),
            // A cycle reads every source again.
            StopCriteria::CycleUntilAllDatasetsExhausted => sources.unbounded_hint(left.lower),
            StopCriteria::CycleForever => {
                sources.unbounded_hint(sources.hint_sum(&sources.empty).lower)
            }
        }
    }

    /// Saves the sampler's own part of a state (the cursor).
    fn save_own(&self, out: &mut Fields<'_>) -> Result<()> {
        out.field(CURSOR, &self.cursor)
    }

    /// A new pass starts at the first source.
    fn fresh(&self) -> usize {
        0
    }

    fn apply(&mut self, cursor: usize) {
        self.cursor = cursor;
    }
}

sampler_node!(MultiNodeRoundRobinSampler);

impl<N: Node, O: OutputMode<N::Item>> Stateful for MultiNodeRoundRobinSampler<N, O> {
    fn describe(&self) -> Description {
        let d = Description::new(NAME)
            .param("stop_criteria", self.sources.stop)
            .param("tag_output", O::TAGGED);
        self.sources.describe_into(d).with_resume(self.resume())
    }

    stateful_by_sources!();
}

impl<N, O> fmt::Debug for MultiNodeRoundRobinSampler<N, O> {
    debug_fields!(NAME, finish_non_exhaustive;
        stop_criteria = (sources.stop), output = { std::any::type_name::<O>() },
        current_dataset_index = (cursor), sources = (sources.debug_flags()), flag = (sources.flag));
}
