//! A counting semaphore that bounds the items in flight.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use super::thread::lock;

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
#[derive(Debug)]
pub(crate) struct Permits {
    available: AtomicUsize,
    waiting: AtomicUsize,
    closed: AtomicBool,
    sleep: Mutex<()>,
    room: Condvar,
}

impl Permits {
    /// `n` permits, all available.
    pub(crate) fn new(n: usize) -> Self {
        Permits {
            available: AtomicUsize::new(n),
            waiting: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            sleep: Mutex::new(()),
            room: Condvar::new(),
        }
    }

    /// Takes between one and `max` permits, if any are available.
    fn try_take(&self, max: usize) -> usize {
        let mut available = self.available.load(Ordering::SeqCst);
        loop {
            if available == 0 {
                return 0;
            }
            let n = available.min(max.max(1));
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
    /// blocking while none is. `0` once closed.
    pub(crate) fn acquire_up_to(&self, max: usize) -> usize {
        if self.closed.load(Ordering::SeqCst) {
            return 0;
        }
        let n = self.try_take(max);
        if n > 0 {
            return n;
        }
        let mut guard = lock(&self.sleep);
        // Announce the wait before looking again, so that a release that
        // does not see us has already made its permits visible.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let n = loop {
            if self.closed.load(Ordering::SeqCst) {
                break 0;
            }
            let n = self.try_take(max);
            if n > 0 {
                break n;
            }
            guard = self
                .room
                .wait(guard)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        };
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        n
    }

    /// Returns `n` permits, waking waiters only if there are any (a condvar
    /// notification is a system call; the common case has nobody waiting).
    /// Credits taken and not given back, of `total`: an upper bound on the
    /// items pulled and not yet handed out (a worker takes its credits
    /// before it pulls).
    pub(crate) fn in_use(&self, total: usize) -> usize {
        total.saturating_sub(self.available.load(Ordering::SeqCst))
    }

    pub(crate) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.available.fetch_add(n, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            // Taking the lock orders us after a waiter that announced itself
            // but has not gone to sleep yet.
            drop(lock(&self.sleep));
            // One permit wakes one waiter (waking all would stampede them).
            if n == 1 {
                self.room.notify_one();
            } else {
                self.room.notify_all();
            }
        }
    }

    /// Fails every current and future [`acquire_up_to`](Permits::acquire_up_to).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        drop(lock(&self.sleep));
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
        let permits = Arc::new(Permits::new(1));
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
