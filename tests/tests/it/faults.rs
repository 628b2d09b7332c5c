//! Faults: a user function or a source that returns `Err` or panics at a
//! random item, in a random chain of inline and thread-backed stages.
//!
//! The error surfaces at the failed item's position (after every item before
//! it, when the chain delivers in order) with the node and index it names;
//! a thread-backed stage turns a panic into `Error::Panicked` and ends its
//! pass (`next` is then `None`), an inline stage passes the error on and
//! goes on. Restoring the state taken after the error retries the failed
//! item, so the run delivers every item exactly once, except an item whose
//! inline function failed (that item is consumed, as with `Iterator::map`).
//! Nothing hangs (watchdog). Thread counts are checked in `fault_threads.rs`.
//!
//! `NODES_RELIABILITY_LONG=1` runs ten times the cases.


use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use nodes_std::prelude::*;
use nodes_std::{MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, ParallelOptions, Running};
use proptest::prelude::*;
use crate::support::faulty::{Fault, FaultKind, Faulty, INJECTED, quiet_injected_panics};
use crate::support::spec::Par;
use crate::support::watch::{config, panic_message, with_watchdog};

#[derive(Clone, Debug)]
enum Stage {
    Map,
    TryMap,
    ParMap(Par),
    Prefetch(usize),
}

impl Stage {
    /// Runs on threads of its own (and so catches panics below it and ends
    /// its pass on an error).
    fn threaded(&self) -> bool {
        match self {
            Stage::ParMap(par) => par.workers > 0,
            Stage::Prefetch(_) => true,
            Stage::Map | Stage::TryMap => false,
        }
    }

    fn has_function(&self) -> bool {
        matches!(self, Stage::TryMap | Stage::ParMap(_))
    }
}

#[derive(Clone, Debug)]
struct Case {
    len: u64,
    stages: Vec<Stage>,
    /// The value of the item that fails.
    at: u64,
    /// `Some(i)`: the function of stage `i` fails; `None` (or a stage
    /// without a function): the source does.
    in_stage: Option<usize>,
    kind: FaultKind,
    /// After an error, call `next` on the same pipeline before restoring.
    carry_on: bool,
}

impl Case {
    fn fault_stage(&self) -> Option<usize> {
        self.in_stage
            .map(|i| i % self.stages.len())
            .filter(|&i| self.stages[i].has_function())
    }

    /// The first stage at or above the fault that runs on threads: it
    /// catches a panic and ends its pass on the error.
    fn catcher(&self) -> Option<usize> {
        let from = match self.fault_stage() {
            // A panic in a parallel map's function is caught by the map
            // itself, even inline.
            Some(i) if matches!(self.stages[i], Stage::ParMap(_)) => {
                return if self.stages[i].threaded() {
                    Some(i)
                } else {
                    self.stages[i + 1..]
                        .iter()
                        .position(Stage::threaded)
                        .map(|p| p + i + 1)
                };
            }
            Some(i) => i + 1,
            None => 0,
        };
        self.stages[from..]
            .iter()
            .position(Stage::threaded)
            .map(|p| p + from)
    }

    /// Whether the output order is defined.
    fn ordered(&self) -> bool {
        !self
            .stages
            .iter()
            .any(|s| matches!(s, Stage::ParMap(p) if p.workers > 0 && !p.in_order))
    }

    /// The failed item is consumed: an inline function failed and no
    /// thread-backed stage above ended its pass before it.
    fn drops_item(&self) -> bool {
        let inline_function = match self.fault_stage() {
            Some(i) => match &self.stages[i] {
                Stage::TryMap => self.kind == FaultKind::Err,
                Stage::ParMap(par) => par.workers == 0,
                _ => false,
            },
            None => false,
        };
        inline_function && self.catcher().is_none()
    }

    /// The panic reaches the consumer.
    fn panics_through(&self) -> bool {
        let panics_uncaught = match self.fault_stage() {
            Some(i) => self.kind == FaultKind::Panic && matches!(self.stages[i], Stage::TryMap),
            None => self.kind == FaultKind::Panic,
        };
        panics_uncaught && self.catcher().is_none()
    }

    /// The node the error must name.
    fn expected_node(&self) -> &'static str {
        let name = |s: &Stage| match s {
            Stage::Prefetch(_) => "Prefetcher",
            _ => "ParallelMapper",
        };
        match (self.fault_stage(), self.kind) {
            (None, FaultKind::Err) => "Faulty",
            (Some(i), FaultKind::Err) => match self.stages[i] {
                Stage::TryMap => "TryMapper",
                _ => "ParallelMapper",
            },
            (Some(i), FaultKind::Panic) if matches!(self.stages[i], Stage::ParMap(_)) => {
                "ParallelMapper"
            }
            (_, FaultKind::Panic) => self
                .catcher()
                .map_or("(the consumer)", |t| name(&self.stages[t])),
        }
    }
}

fn build(case: &Case, fault: &Fault) -> Box<dyn Node<Item = u64>> {
    let stage_fault = case.fault_stage();
    let mut source = Faulty::new(case.len);
    if stage_fault.is_none() {
        source = source.fault(fault.clone());
    }
    let mut node = source.boxed();
    for (i, stage) in case.stages.iter().enumerate() {
        let mine = (stage_fault == Some(i)).then(|| fault.clone());
        node = match stage {
            Stage::Map => node.map(|x| x).boxed(),
            Stage::TryMap => node
                .try_map(move |x| {
                    if let Some(f) = &mine {
                        f.hit(x)?;
                    }
                    Ok::<u64, String>(x)
                })
                .boxed(),
            Stage::ParMap(par) => {
                let mut options = ParallelOptions::new(par.workers)
                    .in_order(par.in_order)
                    .snapshot_frequency(par.snapshot_frequency);
                if let Some(m) = par.max_concurrent {
                    options = options.max_concurrent(m);
                }
                node.par_map(
                    move |x| {
                        if let Some(f) = &mine {
                            f.hit(x)?;
                        }
                        Ok(x)
                    },
                    options,
                )
                .expect("valid options")
                .boxed()
            }
            Stage::Prefetch(n) => node.prefetch(*n).expect("factor > 0").boxed(),
        };
    }
    node
}

type Pipeline = Running<Box<dyn Node<Item = u64>>>;

fn restart(case: &Case, fault: &Fault, state: &State) -> Result<Pipeline, String> {
    let json = state.to_json().map_err(|e| e.to_string())?;
    let state = State::from_json(&json).map_err(|e| e.to_string())?;
    build(case, fault)
        .start_from(&state)
        .map_err(|e| format!("restore failed: {e}"))
}

/// Checks the error seen after `position` items.
fn check_error(case: &Case, err: &Error, position: usize) -> Result<(), String> {
    let (node, index) = match err {
        Error::User { node, index, .. } | Error::Panicked { node, index, .. } => (*node, *index),
        other => return Err(format!("an unexpected kind of error: {other}")),
    };
    let text = err.to_string();
    if !text.contains(&format!("{INJECTED} at {}", case.at)) {
        return Err(format!("the error is not the injected one: {text}"));
    }
    let want_kind = match case.kind {
        FaultKind::Err => matches!(err, Error::User { .. }),
        FaultKind::Panic => matches!(err, Error::Panicked { .. }),
    };
    if !want_kind || node != case.expected_node() {
        return Err(format!(
            "expected a {:?} from {}, got: {text}",
            case.kind,
            case.expected_node()
        ));
    }
    if case.ordered() {
        if position as u64 != case.at {
            return Err(format!(
                "the error for item {} arrived after {position} items: {text}",
                case.at
            ));
        }
        if let Some(i) = index
            && i != case.at
        {
            return Err(format!(
                "the error names item {i}, the fault was at {}: {text}",
                case.at
            ));
        }
    }
    Ok(())
}

fn run(case: &Case) -> Result<(), String> {
    let fault = Fault::new(case.at, case.kind);
    let mut run = build(case, &fault)
        .start()
        .map_err(|e| format!("start: {e}"))?;
    let mut last = run.get_state().map_err(|e| e.to_string())?;
    let mut out: Vec<u64> = Vec::new();
    let mut errors = 0;
    loop {
        let step = catch_unwind(AssertUnwindSafe(|| run.next()));
        match step {
            Ok(Some(Ok(v))) => {
                out.push(v);
                if out.len() as u64 > case.len {
                    return Err(format!("more items than the source has: {out:?}"));
                }
                last = run
                    .get_state()
                    .map_err(|e| format!("state after item: {e}"))?;
            }
            Ok(Some(Err(err))) => {
                errors += 1;
                if errors > 1 {
                    return Err(format!("a second error: {err}"));
                }
                if case.panics_through() {
                    return Err(format!(
                        "expected the panic to reach the consumer, got: {err}"
                    ));
                }
                check_error(case, &err, out.len())?;
                if case.carry_on {
                    // A thread-backed stage ended its pass; an inline one goes on.
                    let latched = case.catcher().is_some();
                    match run.next() {
                        None if latched => {}
                        Some(Ok(v)) if !latched => {
                            out.push(v);
                            last = run.get_state().map_err(|e| e.to_string())?;
                            continue;
                        }
                        None if !latched
                            && out.len() as u64 + 1 == case.len
                            && case.drops_item() =>
                        {
                            // The failed item was the last.
                            continue;
                        }
                        other => {
                            return Err(format!(
                                "after the error (latched: {latched}) next gave {other:?}"
                            ));
                        }
                    }
                }
                // The state taken after the error resumes at the failed item
                // (or after it, if it was consumed).
                let state = run
                    .get_state()
                    .map_err(|e| format!("state after the error: {e}"))?;
                run = restart(case, &fault, &state)?;
                last = state;
            }
            Ok(None) => break,
            Err(payload) => {
                let message = panic_message(&*payload);
                if !case.panics_through() || !message.starts_with(INJECTED) {
                    return Err(format!("the consumer saw a panic: {message}"));
                }
                if case.ordered() && out.len() as u64 != case.at {
                    return Err(format!("the panic came after {} items", out.len()));
                }
                errors += 1;
                // The pipeline unwound mid-call: start again from the last
                // state taken before the panic.
                let _ = catch_unwind(AssertUnwindSafe(move || drop(run)));
                run = restart(case, &fault, &last)?;
            }
        }
    }
    if errors != 1 {
        return Err(format!(
            "{errors} errors surfaced, the fault fired: {}",
            fault.fired()
        ));
    }
    let mut want: Vec<u64> = (0..case.len).collect();
    if case.drops_item() {
        want.retain(|&v| v != case.at);
    }
    if !case.ordered() {
        out.sort_unstable();
    }
    if out != want {
        return Err(format!(
            "not every item exactly once:\n  got  {out:?}\n  want {want:?}"
        ));
    }
    Ok(())
}

fn par_strategy() -> impl Strategy<Value = Par> {
    (
        0usize..4,
        any::<bool>(),
        prop::option::of(1usize..6),
        1usize..5,
    )
        .prop_map(
            |(workers, in_order, max_concurrent, snapshot_frequency)| Par {
                workers,
                in_order,
                max_concurrent,
                snapshot_frequency,
            },
        )
}

fn stage_strategy() -> impl Strategy<Value = Stage> {
    prop_oneof![
        1 => Just(Stage::Map),
        1 => Just(Stage::TryMap),
        3 => par_strategy().prop_map(Stage::ParMap),
        2 => prop_oneof![Just(1usize), Just(2), Just(8)].prop_map(Stage::Prefetch),
    ]
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        1u64..40,
        prop::collection::vec(stage_strategy(), 1..5),
        any::<u64>(),
        prop::option::of(any::<usize>()),
        prop_oneof![Just(FaultKind::Err), Just(FaultKind::Panic)],
        any::<bool>(),
    )
        .prop_map(|(len, mut stages, at, in_stage, kind, carry_on)| {
            legalize(&mut stages);
            Case {
                len,
                stages,
                at: at % len,
                in_stage,
                kind,
                carry_on,
            }
        })
}

/// A stage that restores by replaying its source needs a source that yields
/// the same items again: no out-of-order parallel map below it (see
/// `support::spec`). Such maps are switched to in-order.
fn legalize(stages: &mut [Stage]) {
    for i in 0..stages.len() {
        let replays_above = stages[i + 1..].iter().any(|s| match s {
            Stage::Prefetch(_) => true,
            Stage::ParMap(p) => p.workers > 0 && !(p.in_order && p.snapshot_frequency == 1),
            _ => false,
        });
        if let Stage::ParMap(p) = &mut stages[i]
            && replays_above
        {
            p.in_order = true;
        }
    }
}

proptest! {
    #![proptest_config(config(1024, 0x5eed_0003))]

    #[test]
    fn faults_surface_at_their_position_and_a_restore_delivers_the_rest(case in case_strategy()) {
        quiet_injected_panics();
        let c = case.clone();
        let outcome = with_watchdog(Duration::from_secs(60), move || run(&c)).and_then(|r| r);
        if let Err(message) = outcome {
            return Err(TestCaseError::fail(format!(
                "{message}\n  (expected node {}, catcher {:?}, drops the item: {})",
                case.expected_node(),
                case.catcher(),
                case.drops_item()
            )));
        }
    }
}

/// A source that fails inside a multi-source sampler: the error passes
/// through at its position, the sampler takes the draw back (weighted) or
/// keeps its cursor (round robin), so calling `next` again asks the same
/// source for the same item: without the error entries, the output is the
/// fault-free output.
#[test]
fn a_failing_source_inside_a_sampler_is_asked_again() {
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
            .with_seed(11)
            .boxed()
    };
    let round_robin = |fault: Option<&Fault>| {
        MultiNodeRoundRobinSampler::new(sources(fault))
            .unwrap()
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
            assert_eq!(items, clean, "{name}, fault at {at}");
            let position = clean.iter().position(|&v| v == at).unwrap();
            assert_eq!(errors.len(), 1, "{name}, fault at {at}: {errors:?}");
            assert_eq!(errors[0].0, position, "{name}, fault at {at}: {errors:?}");
            assert!(errors[0].1.contains(INJECTED), "{errors:?}");
        }
    }
}
