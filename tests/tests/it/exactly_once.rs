//! Exactly-once under restore, for every composition the API accepts:
//! random pipelines over every stock node (`support::spec`), with
//! out-of-order parallel maps anywhere their output is defined, jitter in
//! the user functions and bad records, cut at random points (0, the end,
//! epoch ends and anywhere between, across epochs), the state taken through
//! JSON text and restored into a freshly built pipeline (also with other
//! worker counts, twice in a row, into a loader that has moved on, and from
//! a state taken right after a restore): the resumed output must be the
//! uninterrupted run's.
//!
//! Each case runs a [`Loader`] over one to three epochs. The reference is
//! one uninterrupted loader; the resumed run reads to each cut, takes the
//! state, restores it as the cut's [`Restore`] says, and reads on. The two
//! must agree at the pipeline's [`Level`]: item for item, or where an
//! out-of-order map with workers is involved as a multiset per epoch (of
//! items, or of plain values where batches above the map group them
//! differently). An `Err` (a bad record) is one item: the pass goes on
//! after it, and it is compared by position or count like any other item.
//! Epochs must end where the reference's end.
//!
//! Or the pipeline is refused when it starts, with
//! `Error::InvalidPipeline` from an `Unbatcher` or a `FlatMapper` over an
//! out-of-order parallel map with workers: the one composition that may be
//! refused. Any
//! other refusal, and any other error, fails the case. The counts of cases
//! run and refused are printed.
//!
//! `NODES_RELIABILITY_LONG=1` runs ten times the cases (20,000). To tell
//! failures apart, `NODES_EXACTLY_ONCE=no-failures` draws no bad records and
//! `NODES_EXACTLY_ONCE=exact` no out-of-order map with workers (both:
//! `no-failures,exact`); `NODES_SURVEY=n` reports up to `n` failing cases
//! instead of stopping at the first (see `support::runner`).

use std::time::Duration;

use nodes_std::prelude::*;
use nodes_std::{Epoch, testing};
use proptest::prelude::*;

use crate::support::runner::{Outcome, run_cases};
use crate::support::spec::{
    Grammar, Level, Out, Pipeline, Spec, V, build, compare_epoch, show, spec_strategy,
};

/// What to do with a state taken at a cut.
#[derive(Clone, Debug)]
enum Restore {
    /// Load it into a freshly built pipeline.
    Fresh,
    /// Load it into a freshly built pipeline with other worker counts,
    /// read-ahead and snapshot frequencies (drawn from the seed).
    Reworked(u64),
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

/// Where a cut is.
#[derive(Clone, Copy, Debug)]
enum At {
    /// A fraction of the whole reference run.
    Fraction(f64),
    /// The end of an epoch (clamped to the last).
    EpochEnd(usize),
}

#[derive(Clone, Debug)]
struct Cut {
    at: At,
    restore: Restore,
    /// At an epoch's end, read the end (`None`) before taking the state.
    observe_end: bool,
}

#[derive(Clone, Debug)]
struct Case {
    spec: Spec,
    epochs: usize,
    cuts: Vec<Cut>,
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (nodes, threaded) = self.spec.count_nodes();
        write!(
            f,
            "{}\n  ({nodes} nodes, {threaded} threaded, level {:?}, over a varying order: {:?}, {} epochs, cuts {:?})",
            self.spec,
            self.spec.level(),
            self.spec.over_varying(),
            self.epochs,
            self.cuts
        )
    }
}

fn restore_strategy() -> impl Strategy<Value = Restore> {
    prop_oneof![
        3 => Just(Restore::Fresh),
        2 => any::<u64>().prop_map(Restore::Reworked),
        1 => Just(Restore::Twice),
        1 => Just(Restore::ReloadItsState),
        1 => (0usize..6).prop_map(Restore::Rewind),
        1 => (0usize..6).prop_map(Restore::Again),
    ]
}

fn at_strategy() -> impl Strategy<Value = At> {
    prop_oneof![
        1 => Just(At::Fraction(0.0)),
        1 => Just(At::Fraction(1.0)),
        1 => (0usize..3).prop_map(At::EpochEnd),
        5 => (0.0f64..1.0).prop_map(At::Fraction),
    ]
}

fn cuts_strategy() -> impl Strategy<Value = Vec<Cut>> {
    prop::collection::vec(
        (at_strategy(), restore_strategy(), any::<bool>()).prop_map(
            |(at, restore, observe_end)| Cut {
                at,
                restore,
                observe_end,
            },
        ),
        1..5,
    )
}

/// The uninterrupted run: every item, and where each epoch ends.
struct Reference {
    items: Vec<Out>,
    /// The end position of each epoch in `items`.
    bounds: Vec<usize>,
}

/// Cases whose reference is longer are skipped (nested cycles can multiply
/// a small source into a long run).
const ITEM_LIMIT: usize = 600;

/// An item as the comparison sees it. Only bad records (`Error::User` from
/// the generated functions) are expected errors.
fn classify(item: Result<V>, at: usize) -> Result<Out, String> {
    match item {
        Ok(v) => Ok(Out::Ok(v)),
        Err(e @ Error::User { .. }) => Ok(Out::from_result(Err(e))),
        Err(e) => Err(format!("item {at}: an unexpected error: {e}")),
    }
}

/// The reference run, or `None` if the pipeline was refused when it
/// started (in the one composition that may be).
fn reference(spec: &Spec, epochs: usize) -> Result<Option<Reference>, String> {
    let mut loader = Loader::new(build(spec));
    let mut items = Vec::new();
    let mut bounds = Vec::new();
    for e in 0..epochs {
        for item in loader.epoch() {
            if let Err(err @ Error::InvalidPipeline { .. }) = &item {
                if e == 0 && items.is_empty() {
                    check_refusal(spec, err)?;
                    return Ok(None);
                }
                return Err(format!("refused after {} items: {err}", items.len()));
            }
            items.push(
                classify(item, items.len()).map_err(|m| format!("reference epoch {e}: {m}"))?,
            );
            if items.len() > ITEM_LIMIT {
                return Ok(Some(Reference {
                    items,
                    bounds: Vec::new(),
                }));
            }
        }
        bounds.push(items.len());
    }
    Ok(Some(Reference { items, bounds }))
}

/// A refusal must come from an `Unbatcher` or a `FlatMapper` over an
/// out-of-order parallel map with workers, name both, and also stop
/// `start()`.
fn check_refusal(spec: &Spec, err: &Error) -> Result<(), String> {
    let Error::InvalidPipeline { node, below, .. } = err else {
        unreachable!()
    };
    if !spec.may_be_refused()
        || !matches!(*node, "Unbatcher" | "FlatMapper")
        || !below.contains("ParallelMapper")
    {
        return Err(format!(
            "refused outside the one composition that may be (an Unbatcher or a FlatMapper over an out-of-order ParallelMapper with workers): {err}"
        ));
    }
    match build(spec).start() {
        Err(Error::InvalidPipeline { .. }) => Ok(()),
        Err(other) => Err(format!(
            "the loader refused the pipeline ({err}), start() failed otherwise: {other}"
        )),
        Ok(_) => Err(format!(
            "the loader refused the pipeline ({err}), start() accepted it"
        )),
    }
}

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
    level: Level,
    /// Items read so far (the concatenated output).
    out: Vec<Out>,
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
    /// (for an exact pipeline; the others' order is not defined).
    fn check_probe(&self, at: usize, items: &[Out], what: &str) -> Result<(), String> {
        let want = &self.reference.items[at..(at + items.len()).min(self.total())];
        if self.level == Level::Exact && items != want {
            return Err(format!(
                "{what}: items after position {at} were {}, the reference has {}",
                show(items),
                show(want)
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
                            Some(item) => probed.push(classify(item, until + probed.len())?),
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
            Some(item) => {
                let at = self.out.len();
                if let Err(err @ Error::InvalidPipeline { .. }) = &item {
                    return Err(format!("refused after a restore, at item {at}: {err}"));
                }
                let item = classify(item, at)?;
                if at >= self.total() {
                    return Err(format!(
                        "an extra item beyond the reference: {}",
                        show(&[item])
                    ));
                }
                self.out.push(item);
                Ok(true)
            }
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
        Some(Err(e)) => Err(format!(
            "the epoch did not end after {at} items like the reference's: got an error: {e}"
        )),
    }
}

fn check(case: &Case) -> Result<Outcome, String> {
    let Case { spec, epochs, cuts } = case;
    let level = spec
        .level()
        .ok_or("the generator drew a spec whose output nothing determines")?;
    let Some(reference) = reference(spec, *epochs)? else {
        return Ok(Outcome::Refused);
    };
    if reference.items.len() > ITEM_LIMIT {
        return Ok(Outcome::Skipped);
    }
    let total = reference.items.len();
    let mut positions: Vec<(usize, &Cut)> = cuts
        .iter()
        .map(|c| {
            let at = match c.at {
                At::Fraction(f) => ((total as f64) * f).round().min(total as f64) as usize,
                At::EpochEnd(e) => reference.bounds[e.min(reference.bounds.len() - 1)],
            };
            (at, c)
        })
        .collect();
    positions.sort_by_key(|(p, _)| *p);

    let mut run = Resumed {
        spec,
        reference: &reference,
        level,
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
            Restore::Reworked(seed) => {
                let mut fresh = Loader::new(build(&spec.reworked(seed)));
                run.load(&mut fresh, &state, "with other worker counts")?;
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
                    level,
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

    let cut_list: Vec<usize> = positions.iter().map(|(p, _)| *p).collect();
    let mut start = 0;
    for (e, &end) in reference.bounds.iter().enumerate() {
        compare_epoch(level, &run.out[start..end], &reference.items[start..end])
            .map_err(|m| format!("epoch {e} (items {start}..{end}, cuts at {cut_list:?}) {m}"))?;
        start = end;
    }
    Ok(Outcome::Ran)
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let mut grammar = Grammar::every_shape(4, 40, 4);
    let only = std::env::var("NODES_EXACTLY_ONCE").unwrap_or_default();
    for knob in only.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        match knob {
            "no-failures" => grammar.failures = false,
            "exact" => grammar.top = Level::Exact,
            other => panic!("NODES_EXACTLY_ONCE: unknown knob {other:?}"),
        }
    }
    (spec_strategy(grammar), 1usize..=3, cuts_strategy()).prop_map(|(spec, epochs, cuts)| Case {
        spec,
        epochs,
        cuts,
    })
}

#[test]
fn random_pipelines_deliver_each_item_exactly_once_across_restores() {
    run_cases(
        "exactly once",
        2000,
        0x5eed_0001,
        Duration::from_secs(60),
        case_strategy(),
        check,
    );
}

/// A pipeline of the exact level, for the save/load protocol.
#[derive(Clone, Debug)]
struct Protocol {
    spec: Spec,
    midpoint: usize,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at midpoint {}", self.spec, self.midpoint)
    }
}

/// The node authors' conformance check (`testing::check_save_load`: four
/// epochs cut at a midpoint, restored into the same and a fresh loader,
/// the initial and the end-of-epoch states) on random pipelines whose
/// output is exact.
#[test]
fn random_exact_pipelines_pass_the_save_load_protocol() {
    let grammar = Grammar {
        failures: false,
        top: Level::Exact,
        ..Grammar::every_shape(4, 16, 3)
    };
    let strategy = (spec_strategy(grammar), 0usize..20)
        .prop_map(|(spec, midpoint)| Protocol { spec, midpoint });
    run_cases(
        "save/load protocol",
        300,
        0x5eed_0005,
        Duration::from_secs(60),
        strategy,
        |case| {
            let first = Loader::new(build(&case.spec))
                .epoch()
                .take(ITEM_LIMIT + 1)
                .collect::<Result<Vec<V>>>()
                .map_err(|e| format!("first epoch: {e}"))?;
            // The loader cannot tell the start of an empty epoch from its
            // end (it looks one item ahead and starts the next epoch), so
            // the protocol's "restore the initial state" step does not apply.
            if first.is_empty() {
                return Ok(Outcome::Ran);
            }
            if first.len() > ITEM_LIMIT / 4 {
                return Ok(Outcome::Skipped);
            }
            testing::check_save_load(|| build(&case.spec), case.midpoint.min(first.len() + 1))?;
            Ok(Outcome::Ran)
        },
    );
}

/// Shapes the random-chain test of nodes-std once shrank failures to, at
/// every cut, through both checks.
#[test]
fn former_chain_failures_resume_exactly() {
    use crate::support::spec::{Fun, Order, Source};
    let src = |s: Source| Box::new(Spec::Src(s));
    let specs = [
        Spec::Filter(
            Box::new(Spec::Batch(
                src(Source::Indices(
                    2,
                    Order::Random(11_998_683_575_894_243_456),
                )),
                2,
                false,
            )),
            4,
            0,
        ),
        Spec::Zip(
            Box::new(Spec::Unbatch(Box::new(Spec::CycleHeader(
                src(Source::Probe(1)),
                3,
            )))),
            Box::new(Spec::TryMap(
                src(Source::Indices(1, Order::Random(0))),
                Fun::default(),
            )),
        ),
        Spec::Zip(
            Box::new(Spec::Unbatch(src(Source::Iter(vec![0])))),
            Box::new(Spec::Unbatch(src(Source::Indices(
                2,
                Order::Sharded {
                    rank: 0,
                    world: 1,
                    pad: false,
                    seed: 44_366_390_509_479_546,
                },
            )))),
        ),
    ];
    for spec in specs {
        let len = Loader::new(build(&spec)).epoch().count();
        for cut in 0..=len + 1 {
            // Not when epoch 0 is empty (see the protocol test above).
            if len > 0 {
                testing::check_save_load(|| build(&spec), cut)
                    .unwrap_or_else(|e| panic!("{spec} at {cut}: {e}"));
            }
            let case = Case {
                spec: spec.clone(),
                epochs: 2,
                cuts: vec![Cut {
                    at: At::Fraction(cut as f64 / (2 * len).max(1) as f64),
                    restore: Restore::Fresh,
                    observe_end: true,
                }],
            };
            assert_eq!(check(&case), Ok(Outcome::Ran), "{case}");
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
        .stop_criteria(StopCriteria::FirstDatasetExhausted)
        .seed(seed)
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

/// The levels the generator promises, checked on its own output.
#[test]
fn every_drawn_spec_is_determined_at_some_level() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config::with_cases(300));
    for top in [Level::Leaves, Level::Multiset, Level::Exact] {
        let grammar = Grammar {
            top,
            ..Grammar::every_shape(4, 24, 4)
        };
        runner
            .run(&spec_strategy(grammar), |spec| {
                prop_assert!(spec.level() >= Some(top), "{spec}");
                Ok(())
            })
            .unwrap();
    }
}
