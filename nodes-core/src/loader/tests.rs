//! Unit tests of the loader: epochs, state round trips and restore checks.

use super::*;
use crate::node::Stateful;

struct Count(u64);

impl Node for Count {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        self.0 += 1;
        Ok((self.0 <= 3).then_some(self.0))
    }
}

impl Stateful for Count {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.0 = state.map_or(Ok(0), |s| s.get("n"))?;
        Ok(())
    }
    fn get_state(&self, _cx: &Cx) -> Result<State> {
        State::new().with("n", self.0)
    }
    fn describe(&self) -> Description {
        Description::new("Count")
    }
}

/// `Count` that counts the states taken of it.
struct Observed(Count, std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Node for Observed {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        self.0.next(cx)
    }
}

impl Stateful for Observed {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.0.reset(state)
    }
    fn get_state(&self, cx: &Cx) -> Result<State> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.get_state(cx)
    }
    fn describe(&self) -> Description {
        self.0.describe()
    }
}

#[test]
fn a_restored_epoch_starts_without_taking_the_roots_state() {
    let taken = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = || taken.load(std::sync::atomic::Ordering::Relaxed);
    let mut loader = Loader::new(Observed(Count(0), taken.clone()));
    let mut epoch = loader.epoch();
    let _ = epoch.next();
    let saved = State::from_json(&epoch.state_dict().unwrap().to_json().unwrap()).unwrap();
    let mut resumed = Loader::new(Observed(Count(0), taken.clone()));
    resumed.load_state_dict(&saved).unwrap();
    let before = count();
    // The epoch looks one item ahead; the state from before that look
    // is the one just loaded, not asked of the root again.
    let mut epoch = resumed.epoch();
    let state = epoch.state_dict().unwrap();
    assert_eq!(count(), before);
    assert_eq!(state, saved);
    assert_eq!(epoch.collect::<Result<Vec<_>>>().unwrap(), [2, 3]);
}

#[test]
fn a_loader_that_only_restores_does_not_build_its_state_template() {
    // Building the pipeline description's state is the template's work.
    let mut loader = Loader::new(Count(0));
    assert!(loader.saved_shape.get().is_none());
    let saved = Loader::new(Count(0)).state_dict().unwrap();
    loader.load_state_dict(&saved).unwrap();
    assert!(loader.saved_shape.get().is_none());
    assert!(loader.state_dict().unwrap().contains(PIPELINE));
    assert!(loader.saved_shape.get().is_some());
}

#[test]
fn taking_a_state_leaves_the_checksum_to_serialisation() {
    let mut loader = Loader::new(Count(0));
    let mut epoch = loader.epoch();
    let _ = epoch.next();
    let state = epoch.state_dict().unwrap();
    // Only a slot: nothing was hashed.
    assert!(state.has_checksum_slot());
    let back = State::from_json(&state.to_json().unwrap()).unwrap();
    assert!(!back.has_checksum_slot());
    assert_eq!(back.get::<String>(CHECKSUM).unwrap(), state.checksum());
    assert_eq!(back.checksum(), state.checksum());
}

/// One call per pass, in which two worker threads each pull a source once,
/// as a `par_map(2)` over one item does.
struct TwoWorkers;

impl Node for TwoWorkers {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        let id = crate::NodeId::of(self);
        cx.observe(id, "TwoWorkers", |cx| {
            let mut workers = [
                crate::node::WorkerCx::fork(cx),
                crate::node::WorkerCx::fork(cx),
            ];
            std::thread::scope(|s| {
                for worker in &mut workers {
                    s.spawn(move || worker.with(|cx| cx.observe(id, "Source", |_| Ok(Some(())))));
                }
            });
            Ok(None)
        })
    }
}

impl Stateful for TwoWorkers {
    fn reset(&mut self, _state: Option<&State>) -> Result<()> {
        Ok(())
    }
    fn get_state(&self, _cx: &Cx) -> Result<State> {
        Ok(State::new())
    }
    fn describe(&self) -> Description {
        Description::new("TwoWorkers")
    }
}

/// The statistics of a finished worker are merged into the totals, not kept:
/// after 10,000 epochs the loader keeps a row per node that ran on a worker.
#[test]
fn finished_workers_statistics_are_merged_not_kept() {
    let mut loader = Loader::new(TwoWorkers).record_stats();
    for _ in 0..10_000 {
        assert_eq!(loader.epoch().count(), 0);
    }
    let retained = loader.cx.retained_stats();
    assert!(retained <= 2, "{retained} rows kept for 2 nodes");
    let stats = loader.stats().unwrap();
    assert_eq!(stats.get("TwoWorkers/Source").unwrap().items, 20_000);
    assert_eq!(stats.get("TwoWorkers").unwrap().calls, 10_000);
}
