//! Exactly-once under restore: random pipelines over every stock node, cut at
//! random points, restored into freshly built pipelines (also twice in a row,
//! into a loader that has moved on, and from a state taken right after a
//! restore), must give the uninterrupted run's output: no item lost, none
//! repeated.
//!
//! Each case runs a [`Loader`] over one to three epochs. The reference is one
//! uninterrupted loader; the resumed run reads to each cut, takes the state
//! (through JSON text), restores it as the cut's [`Restore`] says, and reads
//! on. Ordered pipelines must match item for item; pipelines with an
//! out-of-order parallel map must match as a multiset, epoch by epoch (see
//! `support::spec`). Epochs must end where the reference's end.
//!
//! `NODES_RELIABILITY_LONG=1` runs ten times the cases, with longer sources.


use std::time::Duration;

use nodes_std::Epoch;
use nodes_std::prelude::*;
use proptest::prelude::*;
use crate::support::spec::{Pipeline, Spec, V, build, count_nodes, is_ordered, spec_strategy};
use crate::support::watch::{config, scale, with_watchdog};

/// What to do with a state taken at a cut.
#[derive(Clone, Debug)]
enum Restore {
    /// Load it into a freshly built pipeline.
    Fresh,
    /// Load it into a freshly built pipeline twice in a row.
    Twice,
    /// Load it into a fresh pipeline, take that loader's state at once, and
    /// load the new state into another fresh pipeline.
    ReloadItsState,
    /// Keep the loader it came from, read up to `n` more items of the same
    /// epoch, then load the state back into that loader.
    Rewind(usize),
    /// Load it into a fresh pipeline, read `n` items, then load the same
    /// state into that loader again.
    Again(usize),
}

#[derive(Clone, Debug)]
struct Cut {
    /// Where, as a fraction of the reference (clamped to its end).
    at: f64,
    restore: Restore,
    /// At an epoch's end, read the end (`None`) before taking the state.
    observe_end: bool,
}

fn restore_strategy() -> impl Strategy<Value = Restore> {
    prop_oneof![
        3 => Just(Restore::Fresh),
        1 => Just(Restore::Twice),
        1 => Just(Restore::ReloadItsState),
        1 => (0usize..6).prop_map(Restore::Rewind),
        1 => (0usize..6).prop_map(Restore::Again),
    ]
}

fn cuts_strategy() -> impl Strategy<Value = Vec<Cut>> {
    prop::collection::vec(
        (0.0f64..1.05, restore_strategy(), any::<bool>()).prop_map(|(at, restore, observe_end)| {
            Cut {
                at,
                restore,
                observe_end,
            }
        }),
        1..5,
    )
}

/// The uninterrupted run: every item, and where each epoch ends.
struct Reference {
    items: Vec<V>,
    /// The end position of each epoch in `items`.
    bounds: Vec<usize>,
}

fn reference(spec: &Spec, epochs: usize) -> Result<Reference, String> {
    let mut loader = Loader::new(build(spec));
    let mut items = Vec::new();
    let mut bounds = Vec::new();
    for e in 0..epochs {
        for item in loader.epoch() {
            items.push(item.map_err(|err| format!("reference epoch {e}: {err}"))?);
            if items.len() > ITEM_LIMIT {
                return Ok(Reference {
                    items,
                    bounds: Vec::new(),
                });
            }
        }
        bounds.push(items.len());
    }
    Ok(Reference { items, bounds })
}

/// Cases whose reference is longer are skipped (nested cycles can multiply
/// a small source into a long run).
const ITEM_LIMIT: usize = 3000;

fn roundtrip(state: Result<State>) -> Result<State, String> {
    let json = state
        .and_then(|s| s.to_json())
        .map_err(|e| format!("state_dict: {e}"))?;
    State::from_json(&json).map_err(|e| format!("state from JSON: {e}"))
}

/// The resumed run: reads loaders to cut points and restores them.
struct Resumed<'a> {
    spec: &'a Spec,
    reference: &'a Reference,
    ordered: bool,
    /// Items read so far (the concatenated output).
    out: Vec<V>,
}

impl Resumed<'_> {
    fn total(&self) -> usize {
        self.reference.items.len()
    }

    fn fresh(&self) -> Loader<Pipeline> {
        Loader::new(build(self.spec))
    }

    fn load(&self, loader: &mut Loader<Pipeline>, state: &State, what: &str) -> Result<(), String> {
        loader
            .load_state_dict(state)
            .map_err(|e| format!("{what}: load_state_dict failed: {e}"))
    }

    /// Items read from a probe must be the reference's items from `at` on
    /// (for an ordered pipeline; the multiset of a probe is not defined).
    fn check_probe(&self, at: usize, items: &[V], what: &str) -> Result<(), String> {
        let want = &self.reference.items[at..(at + items.len()).min(self.total())];
        if self.ordered && items != want {
            return Err(format!(
                "{what}: items after position {at} were {items:?}, the reference has {want:?}"
            ));
        }
        Ok(())
    }

    /// Reads from `loader` until `until` items were read in all (starting a
    /// new epoch whenever one ends), records them in `out`, and returns the
    /// state there. `probe` more items of the same epoch are then read (not
    /// recorded; checked) before returning. With `observe_end`, an epoch that
    /// ends at `until` is read to its end before the state is taken.
    fn read_to(
        &mut self,
        loader: &mut Loader<Pipeline>,
        until: usize,
        observe_end: bool,
        probe: usize,
    ) -> Result<State, String> {
        let mut empty_epochs = 0;
        loop {
            let start = self.out.len();
            let mut epoch = loader.epoch();
            loop {
                if self.out.len() == until {
                    if observe_end
                        && self.out.len() > start
                        && self.reference.bounds.contains(&until)
                    {
                        expect_end(&mut epoch, until)?;
                    }
                    let state = roundtrip(epoch.state_dict())?;
                    let mut probed = Vec::new();
                    while probed.len() < probe && until + probed.len() < self.total() {
                        match epoch.next() {
                            Some(Ok(v)) => probed.push(v),
                            Some(Err(e)) => return Err(format!("probe after {until}: {e}")),
                            None => break,
                        }
                    }
                    self.check_probe(until, &probed, "the loader read on after its state")?;
                    return Ok(state);
                }
                if !self.pull(&mut epoch)? {
                    break;
                }
            }
            if self.out.len() == start {
                empty_epochs += 1;
                if empty_epochs > self.reference.bounds.len() + 1 {
                    return Err(format!(
                        "empty epoch after empty epoch at {}: the reference has {} items",
                        start,
                        self.total()
                    ));
                }
            } else {
                empty_epochs = 0;
            }
        }
    }

    /// Reads one item into `out`; `false` at the end of the epoch, which
    /// must be where one of the reference's epochs ends.
    fn pull(&mut self, epoch: &mut Epoch<'_, Pipeline>) -> Result<bool, String> {
        match epoch.next() {
            Some(Ok(v)) => {
                if self.out.len() >= self.total() {
                    return Err(format!("an extra item beyond the reference: {v:?}"));
                }
                self.out.push(v);
                Ok(true)
            }
            Some(Err(e)) => Err(format!("item {}: {e}", self.out.len())),
            None => {
                let at = self.out.len();
                if !self.reference.bounds.contains(&at) {
                    return Err(format!(
                        "an epoch ended after {at} items; the reference's epochs end at {:?}",
                        self.reference.bounds
                    ));
                }
                Ok(false)
            }
        }
    }

    /// Reads the rest; the last epoch must end right after the last item.
    fn finish(&mut self, mut loader: Loader<Pipeline>) -> Result<(), String> {
        let total = self.total();
        if self.out.len() == total {
            // Restored at the very end: the loader would start a new epoch,
            // which the reference does not have.
            return Ok(());
        }
        let mut empty_epochs = 0;
        loop {
            let start = self.out.len();
            let mut epoch = loader.epoch();
            while self.out.len() < total {
                if !self.pull(&mut epoch)? {
                    break;
                }
            }
            if self.out.len() == total && self.out.len() > start {
                return expect_end(&mut epoch, total);
            }
            if self.out.len() == start {
                empty_epochs += 1;
                if empty_epochs > self.reference.bounds.len() + 1 {
                    return Err(format!("empty epoch after empty epoch at {start}"));
                }
            }
        }
    }
}

/// The epoch must end here.
fn expect_end(epoch: &mut Epoch<'_, Pipeline>, at: usize) -> Result<(), String> {
    match epoch.next() {
        None => Ok(()),
        Some(Ok(v)) => Err(format!(
            "the epoch did not end after {at} items like the reference's: got {v:?}"
        )),
        Some(Err(e)) => Err(format!("reading the end after {at} items: {e}")),
    }
}

fn multiset(items: &[V]) -> Vec<&V> {
    let mut sorted: Vec<&V> = items.iter().collect();
    sorted.sort();
    sorted
}

fn check(spec: &Spec, epochs: usize, cuts: &[Cut]) -> Result<(), String> {
    let reference = reference(spec, epochs)?;
    if reference.items.len() > ITEM_LIMIT {
        return Ok(());
    }
    let total = reference.items.len();
    let mut positions: Vec<(usize, &Cut)> = cuts
        .iter()
        .map(|c| {
            (
                ((total as f64) * c.at).round().min(total as f64) as usize,
                c,
            )
        })
        .collect();
    positions.sort_by_key(|(p, _)| *p);

    let mut run = Resumed {
        spec,
        reference: &reference,
        ordered: is_ordered(spec),
        out: Vec::new(),
    };
    let mut loader = run.fresh();
    for &(at, cut) in &positions {
        let probe = match cut.restore {
            Restore::Rewind(n) => n,
            _ => 0,
        };
        let state = run
            .read_to(&mut loader, at, cut.observe_end, probe)
            .map_err(|e| format!("reading to the cut at {at}: {e}"))?;
        loader = match cut.restore {
            Restore::Fresh => {
                let mut fresh = run.fresh();
                run.load(&mut fresh, &state, "fresh")?;
                fresh
            }
            Restore::Twice => {
                let mut fresh = run.fresh();
                run.load(&mut fresh, &state, "twice, first load")?;
                run.load(&mut fresh, &state, "twice, second load")?;
                fresh
            }
            Restore::ReloadItsState => {
                let mut first = run.fresh();
                run.load(&mut first, &state, "before the state after restore")?;
                let again = roundtrip(first.state_dict())?;
                drop(first);
                let mut second = run.fresh();
                run.load(&mut second, &again, "state taken right after a restore")?;
                second
            }
            Restore::Rewind(_) => {
                run.load(&mut loader, &state, "into the loader that moved on")?;
                loader
            }
            Restore::Again(n) => {
                let mut fresh = run.fresh();
                run.load(&mut fresh, &state, "again, first load")?;
                let until = (at + n).min(total);
                let mut probe = Resumed {
                    spec,
                    reference: &reference,
                    ordered: run.ordered,
                    out: run.out.clone(),
                };
                probe
                    .read_to(&mut fresh, until, false, 0)
                    .map_err(|e| format!("reading {n} items before loading again: {e}"))?;
                run.check_probe(at, &probe.out[at..], "read before loading again")?;
                run.load(&mut fresh, &state, "again, second load")?;
                fresh
            }
        };
    }
    run.finish(loader)?;

    let out = &run.out;
    if run.ordered {
        if *out != reference.items {
            let first = out
                .iter()
                .zip(&reference.items)
                .position(|(a, b)| a != b)
                .unwrap_or(out.len().min(total));
            return Err(format!(
                "resumed output differs from the reference at item {first} (cuts at {:?}):\n  resumed   {out:?}\n  reference {:?}",
                positions.iter().map(|(p, _)| p).collect::<Vec<_>>(),
                reference.items
            ));
        }
    } else {
        let mut start = 0;
        for (e, &end) in reference.bounds.iter().enumerate() {
            if multiset(&out[start..end]) != multiset(&reference.items[start..end]) {
                return Err(format!(
                    "epoch {e} (items {start}..{end}) is not the reference's multiset:\n  resumed   {:?}\n  reference {:?}",
                    multiset(&out[start..end]),
                    multiset(&reference.items[start..end])
                ));
            }
            start = end;
        }
    }
    Ok(())
}

fn case_strategy() -> impl Strategy<Value = (Spec, usize, Vec<Cut>)> {
    let long = scale() > 1;
    let max_len = if long { 32 } else { 16 };
    let max_epochs: usize = if long { 3 } else { 2 };
    (
        spec_strategy(5, max_len, 3),
        1..=max_epochs,
        cuts_strategy(),
    )
}

proptest! {
    #![proptest_config(config(1024, 0x5eed_0001))]

    #[test]
    fn random_pipelines_deliver_each_item_exactly_once_across_restores(
        (spec, epochs, cuts) in case_strategy()
    ) {
        let (s, c) = (spec.clone(), cuts.clone());
        let outcome = with_watchdog(Duration::from_secs(60), move || check(&s, epochs, &c))
            .and_then(|r| r);
        if let Err(message) = outcome {
            let (nodes, threaded) = count_nodes(&spec);
            return Err(TestCaseError::fail(format!(
                "{message}\n  ({nodes} nodes, {threaded} threaded, {epochs} epochs, cuts {cuts:?})"
            )));
        }
    }
}

/// Regression: `ParallelMapper` and `Prefetcher` described the end of a pass
/// as "after the last item received", where the source had not yet been
/// asked past its end. A restored pipeline then started its next pass in the
/// wrong epoch when that last ask mattered: here a weighted sampler whose
/// pass ended at its first draw (so it never returned an item, but counts as
/// started and moves to its next epoch on reset). They now snapshot the
/// source once the consumer has received the end.
#[test]
fn a_state_taken_at_the_end_of_a_pass_starts_the_same_next_pass() {
    use nodes_std::{MultiNodeWeightedSampler, ParallelOptions, StopCriteria};

    let sampler = |seed: u64| {
        MultiNodeWeightedSampler::new(
            [
                ("empty", IterableWrapper::new(Vec::<u64>::new())),
                ("numbers", IterableWrapper::new((0..5u64).collect())),
            ],
            [("empty", 1.0), ("numbers", 1.0)],
        )
        .unwrap()
        .with_stop_criteria(StopCriteria::FirstDatasetExhausted)
        .with_seed(seed)
    };
    // A seed whose first pass is empty and whose second is not.
    let seed = (0..1000)
        .find(|&seed| {
            let mut run = sampler(seed).start().unwrap();
            let first = run.by_ref().count();
            run.reset(None).unwrap();
            first == 0 && run.count() > 0
        })
        .expect("such a seed exists");
    type Build<'a> = &'a dyn Fn() -> Box<dyn Node<Item = u64>>;
    let builds: [(&str, Build<'_>); 2] = [
        ("ParallelMapper", &|| {
            sampler(seed)
                .par_map(Ok, ParallelOptions::new(2))
                .unwrap()
                .boxed()
        }),
        ("Prefetcher", &|| sampler(seed).prefetch(2).unwrap().boxed()),
    ];
    for (name, build) in builds {
        let mut straight = build().start().unwrap();
        assert_eq!(straight.by_ref().count(), 0);
        let end = straight.get_state().unwrap();
        straight.reset(None).unwrap();
        let second: Vec<u64> = straight.collect::<Result<_>>().unwrap();

        // Restored at the end, the next pass follows at once or after
        // reading the (empty) rest.
        for read_rest in [false, true] {
            let mut restored = build().start_from(&end).unwrap();
            if read_rest {
                assert_eq!(restored.by_ref().count(), 0, "{name}");
            }
            restored.reset(None).unwrap();
            let again: Vec<u64> = restored.collect::<Result<_>>().unwrap();
            assert_eq!(again, second, "{name}: the pass after a restored end");
        }
    }
}
