//! [`StopCriteria`]: when a multi-source sampler ends its pass.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use nodes_core::{Error, Param, Result};

/// When a multi-source sampler ([`MultiNodeWeightedSampler`],
/// [`MultiNodeRoundRobinSampler`]) ends its pass.
///
/// A source is *exhausted* once it has signalled its end during the current
/// pass. A source that signals its end again right after being restarted is
/// *empty*: the cycling criteria stop drawing from it for the rest of the pass
/// (the Python original ends the whole pass there instead).
///
/// A restart is a `reset(None)` of the source: a seeded source (shuffled
/// `Files`, a sampler) moves to its next epoch's order. Each rank restarts
/// its sources as often as its own draws make it, so the sampler's next
/// pass resets each restarted source from where its *first* run of the
/// pass ended (saved in the state as `dataset_first_pass_ends`): every pass
/// then starts each source at the same epoch on every rank, and a sharded
/// file list is split the same way on all of them. The price is for the
/// sources that restarted: the next pass's first run has the order of
/// this pass's second, so a source restarted `k` times repeats up to `k`
/// of its orders from one pass to the next, each one run later. (Advancing
/// past the orders every rank used would take the largest restart count
/// of all ranks, which no rank knows; a reshard, which reads every rank's
/// state, does advance past them: see [`elastic`](crate::elastic).)
///
/// The string forms are torchdata's constants (`"CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED"`,
/// ...), for configuration files:
///
/// ```
/// use nodes_std::StopCriteria;
///
/// let c: StopCriteria = "FIRST_DATASET_EXHAUSTED".parse()?;
/// assert_eq!(c, StopCriteria::FirstDatasetExhausted);
/// assert_eq!(c.to_string(), "FIRST_DATASET_EXHAUSTED");
/// assert_eq!(StopCriteria::default(), StopCriteria::CycleUntilAllDatasetsExhausted);
/// # Ok::<(), nodes_std::Error>(())
/// ```
///
/// [`MultiNodeWeightedSampler`]: crate::MultiNodeWeightedSampler
/// [`MultiNodeRoundRobinSampler`]: crate::MultiNodeRoundRobinSampler
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StopCriteria {
    /// Restart each source when it ends, and end the pass once every source
    /// has been exhausted at least once. The default.
    #[default]
    CycleUntilAllDatasetsExhausted,
    /// Never restart a source: the pass yields every item of every source
    /// exactly once, then ends.
    AllDatasetsExhausted,
    /// End the pass as soon as any source is exhausted.
    FirstDatasetExhausted,
    /// Restart each source when it ends, forever. The pass ends only if every
    /// source is empty.
    CycleForever,
}

impl StopCriteria {
    /// Every criterion, in declaration order.
    pub const ALL: [StopCriteria; 4] = [
        StopCriteria::CycleUntilAllDatasetsExhausted,
        StopCriteria::AllDatasetsExhausted,
        StopCriteria::FirstDatasetExhausted,
        StopCriteria::CycleForever,
    ];

    /// torchdata's constant for this criterion.
    pub const fn as_str(self) -> &'static str {
        match self {
            StopCriteria::CycleUntilAllDatasetsExhausted => "CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED",
            StopCriteria::AllDatasetsExhausted => "ALL_DATASETS_EXHAUSTED",
            StopCriteria::FirstDatasetExhausted => "FIRST_DATASET_EXHAUSTED",
            StopCriteria::CycleForever => "CYCLE_FOREVER",
        }
    }

    /// Whether a source that ends is restarted (and drawn from again).
    pub(crate) const fn restarts(self) -> bool {
        matches!(
            self,
            StopCriteria::CycleUntilAllDatasetsExhausted | StopCriteria::CycleForever
        )
    }
}

/// As a node parameter: torchdata's constant, as [`as_str`](StopCriteria::as_str) gives it.
impl Param for StopCriteria {
    fn render(&self, out: &mut String) {
        out.push_str(self.as_str());
    }
}

impl fmt::Display for StopCriteria {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StopCriteria {
    type Err = Error;

    /// Parses torchdata's constant; anything else is an
    /// [`Error::InvalidArgument`] listing the accepted values.
    fn from_str(s: &str) -> Result<Self> {
        let known = StopCriteria::ALL.into_iter().find(|c| c.as_str() == s);
        known.ok_or_else(|| {
            let accepted = StopCriteria::ALL.map(StopCriteria::as_str).join(", ");
            let why = format!("unknown stop criterion {s:?}; expected one of: {accepted}");
            Error::invalid_argument("StopCriteria", why)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_forms_round_trip() {
        for c in StopCriteria::ALL {
            assert_eq!(c.to_string().parse::<StopCriteria>().unwrap(), c);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{c}\""));
            assert_eq!(serde_json::from_str::<StopCriteria>(&json).unwrap(), c);
        }
        let err = "NEVER".parse::<StopCriteria>().unwrap_err();
        assert!(err.to_string().contains("CYCLE_FOREVER"), "{err}");
    }
}
