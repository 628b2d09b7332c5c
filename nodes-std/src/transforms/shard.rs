//! [`Sharder`]: keep every `world_size`-th item, for one rank of a
//! distributed job.

use crate::policy::is_item;
use crate::rank::Rank;
use crate::{Cx, Error, Hint, Node, NodeId, NodeName, Result, State};

/// Keeps the items whose position `i` in the source satisfies
/// `i % world_size == rank`: the shards of all ranks are disjoint and together
/// cover the source.
///
/// This struct is created by [`NodeExt::shard`](crate::NodeExt::shard) and
/// [`NodeExt::shard_from_env`](crate::NodeExt::shard_from_env). See their
/// documentation for more.
///
/// # Errors
/// A bad record from the source ([`Error::User`](crate::Error::User), [`Error::Panicked`](crate::Error::Panicked)) takes
/// a position like any item: the rank that owns the position returns it, the
/// others drop it (it belongs to another shard), and the positions after it
/// are sharded as if it had been an item. Any other error is returned at
/// once, on every rank, without taking a position.
///
/// # State
/// `source` (the source's state), `seen` (items, bad records included,
/// read from the source) and `planned_runs` (0, or in a state
/// [`elastic`](crate::elastic) wrote, the runs, this one and the restarts
/// after it, in which the source yields only this rank's share and every
/// item is kept). Restoring is the source's restore.
#[derive(Debug, crate::Node)]
#[node(validate, size_hint, resume = crate::Resume::Shards)]
#[must_use = "nodes do nothing until started"]
pub struct Sharder<S> {
    #[node(child)]
    source: S,
    #[node(param)]
    rank: u64,
    #[node(param)]
    world_size: u64,
    #[node(state)]
    seen: u64,
    /// Set by a reshard: in this many runs (this one and the next ones)
    /// the source yields only this rank's share already (a
    /// [`Files`](crate::Files) with a plan), and every item is kept.
    #[node(state, default = self.planned_runs.saturating_sub(1))]
    planned_runs: u64,
}

impl<S> Sharder<S> {
    pub(crate) fn new(source: S, rank: u64, world_size: u64) -> Result<Self> {
        let Rank { rank, world_size } = Rank::new("Sharder", rank, world_size)?;
        Ok(Sharder {
            source,
            rank,
            world_size,
            seen: 0,
            planned_runs: 0,
        })
    }
}

impl<S: Node> Node for Sharder<S> {
    type Item = S::Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            loop {
                let item = self.source.next(cx);
                if !is_item(&item) {
                    return item;
                }
                let position = self.seen;
                // Wrapping: a restored state may hold any count.
                self.seen = self.seen.wrapping_add(1);
                if self.planned_runs > 0 || position % self.world_size == self.rank {
                    return item;
                }
            }
        })
    }
}

/// `planned_runs` and a reshard's plan in the source come together (see
/// [`elastic`](crate::elastic)): a plan of `n` runs (its own and `then`'s)
/// with `n` planned runs; either one alone would drop or repeat files.
impl<S> crate::Validate for Sharder<S> {
    fn validate(&self, state: &State) -> Result<()> {
        let planned: u64 = state.get(PLANNED)?;
        let source = state.child("source")?;
        let plan = source
            .get_opt::<serde_json::Value>("plan")?
            .filter(|p| !p.is_null());
        let world = plan
            .as_ref()
            .and_then(|plan| plan.get("world_size")?.as_u64());
        let then = plan
            .as_ref()
            .and_then(|plan| plan.get("then")?.as_array().map(Vec::len));
        let runs = plan.as_ref().map_or(0, |_| 1 + then.unwrap_or(0) as u64);
        let why = match world {
            None if planned != 0 => {
                format!("`{PLANNED}` is {planned}, but the source holds no plan of a reshard")
            }
            _ if planned != runs => {
                format!("`{PLANNED}` is {planned}, but the source's plan is of {runs} runs")
            }
            Some(w) if w != self.world_size => {
                format!(
                    "the source's plan is for {w} ranks, the shard is one of {}",
                    self.world_size
                )
            }
            _ => return Ok(()),
        };
        Err(Error::bad_state(
            state.path_of(PLANNED),
            format!("Sharder: {why}"),
        ))
    }
}

/// The key of [`Sharder`]'s planned runs in its state.
pub(crate) const PLANNED: &str = "planned_runs";

/// Of the source's remaining items (an error is one, at its position), the
/// positions that fall to this rank: exact when the source's count is.
impl<S: Node> crate::SizeHint for Sharder<S> {
    fn size_hint(&self) -> Hint {
        let source = self.source.size_hint();
        Hint {
            lower: self.mine(source.lower),
            upper: source.upper.map(|u| self.mine(u)),
            ..source
        }
    }
}

impl<S> Sharder<S> {
    /// How many of the next `n` positions (from `seen` on) are this rank's.
    fn mine(&self, n: u64) -> u64 {
        if self.planned_runs > 0 {
            return n;
        }
        // Positions below `x` that are this rank's.
        let below = |x: u128| {
            let (rank, world) = (u128::from(self.rank), u128::from(self.world_size));
            (x + world - rank - 1) / world
        };
        let start = u128::from(self.seen);
        let count = below(start + u128::from(n)) - below(start);
        // At most `n`.
        count as u64
    }
}
