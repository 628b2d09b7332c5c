//! [`ErrorPolicy`]: what a fallible node does with a bad record, and the
//! checkpointed budget that applies it.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::{Cx, Error, Hint, Result, State};

/// What a fallible node ([`TryMapper`](crate::TryMapper),
/// [`ParallelMapper`](crate::ParallelMapper), [`Prefetcher`](crate::Prefetcher))
/// does with an `Err` from the user's function or from its source.
///
/// Whatever the policy, an error is one item of the pass: it takes the place
/// of the item that failed, the items after it are the same for every worker
/// count, and a state taken after it resumes after it. Panics count as
/// errors (they arrive as [`Error::Panicked`]).
///
/// ```
/// use nodes_std::prelude::*;
///
/// fn parse(line: &str) -> std::result::Result<u32, std::num::ParseIntError> {
///     line.trim().parse()
/// }
///
/// let lines = ["1", "2", "oops", "4"];
/// let mut loader = Loader::new(IterableWrapper::new(lines).try_map(parse).on_error(ErrorPolicy::Skip)).record_stats();
/// let numbers: Vec<u32> = loader.epoch().collect::<Result<_>>()?;
/// assert_eq!(numbers, [1, 2, 4]);
/// let stats = loader.stats().expect("stats are on");
/// assert_eq!(stats.get("TryMapper").map(|n| n.skipped), Some(1));
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ErrorPolicy {
    /// Deliver the `Err` as one item and go on with the pass (the default).
    #[default]
    Deliver,
    /// Deliver the `Err`, then end the pass: `next` returns `Ok(None)` until
    /// the next reset.
    Fail,
    /// Drop the bad record silently (counted in
    /// [`NodeStats::skipped`](crate::NodeStats::skipped)).
    Skip,
    /// Drop up to this many bad records per pass; the next one is delivered
    /// as an `Err` and ends the pass. The count is in the state, so a resume
    /// neither forgets nor double-counts it.
    SkipAtMost(u64),
}

/// As a node parameter: the variant's name, with its bound
/// (`Deliver`, `Fail`, `Skip`, `SkipAtMost(3)`).
impl crate::Param for ErrorPolicy {
    fn render(&self, out: &mut String) {
        // The derived `Debug` is exactly that.
        out.push_str(&format!("{self:?}"));
    }
}

/// What the budget decided about one `Err`.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Hand the error to the consumer; the pass goes on.
    Deliver(Error),
    /// Hand the error to the consumer; the pass is over.
    DeliverAndEnd(Error),
    /// Drop it and pull the next item.
    Skip,
}

/// An [`ErrorPolicy`] with its per-pass [`Counts`], for a fallible node that
/// keeps them together (the threaded core, the line readers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ErrorBudget {
    policy: ErrorPolicy,
    counts: Counts,
}

/// The part of the budget that is saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Counts {
    /// Bad records dropped this pass.
    skipped: u64,
    /// The policy ended the pass.
    ended: bool,
}

impl Counts {
    /// Saves the counts under [`ERRORS`] (what every budget's save, and
    /// `elastic::reshard`'s share of a job's skips, write), as serde writes
    /// them.
    pub(crate) fn save(self, state: &mut State) -> Result<()> {
        state.insert(ERRORS, self)
    }

    /// The counts of a pass that skipped `skipped` bad records and goes on
    /// (how `elastic::reshard` writes a new rank's share of the job's
    /// skips).
    pub(crate) fn skipped_so_far(skipped: u64) -> Counts {
        Counts {
            skipped,
            ended: false,
        }
    }

    /// Bad records dropped this pass.
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Whether the pass was ended (by the policy, or by a source that broke).
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// The size hint of a node that applies `policy` to a stream whose
    /// hint is `hint` (one result per input, bad records judged here):
    /// `Deliver` keeps the count, `Fail` may end the pass after the first
    /// error, the skipping policies may drop any number of records (and
    /// `Skip` delivers none). `stage_fails`: whether the node itself may
    /// turn a record into an error.
    pub(crate) fn size_hint(&self, policy: ErrorPolicy, hint: Hint, stage_fails: bool) -> Hint {
        if self.ended {
            return Hint::exact(0);
        }
        if !stage_fails && !hint.may_fail {
            return hint;
        }
        let hint = Hint {
            may_fail: policy != ErrorPolicy::Skip,
            ..hint
        };
        match policy {
            ErrorPolicy::Deliver => hint,
            ErrorPolicy::Fail => Hint {
                lower: hint.lower.min(1),
                ..hint
            },
            ErrorPolicy::Skip | ErrorPolicy::SkipAtMost(_) => hint.at_most(),
        }
    }

    /// Decides about `error` under `policy`, counting a skip here and in
    /// the stats.
    pub(crate) fn judge(&mut self, policy: ErrorPolicy, error: Error, cx: &mut Cx) -> Verdict {
        let verdict = self.decide(policy, error);
        if let Verdict::Skip = verdict {
            cx.record_skipped(1);
        }
        verdict
    }

    /// [`judge`](Self::judge) without the statistics.
    fn decide(&mut self, policy: ErrorPolicy, error: Error) -> Verdict {
        let skip = match policy {
            ErrorPolicy::Deliver => return Verdict::Deliver(error),
            ErrorPolicy::Fail => false,
            ErrorPolicy::Skip => true,
            ErrorPolicy::SkipAtMost(n) => self.skipped < n,
        };
        if skip {
            self.skipped = self.skipped.saturating_add(1);
            nodes_core::__private::trace::record_skipped(&error, self.skipped);
            Verdict::Skip
        } else {
            self.ended = true;
            Verdict::DeliverAndEnd(error)
        }
    }
}

/// Saved as a deferred state entry (`#[node(state, deferred)]`): taking a
/// state copies two numbers, and the JSON object is built only when the
/// state is serialised or read.
impl nodes_core::Snapshot for Counts {
    type Frozen = Counts;

    fn snapshot(&self) -> Counts {
        *self
    }
}

/// Key of the saved [`Counts`] in a node's state.
pub(crate) const ERRORS: &str = "errors";

impl ErrorBudget {
    /// A budget for `policy`, with nothing counted.
    pub(crate) fn new(policy: ErrorPolicy) -> Self {
        ErrorBudget {
            policy,
            counts: Counts::default(),
        }
    }

    /// The policy.
    pub(crate) fn policy(&self) -> ErrorPolicy {
        self.policy
    }

    /// The size hint under this budget (see [`Counts::size_hint`]).
    pub(crate) fn size_hint(&self, hint: Hint, stage_fails: bool) -> Hint {
        self.counts.size_hint(self.policy, hint, stage_fails)
    }

    /// Records that the pass ended early (a source broke), so that the state
    /// says so and a restore does not start reading again.
    pub(crate) fn end_pass(&mut self) {
        self.counts.ended = true;
    }

    /// Whether the pass was ended (by the policy, or by a source that broke).
    pub(crate) fn ended(&self) -> bool {
        self.counts.ended
    }

    /// Decides about `error`, counting a skip in the budget and in the stats.
    pub(crate) fn judge(&mut self, error: Error, cx: &mut Cx) -> Verdict {
        self.counts.judge(self.policy, error, cx)
    }

    /// A new pass: nothing counted.
    pub(crate) fn clear(&mut self) {
        self.counts = Counts::default();
    }

    /// Saves the counts under [`ERRORS`] (see [`Counts::save`]).
    pub(crate) fn save(&self, state: &mut State) -> Result<()> {
        self.counts.save(state)
    }

    /// Reads the counts saved under [`ERRORS`] (checked, not applied).
    pub(crate) fn load(&self, state: &State) -> Result<Counts> {
        state.get(ERRORS)
    }

    /// Applies counts returned by [`load`](Self::load).
    pub(crate) fn restore(&mut self, counts: Counts) {
        self.counts = counts;
    }
}

/// Whether `error` is a bad record: an `Err` from a user's function or
/// source ([`Error::User`]) or a caught panic ([`Error::Panicked`]).
///
/// A bad record is one item of the pass: the source has moved past it, a
/// node passes it on in the item's place (or holds it until the item being
/// built is complete), and an [`ErrorPolicy`] may skip it. Any other error (a
/// node used before `reset` or after `shutdown`, a bad state, an invalid
/// pipeline) says the pipeline cannot go on: nodes pass it on at once, never
/// hold, count or skip it (a source that keeps returning it would otherwise
/// be pulled forever).
pub(crate) fn is_bad_record(error: &Error) -> bool {
    matches!(error, Error::User { .. } | Error::Panicked { .. })
}

/// Whether `result` of a `next` is an item of the pass: a value, or a bad
/// record (see [`is_bad_record`]), which takes its place.
pub(crate) fn is_item<T>(result: &Result<Option<T>>) -> bool {
    matches!(result, Ok(Some(_))) || result.as_ref().is_err_and(is_bad_record)
}

/// The most bad records a node holds back at once (see [`HeldErrors`]).
pub(crate) const MAX_HELD: usize = 1024;

/// Bad records a node took from its source while it was building an item (a
/// batch, a pair), held back to be delivered right after that item, so that
/// an error never splits an item and no good item is lost.
///
/// They are part of the node's state (node, index, kind and message of each),
/// so a state taken between the item and its errors delivers them again. A
/// restored error has the original's variant, node, index and message; the
/// user's error value itself becomes its message (as
/// [`Error::duplicate`] does).
#[derive(Debug, Default)]
pub(crate) struct HeldErrors(VecDeque<Error>);

impl HeldErrors {
    /// Holds `error` (a bad record) until [`pop`](Self::pop).
    pub(crate) fn push(&mut self, error: Error) {
        debug_assert!(is_bad_record(&error), "only bad records are held");
        self.0.push_back(error);
    }

    /// The oldest held error.
    pub(crate) fn pop(&mut self) -> Option<Error> {
        self.0.pop_front()
    }

    /// What the held errors add to a node's hint: each is one item still
    /// to deliver, and an error.
    pub(crate) fn hint(&self) -> Hint {
        let held = self.0.len() as u64;
        Hint {
            may_fail: held > 0,
            ..Hint::exact(held)
        }
    }

    /// Whether [`MAX_HELD`] errors are held: the node must stop building its
    /// item and deliver.
    pub(crate) fn is_full(&self) -> bool {
        self.0.len() >= MAX_HELD
    }
}

/// One held error as a state stores it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedError {
    kind: SavedKind,
    node: String,
    index: Option<u64>,
    message: String,
}

/// The variant of a [`SavedError`].
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum SavedKind {
    /// [`Error::User`]; the message is the user's error.
    User,
    /// [`Error::Panicked`]; the message is the panic's.
    Panicked,
}

impl SavedError {
    fn of(error: &Error) -> SavedError {
        let (kind, node, index, message) = match error {
            Error::User {
                node,
                index,
                source,
            } => (SavedKind::User, &**node, *index, source.to_string()),
            Error::Panicked {
                node,
                index,
                message,
            } => (SavedKind::Panicked, &**node, *index, message.clone()),
            // Never held (see `HeldErrors::push`); kept readable all the same.
            other => (SavedKind::User, "unknown", None, other.to_string()),
        };
        SavedError {
            kind,
            node: node.to_owned(),
            index,
            message,
        }
    }

    fn into_error(self) -> Error {
        let node = self.node.into();
        match self.kind {
            SavedKind::User => Error::User {
                node,
                index: self.index,
                source: self.message.into(),
            },
            SavedKind::Panicked => Error::Panicked {
                node,
                index: self.index,
                message: self.message,
            },
        }
    }
}

impl Serialize for HeldErrors {
    fn serialize<Z: serde::Serializer>(
        &self,
        serializer: Z,
    ) -> std::result::Result<Z::Ok, Z::Error> {
        serializer.collect_seq(self.0.iter().map(SavedError::of))
    }
}

impl<'de> Deserialize<'de> for HeldErrors {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let saved = Vec::<SavedError>::deserialize(deserializer)?;
        if saved.len() > MAX_HELD {
            let expected = format!("at most {MAX_HELD} held errors");
            let error = serde::de::Error::invalid_length(saved.len(), &expected.as_str());
            return Err(error);
        }
        let errors = saved.into_iter().map(SavedError::into_error).collect();
        Ok(HeldErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The saved counts read back, and write the JSON serde writes for
    /// `Counts` (so states taken before and after this form agree byte for
    /// byte), whether shared (a clean pass) or built for the save.
    #[test]
    fn saved_counts_are_serdes_json_and_read_back() -> Result<()> {
        let mut budget = ErrorBudget::new(ErrorPolicy::SkipAtMost(5));
        for round in 0..3 {
            let mut state = State::new();
            budget.save(&mut state)?;
            let expected = serde_json::to_string(&budget.counts)
                .map_err(|e| Error::internal("Test", e.to_string()))?;
            assert_eq!(
                state.to_json()?,
                format!(r#"{{"errors":{expected}}}"#),
                "round {round}"
            );
            assert_eq!(budget.load(&state)?, budget.counts);
            assert_eq!(
                budget.load(&State::from_json(&state.to_json()?)?)?,
                budget.counts
            );
            // Then a skip, then the end of the pass.
            if round == 0 {
                assert!(matches!(
                    budget.counts.decide(budget.policy, err()),
                    Verdict::Skip
                ));
            } else {
                budget.end_pass();
            }
        }
        Ok(())
    }

    fn err() -> Error {
        Error::user("Test", Some(0), "bad")
    }

    fn verdicts(policy: ErrorPolicy, n: usize) -> Vec<&'static str> {
        let mut budget = ErrorBudget::new(policy);
        (0..n)
            .map(|_| match budget.counts.decide(budget.policy, err()) {
                Verdict::Deliver(_) => "deliver",
                Verdict::DeliverAndEnd(_) => "end",
                Verdict::Skip => "skip",
            })
            .collect()
    }

    #[test]
    fn each_policy_decides_as_documented() {
        assert_eq!(verdicts(ErrorPolicy::Deliver, 2), ["deliver", "deliver"]);
        assert_eq!(verdicts(ErrorPolicy::Fail, 1), ["end"]);
        assert_eq!(verdicts(ErrorPolicy::Skip, 3), ["skip", "skip", "skip"]);
        assert_eq!(
            verdicts(ErrorPolicy::SkipAtMost(2), 3),
            ["skip", "skip", "end"]
        );
    }

    #[test]
    fn held_errors_survive_a_save_and_load() {
        let mut held = HeldErrors::default();
        held.push(Error::user("Custom node", Some(3), "bad row"));
        held.push(Error::Panicked {
            node: "ParallelMapper".into(),
            index: None,
            message: "boom".to_owned(),
        });
        let before: Vec<String> = held.0.iter().map(ToString::to_string).collect();
        let mut state = State::new();
        state.insert("held", &held).unwrap();
        let state = State::from_json(&state.to_json().unwrap()).unwrap();
        let mut back: HeldErrors = state.get("held").unwrap();
        let after: Vec<String> = back.0.iter().map(ToString::to_string).collect();
        assert_eq!(after, before);
        assert!(matches!(
            back.pop(),
            Some(Error::User {
                node,
                index: Some(3),
                ..
            }) if node == "Custom node"
        ));
        assert!(matches!(
            back.pop(),
            Some(Error::Panicked { index: None, .. })
        ));
        assert!(back.pop().is_none());
    }

    #[test]
    fn restored_errors_keep_any_node_name() {
        let long = "x".repeat(300);
        let mut held = HeldErrors::default();
        held.push(Error::User {
            node: long.clone().into(),
            index: Some(7),
            source: "bad".into(),
        });
        let state = State::new().with("held", &held).unwrap();
        let mut back: HeldErrors = state.get("held").unwrap();
        let restored = back.pop().unwrap();
        assert!(
            matches!(&restored, Error::User { node, index: Some(7), .. } if *node == long),
            "{restored}"
        );
        assert_eq!(
            restored.to_string(),
            format!("user function failed in {long} at item 7: bad")
        );
    }

    #[test]
    fn only_user_errors_and_panics_are_bad_records() {
        assert!(is_bad_record(&err()));
        assert!(is_bad_record(&Error::from_panic("T", None, &"boom")));
        assert!(!is_bad_record(&Error::ShutDown { node: "T" }));
        assert!(!is_bad_record(&Error::NotReset { node: "T" }));
        assert!(!is_bad_record(&Error::bad_state("/x", "bad")));
    }

    #[test]
    fn counts_survive_a_save_and_load() {
        let mut budget = ErrorBudget::new(ErrorPolicy::SkipAtMost(1));
        assert!(matches!(
            budget.counts.decide(budget.policy, err()),
            Verdict::Skip
        ));
        let mut state = State::new();
        budget.save(&mut state).unwrap();
        let state = State::from_json(&state.to_json().unwrap()).unwrap();
        let mut fresh = ErrorBudget::new(ErrorPolicy::SkipAtMost(1));
        fresh.restore(fresh.load(&state).unwrap());
        assert!(matches!(
            fresh.counts.decide(fresh.policy, err()),
            Verdict::DeliverAndEnd(_)
        ));
        assert!(fresh.ended());
    }
}
