//! The [`Node`] contract and the execution context [`Cx`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::describe::Description;
use crate::error::{Error, Result};
use crate::hint::Hint;
use crate::resume::Resume;
use crate::state::State;
use crate::stats::{NodeId, Recorder, Stats};

/// A checkpointable iterator: the building block of every pipeline.
///
/// The contract has three verbs, split over two traits so that a node author
/// writes only what is specific to the node:
/// - [`next`](Node::next) (this trait): the next item, `Ok(None)` at the end
///   of the pass. End is idempotent: once `None`, always `None` until the next
///   `reset`.
/// - [`reset`](Stateful::reset) and [`get_state`](Stateful::get_state) (the
///   supertrait [`Stateful`], which `#[derive(Node)]` writes from annotated
///   fields): start over or resume from a saved state; report a state that
///   resumes exactly after the last item returned.
///
/// `next` and `get_state` take an execution context [`Cx`], which user code
/// cannot construct: only a running handle ([`Running::start`](crate::Running::start),
/// `NodeExt::start` in `nodes-std`, [`Loader`](crate::Loader)) makes one,
/// after it has reset the pipeline, and a parent hands its own to its
/// children. So advancing, or reading the state of, a node that was only
/// constructed does not compile.
///
/// The trait is dyn-compatible: `Box<dyn Node<Item = T>>` is itself a node.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a node: it does not implement `Node`",
    label = "not a `Node`",
    note = "if `{Self}` derives `Node`, also write `impl Node for` it, with `type Item` and `fn next`: `#[derive(Node)]` implements only `Stateful` (reset, state, describe)"
)]
pub trait Node: Stateful + Send {
    /// What the node yields.
    type Item;

    /// The next item, or `Ok(None)` at the end of the pass.
    #[rustfmt::skip]
    fn next(
        &mut self,
        cx: &mut Cx, // only a started pipeline has a `Cx`: call `Running::start(node)` / `.start()`, or wrap it in a `Loader`
    ) -> Result<Option<Self::Item>>;
}

/// The checkpointing half of the [`Node`] contract: reset, state, description
/// and shutdown.
///
/// `#[derive(Node)]` (from `nodes-std`) implements it from annotated fields;
/// implement it by hand only when the derive cannot express a node.
pub trait Stateful {
    /// Starts a new pass (`None`) or resumes from a saved state (`Some`).
    ///
    /// A parent resets its children. A failed reset leaves the node usable
    /// only after another successful reset; the [`Loader`](crate::Loader) and
    /// [`Running`](crate::Running) handles roll back for you.
    fn reset(&mut self, state: Option<&State>) -> Result<()>;

    /// Checks `state` as [`reset`](Stateful::reset) would take it, without
    /// applying any of it: its keys, the types and ranges of its fields,
    /// and, recursively, the states of the children. An error names the
    /// JSON path of the field at fault.
    ///
    /// The [`Loader`](crate::Loader) runs it over the whole pipeline before
    /// it verifies a state's checksum and applies the state, so that a
    /// damaged field is reported at its own path and a state that fails
    /// any check leaves every node untouched. `reset` must still check what
    /// it applies (it is called directly, too); checks that need the state
    /// applied (replaying a source to a position) stay there.
    ///
    /// `#[derive(Node)]` writes it (the keys, the version, every state
    /// field decoded, `#[node(validate)]`, then the children). The default
    /// accepts every state: a hand-written node then checks only in
    /// `reset`, after the checksum. A hand-written node with children
    /// should forward to them.
    fn check_state(&self, state: &State) -> Result<()> {
        let _ = state;
        Ok(())
    }

    /// The state that, passed to [`reset`](Stateful::reset), resumes right
    /// after the last item returned to this node's consumer (never the
    /// position of any read-ahead).
    #[rustfmt::skip]
    fn get_state(
        &self,
        cx: &Cx, // only a started pipeline has a `Cx`: call `Running::start(node)` / `.start()`, or wrap it in a `Loader`
    ) -> Result<State>;

    /// What this node is (type, order-affecting parameters, children), without
    /// running it.
    fn describe(&self) -> Description;

    /// Stops background work (threads, open handles). The node can be reset
    /// and used again afterwards. Parents forward it to their children.
    fn shutdown(&mut self) {}

    /// What this node's state promises beyond exact resume (see
    /// [`Resume`]); its [`describe`](Stateful::describe) records the same.
    ///
    /// The thread-backed nodes read it from their source's description:
    /// over a subtree whose order varies ([`Description::varying_order`])
    /// they do not restore by pulling again, and over a counted source
    /// ([`Description::counted_path`]) they work out the state after any
    /// item from one snapshot. `elastic::check` and `reshard` dispatch on it.
    ///
    /// The default, [`Resume::Replays`], promises nothing more and is right
    /// for any node. `#[derive(Node)]` returns what the struct says:
    /// `#[node(state, counts_items)]`, `#[node(counts_items = "child")]` or
    /// `#[node(resume = expr)]`.
    fn resume(&self) -> Resume {
        Resume::Replays
    }

    /// How many more results the current pass returns (items and `Err`s
    /// alike) and whether any may be an `Err`: see [`Hint`], whose bounds
    /// read as [`Iterator::size_hint`]'s. For a progress bar, or to size a
    /// buffer.
    ///
    /// It must be sound (see [`Hint`]). After a [`reset`](Stateful::reset)
    /// from a saved state it is what is left of the resumed pass, not the
    /// whole pass. It is meaningful only once the node was reset, and never
    /// blocks. What it cannot foresee: a panic in user code (a threaded node
    /// delivers one as an `Err` and may end the pass there), and a node used
    /// after [`shutdown`](Stateful::shutdown).
    ///
    /// The default, [`Hint::UNKNOWN`], says nothing and is always sound.
    /// `#[derive(Node)]` writes it only when asked: `#[node(size_hint =
    /// "child")]` forwards the single child's bounds, `#[node(size_hint)]`
    /// calls the author's [`SizeHint`]. A hand-written node whose count
    /// follows from its children's should build on theirs; one that adds no
    /// errors of its own keeps their `may_fail`, and a source that cannot
    /// fail says `false`.
    fn size_hint(&self) -> Hint {
        Hint::UNKNOWN
    }
}

/// The size hint of a node written with `#[derive(Node)]` and the container
/// attribute `#[node(size_hint)]`: the derive's [`Stateful::size_hint`]
/// calls it.
///
/// Use it when the node's count is not its single child's (a node that
/// filters, groups or expands, or a source); use `#[node(size_hint =
/// "child")]` when it is. The same soundness rules apply.
///
/// With both this trait and [`Stateful`] in scope (`nodes_std`'s prelude has
/// both), `node.size_hint()` on such a node is ambiguous (both have the
/// method, with the same result): write `Stateful::size_hint(&node)`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` asks for its own size hint with `#[node(size_hint)]`, but does not implement `SizeHint`",
    label = "no `SizeHint` impl",
    note = "write `impl SizeHint for {Self}` (`fn size_hint(&self) -> Hint`), or use `#[node(size_hint = \"child\")]` to forward the single child's hint"
)]
pub trait SizeHint {
    /// See [`Stateful::size_hint`].
    fn size_hint(&self) -> Hint;
}

impl<N: Node + ?Sized> Node for Box<N> {
    type Item = N::Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<Self::Item>> {
        (**self).next(cx)
    }
}

impl<N: Stateful + ?Sized> Stateful for Box<N> {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        (**self).reset(state)
    }

    fn check_state(&self, state: &State) -> Result<()> {
        (**self).check_state(state)
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        (**self).get_state(cx)
    }

    fn describe(&self) -> Description {
        (**self).describe()
    }

    fn shutdown(&mut self) {
        (**self).shutdown();
    }

    fn resume(&self) -> Resume {
        (**self).resume()
    }

    fn size_hint(&self) -> Hint {
        (**self).size_hint()
    }
}

/// The execution context handed down through [`Node::next`] and
/// [`Stateful::get_state`].
///
/// It is the proof that the pipeline was reset: only a running handle
/// ([`Running`](crate::Running), [`Loader`](crate::Loader)) constructs one,
/// after resetting its root. Node code only passes it on to its children.
///
/// ```compile_fail
/// use nodes_core::{Cx, Node};
/// fn advance<N: Node>(node: &mut N) {
///     // There is no way to make a `Cx` outside a running pipeline.
///     let mut cx = Cx::new();
///     node.next(&mut cx);
/// }
/// ```
pub struct Cx {
    /// Statistics sink, present only when a loader turned stats on.
    stats: Option<Box<Recorder>>,
    /// How many times the running handle has reset or dropped its pipeline,
    /// shared with the contexts forked from its own.
    resets: Arc<AtomicU64>,
    /// Made by [`WorkerCx::fork`], at that count: the context is stale once the
    /// count moves on, and hands its statistics over when dropped.
    forked: Option<u64>,
    /// Whether `observe` does more than run its body: statistics are on, or
    /// this worker's context outlived its pass. One test on every item's path.
    observed: bool,
    /// A node asked the threaded node pulling it for a snapshot after the
    /// current item (see [`Cx::request_snapshot`]).
    snapshot_requested: bool,
}

impl Drop for Cx {
    fn drop(&mut self) {
        if self.forked.is_some()
            && let Some(stats) = self.stats.take()
        {
            stats.finish();
        }
    }
}

impl fmt::Debug for Cx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cx")
            .field("stats", &self.stats.is_some())
            .finish()
    }
}

impl Cx {
    /// Only the running handles ([`Running`](crate::Running),
    /// [`Loader`](crate::Loader), [`Replay`](crate::Replay)) make contexts;
    /// worker threads fork theirs from one.
    pub(crate) fn new_running() -> Cx {
        Cx {
            stats: None,
            resets: Arc::default(),
            forked: None,
            observed: false,
            snapshot_requested: false,
        }
    }

    /// Makes every context forked from this one so far stale: the running
    /// handle reset its pipeline (a new pass) or dropped it, after joining
    /// its worker threads.
    pub(crate) fn renew(&self) {
        self.resets.fetch_add(1, Relaxed);
    }

    /// Whether this is a worker's context that outlived its pass.
    fn is_stale(&self) -> bool {
        self.forked
            .is_some_and(|at| at != self.resets.load(Relaxed))
    }

    pub(crate) fn enable_stats(&mut self) {
        self.stats.get_or_insert_with(Box::default);
        self.observed = true;
    }

    pub(crate) fn stats_snapshot(&self) -> Option<Stats> {
        self.stats.as_ref().map(|s| s.snapshot())
    }

    /// How many rows of finished worker threads the statistics keep.
    #[cfg(test)]
    pub(crate) fn retained_stats(&self) -> usize {
        self.stats.as_ref().map_or(0, |s| s.retained())
    }

    /// Asks the threaded node (`par_map`, `prefetch`) pulling this item, if
    /// any, to record its source's state right after it: a file reader
    /// does when it opens a file, so that the items a threaded node counts
    /// past its snapshot all come from one file (out of order, the items
    /// after this one wait for every item before it; this is what lets
    /// [`elastic`](https://docs.rs/nodes-std/latest/nodes_std/elastic/)
    /// resume them on another rank). Nothing happens without such a node.
    #[doc(hidden)]
    #[inline]
    pub fn request_snapshot(&mut self) {
        self.snapshot_requested = true;
    }

    /// Whether a node asked for a snapshot since the last call (see
    /// [`Cx::request_snapshot`]), clearing the request.
    #[doc(hidden)]
    #[inline]
    pub fn take_snapshot_request(&mut self) -> bool {
        std::mem::take(&mut self.snapshot_requested)
    }

    /// Whether statistics are being collected (to skip measuring otherwise).
    #[inline]
    pub fn stats_enabled(&self) -> bool {
        self.stats.is_some()
    }

    /// Whether the current call is timed: statistics are on and the call is
    /// part of the sample whose times are recorded (one outermost call in 16,
    /// with every call below it). A node that measures time itself, such as
    /// time blocked on a queue for [`record_blocked`](Cx::record_blocked),
    /// reads the clock only then.
    #[inline]
    pub fn timing(&self) -> bool {
        self.stats.as_ref().is_some_and(|s| s.timing())
    }

    /// Runs a node's `next` body, recording it in the statistics when they are
    /// on: an item if it returns `Ok(Some)`, and the time spent, excluding
    /// time inside observed children. With stats off this is just `body(self)`.
    ///
    /// On a worker thread whose pipeline was reset or dropped since the
    /// thread's context was forked, `body` is not run: the call is an
    /// [`Error::InvalidArgument`] naming `name`, so a node advanced with a
    /// context that outlived its pass refuses to run.
    ///
    /// ```
    /// # use nodes_core::{Cx, NodeId, Result};
    /// # struct Twice<S> { source: S }
    /// # impl<S: nodes_core::Node<Item = u32>> Twice<S> {
    /// fn next(&mut self, cx: &mut Cx) -> Result<Option<u32>> {
    ///     cx.observe(NodeId::of(self), "Twice", |cx| {
    ///         Ok(self.source.next(cx)?.map(|x| x * 2))
    ///     })
    /// }
    /// # }
    /// ```
    #[inline]
    pub fn observe<T>(
        &mut self,
        id: NodeId,
        name: &'static str,
        body: impl FnOnce(&mut Cx) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        if !self.observed {
            return body(self);
        }
        self.observe_slow(id, name, body)
    }

    #[cold]
    fn observe_slow<T>(
        &mut self,
        id: NodeId,
        name: &'static str,
        body: impl FnOnce(&mut Cx) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        self.check_live(name)?;
        if let Some(stats) = &mut self.stats {
            stats.enter(id, name);
        }
        let result = body(self);
        if let Some(stats) = &mut self.stats {
            stats.exit(matches!(result, Ok(Some(_))));
        }
        result
    }

    /// Refuses, naming `node`, a worker's context that outlived its pass:
    /// `observe` checks it for `next`, and every stock node's `get_state`
    /// (the derive's too) calls this. Not public API.
    #[doc(hidden)]
    #[inline]
    pub fn check_live(&self, node: &'static str) -> Result<()> {
        if self.observed && self.is_stale() {
            let why = "the context it was advanced with is from a pipeline that was reset or dropped since: a worker's context lasts one pass";
            return Err(Error::invalid_argument(node, why));
        }
        Ok(())
    }

    /// Shows the statistics of the child the current node calls next under
    /// `role`, the label the node's description gives that child
    /// ([`Description::child_as`]): a row `dataset web: Packer` rather than
    /// `Packer#2` when a mix has two `Packer` branches.
    #[inline]
    pub fn child_role(&mut self, role: &Arc<str>) {
        if let Some(stats) = &mut self.stats {
            stats.role = Some(Arc::clone(role));
        }
    }

    /// Records time the current node spent blocked on workers or a queue
    /// (kept only when the call is [timed](Cx::timing)).
    pub fn record_blocked(&mut self, waited: Duration) {
        if let Some(stats) = &mut self.stats {
            stats.blocked(waited);
        }
    }

    /// Records `n` bad records the current node dropped under its error
    /// policy (shown as [`NodeStats::skipped`](crate::NodeStats::skipped)).
    pub fn record_skipped(&mut self, n: u64) {
        if let Some(stats) = &mut self.stats {
            stats.skipped(n);
        }
    }

    /// Records the current node's queue depth.
    pub fn record_queue_depth(&mut self, depth: usize) {
        if let Some(stats) = &mut self.stats {
            stats.queue_depth(depth);
        }
    }
}

/// A worker thread's context: forked from the context of the node that
/// starts the thread, and lent to the worker only for the length of a
/// closure, so no code can keep a `Cx` past the call that lent it. Used
/// after the pipeline was reset or dropped, the nodes it advances refuse
/// it, naming themselves.
#[derive(Debug)]
pub struct WorkerCx(Cx);

impl WorkerCx {
    /// A context for a thread that works for the node observed in `cx` (a
    /// worker that pulls from a source that node owns). With statistics
    /// on, what the thread observes shows under that node, merged into the
    /// loader's statistics when this handle is dropped.
    pub fn fork(cx: &Cx) -> WorkerCx {
        WorkerCx(Cx {
            stats: cx.stats.as_ref().map(|s| Box::new(s.fork())),
            resets: Arc::clone(&cx.resets),
            forked: Some(cx.forked.unwrap_or_else(|| cx.resets.load(Relaxed))),
            observed: cx.stats.is_some(),
            snapshot_requested: false,
        })
    }

    /// Runs `f` with the context. A context that outlived its pass is
    /// observed from then on, so the nodes it advances refuse it.
    pub fn with<R>(&mut self, f: impl FnOnce(&mut Cx) -> R) -> R {
        self.0.observed |= self.0.is_stale();
        f(&mut self.0)
    }
}

/// The optional lazy initialisation of a derived node, run at the end of every
/// reset (after children and state fields are in place): open files, fill
/// [`Lazy`](crate::Lazy) slots, seek to a restored position.
///
/// Ask `#[derive(Node)]` to call it with the container attribute
/// `#[node(init)]`. Its bounds become the derived impl's bounds.
pub trait Init {
    /// `restored` tells whether the reset came with a saved state.
    ///
    /// To reject a restored state here, return [`Error::bad_state`] with the
    /// offending key of this node's state as the path (`"num_yielded"`, no
    /// leading `/`): the derive reports it at that key's full path.
    ///
    /// [`Error::bad_state`]: crate::Error::bad_state
    fn init(&mut self, restored: bool) -> Result<()>;
}

/// A derived node's own check of a saved state, run before any of it is
/// applied (after the derive has checked keys, the version and that every
/// state field decodes): cross-field rules such as "the position is within
/// the data". Ask `#[derive(Node)]` to call it with `#[node(validate)]`.
pub trait Validate {
    /// `Err` (use [`State::path_of`] for the path) if `state` cannot be applied.
    fn validate(&self, state: &State) -> Result<()>;
}
