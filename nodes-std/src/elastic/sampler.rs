//! [`ElasticSampler`]: one rank's share of a global order of dataset
//! indices, as a set of global positions that a reshard can redistribute.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::rank::Rank;
use crate::sources::sampler_wrapper::{Described, Sampler};
use crate::transforms::debug_fields;
use crate::{Cx, Error, Hint, Init, Node, NodeId, NodeName, Result, State, Validate};

/// Which global positions one rank reads in the current epoch.
///
/// The rank reads `owed` in order, then the tail: `tail`, `tail +
/// world_size`, `tail + 2 * world_size`, ... below the order's length. A
/// fresh epoch has `owed = []` and `tail = rank` (positions `rank`, `rank +
/// world_size`, ...: torch's `DistributedSampler` split); a reshard writes
/// the holes it deals to this rank into `owed`, and its tail. `id` names the
/// reshard that wrote the plan (0: a fresh epoch), so that the states of one
/// job are recognised as such.
///
/// `next_epoch`, written by a reshard under a mix that restarts its
/// sources, is the epoch the source's next restart moves to: past every
/// epoch an old rank's restarts read, and the same on every new rank.
///
/// `then`, written by a reshard only into the source of an item an old
/// rank's `flat_map` was part way through (see `elastic::pending`), lists
/// the positions each of the next runs reads, one list per restart: such
/// an item may span restarts of a source under a `CYCLE_*` mix, and its
/// old rank read those runs as its own share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Plan {
    pub(crate) id: u64,
    pub(crate) owed: Vec<u64>,
    pub(crate) tail: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) next_epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) then: Vec<Vec<u64>>,
}

impl Plan {
    /// The plan of a fresh epoch for `rank`.
    pub(crate) fn fresh(rank: u64) -> Plan {
        Plan {
            id: 0,
            owed: Vec::new(),
            tail: rank,
            next_epoch: None,
            then: Vec::new(),
        }
    }

    /// The plan of a run that reads exactly `owed`, of an order of `len`.
    pub(crate) fn only(owed: Vec<u64>, len: u64) -> Plan {
        Plan {
            id: 0,
            owed,
            tail: len,
            next_epoch: None,
            then: Vec::new(),
        }
    }

    /// The plan a restart moves to: the first run of `then`, if any.
    pub(crate) fn restarted(&self, len: u64) -> Option<Plan> {
        let (first, rest) = self.then.split_first()?;
        let then = rest.to_vec();
        Some(Plan {
            then,
            ..Plan::only(first.clone(), len)
        })
    }

    /// A listed position (of `owed` or `then`) past the end of an order of
    /// `len`, if there is one.
    pub(crate) fn outside(&self, len: u64) -> Option<u64> {
        let listed = self.owed.iter().chain(self.then.iter().flatten());
        listed.copied().find(|&p| p >= len)
    }

    /// How many positions the plan reads from an order of `len` positions.
    pub(crate) fn len(&self, len: u64, world_size: u64) -> u64 {
        let tail = len.saturating_sub(self.tail).div_ceil(world_size);
        self.owed.len() as u64 + tail
    }

    /// The epoch a `reset(None)` moves to from `epoch`.
    pub(crate) fn next_epoch(&self, epoch: u64, started: bool) -> u64 {
        let after = crate::seed::epoch_after(epoch, started);
        self.next_epoch.unwrap_or(after)
    }

    /// Refuses a `next_epoch` that is not after `epoch` (`at`: the plan's
    /// path in the state).
    pub(crate) fn check_next_epoch(&self, epoch: u64, at: impl FnOnce() -> String) -> Result<()> {
        match self.next_epoch {
            Some(next) if next <= epoch => {
                let why = format!("the next epoch {next} is not after epoch {epoch}");
                Err(Error::bad_state(at(), why))
            }
            _ => Ok(()),
        }
    }

    /// The global position the plan reads at step `i` (no bound check).
    #[inline]
    pub(crate) fn position(&self, i: u64, world_size: u64) -> u64 {
        let owed = self.owed.len() as u64;
        if i < owed {
            self.owed[i as usize]
        } else {
            self.tail + (i - owed) * world_size
        }
    }
}

/// One rank's share of a global order of dataset indices, whose position is
/// a set of global positions: the sampler that lets a job saved on N ranks
/// resume on M ranks (see [`elastic`](crate::elastic)).
///
/// Every rank wraps the same global order (a [`RandomSampler`](crate::RandomSampler)
/// with the job's seed, or a [`SequentialSampler`](crate::SequentialSampler)).
/// In a fresh epoch rank `r` of `N` reads the positions `r`, `r + N`, `r +
/// 2N`, ... of that order, as [`ShardedSampler`](crate::ShardedSampler) does,
/// but without padding or dropping: every index of the epoch is read exactly
/// once across the ranks, and ranks differ by at most one item. After
/// [`elastic::reshard`](crate::elastic::reshard), the epoch's remaining
/// positions are dealt among the new ranks; the next epochs are ordinary
/// epochs of the new world size. Use it as the sampler node of a
/// [`MapStyleWrapper`](crate::MapStyleWrapper).
///
/// # State
/// `epoch`, `num_yielded`, `started` (as [`SamplerWrapper`](crate::SamplerWrapper)),
/// `rank`, `world_size`, `len` (of the global order), and `plan`: `{id,
/// owed, tail}`, the positions this rank reads this epoch (`owed`, then
/// `tail`, `tail + world_size`, ...; where a reshard wrote them,
/// `next_epoch`, the epoch of its next restart, and `then`, the positions
/// of the runs after this one). Restore is O(1) plus the size of
/// `owed`.
///
/// The rank and world size are not part of the pipeline's description (so a
/// resharded state fits the new rank's pipeline); they are checked against
/// the state instead.
///
/// # Errors
/// [`new`](Self::new): [`Error::InvalidArgument`] for `world_size` 0 or
/// `rank >= world_size`. Restoring a state of another rank or world size, of
/// another length, or with a plan that does not fit the order is a bad state.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::ElasticSampler;
///
/// let rank = |r| -> Result<Vec<usize>> {
///     ElasticSampler::new(SequentialSampler::new(7), r, 3)?.start()?.collect()
/// };
/// assert_eq!(rank(0)?, [0, 3, 6]);
/// assert_eq!(rank(1)?, [1, 4]);
/// assert_eq!(rank(2)?, [2, 5]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(init, validate, size_hint, resume = crate::Resume::Redistributable)]
#[must_use = "nodes do nothing until started"]
pub struct ElasticSampler<S> {
    /// Shown in `describe()` as `sampler=<its description>`.
    #[node(param)]
    sampler: Described<S>,
    #[node(config)]
    ranks: Rank,
    // Declared before `started` and `plan`: its default reads their values
    // from before the reset.
    #[node(state, default = self.plan.next_epoch(self.epoch, self.started))]
    epoch: u64,
    #[node(state)]
    num_yielded: u64,
    #[node(state)]
    started: bool,
    #[node(state, default = self.ranks.rank)]
    rank: u64,
    #[node(state, default = self.ranks.world_size)]
    world_size: u64,
    // Set by `new`; a restore checks it against the order.
    #[node(state, default = self.order_len())]
    len: u64,
    #[node(state, default = self.restarted_plan())]
    plan: Plan,
}

impl<S: fmt::Debug> fmt::Debug for ElasticSampler<S> {
    debug_fields!("ElasticSampler", finish_non_exhaustive; sampler = (sampler.0),
        rank = (ranks.rank), world_size = (ranks.world_size), epoch, num_yielded);
}

/// The node's name in errors.
const NAME: &str = "ElasticSampler";

impl<S: Sampler> ElasticSampler<S> {
    /// Rank `rank` of `world_size` over `sampler`'s order, from epoch 0.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `world_size` is 0 or `rank >= world_size`.
    pub fn new(sampler: S, rank: u64, world_size: u64) -> Result<Self> {
        let ranks = Rank::new(NAME, rank, world_size)?;
        Ok(ElasticSampler {
            len: sampler.len() as u64,
            sampler: Described(sampler),
            ranks,
            epoch: 0,
            num_yielded: 0,
            started: false,
            rank,
            world_size,
            plan: Plan::fresh(rank),
        })
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// This rank.
    pub fn rank(&self) -> u64 {
        self.ranks.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> u64 {
        self.ranks.world_size
    }

    /// The global order.
    pub fn sampler(&self) -> &S {
        &self.sampler.0
    }
}

impl<S> ElasticSampler<S> {
    /// The order's length, set by `new` (the derived reset keeps it).
    fn order_len(&self) -> u64 {
        self.len
    }

    /// The plan of the run a `reset(None)` starts: the next one a pending
    /// item's plan lists (see [`Plan`]), else a fresh one.
    fn restarted_plan(&self) -> Plan {
        let next = self.plan.restarted(self.len);
        next.unwrap_or_else(|| Plan::fresh(self.ranks.rank))
    }
}

impl<S: Sampler> Node for ElasticSampler<S> {
    type Item = usize;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<usize>> {
        cx.observe(NodeId::of(self), Self::NAME, |_cx| {
            self.started = true;
            // `validate` checked the plan against the order's length.
            if self.num_yielded >= self.plan.len(self.len, self.world_size) {
                return Ok(None);
            }
            let pos = self.plan.position(self.num_yielded, self.world_size);
            self.num_yielded += 1;
            Ok(Some(self.sampler.0.index(pos as usize)))
        })
    }
}

/// Rejects a state of another rank, world size or order, or a plan that
/// does not fit, before anything is applied.
impl<S: Sampler> Validate for ElasticSampler<S> {
    fn validate(&self, state: &State) -> Result<()> {
        let rank: u64 = state.get("rank")?;
        let world_size: u64 = state.get("world_size")?;
        if (rank, world_size) != (self.ranks.rank, self.ranks.world_size) {
            let why = format!(
                "the state is rank {rank} of {world_size}, this {NAME} is rank {} of {}: to resume on another number of ranks, load the old ranks' states with `nodes_std::elastic::load_resharded` (or combine them with `elastic::reshard`)",
                self.ranks.rank, self.ranks.world_size
            );
            return Err(Error::bad_state(state.path_of("rank"), why));
        }
        let len: u64 = state.get("len")?;
        let ours = self.sampler.0.len() as u64;
        if len != ours {
            let why =
                format!("the state is of an order of {len} positions, this {NAME}'s has {ours}");
            return Err(Error::bad_state(state.path_of("len"), why));
        }
        let plan: Plan = state.get("plan")?;
        plan.check_next_epoch(state.get("epoch")?, || state.path_of("plan"))?;
        if let Some(p) = plan.outside(len) {
            let why = format!("planned position {p} is past the order's end ({len})");
            return Err(Error::bad_state(state.path_of("plan"), why));
        }
        let num_yielded: u64 = state.get("num_yielded")?;
        let total = plan.len(len, world_size);
        if num_yielded > total {
            let why =
                format!("{NAME} cannot resume after {num_yielded} indices: its plan has {total}");
            return Err(Error::bad_state(state.path_of("num_yielded"), why));
        }
        Ok(())
    }
}

/// Exact: the positions of this rank's plan not yet returned. It never fails.
impl<S: Sampler> crate::SizeHint for ElasticSampler<S> {
    fn size_hint(&self) -> Hint {
        let total = self.plan.len(self.len, self.world_size);
        Hint::exact(total.saturating_sub(self.num_yielded))
    }
}

/// Sets the sampler's epoch.
impl<S: Sampler> Init for ElasticSampler<S> {
    fn init(&mut self, _restored: bool) -> Result<()> {
        self.sampler.0.set_epoch(self.epoch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_positions_and_lengths() {
        let fresh = Plan::fresh(1);
        assert_eq!(fresh.len(7, 3), 2);
        assert_eq!(
            (0..2).map(|i| fresh.position(i, 3)).collect::<Vec<_>>(),
            [1, 4]
        );
        let plan = Plan {
            id: 9,
            owed: vec![2, 5],
            tail: 8,
            next_epoch: None,
            then: Vec::new(),
        };
        assert_eq!(plan.len(12, 2), 4);
        assert_eq!(
            (0..4).map(|i| plan.position(i, 2)).collect::<Vec<_>>(),
            [2, 5, 8, 10]
        );
        assert_eq!(Plan::fresh(5).len(3, 8), 0);
    }
}
