//! A counting semaphore that bounds the items in flight.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::spin::Spin;
use super::thread::lock;

/// How long a worker's first sleep lasts before it looks at the count again
/// by itself (see [`Permits`]: a return made at the very moment it went to
/// sleep may not have woken it). Later sleeps last until a wake-up.
const FIRST_SLEEP: Duration = Duration::from_millis(1);

/// A counter alone on its cache line, so that the consumer's writes to one
/// and the workers' to the other do not evict each other.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded(AtomicUsize);

/// Permits for items between "pulled from the source" and "returned to the
/// consumer". Workers [`acquire_up_to`](Permits::acquire_up_to) some before
/// pulling; the consumer [`release`](Permits::release)s one per item it
/// returns. Closing wakes every waiter with `0`, which is how the owner stops
/// workers that wait for room.
///
/// Two counters instead of one count of free permits: `taken` (raised by
/// workers, per chunk, and lowered when they give unused permits back) and
/// `returned` (raised by the consumer alone, per item). Free permits are
/// `n - (taken - returned)`. The consumer, the only writer of `returned`,
/// gives a permit back with a plain store on a line of its own: no locked
/// instruction per item, and no wait for the cache line a spinning worker
/// keeps reading (an atomic add there cost the consumer a cache miss per
/// item). The mutex and condvar are only for sleeping. A channel of tokens
/// would allocate a slot per token up front, and the bound can be large.
///
/// The count may grow while workers run ([`grow`](Permits::grow), never
/// past the ceiling it was made with): a `ParallelMapper` whose chunks grow
/// widens its window with them, so that cheap items get room for two large
/// chunks per worker while expensive ones (chunks of one) keep the window
/// it started with. It never shrinks, so a need announced against a smaller
/// count can still be met.
///
/// Low-water mark: a worker that has to wait says how many permits it needs
/// (its chunk, at most `wake_at`: half the count now) and sleeps until that
/// many are free; a release wakes sleepers only once the free count reaches
/// the smallest need among them, and only once per sleep (`signalled`).
/// Waking a worker that pulls chunks of many cheap items on every returned
/// permit would make producer and consumer take turns item by item, each
/// turn paying a wake-up; a worker whose items are expensive (chunks of one)
/// is still woken by the first free permit. This cannot stall: a worker waits only while
/// it holds no permits, every permit held elsewhere is on its way to the
/// consumer, and once the consumer has handed those out all `n` are free,
/// at least any need (`wake_at <= n`).
///
/// The consumer's plain store is not ordered before its look at `wanted`
/// (no fence per item), so a release made at the very moment a worker
/// announces its need may miss it both ways: the worker reads the count
/// before the store lands, the consumer reads `wanted` before the
/// announcement lands. Any later release sees the announcement. Two things
/// cover the gap: the consumer fences and looks again before it blocks on
/// the hand-over ([`flush`](Permits::flush)), so the two never wait for each
/// other; and a worker's first sleep ends after [`FIRST_SLEEP`] by itself, so
/// that a consumer that stopped calling `next` right then still sees its
/// window refill. Sleeps after that one are woken by releases only.
#[derive(Debug)]
pub(crate) struct Permits {
    /// Permits in all now; only grows, up to `ceiling`.
    n: AtomicUsize,
    ceiling: usize,
    /// Permits taken by workers, ever (less those they gave back unused).
    taken: Padded,
    /// Permits the consumer returned, ever; written by the consumer only.
    returned: Padded,
    /// The most a waiting worker may ask for (further clamped to
    /// `1..=n / 2`, see [`wake_at`](Permits::wake_at)).
    max_wake: usize,
    /// The smallest need among the sleepers (`usize::MAX` when none sleeps);
    /// written under `sleepers`, read by releases without it.
    wanted: AtomicUsize,
    /// A release has notified the sleepers since the last one went to sleep.
    signalled: AtomicBool,
    closed: AtomicBool,
    /// The needs of the workers sleeping now.
    sleepers: Mutex<Vec<usize>>,
    room: Condvar,
}

impl Permits {
    /// `n` permits, all available, growing up to `ceiling` (at least `n`);
    /// a waiting worker asks for at most `max_wake` (and half the count)
    /// before it is woken.
    pub(crate) fn new(n: usize, ceiling: usize, max_wake: usize) -> Self {
        Permits {
            n: AtomicUsize::new(n),
            ceiling: ceiling.max(n),
            taken: Padded::default(),
            returned: Padded::default(),
            max_wake: max_wake.max(1),
            wanted: AtomicUsize::new(usize::MAX),
            signalled: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            sleepers: Mutex::new(Vec::new()),
            room: Condvar::new(),
        }
    }

    /// Free permits now, and the `taken` count they were computed from.
    /// `returned` is read first: every permit returned was taken, and
    /// `taken` read after it is at least as large, so the difference never
    /// wraps (read the other way round, another worker's take and the
    /// consumer's return in between would make it).
    fn free(&self) -> (usize, usize) {
        let returned = self.returned.0.load(Ordering::SeqCst);
        let taken = self.taken.0.load(Ordering::SeqCst);
        // Any order is safe here: the count only grows, and an older value
        // only understates the room.
        let n = self.n.load(Ordering::SeqCst);
        (n.saturating_sub(taken.wrapping_sub(returned)), taken)
    }

    /// The most a waiting worker asks for now: `max_wake`, but at most half
    /// the count (the consumer still holds half the window while a worker
    /// refills the other), and at least one.
    fn wake_at(&self) -> usize {
        let n = self.n.load(Ordering::Relaxed);
        self.max_wake.min(n / 2).clamp(1, n.max(1))
    }

    /// Raises the count to `to` (at most the ceiling), waking a sleeper
    /// that now has room. A worker calls this when its chunks grow.
    pub(crate) fn grow(&self, to: usize) {
        let to = to.min(self.ceiling);
        if self.n.fetch_max(to, Ordering::SeqCst) < to {
            self.wake_if_room();
        }
    }

    /// Takes between `least` and `max` permits, if at least `least` are
    /// available.
    fn try_take(&self, least: usize, max: usize) -> usize {
        loop {
            let (available, taken) = self.free();
            if available < least {
                return 0;
            }
            let n = available.min(max);
            if self
                .taken
                .0
                .compare_exchange_weak(
                    taken,
                    taken.wrapping_add(n),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok()
            {
                return n;
            }
        }
    }

    /// Takes between one and `max` permits (as many as are available),
    /// blocking while none is; after a wait, it takes at least
    /// `min(max, wake_at)`. `0` once closed. A worker spins through a short
    /// wait before it sleeps (`spin` is its budget, see [`Spin`]).
    pub(crate) fn acquire_up_to(&self, max: usize, spin: &mut Spin) -> usize {
        let max = max.max(1);
        let least = max.min(self.wake_at());
        // The first look takes anything; later ones wait for a chunk's
        // worth, as a sleeper would.
        let n = self.try_take(1, max);
        if n > 0 {
            return n;
        }
        spin.wait(
            || {
                if self.closed.load(Ordering::SeqCst) {
                    return Some(0);
                }
                Some(self.try_take(least, max)).filter(|&n| n > 0)
            },
            || self.sleep_for(least, max),
        )
    }

    /// Sleeps until `least` permits are free (or the permits close), then
    /// takes up to `max`.
    fn sleep_for(&self, least: usize, max: usize) -> usize {
        let mut sleepers = lock(&self.sleepers);
        // Announce the need before looking again, so that a release that
        // does not see it has already made its permits visible to the look
        // (or is covered by the first sleep's time limit).
        sleepers.push(least);
        let mut first = true;
        let n = loop {
            self.publish_wanted(&sleepers);
            self.signalled.store(false, Ordering::SeqCst);
            if self.closed.load(Ordering::SeqCst) {
                break 0;
            }
            let n = self.try_take(least, max);
            if n > 0 {
                break n;
            }
            sleepers = if first {
                first = false;
                self.room
                    .wait_timeout(sleepers, FIRST_SLEEP)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0
            } else {
                self.room
                    .wait(sleepers)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            };
        };
        if let Some(i) = sleepers.iter().position(|&need| need == least) {
            sleepers.swap_remove(i);
        }
        self.publish_wanted(&sleepers);
        n
    }

    /// Sets `wanted` to the smallest need of the sleepers (under their lock).
    fn publish_wanted(&self, sleepers: &[usize]) {
        let wanted = sleepers.iter().copied().min().unwrap_or(usize::MAX);
        self.wanted.store(wanted, Ordering::SeqCst);
    }

    /// Credits taken and not given back: an upper bound on the items pulled
    /// and not yet handed out (a worker takes its credits before it pulls).
    pub(crate) fn in_use(&self) -> usize {
        // `returned` first, as in `free`.
        let returned = self.returned.0.load(Ordering::SeqCst);
        self.taken.0.load(Ordering::SeqCst).wrapping_sub(returned)
    }

    /// The consumer returns `n` permits (it alone may call this), waking
    /// the sleepers once enough are free for the smallest need among them.
    /// No locked instruction unless a worker sleeps.
    #[inline]
    pub(crate) fn release(&self, n: usize) {
        let returned = self.returned.0.load(Ordering::Relaxed);
        self.returned
            .0
            .store(returned.wrapping_add(n), Ordering::Release);
        if self.wanted.load(Ordering::Relaxed) != usize::MAX {
            self.wake_if_room();
        }
    }

    /// Makes the consumer's releases visible to any worker that announced
    /// its need since, and wakes it if it has room now: the consumer calls
    /// this before it blocks waiting for a chunk.
    pub(crate) fn flush(&self) {
        fence(Ordering::SeqCst);
        if self.wanted.load(Ordering::SeqCst) != usize::MAX {
            self.wake_if_room();
        }
    }

    /// A worker gives back `n` permits it took and did not use.
    pub(crate) fn give_back(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.taken.0.fetch_sub(n, Ordering::SeqCst);
        self.wake_if_room();
    }

    /// Wakes the sleepers once enough permits are free for the smallest
    /// need among them, once per sleep (a condvar notification is a system
    /// call).
    #[cold]
    fn wake_if_room(&self) {
        // Orders the consumer's plain store before what follows, so that a
        // sleeper that resets `signalled` after our swap sees it when it
        // looks at the count again.
        fence(Ordering::SeqCst);
        let (free, _) = self.free();
        if free >= self.wanted.load(Ordering::SeqCst)
            && !self.signalled.swap(true, Ordering::SeqCst)
        {
            // Taking the lock orders us after a sleeper that announced its
            // need but has not gone to sleep yet.
            drop(lock(&self.sleepers));
            self.room.notify_all();
        }
    }

    /// Fails every current and future [`acquire_up_to`](Permits::acquire_up_to).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        drop(lock(&self.sleepers));
        self.room.notify_all();
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn acquire_blocks_until_release_and_close_wakes_everyone() {
        let permits = Arc::new(Permits::new(1, 1, 1));
        assert_eq!(permits.acquire_up_to(5, &mut Spin::default()), 1);
        let (tx, rx) = std::sync::mpsc::channel();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (permits, tx) = (Arc::clone(&permits), tx.clone());
                std::thread::spawn(move || {
                    tx.send(permits.acquire_up_to(1, &mut Spin::default()))
                        .unwrap()
                })
            })
            .collect();
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        permits.release(1);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1));
        permits.close();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(0));
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(permits.acquire_up_to(1, &mut Spin::default()), 0);
    }

    #[test]
    fn growing_wakes_a_waiter_and_stops_at_the_ceiling() {
        let permits = Arc::new(Permits::new(1, 4, 4));
        assert_eq!(permits.acquire_up_to(1, &mut Spin::default()), 1);
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let permits = Arc::clone(&permits);
            std::thread::spawn(move || {
                tx.send(permits.acquire_up_to(1, &mut Spin::default()))
                    .unwrap()
            })
        };
        // Only more room can wake it: the consumer returns nothing.
        permits.grow(2);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1));
        waiter.join().unwrap();
        permits.grow(100);
        assert_eq!(permits.in_use(), 2);
        assert_eq!(permits.acquire_up_to(5, &mut Spin::default()), 2);
        // Growing never shrinks.
        permits.grow(1);
        permits.release(1);
        assert_eq!(permits.acquire_up_to(5, &mut Spin::default()), 1);
    }
}
