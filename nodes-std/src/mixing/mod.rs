//! Mixing: nodes with several children. [`Zip`](crate::Zip) pairs two streams;
//! the samplers below draw from many.
//!
//! Mixing several sources into one stream: [`MultiNodeWeightedSampler`],
//! [`MultiNodeRoundRobinSampler`] and their [`StopCriteria`].
//!
//! Both samplers take an ordered list of named sources (`(name, node)` pairs;
//! the names key the sources' states in a checkpoint) and yield the sources'
//! items unchanged, or, after `.tagged()`, as [`Tagged`] items that carry the
//! name of the source they came from.
//!
//! The sources of one sampler share a node type `N`. To mix different node
//! types, box them: `Box<dyn Node<Item = T>>` is itself a node (see
//! [`NodeExt::boxed`](crate::NodeExt::boxed)).

// Why `Stateful` is hand-written here rather than derived: the samplers'
// restore validates across fields before applying anything (the state's
// seed/rank/world size against the configuration, `dataset_keys` against
// the source order, "empty implies exhausted"), keeps what `check_state`
// decoded for the reset that follows, then rebuilds derived data (the draw
// table, the exhausted counters, the generator at its word position); their
// states share flag maps between snapshots. The derive writes none of that.

// What both samplers do alike, written once. Declared before their modules
// so that they can use them.

/// Writes a sampler's `stop_criteria` setter and its `get_stop_criteria`
/// getter, inside its inherent `impl`.
macro_rules! stop_criteria_methods {
    () => {
        /// Sets when a pass ends (default `CycleUntilAllDatasetsExhausted`).
        /// The node must be reset afterwards.
        pub fn stop_criteria(mut self, stop: StopCriteria) -> Self {
            self.sources.stop = stop;
            self.sources.reconfigured();
            self
        }

        /// When a pass ends.
        pub fn get_stop_criteria(&self) -> StopCriteria {
            self.sources.stop
        }
    };
}

/// Writes a sampler's `tagged`, inside its `impl<N: Node> $sampler<N, Plain>`:
/// the same sampler, its `$field`s (all but the mode) moved over.
macro_rules! tagged_method {
    ($sampler:ident { $($field:ident),* $(,)? }) => {
        /// Yields [`Tagged`](crate::Tagged) items naming the source of each item
        /// (torchdata's `tag_output=True`). The state is unchanged.
        pub fn tagged(self) -> $sampler<N, WithSource> {
            $sampler {
                $($field: self.$field,)*
                _mode: PhantomData,
            }
        }
    };
}

/// Writes `Node`, `NodeName` and the "start it first" guards for the
/// sampler `$sampler<N, O>`: its item is that of the source its
/// `next_indexed` picks, plain or tagged with the source's name as `O` says.
macro_rules! sampler_node {
    ($sampler:ident) => {
        // A concrete sampler that was only constructed has no
        // `next`/`get_state`: calling them is a compile error that says to
        // start the pipeline.
        nodes_core::__started_guards!(impl[N, O] $sampler<N, O>);

        impl<N: Node, O: OutputMode<N::Item>> Node for $sampler<N, O> {
            type Item = O::Output;

            #[inline]
            fn next(&mut self, cx: &mut Cx) -> Result<Option<O::Output>> {
                cx.observe(NodeId::of(self), NAME, |cx| {
                    Ok(self
                        .next_indexed(cx)?
                        .map(|(i, item)| O::output(&self.sources.names[i], item)))
                })
            }
        }

        impl<N, O> nodes_core::NodeName for $sampler<N, O> {
            const NAME: &'static str = NAME;
        }
    };
}

/// Writes, inside a sampler's `impl Stateful`, what it hands to its
/// `sources`: `check_state` and `reset` (check the whole state, then apply
/// it; the sampler's `check`, `fresh` and `apply` do its own part),
/// `get_state` (its `save_own` writes its own part), `size_hint` (its
/// `hint_left` while the pass goes on), `shutdown`, and `resume` from the
/// stop criterion.
macro_rules! stateful_by_sources {
    () => {
        fn get_state(&self, cx: &Cx) -> Result<State> {
            self.sources.flag.check(NAME)?;
            cx.check_live(NAME)?;
            Fields::build(0, |out| {
                self.save_own(out)?;
                self.sources.save(out, cx)
            })
        }

        fn size_hint(&self) -> Hint {
            if !self.sources.flag.is_reset() {
                return Hint::UNKNOWN;
            }
            if self.sources.is_over() {
                return Hint::exact(0);
            }
            self.hint_left()
        }

        fn check_state(&self, state: &State) -> Result<()> {
            let checked = self.check(state)?;
            for (node, state) in self.sources.nodes.iter().zip(&checked.states) {
                node.check_state(state)?;
            }
            let names = self.sources.names.iter();
            for (node, name) in self.sources.nodes.iter().zip(names) {
                if checked.first_ends.contains(name) {
                    node.check_state(&checked.first_ends.child(name)?)?;
                }
            }
            self.sources.keep_checked(state, checked);
            Ok(())
        }

        fn reset(&mut self, state: Option<&State>) -> Result<()> {
            // Unusable until this reset succeeds.
            self.sources.flag = ResetFlag::default();
            // Decoded by `check_state` already, if that checked this very
            // state (and dropped, unused, otherwise).
            let kept = self.sources.take_checked(state);
            let own = match state {
                None => self.sources.reset_all().map(|()| self.fresh())?,
                Some(state) => {
                    let checked = kept.map_or_else(|| self.check(state), Ok)?;
                    self.sources.restore(checked)?
                }
            };
            self.apply(own);
            self.sources.flag.mark();
            Ok(())
        }

        fn shutdown(&mut self) {
            self.sources.nodes.iter_mut().for_each(Stateful::shutdown);
        }

        /// Each source read exactly once per pass only under
        /// `AllDatasetsExhausted`.
        fn resume(&self) -> $crate::Resume {
            $crate::Resume::Mixes {
                each_once: self.sources.stop == StopCriteria::AllDatasetsExhausted,
                stops_at_first_end: self.sources.stop == StopCriteria::FirstDatasetExhausted,
            }
        }
    };
}

pub(crate) mod interleave;
mod round_robin;
mod stop;
pub(crate) mod weighted;
pub(crate) mod zip;

use std::any::Any;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};

use nodes_core::__private::{Fields, SharedSnapshot};
use nodes_core::{Cx, Description, Error, Hint, Node, ResetFlag, Result, Resume, State};
use serde_json::Value;

use crate::transforms::require;

pub use self::round_robin::MultiNodeRoundRobinSampler;
pub use self::stop::StopCriteria;
pub use self::weighted::MultiNodeWeightedSampler;

/// An item together with the name of the source it came from: what a sampler
/// yields after `.tagged()` (torchdata's `tag_output=True`).
///
/// ```
/// use std::sync::Arc;
/// use nodes_std::Tagged;
///
/// let t = Tagged { source: Arc::from("books"), item: 7 };
/// let (source, item) = t.into_parts();
/// assert_eq!((&*source, item), ("books", 7));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tagged<T> {
    /// The name of the source, as given to the sampler (shared, not copied per item).
    pub source: Arc<str>,
    /// The source's item, unchanged.
    pub item: T,
}

impl<T> Tagged<T> {
    /// `(source, item)`.
    pub fn into_parts(self) -> (Arc<str>, T) {
        (self.source, self.item)
    }
}

/// What a sampler yields for an item of one of its sources: the item itself
/// ([`Plain`], the default) or a [`Tagged`] item ([`WithSource`], after
/// `.tagged()`).
///
/// The mode is a type parameter of the sampler, so the item type is known at
/// compile time and tagging costs one reference-count increment per item.
/// The trait is sealed: [`Plain`] and [`WithSource`] are the modes.
pub trait OutputMode<T>: Send + sealed::Sealed {
    /// The sampler's item type.
    type Output;
    /// Whether the source name is part of the output (shown by `describe`).
    const TAGGED: bool;
    /// Builds the output for `item`, drawn from the source named `source`.
    fn output(source: &Arc<str>, item: T) -> Self::Output;
}

mod sealed {
    /// Only this crate's output modes implement `OutputMode`.
    // Unnameable on purpose: that is what seals the trait.
    #[allow(unnameable_types)]
    pub trait Sealed {}
    impl Sealed for super::Plain {}
    impl Sealed for super::WithSource {}
}

/// Output mode: yield the sources' items unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Plain;

/// Output mode: yield [`Tagged`] items naming their source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WithSource;

impl<T> OutputMode<T> for Plain {
    type Output = T;
    const TAGGED: bool = false;
    fn output(_source: &Arc<str>, item: T) -> T {
        item
    }
}

impl<T> OutputMode<T> for WithSource {
    type Output = Tagged<T>;
    const TAGGED: bool = true;
    fn output(source: &Arc<str>, item: T) -> Tagged<T> {
        let source = Arc::clone(source);
        Tagged { source, item }
    }
}

// State keys shared by both samplers.
pub(crate) const DATASET_KEYS: &str = "dataset_keys";
pub(crate) const NODE_STATES: &str = "dataset_node_states";
pub(crate) const EXHAUSTED: &str = "datasets_exhausted";
pub(crate) const EMPTY: &str = "datasets_empty";
/// Written only once a source has ended in the pass under a criterion
/// that restarts sources (see [`Sources::first_ends`]).
pub(crate) const FIRST_ENDS: &str = "dataset_first_pass_ends";

/// Why source `name`'s first run end does not fit its flag, under a
/// criterion that restarts sources: an end is kept exactly for the sources
/// that `ended` in the pass. Said alike by a sampler and by a reshard.
pub(crate) fn first_end_mismatch(name: &str, ended: bool) -> String {
    match ended {
        true => format!("source {name} ended, but its first run's end is missing"),
        false => format!("source {name} has not ended in this pass, so its first run has not"),
    }
}

/// Checks that `state` has exactly a sampler's `keys`, and the optional
/// [`FIRST_ENDS`] after them.
pub(crate) fn expect_keys(state: &State, node: &str, keys: &[&str]) -> Result<()> {
    if !state.contains(FIRST_ENDS) {
        return state.expect_keys(node, keys);
    }
    state.expect_keys(node, &[keys, &[FIRST_ENDS]].concat())
}

/// The named sources of a sampler, their per-pass flags, indexed by
/// position (the hot path never compares names), and when the pass ends.
pub(crate) struct Sources<N> {
    /// The sampler's name, for its errors.
    node: &'static str,
    pub(crate) names: Vec<Arc<str>>,
    /// What the description calls each source (`dataset <name>`), which
    /// its statistics are shown under too.
    roles: Vec<Arc<str>>,
    pub(crate) nodes: Vec<N>,
    pub(crate) stop: StopCriteria,
    /// The sampler's reset flag.
    pub(crate) flag: ResetFlag,
    /// Read at all (a weighted source of weight 0 is not): only these
    /// count for the stop criterion.
    active: Vec<bool>,
    /// Signalled its end during this pass.
    pub(crate) exhausted: Vec<bool>,
    /// Signalled its end again right after a restart: nothing to draw from
    /// for the rest of this pass.
    pub(crate) empty: Vec<bool>,
    /// Each restarted source's state where its first run in this pass
    /// ended, by source name (saved as it is). The next pass resets the
    /// source from there, so that it starts the run after its first, as on
    /// every other rank, however often this rank restarted it (a sharded,
    /// seeded file order then stays the same on every rank).
    first_ends: State,
    /// How many sources are active, and how many of them are exhausted and
    /// empty.
    num_active: usize,
    num_exhausted: usize,
    num_empty: usize,
    /// The flags (exhausted, empty) as last saved, and the snapshots of the
    /// names and flag maps that every state shares until a flag changes
    /// (see [`Sources::save`]).
    saved: Mutex<Option<SavedFlags>>,
    /// The last state `check_state` accepted, with what the sampler decoded
    /// while checking it (see [`Sources::keep_checked`]).
    checked: Mutex<Option<(State, Box<dyn Any + Send>)>>,
}

/// The flags (exhausted, empty) a state saved, and the snapshots of the
/// names and the two flag maps.
type SavedFlags = ([Vec<bool>; 2], [SharedSnapshot; 3]);

/// A flag per source (the second field), saved as a map from each source's
/// name (the first) to its flag. Deferred (see `State::insert_deferred`):
/// taking a state costs a reference count, and a change of flags (a source
/// ends) a copy of the flags, not a map of as many keys as there are
/// sources; the map is written when the state is read or serialised.
struct FlagMap(Arc<Vec<Arc<str>>>, Vec<bool>);

impl serde::Serialize for FlagMap {
    fn serialize<S: serde::Serializer>(&self, out: S) -> std::result::Result<S::Ok, S::Error> {
        out.collect_map(self.0.iter().zip(&self.1))
    }
}

/// A sampler state, checked and decoded but not applied: the sampler's own
/// part, then its sources' flags and states.
pub(crate) struct Checked<T> {
    own: T,
    exhausted: Vec<bool>,
    empty: Vec<bool>,
    states: Vec<State>,
    first_ends: State,
}

impl<T> Checked<T> {
    /// The items the sources returned in this pass, summed from their
    /// states, where every source counts them ([`Resume::CountsItems`]);
    /// and whether that is every item of the pass (no source ended and
    /// restarted).
    pub(crate) fn counted<N: Node>(&self, nodes: &[N]) -> Result<Option<(u64, bool)>> {
        let mut sum = 0u64;
        for (node, state) in nodes.iter().zip(&self.states) {
            let Resume::CountsItems(key) = node.resume() else {
                return Ok(None);
            };
            sum = sum.saturating_add(state.get::<u64>(&key)?);
        }
        Ok(Some((sum, !self.exhausted.contains(&true))))
    }
}

impl<N: Node> Sources<N> {
    /// The sum of the hints of the sources `skip` does not flag: what they
    /// have left of their current passes.
    pub(crate) fn hint_sum(&self, skip: &[bool]) -> Hint {
        let left = self.nodes.iter().zip(skip).filter(|&(_, &skip)| !skip);
        left.fold(Hint::exact(0), |sum, (node, _)| sum.then(node.size_hint()))
    }

    /// At least `lower`, and no upper bound (sources that restart start
    /// passes whose length is not known yet), failing if any source may.
    pub(crate) fn unbounded_hint(&self, lower: u64) -> Hint {
        let may_fail = self.nodes.iter().any(|node| node.size_hint().may_fail);
        Hint {
            lower,
            upper: None,
            may_fail,
        }
    }

    /// Takes ownership of the sources, rejecting an empty list and duplicate names.
    pub(crate) fn new<K: Into<String>>(
        node: &'static str,
        sources: impl IntoIterator<Item = (K, N)>,
    ) -> Result<Self> {
        let (names, nodes): (Vec<Arc<str>>, Vec<N>) = sources
            .into_iter()
            .map(|(name, source)| (Arc::from(name.into()), source))
            .unzip();
        let mut seen = HashSet::new();
        if let Some(name) = names.iter().find(|&name| !seen.insert(name)) {
            let why = format!("source name {name:?} appears more than once");
            return Err(Error::invalid_argument(node, why));
        }
        require(!nodes.is_empty(), node, "at least one source is required")?;
        let len = nodes.len();
        let role = |name: &Arc<str>| Arc::from(format!("dataset {name}"));
        Ok(Sources {
            node,
            roles: names.iter().map(role).collect(),
            names,
            nodes,
            stop: StopCriteria::default(),
            flag: ResetFlag::default(),
            active: vec![true; len],
            exhausted: vec![false; len],
            empty: vec![false; len],
            first_ends: State::new(),
            num_active: len,
            num_exhausted: 0,
            num_empty: 0,
            saved: Mutex::new(None),
            checked: Mutex::new(None),
        })
    }

    /// After a change of configuration: unusable until reset, and a state
    /// checked before is not checked against the new configuration.
    pub(crate) fn reconfigured(&mut self) {
        self.flag = ResetFlag::default();
        self.take_checked::<()>(None);
    }

    /// Reads only the sources that `active` marks (by index).
    pub(crate) fn set_active(&mut self, active: Vec<bool>) {
        self.num_active = active.iter().filter(|&&a| a).count();
        self.active = active;
    }

    /// Whether the pass is over: an endless pass ends only when no source
    /// can yield anything any more.
    pub(crate) fn is_over(&self) -> bool {
        match self.stop {
            StopCriteria::FirstDatasetExhausted => self.num_exhausted > 0,
            StopCriteria::AllDatasetsExhausted | StopCriteria::CycleUntilAllDatasetsExhausted => {
                self.num_exhausted == self.num_active
            }
            StopCriteria::CycleForever => self.num_empty == self.num_active,
        }
    }

    /// Whether source `i` is still read from in this pass.
    pub(crate) fn is_live(&self, i: usize) -> bool {
        self.active[i]
            && !self.empty[i]
            && !(self.stop == StopCriteria::AllDatasetsExhausted && self.exhausted[i])
    }

    /// After source `i` signalled its end: marks it exhausted and, if the
    /// stop criterion restarts sources, keeps where its first run ended and,
    /// if the pass goes on, restarts it and returns its first item (none: it
    /// is marked empty). An error while restarting is returned; the source
    /// stays marked as ended.
    pub(crate) fn source_ended(&mut self, i: usize, cx: &mut Cx) -> Result<Option<N::Item>> {
        let first_end = !self.exhausted[i];
        self.num_exhausted += usize::from(self.active[i] && first_end);
        self.exhausted[i] = true;
        if !self.stop.restarts() {
            return Ok(None);
        }
        // Retried at the next end if taking the state failed.
        let name = &self.names[i];
        if !self.first_ends.contains(name) {
            let end = self.nodes[i].get_state(cx)?;
            self.first_ends.insert_child(String::from(&**name), end);
        }
        if self.is_over() {
            return Ok(None);
        }
        self.nodes[i].reset(None)?;
        let first = self.pull(i, cx)?;
        if first.is_none() {
            self.empty[i] = true;
            self.num_empty += usize::from(self.active[i]);
        }
        Ok(first)
    }

    /// Source `i`'s next item.
    #[inline]
    pub(crate) fn pull(&mut self, i: usize, cx: &mut Cx) -> Result<Option<N::Item>> {
        if cx.stats_enabled() {
            cx.child_role(&self.roles[i]);
        }
        self.nodes[i].next(cx)
    }

    /// The counters, from the flags.
    fn recount(&mut self) {
        let count = |flags: &[bool]| {
            let active = flags.iter().zip(&self.active);
            active.filter(|&(&flag, &active)| flag && active).count()
        };
        self.num_exhausted = count(&self.exhausted);
        self.num_empty = count(&self.empty);
    }

    /// Keeps what checking `state` decoded (`checked`), for the `reset`
    /// that usually follows with the same state (a loader checks the whole
    /// state, then applies it): that reset then does not decode a wide
    /// state a second time. Replaces what was kept before.
    pub(crate) fn keep_checked<T: Any + Send>(&self, state: &State, checked: T) {
        let mut kept = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        *kept = Some((state.clone(), Box::new(checked)));
    }

    /// What [`keep_checked`](Sources::keep_checked) kept, if it was kept
    /// for this very state ([`State::is_same`]); nothing is kept afterwards
    /// either way (every reset calls this, so nothing outlives it).
    pub(crate) fn take_checked<T: Any + Send>(&self, state: Option<&State>) -> Option<T> {
        let mut kept = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        let (kept_for, checked) = kept.take()?;
        state.filter(|s| s.is_same(&kept_for))?;
        checked.downcast().ok().map(|c| *c)
    }

    /// Resets every source to the beginning of its next run after its
    /// first in this pass, and clears the flags.
    pub(crate) fn reset_all(&mut self) -> Result<()> {
        // Kept until every source is reset: a reset tried again after an
        // error still rewinds.
        for (node, name) in self.nodes.iter_mut().zip(&self.names) {
            if self.first_ends.contains(name) {
                node.reset(Some(&self.first_ends.child(name)?))?;
            }
            node.reset(None)?;
        }
        self.first_ends = State::new();
        self.exhausted.fill(false);
        self.empty.fill(false);
        self.recount();
        Ok(())
    }

    /// Decodes and checks the per-source keys of `state` (names and order,
    /// flags, nested states) without touching anything, after the sampler's
    /// own part `own`.
    pub(crate) fn decode<T>(&self, state: &State, own: T) -> Result<Checked<T>> {
        let node = self.node;
        // Compared in place: a wide sampler's names are not copied.
        let keys = state.value_ref(DATASET_KEYS)?;
        let theirs = keys.as_array().map(|keys| keys.iter().map(Value::as_str));
        let ours = self.names.iter().map(|name| Some(&**name));
        if !theirs.is_some_and(|theirs| theirs.eq(ours)) {
            let keys: Vec<String> = state.get(DATASET_KEYS)?;
            let why = format!(
                "mismatch between the dataset keys: the state has [{}], {node} has [{}] (names and order must match)",
                keys.join(", "),
                self.names.join(", ")
            );
            return Err(Error::bad_state(state.path_of(DATASET_KEYS), why));
        }
        let names: Vec<&str> = self.names.iter().map(|n| &**n).collect();
        let flags = |key: &str| -> Result<Vec<bool>> {
            let map = state.child(key)?;
            map.expect_keys(node, &names)?;
            // Read in place; `get` for what is not a bool (its error).
            let flag = |n: &&str| map.value_ref(n)?.as_bool().map_or_else(|| map.get(n), Ok);
            names.iter().map(flag).collect()
        };
        let [exhausted, empty] = [flags(EXHAUSTED)?, flags(EMPTY)?];
        if let Some(i) = (0..self.len()).find(|&i| empty[i] && !exhausted[i]) {
            let why = "a source marked empty must also be marked exhausted";
            return Err(Error::bad_state(state.child(EMPTY)?.path_of(names[i]), why));
        }
        let nested = state.child(NODE_STATES)?;
        nested.expect_keys(node, &names)?;
        let states = names
            .iter()
            .map(|name| nested.child(name))
            .collect::<Result<_>>()?;
        let first_ends = self.decode_first_ends(state, &exhausted)?;
        Ok(Checked {
            own,
            exhausted,
            empty,
            states,
            first_ends,
        })
    }

    /// Decodes [`FIRST_ENDS`]: under a criterion that restarts sources,
    /// exactly the exhausted sources have a first run end; else none does.
    fn decode_first_ends(&self, state: &State, exhausted: &[bool]) -> Result<State> {
        let saved = match state.contains(FIRST_ENDS) {
            true => state.child(FIRST_ENDS)?,
            false => State::new(),
        };
        let has = |i: usize| saved.contains(&self.names[i]);
        // Keys are unique: a count short of the saved ones means a stranger.
        if (0..self.len()).filter(|&i| has(i)).count() != saved.len() {
            let names: HashSet<&str> = self.names.iter().map(|n| &**n).collect();
            if let Some(key) = saved.keys().find(|key| !names.contains(key)) {
                let why = "not a source of this sampler";
                return Err(Error::bad_state(saved.path_of(key), why));
            }
        }
        let restarts = self.stop.restarts();
        let Some(i) = (0..self.len()).find(|&i| has(i) != (restarts && exhausted[i])) else {
            // Each entry is a state (refused here, not at the next pass).
            for key in saved.keys() {
                saved.child(key)?;
            }
            return Ok(saved);
        };
        let (name, stop) = (&self.names[i], self.stop);
        let path = match state.contains(FIRST_ENDS) {
            true => saved.path_of(name),
            false => state.path_of(FIRST_ENDS),
        };
        let why = match restarts {
            false => format!("{stop} never restarts a source, so no first run of one ends"),
            true => first_end_mismatch(name, exhausted[i]),
        };
        Err(Error::bad_state(path, why))
    }

    /// Resets every source from its decoded state, then adopts the flags;
    /// returns the sampler's own part.
    pub(crate) fn restore<T>(&mut self, decoded: Checked<T>) -> Result<T> {
        for (node, state) in self.nodes.iter_mut().zip(&decoded.states) {
            node.reset(Some(state))?;
        }
        self.exhausted = decoded.exhausted;
        self.empty = decoded.empty;
        self.first_ends = decoded.first_ends;
        self.recount();
        // A source that ended and was not restarted stands at its end.
        let at_end = |i: usize| !self.exhausted[i] || self.nodes[i].size_hint().lower == 0;
        if !self.stop.restarts()
            && let Some(i) = (0..self.len()).find(|&i| !at_end(i))
        {
            let name = &self.names[i];
            let why = format!("source {name} is marked exhausted, but its state has items left");
            return Err(Error::bad_state(decoded.states[i].path(), why));
        }
        Ok(decoded.own)
    }

    /// Saves the per-source keys into `out`, each source's state nested
    /// under its name.
    ///
    /// The names and the two flag maps are deferred snapshots, shared with
    /// the previous state while they are unchanged (a flag changes when a
    /// source ends, a few times per pass) and copied as a `Vec<bool>` when
    /// one changes, so a state costs one nested state per source and O(1)
    /// or a copy of the flags for the rest.
    pub(crate) fn save(&self, out: &mut Fields<'_>, cx: &Cx) -> Result<()> {
        // A poisoned lock only means a panic while saving: rebuild.
        let mut saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
        let flags = [&self.exhausted, &self.empty];
        let (_, [names, exhausted, empty]) = match &mut *saved {
            Some(kept) if kept.0.iter().eq(flags) => kept,
            slot => {
                let names = Arc::new(self.names.clone());
                let map = |flags: &Vec<bool>| FlagMap(Arc::clone(&names), flags.clone());
                let [exhausted, empty] = flags.map(|flags| SharedSnapshot::new(map(flags)));
                let kept = [SharedSnapshot::new(names), exhausted, empty];
                slot.insert((flags.map(Vec::clone), kept))
            }
        };
        out.shared(DATASET_KEYS, names);
        out.shared(EXHAUSTED, exhausted);
        out.shared(EMPTY, empty);
        drop(saved);
        let states = Fields::build(0, |states| {
            states.reserve(self.len());
            for (name, node) in self.names.iter().zip(&self.nodes) {
                states.child(String::from(&**name), node.get_state(cx)?);
            }
            Ok(())
        })?;
        out.child(NODE_STATES, states);
        if !self.first_ends.is_empty() {
            out.child(FIRST_ENDS, self.first_ends.clone());
        }
        Ok(())
    }

    /// Adds the sources as children, in source order, labelled by their
    /// names and keyed by where their states live:
    /// `dataset_node_states/<name>`.
    pub(crate) fn describe_into(&self, mut d: Description) -> Description {
        for ((name, role), node) in self.names.iter().zip(&self.roles).zip(&self.nodes) {
            d = d.child_as(&**role, format!("{NODE_STATES}/{name}"), node.describe());
        }
        d
    }
}

impl<N> Sources<N> {
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The sources' flags for a sampler's `Debug`, as `name: status` pairs
    /// (`active`, `exhausted` or `empty`).
    pub(crate) fn debug_flags(&self) -> impl fmt::Debug {
        let status = |i: usize| match (self.exhausted[i], self.empty[i]) {
            (_, true) => "empty",
            (true, false) => "exhausted",
            (false, false) => "active",
        };
        let sources = (0..self.len()).map(move |i| (&self.names[i], status(i)));
        fmt::from_fn(move |f| f.debug_map().entries(sources.clone()).finish())
    }
}
