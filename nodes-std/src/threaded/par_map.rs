//! [`ParallelMapper`]: a map run by a pool of threads, with exact resume.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use nodes_core::{BoxError, Cx, Error, Node, NodeId, Result, Stateful};

use crate::delegate::delegate_stateful;
use crate::policy::ErrorPolicy;
use crate::threaded::cancel::CancelHandle;
use crate::threaded::clock::SystemClock;
use crate::threaded::core::Threaded;
use crate::threaded::plan::{Layout, Plan, Snapshots};
use crate::threaded::worker::Stage;
use crate::transforms::{debug_fields, require};

const NAME: &str = "ParallelMapper";

/// Without `prebatch` or `max_concurrent`, the window starts with room for
/// [`START_CHUNK_ROOM`] items per worker and grows with the adaptive chunks
/// (two per worker) up to room for two chunks of this many items per worker.
/// torchdata's default is two items per worker: a cheap function then pays
/// a thread hand-over every item or two. An expensive one keeps the starting
/// window, so its items do not pile up in memory.
const DEFAULT_CHUNK_ROOM: usize = 256;

/// The starting window's room per worker: two chunks of this many items.
const START_CHUNK_ROOM: usize = 16;

/// The user's function, shared by every worker.
type MapFn<T, U> = dyn Fn(T) -> std::result::Result<U, BoxError> + Send + Sync;

/// How a [`ParallelMapper`] runs: built with [`ParallelOptions::new`] and
/// adjusted with the builder methods, then passed to [`NodeExt::par_map`].
///
/// | option | default | meaning |
/// | --- | --- | --- |
/// | `num_workers` | (required) | worker threads; `0` maps inline on the caller's thread |
/// | `in_order` | `true` | deliver in source order, or as items complete (over a file reader, a file's items after those of the files before it) |
/// | `max_concurrent` | `32 * num_workers`, growing while the function is cheap (two adaptive chunks per worker) up to `512 * num_workers` (`2 * num_workers * k` with `prebatch(k)`) | items pulled from the source and not yet returned, at most |
/// | `snapshot_frequency` | paced by the source's work | take a source snapshot every this many items |
/// | `prebatch` | (adaptive) | items handed to a worker at once |
/// | `on_error` | `Deliver` | what to do with a bad record ([`ErrorPolicy`]) |
///
/// By default the source's snapshots are paced by its work, as a
/// [`Prefetcher`](crate::Prefetcher)'s are: one at the end of a chunk once
/// the source has worked for 5 ms (and 32 times what the last snapshot
/// cost) since the previous one, and at least one every 65,536 items. A
/// restore then replays (pulls again, but does not map) at most `65,536 +
/// max_concurrent` items, about 5 ms of the source's work in the common case; the state
/// records that bound as `max_offset`. A source that counts its items (a
/// wrapper over an iterator, a sampler) needs no snapshot between its
/// items, and nothing is replayed over it.
///
/// Out of order, an item past a point where the source asked for a
/// snapshot (a file reader does when it opens a file) waits until every
/// item before that point and the point's own item are delivered, so the
/// items a state counts past its snapshot come from one file.
///
/// An explicit `snapshot_frequency(n)` takes a snapshot every `n` items
/// instead, whatever the timing, and bounds the replay by `n +
/// max_concurrent` items: `1` replays nothing but pays a source `get_state`
/// per item; a value above the dataset size snapshots only at the start of
/// each pass.
///
/// ```
/// use nodes_std::ParallelOptions;
///
/// let options = ParallelOptions::new(8).in_order(false).max_concurrent(32);
/// # let _ = options;
/// ```
///
/// [`NodeExt::par_map`]: crate::NodeExt::par_map
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParallelOptions {
    num_workers: usize,
    in_order: bool,
    max_concurrent: Option<usize>,
    snapshot_frequency: Option<usize>,
    on_error: ErrorPolicy,
    prebatch: Option<usize>,
}

impl ParallelOptions {
    /// The most worker threads one `ParallelMapper` may have.
    pub const MAX_WORKERS: usize = 1024;

    /// Options for `num_workers` threads (`0`: map inline), in order,
    /// `max_concurrent = 32 * num_workers` (growing while the function is
    /// cheap, see the table above), snapshots paced by the source's work.
    pub fn new(num_workers: usize) -> Self {
        ParallelOptions {
            num_workers,
            in_order: true,
            max_concurrent: None,
            snapshot_frequency: None,
            on_error: ErrorPolicy::Deliver,
            prebatch: None,
        }
    }

    /// Deliver in source order (`true`, the default) or in completion order.
    ///
    /// Over a filter, `try_map`, shuffle, pack, mix, `flat_map`,
    /// `interleave` or out-of-order `par_map` that reads files, the node
    /// delivers in source order whatever this says: what it delivered past
    /// a gap there would be no position of the files, and its states could
    /// not be [resharded](crate::elastic). Its description says which order
    /// it keeps (`Resume::ReadsAhead`).
    pub fn in_order(mut self, in_order: bool) -> Self {
        self.in_order = in_order;
        self
    }

    /// At most this many items between "pulled from the source" and "returned
    /// to the consumer", including items being mapped and items waiting for
    /// their turn. Must be at least 1.
    pub fn max_concurrent(mut self, max_concurrent: usize) -> Self {
        self.max_concurrent = Some(max_concurrent);
        self
    }

    /// Snapshot the source every this many items, instead of pacing the
    /// snapshots by the source's work (see the table above). Must be at
    /// least 1.
    pub fn snapshot_frequency(mut self, snapshot_frequency: usize) -> Self {
        self.snapshot_frequency = Some(snapshot_frequency);
        self
    }

    /// What to do with an item whose function (or source) failed: see
    /// [`ErrorPolicy`]. The default delivers the `Err` as one item and goes
    /// on, with any number of workers.
    pub fn on_error(mut self, policy: ErrorPolicy) -> Self {
        self.on_error = policy;
        self
    }

    /// Hands items to a worker `k` at a time (torchdata's `prebatch`): a
    /// worker pulls `k` items under one hold of the source lock, maps them,
    /// and hands the `k` results over at once, so a cheap function pays one
    /// hand-over per `k` items. Without it, workers choose their own chunk
    /// size (growing it while the function is cheap). Positions stay per
    /// item: a resume is exact whatever `k` was. `max_concurrent` still
    /// counts items, and defaults to `2 * num_workers * k`. Must be at
    /// least 1.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let options = ParallelOptions::new(2).prebatch(64);
    /// let out: Vec<u64> = IterableWrapper::new(0..1000u64)
    ///     .par_map(|x| Ok(x + 1), options)?
    ///     .start()?
    ///     .collect::<Result<_>>()?;
    /// assert_eq!(out, (1..=1000).collect::<Vec<_>>());
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    pub fn prebatch(mut self, k: usize) -> Self {
        self.prebatch = Some(k);
        self
    }

    /// Checks the options and fills in the defaults.
    fn resolve(self) -> Result<Plan> {
        let (max, found) = (Self::MAX_WORKERS, self.num_workers);
        if found > max {
            let message = format!("num_workers must be at most {max}, found {found}");
            return Err(Error::invalid_argument(NAME, message));
        }
        let why = "max_concurrent must be at least 1 (it bounds the items in flight), found 0";
        require(self.max_concurrent != Some(0), NAME, why)?;
        let why = "snapshot_frequency must be at least 1, found 0; to snapshot only at the start of each pass, use a value larger than the dataset";
        require(self.snapshot_frequency != Some(0), NAME, why)?;
        let why = "prebatch must be at least 1 (items handed to a worker at once), found 0";
        require(self.prebatch != Some(0), NAME, why)?;
        // Room for two hand-overs per worker: of `prebatch` items, or of
        // as many as the adaptive chunks may grow to while the function is
        // cheap (the window then starts small and follows them).
        let two_chunks_each =
            |chunk: usize| self.num_workers.saturating_mul(2).saturating_mul(chunk);
        let default = two_chunks_each(self.prebatch.unwrap_or(DEFAULT_CHUNK_ROOM));
        let max_in_flight = self.max_concurrent.unwrap_or(default).max(1);
        // A bound the user chose holds from the first item.
        let min_in_flight = match (self.max_concurrent, self.prebatch) {
            (None, None) => two_chunks_each(START_CHUNK_ROOM).min(max_in_flight),
            _ => max_in_flight,
        };
        // Each worker may hold an equal share of the credits at once.
        let share = (max_in_flight / self.num_workers.max(1)).max(1);
        let every = |n| Snapshots::Every(n as u64);
        Ok(Plan {
            node: NAME,
            thread_name: "nodes-par-map",
            workers: self.num_workers,
            in_order: self.in_order,
            max_in_flight,
            max_chunk: self.prebatch.unwrap_or(share),
            adaptive_chunks: self.prebatch.is_none(),
            min_in_flight,
            snapshots: self.snapshot_frequency.map_or(Snapshots::Paced, every),
            layout: Layout::Indexed,
            policy: self.on_error,
            spin: false,
        })
    }
}

/// This struct is created by [`NodeExt::par_map`]. See its documentation for more.
///
/// Applies a function to every item of its source on a pool of
/// `num_workers` OS threads (or inline on the caller's thread when
/// `num_workers` is 0).
///
/// `ParallelMapper` is written by hand rather than with `#[derive(Node)]`:
/// threads cannot be expressed by the derive. Its source lives behind a lock
/// shared with the worker threads for the length of a pass (a plain
/// `#[node(child)]` field is owned by the node alone), and its state is the
/// consumer's position, assembled from snapshots the workers take, rather
/// than a set of fields.
///
/// # Ordering
///
/// With `in_order` (the default) the output is exactly the serial map's
/// output, whatever the timing of the workers. Without it, items come as they
/// complete: the same multiset, in an order that varies from run to run.
///
/// Two kinds of source make it deliver in source order and record the
/// source's state with every item, whatever the options: a source whose
/// order varies between runs (it cannot be replayed), and a `filter`,
/// `try_map` or mix that reads an [`ElasticSampler`](crate::ElasticSampler)
/// (so that [`elastic::reshard`](crate::elastic::reshard) knows which
/// positions stand behind every item delivered).
///
/// A worker pulls a chunk of items from the source under a lock held only
/// while pulling (never while the function runs), maps them, and hands the
/// chunk over at once; chunks start at one item and grow while the function
/// is cheap. At most `max_concurrent` items are between the source and the
/// consumer, so memory does not depend on the dataset size; on the default
/// bound the window starts at 32 items per worker and grows with the chunks
/// (up to 512 per worker), so an expensive function keeps few items in
/// memory and a cheap one pays few thread hand-overs.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::ParallelOptions;
///
/// // An explicit bound holds from the first item, whatever the chunks.
/// let options = ParallelOptions::new(2).max_concurrent(8);
/// let out: Vec<u64> = IterableWrapper::new(0..100u64)
///     .par_map(|x| Ok(x * 2), options)?
///     .start()?
///     .collect::<Result<_>>()?;
/// assert_eq!(out, (0..100).map(|x| x * 2).collect::<Vec<_>>());
/// # Ok::<(), nodes_std::Error>(())
/// ```
///
/// # State
///
/// `{"snapshot": <source state>, "snapshot_index": n, "steps_since_snapshot": k,
/// "delivered_ahead": [offsets], "max_offset": m}`: the source state taken after item
/// `snapshot_index - 1` (by the worker that pulled it), the number of items
/// after it that the consumer received, and — out of order only — the offsets
/// (from `snapshot_index`) of items received beyond the first gap. It
/// describes only what the consumer received, never the read-ahead, and
/// restoring it resumes exactly: the source is reset to the snapshot and the
/// received items are skipped (pulled again but not mapped), so the restored
/// run yields precisely the items not yet received, each once, in either
/// mode. States are interchangeable between modes and worker counts.
/// `"max_offset": m` is the most the writer could have recorded after its
/// snapshot (its `snapshot_frequency`, or 65,536 when paced, +
/// `max_concurrent` + twice the span of the skips it was
/// restored with, or its largest offset delivered ahead):
/// a `steps_since_snapshot` or an offset
/// beyond it is refused when the state is offered, so a restore never
/// replays more than `m` items, whatever the options it is restored with.
/// Since `m` travels with the state, the restoring node also refuses a
/// count beyond a limit of its own that no state can raise: 16 times its
/// `snapshot_frequency` (at least 65,536) plus its `max_concurrent`.
/// An offset that names an item past the source's end is refused when the
/// state is offered if the source knows its end (the upper bound of its
/// size hint after the replay), else as a bad state when the pass gets there.
/// Once the consumer has received the end of the pass, the snapshot is the
/// source's state past its end, so that the next pass after a restore starts
/// exactly as it would have without one.
///
/// Replaying needs a source that yields the same items again after a
/// restore. A source whose order varies from run to run (an out-of-order
/// `ParallelMapper`) does not: above one, deliver in order with
/// `snapshot_frequency(1)` (every item then carries its own snapshot and
/// nothing is replayed), or put the out-of-order map on top.
///
/// A new pass (`reset(None)`) after one the consumer stopped early first puts
/// the source back where the consumer stood, then resets it: whatever the
/// workers' read-ahead did (a `Cycler` below wrapping around and moving a
/// sampler to its next epoch) does not leak into the next pass.
///
/// # Errors
///
/// A function that returns `Err` becomes [`Error::User`], and one that panics
/// becomes [`Error::Panicked`] with the panic message; both carry the item's
/// index. A source error is passed on unchanged. With workers, in order, the
/// error arrives at the failed item's position, after every item before it;
/// out of order it arrives as soon as it happens. The other workers then stop,
/// and the pass is over: `next` returns `Ok(None)` until the next `reset`. The
/// state still points before the failed item, so restoring it retries that
/// item. Inline (`num_workers == 0`), like a plain map, an error is returned
/// and the next call carries on with the following item.
///
/// # Shutdown
///
/// `reset`, [`shutdown`](Stateful::shutdown) and drop stop every worker and join
/// it before returning; the source is only touched again once no worker is
/// left. A worker inside the user's function (or a source's `next`) is waited
/// for, so a call that never returns makes them wait too.
///
/// ```
/// use nodes_std::{IterableWrapper, NodeExt, ParallelOptions, Result};
///
/// let squares = || IterableWrapper::new(0..6u64).par_map(|x| Ok(x * x), ParallelOptions::new(3));
/// let mut run = squares()?.start()?;
/// assert_eq!(run.next().transpose()?, Some(0));
/// assert_eq!(run.next().transpose()?, Some(1));
/// let saved = run.get_state()?;
/// drop(run);
///
/// // A fresh pipeline resumes right after the items received.
/// let rest: Vec<u64> = squares()?.start_from(&saved)?.collect::<Result<_>>()?;
/// assert_eq!(rest, [4, 9, 16, 25]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
///
/// [`NodeExt::par_map`]: crate::NodeExt::par_map
#[must_use = "nodes do nothing until started"]
pub struct ParallelMapper<N: Node, U> {
    core: Threaded<N, MapStage<N::Item, U>, U>,
}

/// The per-item work: the user's function, with its error attributed. The
/// `fn` pointer: the stage holds no `T`, so it is `Send + Sync` whatever `T`
/// is.
struct MapStage<T, U>(Box<MapFn<T, U>>, PhantomData<fn(T)>);

impl<T: 'static, U: 'static> Stage<T, U> for MapStage<T, U> {
    #[inline]
    fn apply(&self, index: u64, item: T) -> Result<U> {
        (self.0)(item).map_err(|e| Error::user(NAME, Some(index), e))
    }
}

impl<N: Node, U> fmt::Debug for ParallelMapper<N, U> {
    debug_fields!(NAME, finish_non_exhaustive; source = (core.source()),
        num_workers = (core.plan.workers), in_order = (core.plan.in_order),
        max_concurrent = (core.plan.max_in_flight), snapshots = (core.plan.snapshots),
        on_error = (core.plan.policy));
}

impl<N: Node + 'static, U: Send + 'static> ParallelMapper<N, U>
where
    N::Item: Send + 'static,
{
    /// See [`NodeExt::par_map`](crate::NodeExt::par_map).
    pub(crate) fn new<F>(source: N, f: F, options: ParallelOptions) -> Result<Self>
    where
        F: Fn(N::Item) -> std::result::Result<U, BoxError> + Send + Sync + 'static,
    {
        let stage = MapStage(Box::new(f), PhantomData);
        let core = Threaded::new(source, stage, options.resolve()?, Arc::new(SystemClock));
        Ok(ParallelMapper { core })
    }

    /// A handle that wakes this node's consumer from its wait for the
    /// workers, from another thread: see [`CancelHandle`].
    pub fn cancel_handle(&self) -> CancelHandle {
        self.core.cancel_handle()
    }
}

impl<N: Node + 'static, U: Send + 'static> Node for ParallelMapper<N, U>
where
    N::Item: Send + 'static,
{
    type Item = U;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        cx.observe(NodeId::of(self), NAME, |cx| self.core.next(cx))
    }
}

impl<N: Node, U> nodes_core::NodeName for ParallelMapper<N, U> {
    const NAME: &'static str = NAME;
}

impl<N: Node + 'static, U: Send + 'static> Stateful for ParallelMapper<N, U>
where
    N::Item: Send + 'static,
{
    // The source's hint plus the items read ahead (see
    // `Threaded::size_hint`); the function may fail on any item.
    delegate_stateful!(core: reset, check_state, get_state, shutdown, describe, resume, size_hint);
}

// A concrete `ParallelMapper` that was only constructed has no `next` or
// `get_state`: calling them is a compile error that says to start the pipeline.
nodes_core::__started_guards!(impl[N: Node, U] ParallelMapper<N, U>);

// Under loom the hub is built from loom's primitives: these tests use std's.
#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::threaded::clock::ManualClock;
    use crate::threaded::snapshot;
    use crate::{IterableWrapper, NodeExt};

    /// `0..items` through a filter (whose state is no count of items, so it
    /// is snapshotted), counting its pulls in `pulls` and moving `clock` on
    /// by `work` per item, mapped on two workers with default snapshots.
    fn mapper(
        items: u64,
        clock: &Arc<ManualClock>,
        work: Duration,
        pulls: &Arc<AtomicU64>,
    ) -> ParallelMapper<impl Node<Item = u64> + use<>, u64> {
        let (counted, moved) = (Arc::clone(pulls), Arc::clone(clock));
        let source = IterableWrapper::new(0..items)
            .map(move |x| {
                counted.fetch_add(1, Ordering::Relaxed);
                moved.advance(work);
                x
            })
            .filter(|_| true);
        let stage = MapStage(Box::new(Ok), PhantomData);
        let plan = ParallelOptions::new(2).resolve().unwrap();
        assert_eq!(plan.snapshots, Snapshots::Paced);
        ParallelMapper {
            core: Threaded::new(source, stage, plan, Arc::clone(clock) as _),
        }
    }

    /// Restores the state taken after `cut` items and checks that the rest
    /// comes exactly; returns how many items the source delivered again.
    fn replayed(items: u64, cut: u64, clock: &Arc<ManualClock>, work: Duration) -> u64 {
        let ignored = Arc::default();
        let mut run = mapper(items, clock, work, &ignored).start().unwrap();
        for expected in 0..cut {
            assert_eq!(run.next().transpose().unwrap(), Some(expected));
        }
        let state = run.get_state().unwrap();
        drop(run);
        let pulls = Arc::default();
        let resumed = mapper(items, clock, work, &pulls)
            .start_from(&state)
            .unwrap();
        let rest: Vec<u64> = resumed.map(|r| r.unwrap()).collect();
        assert_eq!(rest, (cut..items).collect::<Vec<_>>(), "cut {cut}");
        pulls.load(Ordering::Relaxed) - (items - cut)
    }

    /// Paced by the source's work: with every item taking 1 ms of source
    /// time, a restore at any cut replays at most the 5 ms the snapshots
    /// are apart.
    #[test]
    fn paced_snapshots_replay_at_most_five_ms_of_source_work() {
        let clock = Arc::new(ManualClock::new());
        let work = Duration::from_millis(1);
        let mut most = 0;
        for cut in 0..=120 {
            let replay = replayed(120, cut, &clock, work);
            assert!(replay <= 5, "cut {cut}: {replay} items replayed");
            most = most.max(replay);
        }
        assert!(most > 0, "the cuts fall between snapshots");
    }

    /// With a clock that never moves (a source too fast to measure), a
    /// snapshot is still taken every 65,536 items: no cut replays more
    /// than that plus `max_concurrent`, the bound `par_map` documents.
    #[test]
    fn paced_snapshots_replay_at_most_65536_items_plus_the_window() {
        const ITEMS: u64 = 2 * (1 << 16) + 3000;
        let bound = (1 << 16) + 2 * 2 * DEFAULT_CHUNK_ROOM as u64;
        let clock = Arc::new(ManualClock::new());
        let mut most = 0;
        for cut in [1, 1 << 15, (1 << 16) + 1000, 2 * (1 << 16) - 1, ITEMS] {
            let replay = replayed(ITEMS, cut, &clock, Duration::ZERO);
            assert!(replay <= bound, "cut {cut}: {replay} items replayed");
            most = most.max(replay);
        }
        assert!(most >= 1 << 15, "no snapshot between: {most}");
    }

    /// Mapped on two workers, one item at a time: item `slow` is mapped
    /// only once item `after` was, so the chunks after it reach the
    /// consumer first, whatever the timing.
    fn overtaken(
        slow: u64,
        after: u64,
    ) -> ParallelMapper<IterableWrapper<std::ops::Range<u64>>, u64> {
        let mapped = Arc::new(AtomicU64::new(0));
        let f = move |x: u64| {
            if x == slow {
                while mapped.load(Ordering::Acquire) < after {
                    std::thread::yield_now();
                }
            } else {
                mapped.fetch_max(x, Ordering::AcqRel);
            }
            Ok(x)
        };
        let options = ParallelOptions::new(2).prebatch(1).max_concurrent(8);
        IterableWrapper::new(0..6u64).par_map(f, options).unwrap()
    }

    /// Chunks that arrive before their turn wait for it.
    #[test]
    fn early_chunks_are_released_in_source_order() {
        let got: Vec<u64> = overtaken(0, 2)
            .start()
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(got, [0, 1, 2, 3, 4, 5]);
    }

    /// Restored skips are passed over: the chunk after them is the next
    /// one's turn, even when it arrived first.
    #[test]
    fn early_chunks_after_restored_skips_are_released_in_turn() {
        let mut state = overtaken(1, 4).start().unwrap().get_state().unwrap();
        state.insert(snapshot::DELIVERED_AHEAD, [2u64, 3]).unwrap();
        state.insert(snapshot::MAX_OFFSET, 1u64 << 20).unwrap();
        let run = overtaken(1, 4).start_from(&state).unwrap();
        let got: Vec<u64> = run.map(|r| r.unwrap()).collect();
        assert_eq!(got, [0, 1, 4, 5]);
    }
}
