//! Waiting for the other side of the hand-over: spin for as long as the
//! wait is likely to be short, sleep otherwise.
//!
//! On our 2-vCPU VMs a thread that went to sleep takes 25–35 µs to run
//! again after it is woken (a crossbeam ping-pong: 0.3 µs per round trip
//! while both threads spin, 55–68 µs once the receiver has slept), and the
//! wake-up is a system call on the waking side too. A pipeline that hands
//! over a batch every 30 µs through a read-ahead of 2 pays that on every
//! batch, on both sides in turn: the consumer sleeps waiting for a batch, the
//! reader fills the window and sleeps waiting for a credit, and each waits for
//! the other to be woken. Spinning through waits shorter than a wake-up avoids
//! both costs; spinning through long waits would only burn a core. So each
//! waiting thread keeps a budget ([`Spin`]) that follows the waits it sees:
//! after a wait that ended in sleep, twice that wait if it was shorter than
//! [`MAX_SPIN`] (a longer spin would have caught it), nothing if it was
//! longer; a wait that a spin caught keeps the budget.
//!
//! Spinning pays only while every thread of the hand-over has a core of its
//! own: with more threads than cores (four `par_map` workers and a consumer
//! on two cores, or two prefetched pipelines side by side) a spinning thread
//! takes turns from the ones doing the work (`realistic_par` fell from about
//! 1.0 to 0.8 when every waiter spun). So a thread spins past the quick polls
//! only while the worker threads alive in the process, plus one consumer,
//! fit on the cores ([`Live`] counts them). A spinning thread also yields
//! every few polls, so on a machine whose second core is taken the thread it
//! waits for gets it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The longest spin: about three wake-ups. A wait longer than this is long
/// enough that the wake-up's cost is a small part of it.
pub(crate) const MAX_SPIN: Duration = Duration::from_micros(100);

/// Polls with no clock read before the budget applies: half of them after
/// a short spin (a few hundred nanoseconds in all, for an item that is
/// nearly ready), half after a yield (with more threads than cores, the one
/// being waited for may need this core; `realistic_par` lost about a fifth
/// without them).
const QUICK_POLLS: u32 = 12;

/// Polls between two clock reads (a read costs about 45 ns on our VMs).
const POLLS_PER_CLOCK: u32 = 8;

/// Worker threads of the thread-backed nodes alive in this process.
static LIVE_WORKERS: AtomicUsize = AtomicUsize::new(0);

/// Counts one worker thread as alive for as long as it is held (a worker
/// holds it for its whole run, unwinding included).
#[derive(Debug)]
pub(crate) struct Live(());

impl Live {
    pub(crate) fn worker() -> Live {
        LIVE_WORKERS.fetch_add(1, Ordering::Relaxed);
        Live(())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE_WORKERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether the live workers and a consumer fit on the cores.
pub(crate) fn cores_to_spare() -> bool {
    LIVE_WORKERS.load(Ordering::Relaxed) < cores()
}

/// One waiting thread's spin budget. See the module docs.
#[derive(Debug)]
pub(crate) struct Spin {
    budget: Duration,
    /// The time waited from the first yield of a wait on, in all.
    waited: Duration,
}

impl Default for Spin {
    fn default() -> Self {
        // The first waits of a pass are for the first items, usually short.
        Spin {
            budget: MAX_SPIN,
            waited: Duration::ZERO,
        }
    }
}

impl Spin {
    /// Whether a wait now spins past the quick polls.
    fn spins(&self) -> bool {
        !self.budget.is_zero() && cores_to_spare()
    }

    /// Waits until `ready` gives a value: a few quick polls, then polls for
    /// up to the budget if the cores allow, then `sleep` (which blocks until
    /// the value is there). The whole wait sets the next budget (see the
    /// module docs).
    #[inline]
    pub(crate) fn wait<T>(
        &mut self,
        mut ready: impl FnMut() -> Option<T>,
        sleep: impl FnOnce() -> T,
    ) -> T {
        // Timed from the first yield: a yield may hand the core to another
        // thread for a whole time slice, which is waiting too.
        let mut yielded: Option<Instant> = None;
        for quick in 0..QUICK_POLLS {
            if let Some(value) = ready() {
                if let Some(yielded) = yielded {
                    self.waited += yielded.elapsed();
                }
                return value;
            }
            if quick < QUICK_POLLS / 2 {
                for _ in 0..(1u32 << quick) {
                    std::hint::spin_loop();
                }
            } else {
                yielded.get_or_insert_with(Instant::now);
                std::thread::yield_now();
            }
        }
        let started = Instant::now();
        let yielded = yielded.unwrap_or(started);
        if self.spins()
            && let Some(value) = self.spin(&mut ready, started)
        {
            self.waited += yielded.elapsed();
            return value;
        }
        let value = sleep();
        let now = Instant::now();
        self.waited += now - yielded;
        self.slept(now - started);
        value
    }

    /// The time this thread waited from its first yield on, in all (the
    /// spins before it are not timed: they are over in about a
    /// microsecond).
    pub(crate) fn waited(&self) -> Duration {
        self.waited
    }

    /// Sleeps through `sleep` without spinning first (more threads than
    /// cores), counting the time as waited.
    pub(crate) fn sleep<T>(&mut self, sleep: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let value = sleep();
        self.waited += started.elapsed();
        value
    }

    /// Polls `ready` until it gives a value or the budget, counted from
    /// `started`, is spent.
    fn spin<T>(&self, ready: &mut impl FnMut() -> Option<T>, started: Instant) -> Option<T> {
        let mut polls = 0u32;
        loop {
            if let Some(value) = ready() {
                return Some(value);
            }
            polls += 1;
            if polls.is_multiple_of(POLLS_PER_CLOCK) {
                if started.elapsed() >= self.budget {
                    return None;
                }
                std::thread::yield_now();
            } else {
                for _ in 0..32 {
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// A wait that had to sleep lasted `waited` after the quick polls:
    /// spin that long twice over next time, if that is within
    /// [`MAX_SPIN`], else not at all.
    fn slept(&mut self, waited: Duration) {
        self.budget = if waited < MAX_SPIN {
            (waited * 2).min(MAX_SPIN)
        } else {
            Duration::ZERO
        };
    }
}

/// The cores this process may use (read once: it may read cgroup files).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_follows_the_waits_that_had_to_sleep() {
        let mut spin = Spin::default();
        assert_eq!(spin.budget, MAX_SPIN);
        spin.slept(Duration::from_micros(30));
        assert_eq!(spin.budget, Duration::from_micros(60));
        spin.slept(Duration::from_millis(5));
        assert_eq!(spin.budget, Duration::ZERO);
        // With no budget, only the quick polls run before the sleep, and a
        // short sleep earns the budget back.
        let mut polls = 0;
        let got = spin.wait(
            || {
                polls += 1;
                None::<u32>
            },
            || 7,
        );
        assert_eq!((got, polls), (7, QUICK_POLLS));
        assert!(spin.budget < MAX_SPIN * 2);
        assert!(!spin.budget.is_zero(), "a wait of a few polls is short");
    }

    #[test]
    fn a_ready_value_is_returned_without_sleeping() {
        let mut spin = Spin::default();
        let mut polls = 0;
        let got = spin.wait(
            || {
                polls += 1;
                (polls == 5).then_some(polls)
            },
            || unreachable!("the value was ready within the quick polls"),
        );
        assert_eq!(got, 5);
        // A spent budget gives up and sleeps.
        spin.slept(Duration::from_micros(1));
        assert_eq!(spin.wait(|| None, || 9), 9);
    }

    #[test]
    fn live_workers_are_counted_while_held() {
        let held: Vec<Live> = (0..cores() + 1).map(|_| Live::worker()).collect();
        // Other tests' workers may come and go, but these alone outnumber
        // the cores.
        assert!(LIVE_WORKERS.load(Ordering::Relaxed) > cores());
        assert!(!cores_to_spare());
        assert!(!Spin::default().spins());
        drop(held);
    }
}
