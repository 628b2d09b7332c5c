//! Size hints are sound on every composition the generator draws: at every
//! point of an epoch (before the first item, between any two, at the end,
//! and right after a restore from a JSON state taken at a random cut), the
//! number of items the epoch still returns (`Err` items included) is within
//! `Epoch::remaining()`'s bounds, and `Iterator::size_hint` says the same.
//!
//! The hints are compared with the run they were taken in, so pipelines
//! whose order (or, with threads, timing) varies are checked as well.

use std::time::Duration;

use nodes_std::Epoch;
use nodes_std::prelude::*;
use proptest::prelude::*;

use crate::support::runner::{Outcome, run_cases};
use crate::support::spec::{Grammar, Pipeline, Spec, build, spec_strategy};

/// Longer epochs (nested cycles) are not walked.
const MAX_ITEMS: usize = 20_000;

#[derive(Clone, Debug)]
struct Case {
    spec: Spec,
    epochs: usize,
    /// Where in the first epoch the state is taken, as a fraction of it.
    cut: f64,
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} epochs, cut at {:.2})",
            self.spec, self.epochs, self.cut
        )
    }
}

/// What one walk through an epoch saw.
struct Walk {
    /// `remaining()` and `Iterator::size_hint()` before each item, and once
    /// more after the end (two entries per point).
    hints: Vec<(u64, Option<u64>)>,
    /// Items read.
    read: usize,
    /// Whether the walk reached the end (else it stopped at `limit`).
    ended: bool,
    /// The first item was the refusal of a pipeline that cannot start.
    refused: bool,
}

/// Reads `epoch` up to `limit` items (or its end), recording the hints.
fn walk(epoch: &mut Epoch<'_, Pipeline>, limit: usize) -> Result<Walk, String> {
    let mut out = Walk {
        hints: Vec::new(),
        read: 0,
        ended: false,
        refused: false,
    };
    loop {
        // Both forms; they are asked one after the other, and with threads
        // the read-ahead may move in between, so each is checked on its own.
        out.hints.push(epoch.remaining());
        let (lower, upper) = epoch.size_hint();
        out.hints.push((lower as u64, upper.map(|u| u as u64)));
        if out.read == limit {
            return Ok(out);
        }
        match epoch.next() {
            None => {
                out.ended = true;
                return Ok(out);
            }
            Some(Err(Error::InvalidPipeline { .. })) if out.read == 0 => out.refused = true,
            Some(_) => {}
        }
        out.read += 1;
        if out.read > MAX_ITEMS {
            return Ok(out);
        }
    }
}

/// Every hint of a walk that ended holds the items actually left.
fn check_walk(walk: &Walk, what: &str) -> Result<(), String> {
    for (point, &(lower, upper)) in walk.hints.iter().enumerate() {
        let i = point / 2;
        let left = (walk.read - i) as u64;
        if left < lower || upper.is_some_and(|u| left > u) {
            return Err(format!(
                "{what}: after {i} of {} items the hint is ({lower}, {upper:?}), but {left} were left",
                walk.read
            ));
        }
    }
    Ok(())
}

fn check(case: &Case) -> Result<Outcome, String> {
    // The uninterrupted run: every epoch, every point.
    let mut loader = Loader::new(build(&case.spec));
    let mut first_len = 0;
    for e in 0..case.epochs {
        let mut epoch = loader.epoch();
        let w = walk(&mut epoch, usize::MAX)?;
        if !w.ended {
            return Ok(Outcome::Skipped);
        }
        check_walk(&w, &format!("epoch {e}"))?;
        if w.refused {
            return Ok(Outcome::Refused);
        }
        if e == 0 {
            first_len = w.read;
        }
    }
    // Cut the first epoch, restore into a fresh pipeline, walk the rest.
    let cut = ((first_len as f64) * case.cut).round() as usize;
    let mut loader = Loader::new(build(&case.spec));
    let state = {
        let mut epoch = loader.epoch();
        walk(&mut epoch, cut)?;
        epoch.state_dict().map_err(|e| format!("state_dict: {e}"))?
    };
    let json = state.to_json().map_err(|e| format!("to_json: {e}"))?;
    let state = State::from_json(&json).map_err(|e| format!("from_json: {e}"))?;
    let mut resumed = Loader::new(build(&case.spec));
    resumed
        .load_state_dict(&state)
        .map_err(|e| format!("load_state_dict: {e}"))?;
    for e in 0..case.epochs {
        let mut epoch = resumed.epoch();
        let w = walk(&mut epoch, usize::MAX)?;
        if !w.ended {
            return Ok(Outcome::Skipped);
        }
        check_walk(
            &w,
            &format!("resumed at {cut}, epoch {e} after the restore"),
        )?;
    }
    Ok(Outcome::Ran)
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        spec_strategy(Grammar::every_shape(4, 40, 4)),
        1usize..=2,
        prop_oneof![Just(0.0), Just(1.0), 0.0..1.0f64],
    )
        .prop_map(|(spec, epochs, cut)| Case { spec, epochs, cut })
}

#[test]
fn random_pipelines_report_sound_size_hints_before_and_after_restores() {
    run_cases(
        "size hints",
        500,
        0x5eed_0051,
        Duration::from_secs(60),
        case_strategy(),
        check,
    );
}

/// The check can fail: a hint that claims one item too few is caught.
#[test]
fn an_unsound_hint_is_reported() {
    let walk = Walk {
        hints: vec![
            (0, Some(1)),
            (0, Some(2)),
            (0, Some(1)),
            (0, Some(1)),
            (0, Some(0)),
            (0, Some(0)),
        ],
        read: 2,
        ended: true,
        refused: false,
    };
    let err = check_walk(&walk, "made up").expect_err("2 items left, upper bound 1");
    assert!(err.contains("after 0 of 2 items"), "{err}");
}

/// `#[node(size_hint)]` needs nothing beyond the prelude: the `SizeHint`
/// it asks for is in it.
mod with_the_prelude_only {
    use nodes_std::prelude::*;

    /// Its source's items, of which it promises at most ten.
    #[derive(Node)]
    #[node(size_hint)]
    struct AtMostTen<S> {
        #[node(child)]
        source: S,
    }

    impl<S: Node> Node for AtMostTen<S> {
        type Item = S::Item;
        fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
            self.source.next(cx)
        }
    }

    impl<S: Node> SizeHint for AtMostTen<S> {
        fn size_hint(&self) -> Hint {
            Hint::exact(10).at_most()
        }
    }

    #[test]
    fn a_node_with_its_own_size_hint_needs_only_the_prelude() {
        let node = AtMostTen {
            source: IterableWrapper::new(0..7u32),
        };
        assert_eq!(node.start().unwrap().size_hint(), (0, Some(10)));
    }
}
