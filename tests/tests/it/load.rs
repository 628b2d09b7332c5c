//! Load: a `ParallelMapper` with 32 workers and `max_concurrent` 64 over a
//! million items, with a slow consumer. Instrumented counts (not clocks)
//! show that the items in flight — pulled from the source and not yet
//! returned to the consumer — never exceed 64, that at most 32 map calls run
//! at once, that a stalled consumer finds the window refilled past its
//! low-water mark and within the bound (so the bound is approached and the
//! check can fail), and that every item arrives exactly once (in order, when
//! asked for).
//!
//! The map is trivial and the consumer is "slow" by stalling every so often
//! until the workers refill the window (it waits on a condition variable the
//! source notifies, never on the clock), so the run stays short in a debug
//! build.
//! `NODES_RELIABILITY_LONG=1` runs ten times the items.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::support::watch::{scale, watchdog};
use nodes_std::prelude::*;
use nodes_std::{NodeId, ParallelOptions, ResetFlag};

const WORKERS: usize = 32;
const MAX_CONCURRENT: u64 = 64;

/// Counters shared by the source, the map and the consumer.
#[derive(Debug, Default)]
struct Gauge {
    /// Items the source has yielded.
    pulled: AtomicU64,
    /// `next` calls the consumer has started.
    asked: AtomicU64,
    /// Items the consumer has received.
    returned: AtomicU64,
    /// The most items in flight seen by the source (`pulled - asked`, which
    /// never undercounts the real figure by more than the one item a `next`
    /// in progress may already have released).
    max_at_source: AtomicU64,
    /// Items the source yielded while more than the bound were in flight.
    violations: AtomicU64,
    /// Map calls running now, and the most at once.
    mapping: AtomicUsize,
    max_mapping: AtomicUsize,
    /// Notified after every pull, so a stalled consumer can wait for the
    /// window to fill without polling the clock.
    pulls: (Mutex<()>, Condvar),
}

impl Gauge {
    /// Blocks until more than `past` items are in flight after `returned`
    /// were returned (the watchdog catches a window that never fills), and
    /// says how many are.
    fn wait_past(&self, returned: u64, past: u64) -> u64 {
        let in_flight = || self.pulled.load(Ordering::SeqCst) - returned;
        let mut guard = self.pulls.0.lock().unwrap();
        while in_flight() <= past {
            guard = self.pulls.1.wait(guard).unwrap();
        }
        in_flight()
    }
}

/// Yields `0..len`, recording every item in the gauge. State `{"i"}`.
#[derive(Debug)]
struct Counted {
    len: u64,
    i: u64,
    gauge: Arc<Gauge>,
    flag: ResetFlag,
}

impl Node for Counted {
    type Item = u64;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        cx.observe(NodeId::of(self), "Counted", |_| {
            self.flag.check("Counted")?;
            if self.i == self.len {
                return Ok(None);
            }
            self.i += 1;
            let g = &self.gauge;
            // `asked` is read after counting this item: a consumer call that
            // starts in between only lowers the figure.
            let pulled = {
                // Counted under the lock a waiter checks under: no lost wakeup.
                let _guard = g.pulls.0.lock().unwrap();
                g.pulled.fetch_add(1, Ordering::SeqCst) + 1
            };
            g.pulls.1.notify_all();
            let in_flight = pulled.saturating_sub(g.asked.load(Ordering::SeqCst));
            g.max_at_source.fetch_max(in_flight, Ordering::SeqCst);
            if in_flight > MAX_CONCURRENT {
                g.violations.fetch_add(1, Ordering::SeqCst);
            }
            Ok(Some(self.i - 1))
        })
    }
}

impl Stateful for Counted {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.i = match state {
            Some(s) => s.get("i")?,
            None => 0,
        };
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        State::new().with("i", self.i)
    }

    fn describe(&self) -> Description {
        Description::new("Counted").param("len", self.len)
    }
}

/// How often the consumer stalls until the pipeline is full.
const STALL_EVERY: u64 = 20_000;

fn run_under_load(len: u64, in_order: bool) {
    let gauge = Arc::new(Gauge::default());
    let g = Arc::clone(&gauge);
    let source = Counted {
        len,
        i: 0,
        gauge: Arc::clone(&gauge),
        flag: ResetFlag::default(),
    };
    let options = ParallelOptions::new(WORKERS)
        .in_order(in_order)
        .max_concurrent(MAX_CONCURRENT as usize);
    let mapped = source
        .par_map(
            move |x| {
                let now = g.mapping.fetch_add(1, Ordering::SeqCst) + 1;
                g.max_mapping.fetch_max(now, Ordering::SeqCst);
                g.mapping.fetch_sub(1, Ordering::SeqCst);
                Ok(x * 2)
            },
            options,
        )
        .unwrap();
    let mut run = mapped.start().unwrap();
    let mut seen = vec![false; len as usize];
    let mut stalls = 0;
    loop {
        gauge.asked.fetch_add(1, Ordering::SeqCst);
        let Some(item) = run.next() else { break };
        let returned = gauge.returned.fetch_add(1, Ordering::SeqCst) + 1;
        let v = item.unwrap() / 2;
        if in_order {
            assert_eq!(v, returned - 1, "out of order");
        }
        assert!(
            !std::mem::replace(&mut seen[v as usize], true),
            "item {v} twice"
        );
        // Between calls nothing is in progress: the count is exact.
        let in_flight = gauge.pulled.load(Ordering::SeqCst) - returned;
        assert!(
            in_flight <= MAX_CONCURRENT,
            "{in_flight} items in flight after {returned} returned"
        );
        if returned % STALL_EVERY == 0 && len - returned >= MAX_CONCURRENT {
            // The slow consumer: wait until the workers refill the window
            // past the low-water mark (a worker waits for at most half the
            // window to be free before it pulls again); every pull is also
            // checked against the bound at the source.
            let full = gauge.wait_past(returned, MAX_CONCURRENT / 2);
            assert!(
                full > MAX_CONCURRENT / 2 && full <= MAX_CONCURRENT,
                "a stalled consumer saw {full} items in flight"
            );
            stalls += 1;
        }
    }
    assert_eq!(gauge.returned.load(Ordering::SeqCst), len);
    assert!(seen.iter().all(|&s| s), "an item never arrived");
    assert_eq!(
        gauge.violations.load(Ordering::SeqCst),
        0,
        "the bound was exceeded"
    );
    let max = gauge.max_at_source.load(Ordering::SeqCst);
    assert!(max <= MAX_CONCURRENT, "{max} in flight");
    assert!(
        gauge.max_mapping.load(Ordering::SeqCst) <= WORKERS,
        "more map calls at once than workers"
    );
    assert!(stalls > 0 || len < STALL_EVERY);
}

/// A million items by default (ten million in the long mode).
fn items() -> u64 {
    1_000_000 * u64::from(scale())
}

#[test]
fn thirty_two_workers_keep_at_most_sixty_four_items_in_flight_in_order() {
    let len = items();
    watchdog("in-order load", Duration::from_secs(600), move || {
        run_under_load(len, true)
    });
}

#[test]
fn thirty_two_workers_keep_at_most_sixty_four_items_in_flight_out_of_order() {
    let len = items();
    watchdog("out-of-order load", Duration::from_secs(600), move || {
        run_under_load(len, false)
    });
}

/// A `ParallelMapper` with the default bound over `Counted`, mapping with
/// `map`; the consumer takes `take` items, then stalls until more than
/// `past` are in flight. The most items in flight the source saw at any
/// pull, up to the end of the workers.
fn in_flight_after(take: u64, past: u64, map: fn(u64) -> u64) -> u64 {
    const DEFAULT_WORKERS: usize = 2;
    let gauge = Arc::new(Gauge::default());
    let source = Counted {
        len: u64::MAX,
        i: 0,
        gauge: Arc::clone(&gauge),
        flag: ResetFlag::default(),
    };
    let mut run = source
        .par_map(move |x| Ok(map(x)), ParallelOptions::new(DEFAULT_WORKERS))
        .unwrap()
        .start()
        .unwrap();
    for expected in 0..take {
        gauge.asked.fetch_add(1, Ordering::SeqCst);
        assert_eq!(run.next().transpose().unwrap(), Some(map(expected)));
    }
    gauge.wait_past(take, past);
    drop(run);
    gauge.max_at_source.load(Ordering::SeqCst)
}

#[test]
fn an_expensive_map_keeps_the_starting_window_by_default() {
    // A millisecond per item: the chunks stay at one item, and the window
    // at the 32 per worker it starts with (not the 1,024 cheap items get).
    let full = watchdog("expensive window", Duration::from_secs(120), || {
        in_flight_after(20, 32, |x| {
            // Makes the map expensive (the point of the test), not an order.
            std::thread::sleep(Duration::from_millis(1));
            x
        })
    });
    assert!((33..=64).contains(&full), "{full} items in flight");
}

#[test]
fn a_cheap_map_widens_the_window_up_to_the_default_bound() {
    // Cheap items grow the chunks, and the window with them, past the 64
    // it starts with, but never past the default bound of 512 per worker.
    let full = watchdog("cheap window", Duration::from_secs(120), || {
        in_flight_after(50_000, 64, |x| x + 1)
    });
    assert!((65..=1024).contains(&full), "{full} items in flight");
}

#[test]
fn a_grown_window_resumes_exactly_in_and_out_of_order() {
    watchdog(
        "grown window resume",
        Duration::from_secs(120),
        resume_with_a_grown_window,
    );
}

/// Cuts with a full, grown read-ahead (the consumer stalls first), then
/// resumes from the state: every item once, in order when asked for.
fn resume_with_a_grown_window() {
    const LEN: u64 = 50_000;
    let make = |in_order: bool| {
        let gauge = Arc::new(Gauge::default());
        let source = Counted {
            len: LEN,
            i: 0,
            gauge: Arc::clone(&gauge),
            flag: ResetFlag::default(),
        };
        let options = ParallelOptions::new(2).in_order(in_order);
        (source.par_map(|x| Ok(x * 3), options).unwrap(), gauge)
    };
    for in_order in [true, false] {
        for cut in [20_000, 45_000] {
            let (mapped, gauge) = make(in_order);
            let mut run = mapped.start().unwrap();
            let mut got: Vec<u64> = (0..cut).map(|_| run.next().unwrap().unwrap()).collect();
            // The window grew: more than the 64 it starts with are in
            // flight at the cut (waits until they are).
            gauge.wait_past(cut, 64);
            let state = run.get_state().unwrap();
            drop(run);
            let (mapped, _) = make(in_order);
            got.extend(mapped.start_from(&state).unwrap().map(|r| r.unwrap()));
            if !in_order {
                got.sort_unstable();
            }
            assert!(
                got.iter().copied().eq((0..LEN).map(|x| x * 3)),
                "in order {in_order}, cut {cut}: {} items, not each once",
                got.len()
            );
        }
    }
}
