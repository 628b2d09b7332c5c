//! Faults: a user function or a source that returns `Err` or panics once,
//! at a random item, in a random chain of inline and thread-backed stages
//! (`support::spec::chain_strategy`: maps, try_maps, parallel maps in and
//! out of order with any options, prefetches, with jitter).
//!
//! An `Err` is one item, in every mode: it surfaces at the failed item's
//! position (when the chain delivers in order) with the node and index it
//! names, and the pass goes on after it. An item whose function failed is
//! consumed (the error takes its place); a source that failed without
//! moving on is asked again and yields the item. A panic becomes
//! `Error::Panicked` in the first stage that catches it: a parallel map
//! catches its own function's panics (the pass goes on), a parallel map
//! (with workers or inline) or a prefetch those of its source (the pass
//! ends after it: the source is in no known state). A panic that nothing
//! catches reaches the consumer, who starts again from the last state. A
//! state taken after the error resumes after it: the resumed run gives the
//! uninterrupted run's items. The next pass is whole in every case. Nothing
//! hangs (watchdog). Thread counts are checked in `fault_threads.rs`.
//!
//! `NODES_RELIABILITY_LONG=1` runs ten times the cases.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use nodes_std::prelude::*;
use nodes_std::{MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, ParallelOptions, Running};
use proptest::prelude::*;

use crate::support::faulty::{Fault, FaultKind, Faulty, INJECTED, quiet_injected_panics};
use crate::support::runner::{Outcome, run_cases};
use crate::support::spec::{
    Injected, Level, Out, Pipeline, Source, Spec, V, apply, build_with, chain_stages,
    chain_strategy, compare_epoch, show,
};

#[derive(Clone, Debug)]
struct Case {
    /// A chain over `Faulty`, with the fault's site marked.
    spec: Spec,
    /// The site: 0 for the source, else the stage (from the source up).
    site: usize,
    /// The source index of the item that fails.
    at: u64,
    kind: FaultKind,
    /// A source's `Err` moves past the item (a bad record) rather than
    /// leaving it to be asked for again (a transient error).
    moves_on: bool,
    /// Items read after the error before the state is taken, in the
    /// restore check.
    read_on: usize,
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n  (a {}{:?} at source item {} in stage {}, caught by stage {:?}, the item {:?}; state taken {} items after it)",
            self.spec,
            if self.moves_on {
                ""
            } else if self.site == 0 && self.kind == FaultKind::Err {
                "transient "
            } else {
                ""
            },
            self.kind,
            self.at,
            self.site,
            self.catcher(),
            self.fate(),
            self.read_on
        )
    }
}

impl Case {
    fn stages(&self) -> Vec<&Spec> {
        chain_stages(&self.spec)
    }

    fn len(&self) -> u64 {
        match self.stages()[0] {
            Spec::Src(Source::Faulty(n, _)) => *n,
            other => unreachable!("a chain over Faulty, not {other}"),
        }
    }

    /// The stage that turns the fault into an error: the failing stage for
    /// an `Err` (or a panic in a parallel map's function), else the first
    /// parallel map (with workers or not) or prefetch above the fault,
    /// which catch panics in their source; `None`: the consumer sees the
    /// panic.
    fn catcher(&self) -> Option<usize> {
        let stages = self.stages();
        if self.kind == FaultKind::Err || matches!(stages[self.site], Spec::ParMap(..)) {
            return Some(self.site);
        }
        (self.site + 1..stages.len())
            .find(|&i| matches!(stages[i], Spec::ParMap(..) | Spec::Prefetch(..)))
    }

    /// The node the error must name.
    fn expected_node(&self) -> &'static str {
        let Some(i) = self.catcher() else {
            return "(the consumer)";
        };
        match self.stages()[i] {
            Spec::Src(_) => "Faulty",
            Spec::TryMap(..) => "TryMapper",
            Spec::ParMap(..) => "ParallelMapper",
            Spec::Prefetch(..) => "Prefetcher",
            other => unreachable!("no stage of its own: {other}"),
        }
    }

    /// Whether the output order is defined.
    fn ordered(&self) -> bool {
        !self
            .stages()
            .iter()
            .any(|s| matches!(s, Spec::ParMap(_, p, _) if p.varies()))
    }

    /// What becomes of the failed item.
    fn fate(&self) -> Fate {
        match (self.kind, self.catcher()) {
            // A transient error in a source: the item is asked for again.
            (FaultKind::Err, _) if self.site == 0 && !self.moves_on => Fate::Kept,
            // The error takes the failed item's place.
            (FaultKind::Err, _) => Fate::Consumed,
            // Nothing caught it: the consumer starts again from before it.
            (FaultKind::Panic, None) => Fate::Kept,
            // A parallel map's function: one `Panicked` item.
            (FaultKind::Panic, Some(c)) if c == self.site => Fate::Consumed,
            // A panic in the catcher's source ends the pass after it.
            (FaultKind::Panic, Some(_)) => Fate::PassEnds,
        }
    }

    /// The value the site's function sees for the failing item.
    fn target(&self) -> V {
        self.stages()[1..self.site.max(1)]
            .iter()
            .fold(V::I(self.at), |v, s| apply(s, v))
    }

    /// The value the failing item comes out as, when nothing fails.
    fn output_of(&self, i: u64) -> V {
        self.stages()[1..].iter().fold(V::I(i), |v, s| apply(s, v))
    }

    /// A fresh fault for one run (a `Faulty` source matches it by index,
    /// a function by the target value).
    fn injected(&self) -> Injected {
        Injected {
            fault: if self.moves_on {
                Fault::new(self.at, self.kind).moving_on()
            } else {
                Fault::new(self.at, self.kind)
            },
            target: self.target(),
        }
    }
}

/// What becomes of the item whose processing failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// It comes after the error.
    Kept,
    /// The error takes its place.
    Consumed,
    /// The pass ends after the error (a panic in a source: the source is in
    /// no known state).
    PassEnds,
}

/// Marks stage `site` (from the source up) of a chain to carry the fault.
fn mark(spec: &mut Spec, site: usize, len: usize) {
    let mut at = spec;
    for _ in 0..len - 1 - site {
        at = at.children_mut().into_iter().next().expect("a chain");
    }
    match at {
        Spec::Src(Source::Faulty(_, carries)) => *carries = true,
        Spec::Map(_, _, fun) | Spec::TryMap(_, fun) | Spec::ParMap(_, _, fun) => {
            fun.injected = true
        }
        other => unreachable!("no function: {other}"),
    }
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        chain_strategy(30, 4),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        prop_oneof![3 => Just(FaultKind::Err), 1 => Just(FaultKind::Panic)],
        any::<bool>(),
        0usize..3,
    )
        .prop_map(|(mut spec, site, at, kind, moves_on, read_on)| {
            let stages = chain_stages(&spec);
            let sites: Vec<usize> = (0..stages.len())
                .filter(|&i| match stages[i] {
                    Spec::Src(_) | Spec::TryMap(..) | Spec::ParMap(..) => true,
                    // A map cannot return an error.
                    Spec::Map(..) => kind == FaultKind::Panic,
                    _ => false,
                })
                .collect();
            let site = *site.get(&sites);
            let len = stages.len();
            let Spec::Src(Source::Faulty(n, _)) = stages[0] else {
                unreachable!()
            };
            let at = at.index(*n as usize) as u64;
            mark(&mut spec, site, len);
            Case {
                spec,
                site,
                at,
                kind,
                moves_on: moves_on && site == 0 && kind == FaultKind::Err,
                read_on,
            }
        })
}

/// What a run saw: its items, and the errors with their details.
#[derive(Default)]
struct Seen {
    items: Vec<Out>,
    /// (position, node, index, message) of each error.
    errors: Vec<(usize, String, Option<u64>, String)>,
    /// Panics that reached the consumer.
    panics: usize,
}

fn start(
    case: &Case,
    injected: &Injected,
    state: Option<&State>,
) -> Result<Running<Pipeline>, String> {
    let node = build_with(&case.spec, Some(injected));
    match state {
        None => node.start().map_err(|e| format!("start: {e}")),
        Some(state) => {
            let json = state.to_json().map_err(|e| e.to_string())?;
            let state = State::from_json(&json).map_err(|e| e.to_string())?;
            node.start_from(&state)
                .map_err(|e| format!("restore failed: {e}"))
        }
    }
}

/// Reads a pass. After a panic at the consumer, starts again from the last
/// state. With `stop_after: Some(n)`, returns the state `n` items after the
/// error (or at the end of the pass). Returns the pipeline too, standing at
/// the end of its pass.
fn read(
    case: &Case,
    injected: &Injected,
    stop_after: Option<usize>,
) -> Result<(Seen, Option<State>, Running<Pipeline>), String> {
    let limit = 3 * case.len() as usize + 10;
    let mut run = start(case, injected, None)?;
    let mut last = run.get_state().map_err(|e| e.to_string())?;
    let mut seen = Seen::default();
    let mut after_error: Option<usize> = None;
    loop {
        if let (Some(more), Some(since)) = (stop_after, after_error)
            && seen.items.len() == since + more
        {
            let state = run
                .get_state()
                .map_err(|e| format!("state after the error: {e}"))?;
            return Ok((seen, Some(state), run));
        }
        if seen.items.len() > limit {
            return Err(format!(
                "more items than the source has: {}",
                show(&seen.items)
            ));
        }
        let step = catch_unwind(AssertUnwindSafe(|| run.next()));
        match step {
            Ok(Some(Ok(v))) => {
                seen.items.push(Out::Ok(v));
                last = run
                    .get_state()
                    .map_err(|e| format!("state after item: {e}"))?;
            }
            Ok(Some(Err(err))) => {
                let (node, index) = match &err {
                    Error::User { node, index, .. } | Error::Panicked { node, index, .. } => {
                        (node.to_string(), *index)
                    }
                    other => return Err(format!("an unexpected kind of error: {other}")),
                };
                let want_kind = match case.kind {
                    FaultKind::Err => matches!(err, Error::User { .. }),
                    FaultKind::Panic => matches!(err, Error::Panicked { .. }),
                };
                if !want_kind {
                    return Err(format!("expected a {:?}, got: {err}", case.kind));
                }
                if !seen.errors.is_empty() {
                    return Err(format!("a second error: {err}"));
                }
                seen.errors
                    .push((seen.items.len(), node, index, err.to_string()));
                seen.items
                    .push(Out::Err(format!("{INJECTED} at {}", case.at)));
                after_error = Some(seen.items.len());
                last = run
                    .get_state()
                    .map_err(|e| format!("state after the error: {e}"))?;
            }
            Ok(None) => {
                let state = stop_after
                    .map(|_| {
                        run.get_state()
                            .map_err(|e| format!("state at the end: {e}"))
                    })
                    .transpose()?;
                return Ok((seen, state, run));
            }
            Err(payload) => {
                let message = nodes_std::testing::panic_message(&*payload);
                if case.catcher().is_some() || !message.starts_with(INJECTED) {
                    return Err(format!("the consumer saw a panic: {message}"));
                }
                if case.ordered() && seen.items.len() as u64 != case.at {
                    return Err(format!("the panic came after {} items", seen.items.len()));
                }
                seen.panics += 1;
                // The pipeline unwound mid-call: start again from the last
                // state taken before the panic.
                let _ = catch_unwind(AssertUnwindSafe(move || drop(run)));
                run = start(case, injected, Some(&last))?;
            }
        }
    }
}

/// The items of a pass with nothing failing.
fn clean(case: &Case) -> Vec<Out> {
    (0..case.len())
        .map(|i| Out::Ok(case.output_of(i)))
        .collect()
}

/// The items a pass must give: every item once, with the error (if it
/// surfaced as an item) at the failed item's place, the failed item kept or
/// consumed as its [`Fate`] says; for a pass that ends after the error,
/// the items before it (out of order: those of `got`, which must each come
/// from the pass once).
fn expected(case: &Case, got: &[Out], error_item: bool) -> Vec<Out> {
    let error = Out::Err(format!("{INJECTED} at {}", case.at));
    let mut want: Vec<Out> = Vec::new();
    if case.fate() == Fate::PassEnds {
        if case.ordered() {
            want.extend(clean(case).into_iter().take(case.at as usize));
        } else {
            // Each item of the pass at most once, the failed one not at all.
            let mut pool = clean(case);
            pool.retain(|o| *o != Out::Ok(case.output_of(case.at)));
            for item in got.iter().filter(|o| !o.is_err()) {
                if let Some(i) = pool.iter().position(|o| o == item) {
                    want.push(pool.remove(i));
                }
            }
        }
        want.push(error);
        return want;
    }
    for i in 0..case.len() {
        if i == case.at {
            if error_item {
                want.push(error.clone());
            }
            if case.fate() == Fate::Consumed {
                continue;
            }
        }
        want.push(Out::Ok(case.output_of(i)));
    }
    want
}

/// Reads the next pass of `run` in full: nothing fails any more.
fn next_pass(case: &Case, run: &mut Running<Pipeline>, what: &str) -> Result<(), String> {
    run.reset(None).map_err(|e| format!("{what}: reset: {e}"))?;
    let items: Vec<Out> = run
        .by_ref()
        .take(3 * case.len() as usize + 10)
        .map(Out::from_result)
        .collect();
    let level = if case.ordered() {
        Level::Exact
    } else {
        Level::Multiset
    };
    compare_epoch(level, &items, &clean(case)).map_err(|m| format!("{what}: the next pass {m}"))
}

fn check(case: &Case) -> Result<Outcome, String> {
    let len = case.len();
    // Values must be told apart at the site (maps may collide modulo 1000).
    let target = case.target();
    let at_site = |i: u64| {
        case.stages()[1..case.site.max(1)]
            .iter()
            .fold(V::I(i), |v, s| apply(s, v))
    };
    if case.site > 0 && (0..len).filter(|&i| at_site(i) == target).count() > 1 {
        return Ok(Outcome::Skipped);
    }
    let injected = case.injected();
    let (seen, _, mut run) = read(case, &injected, None)?;

    // Exactly one error (or one panic at the consumer), the injected one,
    // from the right node, at the right position.
    let errors = seen.errors.len() + seen.panics;
    if errors != 1 || !injected.fault.fired() {
        return Err(format!(
            "{errors} errors surfaced (the fault fired: {}): {:?}",
            injected.fault.fired(),
            seen.errors
        ));
    }
    if let Some((position, node, index, text)) = seen.errors.first() {
        if !text.contains(&format!("{INJECTED} at {}", case.at)) {
            return Err(format!("the error is not the injected one: {text}"));
        }
        if *node != case.expected_node() {
            return Err(format!(
                "expected an error from {}, got: {text}",
                case.expected_node()
            ));
        }
        if case.ordered() {
            if *position as u64 != case.at {
                return Err(format!(
                    "the error for item {} arrived after {position} items: {text}",
                    case.at
                ));
            }
            if let Some(i) = index
                && *i != case.at
            {
                return Err(format!(
                    "the error names item {i}, the fault was at {}: {text}",
                    case.at
                ));
            }
        }
    }

    // The items: every item once, the failed one replaced by the error if
    // its function failed, or after it if the source did; or the pass ends
    // after the error.
    let level = if case.ordered() {
        Level::Exact
    } else {
        Level::Multiset
    };
    let want = expected(case, &seen.items, seen.panics == 0);
    compare_epoch(level, &seen.items, &want).map_err(|m| format!("the uninterrupted pass {m}"))?;
    // Whatever happened, the next pass is whole.
    next_pass(case, &mut run, "after the fault")?;
    drop(run);

    // A state taken after the error (and `read_on` more items) resumes
    // after it.
    if seen.panics == 0 {
        let injected = case.injected();
        let (before, state, run) = read(case, &injected, Some(case.read_on))?;
        drop(run);
        let state = state.ok_or("no state was taken")?;
        let mut resumed = before.items;
        let mut run = start(case, &injected, Some(&state))?;
        for item in run.by_ref().take(3 * len as usize + 10) {
            let item = item.map_err(|e| format!("after the restore: {e}"))?;
            resumed.push(Out::Ok(item));
        }
        let want = expected(case, &resumed, true);
        compare_epoch(level, &resumed, &want)
            .map_err(|m| format!("restored after the error, the pass {m}"))?;
        next_pass(case, &mut run, "after the restore")?;
    }
    Ok(Outcome::Ran)
}

#[test]
fn faults_surface_at_their_position_and_a_restore_delivers_the_rest() {
    quiet_injected_panics();
    run_cases(
        "faults",
        1024,
        0x5eed_0003,
        Duration::from_secs(60),
        case_strategy(),
        check,
    );
}

/// Shapes the former fault test shrank failures to.
#[test]
fn former_fault_failures() {
    quiet_injected_panics();
    use crate::support::spec::{Fun, Par};
    // A source that panics at its first item under an inline,
    // out-of-order parallel map: the map catches it (it used to reach the
    // consumer).
    let spec = Spec::ParMap(
        Box::new(Spec::Src(Source::Faulty(1, true))),
        Par {
            workers: 0,
            in_order: false,
            max_concurrent: None,
            snapshot_frequency: 1,
        },
        Fun::default(),
    );
    let case = Case {
        spec,
        site: 0,
        at: 0,
        kind: FaultKind::Panic,
        moves_on: false,
        read_on: 0,
    };
    assert_eq!(check(&case), Ok(Outcome::Ran), "{case}");
}

/// One error semantics: a bad record is one item whatever the worker count,
/// the order, and whether a prefetch reads ahead. Over two epochs, with a
/// failing `try_map` below the parallel map and a failing function in it.
#[test]
fn the_same_items_for_every_worker_count_with_failing_items() {
    let build = |workers: usize, in_order: bool, prefetch: Option<usize>| {
        let node = IterableWrapper::new(0..40u64)
            .try_map(|x| {
                if x % 9 == 4 {
                    Err(format!("bad source item {x}"))
                } else {
                    Ok(x)
                }
            })
            .par_map(
                |x| {
                    if x % 7 == 3 {
                        return Err(format!("bad item {x}").into());
                    }
                    if x % 3 == 0 {
                        // Jitter only: the assertions hold in any completion order.
                        std::thread::sleep(Duration::from_micros(x * 7 % 300));
                    }
                    Ok(x * 2)
                },
                ParallelOptions::new(workers).in_order(in_order),
            )
            .unwrap();
        match prefetch {
            Some(k) => node.prefetch(k).unwrap().boxed(),
            None => node.boxed(),
        }
    };
    let epochs = |node: Box<dyn Node<Item = u64>>| {
        let mut loader = Loader::new(node);
        (0..2)
            .map(|_| {
                loader
                    .epoch()
                    .map(|item| item.map_err(|e| crate::support::spec::root_cause(&e)))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    // Items 4, 13, 22, 31 fail in the source; 3, 10, 17, 24, 38 (not 31) in the map.
    let want: Vec<std::result::Result<u64, String>> = (0..40)
        .map(|x| match x {
            x if x % 9 == 4 => Err(format!("bad source item {x}")),
            x if x % 7 == 3 => Err(format!("bad item {x}")),
            x => Ok(x * 2),
        })
        .collect();
    for prefetch in [None, Some(1), Some(4)] {
        for in_order in [true, false] {
            for workers in [0, 1, 2, 4] {
                let what = format!("{workers} workers, in order {in_order}, prefetch {prefetch:?}");
                for (e, mut got) in epochs(build(workers, in_order, prefetch))
                    .into_iter()
                    .enumerate()
                {
                    if !in_order && workers > 0 {
                        let key = |r: &std::result::Result<u64, String>| format!("{r:?}");
                        got.sort_by_key(key);
                        let mut want = want.clone();
                        want.sort_by_key(key);
                        assert_eq!(got, want, "{what}, epoch {e} (as a multiset)");
                    } else {
                        assert_eq!(got, want, "{what}, epoch {e}");
                    }
                }
            }
        }
    }
}

/// A source that fails inside a multi-source sampler: the error is one item
/// of the sampler, at the position of the item that failed (it takes that
/// item's draw, or turn); the source keeps its position, so the item comes
/// at a later draw (turn) of the source: every item is delivered exactly
/// once. (Error semantics per sampler: `nodes-std/tests/*_sampler.rs`.)
#[test]
fn a_failing_source_inside_a_sampler_is_one_item() {
    quiet_injected_panics();
    let sources = |fault: Option<&Fault>| {
        let mut a = Faulty::new(7);
        if let Some(f) = fault {
            a = a.fault(f.clone());
        }
        [
            ("a", a.boxed()),
            ("b", Faulty::new(5).map(|x| x + 100).boxed()),
        ]
    };
    let weighted = |fault: Option<&Fault>| {
        MultiNodeWeightedSampler::new(sources(fault), [("a", 1.0), ("b", 2.0)])
            .unwrap()
            .stop_criteria(StopCriteria::AllDatasetsExhausted)
            .seed(11)
            .boxed()
    };
    let round_robin = |fault: Option<&Fault>| {
        MultiNodeRoundRobinSampler::new(sources(fault))
            .unwrap()
            .stop_criteria(StopCriteria::AllDatasetsExhausted)
            .boxed()
    };
    for (name, build) in [
        (
            "weighted",
            &weighted as &dyn Fn(Option<&Fault>) -> Box<dyn Node<Item = u64>>,
        ),
        ("round robin", &round_robin),
    ] {
        let clean: Vec<u64> = build(None).start().unwrap().collect::<Result<_>>().unwrap();
        for at in 0..7 {
            let fault = Fault::new(at, FaultKind::Err);
            let mut items = Vec::new();
            let mut errors = Vec::new();
            for item in build(Some(&fault)).start().unwrap() {
                match item {
                    Ok(v) => items.push(v),
                    Err(e) => errors.push((items.len(), e.to_string())),
                }
            }
            let position = clean.iter().position(|&v| v == at).unwrap();
            assert_eq!(errors.len(), 1, "{name}, fault at {at}: {errors:?}");
            assert_eq!(errors[0].0, position, "{name}, fault at {at}: {errors:?}");
            assert!(errors[0].1.contains(INJECTED), "{errors:?}");
            assert_eq!(
                items[..position],
                clean[..position],
                "{name}, fault at {at}"
            );
            let (mut items, mut clean) = (items, clean.clone());
            items.sort_unstable();
            clean.sort_unstable();
            assert_eq!(items, clean, "{name}, fault at {at}");
        }
    }
}

/// An item whose `Drop` panics, on a worker thread only, once armed.
struct Bomb(u64);

/// Bombs go off only in the pass under test.
static ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Drop for Bomb {
    fn drop(&mut self) {
        let on_worker = std::thread::current()
            .name()
            .is_some_and(|name| name.starts_with("nodes-"));
        if self.0 == 3 && on_worker && ARMED.load(std::sync::atomic::Ordering::SeqCst) {
            panic!("{INJECTED}: item 3 dropped");
        }
    }
}

/// A worker thread that dies unwinding outside the guarded user calls
/// (here an item whose `Drop` panics, dropped by the worker as a restored
/// skip) ends the pass with an error at the item it was working on: the
/// consumer is told through the hand-over, a ring for one worker and a
/// channel for two, and never waits for an item that will not come.
#[test]
fn a_worker_that_dies_unwinding_ends_the_pass_with_an_error() {
    quiet_injected_panics();
    for workers in [1, 2] {
        let build = move || {
            IterableWrapper::new(0..8u64)
                .map(Bomb)
                .par_map(
                    |bomb: Bomb| Ok(bomb.0),
                    ParallelOptions::new(workers).in_order(false),
                )
                .unwrap()
        };
        let mut loader = Loader::new(build());
        let mut epoch = loader.epoch();
        epoch.next().unwrap().unwrap();
        let mut value = epoch.state_dict().unwrap().into_value();
        drop(epoch);
        drop(loader);
        let base = value["root"]["snapshot_index"].as_u64().unwrap();
        let steps = value["root"]["steps_since_snapshot"].as_u64().unwrap();
        assert!(base + steps <= 3, "workers {workers}: {value}");
        // Item 3 counts as delivered: the worker pulls it and drops it.
        value["root"]["delivered_ahead"] = serde_json::json!([3 - base]);
        let state = State::from_value(value).unwrap();
        let outcome = nodes_std::testing::with_watchdog(Duration::from_secs(30), move || {
            let mut loader = Loader::new(build()).verify_checksum(false);
            loader.load_state_dict(&state).unwrap();
            ARMED.store(true, std::sync::atomic::Ordering::SeqCst);
            let seen: Vec<std::result::Result<u64, String>> = loader
                .epoch()
                .take(20)
                .map(|item| item.map_err(|e| e.to_string()))
                .collect();
            ARMED.store(false, std::sync::atomic::Ordering::SeqCst);
            seen
        });
        let seen = outcome.unwrap_or_else(|e| panic!("workers {workers}: {e}"));
        let errors: Vec<&String> = seen.iter().filter_map(|i| i.as_ref().err()).collect();
        assert_eq!(errors.len(), 1, "workers {workers}: {seen:?}");
        assert!(
            errors[0].contains("worker thread died"),
            "workers {workers}: {}",
            errors[0]
        );
        assert!(
            !seen.iter().any(|i| i.as_ref().is_ok_and(|&v| v == 3)),
            "workers {workers}: {seen:?}"
        );
    }
}
