//! The one-worker hand-over: items, with the snapshots taken after them,
//! over a single-producer, single-consumer ring (`rtrb`).
//!
//! With many workers, chunks travel over a channel (see `core.rs` and the
//! README's "Why this queue"). With one worker (every `Prefetcher`, a
//! `ParallelMapper` of one) the chunk channel, and the second channel that
//! brings the emptied buffers back, cost more than the items when they are
//! cheap: two channel operations each way per chunk, each a locked
//! instruction on a line the other core holds. Here the worker copies a
//! chunk's items into the ring's slots and publishes them with one store;
//! the consumer takes everything the ring holds at once into its own chunk
//! buffer and frees the slots with one store. No buffer crosses between
//! threads, so none goes back.
//!
//! Room is not waited for: the credits (`permits.rs`) bound the items
//! pulled and not handed out by the window, and the ring holds the window
//! plus room for the end of the pass (and a dying worker's notice), so a
//! chunk fits at once (one that did not would go in parts). The
//! consumer waits for items as it waits for a chunk (spin, then sleep), and
//! the worker rings a bell after each chunk when the consumer sleeps, and
//! when it leaves.

use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use nodes_core::State;

use super::core::{Chunk, Slot};
use super::thread::lock;

/// What the ring carries: an item with the source's state after it, if one
/// was taken there, or the end of the pass (the index after the last item).
enum Element<U> {
    Item(u64, Slot<U>, Option<State>),
    End(u64),
}

/// The ring's room beyond the window: the end of the pass, and the item
/// and end a dying worker's notice sends.
const SPARE_ROOM: usize = 4;

/// A sleeping consumer looks at the ring again after this long by itself.
/// A backstop only: the worker rings after every chunk it publishes while
/// the consumer sleeps, and when it leaves.
const BACKSTOP: Duration = Duration::from_millis(1);

/// How the worker wakes a sleeping consumer.
#[derive(Debug, Default)]
struct Bell {
    /// Set (under `lock`) by the consumer before its last look and its wait.
    sleeping: AtomicBool,
    lock: Mutex<()>,
    rung: Condvar,
}

impl Bell {
    /// Wakes the consumer if it sleeps. The fence orders the worker's
    /// publication before its look at `sleeping`, as the consumer's fence
    /// orders `sleeping` before its look at the ring: one of the two sees
    /// the other.
    fn ring(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            // Taken only once the consumer waits (it holds the lock from
            // before its last look until the wait releases it).
            let _waiting = lock(&self.lock);
            self.rung.notify_one();
        }
    }
}

/// The worker's end. Shared with the worker's death notice; the ring is
/// abandoned (and the consumer woken) when the last of them is dropped.
pub(super) struct RingTx<U> {
    /// `None` once dropped (see `Drop`).
    producer: Mutex<Option<rtrb::Producer<Element<U>>>>,
    bell: Arc<Bell>,
}

/// The consumer's end. Dropping it abandons the ring: the worker's next
/// [`send`](RingTx::send) fails, and it stops.
pub(super) struct RingRx<U> {
    consumer: rtrb::Consumer<Element<U>>,
    bell: Arc<Bell>,
}

/// The worker is gone and the ring is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Abandoned;

/// A ring for a window of `window` items.
pub(super) fn ring<U>(window: usize) -> (Arc<RingTx<U>>, RingRx<U>) {
    let (producer, consumer) = rtrb::RingBuffer::new(window.max(1) + SPARE_ROOM);
    let bell = Arc::new(Bell::default());
    let tx = RingTx {
        producer: Mutex::new(Some(producer)),
        bell: Arc::clone(&bell),
    };
    (Arc::new(tx), RingRx { consumer, bell })
}

impl<U> RingTx<U> {
    /// Moves the chunk's items (each with the snapshot taken after it) and
    /// its end into the ring, and publishes them with one store (in parts
    /// only if the room were short); the chunk's buffers are left empty,
    /// for the next chunk. `Err` if the consumer is gone (the pass was
    /// stopped).
    pub(super) fn send(&self, chunk: &mut Chunk<U>) -> Result<(), Abandoned> {
        let mut left = chunk.items.len() + usize::from(chunk.end.is_some());
        let mut producer = lock(&self.producer);
        let Some(producer) = producer.as_mut() else {
            return Err(Abandoned);
        };
        let snapshots = &mut chunk.snapshots;
        let end = chunk.end.take();
        let mut elements = chunk
            .items
            .drain(..)
            .enumerate()
            .map(|(at, (index, slot))| {
                let snapshot = match snapshots.front() {
                    Some((position, _)) if *position == at => {
                        snapshots.pop_front().map(|(_, state)| state)
                    }
                    _ => None,
                };
                Element::Item(index, slot, snapshot)
            })
            .chain(end.map(Element::End));
        // The credits keep the items in the ring within the window, so the
        // whole chunk fits at once; were it ever larger than the room, it
        // goes in parts as the consumer frees slots.
        while left > 0 {
            if producer.is_abandoned() {
                return Err(Abandoned);
            }
            let room = producer.slots().min(left);
            if room == 0 {
                std::thread::yield_now();
                continue;
            }
            let Ok(slots) = producer.write_chunk_uninit(room) else {
                continue;
            };
            let written = slots.fill_from_iter(&mut elements);
            self.bell.ring();
            if written < room {
                // Counted `left` from the chunk itself: cannot happen, and
                // must not loop.
                break;
            }
            left -= written;
        }
        drop(elements);
        snapshots.clear();
        Ok(())
    }
}

impl<U> Drop for RingTx<U> {
    fn drop(&mut self) {
        // Abandon the ring first, then wake a consumer that sleeps on it.
        drop(lock(&self.producer).take());
        self.bell.ring();
    }
}

impl<U> RingRx<U> {
    /// Elements waiting: items, and the end if it came.
    pub(super) fn len(&self) -> usize {
        self.consumer.slots()
    }

    /// Whether a [`drain`](Self::drain) would take something or find the
    /// worker gone.
    pub(super) fn ready(&self) -> bool {
        self.consumer.slots() > 0 || self.consumer.is_abandoned()
    }

    /// Moves everything the ring holds to the back of `chunk`: items, their
    /// snapshots (at their positions in `chunk`), and the end. `Ok(false)`
    /// if the ring was empty; `Err` once the worker is gone and nothing is
    /// left.
    pub(super) fn drain(&mut self, chunk: &mut Chunk<U>) -> Result<bool, Abandoned> {
        let waiting = self.consumer.slots();
        if waiting == 0 {
            // Gone, then empty: a worker publishes before it leaves, and
            // the look after `is_abandoned` sees what it published.
            if self.consumer.is_abandoned() {
                fence(Ordering::Acquire);
                if self.consumer.slots() == 0 {
                    return Err(Abandoned);
                }
                return self.drain(chunk);
            }
            return Ok(false);
        }
        let Ok(elements) = self.consumer.read_chunk(waiting) else {
            return Ok(false);
        };
        for element in elements {
            match element {
                Element::Item(index, slot, snapshot) => {
                    if let Some(state) = snapshot {
                        chunk.snapshots.push_back((chunk.items.len(), state));
                    }
                    chunk.items.push_back((index, slot));
                }
                Element::End(end) => chunk.end = Some(end),
            }
        }
        Ok(true)
    }

    /// Sleeps until [`ready`](Self::ready).
    pub(super) fn sleep_until_ready(&self) {
        while !self.ready() {
            let guard = lock(&self.bell.lock);
            self.bell.sleeping.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            if !self.ready() {
                let _ = self.bell.rung.wait_timeout(guard, BACKSTOP);
            }
            self.bell.sleeping.store(false, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    fn chunk(items: &[u64], snapshots_after: &[usize], end: Option<u64>) -> Chunk<u64> {
        let mut chunk = Chunk::new(0);
        chunk.items = items.iter().map(|&i| (i, Ok(i * 10))).collect();
        chunk.snapshots = snapshots_after
            .iter()
            .map(|&at| {
                let mut state = State::new();
                state.insert("at", items[at]).unwrap();
                (at, state)
            })
            .collect();
        chunk.end = end;
        chunk
    }

    fn items(chunk: &Chunk<u64>) -> Vec<(u64, u64)> {
        chunk
            .items
            .iter()
            .map(|(i, v)| (*i, *v.as_ref().unwrap()))
            .collect()
    }

    fn snapshots(chunk: &Chunk<u64>) -> Vec<(usize, u64)> {
        chunk
            .snapshots
            .iter()
            .map(|(at, s)| (*at, s.get::<u64>("at").unwrap()))
            .collect()
    }

    #[test]
    fn chunks_arrive_whole_with_snapshots_at_their_items_and_the_end() {
        let (tx, mut rx) = ring::<u64>(8);
        let mut first = chunk(&[0, 1, 2], &[1], None);
        tx.send(&mut first).unwrap();
        // The worker's buffers come back empty, for its next chunk.
        assert!(first.items.is_empty() && first.snapshots.is_empty());
        tx.send(&mut chunk(&[3, 4], &[0, 1], Some(5))).unwrap();
        assert_eq!(rx.len(), 6);
        let mut got = Chunk::with(VecDeque::new(), VecDeque::new());
        assert_eq!(rx.drain(&mut got), Ok(true));
        assert_eq!(items(&got), [(0, 0), (1, 10), (2, 20), (3, 30), (4, 40)]);
        // Positions in the consumer's chunk, which holds both of the worker's.
        assert_eq!(snapshots(&got), [(1, 1), (3, 3), (4, 4)]);
        assert_eq!(got.end, Some(5));
        assert_eq!(rx.drain(&mut got), Ok(false));
    }

    #[test]
    fn a_gone_worker_is_reported_after_what_it_sent() {
        let (tx, mut rx) = ring::<u64>(4);
        tx.send(&mut chunk(&[0], &[], None)).unwrap();
        drop(tx);
        assert!(rx.ready());
        let mut got = Chunk::new(0);
        assert_eq!(rx.drain(&mut got), Ok(true));
        assert_eq!(items(&got), [(0, 0)]);
        assert_eq!(rx.drain(&mut got), Err(Abandoned));
        // And a sleep on a gone worker returns at once.
        rx.sleep_until_ready();
    }

    #[test]
    fn a_chunk_larger_than_the_ring_goes_in_parts() {
        let (tx, mut rx) = ring::<u64>(2);
        let worker = std::thread::spawn(move || {
            let all: Vec<u64> = (0..50).collect();
            tx.send(&mut chunk(&all, &[10, 49], Some(50))).unwrap();
        });
        let mut got = Chunk::new(0);
        loop {
            rx.sleep_until_ready();
            if rx.drain(&mut got).is_err() {
                break;
            }
        }
        worker.join().unwrap();
        assert_eq!(
            items(&got),
            (0..50).map(|i| (i, i * 10)).collect::<Vec<_>>()
        );
        assert_eq!(snapshots(&got), [(10, 10), (49, 49)]);
        assert_eq!(got.end, Some(50));
    }

    #[test]
    fn a_gone_consumer_fails_the_send() {
        let (tx, rx) = ring::<u64>(4);
        drop(rx);
        assert_eq!(tx.send(&mut chunk(&[0], &[], None)), Err(Abandoned));
    }

    #[test]
    fn a_sleeping_consumer_is_woken_by_each_chunk_and_by_the_end() {
        let (tx, mut rx) = ring::<u64>(2);
        let worker = std::thread::spawn(move || {
            for i in 0..2000u64 {
                // Wait for room as the credits would (a window of two).
                while lock(&tx.producer).as_ref().unwrap().slots() < 2 + SPARE_ROOM - 1 {
                    std::thread::yield_now();
                }
                if i % 100 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
                tx.send(&mut chunk(&[i], &[], None)).unwrap();
            }
        });
        let mut got = Chunk::new(0);
        let mut seen = Vec::new();
        loop {
            rx.sleep_until_ready();
            match rx.drain(&mut got) {
                Ok(_) => seen.extend(got.items.drain(..).map(|(i, _)| i)),
                Err(Abandoned) => break,
            }
        }
        worker.join().unwrap();
        assert_eq!(seen, (0..2000).collect::<Vec<_>>());
    }
}
