//! The hand-over between a pass's workers and its consumer: the credits
//! that bound the items in flight, the queue of chunks, and every wake-up
//! between the two sides.
//!
//! Credits are a count taken and given back without the lock, on a cache
//! line of their own: the two sides would otherwise meet at the lock twice
//! per chunk. Everything else (the queue of chunks, the end of the workers,
//! a cancel, the flow) changes only under one mutex, by a thread that then
//! notifies. A worker short of credits sleeps by the same rule: under the
//! lock, it raises a flag in the same word as the count, and the thread
//! that gives credits back sees the flag in the value its addition read,
//! and takes the lock to wake it. The two are read-modify-writes of one
//! word, so one of them comes first and the other sees it. So no wait can
//! miss its wake-up and none needs a timeout (the loom tests in
//! `loom_tests.rs` check this over every interleaving they reach). Each
//! side takes the lock once per chunk: a worker to queue its chunk, the
//! consumer to take it.
//!
//! A thread about to block first polls for a while when the node's threads
//! each have a core, since waking a thread that slept costs tens of
//! microseconds (more on a virtual machine). A worker polls the credits, the
//! consumer a change counter, each on a cache line of its own, so that a
//! poller never makes the other side wait for the lock. Polling only
//! shortens the wait: the condition variable waits below are what make it
//! end.
//!
//! Nothing here is sized by the node's arguments: the queue grows with the
//! chunks that arrive, and the credits are a count.

use std::collections::VecDeque;

use crossbeam_utils::{Backoff, CachePadded};
use nodes_core::{Error, Result, State};

use super::sync::{Arc, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering, lock, read, wait};

/// An item of a chunk, or the error in its place. The error is boxed, so
/// that an item of a `u64` stays three words on its way between cores.
pub(crate) type Slot<U> = std::result::Result<U, Box<Error>>;

/// The items of a chunk, in pull order, with their indices.
pub(crate) type Items<U> = VecDeque<(u64, Slot<U>)>;

/// Items on their way to the consumer, in pull order.
#[derive(Debug)]
pub(crate) struct Chunk<U> {
    pub(crate) items: Items<U>,
    /// Source states, as `(position in items, state after that item,
    /// whether the source asked for it)`.
    pub(crate) snapshots: VecDeque<(usize, State, bool)>,
    /// The pass ends after these items: the index after the last one. Set at
    /// the end of data, on a source that broke, and when a worker died.
    pub(crate) end: Option<u64>,
    /// The last item, up to the next one handed out, at which the source
    /// asked for a snapshot this pass (a file reader opening a file), if it
    /// did. Out of order, an item past such a point waits until everything
    /// up to the point was delivered (see `Pool::waits`).
    pub(crate) fence: Option<u64>,
    /// Items handed out of it, by the consumer.
    pub(crate) handed: usize,
}

impl<U> Chunk<U> {
    /// An empty chunk filling `items` (emptied first).
    pub(crate) fn with(mut items: Items<U>) -> Self {
        items.clear();
        Chunk {
            items,
            snapshots: VecDeque::new(),
            end: None,
            fence: None,
            handed: 0,
        }
    }

    /// A chunk of one error at `index` that ends the pass.
    pub(crate) fn failure(index: u64, error: Error) -> Self {
        let mut chunk = Chunk::with(VecDeque::new());
        chunk.items.push_back((index, Err(Box::new(error))));
        chunk.end = Some(index + 1);
        chunk
    }

    /// The index the consumer waits for before this chunk is its turn.
    pub(crate) fn first_index(&self) -> u64 {
        self.items
            .front()
            .map_or_else(|| self.end.unwrap_or(u64::MAX), |(i, _)| *i)
    }
}

/// Emptied chunk buffers kept for the workers at most: a steady pass
/// allocates no chunk, and buffers are freed on the thread that made them.
const MAX_SPARE: usize = 16;

/// Whether workers may take credits and queue chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Flow {
    Open,
    /// No new credits; chunks already pulled are still queued (the
    /// consumer hands them out before it takes the source back).
    Halted,
    /// No new credits and no chunks: the pass is being stopped.
    Closed,
}

#[derive(Debug)]
struct Inner<U> {
    queue: VecDeque<Chunk<U>>,
    spare: Vec<Items<U>>,
    /// The most the window may grow to.
    ceiling: usize,
    /// The smallest need among the workers that slept since the last
    /// wake-up (`usize::MAX`: none).
    wanted: usize,
    sleepers: usize,
    consumer_waits: bool,
    /// Workers of this pass that are still running.
    senders: usize,
    flow: Flow,
    cancelled: bool,
}

/// The hand-over of one node, reused pass after pass. See the module docs.
#[derive(Debug)]
pub(crate) struct Hub<U> {
    /// The node's name, for errors.
    node: &'static str,
    inner: Mutex<Inner<U>>,
    /// Credits free (the window less the credits taken by workers and not
    /// yet given back by the consumer), with [`SLEEPY`] while a worker may
    /// sleep for more (see the module docs) and [`STOPPING`] while the pass
    /// halts or closes: one word, so that a worker's look at both is one
    /// read.
    credits: CachePadded<AtomicUsize>,
    /// Credits in all: items pulled and not yet handed out, at most.
    /// Changed under the lock.
    window: AtomicUsize,
    /// Workers wait here for credits.
    room: Condvar,
    /// The consumer waits here for a chunk.
    ready: Condvar,
    /// Counts the changes the consumer may be waiting for (bumped under the
    /// lock): a polling consumer watches it without taking the lock.
    changes: CachePadded<AtomicU64>,
}

/// The flag in [`Hub::credits`] that a worker may be asleep for more.
const SLEEPY: usize = 1 << (usize::BITS - 1);
/// The flag in [`Hub::credits`] that the pass halts or closes.
const STOPPING: usize = 1 << (usize::BITS - 2);
/// The bits of [`Hub::credits`] that count them: the window stays within.
const COUNT: usize = STOPPING - 1;

/// Polls `changed` for [`POLLS`] rounds at most: whether it came true.
fn poll(changed: impl Fn() -> bool) -> bool {
    let backoff = Backoff::new();
    for _ in 0..POLLS {
        if changed() {
            return true;
        }
        backoff.snooze();
    }
    false
}

/// How many times a thread about to block polls (yielding its core each
/// time, once [`Backoff`] has finished spinning) before it sleeps: about
/// as long as a cheap stage takes to make a chunk, so that a steady
/// hand-over rarely pays for waking a thread that slept.
const POLLS: u32 = 256;

impl<U> Hub<U> {
    /// A hand-over of `node`'s, with no pass running.
    pub(crate) fn new(node: &'static str) -> Self {
        Hub {
            node,
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                spare: Vec::new(),
                ceiling: 0,
                wanted: usize::MAX,
                sleepers: 0,
                consumer_waits: false,
                senders: 0,
                flow: Flow::Closed,
                cancelled: false,
            }),
            credits: CachePadded::new(AtomicUsize::new(STOPPING)),
            window: AtomicUsize::new(0),
            room: Condvar::new(),
            ready: Condvar::new(),
            changes: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Records a change under the lock, for threads that poll.
    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::Release);
    }

    /// Opens a pass with `window` credits, growing up to `ceiling`. The
    /// previous pass's workers were all joined.
    pub(crate) fn open(&self, window: usize, ceiling: usize) {
        let mut inner = lock(&self.inner);
        inner.queue.clear();
        // Past the flag's bit, a window bounds nothing anyway.
        let window = window.clamp(1, COUNT);
        self.window.store(window, Ordering::Release);
        self.credits.store(window, Ordering::Release);
        inner.ceiling = ceiling.clamp(window, COUNT);
        inner.wanted = usize::MAX;
        inner.flow = Flow::Open;
    }

    /// Whether the pass is halting or closing (for a worker in the middle
    /// of a chunk to hand it over early).
    pub(crate) fn stopping(&self) -> bool {
        read(&self.credits) & STOPPING != 0
    }

    /// Takes between one and `want` credits, blocking while none is free:
    /// the first look takes what is free, a worker that has to wait waits
    /// for its chunk's worth (at most half the window), so that a fast
    /// worker and the consumer do not take turns item by item. `0` once
    /// the pass halts or closes.
    pub(crate) fn acquire(&self, want: usize, spin: bool) -> usize {
        let (want, mut poll, mut least) = (want.max(1), spin, 1);
        loop {
            if let Some(n) = self.take_credits(least, want) {
                return n;
            }
            least = want.min((read(&self.window) / 2).max(1));
            if poll {
                let ready = |c: usize| c & STOPPING != 0 || c & COUNT >= least;
                poll = self::poll(|| ready(read(&self.credits)));
                continue;
            }
            let mut inner = lock(&self.inner);
            // The flag first, then a last look in the value it replaced: a
            // later addition sees the flag (see the module docs).
            let credits = self.credits.fetch_or(SLEEPY, Ordering::AcqRel);
            if inner.flow == Flow::Open && credits & COUNT < least {
                inner.wanted = inner.wanted.min(least);
                inner.sleepers += 1;
                inner = wait(&self.room, inner);
                inner.sleepers -= 1;
            }
        }
    }

    /// Takes between `least` and `want` credits if that many are free;
    /// `Some(0)` once the pass halts or closes.
    fn take_credits(&self, least: usize, want: usize) -> Option<usize> {
        let mut credits = read(&self.credits);
        loop {
            let n = match (credits & STOPPING, credits & COUNT) {
                (0, free) if free >= least => free.min(want),
                (0, _) => return None,
                _ => return Some(0),
            };
            let (to, ok, err) = (credits - n, Ordering::AcqRel, Ordering::Acquire);
            match self.credits.compare_exchange(credits, to, ok, err) {
                Ok(_) => return Some(n),
                Err(now) => credits = now,
            }
        }
    }

    /// Gives back `n` credits (a worker's that it took and did not use, the
    /// consumer's for items it handed out, or a grown window's), and wakes
    /// the sleeping workers once the smallest need among them is free (see
    /// the module docs).
    pub(crate) fn release(&self, n: usize) {
        if n > 0 && self.credits.fetch_add(n, Ordering::AcqRel) & SLEEPY != 0 {
            let mut inner = lock(&self.inner);
            if inner.sleepers == 0 || read(&self.credits) & COUNT >= inner.wanted {
                // A worker that still lacks credits raises it again.
                self.credits.fetch_and(!SLEEPY, Ordering::AcqRel);
                inner.wanted = usize::MAX;
                self.room.notify_all();
            }
        }
    }

    /// Raises the window to `to` (at most the ceiling; it never shrinks).
    pub(crate) fn grow(&self, to: usize) {
        let inner = lock(&self.inner);
        let (to, window) = (to.min(inner.ceiling), read(&self.window));
        if to > window {
            self.window.store(to, Ordering::Release);
            drop(inner);
            self.release(to - window);
        }
    }

    /// Queues a worker's chunk and returns an emptied buffer to fill next
    /// (one the consumer left, or a new one). `Err` with the chunk once the
    /// pass is closed (the worker then stops).
    pub(crate) fn send(&self, chunk: Chunk<U>) -> Result<Items<U>, Chunk<U>> {
        let mut inner = lock(&self.inner);
        if inner.flow == Flow::Closed {
            return Err(chunk);
        }
        inner.queue.push_back(chunk);
        self.changed();
        if inner.consumer_waits {
            self.ready.notify_one();
        }
        Ok(inner.spare.pop().unwrap_or_default())
    }

    /// The consumer leaves its last chunk's emptied buffer for the workers
    /// and takes the next chunk, blocking until one is queued, every worker
    /// is gone, or a cancel comes ([`Error::Cancelled`]). `low` is the item
    /// the consumer waits for.
    pub(crate) fn receive(&self, done: Items<U>, spin: bool, low: u64) -> Result<Chunk<U>> {
        let mut poll = spin;
        let mut inner = lock(&self.inner);
        if done.capacity() > 0 && inner.spare.len() < MAX_SPARE {
            inner.spare.push(done);
        }
        loop {
            if inner.cancelled {
                inner.cancelled = false;
                return Err(Error::Cancelled { node: self.node });
            }
            if let Some(chunk) = inner.queue.pop_front() {
                return Ok(chunk);
            }
            if inner.senders == 0 {
                // Every worker is gone without reporting the end: they
                // always report, even when dying, so this is a defect.
                // Fail, never hang.
                let message = format!("worker threads exited without delivering item {low}");
                return Ok(Chunk::failure(low, Error::internal(self.node, message)));
            }
            if poll {
                // Polls a change counter, so that it never holds the lock
                // the workers need to queue a chunk.
                let seen = self.changes.load(Ordering::Relaxed);
                drop(inner);
                poll = self::poll(|| self.changes.load(Ordering::Acquire) != seen);
                inner = lock(&self.inner);
                continue;
            }
            inner.consumer_waits = true;
            inner = wait(&self.ready, inner);
            inner.consumer_waits = false;
        }
    }

    /// Stops new pulls: workers waiting for credits leave. [`Flow::Halted`]
    /// keeps what was pulled: chunks still arrive until every worker is
    /// gone. [`Flow::Closed`] stops the pass: the workers' sends fail, and
    /// the chunks still queued are returned, for the caller to drop outside
    /// the lock (their items are user values).
    pub(crate) fn stop(&self, flow: Flow) -> VecDeque<Chunk<U>> {
        let mut inner = lock(&self.inner);
        inner.flow = inner.flow.max(flow);
        self.credits.fetch_or(STOPPING, Ordering::AcqRel);
        self.changed();
        self.room.notify_all();
        match flow {
            Flow::Closed => std::mem::take(&mut inner.queue),
            _ => VecDeque::new(),
        }
    }

    /// Wakes a consumer waiting for a chunk with [`Error::Cancelled`]
    /// (or the next one to wait, if none waits now).
    pub(crate) fn cancel(&self) {
        let mut inner = lock(&self.inner);
        inner.cancelled = true;
        self.changed();
        self.ready.notify_all();
    }

    /// Whether the consumer is blocked waiting for a chunk (for tests that
    /// order their events after it).
    #[cfg(test)]
    pub(crate) fn consumer_waits(&self) -> bool {
        lock(&self.inner).consumer_waits
    }

    /// Chunks queued and not yet taken.
    pub(crate) fn queued(&self) -> usize {
        lock(&self.inner).queue.len()
    }

    /// Credits out: an upper bound on the items pulled and not yet handed
    /// out, counting the items of the consumer's current chunk.
    pub(crate) fn in_flight(&self) -> usize {
        read(&self.window).saturating_sub(read(&self.credits) & COUNT)
    }
}

/// A worker's membership in the pass: while any is alive, the consumer
/// waits for chunks; the last one to go wakes it. A worker that dies
/// unwinding (a panic outside the guarded user calls, such as a panic
/// payload whose `Drop` panics) first queues a chunk that ends the pass, so
/// the consumer gets an error instead of waiting forever.
pub(crate) struct Sender<U> {
    pub(crate) hub: Arc<Hub<U>>,
    /// The first item of the chunk being worked on: the consumer is told
    /// of a death there, at the item it waits for in order.
    pub(crate) index: u64,
}

impl<U> Sender<U> {
    /// Counts one more worker in the pass.
    pub(crate) fn join(hub: &Arc<Hub<U>>) -> Self {
        lock(&hub.inner).senders += 1;
        let hub = Arc::clone(hub);
        Sender { hub, index: 0 }
    }
}

impl<U> Drop for Sender<U> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let error = Error::Panicked {
                node: self.hub.node.into(),
                index: Some(self.index),
                message: "a worker thread died while processing this item".to_owned(),
            };
            let _ = self.hub.send(Chunk::failure(self.index, error));
        }
        let mut inner = lock(&self.hub.inner);
        inner.senders -= 1;
        self.hub.changed();
        if inner.senders == 0 && inner.consumer_waits {
            self.hub.ready.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    /// Waits (yielding) until `done` holds: orders the test after an event
    /// of another thread without timing it.
    fn until(mut done: impl FnMut() -> bool) {
        while !done() {
            std::thread::yield_now();
        }
    }

    fn sleepers<U>(hub: &Hub<U>) -> usize {
        lock(&hub.inner).sleepers
    }

    fn chunk(items: &[u64]) -> Chunk<u64> {
        let mut chunk = Chunk::with(VecDeque::new());
        chunk.items = items.iter().map(|&i| (i, Ok(i))).collect();
        chunk
    }

    fn indices(received: Result<Chunk<u64>>) -> Vec<u64> {
        let chunk = received.expect("a chunk");
        chunk.items.iter().map(|(i, _)| *i).collect()
    }

    /// A worker that acquires on its own thread; its grant comes back on
    /// the channel.
    fn acquiring(hub: &Arc<Hub<u64>>, want: usize) -> mpsc::Receiver<usize> {
        let (tx, rx) = mpsc::channel();
        acquiring_into(hub, want, tx);
        rx
    }

    fn acquiring_into(hub: &Arc<Hub<u64>>, want: usize, grants: mpsc::Sender<usize>) {
        let hub = Arc::clone(hub);
        std::thread::spawn(move || grants.send(hub.acquire(want, false)).unwrap());
    }

    #[test]
    fn a_worker_waits_for_credits_and_a_close_wakes_every_worker() {
        let hub = Arc::new(Hub::<u64>::new("Test"));
        hub.open(1, 1);
        assert_eq!(
            hub.acquire(5, false),
            1,
            "the first look takes what is free"
        );
        let (tx, grants) = mpsc::channel();
        acquiring_into(&hub, 1, tx.clone());
        acquiring_into(&hub, 1, tx);
        until(|| sleepers(&hub) == 2);
        assert!(grants.try_recv().is_err());
        // The consumer hands the item out: its credit goes back, and one
        // sleeper takes it.
        hub.release(1);
        assert_eq!(grants.recv().unwrap(), 1);
        drop(hub.stop(Flow::Closed));
        assert_eq!(grants.recv().unwrap(), 0, "the other sleeper leaves");
        assert_eq!(hub.acquire(1, false), 0, "a closed hub grants nothing");
    }

    #[test]
    fn a_sleeping_worker_wakes_once_its_chunk_is_free() {
        let hub = Arc::new(Hub::<u64>::new("Test"));
        hub.open(8, 8);
        assert_eq!(hub.acquire(8, false), 8);
        let woken = acquiring(&hub, 8);
        until(|| sleepers(&hub) == 1);
        // Three credits back: below its need (half the window).
        hub.release(3);
        assert_eq!(sleepers(&hub), 1, "three of the four it needs");
        assert!(woken.try_recv().is_err());
        hub.release(1);
        assert_eq!(woken.recv().unwrap(), 4);
    }

    #[test]
    fn growing_wakes_a_waiter_and_stops_at_the_ceiling() {
        let hub = Arc::new(Hub::<u64>::new("Test"));
        hub.open(1, 4);
        assert_eq!(hub.acquire(1, false), 1);
        let woken = acquiring(&hub, 1);
        until(|| sleepers(&hub) == 1);
        // Only more room can wake it: the consumer returns nothing.
        hub.grow(2);
        assert_eq!(woken.recv().unwrap(), 1);
        hub.grow(100);
        assert_eq!(hub.acquire(10, false), 2, "the window stops at 4");
        hub.grow(1);
        assert_eq!(hub.in_flight(), 4, "and never shrinks");
    }

    #[test]
    fn the_consumer_takes_chunks_in_arrival_order_then_learns_the_workers_left() {
        let hub = Arc::new(Hub::<u64>::new("Test"));
        hub.open(4, 4);
        let sender = Sender::join(&hub);
        let worker = std::thread::spawn(move || {
            for first in [0, 2] {
                assert!(sender.hub.send(chunk(&[first, first + 1])).is_ok());
            }
            // Dropping `sender` leaves the pass.
        });
        assert_eq!(indices(hub.receive(VecDeque::new(), false, 0)), [0, 1]);
        assert_eq!(indices(hub.receive(VecDeque::new(), false, 0)), [2, 3]);
        // Every worker is gone and nothing is queued: an error, never a hang.
        let gone = hub.receive(VecDeque::new(), false, 4).unwrap();
        assert!(matches!(&gone.items[0], (4, Err(e)) if matches!(**e, Error::Internal { .. })));
        worker.join().unwrap();
    }

    #[test]
    fn a_cancel_wakes_a_waiting_consumer_once() {
        let hub = Arc::new(Hub::<u64>::new("Test"));
        hub.open(1, 1);
        let _sender = Sender::join(&hub);
        let (tx, rx) = mpsc::channel();
        let waiting = {
            let hub = Arc::clone(&hub);
            std::thread::spawn(move || {
                let first = matches!(
                    hub.receive(VecDeque::new(), false, 0),
                    Err(Error::Cancelled { .. })
                );
                tx.send(first).unwrap();
                indices(hub.receive(VecDeque::new(), false, 0))
            })
        };
        until(|| hub.consumer_waits());
        hub.cancel();
        assert!(rx.recv().unwrap(), "the wait ends with Cancelled");
        // The cancel was used up: the next wait waits for a chunk.
        hub.send(chunk(&[0])).unwrap();
        assert_eq!(waiting.join().unwrap(), [0]);
    }

    #[test]
    fn a_cancel_before_the_wait_ends_the_next_wait() {
        let hub = Hub::<u64>::new("Test");
        hub.open(1, 1);
        hub.cancel();
        assert!(matches!(
            hub.receive(VecDeque::new(), true, 0),
            Err(Error::Cancelled { .. })
        ));
    }

    #[test]
    fn a_closed_hub_refuses_chunks_and_returns_what_was_queued() {
        let hub = Hub::<u64>::new("Test");
        hub.open(4, 4);
        hub.send(chunk(&[0])).unwrap();
        assert_eq!(hub.queued(), 1);
        let queued = hub.stop(Flow::Closed);
        assert_eq!(queued.len(), 1);
        assert!(hub.stopping());
        assert!(hub.send(chunk(&[1])).is_err());
    }

    #[test]
    fn a_halted_hub_grants_nothing_but_still_takes_chunks() {
        let hub = Arc::new(Hub::<u64>::new("Test"));
        hub.open(4, 4);
        hub.stop(Flow::Halted);
        assert!(hub.stopping());
        assert_eq!(hub.acquire(1, true), 0);
        assert!(hub.send(chunk(&[0])).is_ok());
        let _sender = Sender::join(&hub);
        assert_eq!(indices(hub.receive(VecDeque::new(), false, 0)), [0]);
    }

    #[test]
    fn emptied_buffers_go_back_to_the_workers() {
        let hub = Arc::new(Hub::<u64>::new("Test"));
        hub.open(4, 4);
        let _sender = Sender::join(&hub);
        hub.send(chunk(&[0])).unwrap();
        let buffer: Items<u64> = VecDeque::with_capacity(64);
        let _ = hub.receive(buffer, false, 0);
        let spare = hub.send(chunk(&[1])).unwrap();
        assert!(spare.capacity() >= 64 && spare.is_empty());
    }

    /// Nothing is allocated for the window: a read-ahead of any size costs
    /// what is actually in flight.
    #[test]
    fn any_window_is_a_count() {
        let hub = Hub::<u64>::new("Test");
        hub.open(usize::MAX, usize::MAX);
        assert_eq!(hub.acquire(3, false), 3);
        hub.grow(usize::MAX);
        assert_eq!(hub.in_flight(), 3);
    }
}
