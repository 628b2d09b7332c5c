//! Sources that count their items (`Stateful::counted_by`): the thread-backed
//! nodes take no snapshot per item over them, work the position out from
//! one, and still resume without replaying anything.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::support::watchdog;
use nodes_std::prelude::*;
use nodes_std::{Cx, Description, ParallelOptions, ResetFlag, Result, State, Stateful};

/// `0..len`, whose state is the count of items returned; it counts how often
/// its state is taken, and promises the count (`counted_by`) only if told.
#[derive(Debug)]
struct Tally {
    n: u64,
    len: u64,
    counted: bool,
    /// The item whose `next` panics (after counting it), if any.
    panic_at: Option<u64>,
    states_taken: Arc<AtomicU64>,
    flag: ResetFlag,
}

impl Tally {
    fn new(len: u64, counted: bool) -> (Self, Arc<AtomicU64>) {
        let states_taken = Arc::new(AtomicU64::new(0));
        let tally = Tally {
            n: 0,
            len,
            counted,
            panic_at: None,
            states_taken: Arc::clone(&states_taken),
            flag: ResetFlag::default(),
        };
        (tally, states_taken)
    }
}

impl Node for Tally {
    type Item = u64;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        self.flag.check("Tally")?;
        if self.n == self.len {
            return Ok(None);
        }
        self.n += 1;
        if self.panic_at == Some(self.n - 1) {
            panic!("tally breaks at {}", self.n - 1);
        }
        Ok(Some(self.n - 1))
    }
}

impl Stateful for Tally {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.n = state.map_or(Ok(0), |s| s.get("n"))?;
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        self.states_taken.fetch_add(1, Ordering::Relaxed);
        State::new().with("n", self.n)
    }

    fn describe(&self) -> Description {
        Description::new("Tally").with_resume(self.resume())
    }

    fn resume(&self) -> nodes_std::Resume {
        if self.counted {
            nodes_std::Resume::CountsItems("n".into())
        } else {
            nodes_std::Resume::Replays
        }
    }
}

fn root(state: &State) -> serde_json::Value {
    state.get("root").unwrap()
}

/// In order and out of order: 300 of 400 items, a state, a resume. Over a
/// counted source the state was taken a handful of times (not per item),
/// and the checkpoint names no steps to replay.
#[test]
fn a_counted_source_is_not_snapshotted_per_item_and_resumes_exactly() {
    watchdog("counted par_map", || {
        for in_order in [true, false] {
            for counted in [true, false] {
                let what = format!("in_order={in_order} counted={counted}");
                let build = || {
                    let (tally, taken) = Tally::new(400, counted);
                    let options = ParallelOptions::new(2)
                        .in_order(in_order)
                        .snapshot_frequency(1);
                    (tally.par_map(Ok, options).unwrap(), taken)
                };
                let (node, taken) = build();
                let mut loader = Loader::new(node);
                let mut epoch = loader.epoch();
                let head: Vec<u64> = epoch.by_ref().take(300).collect::<Result<_>>().unwrap();
                let state = epoch.state_dict().unwrap();
                drop(epoch);
                let taken = taken.load(Ordering::Relaxed);
                let saved = root(&state);
                if counted {
                    assert!(taken < 20, "{what}: {taken} states taken");
                    assert_eq!(saved["steps_since_snapshot"], 0, "{what}: {saved}");
                } else {
                    assert!(taken >= 300, "{what}: {taken} states taken");
                }
                if in_order {
                    assert_eq!(head, (0..300).collect::<Vec<_>>(), "{what}");
                    if counted {
                        assert_eq!(saved["snapshot"]["n"], 300, "{what}: {saved}");
                    }
                }
                let state = State::from_json(&state.to_json().unwrap()).unwrap();
                let (node, _) = build();
                let mut resumed = Loader::new(node);
                resumed.load_state_dict(&state).unwrap();
                let rest: Vec<u64> = resumed.epoch().collect::<Result<_>>().unwrap();
                let all: BTreeSet<u64> = head.iter().chain(&rest).copied().collect();
                assert_eq!(head.len() + rest.len(), 400, "{what}: an item twice");
                assert_eq!(all, (0..400).collect(), "{what}");
            }
        }
    });
}

/// A `map` passes its source's count on (`counts_items = "child"`): over a
/// map of a counted source, no state per item either, and the count is
/// moved forward inside the map's state.
#[test]
fn a_map_over_a_counted_source_counts_too() {
    watchdog("counted map", || {
        let build = || {
            let (tally, taken) = Tally::new(400, true);
            let node = tally
                .map(|x| x * 2)
                .par_map(Ok, ParallelOptions::new(2).snapshot_frequency(1))
                .unwrap();
            (node, taken)
        };
        let (node, taken) = build();
        let mut loader = Loader::new(node);
        let mut epoch = loader.epoch();
        let head: Vec<u64> = epoch.by_ref().take(300).collect::<Result<_>>().unwrap();
        assert_eq!(head, (0..300).map(|x| x * 2).collect::<Vec<_>>());
        let state = epoch.state_dict().unwrap();
        drop(epoch);
        let saved = root(&state);
        assert!(taken.load(Ordering::Relaxed) < 20);
        assert_eq!(saved["steps_since_snapshot"], 0, "{saved}");
        assert_eq!(saved["snapshot"]["source"]["n"], 300, "{saved}");
        let (node, _) = build();
        let mut resumed = Loader::new(node);
        resumed.load_state_dict(&state).unwrap();
        let rest: Vec<u64> = resumed.epoch().collect::<Result<_>>().unwrap();
        assert_eq!(rest, (300..400).map(|x| x * 2).collect::<Vec<_>>());
    });
}

/// `prefetch` over a counted source: a state anywhere names the count, not
/// a snapshot milliseconds back and the steps since it.
#[test]
fn prefetch_over_a_counted_source_records_no_steps() {
    watchdog("counted prefetch", || {
        let (tally, taken) = Tally::new(5_000, true);
        let mut loader = Loader::new(tally.prefetch(16).unwrap());
        let mut epoch = loader.epoch();
        let head: Vec<u64> = epoch.by_ref().take(3_000).collect::<Result<_>>().unwrap();
        assert_eq!(head, (0..3_000).collect::<Vec<_>>());
        let state = epoch.state_dict().unwrap();
        drop(epoch);
        let saved = root(&state);
        assert_eq!(saved["steps_since_snapshot"], 0, "{saved}");
        assert_eq!(saved["snapshot"]["n"], 3_000, "{saved}");
        assert!(taken.load(Ordering::Relaxed) < 20);
        let (tally, _) = Tally::new(5_000, true);
        let mut resumed = Loader::new(tally.prefetch(16).unwrap());
        resumed.load_state_dict(&state).unwrap();
        let rest: Vec<u64> = resumed.epoch().collect::<Result<_>>().unwrap();
        assert_eq!(rest, (3_000..5_000).collect::<Vec<_>>());
    });
}

/// A counted source that panics: the position is moved forward only over
/// the items before the panic, which stays one step, exactly as with a
/// snapshot per item. Counted or not, the saved states and what a resume
/// delivers are the same.
#[test]
fn a_break_stays_a_step_as_with_a_snapshot_per_item() {
    watchdog("counted break", || {
        let run = |counted: bool| {
            let build = || {
                let (mut tally, _) = Tally::new(400, counted);
                tally.panic_at = Some(250);
                tally
                    .par_map(Ok, ParallelOptions::new(2).snapshot_frequency(1))
                    .unwrap()
            };
            let mut loader = Loader::new(build());
            let mut epoch = loader.epoch();
            let head: Vec<Result<u64>> = epoch.by_ref().take(251).collect();
            assert!(head[..250].iter().all(|r| r.is_ok()));
            assert!(
                matches!(head[250], Err(nodes_std::Error::Panicked { .. })),
                "{:?}",
                head[250]
            );
            let state = epoch.state_dict().unwrap();
            drop(epoch);
            // Resuming replays the step, which panics again here: the same
            // outcome either way is what matters.
            let mut resumed = Loader::new(build());
            let rest: Vec<String> = match resumed.load_state_dict(&state) {
                Ok(()) => resumed.epoch().map(|r| format!("{r:?}")).collect(),
                Err(e) => vec![format!("load: {e}")],
            };
            (root(&state), rest)
        };
        let (counted_state, counted_rest) = run(true);
        let (snapshot_state, snapshot_rest) = run(false);
        assert_eq!(counted_state["steps_since_snapshot"], 1, "{counted_state}");
        assert_eq!(counted_state["snapshot"], snapshot_state["snapshot"]);
        assert_eq!(counted_state, snapshot_state);
        assert_eq!(counted_rest, snapshot_rest);
    });
}
