//! The source's side of a pass: [`Puller`] owns the source, numbers the
//! items it pulls (0, 1, 2, ... from the start of the pass), passes over
//! those a restored state says were delivered, and records the source's
//! state among them as the plan says. Workers share it under a lock; inline
//! the consumer uses it alone.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nodes_core::{Cx, Error, Hint, Node};

use super::clock::Clock;
use super::hub::{Chunk, Items, Slot};
use super::panic::{catch, guard};
use super::plan::{Plan, Snapshots};
use super::snapshot::MAX_PACED_STEPS;
use super::sync::{Arc, AtomicU64, Ordering};
use crate::policy::is_bad_record;

/// A chunk is handed over early once it took this long to fill, so a slow
/// source still reaches the consumer item by item.
const MIN_CHUNK_TIME: Duration = Duration::from_micros(100);

/// A chunk that filled this fast makes the next one skip its mid-chunk
/// clock checks (a clock read costs about as much as a cheap item): at that
/// pace it is handed over well within [`MIN_CHUNK_TIME`].
const QUICK_CHUNK: Duration = Duration::from_micros(25);

/// The shortest time between two paced snapshots. A snapshot pins the
/// buffers it shares copy-on-write, and the source's next writes to them
/// pay for the copy on this thread; snapshots this far apart keep that
/// under a few percent of the source's time, and a restore replays at most
/// about this much of the source's work.
const MIN_SNAPSHOT_INTERVAL: Duration = Duration::from_millis(5);

/// Paced snapshots are at least this many times their cost apart (the cost
/// includes the copies a live snapshot makes the source pay, see `cow.rs`).
const PACE_FACTOR: u32 = 32;

/// The source and the numbering of the pass.
pub(crate) struct Puller<N> {
    pub(crate) source: N,
    /// The index the next pulled item gets.
    pub(crate) next_index: u64,
    /// Indices delivered before a restore: pulled, not processed, not sent.
    pub(crate) skip: BTreeSet<u64>,
    /// Where `skip` came from in the restored state.
    pub(crate) skip_path: String,
    /// The source ended or broke: nobody pulls again this pass.
    pub(crate) done: bool,
    /// Where the source broke, shared with the consumer.
    pub(crate) broke: Arc<Broke>,
    /// The source counts its items ([`Description::counted_path`]) and workers
    /// pull it: no snapshot per item (see `Threaded::counted_forward`).
    pub(crate) counted: bool,
    node: &'static str,
    snapshots: Snapshots,
    clock: std::sync::Arc<dyn Clock>,
    /// When the last snapshot was taken (or the pass began), and how long to
    /// wait before the next one under [`Snapshots::Paced`].
    last_snapshot: Instant,
    pace: Duration,
    /// Items pulled since the last snapshot (or the pass began).
    since_snapshot: u64,
    /// A snapshot was due at a skipped item: take it after the next item
    /// that is not skipped, so the gap between snapshots stays bounded.
    missed: bool,
    /// The source asked for a snapshot ([`Cx::request_snapshot`]): take it
    /// after the next item handed out.
    requested: bool,
    /// The index of the last item the source asked for one at, this pass.
    fence: Option<u64>,
    /// The last chunk filled in under [`QUICK_CHUNK`].
    quick: bool,
    /// When the last full chunk was finished.
    chunk_clock: Instant,
}

/// Where the source broke (a panic, or an error that is not a bad record):
/// the index after the item it broke at, where the pass ends. Read by the
/// consumer without the source's lock, which a worker inside the source's
/// `next` holds.
pub(crate) struct Broke(AtomicU64);

impl Broke {
    pub(crate) fn get(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Acquire)).filter(|&end| end != u64::MAX)
    }

    pub(crate) fn set(&self, end: Option<u64>) {
        self.0.store(end.unwrap_or(u64::MAX), Ordering::Release);
    }
}

impl<N: Node> Puller<N> {
    /// A puller of `source` run as `plan` says.
    pub(crate) fn new(source: N, plan: &Plan, clock: std::sync::Arc<dyn Clock>) -> Self {
        let now = clock.now();
        Puller {
            source,
            next_index: 0,
            skip: BTreeSet::new(),
            skip_path: String::new(),
            done: false,
            broke: Arc::new(Broke(AtomicU64::new(u64::MAX))),
            counted: false,
            node: plan.node,
            snapshots: plan.snapshots,
            clock,
            last_snapshot: now,
            pace: MIN_SNAPSHOT_INTERVAL,
            since_snapshot: 0,
            missed: false,
            requested: false,
            fence: None,
            quick: false,
            chunk_clock: now,
        }
    }

    /// What the source will still hand to the consumer: its own hint, less
    /// the restored skips it will yield and nobody will deliver.
    pub(crate) fn size_hint(&self) -> Hint {
        if self.done {
            return Hint::exact(0);
        }
        let skips = self.skip.len() as u64;
        let source = self.source.size_hint();
        Hint {
            lower: source.lower.saturating_sub(skips),
            upper: source.upper.map(|u| u.saturating_sub(skips)),
            ..source
        }
    }

    /// A new reader starts here, as if a snapshot had just been taken:
    /// snapshots are paced from now, quick chunks are earned again, and no
    /// item waits for one the source asked for before.
    pub(crate) fn restart_pacing(&mut self) {
        self.fence = None;
        self.last_snapshot = self.clock.now();
        self.since_snapshot = 0;
        self.missed = false;
        self.quick = false;
        self.chunk_clock = self.last_snapshot;
    }

    /// Pulls up to `limit` items (passing over restored skips) into a chunk
    /// filling `buffer`, recording snapshots as the plan says. A chunk is
    /// handed over early when `stopping` says so or filling it takes long.
    pub(crate) fn pull_chunk(
        &mut self,
        cx: &mut Cx,
        limit: usize,
        stopping: impl Fn() -> bool,
        buffer: Items<N::Item>,
    ) -> Chunk<N::Item> {
        let paced = self.snapshots == Snapshots::Paced;
        // A chunk of one is handed over at once, and a quick source's
        // chunk is checked only when full.
        let started = (limit > 1 && !self.quick).then(|| self.clock.now());
        let mut chunk = Chunk::with(buffer);
        chunk.fence = self.fence;
        chunk.items.reserve(limit.min(64));
        while chunk.items.len() < limit {
            let pulled = self.pull_one(cx);
            let requested = cx.take_snapshot_request();
            self.requested |= requested;
            let (index, item) = match pulled {
                Some(pulled) if !self.done => pulled,
                last => {
                    chunk.end = Some(last.as_ref().map_or(self.next_index, |(i, _)| i + 1));
                    chunk.items.extend(last);
                    return chunk;
                }
            };
            let bad_record = item.is_err();
            if requested {
                self.fence = Some(index);
            }
            chunk.items.push_back((index, item));
            let last = chunk.items.len() >= limit;
            // One clock read per full chunk, for the pace of snapshots and
            // for whether the next chunk may skip its checks.
            let now = (last && (limit > 1 || paced)).then(|| self.clock.now());
            if let Some(now) = now {
                self.quick = now.saturating_duration_since(self.chunk_clock) < QUICK_CHUNK;
                self.chunk_clock = now;
            }
            // After a bad record the source's position is recorded at once:
            // a source may fail without moving on, and a replay that counts
            // pulls would then skip the item instead of the failure.
            let due = bad_record
                || self.requested
                || !self.counted
                    && match self.snapshots {
                        Snapshots::Every(every) => self.missed || (index + 1).is_multiple_of(every),
                        Snapshots::Paced => {
                            self.since_snapshot >= MAX_PACED_STEPS
                                || now.is_some_and(|now| self.pace_due(now))
                        }
                    };
            if due && !self.snapshot(cx, &mut chunk) {
                return chunk;
            }
            // Checking at powers of two keeps the clock off the per-item
            // path while bounding how long a started chunk waits.
            if !last
                && chunk.items.len().is_power_of_two()
                && (stopping() || started.is_some_and(|s| self.clock.now() - s >= MIN_CHUNK_TIME))
            {
                self.quick = false;
                if paced && self.pace_due(self.clock.now()) {
                    self.snapshot(cx, &mut chunk);
                }
                return chunk;
            }
        }
        chunk
    }

    fn pace_due(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_snapshot) >= self.pace
    }

    /// Pulls the next item from the source, passing over restored skips.
    /// An `Err` from the source is an item; a panic in it, or an error that
    /// is not a bad record, ends the pass after that item. Once the pass
    /// ends, `done` is set and the last item (the failure that ended it, or
    /// a restored state that does not fit the source) is returned if there
    /// is one.
    #[inline]
    pub(crate) fn pull_one(&mut self, cx: &mut Cx) -> Option<(u64, Slot<N::Item>)> {
        loop {
            let index = self.next_index;
            let item = match guard(self.node, Some(index), || self.source.next(cx)) {
                Ok(Ok(Some(item))) => Ok(item),
                Ok(Ok(None)) => {
                    self.done = true;
                    let beyond = self.skip.first().copied();
                    self.skip.clear();
                    return beyond.map(|beyond| {
                        let error = Error::bad_state(
                            self.skip_path.clone(),
                            format!(
                                "the restored state says item {beyond} was delivered, but the source ended after {index} items: the state does not belong to this source"
                            ),
                        );
                        (index, Err(Box::new(error)))
                    });
                }
                // A source that panicked is in no known state: deliver the
                // panic and end the pass.
                Err(panicked) => return Some(self.broke_at(index, panicked)),
                // A bad record from the source is one item.
                Ok(Err(e)) if is_bad_record(&e) => Err(Box::new(e)),
                // Any other error says the source cannot go on: deliver it
                // and end the pass (it would otherwise be pulled forever).
                Ok(Err(e)) => return Some(self.broke_at(index, e)),
            };
            self.next_index += 1;
            self.since_snapshot += 1;
            if !self.skip.remove(&index) {
                return Some((index, item));
            }
            self.missed |=
                matches!(self.snapshots, Snapshots::Every(n) if (index + 1).is_multiple_of(n));
        }
    }

    /// The pass ends with `error` at `index`.
    fn broke_at(&mut self, index: u64, error: Error) -> (u64, Slot<N::Item>) {
        self.done = true;
        self.broke.set(Some(index + 1));
        self.next_index += 1;
        (index, Err(Box::new(error)))
    }

    /// Records the source's state after the chunk's last item. A source
    /// whose `get_state` fails cannot be resumed: the failure is delivered
    /// in place of that item and the pass ends (`false`). Only paced
    /// snapshots read the clock.
    fn snapshot<T>(&mut self, cx: &Cx, chunk: &mut Chunk<T>) -> bool {
        let at = chunk.items.len() - 1;
        let index = chunk.items[at].0;
        let started = (self.snapshots == Snapshots::Paced).then(|| self.clock.now());
        match catch(self.node, Some(index), || self.source.get_state(cx)) {
            Ok(state) => {
                chunk.snapshots.push_back((at, state, self.requested));
                self.since_snapshot = 0;
                self.missed = false;
                self.requested = false;
                if let Some(started) = started {
                    self.last_snapshot = self.clock.now();
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
