//! A counting semaphore that bounds the items in flight.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use super::thread::lock;

/// How often a worker that finds too few permits looks again, spinning then
/// yielding, before it goes to sleep. A sleep and its wake-up are two system
/// calls (microseconds on a VM); a consumer that hands items out quickly
/// returns enough permits within this window.
const SPINS: u32 = 12;

/// Permits for items between "pulled from the source" and "returned to the
/// consumer". Workers [`acquire_up_to`](Permits::acquire_up_to) some before
/// pulling; the consumer [`release`](Permits::release)s one per item it
/// returns. Closing wakes every waiter with `0`, which is how the owner stops
/// workers that wait for room.
///
/// The count is an atomic, so taking and returning permits costs no lock
/// while nobody waits (the consumer returns one per item); the mutex and
/// condvar are only for sleeping. A channel of tokens would allocate a slot
/// per token up front, and the bound can be large.
///
/// Low-water mark: a worker that has to wait says how many permits it needs
/// (its chunk, at most `wake_at`) and sleeps until that many are free; a
/// release wakes sleepers only once the count reaches the smallest need
/// among them, and only once per sleep (`signalled`). Waking a worker that
/// pulls chunks of many cheap items on every returned permit would make
/// producer and consumer take turns item by item, each turn paying a
/// wake-up; a worker whose items are expensive (chunks of one) is still woken
/// by the first free permit. This cannot stall: a worker waits only while
/// it holds no permits, every permit held elsewhere is on its way to the
/// consumer, and once the consumer has handed those out all `n` are free,
/// at least any need (`wake_at <= n`).
#[derive(Debug)]
pub(crate) struct Permits {
    available: AtomicUsize,
    /// The most a waiting worker may ask for (clamped to `1..=n`).
    wake_at: usize,
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
    /// `n` permits, all available; a waiting worker asks for at most
    /// `wake_at` (clamped to `1..=n`) before it is woken.
    pub(crate) fn new(n: usize, wake_at: usize) -> Self {
        Permits {
            available: AtomicUsize::new(n),
            wake_at: wake_at.clamp(1, n.max(1)),
            wanted: AtomicUsize::new(usize::MAX),
            signalled: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            sleepers: Mutex::new(Vec::new()),
            room: Condvar::new(),
        }
    }

    /// Takes between `least` and `max` permits, if at least `least` are
    /// available.
    fn try_take(&self, least: usize, max: usize) -> usize {
        let mut available = self.available.load(Ordering::SeqCst);
        loop {
            if available < least {
                return 0;
            }
            let n = available.min(max);
            match self.available.compare_exchange_weak(
                available,
                available - n,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return n,
                Err(now) => available = now,
            }
        }
    }

    /// Takes between one and `max` permits (as many as are available),
    /// blocking while none is; after a wait, it takes at least
    /// `min(max, wake_at)`. `0` once closed.
    pub(crate) fn acquire_up_to(&self, max: usize) -> usize {
        let max = max.max(1);
        let least = max.min(self.wake_at);
        for spin in 0..SPINS {
            if self.closed.load(Ordering::SeqCst) {
                return 0;
            }
            // The first look takes anything; later ones wait for a chunk's
            // worth, as a sleeper would.
            let n = self.try_take(if spin == 0 { 1 } else { least }, max);
            if n > 0 {
                return n;
            }
            if spin < SPINS / 2 {
                for _ in 0..(1 << spin) {
                    std::hint::spin_loop();
                }
            } else {
                std::thread::yield_now();
            }
        }
        let mut sleepers = lock(&self.sleepers);
        // Announce the need before looking again, so that a release that
        // does not see it has already made its permits visible to the look.
        sleepers.push(least);
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
            sleepers = self
                .room
                .wait(sleepers)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
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

    /// Credits taken and not given back, of `total`: an upper bound on the
    /// items pulled and not yet handed out (a worker takes its credits
    /// before it pulls).
    pub(crate) fn in_use(&self, total: usize) -> usize {
        total.saturating_sub(self.available.load(Ordering::SeqCst))
    }

    /// Returns `n` permits, waking the sleepers once enough are free for
    /// the smallest need among them (a condvar notification is a system
    /// call; the common case has nobody sleeping).
    pub(crate) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        let now = self.available.fetch_add(n, Ordering::SeqCst) + n;
        if now >= self.wanted.load(Ordering::SeqCst) && !self.signalled.swap(true, Ordering::SeqCst)
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
        let permits = Arc::new(Permits::new(1, 1));
        assert_eq!(permits.acquire_up_to(5), 1);
        let (tx, rx) = std::sync::mpsc::channel();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (permits, tx) = (Arc::clone(&permits), tx.clone());
                std::thread::spawn(move || tx.send(permits.acquire_up_to(1)).unwrap())
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
        assert_eq!(permits.acquire_up_to(1), 0);
    }
}
