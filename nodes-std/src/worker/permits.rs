//! A counting semaphore that bounds the items in flight.

use std::sync::{Condvar, Mutex};

use super::thread::lock;

/// Permits for items between "pulled from the source" and "returned to the
/// consumer". Workers [`acquire_up_to`](Permits::acquire_up_to) one before pulling; the
/// consumer [`release`](Permits::release)s one per item it returns. Closing
/// wakes every waiter with `false`, which is how the owner stops workers that
/// wait for room.
///
/// A mutex and condvar rather than a channel of tokens: the bound can be large
/// (`max_concurrent` is the user's choice) and a channel would allocate a slot
/// per token up front.
#[derive(Debug)]
pub(crate) struct Permits {
    state: Mutex<PermitState>,
    room: Condvar,
}

#[derive(Debug)]
struct PermitState {
    available: usize,
    waiting: usize,
    closed: bool,
}

impl Permits {
    /// `n` permits, all available.
    pub(crate) fn new(n: usize) -> Self {
        Permits {
            state: Mutex::new(PermitState {
                available: n,
                waiting: 0,
                closed: false,
            }),
            room: Condvar::new(),
        }
    }

    /// Takes between one and `max` permits (as many as are available),
    /// blocking while none is. `0` once closed.
    pub(crate) fn acquire_up_to(&self, max: usize) -> usize {
        let mut state = lock(&self.state);
        loop {
            if state.closed {
                return 0;
            }
            if state.available > 0 {
                let n = state.available.min(max.max(1));
                state.available -= n;
                return n;
            }
            state.waiting += 1;
            state = self
                .room
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            state.waiting -= 1;
        }
    }

    /// Returns `n` permits, waking waiters only if there are any (a condvar
    /// notification is a system call; the common case has nobody waiting).
    pub(crate) fn release(&self, n: usize) {
        let mut state = lock(&self.state);
        state.available += n;
        let waiting = state.waiting;
        drop(state);
        match (waiting, n) {
            (0, _) | (_, 0) => {}
            (_, 1) => self.room.notify_one(),
            _ => self.room.notify_all(),
        }
    }

    /// Fails every current and future [`acquire_up_to`](Permits::acquire_up_to).
    pub(crate) fn close(&self) {
        lock(&self.state).closed = true;
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
