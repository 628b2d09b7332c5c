//! [`Loader`]: epochs over a pipeline, with checkpoints at any point.

use std::fmt;

use crate::describe::{Description, difference, first_differing_node};
use crate::error::{Error, Result};
use crate::node::{Cx, Node};
use crate::running::reset_with_rollback;
use crate::state::{CHECKSUM_KEY, State};
use crate::stats::Stats;
use crate::trace;

mod epoch;
pub use self::epoch::Epoch;

/// Where the loader stands between epochs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Constructed; the root was never reset.
    Fresh,
    /// The root stands at a position the next epoch must continue from
    /// (a state was loaded, or `state_dict` reset a fresh root).
    Positioned { loaded: bool },
    /// An epoch was started; the next one resets the root.
    Started,
}

/// Runs a pipeline epoch after epoch, with `torchdata.nodes.Loader`'s semantics.
///
/// - Each call to [`epoch`](Loader::epoch) starts a new pass (resetting the
///   root), unless a state was just loaded: then it resumes from that state,
///   once.
/// - Loading a state taken at the end of an epoch starts the *next* epoch
///   (unless [`restart_on_end(false)`](Loader::restart_on_end), which gives
///   one empty epoch instead).
/// - Every state records the pipeline's shape ([`Description`]: node types,
///   order-affecting parameters, children); loading a state from a pipeline of
///   another shape is rejected before anything is applied, naming the first
///   node that differs (opt out with [`check_shape(false)`](Loader::check_shape)).
/// - [`state_dict`](Loader::state_dict) and
///   [`load_state_dict`](Loader::load_state_dict) work at any point, including
///   between epochs. A state is checked, then applied, at once: a bad state
///   is an `Err` and the loader carries on from where it stood.
/// - Every state is sealed with a checksum of its content when it is
///   serialised (`to_json`, `to_value`, serde), and a state read back whose
///   content no longer matches it (a damaged checkpoint) is rejected (opt
///   out for a state edited by hand with
///   [`verify_checksum(false)`](Loader::verify_checksum)).
/// - Epochs are numbered from 0 ([`Epoch::index`]), and every state records
///   the number: a state taken mid-epoch resumes in the same epoch, one taken
///   at the end of epoch `k` resumes with epoch `k + 1`. Drive a training
///   loop by it, not by a count of your own, and a resumed run does exactly
///   the epochs that were left.
///
/// The epoch iterator borrows the loader, so a state cannot be loaded while an
/// epoch is live and then silently ignored. To checkpoint inside a loop, take
/// the state from the epoch:
///
/// ```
/// use nodes_core::{Cx, Description, Loader, Node, Result, State, Stateful};
///
/// // A minimal hand-written source: 0..5, state = how many were yielded.
/// struct Count { n: u64, end: u64 }
/// impl Node for Count {
///     type Item = u64;
///     fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
///         if self.n == self.end { return Ok(None) }
///         self.n += 1;
///         Ok(Some(self.n - 1))
///     }
/// }
/// impl Stateful for Count {
///     fn reset(&mut self, state: Option<&State>) -> Result<()> {
///         self.n = match state { Some(s) => s.get("n")?, None => 0 };
///         Ok(())
///     }
///     fn get_state(&self, _cx: &Cx) -> Result<State> { State::new().with("n", self.n) }
///     fn describe(&self) -> Description { Description::new("Count") }
/// }
///
/// let mut loader = Loader::new(Count { n: 0, end: 5 });
/// let mut saved = None;
/// let mut epoch = loader.epoch();
/// while let Some(item) = epoch.next() {
///     if item? == 2 {
///         saved = Some(epoch.state_dict()?);
///     }
/// }
/// let mut resumed = Loader::new(Count { n: 0, end: 5 });
/// resumed.load_state_dict(&saved.unwrap())?;
/// let rest: Vec<u64> = resumed.epoch().collect::<Result<_>>()?;
/// assert_eq!(rest, [3, 4]);
/// # Ok::<(), nodes_core::Error>(())
/// ```
pub struct Loader<N: Node> {
    root: N,
    cx: Cx,
    restart_on_end: bool,
    phase: Phase,
    num_yielded: u64,
    /// The number of the current (or last) epoch, from 0.
    epoch_index: u64,
    /// One item pulled ahead to see whether a loaded state is at its end,
    /// with the root's state from before the pull (the loader's state is
    /// made of it only if asked for). An explicit option, so that an
    /// item that is itself `None` is never mistaken for "nothing cached".
    /// The item may be an `Err`: an error is one item like any other, and
    /// the epoch goes on after it.
    peeked: Option<(Result<N::Item>, State)>,
    /// The pipeline's shape, taken once: saved with every state and compared
    /// with the shape a loaded state was taken from.
    shape: Description,
    fingerprint: std::sync::Arc<str>,
    /// The shape as states save it, and the template of every state: built
    /// when first needed (a loader that only restores a state, the usual
    /// start of a resumed run, never needs them).
    saved_shape: std::sync::OnceLock<SavedShape>,
    /// The root's own state while it stands exactly where the last
    /// successful `load_state_dict` put it (nothing pulled since): a failed
    /// restore rolls back to it without asking the root for its state.
    resting: Option<State>,
    check_shape: bool,
    verify_checksum: bool,
    /// The root stands, unstarted, in the rest of an epoch other ranks
    /// began ([`REST_OF_EPOCH`]): its end is that epoch's end, not a cue to
    /// start the next one, and states taken meanwhile say so too.
    rest_of_epoch: bool,
}

/// See [`Loader::saved_shape`].
struct SavedShape {
    /// The shape as saved in states (`Description::to_json`), as a state
    /// whose entries are shared: every state taken refers to it, nothing is
    /// copied until a state is serialised.
    json: State,
    /// Every state the loader takes, less its root and counters (see
    /// [`state_template`]).
    template: State,
}

impl<N: Node> fmt::Debug for Loader<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loader")
            .field("root", &std::any::type_name::<N>())
            .field("phase", &self.phase)
            .field("epoch_index", &self.epoch_index)
            .field("num_yielded", &self.num_yielded)
            .field("restart_on_end", &self.restart_on_end)
            .finish_non_exhaustive()
    }
}

const ROOT: &str = "root";
const NUM_YIELDED: &str = "num_yielded";
const EPOCH_INDEX: &str = "epoch_index";
/// `true` in a state `nodes_std::elastic` wrote for the rest of an epoch:
/// a rank whose share is empty stays in its peers' epoch, with nothing left.
const REST_OF_EPOCH: &str = "rest_of_epoch";
const PIPELINE: &str = "pipeline";
const FINGERPRINT: &str = "fingerprint";
const FORMAT: &str = "format";
/// The version of nodes that wrote the state (informational: not required,
/// and not compared, on load).
const VERSION: &str = "version";
/// This build's version, written with every state.
const WRITER_VERSION: &str = env!("CARGO_PKG_VERSION");
const CHECKSUM: &str = CHECKSUM_KEY;
/// The layout version of the loader's own state: 3, the first release's
/// (the numbers before it were never released).
const FORMAT_VERSION: u32 = 3;

/// Every key a loader state may have, in the order they are written.
const KEYS: &[&str] = &[
    ROOT,
    NUM_YIELDED,
    EPOCH_INDEX,
    REST_OF_EPOCH,
    FORMAT,
    VERSION,
    FINGERPRINT,
    PIPELINE,
    CHECKSUM,
];
/// The largest epoch index a state may hold: no run gets near it, and the
/// next epoch's number still fits.
const MAX_EPOCH_INDEX: u64 = i64::MAX as u64;

/// A loader state made of its parts, in the layout
/// [`Loader::state_dict`] writes (fingerprint of `pipeline`, a checksum slot),
/// marked `rest_of_epoch`: how `nodes_std::elastic` writes the states of
/// the ranks of a resharded job, whose pipelines it cannot build. Not
/// public API.
pub fn assemble_state(
    root: State,
    num_yielded: u64,
    epoch_index: u64,
    pipeline: &Description,
) -> Result<State> {
    let fingerprint = format!("{:016x}", pipeline.fingerprint()).into();
    let template = state_template(&fingerprint, &pipeline.to_state())?;
    loader_state(root, num_yielded, epoch_index, true, &template)
}

/// A loader state: the root and the counters, then `template`'s keys.
fn loader_state(
    root: State,
    num_yielded: u64,
    epoch_index: u64,
    rest_of_epoch: bool,
    template: &State,
) -> Result<State> {
    crate::state::Fields::build(0, |state| {
        state.child(ROOT, root);
        state.field(NUM_YIELDED, &num_yielded)?;
        state.field(EPOCH_INDEX, &epoch_index)?;
        // Only where it is true: every other state keeps its layout.
        if rest_of_epoch {
            state.field(REST_OF_EPOCH, &true)?;
        }
        state.share_tail(template);
        Ok(())
    })
}

/// The keys after the counters, as every state of this pipeline has them,
/// shared by reference. A checksum slot: the checksum is computed only if
/// the state is serialised.
fn state_template(fingerprint: &std::sync::Arc<str>, shape_json: &State) -> Result<State> {
    let mut state = State::new();
    state.insert(FORMAT, FORMAT_VERSION)?;
    state.insert(VERSION, WRITER_VERSION)?;
    state.insert(FINGERPRINT, &**fingerprint)?;
    state.insert_child(PIPELINE, shape_json.clone());
    state.insert_checksum();
    Ok(state)
}

impl<N: Node> Loader<N> {
    /// Wraps the root of a pipeline. Nothing runs until the first epoch or
    /// `state_dict`.
    pub fn new(root: N) -> Self {
        let shape = root.describe();
        let fingerprint: std::sync::Arc<str> = format!("{:016x}", shape.fingerprint()).into();
        Loader {
            saved_shape: std::sync::OnceLock::new(),
            fingerprint,
            shape,
            check_shape: true,
            verify_checksum: true,
            rest_of_epoch: false,
            resting: None,
            root,
            cx: Cx::new_running(),
            restart_on_end: true,
            phase: Phase::Fresh,
            num_yielded: 0,
            epoch_index: 0,
            peeked: None,
        }
    }

    /// Whether loading an end-of-epoch state starts the next epoch (the
    /// default) or gives one empty epoch first.
    pub fn restart_on_end(mut self, restart: bool) -> Self {
        self.restart_on_end = restart;
        self
    }

    /// Whether [`load_state_dict`](Loader::load_state_dict) rejects a state
    /// taken from a pipeline of another shape (the default). Turn it off for a
    /// deliberate change, e.g. a new batch size; the state must still fit.
    pub fn check_shape(mut self, check: bool) -> Self {
        self.check_shape = check;
        self
    }

    /// Whether [`load_state_dict`](Loader::load_state_dict) checks a state's
    /// content against the checksum written with it (the default).
    ///
    /// Serialising a loader state (`to_json`, `to_value`, serde) adds
    /// `"checksum": "mx64:<16 hex digits>"`, computed over the rest of the
    /// state's content as parsed. Re-indenting a
    /// checkpoint or reordering its keys keeps it valid; any change to what
    /// it parses to is an `Err` at `/checksum`, and a format 2 state without
    /// the key is one too. A state passed in memory, never serialised, has
    /// nothing to verify.
    ///
    /// Turn it off to load a state edited by hand: the checksum key may then
    /// be absent or stale. Every other check still applies.
    ///
    /// ```
    /// use nodes_core::{Cx, Description, Loader, Node, Result, State, Stateful};
    /// # struct Count { n: u64 }
    /// # impl Node for Count {
    /// #     type Item = u64;
    /// #     fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
    /// #         if self.n == 5 { return Ok(None) }
    /// #         self.n += 1;
    /// #         Ok(Some(self.n - 1))
    /// #     }
    /// # }
    /// # impl Stateful for Count {
    /// #     fn reset(&mut self, s: Option<&State>) -> Result<()> {
    /// #         self.n = s.map_or(Ok(0), |s| s.get("n"))?;
    /// #         Ok(())
    /// #     }
    /// #     fn get_state(&self, _cx: &Cx) -> Result<State> { State::new().with("n", self.n) }
    /// #     fn describe(&self) -> Description { Description::new("Count") }
    /// # }
    /// // `Count` yields 0..5 and saves the next number as `n`.
    /// let saved = Loader::new(Count { n: 0 }).state_dict()?.to_json()?;
    /// assert!(saved.contains(r#""checksum":"mx64:"#));
    /// let edited = saved.replace(r#""n":0"#, r#""n":3"#);
    ///
    /// let err = Loader::new(Count { n: 0 })
    ///     .load_state_dict(&State::from_json(&edited)?)
    ///     .unwrap_err();
    /// assert_eq!(err.state_path(), Some("/checksum"));
    ///
    /// let mut loader = Loader::new(Count { n: 0 }).verify_checksum(false);
    /// loader.load_state_dict(&State::from_json(&edited)?)?;
    /// assert_eq!(loader.epoch().collect::<Result<Vec<_>>>()?, [3, 4]);
    /// # Ok::<(), nodes_core::Error>(())
    /// ```
    pub fn verify_checksum(mut self, verify: bool) -> Self {
        self.verify_checksum = verify;
        self
    }

    /// Collects per-node statistics (items, self time, time blocked, queue
    /// depths) from every node that reports them (all stock nodes do; nodes
    /// on a worker thread report under the node that started it), read with
    /// [`stats`](Loader::stats). Off by default, and then free.
    pub fn record_stats(mut self) -> Self {
        self.cx.enable_stats();
        self
    }

    /// The statistics so far, bottleneck first; `None` unless
    /// [`record_stats`](Loader::record_stats) turned them on.
    pub fn stats(&self) -> Option<Stats> {
        self.cx.stats_snapshot()
    }

    /// The pipeline's structure, as every state records it.
    pub fn describe(&self) -> &Description {
        &self.shape
    }

    /// Starts the next epoch (or resumes a loaded state) and returns its iterator.
    ///
    /// An `Err` from the pipeline is one item: the epoch goes on after it,
    /// also when a restored state stands right before a failing item. A
    /// failure to start (to reset the root) is the epoch's first and only
    /// item.
    pub fn epoch(&mut self) -> Epoch<'_, N> {
        let start = self.start_epoch();
        Epoch {
            pending_error: start.err(),
            done: false,
            progress: std::cell::Cell::default(),
            loader: self,
        }
    }

    /// The first half of [`epoch`](Loader::epoch), for a caller that
    /// cannot hold its borrow (a language binding's iterator): starts the
    /// next epoch, or resumes a loaded state. Then
    /// [`next_in_epoch`](Loader::next_in_epoch) returns its items.
    pub fn start_epoch(&mut self) -> Result<()> {
        let start = self.begin_epoch();
        trace::epoch_started(self.epoch_index, self.num_yielded, &start);
        start
    }

    /// The next item of the epoch [`start_epoch`](Loader::start_epoch)
    /// started, counted as [`Epoch`] counts it; `None` at its end (and
    /// again after it).
    #[inline]
    pub fn next_in_epoch(&mut self) -> Option<Result<N::Item>> {
        // Checked before taken: `take` would copy the whole option (an
        // item and a state) on every item, to find it empty.
        let item = if self.peeked.is_some() {
            self.peeked.take().map(|(item, _)| item)
        } else {
            self.root.next(&mut self.cx).transpose()
        }?;
        // An `Err` is one item: counted, and the epoch goes on after it.
        self.num_yielded = self.num_yielded.saturating_add(1);
        Some(item)
    }

    fn begin_epoch(&mut self) -> Result<()> {
        let resting = self.resting.take();
        self.rest_of_epoch = false;
        match std::mem::replace(&mut self.phase, Phase::Started) {
            Phase::Positioned { loaded: true } if self.restart_on_end => {
                // A loaded state may stand at the end of its epoch: look one item
                // ahead, and start the next epoch if there is none. The root
                // stands where the load put it: its state is the one loaded,
                // if known (a wide pipeline's state costs milliseconds).
                let before = resting.map_or_else(|| self.root.get_state(&self.cx), Ok)?;
                match self.root.next(&mut self.cx).transpose() {
                    Some(item) => {
                        self.peeked = Some((item, before));
                        Ok(())
                    }
                    None => self.start_next_epoch(),
                }
            }
            Phase::Positioned { .. } => Ok(()),
            Phase::Fresh => self.reset_root(),
            Phase::Started => self.start_next_epoch(),
        }
    }

    fn start_next_epoch(&mut self) -> Result<()> {
        self.epoch_index = self.epoch_index.saturating_add(1);
        self.reset_root()
    }

    fn reset_root(&mut self) -> Result<()> {
        self.peeked = None;
        self.resting = None;
        self.num_yielded = 0;
        self.root.reset(None).inspect(|()| self.cx.renew())
    }

    /// The shape as saved, and the state template, built on first use.
    fn saved_shape(&self) -> &SavedShape {
        self.saved_shape.get_or_init(|| {
            let json = self.shape.to_state();
            SavedShape {
                // Only serialising a number or a string, which cannot fail.
                template: state_template(&self.fingerprint, &json).unwrap_or_default(),
                json,
            }
        })
    }

    /// Checks the keys of a loader state, its format, and the types of the
    /// keys nothing else reads.
    fn check_keys(&self, state: &State) -> Result<()> {
        state.reject_unknown_keys("Loader", KEYS)?;
        // The keys every format had, then the format, then the rest.
        state.require_keys("Loader", &[ROOT, NUM_YIELDED, FORMAT])?;
        let format: u32 = state.get(FORMAT)?;
        if format != FORMAT_VERSION {
            let older = if format < FORMAT_VERSION {
                ": this state is from an older version of nodes; resume it with the version that wrote it, or start from a new checkpoint"
            } else {
                ""
            };
            let why = format!(
                "loader state format {format} is not supported (this build reads format {FORMAT_VERSION}){older}"
            );
            return Err(Error::bad_state(state.path_of(FORMAT), why));
        }
        state.require_keys("Loader", &[EPOCH_INDEX, FINGERPRINT, PIPELINE])?;
        if self.verify_checksum && !state.contains(CHECKSUM) {
            return Err(missing_checksum(state, LOADER_SKIPS));
        }
        state.get_opt::<String>(VERSION)?;
        if self.verify_checksum && !state.has_checksum_slot() && state.contains(CHECKSUM) {
            state.get::<String>(CHECKSUM)?;
        }
        Ok(())
    }

    /// Where the root's state counts its items (a sampler under maps), that
    /// count is the loader's: a state whose two counts differ was edited.
    fn check_count(&self, state: &State, root_state: &State, num_yielded: u64) -> Result<()> {
        let path = self.shape.counted_path();
        let Some((key, parents)) = path.as_deref().and_then(<[String]>::split_last) else {
            return Ok(());
        };
        let node = parents
            .iter()
            .try_fold(root_state.clone(), |node, key| node.child(key))?;
        let counted: u64 = node.get(key)?;
        if counted == num_yielded {
            return Ok(());
        }
        let why = format!(
            "the loader counted {num_yielded} items of this epoch, but the pipeline's own count at {} is {counted}",
            node.path_of(key)
        );
        Err(Error::bad_state(state.path_of(NUM_YIELDED), why))
    }

    /// Rejects a state taken from a pipeline of another shape, naming the
    /// first node where the two differ.
    fn check_state_shape(&self, state: &State) -> Result<()> {
        let fingerprint: String = state.get(FINGERPRINT)?;
        // The saved description is only read to name a difference: with the
        // same fingerprint (or no shape check) it is not decoded at all,
        // which for a wide pipeline is most of the cost of a restore. It
        // must still be a JSON object (the checksum covers its content).
        if !self.check_shape || *fingerprint == *self.fingerprint {
            state.child(PIPELINE)?;
            return Ok(());
        }
        // Decoding a description recurses once per level: refuse one nested
        // far deeper than this pipeline's own before decoding it (a damaged
        // or hostile state must not overflow the stack).
        let own_depth = self.saved_shape().json.depth();
        let limit = own_depth.saturating_mul(2).saturating_add(16);
        let depth = state.child(PIPELINE)?.depth();
        if depth > limit {
            let why = format!(
                "the saved pipeline is nested {depth} levels deep, this pipeline {own_depth}: it is from another pipeline"
            );
            return Err(Error::bad_state(state.path_of(PIPELINE), why));
        }
        let saved: Description = state.get(PIPELINE)?;
        let Some((path, then, now)) = first_differing_node(&saved, &self.shape, "") else {
            let why = "the fingerprint does not match the pipeline description saved with it, which matches this pipeline";
            return Err(Error::bad_state(state.path_of(FINGERPRINT), why));
        };
        // Child keys in a description are the keys their states are nested
        // under, so the differing node's path in the description is also the
        // path of its state under `root`.
        let in_state = format!("{}{}", state.path_of(ROOT), path.trim_end_matches('/'));
        let at = if path == "/" { "its root" } else { &path };
        // A state of another world size differs in its ranks' parameters:
        // say so, and how such a state is loaded.
        let sizes = (then.get_param("world_size"), now.get_param("world_size"));
        let hint = match sizes {
            (Some(then), Some(now)) if then != now => format!(
                "it is from a job of {then} ranks, this one has {now}: reshard it with `nodes_std::elastic::load_resharded` (from Python, `Loader.load_resharded`)"
            ),
            _ => "load with `Loader::check_shape(false)` (from Python, `Loader(..., check_shape=False)`) to accept a deliberate change".to_owned(),
        };
        let message = difference(then, now);
        let why = format!("the pipeline differs at {at}: {message} ({hint})");
        Err(Error::bad_state(in_state, why))
    }

    /// The loader's state: `{"root": <root state>, "num_yielded": n,
    /// "epoch_index": k, "format": 3, "version": "<crate version>",
    /// "fingerprint": "<hex>", "pipeline": <description as JSON>,
    /// "checksum": "mx64:<hex>"}`, and `"rest_of_epoch": true` after
    /// `epoch_index` while a state `nodes_std::elastic` wrote stands
    /// unstarted.
    ///
    /// The checksum is computed when the state is serialised, not here (see
    /// [`verify_checksum`](Loader::verify_checksum)), so taking a state costs
    /// the same with or without it.
    ///
    /// On a fresh loader this resets the root once; the first epoch then starts
    /// from there without resetting again.
    pub fn state_dict(&mut self) -> Result<State> {
        if self.phase == Phase::Fresh {
            self.reset_root()?;
            self.phase = Phase::Positioned { loaded: false };
        }
        let root = match &self.peeked {
            Some((_, before)) => before.clone(),
            None => self.root.get_state(&self.cx)?,
        };
        let (n, k) = (self.num_yielded, self.epoch_index);
        loader_state(root, n, k, self.rest_of_epoch, &self.saved_shape().template)
    }

    /// Restores a state taken by [`state_dict`](Loader::state_dict). The next
    /// epoch continues from it.
    ///
    /// The state is applied now: a state that does not fit this pipeline is an
    /// `Err` naming its JSON path, and the loader is left where it stood.
    ///
    /// The checks, in order, all before anything is applied: the loader's
    /// keys, types and ranges, and the pipeline's shape; then every node's
    /// checks of its part of the state ([`Stateful::check_state`]: keys,
    /// field types and ranges), so that a damaged value is reported at its
    /// own path; then the checksum
    /// ([`verify_checksum`](Loader::verify_checksum)). A state that fails
    /// them is not offered to any node. Only then is the state applied, and
    /// the checks that need it applied (a source replayed to its position)
    /// run; if one fails, the root is put back where it stood.
    ///
    /// [`Stateful::check_state`]: crate::Stateful::check_state
    pub fn load_state_dict(&mut self, state: &State) -> Result<()> {
        let outcome = self.load_state(state);
        let position = Some((self.epoch_index, self.num_yielded));
        trace::restored(|| self.fingerprint.to_string(), state, position, &outcome);
        outcome
    }

    /// [`load_state_dict`](Loader::load_state_dict) without the logging.
    fn load_state(&mut self, state: &State) -> Result<()> {
        self.check_keys(state)?;
        let num_yielded: u64 = state.get(NUM_YIELDED)?;
        let epoch_index: u64 = state.get(EPOCH_INDEX)?;
        if epoch_index > MAX_EPOCH_INDEX {
            let why = format!("epoch index {epoch_index} is beyond 2^63 - 1: no run gets there");
            return Err(Error::bad_state(state.path_of(EPOCH_INDEX), why));
        }
        let root_state = state.child(ROOT)?;
        let rest = state.get_opt::<bool>(REST_OF_EPOCH)?.unwrap_or(false);
        self.check_state_shape(state)?;
        if self.phase == Phase::Fresh {
            // A root that was never reset has no position to roll back to,
            // and a state that fails halfway may already be applied to part
            // of the pipeline (a sampler moved to the state's epoch), which
            // would leak into the first epoch. So put the root at its start
            // first, as `state_dict` does on a fresh loader: the first epoch
            // begins there, and a failed restore rolls back to it. (Nodes
            // learn some of what their checks compare with, such as a
            // source's length, when they start.)
            self.reset_root()?;
            self.phase = Phase::Positioned { loaded: false };
        }
        // Every check that names a field, then the checksum (so a damaged
        // value is named at its own path), and only then is anything
        // applied. A state taken in this process (an unfilled slot) has
        // nothing to verify.
        self.root.check_state(&root_state)?;
        self.check_count(state, &root_state, num_yielded)?;
        if self.verify_checksum {
            verify_checksum(state, LOADER_SKIPS)?;
        }
        // On failure the root is rolled back to its own position, which is
        // after any peeked item: the cached peek stays valid as it is.
        // Where the root stands, if known without asking it: a wide
        // pipeline's state costs milliseconds to take.
        // (On failure it is unknown: the rollback may itself have failed.)
        let resting = self.resting.take();
        reset_with_rollback(&mut self.root, &self.cx, Some(&root_state), resting)?;
        self.resting = Some(root_state);
        self.peeked = None;
        self.num_yielded = num_yielded;
        self.epoch_index = epoch_index;
        self.phase = Phase::Positioned { loaded: !rest };
        self.rest_of_epoch = rest;
        Ok(())
    }

    /// Stops background work in the pipeline. The next epoch starts it again.
    pub fn shutdown(&mut self) {
        self.root.shutdown();
    }

    /// The root node.
    pub fn root(&self) -> &N {
        &self.root
    }
}

impl<N: Node> Drop for Loader<N> {
    fn drop(&mut self) {
        self.root.shutdown();
        self.cx.renew();
    }
}

impl<'a, N: Node> IntoIterator for &'a mut Loader<N> {
    type Item = Result<N::Item>;
    type IntoIter = Epoch<'a, N>;

    fn into_iter(self) -> Epoch<'a, N> {
        self.epoch()
    }
}

/// How a loader is told to take a state edited by hand.
const LOADER_SKIPS: &str = "`Loader::verify_checksum(false)`";

fn missing_checksum(state: &State, skips: &str) -> Error {
    let why = format!(
        "missing key for Loader: it guards against a damaged checkpoint (load a state edited by hand with {skips})"
    );
    Error::bad_state(state.path_of(CHECKSUM), why)
}

/// Checks a loader state against its checksum, as a loader that verifies
/// checksums does, for readers of states that do not load them
/// (`nodes_std::elastic::reshard`): the key must be there, and a state read
/// back must match it. `skips` names the option that turns this off.
pub fn verify_checksum(state: &State, skips: &str) -> Result<()> {
    if !state.contains(CHECKSUM) {
        return Err(missing_checksum(state, skips));
    }
    if state.has_checksum_slot() {
        return Ok(());
    }
    verify_content(state, skips)
}

/// Compares a state read back with the checksum written with it.
fn verify_content(state: &State, skips: &str) -> Result<()> {
    let saved: String = state.get(CHECKSUM)?;
    let computed = state.checksum();
    if saved == computed {
        return Ok(());
    }
    let message = match saved.split_once(':') {
        Some((other, _)) if other != "mx64" => format!(
            "checksum algorithm {other:?} is not supported (this build writes and reads \"mx64\")"
        ),
        _ => format!(
            "the state does not match its checksum (saved {saved:?}, its content gives {computed:?}): \
             the checkpoint was damaged after it was written, or edited by hand \
             (load an edited state with {skips})"
        ),
    };
    Err(Error::bad_state(state.path_of(CHECKSUM), message))
}

#[cfg(test)]
mod tests;
