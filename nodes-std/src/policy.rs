//! [`ErrorPolicy`]: what a fallible node does with a bad record, and the
//! checkpointed budget that applies it.

// Used by the fallible nodes as they adopt the policy.
#![allow(dead_code)]

use serde::{Deserialize, Serialize};

use crate::{Cx, Error, Result, State};

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
/// use nodes_std::ErrorPolicy;
///
/// let policy = ErrorPolicy::SkipAtMost(10);
/// assert_ne!(policy, ErrorPolicy::default());
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

/// An [`ErrorPolicy`] with its per-pass count: one per fallible node.
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

    /// Whether the policy ended the pass.
    pub(crate) fn ended(&self) -> bool {
        self.counts.ended
    }

    /// Decides about `error`, counting a skip in the budget and in the stats.
    pub(crate) fn judge(&mut self, error: Error, cx: &mut Cx) -> Verdict {
        let skip = match self.policy {
            ErrorPolicy::Deliver => return Verdict::Deliver(error),
            ErrorPolicy::Fail => false,
            ErrorPolicy::Skip => true,
            ErrorPolicy::SkipAtMost(n) => self.counts.skipped < n,
        };
        if skip {
            self.counts.skipped = self.counts.skipped.saturating_add(1);
            cx.record_skipped(1);
            Verdict::Skip
        } else {
            self.counts.ended = true;
            Verdict::DeliverAndEnd(error)
        }
    }

    /// A new pass: nothing counted.
    pub(crate) fn clear(&mut self) {
        self.counts = Counts::default();
    }

    /// Saves the counts under [`ERRORS`].
    pub(crate) fn save(&self, state: &mut State) -> Result<()> {
        state.insert(ERRORS, self.counts)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err() -> Error {
        Error::user("Test", Some(0), "bad")
    }

    fn verdicts(policy: ErrorPolicy, n: usize) -> Vec<&'static str> {
        let mut budget = ErrorBudget::new(policy);
        let mut cx = nodes_core::__private::worker_cx();
        (0..n)
            .map(|_| match budget.judge(err(), &mut cx) {
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
    fn counts_survive_a_save_and_load() {
        let mut budget = ErrorBudget::new(ErrorPolicy::SkipAtMost(1));
        let mut cx = nodes_core::__private::worker_cx();
        assert!(matches!(budget.judge(err(), &mut cx), Verdict::Skip));
        let mut state = State::new();
        budget.save(&mut state).unwrap();
        let state = State::from_json(&state.to_json().unwrap()).unwrap();
        let mut fresh = ErrorBudget::new(ErrorPolicy::SkipAtMost(1));
        fresh.restore(fresh.load(&state).unwrap());
        assert!(matches!(
            fresh.judge(err(), &mut cx),
            Verdict::DeliverAndEnd(_)
        ));
        assert!(fresh.ended());
    }
}
