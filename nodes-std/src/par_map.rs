//! [`ParallelMapper`]: a map run by a pool of threads, with exact resume.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use nodes_core::__private::worker_cx;
use nodes_core::{
    BoxError, Cx, Description, Error, Node, NodeId, ResetFlag, Result, State, Stateful,
};

use crate::worker::panic::catch;
use crate::worker::permits::Permits;
use crate::worker::reorder::ReorderBuffer;
use crate::worker::snapshot::{self, Cursor, Saved};
use crate::worker::thread::{self, Workers, lock};

const NAME: &str = "ParallelMapper";

/// The user's function, shared by every worker.
type MapFn<T, U> = dyn Fn(T) -> std::result::Result<U, BoxError> + Send + Sync;

/// How a [`ParallelMapper`] runs: built with [`ParallelOptions::new`] and
/// adjusted with the builder methods, then passed to [`NodeExt::par_map`].
///
/// | option | default | meaning |
/// | --- | --- | --- |
/// | `num_workers` | (required) | worker threads; `0` maps inline on the caller's thread |
/// | `in_order` | `true` | deliver in source order, or as items complete |
/// | `max_concurrent` | `2 * num_workers` | items pulled from the source and not yet returned, at most |
/// | `snapshot_frequency` | `1` | take a source snapshot every this many items |
///
/// A larger `snapshot_frequency` costs fewer source `get_state` calls while
/// running, and more items to skip (pulled from the source again, but not
/// mapped) when a checkpoint is restored. Set it above the dataset size to
/// snapshot only at the start of each pass.
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
    snapshot_frequency: usize,
}

impl ParallelOptions {
    /// The most worker threads one `ParallelMapper` may have.
    pub const MAX_WORKERS: usize = 1024;

    /// Options for `num_workers` threads (`0`: map inline), in order,
    /// `max_concurrent = 2 * num_workers`, a snapshot after every item.
    pub fn new(num_workers: usize) -> Self {
        ParallelOptions {
            num_workers,
            in_order: true,
            max_concurrent: None,
            snapshot_frequency: 1,
        }
    }

    /// Deliver in source order (`true`, the default) or in completion order.
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

    /// Snapshot the source every this many items. Must be at least 1.
    pub fn snapshot_frequency(mut self, snapshot_frequency: usize) -> Self {
        self.snapshot_frequency = snapshot_frequency;
        self
    }

    /// Checks the options and fills in the defaults.
    fn resolve(self) -> Result<Resolved> {
        if self.num_workers > Self::MAX_WORKERS {
            return Err(Error::invalid_argument(
                NAME,
                format!(
                    "num_workers must be at most {}, found {}",
                    Self::MAX_WORKERS,
                    self.num_workers
                ),
            ));
        }
        if self.max_concurrent == Some(0) {
            return Err(Error::invalid_argument(
                NAME,
                "max_concurrent must be at least 1 (it bounds the items in flight), found 0",
            ));
        }
        if self.snapshot_frequency == 0 {
            return Err(Error::invalid_argument(
                NAME,
                "snapshot_frequency must be at least 1, found 0; to snapshot only at the start of each pass, use a value larger than the dataset",
            ));
        }
        Ok(Resolved {
            num_workers: self.num_workers,
            in_order: self.in_order,
            max_concurrent: self
                .max_concurrent
                .unwrap_or(self.num_workers.saturating_mul(2))
                .max(1),
            snapshot_frequency: self.snapshot_frequency as u64,
        })
    }
}

/// Validated options.
#[derive(Debug, Clone, Copy)]
struct Resolved {
    num_workers: usize,
    in_order: bool,
    max_concurrent: usize,
    snapshot_frequency: u64,
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
/// Items are pulled from the source one at a time, under a lock held only
/// while pulling (never while the function runs). At most `max_concurrent`
/// items are between the source and the consumer, so memory does not depend
/// on the dataset size.
///
/// # State
///
/// `{"snapshot": <source state>, "snapshot_index": n, "steps_since_snapshot": k,
/// "delivered_ahead": [offsets]}`: the source state taken after item
/// `snapshot_index - 1` (by the worker that pulled it), the number of items
/// after it that the consumer received, and — out of order only — the offsets
/// (from `snapshot_index`) of items received beyond the first gap. It
/// describes only what the consumer received, never the read-ahead, and
/// restoring it resumes exactly: the source is reset to the snapshot and the
/// received items are skipped (pulled again but not mapped), so the restored
/// run yields precisely the items not yet received, each once, in either
/// mode. States are interchangeable between modes and worker counts.
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
    /// The source and its pass bookkeeping; shared with the workers while a
    /// pass runs, the consumer's alone otherwise.
    puller: Arc<Mutex<Puller<N>>>,
    f: Arc<MapFn<N::Item, U>>,
    options: Resolved,
    /// The source's description, refreshed whenever the source is at home.
    source_description: Description,
    flag: ResetFlag,
    phase: Phase<U>,
    /// What the consumer received (with workers; inline the source's own state is exact).
    cursor: Cursor,
    /// The consumer received the end of data: the source stands where the
    /// consumer does.
    ended: bool,
}

impl<N: Node, U> fmt::Debug for ParallelMapper<N, U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(NAME)
            .field("source", &self.source_description.to_string())
            .field("num_workers", &self.options.num_workers)
            .field("in_order", &self.options.in_order)
            .field("max_concurrent", &self.options.max_concurrent)
            .field("snapshot_frequency", &self.options.snapshot_frequency)
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

/// Where the node stands.
enum Phase<U> {
    /// Never reset, or the last reset failed.
    Idle,
    /// `num_workers == 0`: the consumer pulls and maps.
    Inline,
    /// Workers are running.
    Running(Pool<U>),
    /// The pass ended (end of data, or an error was delivered); workers joined.
    Finished,
    /// `shutdown` was called; workers joined.
    ShutDown,
}

impl<U> fmt::Debug for Phase<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Idle => "Idle",
            Phase::Inline => "Inline",
            Phase::Running(_) => "Running",
            Phase::Finished => "Finished",
            Phase::ShutDown => "ShutDown",
        })
    }
}

/// The source, owned by whoever pulls, and the numbering of the pass.
struct Puller<N: Node> {
    source: N,
    /// The index the next pulled item gets.
    next_index: u64,
    /// Indices delivered before a restore: pulled, not mapped, not sent.
    skip: BTreeSet<u64>,
    /// The source ended or failed: nobody pulls again this pass.
    done: bool,
    /// Where `skip` came from in the restored state, for the error when the
    /// source ends before a skipped index.
    skip_path: String,
}

/// One pull from the source.
enum Pulled<T> {
    Item(u64, T, Option<State>),
    End(u64),
    Failed(u64, Error),
}

impl<N: Node> Puller<N> {
    /// Pulls the next item to process, passing over the skipped ones.
    ///
    /// For a worker (`snapshot_frequency` given), a panic in the source
    /// becomes an error, and the source state is recorded after every item
    /// whose index + 1 is a multiple of the frequency (before the item is
    /// handed on, so the snapshot always travels with its item). Inline, the
    /// caller's thread is the one pulling, so a source panic simply unwinds
    /// to the caller as in any inline node.
    fn pull(&mut self, cx: &mut Cx, snapshot_frequency: Option<u64>) -> Pulled<N::Item> {
        loop {
            let index = self.next_index;
            let pulled = if snapshot_frequency.is_some() {
                catch(NAME, Some(index), || self.source.next(cx))
            } else {
                self.source.next(cx)
            };
            match pulled {
                Ok(Some(item)) => {
                    self.next_index += 1;
                    if !self.skip.is_empty() && self.skip.remove(&index) {
                        // Delivered before the restore. A snapshot due here is
                        // not taken: the consumer adopts the next one instead.
                        continue;
                    }
                    let snapshot = match snapshot_frequency {
                        Some(freq) if (index + 1).is_multiple_of(freq) => {
                            match catch(NAME, Some(index), || self.source.get_state(cx)) {
                                Ok(state) => Some(state),
                                Err(e) => {
                                    self.done = true;
                                    return Pulled::Failed(index, e);
                                }
                            }
                        }
                        _ => None,
                    };
                    return Pulled::Item(index, item, snapshot);
                }
                Ok(None) => {
                    self.done = true;
                    if let Some(&beyond) = self.skip.iter().next() {
                        // Reported once: inline, the next call sees the end.
                        self.skip.clear();
                        return Pulled::Failed(
                            index,
                            Error::bad_state(
                                self.skip_path.clone(),
                                format!(
                                    "the restored state says item {beyond} was delivered, but the source ended after {index} items: the state does not belong to this source"
                                ),
                            ),
                        );
                    }
                    return Pulled::End(index);
                }
                Err(e) => {
                    self.done = true;
                    return Pulled::Failed(index, e);
                }
            }
        }
    }
}

/// What a worker sends back: an item's result, or the end of the pass.
struct Msg<U> {
    index: u64,
    outcome: Outcome<U>,
    snapshot: Option<State>,
}

enum Outcome<U> {
    Item(U),
    Failed(Error),
    End,
}

/// The running workers and the consumer's ends of their channels.
struct Pool<U> {
    results: Receiver<Msg<U>>,
    permits: Arc<Permits>,
    halt: Arc<AtomicBool>,
    workers: Workers,
    /// In order: results that arrived before their turn.
    reorder: ReorderBuffer<(Outcome<U>, Option<State>)>,
    /// Out of order: the index of the end of the pass, once known.
    end_at: Option<u64>,
}

impl<U> Pool<U> {
    /// Stops and joins every worker. Idempotent.
    ///
    /// The order matters: raise `halt` (no new pulls), close the permits
    /// (wakes workers waiting for room), drop our receiver (a worker's send
    /// fails instead of piling up), then join. A worker inside the user's
    /// function finishes that item first.
    fn stop(&mut self) {
        self.halt.store(true, Ordering::SeqCst);
        self.permits.close();
        drop(std::mem::replace(
            &mut self.results,
            crossbeam_channel::never(),
        ));
        self.workers.join();
    }

    /// The consumer's `next`: the next result in order (or in completion
    /// order), blocking on the result channel, never polling.
    fn next(&mut self, cursor: &mut Cursor, in_order: bool, cx: &mut Cx) -> Result<Option<U>> {
        if cx.stats_enabled() {
            cx.record_queue_depth(self.results.len());
        }
        let (index, outcome, snapshot) = loop {
            if in_order {
                let want = cursor.low();
                if let Some((outcome, snapshot)) = self.reorder.take(want) {
                    break (want, outcome, snapshot);
                }
            } else if self.end_at.is_some_and(|end| cursor.low() >= end) {
                return Ok(None);
            }
            let waiting = cx.timing().then(Instant::now);
            let received = self.results.recv();
            if let Some(started) = waiting {
                cx.record_blocked(started.elapsed());
            }
            let Ok(msg) = received else {
                // Every worker exited without reporting the item we wait for.
                // Workers always report, so this is a defect; fail, never hang.
                return Err(Error::Panicked {
                    node: NAME,
                    index: Some(cursor.low()),
                    message: "worker threads exited without delivering this item".to_owned(),
                });
            };
            match (in_order, msg.outcome) {
                (true, outcome) if msg.index == cursor.low() => {
                    break (msg.index, outcome, msg.snapshot);
                }
                (true, outcome) => self.reorder.insert(msg.index, (outcome, msg.snapshot)),
                (false, Outcome::End) => self.end_at = Some(msg.index),
                (false, outcome) => break (msg.index, outcome, msg.snapshot),
            }
        };
        match outcome {
            Outcome::Item(value) => {
                cursor.deliver(index, snapshot);
                self.permits.release(1);
                Ok(Some(value))
            }
            Outcome::Failed(e) => Err(e),
            Outcome::End => Ok(None),
        }
    }
}

impl<U> Drop for Pool<U> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Everything one worker thread needs.
struct WorkerCtx<N: Node, U> {
    puller: Arc<Mutex<Puller<N>>>,
    f: Arc<MapFn<N::Item, U>>,
    results: Sender<Msg<U>>,
    permits: Arc<Permits>,
    halt: Arc<AtomicBool>,
    snapshot_frequency: u64,
}

impl<N: Node, U> WorkerCtx<N, U> {
    /// A worker: take a permit, pull one item under the source lock, map it
    /// with the lock released, send the result; until the pass ends, an error
    /// halts the pool, or the owner stops it.
    fn run(self) {
        let mut cx = worker_cx();
        loop {
            if self.halt.load(Ordering::Acquire) || !self.permits.acquire() {
                return;
            }
            let pulled = {
                let mut puller = lock(&self.puller);
                if puller.done || self.halt.load(Ordering::Acquire) {
                    return;
                }
                puller.pull(&mut cx, Some(self.snapshot_frequency))
            };
            let msg = match pulled {
                Pulled::Item(index, item, snapshot) => {
                    let outcome = match catch(NAME, Some(index), || {
                        (self.f)(item).map_err(|e| Error::user(NAME, Some(index), e))
                    }) {
                        Ok(value) => Outcome::Item(value),
                        Err(e) => {
                            // Items before this one are already pulled (pulls
                            // are in index order) and still get delivered.
                            self.halt.store(true, Ordering::Release);
                            Outcome::Failed(e)
                        }
                    };
                    Msg {
                        index,
                        outcome,
                        snapshot,
                    }
                }
                Pulled::End(index) => Msg {
                    index,
                    outcome: Outcome::End,
                    snapshot: None,
                },
                Pulled::Failed(index, e) => {
                    self.halt.store(true, Ordering::Release);
                    Msg {
                        index,
                        outcome: Outcome::Failed(e),
                        snapshot: None,
                    }
                }
            };
            let last = !matches!(msg.outcome, Outcome::Item(_));
            if self.results.send(msg).is_err() || last {
                return;
            }
        }
    }
}

impl<N, U> ParallelMapper<N, U>
where
    N: Node + 'static,
    N::Item: Send + 'static,
    U: Send + 'static,
{
    /// See [`NodeExt::par_map`](crate::NodeExt::par_map).
    pub(crate) fn new<F>(source: N, f: F, options: ParallelOptions) -> Result<Self>
    where
        F: Fn(N::Item) -> std::result::Result<U, BoxError> + Send + Sync + 'static,
    {
        let options = options.resolve()?;
        Ok(ParallelMapper {
            source_description: source.describe(),
            puller: Arc::new(Mutex::new(Puller {
                source,
                next_index: 0,
                skip: BTreeSet::new(),
                done: false,
                skip_path: String::new(),
            })),
            f: Arc::new(f),
            options,
            flag: ResetFlag::default(),
            phase: Phase::Idle,
            cursor: Cursor::new(State::new(), 0, []),
            ended: false,
        })
    }

    /// Stops and joins the workers, if any are running.
    fn stop_workers(&mut self) {
        if let Phase::Running(pool) = &mut self.phase {
            pool.stop();
        }
    }

    /// Ends the pass: joins the workers and latches.
    fn finish(&mut self) {
        self.stop_workers();
        self.phase = Phase::Finished;
    }

    /// The consumer received the end of data and the workers are joined: the
    /// source now stands past its end, which can differ from where the last
    /// snapshot and the count after it put it (a sampler that was asked for
    /// one more index counts as started, and moves to its next epoch on the
    /// next reset). Snapshot that position, so that restoring a state taken
    /// at the end of a pass sets the source up for the next pass exactly as
    /// the uninterrupted run does.
    fn snapshot_at_end(&mut self) -> Result<()> {
        let puller = lock(&self.puller);
        let snapshot = puller.source.get_state(&worker_cx())?;
        self.cursor = Cursor::new(snapshot, puller.next_index, []);
        Ok(())
    }

    /// Resets the source (the workers are joined) to `saved`, skips the
    /// delivered items, and returns the snapshot the cursor starts from.
    fn reset_source(&mut self, saved: Option<&Saved>) -> Result<State> {
        let threaded = self.options.num_workers > 0;
        let mut puller = lock(&self.puller);
        let puller = &mut *puller;
        let mut cx = worker_cx();
        puller.done = false;
        puller.skip.clear();
        puller.next_index = 0;
        puller.source.reset(saved.map(|s| &s.snapshot))?;
        if let Some(saved) = saved {
            for i in 0..saved.steps {
                if puller.source.next(&mut cx)?.is_none() {
                    return Err(Error::bad_state(
                        saved.steps_path.clone(),
                        format!(
                            "the source ended after {i} of the {} items to skip: the state does not belong to this source",
                            saved.steps
                        ),
                    ));
                }
            }
            puller.next_index = saved.resume_index();
            puller.skip = saved.ahead.iter().copied().collect();
            puller.skip_path.clone_from(&saved.ahead_path);
        }
        self.source_description = puller.source.describe();
        if threaded {
            puller.source.get_state(&cx)
        } else {
            Ok(State::new())
        }
    }

    /// Starts the worker threads for a pass beginning at `base`.
    fn spawn_pool(&self, base: u64) -> Result<Pool<U>> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut pool = Pool {
            results: rx,
            permits: Arc::new(Permits::new(self.options.max_concurrent)),
            halt: Arc::new(AtomicBool::new(false)),
            workers: Workers::default(),
            reorder: ReorderBuffer::new(base),
            end_at: None,
        };
        for i in 0..self.options.num_workers {
            let ctx = WorkerCtx {
                puller: Arc::clone(&self.puller),
                f: Arc::clone(&self.f),
                results: tx.clone(),
                permits: Arc::clone(&pool.permits),
                halt: Arc::clone(&pool.halt),
                snapshot_frequency: self.options.snapshot_frequency,
            };
            // On failure `pool` is dropped, which stops and joins the others.
            let handle = thread::spawn(NAME, format!("nodes-par-map-{i}"), move || ctx.run())?;
            pool.workers.push(handle);
        }
        debug_assert_eq!(pool.workers.len(), self.options.num_workers);
        Ok(pool)
    }

    /// `next` inside the statistics wrapper.
    fn next_observed(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        self.flag.check(NAME)?;
        match &mut self.phase {
            Phase::Running(pool) => {
                match pool.next(&mut self.cursor, self.options.in_order, cx) {
                    Ok(Some(value)) => Ok(Some(value)),
                    Ok(None) => {
                        self.ended = true;
                        self.finish();
                        self.snapshot_at_end()?;
                        Ok(None)
                    }
                    // An error: the pass is over, and the state still points
                    // before the failed item.
                    Err(e) => {
                        self.finish();
                        Err(e)
                    }
                }
            }
            Phase::Inline => self.next_inline(cx),
            Phase::Finished => Ok(None),
            Phase::ShutDown => Err(Error::ShutDown { node: NAME }),
            Phase::Idle => Err(Error::NotReset { node: NAME }),
        }
    }

    /// `next` inline: pull, map, return; errors do not end the pass.
    fn next_inline(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        let pulled = {
            let puller = Arc::get_mut(&mut self.puller).map(|m| {
                m.get_mut()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            });
            match puller {
                Some(puller) => puller.pull(cx, None),
                None => lock(&self.puller).pull(cx, None),
            }
        };
        match pulled {
            Pulled::Item(index, item, _) => {
                let f = &self.f;
                catch(NAME, Some(index), || {
                    f(item).map_err(|e| Error::user(NAME, Some(index), e))
                })
                .map(Some)
            }
            Pulled::End(_) => Ok(None),
            // Inline nodes do not latch: the source decides what comes next.
            Pulled::Failed(_, e) => Err(e),
        }
    }
}

impl<N, U> Node for ParallelMapper<N, U>
where
    N: Node + 'static,
    N::Item: Send + 'static,
    U: Send + 'static,
{
    type Item = U;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        cx.observe(NodeId::of(self), NAME, |cx| self.next_observed(cx))
    }
}

impl<N, U> Stateful for ParallelMapper<N, U>
where
    N: Node + 'static,
    N::Item: Send + 'static,
    U: Send + 'static,
{
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        // Validate our own keys before touching anything.
        let saved = state.map(|s| Saved::decode(NAME, s)).transpose()?;
        // A new pass after one the consumer did not finish starts from where
        // the consumer stood, not from where the workers got to.
        let rewind =
            saved.is_none() && self.options.num_workers > 0 && self.flag.is_reset() && !self.ended;
        // Unusable until this reset succeeds.
        self.flag = ResetFlag::default();
        self.ended = false;
        self.stop_workers();
        self.phase = Phase::Idle;
        if rewind {
            let (snapshot, steps) = self.cursor.position();
            snapshot::rewind(&mut lock(&self.puller).source, snapshot, steps)?;
        }
        let snapshot = self.reset_source(saved.as_ref())?;
        let base = saved.as_ref().map_or(0, Saved::resume_index);
        let ahead = saved.map(|s| s.ahead).unwrap_or_default();
        self.cursor = Cursor::new(snapshot, base, ahead);
        self.phase = if self.options.num_workers == 0 {
            Phase::Inline
        } else {
            Phase::Running(self.spawn_pool(base)?)
        };
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        self.flag.check(NAME)?;
        match self.phase {
            Phase::Idle => Err(Error::NotReset { node: NAME }),
            _ if self.options.num_workers == 0 => {
                let puller = lock(&self.puller);
                // Skipped items right at the front count as received steps.
                let mut low = puller.next_index;
                while puller.skip.contains(&low) {
                    low += 1;
                }
                snapshot::encode(
                    &puller.source.get_state(cx)?,
                    puller.next_index,
                    low,
                    puller.skip.range(low..).copied(),
                )
            }
            _ => self.cursor.to_state(),
        }
    }

    fn describe(&self) -> Description {
        Description::new(NAME)
            .param("in_order", self.options.in_order)
            // Keyed by where the source's state lives in ours.
            .child(snapshot::SNAPSHOT, self.source_description.clone())
    }

    fn shutdown(&mut self) {
        self.stop_workers();
        if !matches!(self.phase, Phase::Idle) {
            self.phase = Phase::ShutDown;
        }
        lock(&self.puller).source.shutdown();
    }
}

// A concrete `ParallelMapper` that was only constructed has no `next` or
// `get_state`: calling them is a compile error that says to start the pipeline.
nodes_core::__started_guards!(impl[N: Node, U] ParallelMapper<N, U>);

impl<N: Node, U> Drop for ParallelMapper<N, U> {
    fn drop(&mut self) {
        // Dropping the pool stops and joins its workers.
        self.phase = Phase::Idle;
    }
}
