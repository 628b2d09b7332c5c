//! The threaded pass: the one lifecycle behind every thread-backed node.
//!
//! [`Threaded`] owns a source and pulls from it, on the caller's thread
//! (`workers == 0`) or on worker threads, applies a [`Stage`] to every item
//! (the user's function for `ParallelMapper`, nothing for `Prefetcher`), and
//! hands the results to the consumer in chunks. It keeps the consumer's
//! position with the snapshot protocol of [`snapshot`](super::snapshot), and
//! applies the node's [`ErrorPolicy`] where items are delivered, so that a
//! bad record counts the same whatever the worker count.
//!
//! The lifecycle, written once: reset (stop and join the old pass, put the
//! source back where the consumer stood, restore, start the new pass),
//! next (the per-item path, then the next chunk), end of pass (join, snapshot
//! the source past its end), shutdown and drop (stop and join).
//!
//! Hand-over: workers take credits ([`Permits`]) for up to a chunk of items,
//! pull them under the source lock, run the stage with the lock released and
//! send the chunk; the consumer gives a credit back per item it hands out
//! (a plain store to a count only it writes), and a worker waiting for
//! credits is woken only once a chunk's worth is free (the low-water mark,
//! see [`Permits`]). While the chunks grow, so does the window
//! ([`Plan::window_for`]). A channel operation (and a possible wake-up on either
//! side) is paid per chunk, not per item, and the chunk's buffer travels
//! back to the workers on a second channel to be filled again.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use nodes_core::__private::trace;
use nodes_core::{Cx, Description, Error, Node, Replay, ResetFlag, Result, Resume, State};

use super::adapt::{Adapt, Mode, Policy as AdaptPolicy};
use super::clock::{Clock, SystemClock};
use super::panic::{catch, guard};
use super::permits::Permits;
use super::reorder::ReorderBuffer;
use super::ring::{self, RingRx, RingTx};
use super::snapshot::{self, Cursor, MAX_PACED_STEPS, Saved};
use super::spin::{Live, Spin};
use super::thread::{self, Workers, lock};
use crate::policy::{ERRORS, ErrorBudget, ErrorPolicy, Verdict, is_bad_record};

/// The work applied to every item on the worker (or the caller's) thread.
pub(crate) trait Stage<T, U>: Send + Sync + 'static {
    /// Processes the item at `index` (its position in the pass). Panics are
    /// caught by the caller.
    fn apply(&self, index: u64, item: T) -> Result<U>;

    /// A stage that does nothing (`T` is `U`) hands a pulled chunk's items
    /// over as they are, without moving each into a new buffer: `Ok` with
    /// the same items. Any other stage returns them (`Err`).
    fn pass_through(&self, items: Items<T>) -> std::result::Result<Items<U>, Items<T>> {
        Err(items)
    }

    /// For a stage that passes through: the consumer's emptied buffer as a
    /// buffer to pull into.
    fn reuse(&self, _buffer: Items<U>) -> Option<Items<T>> {
        None
    }
}

/// When the pulling thread records the source's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Snapshots {
    /// After every item whose index + 1 is a multiple of this.
    Every(u64),
    /// At the end of a chunk, once the source has worked for a while since
    /// the last one: at least [`MIN_SNAPSHOT_INTERVAL`], and
    /// [`PACE_FACTOR`] times what the last snapshot cost, so that taking
    /// them costs at most a few percent of the source's time, and a restore
    /// replays about that much work.
    /// Whatever the timing, at least one every [`MAX_PACED_STEPS`] items, so
    /// that a restore never replays more (and a state naming more is refused).
    Paced,
}

/// How the state is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `{snapshot, snapshot_index, steps_since_snapshot, delivered_ahead}`.
    Indexed,
    /// `{snapshot, steps_since_snapshot}`: delivery is always in order.
    InOrder,
}

/// A chunk is handed over early once it took this long to fill, so a slow
/// source still reaches the consumer item by item.
const MIN_CHUNK_TIME: Duration = Duration::from_micros(100);

/// The shortest time between two paced snapshots. A snapshot itself is cheap
/// (states share buffers copy-on-write), but it pins what it shares: the
/// source's next writes to a shared buffer pay for the copy, on this thread,
/// where the pacing cannot see it. Snapshots this far apart keep that under
/// a few percent of the source's time; a restore replays at most about this
/// much of the source's work.
const MIN_SNAPSHOT_INTERVAL: Duration = Duration::from_millis(5);

/// Paced snapshots are at least this many times their cost apart. Their
/// cost includes the copies a live snapshot makes the source pay (a shuffle
/// buffer converts every chunk it writes while a snapshot holds it, see
/// `cow.rs`): with a buffer of a few hundred items that is a whole buffer's
/// worth of JSON per snapshot, about a millisecond, which at the minimum
/// interval took a tenth of a prefetched pipeline's time.
const PACE_FACTOR: u32 = 32;

/// Chunks of room per worker in a growing window (see [`Plan::window_for`]).
const CHUNKS_PER_WORKER: usize = 2;

/// How a [`Threaded`] runs, fixed when its node is built.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// The node's name, for errors and thread names.
    pub(crate) node: &'static str,
    /// Prefix of the worker threads' names.
    pub(crate) thread_name: &'static str,
    /// Worker threads; `0` runs everything on the caller's thread.
    pub(crate) workers: usize,
    /// Deliver in source order (else in completion order).
    pub(crate) in_order: bool,
    /// Items pulled and not yet handed out, at most.
    pub(crate) max_in_flight: usize,
    /// Items pulled under one hold of the source lock, at most.
    pub(crate) max_chunk: usize,
    /// Whether workers start with chunks of one item and grow them while
    /// the stage is cheap (see [`ChunkSizer`]), or always ask for
    /// `max_chunk`.
    pub(crate) adaptive_chunks: bool,
    /// The window a pass starts with: it grows with the adaptive chunks
    /// (room for two chunks per worker) up to `max_in_flight`, or is
    /// `max_in_flight` from the start when the two are equal. See
    /// [`Plan::window_for`].
    pub(crate) min_in_flight: usize,
    pub(crate) snapshots: Snapshots,
    pub(crate) layout: Layout,
    pub(crate) policy: ErrorPolicy,
}

impl Plan {
    /// The window (items pulled and not yet handed out, at most) while the
    /// workers' chunks hold `chunk` items: two chunks per worker, so that a
    /// worker fills one while the consumer empties the other, within
    /// `min_in_flight..=max_in_flight`.
    ///
    /// Each hand-over of a chunk may cost a thread a wake-up (microseconds
    /// on a VM), and the window bounds the chunks: with room for few cheap
    /// items, threads sleep and wake every few dozen items
    /// (`realistic_par` ran no faster than one thread, at 6,500 context
    /// switches per epoch, until the window grew with the chunks). An
    /// expensive item keeps chunks of one, and the window then stays at
    /// `min_in_flight`, which leaves room for a slow item's neighbours to go
    /// on (in order, a window of two per worker held 16 sleeping workers to
    /// 10× one thread instead of 15×).
    fn window_for(&self, chunk: usize) -> usize {
        let max = self.max_in_flight.max(1);
        self.workers
            .max(1)
            .saturating_mul(CHUNKS_PER_WORKER)
            .saturating_mul(chunk)
            .clamp(self.min_in_flight.clamp(1, max), max)
    }

    /// The plan actually run over a source whose order varies between runs
    /// (see [`Description::varying_order`]):
    /// such a source cannot be replayed, so every item carries its own
    /// snapshot and items are delivered in the order they were pulled. The
    /// state then never asks for a replay, and a restore is exact.
    /// It is [`exact_positions`](Plan::exact_positions) with chunks of one.
    fn over(self, varying_source: bool) -> Plan {
        if !varying_source || self.workers == 0 {
            return self;
        }
        Plan {
            max_chunk: 1,
            adaptive_chunks: false,
            min_in_flight: self.max_in_flight,
            ..self.exact_positions(true)
        }
    }

    /// The plan actually run over a source that reads an `ElasticSampler`
    /// through a filter, `try_map` or mix (see
    /// [`needs_exact_snapshots`]):
    /// every item carries its source's state and is delivered in source
    /// order, so the node's state never counts items past its snapshot and
    /// [`reshard`](crate::elastic::reshard) reads the positions consumed off
    /// the snapshot. Inline (no workers) the source's own state is exact
    /// already.
    fn exact_positions(self, needed: bool) -> Plan {
        if !needed || self.workers == 0 {
            return self;
        }
        Plan {
            in_order: true,
            snapshots: Snapshots::Every(1),
            ..self
        }
    }
}

/// The source and the numbering of the pass; shared with the workers while
/// a pass runs, the owner's alone otherwise.
struct Puller<N: Node> {
    source: N,
    /// The index the next pulled item gets.
    next_index: u64,
    /// Indices delivered before a restore: pulled, not processed, not sent.
    skip: BTreeSet<u64>,
    /// Where `skip` came from in the restored state.
    skip_path: String,
    /// The source ended or broke: nobody pulls again this pass.
    done: bool,
    /// The source broke (a panic, or an error that is not a bad record)
    /// at the item before this index: the pass ends there, and a state taken
    /// past it must say so.
    broke: Option<u64>,
    /// When the last snapshot was taken (or the pass began), and how long to
    /// wait before the next one under [`Snapshots::Paced`].
    last_snapshot: Instant,
    pace: Duration,
    /// Items pulled since the last snapshot (or the pass began).
    since_snapshot: u64,
    /// A snapshot was due at an item skipped as delivered before a restore:
    /// take it after the next item that is not skipped, so that the gap
    /// between snapshots (and the steps a state records) stays bounded.
    missed: bool,
    /// The last chunk filled, wait included, in under [`QUICK_CHUNK`]: the
    /// next one reads the clock only when it is full. A clock read costs
    /// about as much as pulling a cheap item (45 ns on our VMs), and a
    /// chunk used to read it up to seven times.
    quick: bool,
    /// When the last full chunk was finished.
    chunk_clock: Instant,
    /// The source counts its items ([`Description::counted_path`]), and workers
    /// pull it: no snapshot is taken per item (only after a bad record),
    /// the consumer's position is worked out from the last one (see
    /// [`Threaded::counted_forward`]).
    counted: Option<Vec<String>>,
}

/// A chunk that filled this fast (the wait for credits before it included)
/// makes the next one skip its mid-chunk clock checks: at that pace it is
/// handed over well within [`MIN_CHUNK_TIME`]. A source that turns slow
/// mid-chunk delays one chunk; the next is checked again.
const QUICK_CHUNK: Duration = Duration::from_micros(25);

/// The items of a chunk, in pull order, with their indices. The consumer
/// takes them from the front; the emptied buffer goes back to the workers
/// (see [`Inbox::give_back`]), so that in a steady pass no chunk allocates.
pub(crate) type Items<U> = VecDeque<(u64, Slot<U>)>;

/// An item of a chunk, or the error in its place. The error is boxed:
/// chunks cross between cores, and with `Error` inline an item of a `u64`
/// took 72 bytes instead of 24; the consumer's first touch of each of those
/// cache lines was the hottest spot of a prefetched pass.
pub(crate) type Slot<U> = std::result::Result<U, Box<Error>>;

/// A chunk's source states, as `(position in items, state after that item)`.
pub(super) type Snapshotted = VecDeque<(usize, State)>;

/// An emptied chunk's buffers on their way back to the workers, with the
/// snapshots the consumer retired since the last one: dropped by a worker,
/// they return to the state pool of the thread that took them (see
/// [`Cursor::take_retired`]). A snapshot after every item made each chunk
/// grow a new `snapshots` queue, freed on the consumer.
struct Spare<U> {
    items: Items<U>,
    snapshots: Snapshotted,
    retired: Vec<State>,
}

/// Items on their way to the consumer, in pull order.
pub(super) struct Chunk<U> {
    pub(super) items: Items<U>,
    /// Source states, as `(position in items, state after that item)`.
    /// Taken from the front as the items are (a snapshot after every item
    /// is common).
    pub(super) snapshots: Snapshotted,
    /// The pass ends after these items: the index after the last one. Set on
    /// end of data, on a source that broke, and when a worker thread died.
    pub(super) end: Option<u64>,
}

impl<U> Chunk<U> {
    pub(super) fn new(capacity: usize) -> Self {
        Chunk::with(VecDeque::with_capacity(capacity), VecDeque::new())
    }

    /// An empty chunk filling `items` and `snapshots` (emptied first).
    pub(super) fn with(mut items: Items<U>, mut snapshots: Snapshotted) -> Self {
        items.clear();
        snapshots.clear();
        Chunk {
            items,
            snapshots,
            end: None,
        }
    }

    /// The index the consumer waits for before this chunk is its turn.
    fn first_index(&self) -> u64 {
        self.items
            .front()
            .map_or_else(|| self.end.unwrap_or(u64::MAX), |(i, _)| *i)
    }
}

/// What one pull from the source gave.
enum Pulled<T> {
    /// An item (a value or a bad record) to hand out.
    Item(u64, Slot<T>),
    /// An item delivered before the restore: passed over.
    Skipped(u64),
    /// The pass ends at `end`, after `last` if there is one (the failure
    /// that ended it, or a restored state that does not fit the source).
    End {
        last: Option<(u64, Slot<T>)>,
        end: u64,
    },
}

impl<N: Node> Puller<N> {
    /// What the source will still hand to the consumer: its own hint, less
    /// the restored skips it will yield and nobody will deliver.
    fn size_hint(&self) -> crate::hint::Hint {
        if self.done {
            return crate::hint::exact(0);
        }
        let skips = self.skip.len() as u64;
        let (lower, upper) = self.source.size_hint();
        (
            lower.saturating_sub(skips),
            upper.map(|u| u.saturating_sub(skips)),
        )
    }

    /// Pulls up to `limit` items (passing over restored skips) into a chunk,
    /// recording snapshots as `snapshots` says. An `Err` from the source is
    /// an item; a panic in it ends the pass after that item.
    fn pull_chunk(
        &mut self,
        cx: &mut Cx,
        limit: usize,
        snapshots: Snapshots,
        node: &'static str,
        stop: Option<&AtomicBool>,
        (buffer, snapshot_buffer): (Items<N::Item>, Snapshotted),
    ) -> Chunk<N::Item> {
        // A chunk of one is handed over at once, and a quick source's
        // chunk is checked only when full (see `quick`).
        let started = (limit > 1 && !self.quick).then(Instant::now);
        let mut chunk = Chunk::with(buffer, snapshot_buffer);
        chunk.items.reserve(limit.min(64));
        while chunk.items.len() < limit {
            let (index, item) = match self.pull_one(cx, node) {
                Pulled::Item(index, item) => (index, item),
                Pulled::Skipped(index) => {
                    // A snapshot due here is taken after the next item that
                    // is sent instead.
                    if let Snapshots::Every(every) = snapshots
                        && (index + 1).is_multiple_of(every)
                    {
                        self.missed = true;
                    }
                    continue;
                }
                Pulled::End { last, end } => {
                    chunk.items.extend(last);
                    chunk.end = Some(end);
                    return chunk;
                }
            };
            let bad_record = item.is_err();
            chunk.items.push_back((index, item));
            let last = chunk.items.len() >= limit;
            // One clock read per full chunk, for the pace of snapshots and
            // for whether the next chunk may skip its checks.
            let now = (last && (limit > 1 || snapshots == Snapshots::Paced)).then(Instant::now);
            if let Some(now) = now {
                self.quick = now.saturating_duration_since(self.chunk_clock) < QUICK_CHUNK;
                self.chunk_clock = now;
            }
            // After a bad record the source's position is recorded at once:
            // a source may fail without moving on (and succeed when asked
            // again), and a replay that counts pulls would then skip the
            // item instead of the failure.
            let due = bad_record
                || self.counted.is_none()
                    && match snapshots {
                        Snapshots::Every(every) => self.missed || (index + 1).is_multiple_of(every),
                        Snapshots::Paced => {
                            self.since_snapshot >= MAX_PACED_STEPS
                                || now.is_some_and(|now| {
                                    now.saturating_duration_since(self.last_snapshot) >= self.pace
                                })
                        }
                    };
            if due && !self.snapshot(cx, &mut chunk, node, snapshots == Snapshots::Paced) {
                return chunk;
            }
            // Checking the clock at powers of two keeps it off the per-item
            // path while bounding how long a started chunk waits.
            let len = chunk.items.len();
            if !last
                && len.is_power_of_two()
                && (stop.is_some_and(|s| s.load(Ordering::Relaxed))
                    || started.is_some_and(|s| s.elapsed() >= MIN_CHUNK_TIME))
            {
                self.quick = false;
                if snapshots == Snapshots::Paced && self.last_snapshot.elapsed() >= self.pace {
                    self.snapshot(cx, &mut chunk, node, true);
                }
                return chunk;
            }
        }
        chunk
    }

    /// A new reader starts here, as if a snapshot had just been taken (the
    /// reset's, or the one a reader resumes from): snapshots are paced from
    /// now, and a new pass (maybe over a new source) earns its quick chunks
    /// again.
    fn restart_pacing(&mut self) {
        self.last_snapshot = Instant::now();
        self.since_snapshot = 0;
        self.missed = false;
        self.quick = false;
        self.chunk_clock = self.last_snapshot;
    }

    /// Pulls the next item from the source. An `Err` from the source is an
    /// item; a panic in it, or an error that is not a bad record, ends the
    /// pass after that item.
    #[inline]
    fn pull_one(&mut self, cx: &mut Cx, node: &'static str) -> Pulled<N::Item> {
        let index = self.next_index;
        let item = match guard(node, Some(index), || self.source.next(cx)) {
            Ok(Ok(Some(item))) => Ok(item),
            Ok(Ok(None)) => {
                self.done = true;
                let Some(&beyond) = self.skip.iter().next() else {
                    return Pulled::End {
                        last: None,
                        end: index,
                    };
                };
                self.skip.clear();
                let error = Error::bad_state(
                    self.skip_path.clone(),
                    format!(
                        "the restored state says item {beyond} was delivered, but the source ended after {index} items: the state does not belong to this source"
                    ),
                );
                return Pulled::End {
                    last: Some((index, Err(Box::new(error)))),
                    end: index + 1,
                };
            }
            // A source that panicked is in no known state: deliver the
            // panic and end the pass.
            Err(panicked) => return self.broke_at(index, panicked),
            // A bad record from the source is one item.
            Ok(Err(e)) if is_bad_record(&e) => Err(Box::new(e)),
            // Any other error says the source cannot go on: deliver it and
            // end the pass (it would otherwise be pulled forever).
            Ok(Err(e)) => return self.broke_at(index, e),
        };
        self.next_index += 1;
        self.since_snapshot += 1;
        if !self.skip.is_empty() && self.skip.remove(&index) {
            // Delivered before the restore.
            return Pulled::Skipped(index);
        }
        Pulled::Item(index, item)
    }

    /// The pass ends with `error` at `index`.
    fn broke_at(&mut self, index: u64, error: Error) -> Pulled<N::Item> {
        self.done = true;
        self.broke = Some(index + 1);
        self.next_index += 1;
        Pulled::End {
            last: Some((index, Err(Box::new(error)))),
            end: index + 1,
        }
    }

    /// Records the source's state after the chunk's last item. A source
    /// whose `get_state` fails cannot be resumed: the failure is delivered
    /// in place of that item and the pass ends (`false`). Only `paced`
    /// snapshots read the clock (others may come after every item).
    fn snapshot<T>(
        &mut self,
        cx: &Cx,
        chunk: &mut Chunk<T>,
        node: &'static str,
        paced: bool,
    ) -> bool {
        let at = chunk.items.len() - 1;
        let index = chunk.items[at].0;
        let started = paced.then(Instant::now);
        match catch(node, Some(index), || self.source.get_state(cx)) {
            Ok(state) => {
                chunk.snapshots.push_back((at, state));
                self.since_snapshot = 0;
                self.missed = false;
                if let Some(started) = started {
                    self.last_snapshot = Instant::now();
                    let cost = self.last_snapshot - started;
                    self.pace = MIN_SNAPSHOT_INTERVAL.max(PACE_FACTOR * cost);
                }
                true
            }
            Err(e) => {
                self.done = true;
                chunk.items[at].1 = Err(Box::new(e));
                chunk.end = Some(index + 1);
                false
            }
        }
    }
}

/// Where the node stands.
enum Phase<U> {
    /// Never reset, or the last reset failed.
    Idle,
    /// `workers == 0`: the consumer pulls and processes.
    Inline,
    /// Reset; the workers start at the first `next`, from the consumer's
    /// context (a pass beginning at this index).
    Ready(u64),
    /// Workers are running.
    Running(Box<Pool<U>>),
    /// The pass ended; workers joined.
    Finished,
    /// `shutdown` was called; workers joined.
    ShutDown,
}

impl<U> fmt::Debug for Phase<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Idle => "Idle",
            Phase::Inline => "Inline",
            Phase::Ready(_) => "Ready",
            Phase::Running(_) => "Running",
            Phase::Finished => "Finished",
            Phase::ShutDown => "ShutDown",
        })
    }
}

/// Where a worker hands its chunks over.
enum Outbox<U> {
    /// Several workers: whole chunks over a channel, and the consumer's
    /// emptied buffers back on another.
    Channel {
        chunks: Sender<Chunk<U>>,
        spare: Receiver<Spare<U>>,
    },
    /// One worker: the items over a ring (see `ring.rs`); its buffers stay.
    Ring(Arc<RingTx<U>>),
}

impl<U> Clone for Outbox<U> {
    fn clone(&self) -> Self {
        match self {
            Outbox::Channel { chunks, spare } => Outbox::Channel {
                chunks: chunks.clone(),
                spare: spare.clone(),
            },
            Outbox::Ring(tx) => Outbox::Ring(Arc::clone(tx)),
        }
    }
}

impl<U> Outbox<U> {
    /// Hands `chunk` over. Over a ring its buffers stay, emptied, for the
    /// next chunk; over a channel they go with it. `Err` once the consumer
    /// is gone.
    fn send(&self, chunk: &mut Chunk<U>) -> std::result::Result<(), ()> {
        match self {
            Outbox::Channel { chunks, .. } => chunks
                .send(std::mem::replace(chunk, Chunk::new(0)))
                .map_err(drop),
            Outbox::Ring(tx) => tx.send(chunk).map_err(drop),
        }
    }

    /// Buffers the consumer emptied, if some came back (channel only).
    fn spare(&self) -> Option<Spare<U>> {
        match self {
            Outbox::Channel { spare, .. } => spare.try_recv().ok(),
            Outbox::Ring(_) => None,
        }
    }
}

/// Where the consumer receives the workers' chunks.
enum Inbox<U> {
    Channel {
        chunks: Receiver<Chunk<U>>,
        spare: Sender<Spare<U>>,
    },
    Ring(RingRx<U>),
    /// The pass was stopped: the workers' sends fail.
    Closed,
}

impl<U> Inbox<U> {
    /// Waiting: chunks (channel) or items (ring).
    fn len(&self) -> usize {
        match self {
            Inbox::Channel { chunks, .. } => chunks.len(),
            Inbox::Ring(rx) => rx.len(),
            Inbox::Closed => 0,
        }
    }

    /// Sends a handed-out chunk's buffers back to the workers, with the
    /// snapshots the cursor retired since (channel). A buffer allocated on
    /// one thread and freed on another would cost every chunk a malloc and
    /// a free that contend for the allocator's locks; the workers take
    /// only what they lack, so the buffers in use stay bounded by the
    /// chunks in flight. Over a ring nothing crosses: the retired
    /// snapshots, few with one worker (paced, or after a bad record, unless
    /// the source's order varies), are dropped here.
    fn give_back(&self, done: Chunk<U>, cursor: &mut Cursor) {
        match self {
            Inbox::Channel { spare, .. } if done.items.capacity() > 0 => {
                let _ = spare.send(Spare {
                    items: done.items,
                    snapshots: done.snapshots,
                    retired: cursor.take_retired(),
                });
            }
            Inbox::Ring(_) => drop(cursor.take_retired()),
            Inbox::Channel { .. } | Inbox::Closed => {}
        }
    }
}

/// The running workers and the consumer's side of the hand-over.
struct Pool<U> {
    results: Inbox<U>,
    permits: Arc<Permits>,
    halt: Arc<AtomicBool>,
    workers: Workers,
    /// In order: chunks that arrived before their turn, by first index.
    reorder: ReorderBuffer<Chunk<U>>,
    /// The chunk being handed out (what is left of it), and how many of its
    /// items were handed out.
    current: Chunk<U>,
    position: usize,
    /// The end of the pass, once a worker reported it.
    end_at: Option<u64>,
    /// Out of order: errors waiting for every item before them.
    deferred: std::collections::BTreeMap<u64, (Result<U>, Option<State>)>,
    /// How long the consumer spins for a chunk before it sleeps.
    spin: Spin,
    /// The worker was stopped and joined for the source to come back to
    /// the consumer (see `adapt.rs`): what it read ahead is still handed
    /// out, then the pass goes on inline.
    handing_back: bool,
}

impl<U> Pool<U> {
    /// Stops and joins every worker. Idempotent.
    ///
    /// The order matters: raise `halt` (no new pulls), close the permits
    /// (wakes workers waiting for room), drop our receiver (a worker's send
    /// fails instead of piling up), then join. A worker inside the user's
    /// function finishes that item first.
    fn stop(&mut self) {
        self.halt_workers();
        drop(std::mem::replace(&mut self.results, Inbox::Closed));
        self.workers.join();
    }

    /// No new pulls, and workers waiting for room woken (to leave).
    fn halt_workers(&self) {
        self.halt.store(true, Ordering::SeqCst);
        self.permits.close();
    }

    /// Stops the worker from reading further and joins it, leaving what it
    /// read ahead to be handed out (the hand-back of `adapt.rs`). Unlike
    /// [`stop`](Self::stop) the consumer's end stays open: every chunk the
    /// worker pulled reaches it, so the source then stands where the
    /// consumer will once it has handed those out.
    fn hand_back(&mut self) {
        self.halt_workers();
        self.workers.join();
        self.handing_back = true;
    }

    /// Handing back, and every item the worker read ahead was handed out,
    /// with the pass still open: the source stands where the consumer does.
    fn handed_back(&self) -> bool {
        self.handing_back
            && self.current.items.is_empty()
            && self.current.end.is_none()
            && self.end_at.is_none()
            && self.results.len() == 0
            && self.reorder.is_empty()
            && self.deferred.is_empty()
    }

    /// The front item of the current chunk if it can be handed out without
    /// more ado: a value (no error to judge), no snapshot after it, and no
    /// deferred error (out of order) waiting. It gives its credit back.
    #[inline]
    fn take_plain(&mut self) -> Option<(u64, U)> {
        let (_, Ok(_)) = self.current.items.front()? else {
            return None;
        };
        if !self.deferred.is_empty()
            || self
                .current
                .snapshots
                .front()
                .is_some_and(|(at, _)| *at == self.position)
        {
            return None;
        }
        let (index, Ok(value)) = self.pop_current()? else {
            return None;
        };
        Some((index, value))
    }

    /// Hands out the front item of the current chunk, giving its credit
    /// back: "in flight" counts exactly the items pulled and not yet
    /// returned.
    #[inline]
    fn pop_current(&mut self) -> Option<(u64, Slot<U>)> {
        let item = self.current.items.pop_front()?;
        self.position += 1;
        self.permits.release(1);
        Some(item)
    }

    /// The next item in delivery order, with its index and snapshot; `None`
    /// at the end of the pass.
    fn next(
        &mut self,
        cursor: &mut Cursor,
        in_order: bool,
        node: &'static str,
        cx: &mut Cx,
    ) -> Option<(u64, Result<U>, Option<State>)> {
        loop {
            // A waiting error's turn comes once everything before it was
            // delivered: the cursor then stands at its index, or past it
            // when a restored state counted that index as delivered ahead
            // (a state that does not fit the source: the error says so,
            // and must not be dropped for arriving early).
            if !in_order
                && let Some(waiting) = self.deferred.first_entry()
                && *waiting.key() <= cursor.low()
            {
                let (index, (value, snapshot)) = waiting.remove_entry();
                return Some((index, value, snapshot));
            }
            if let Some((index, value)) = self.pop_current() {
                let value = value.map_err(|error| *error);
                let snapshot = match self.current.snapshots.front() {
                    Some((at, _)) if *at + 1 == self.position => {
                        self.current.snapshots.pop_front().map(|(_, state)| state)
                    }
                    _ => None,
                };
                if !in_order && value.is_err() && index > cursor.low() {
                    // Out of order, an error waits for its turn: a source
                    // may fail without moving on, and only a snapshot taken
                    // after it, adopted once everything before it was
                    // delivered, resumes such a source exactly.
                    self.deferred.insert(index, (value, snapshot));
                    continue;
                }
                return Some((index, value, snapshot));
            }
            if let Some(end) = self.current.end.take() {
                self.end_at = Some(end);
            }
            if self.end_at.is_some_and(|end| cursor.low() >= end) {
                return None;
            }
            let next = self.receive(cursor, in_order, node, cx);
            let done = std::mem::replace(&mut self.current, next);
            self.position = 0;
            self.results.give_back(done, cursor);
        }
    }

    /// Blocks until the chunk whose turn it is arrives (in order) or any
    /// chunk arrives (out of order).
    fn receive(
        &mut self,
        cursor: &Cursor,
        in_order: bool,
        node: &'static str,
        cx: &mut Cx,
    ) -> Chunk<U> {
        if cx.stats_enabled() {
            cx.record_queue_depth(self.results.len());
        }
        loop {
            if in_order && let Some(chunk) = self.reorder.take(cursor.low()) {
                return chunk;
            }
            // About to wait: a worker must see every credit given back.
            self.permits.flush();
            let waiting = cx.timing().then(Instant::now);
            let received = self.wait_for_chunk();
            if let Some(started) = waiting {
                cx.record_blocked(started.elapsed());
            }
            let Ok(chunk) = received else {
                // Every worker is gone without reporting the end: they always
                // report, even when dying, so this is a defect. Fail, never hang.
                let mut broken = Chunk::new(1);
                broken.items.push_back((
                    cursor.low(),
                    Err(Box::new(Error::internal(
                        node,
                        format!(
                            "worker threads exited without delivering item {}",
                            cursor.low()
                        ),
                    ))),
                ));
                broken.end = Some(cursor.low() + 1);
                return broken;
            };
            if !in_order || chunk.first_index() == cursor.low() {
                return chunk;
            }
            self.reorder.insert(chunk.first_index(), chunk);
        }
    }
}

impl<U> Pool<U> {
    /// The next chunk from the workers: spun for through a short wait, slept
    /// for through a long one (see `spin.rs`).
    fn wait_for_chunk(&mut self) -> Result<Chunk<U>, crossbeam_channel::RecvError> {
        use crossbeam_channel::{RecvError, TryRecvError};
        let results = match &mut self.results {
            Inbox::Channel { chunks, .. } => chunks,
            Inbox::Ring(ring) => {
                // Everything the ring holds, into the buffers of the chunk
                // just handed out.
                let mut chunk = Chunk::with(
                    std::mem::take(&mut self.current.items),
                    std::mem::take(&mut self.current.snapshots),
                );
                loop {
                    match ring.drain(&mut chunk) {
                        Ok(true) => return Ok(chunk),
                        Ok(false) => {}
                        Err(ring::Abandoned) => return Err(RecvError),
                    }
                    if super::spin::cores_to_spare() {
                        self.spin
                            .wait(|| ring.ready().then_some(()), || ring.sleep_until_ready());
                    } else {
                        self.spin.sleep(|| ring.sleep_until_ready());
                    }
                }
            }
            Inbox::Closed => return Err(RecvError),
        };
        if !super::spin::cores_to_spare() {
            // More threads than cores: no polls of ours on top of the
            // channel's own short back-off (the yields would hand the core
            // around among the workers once more per chunk).
            return self.spin.sleep(|| results.recv());
        }
        self.spin.wait(
            || match results.try_recv() {
                Ok(chunk) => Some(Ok(chunk)),
                Err(TryRecvError::Disconnected) => Some(Err(RecvError)),
                Err(TryRecvError::Empty) => None,
            },
            || results.recv(),
        )
    }
}

impl<U> Drop for Pool<U> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends a chunk that ends the pass if its worker dies unwinding (a panic
/// outside the guarded user calls, such as a panic payload whose `Drop`
/// panics), so the consumer gets an error instead of waiting forever.
struct DeathNotice<U> {
    results: Outbox<U>,
    node: &'static str,
    /// The first item of the chunk being worked on.
    index: u64,
}

impl<U> Drop for DeathNotice<U> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut chunk = Chunk::new(1);
            chunk.items.push_back((
                self.index,
                Err(Box::new(Error::Panicked {
                    node: self.node.into(),
                    index: Some(self.index),
                    message: "a worker thread died while processing this item".to_owned(),
                })),
            ));
            chunk.end = Some(self.index + 1);
            let _ = self.results.send(&mut chunk);
        }
    }
}

/// How many items a worker asks for at a time.
///
/// Handing a chunk to the consumer costs a channel operation and, when the
/// consumer sleeps, a wake-up (microseconds on a VM). A chunk of one item
/// keeps latency and read-ahead low for an expensive stage; a cheap stage
/// would pay the hand-over on every item. So a worker starts at one item and
/// doubles its chunk while pulling and processing a chunk takes less than
/// [`CHEAP_CHUNK`], up to the plan's `max_chunk` (the credits bound it too),
/// and halves it again once a chunk takes longer than [`DEAR_CHUNK`]. With a
/// growing window (see [`Plan::window_for`]) the window follows the chunks.
#[derive(Debug)]
struct ChunkSizer {
    size: usize,
    max: usize,
    adaptive: bool,
}

/// A chunk made faster than this is worth growing: at 50 µs, a parse of
/// about 1 µs per record stopped at chunks of 64, and the realistic
/// pipeline's workers still slept and woke about 50,000 times a run;
/// at 100 µs, a third as often.
const CHEAP_CHUNK: Duration = Duration::from_micros(100);
/// A chunk made slower than this is worth shrinking.
const DEAR_CHUNK: Duration = Duration::from_micros(500);

impl ChunkSizer {
    fn new(plan: &Plan) -> Self {
        let max = plan.max_chunk.max(1);
        ChunkSizer {
            size: if plan.adaptive_chunks { 1 } else { max },
            max,
            adaptive: plan.adaptive_chunks,
        }
    }

    /// A chunk of `len` items took `took` to process.
    fn observe(&mut self, len: usize, took: Duration) {
        if !self.adaptive || len < self.size {
            // A short chunk (credits ran low, end of data) says little.
            return;
        }
        if took < CHEAP_CHUNK {
            self.size = (self.size * 2).min(self.max);
        } else if took > DEAR_CHUNK {
            self.size = (self.size / 2).max(1);
        }
    }
}

/// Everything one worker thread needs.
struct Worker<N: Node, S, U> {
    puller: Arc<Mutex<Puller<N>>>,
    stage: Arc<S>,
    results: Outbox<U>,
    permits: Arc<Permits>,
    halt: Arc<AtomicBool>,
    plan: Plan,
}

impl<N: Node, S: Stage<N::Item, U>, U> Worker<N, S, U> {
    /// Take credits, pull a chunk under the source lock, process it with the
    /// lock released, send it; until the pass ends or the owner stops it.
    fn run(self, mut cx: Cx) {
        // Counted while this thread runs: waits spin only while the
        // workers alive have cores to spare (see `spin.rs`).
        let _live = Live::worker();
        let mut notice = DeathNotice {
            results: self.results.clone(),
            node: self.plan.node,
            index: 0,
        };
        let mut sizer = ChunkSizer::new(&self.plan);
        let mut spin = Spin::default();
        // The buffers chunks are pulled into, emptied by `process`.
        let mut buffers = (VecDeque::new(), VecDeque::new());
        // One worker: the buffers of the chunk last sent, emptied by the
        // ring (see `Outbox::send`).
        let mut kept: Option<(Items<U>, Snapshotted)> = None;
        loop {
            if self.halt.load(Ordering::Acquire) {
                return;
            }
            let granted = self.permits.acquire_up_to(sizer.size, &mut spin);
            if granted == 0 {
                return;
            }
            // A chunk's cost is what the source and the stage spent on it
            // (not the wait for the lock): a slow source with a cheap stage
            // keeps small chunks, and so a small window of its items.
            let (mut pulled, started) = {
                let mut puller = lock(&self.puller);
                if puller.done || self.halt.load(Ordering::Acquire) {
                    return;
                }
                let started = sizer.adaptive.then(Instant::now);
                let pulled = puller.pull_chunk(
                    &mut cx,
                    granted,
                    self.plan.snapshots,
                    self.plan.node,
                    Some(&self.halt),
                    std::mem::take(&mut buffers),
                );
                (pulled, started)
            };
            if pulled.items.len() < granted {
                self.permits.give_back(granted - pulled.items.len());
            }
            let last = pulled.end.is_some();
            if let Some((first, _)) = pulled.items.front() {
                // If this thread dies now, the consumer is told at the
                // chunk's first item, which is the one it waits for in order.
                notice.index = *first;
            }
            let mut chunk = self.process(&mut pulled, kept.take());
            buffers = (pulled.items, pulled.snapshots);
            if let Some(started) = started {
                let before = sizer.size;
                sizer.observe(chunk.items.len(), started.elapsed());
                if sizer.size > before {
                    // A fixed window is at its ceiling already: a no-op.
                    self.permits.grow(self.plan.window_for(sizer.size));
                }
            }
            if self.results.send(&mut chunk).is_err() || last {
                return;
            }
            if chunk.items.capacity() > 0 {
                kept = Some((chunk.items, chunk.snapshots));
            }
        }
    }

    /// Runs the stage over a pulled chunk (emptying it) into a spare
    /// buffer; errors stay items. A stage that passes items through hands
    /// the pulled buffer itself over, and pulls next into a spare one.
    fn process(
        &self,
        pulled: &mut Chunk<N::Item>,
        kept: Option<(Items<U>, Snapshotted)>,
    ) -> Chunk<U> {
        // The buffers this worker's last send left (one worker), or the
        // consumer's emptied ones when some came back; the snapshots the
        // consumer retired are dropped here, into this thread's pool.
        let returned = kept.or_else(|| {
            let Spare {
                items,
                snapshots,
                retired,
            } = self.results.spare()?;
            drop(retired);
            Some((items, snapshots))
        });
        let (spare_items, spare_snapshots) = match returned {
            Some((items, snapshots)) => (Some(items), snapshots),
            None => (None, VecDeque::new()),
        };
        let snapshots = std::mem::replace(&mut pulled.snapshots, spare_snapshots);
        let items = std::mem::take(&mut pulled.items);
        let items = match self.stage.pass_through(items) {
            Ok(items) => {
                if let Some(spare) = spare_items.and_then(|s| self.stage.reuse(s)) {
                    pulled.items = spare;
                }
                items
            }
            Err(items) => {
                pulled.items = items;
                let mut out = spare_items.unwrap_or_default();
                out.clear();
                out.extend(pulled.items.drain(..).map(|(index, item)| {
                    let out = item.and_then(|item| {
                        catch(self.plan.node, Some(index), || {
                            self.stage.apply(index, item)
                        })
                        .map_err(Box::new)
                    });
                    (index, out)
                }));
                out
            }
        };
        Chunk {
            items,
            snapshots,
            end: pulled.end.take(),
        }
    }
}

/// `state` with the count at `path` (keys down through nested states) raised
/// by `by`; `None` if there is no `u64` there.
fn count_moved(state: &State, path: &[String], by: u64) -> Option<State> {
    let (key, below) = path.split_first()?;
    let mut moved = state.clone();
    if below.is_empty() {
        let count: u64 = state.get(key).ok()?;
        moved.insert(key.clone(), count.checked_add(by)?).ok()?;
    } else {
        let child = state.child(key).ok()?;
        moved.insert_child(key.clone(), count_moved(&child, below, by)?);
    }
    Some(moved)
}

/// Whether a threaded node over `source` must record the source's state
/// with every item it delivers, in source order, for its states to be
/// resharded: the source reads a redistributable sampler through a node
/// whose items do not stand for a known number of positions (a filter, a
/// `try_map` that may drop records, a mix, a shuffle). Its state then never
/// counts items past its snapshot, and the positions below are read off the
/// snapshot exactly. Pipelines without such a sampler are unaffected.
fn needs_exact_snapshots(source: &Description) -> bool {
    let (mut opaque, mut elastic) = (false, false);
    let mut open = vec![source];
    while let Some(desc) = open.pop() {
        elastic |= *desc.resume() == Resume::Redistributable;
        opaque |= !desc.resume().counts_positions();
        open.extend(desc.children().map(|(_, child)| child));
    }
    opaque && elastic
}

/// A source pulled on the caller's thread or on workers, with the
/// consumer's position and the error policy. See the module docs.
pub(crate) struct Threaded<N: Node, S, U> {
    plan: Plan,
    /// The plan as run over this source (see [`Plan::over`]).
    run: Plan,
    puller: Arc<Mutex<Puller<N>>>,
    stage: Arc<S>,
    /// The source's description, refreshed whenever the source is at home.
    source_description: Description,
    flag: ResetFlag,
    phase: Phase<U>,
    /// What the consumer received (with workers; inline the source's own
    /// state is exact).
    cursor: Cursor,
    /// The consumer received the end of data: the source stands where the
    /// consumer does.
    ended: bool,
    budget: ErrorBudget,
    /// The span of the skips this pass was restored with: from the first
    /// item not delivered to one past the last delivered ahead (0 without).
    restored_span: u64,
    /// Whether the source may run on the consumer's thread for a while, and
    /// when (one worker only; see `adapt.rs`).
    adapt: Option<Adapt>,
    /// The source came back to the consumer mid-pass and stands where the
    /// consumer does; `cursor` is stale until the next reader starts.
    at_consumer: bool,
    /// Where the adaptation reads the time.
    clock: Arc<dyn Clock>,
}

impl<N: Node, S, U> fmt::Debug for Threaded<N, S, U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.plan.node)
            .field("source", &self.source_description.to_string())
            .field("plan", &self.run)
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

impl<N: Node, S, U> Threaded<N, S, U> {
    /// The plan as built.
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Whether the source may run on the consumer's thread (see
    /// [`set_adapt`](Threaded::set_adapt)).
    pub(crate) fn adapt_policy(&self) -> Option<AdaptPolicy> {
        self.adapt.as_ref().map(Adapt::policy)
    }

    /// The source's description as of the last reset.
    pub(crate) fn source_description(&self) -> &Description {
        &self.source_description
    }
}

impl<N, S, U> Threaded<N, S, U>
where
    N: Node + 'static,
    N::Item: Send + 'static,
    S: Stage<N::Item, U>,
    U: Send + 'static,
{
    /// A node over `source` that was not reset yet.
    pub(crate) fn new(source: N, stage: S, plan: Plan) -> Self {
        let source_description = source.describe();
        // Taken when the node is built: a tree does not change shape.
        let varies = source_description.varying_order().is_some();
        let exact = needs_exact_snapshots(&source_description);
        Threaded {
            run: plan.over(varies).exact_positions(exact),
            plan,
            source_description,
            puller: Arc::new(Mutex::new(Puller {
                source,
                next_index: 0,
                skip: BTreeSet::new(),
                skip_path: String::new(),
                done: false,
                broke: None,
                last_snapshot: Instant::now(),
                pace: MIN_SNAPSHOT_INTERVAL,
                since_snapshot: 0,
                missed: false,
                quick: false,
                chunk_clock: Instant::now(),
                counted: None,
            })),
            stage: Arc::new(stage),
            flag: ResetFlag::default(),
            phase: Phase::Idle,
            cursor: Cursor::new(State::new(), 0, []),
            ended: false,
            budget: ErrorBudget::new(plan.policy),
            restored_span: 0,
            adapt: None,
            at_consumer: false,
            clock: Arc::new(SystemClock),
        }
    }

    /// Lets the source run on the consumer's thread while that is faster
    /// (`Some`; one worker, in order), or keeps it on the worker (`None`,
    /// the default). A builder step: before the first reset.
    pub(crate) fn set_adapt(&mut self, policy: Option<AdaptPolicy>) {
        debug_assert!(self.plan.workers == 1 && self.plan.in_order);
        self.adapt = policy.map(Adapt::new);
    }

    /// The bound on what a state this node writes this pass can record
    /// (`max_offset`, before the offsets delivered ahead): a snapshot is
    /// taken at least every `snapshot_frequency` items that are not restored
    /// skips, so at most that many plus the restored skips are delivered
    /// after the one a state names (`steps_since_snapshot`, which a restore
    /// replays). Items delivered ahead of a gap are not replayed (they are
    /// passed over while pulling) and the writer adds their largest offset.
    fn max_offset(&self) -> u64 {
        let every = match self.run.snapshots {
            Snapshots::Every(every) => every,
            Snapshots::Paced => MAX_PACED_STEPS,
        };
        every
            .saturating_add(self.run.max_in_flight as u64)
            .saturating_add(self.restored_span.saturating_mul(2))
    }

    /// Sets the error policy (a builder step: before the first reset).
    pub(crate) fn set_policy(&mut self, policy: ErrorPolicy) {
        self.plan.policy = policy;
        self.run.policy = policy;
        self.budget = ErrorBudget::new(policy);
    }

    /// How many more items the consumer gets this pass: the source's hint
    /// plus what was pulled and not yet handed out, then the error policy
    /// (`stage_fails`: whether the stage may turn an item into an error).
    ///
    /// It never waits for the workers: while one holds the source, only
    /// the items the consumer already holds are certain, and the upper
    /// bound is unknown. Otherwise the read-ahead (in a worker's hands or on
    /// the way) is bounded by the credits out.
    pub(crate) fn size_hint(&self, stage_fails: bool) -> crate::hint::Hint {
        let (raw, source_fails) = match &self.phase {
            // Not reset, or unusable: every `next` is an error.
            Phase::Idle | Phase::ShutDown => return crate::hint::UNKNOWN,
            Phase::Finished => return crate::hint::exact(0),
            Phase::Inline | Phase::Ready(_) => match self.puller.try_lock() {
                Ok(puller) => (puller.size_hint(), puller.source.may_fail()),
                Err(_) => return crate::hint::UNKNOWN,
            },
            Phase::Running(pool) => {
                let current = pool.current.items.len();
                let held = (current + pool.deferred.len()) as u64;
                match self.puller.try_lock() {
                    Ok(puller) => {
                        let (lower, upper) = puller.size_hint();
                        let ahead = pool.permits.in_use();
                        // Deferred errors gave their credits back already.
                        let ahead = (ahead + pool.deferred.len()) as u64;
                        let upper = upper.and_then(|u| u.checked_add(ahead));
                        (
                            (lower.saturating_add(held), upper),
                            puller.source.may_fail(),
                        )
                    }
                    Err(_) => ((held, None), true),
                }
            }
        };
        self.budget.size_hint(raw, stage_fails || source_fails)
    }

    /// Whether the consumer may get an error this pass (see
    /// [`size_hint`](Self::size_hint)).
    pub(crate) fn may_fail(&self, stage_fails: bool) -> bool {
        let source_fails = self
            .puller
            .try_lock()
            .map_or(true, |puller| puller.source.may_fail());
        self.budget.may_deliver(stage_fails || source_fails)
    }

    /// The next item for the consumer, after the error policy.
    pub(crate) fn next(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        // The common case first: the current chunk holds a good item that
        // carries no snapshot and nothing waits before it.
        if let Phase::Running(pool) = &mut self.phase
            && let Some((index, value)) = pool.take_plain()
        {
            self.cursor.deliver(index, None);
            self.count_handed_out(cx);
            return Ok(Some(value));
        }
        let node = self.plan.node;
        self.flag.check(node)?;
        loop {
            if let Phase::Ready(base) = self.phase {
                if self.adapt_mode() == Some(Mode::Inline) {
                    // The source stands where the consumer does (a reset
                    // put it there), and it was faster here last pass.
                    self.phase = Phase::Inline;
                    self.at_consumer = true;
                } else {
                    self.phase = Phase::Running(Box::new(self.spawn_pool(base, cx)?));
                }
            }
            if let Phase::Running(pool) = &self.phase
                && pool.handed_back()
            {
                // Everything the reader read ahead is out: go on inline,
                // unless the consumer meanwhile wants the reader back.
                self.phase = Phase::Inline;
                self.at_consumer = true;
                if self.adapt_mode() == Some(Mode::Threaded) {
                    self.go_threaded(cx);
                }
                continue;
            }
            let delivered = match &mut self.phase {
                Phase::Running(pool) => {
                    match pool.next(&mut self.cursor, self.run.in_order, node, cx) {
                        Some((index, value, snapshot)) => {
                            self.cursor.deliver(index, snapshot);
                            Some(value)
                        }
                        None => None,
                    }
                }
                Phase::Inline => self.next_inline(cx),
                Phase::Finished => return Ok(None),
                Phase::ShutDown => return Err(Error::ShutDown { node }),
                Phase::Idle | Phase::Ready(_) => return Err(Error::NotReset { node }),
            };
            let error = match delivered {
                None => return self.end_of_data(cx),
                Some(Ok(value)) => {
                    self.count_handed_out(cx);
                    return Ok(Some(value));
                }
                Some(Err(error)) if is_bad_record(&error) => error,
                // Not a bad record: no policy applies (the pass ends by itself).
                Some(Err(error)) => return Err(error),
            };
            match self.budget.judge(error, cx) {
                Verdict::Deliver(error) => {
                    self.count_handed_out(cx);
                    return Err(error);
                }
                Verdict::DeliverAndEnd(error) => {
                    self.finish();
                    return Err(error);
                }
                Verdict::Skip => {}
            }
        }
    }

    /// Inline: pull one item and process it here; `None` at the end.
    fn next_inline(&mut self, cx: &mut Cx) -> Option<Result<U>> {
        let node = self.plan.node;
        let (index, item) = {
            // No worker holds the source inline: reach it without taking
            // the lock (one locked instruction per item instead of two).
            let mut locked;
            let puller = match Arc::get_mut(&mut self.puller) {
                Some(alone) => alone.get_mut().unwrap_or_else(|e| e.into_inner()),
                None => {
                    locked = lock(&self.puller);
                    &mut *locked
                }
            };
            loop {
                if puller.done {
                    return None;
                }
                match puller.pull_one(cx, node) {
                    Pulled::Item(index, item) => break (index, item),
                    Pulled::Skipped(_) => {}
                    Pulled::End { last, .. } => break last?,
                }
            }
        };
        Some(
            item.map_err(|error| *error)
                .and_then(|item| catch(node, Some(index), || self.stage.apply(index, item))),
        )
    }

    /// Where the adaptation wants the source now (`None`: not adaptive).
    fn adapt_mode(&self) -> Option<Mode> {
        self.adapt.as_ref().map(Adapt::mode)
    }

    /// Counts an item handed out, and switches between the reader and
    /// the consumer's thread when the adaptation says so (see `adapt.rs`).
    #[inline]
    fn count_handed_out(&mut self, cx: &Cx) {
        if let Some(adapt) = &mut self.adapt
            && adapt.tick()
        {
            self.adapt_look(cx);
        }
    }

    #[cold]
    fn adapt_look(&mut self, cx: &Cx) {
        let waited = match &self.phase {
            Phase::Running(pool) => pool.spin.waited(),
            _ => Duration::ZERO,
        };
        let Some(adapt) = &mut self.adapt else {
            return;
        };
        match (adapt.look(self.clock.now(), waited), &mut self.phase) {
            // The reader stops now; the pass goes on inline once what it
            // read ahead is handed out (see `next`).
            (Some(Mode::Inline), Phase::Running(pool)) => pool.hand_back(),
            (Some(Mode::Threaded), Phase::Inline) => self.go_threaded(cx),
            // Still handing back, or the pass is over: `next` and the next
            // reset follow the adaptation's mode.
            _ => {}
        }
    }

    /// Inline mid-pass, with the source where the consumer stands: starts a
    /// reader from a snapshot of it. A source whose state cannot be taken
    /// stays inline (its `get_state` reports the failure to the consumer).
    fn go_threaded(&mut self, cx: &Cx) {
        let node = self.plan.node;
        let mut puller = lock(&self.puller);
        if puller.done {
            return;
        }
        let Ok(snapshot) = catch(node, None, || puller.source.get_state(cx)) else {
            return;
        };
        let base = puller.next_index;
        puller.restart_pacing();
        self.cursor = Cursor::new(snapshot, base, puller.skip.iter().copied());
        drop(puller);
        self.at_consumer = false;
        self.phase = Phase::Ready(base);
    }

    /// The consumer reached the end of the pass.
    fn end_of_data(&mut self, cx: &Cx) -> Result<Option<U>> {
        self.finish();
        let (done, broke) = {
            let puller = lock(&self.puller);
            (puller.done, puller.broke.is_some())
        };
        if broke {
            // The pass ended early: a restore must not read on.
            self.budget.end_pass();
        }
        // The source stands where the consumer does only if it really ended
        // (not when a worker died, leaving others' read-ahead behind).
        self.ended = done;
        if self.ended {
            self.snapshot_at_end(cx)?;
        }
        Ok(None)
    }

    /// Ends the pass: joins the workers and latches.
    fn finish(&mut self) {
        self.stop_workers();
        self.phase = Phase::Finished;
    }

    fn stop_workers(&mut self) {
        if let Phase::Running(pool) = &mut self.phase {
            pool.stop();
        }
    }

    /// The consumer received the end of data and the workers are joined: the
    /// source now stands past its end, which can differ from where the last
    /// snapshot and the count after it put it (a sampler asked for one more
    /// index counts as started, and moves to its next epoch on the next
    /// reset). Snapshot that position, so that restoring a state taken at
    /// the end of a pass sets the source up for the next pass exactly as the
    /// uninterrupted run does.
    fn snapshot_at_end(&mut self, cx: &Cx) -> Result<()> {
        if self.run.workers == 0 {
            return Ok(());
        }
        let puller = lock(&self.puller);
        let node = self.plan.node;
        let snapshot = catch(node, None, || puller.source.get_state(cx))?;
        self.cursor = Cursor::new(snapshot, puller.next_index, []);
        Ok(())
    }

    /// Checks a saved state as `reset` would take it, the source's part
    /// included, without applying anything.
    pub(crate) fn check_state(&self, state: &State) -> Result<()> {
        let node = self.plan.node;
        let saved = match self.plan.layout {
            Layout::Indexed => Saved::decode(node, state, &[ERRORS]),
            Layout::InOrder => Saved::decode_in_order(node, state, &[ERRORS], MAX_PACED_STEPS),
        }?;
        if state.contains(ERRORS) {
            self.budget.load(state)?;
        }
        lock(&self.puller).source.check_state(&saved.snapshot)
    }

    /// Starts a pass: from the start (`None`) or from a saved state, whose
    /// layout was checked by the node.
    pub(crate) fn reset(&mut self, state: Option<&State>) -> Result<()> {
        let node = self.plan.node;
        // Validate everything before touching anything.
        let saved = state
            .map(|s| match self.plan.layout {
                Layout::Indexed => Saved::decode(node, s, &[ERRORS]),
                Layout::InOrder => Saved::decode_in_order(node, s, &[ERRORS], MAX_PACED_STEPS),
            })
            .transpose()?;
        let counts = match state {
            Some(s) if s.contains(ERRORS) => Some(self.budget.load(s)?),
            _ => None,
        };
        // A new pass after one the consumer did not finish starts from where
        // the consumer stood, not from where the workers got to.
        let rewind = saved.is_none()
            && self.run.workers > 0
            && self.flag.is_reset()
            && !self.ended
            && !self.at_consumer;
        // Unusable until this reset succeeds.
        self.flag = ResetFlag::default();
        self.ended = false;
        self.stop_workers();
        self.phase = Phase::Idle;
        self.at_consumer = false;
        if let Some(adapt) = &mut self.adapt {
            adapt.new_pass();
        }
        if rewind {
            let (snapshot, steps) = self.cursor.position();
            let base = self.cursor.low() - steps;
            let (snapshot, base) = self.counted_forward(snapshot, base, self.cursor.low());
            let (snapshot, steps) = (snapshot.into_owned(), self.cursor.low() - base);
            let mut puller = lock(&self.puller);
            catch(node, None, || {
                snapshot::rewind(&mut puller.source, &snapshot, steps)
            })?;
        }
        let snapshot = self.reset_source(saved.as_ref())?;
        let base = saved.as_ref().map_or(0, Saved::resume_index);
        let ahead = saved.map(|s| s.ahead).unwrap_or_default();
        self.restored_span = ahead.last().map_or(0, |&last| last + 1 - base);
        self.cursor = Cursor::new(snapshot, base, ahead);
        self.budget.clear();
        if let Some(counts) = counts {
            self.budget.restore(counts);
        }
        self.phase = if self.budget.ended() {
            Phase::Finished
        } else if self.run.workers == 0 {
            Phase::Inline
        } else {
            Phase::Ready(base)
        };
        self.flag.mark();
        Ok(())
    }

    /// Resets the source (no worker is left) to `saved`, pulls the items the
    /// consumer had received since its snapshot again, and returns the
    /// snapshot the cursor starts from.
    fn reset_source(&mut self, saved: Option<&Saved>) -> Result<State> {
        let node = self.plan.node;
        let threaded = self.run.workers > 0;
        let mut puller = lock(&self.puller);
        let puller = &mut *puller;
        puller.done = false;
        puller.broke = None;
        puller.skip.clear();
        puller.next_index = 0;
        puller.restart_pacing();
        puller.counted = if threaded {
            self.source_description.counted_path()
        } else {
            None
        };
        let mut replay = Replay::reset(&mut puller.source, saved.map(|s| &s.snapshot))?;
        if let Some(saved) = saved {
            for i in 0..saved.steps {
                match guard(node, Some(i), || replay.next())? {
                    // An `Err` is an item too: it was delivered, so skip it.
                    Ok(Some(_)) | Err(_) => {}
                    Ok(None) => {
                        return Err(Error::bad_state(
                            saved.steps_path.clone(),
                            format!(
                                "the source ended after {i} of the {} items to skip: the state does not belong to this source",
                                saved.steps
                            ),
                        ));
                    }
                }
            }
        }
        let snapshot = if threaded {
            replay.get_state()?
        } else {
            State::new()
        };
        if let Some(saved) = saved {
            puller.next_index = saved.resume_index();
            puller.skip = saved.ahead.iter().copied().collect();
            puller.skip_path.clone_from(&saved.ahead_path);
        }
        self.source_description = puller.source.describe();
        Ok(snapshot)
    }

    /// Starts the worker threads for a pass beginning at `base`.
    fn spawn_pool(&self, base: u64, cx: &Cx) -> Result<Pool<U>> {
        // One worker hands its items over a ring, several send chunks over
        // a channel (see `ring.rs`).
        let (outbox, inbox) = if self.run.workers == 1 {
            let (tx, rx) = ring::ring(self.run.max_in_flight);
            (Outbox::Ring(tx), Inbox::Ring(rx))
        } else {
            let (tx, rx) = crossbeam_channel::unbounded();
            let (spare_tx, spare_rx) = crossbeam_channel::unbounded();
            (
                Outbox::Channel {
                    chunks: tx,
                    spare: spare_rx,
                },
                Inbox::Channel {
                    chunks: rx,
                    spare: spare_tx,
                },
            )
        };
        let mut pool = Pool {
            results: inbox,
            permits: Arc::new(Permits::new(
                self.run.window_for(ChunkSizer::new(&self.run).size),
                self.run.max_in_flight,
                self.run.max_chunk,
            )),
            halt: Arc::new(AtomicBool::new(false)),
            workers: Workers::default(),
            reorder: ReorderBuffer::new(base),
            current: Chunk::new(0),
            position: 0,
            end_at: None,
            deferred: std::collections::BTreeMap::new(),
            spin: Spin::default(),
            handing_back: false,
        };
        for i in 0..self.run.workers {
            let worker = Worker {
                puller: Arc::clone(&self.puller),
                stage: Arc::clone(&self.stage),
                results: outbox.clone(),
                permits: Arc::clone(&pool.permits),
                halt: Arc::clone(&pool.halt),
                plan: self.run,
            };
            let name = format!("{}-{i}", self.plan.thread_name);
            // On failure `pool` is dropped, which stops and joins the others.
            let worker_cx = cx.fork();
            let node = self.plan.node;
            let run = move || {
                trace::worker_started(node, i);
                worker.run(worker_cx);
                trace::worker_stopped(node, i);
            };
            let handle = thread::spawn(node, name, trace::with_dispatch(run))?;
            pool.workers.push(handle);
        }
        Ok(pool)
    }

    /// The consumer's position in the node's layout, with the error counts
    /// when the policy keeps any.
    pub(crate) fn get_state(&self, cx: &Cx) -> Result<State> {
        self.flag.check(self.plan.node)?;
        let (mut state, low) = match self.phase {
            Phase::Idle => {
                return Err(Error::NotReset {
                    node: self.plan.node,
                });
            }
            // Inline, or the source came back to the consumer mid-pass:
            // its own state is exact.
            _ if self.run.workers == 0 || self.at_consumer => {
                let puller = lock(&self.puller);
                // Skipped items right at the front count as received steps.
                let mut low = puller.next_index;
                while puller.skip.contains(&low) {
                    low += 1;
                }
                let source = puller.source.get_state(cx)?;
                let ahead = puller.skip.range(low..).copied();
                (self.encode(&source, puller.next_index, low, ahead)?, low)
            }
            _ => {
                let (snapshot, base, low, ahead) = self.cursor.parts();
                let (snapshot, base) = self.counted_forward(snapshot, base, low);
                (self.encode(&snapshot, base, low, ahead)?, low)
            }
        };
        // A source that broke ends the pass once its last item was received,
        // even before the consumer asked for the end.
        let mut budget = self.budget;
        if lock(&self.puller).broke.is_some_and(|end| low >= end) {
            budget.end_pass();
        }
        if budget.policy() != ErrorPolicy::Deliver || budget.ended() {
            budget.save(&mut state)?;
        }
        Ok(state)
    }

    /// Over a source that counts its items ([`Description::counted_path`]), which
    /// takes no snapshot per item: `snapshot`, taken before item `base`,
    /// moved forward over the items up to `low` (the consumer's position),
    /// and the index it then stands before. The state records no steps to
    /// replay, as if a snapshot had been taken after every item. Not past
    /// an item at which the source broke (a panic leaves its count
    /// unknown): that one item stays a step, as it would have before.
    fn counted_forward<'a>(
        &self,
        snapshot: &'a State,
        base: u64,
        low: u64,
    ) -> (std::borrow::Cow<'a, State>, u64) {
        let unmoved = (std::borrow::Cow::Borrowed(snapshot), base);
        let (path, upto) = {
            let puller = lock(&self.puller);
            let Some(path) = puller.counted.clone() else {
                return unmoved;
            };
            (path, puller.broke.map_or(low, |end| low.min(end - 1)))
        };
        if upto <= base {
            return unmoved;
        }
        match count_moved(snapshot, &path, upto - base) {
            Some(moved) => (std::borrow::Cow::Owned(moved), upto),
            // Not the promised count: keep the steps (a replay).
            None => unmoved,
        }
    }

    fn encode(
        &self,
        snapshot: &State,
        base: u64,
        low: u64,
        ahead: impl Iterator<Item = u64>,
    ) -> Result<State> {
        match self.plan.layout {
            Layout::Indexed => snapshot::encode(snapshot, base, low, ahead, self.max_offset()),
            Layout::InOrder => snapshot::encode_in_order(snapshot, low - base),
        }
    }

    /// Stops the workers and shuts the source down.
    pub(crate) fn shutdown(&mut self) {
        self.stop_workers();
        if !matches!(self.phase, Phase::Idle) {
            self.phase = Phase::ShutDown;
        }
        lock(&self.puller).source.shutdown();
    }
}

impl<N: Node, S, U> Drop for Threaded<N, S, U> {
    fn drop(&mut self) {
        // Dropping the pool stops and joins its workers.
        self.phase = Phase::Idle;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks cross between cores item by item: an item keeps its error out
    /// of line, so that a small item stays small.
    #[test]
    fn a_chunk_item_of_a_word_is_three_words() {
        assert_eq!(std::mem::size_of::<(u64, Slot<u64>)>(), 24);
        assert!(std::mem::size_of::<Error>() > 24);
    }
}
