//! The global cursor of one source: from what every old rank consumed, the
//! positions left in the epoch, dealt among the new ranks.

use std::collections::HashSet;

use crate::elastic::sampler::Plan;
use crate::{Error, Result};

/// What one old rank consumed of one source: the steps of its plan (not
/// global positions) `0..prefix`, and `extras` (ascending, all past
/// `prefix`), read but not in a contiguous run (an out-of-order `par_map`
/// delivered them ahead of a gap).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Consumed {
    pub(crate) prefix: u64,
    pub(crate) extras: Vec<u64>,
}

impl Consumed {
    /// Steps `0..prefix` and then `prefix + r` for each `r` of `relative`
    /// (ascending), normalised: a run of extras right after the prefix
    /// joins it.
    pub(crate) fn new(base: u64, relative: &[u64]) -> Consumed {
        let mut prefix = base;
        let mut extras = Vec::new();
        // `relative` is ascending: once a gap appears, later steps stay past it.
        for step in relative.iter().map(|&r| base + r) {
            if step == prefix {
                prefix += 1;
            } else if step > prefix && extras.last() != Some(&step) {
                extras.push(step);
            }
        }
        Consumed { prefix, extras }
    }
}

/// One old rank's view of one source.
#[derive(Clone, Debug)]
pub(crate) struct OldRank {
    pub(crate) rank: u64,
    pub(crate) plan: Plan,
    pub(crate) consumed: Consumed,
}

/// The epoch's remaining positions of one source, dealt among the new ranks:
/// the holes below `high` in order, then every position from `high`, the
/// `j`-th of all of them to new rank `j mod new_world`.
pub(crate) struct Dealing {
    id: u64,
    high: u64,
    holes: Vec<u64>,
}

impl Dealing {
    /// The plan of new rank `m` of `new_world`, built without a cost per rank.
    pub(crate) fn plan(&self, m: u64, new_world: u64) -> Plan {
        // The `j`-th position after the holes goes to rank `(count + j) mod
        // new_world`: the first one of this rank is its tail. (Written to
        // stay below `new_world`, which may be close to 2^64.)
        let count = self.holes.len() as u64 % new_world;
        let first = m
            .checked_sub(count)
            .unwrap_or_else(|| new_world - (count - m));
        // `deal` checked that every rank's tail fits.
        let (id, owed, tail) = (self.id, share(&self.holes, m, new_world), self.high + first);
        Plan {
            id,
            owed,
            tail,
            next_epoch: None,
            then: Vec::new(),
        }
    }
}

/// Every `world`-th element of `all` from the `m`-th: new rank `m`'s share.
pub(crate) fn share<T: Clone>(all: &[T], m: u64, world: u64) -> Vec<T> {
    let [m, world] = [m, world].map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    all.iter().skip(m).step_by(world).cloned().collect()
}

/// The epoch's remaining positions of one source, dealt among `new_world`
/// ranks (see [`Dealing::plan`] for each new rank's plan).
///
/// `old` holds every old rank (ranks `0..old_world`, in order, checked by the
/// caller). `len` is the order's length; `what` names the source in errors.
///
/// Cost: linear in the number of positions between the first position no
/// rank consumed and the last one some rank did (plus the old plans' owed
/// lists), and a sort of the holes found there.
pub(crate) fn deal(
    what: &str,
    old: &[OldRank],
    old_world: u64,
    len: u64,
    new_world: u64,
) -> Result<Dealing> {
    let refuse = |why: String| Err(Error::invalid_argument("reshard", format!("{what}: {why}")));
    let id = old.first().map_or(0, |o| o.plan.id);
    if let Some(o) = old.iter().find(|o| o.plan.id != id) {
        return refuse(format!(
            "rank {} follows plan {:#x}, rank 0 plan {id:#x}: the states are from different runs or reshards of the job",
            o.rank, o.plan.id
        ));
    }
    // The tails of one plan are h, h + 1, ..., h + old_world - 1.
    let start = old.iter().map(|o| o.plan.tail).min().unwrap_or(0);
    let mut tails: Vec<u64> = old.iter().map(|o| o.plan.tail - start).collect();
    tails.sort_unstable();
    if tails.iter().enumerate().any(|(i, &t)| t != i as u64) {
        return refuse(format!(
            "the ranks' plans do not fit together (their tails are not {old_world} consecutive positions): the states are from different runs of the job"
        ));
    }
    let mut holes = Vec::new();
    let mut seen_owed = HashSet::new();
    // The first position past every consumed one.
    let mut high = start;
    for o in old {
        let owed = o.plan.owed.len() as u64;
        let total = o.plan.len(len, old_world);
        let Consumed { prefix, extras } = &o.consumed;
        let is_consumed = |step: u64| step < *prefix || extras.binary_search(&step).is_ok();
        for (step, &p) in o.plan.owed.iter().enumerate() {
            if p >= start || !seen_owed.insert(p) {
                return refuse(format!(
                    "position {p} is owed twice or past the plan's tail: the states are from different runs of the job"
                ));
            }
            if !is_consumed(step as u64) {
                holes.push(p);
            }
        }
        // Extras are all past the prefix.
        let last = extras.last().map_or(*prefix, |&e| e + 1).min(total);
        if last > owed {
            high = high.max(o.plan.position(last - 1, old_world) + 1);
        }
    }
    for o in old {
        let Consumed { prefix, extras } = &o.consumed;
        let owed = o.plan.owed.len() as u64;
        for step in (*prefix).max(owed)..o.plan.len(len, old_world) {
            let p = o.plan.position(step, old_world);
            if p >= high {
                break;
            }
            if extras.binary_search(&step).is_err() {
                holes.push(p);
            }
        }
    }
    holes.sort_unstable();
    let high = high.min(len.max(start));
    if high.checked_add(new_world - 1).is_none() {
        return refuse(format!(
            "{new_world} new ranks are too many: their first positions, from {high} on, would pass 2^64"
        ));
    }
    // A nonzero FNV-1a hash naming the reshard's plans.
    let words = [&[id, high, new_world, holes.len() as u64][..], &holes].concat();
    let id = crate::seed::hash_words(&words).max(1);
    Ok(Dealing { id, high, holes })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The positions a plan reads, all of them.
    fn positions(plan: &Plan, len: u64, world: u64) -> Vec<u64> {
        (0..plan.len(len, world))
            .map(|i| plan.position(i, world))
            .collect()
    }

    #[test]
    fn the_rest_of_the_epoch_is_dealt_exactly_once() {
        let len = 23;
        let old: Vec<OldRank> = [(0u64, 3u64, vec![]), (1, 0, vec![2]), (2, 5, vec![])]
            .into_iter()
            .map(|(rank, prefix, rel)| OldRank {
                rank,
                plan: Plan::fresh(rank),
                consumed: Consumed::new(prefix, &rel),
            })
            .collect();
        let mut consumed: Vec<u64> = old
            .iter()
            .flat_map(|o| {
                let seq = positions(&o.plan, len, 3);
                let mut out: Vec<u64> = seq[..o.consumed.prefix as usize].to_vec();
                out.extend(o.consumed.extras.iter().map(|&s| seq[s as usize]));
                out
            })
            .collect();
        for new_world in 1..=5 {
            let dealing = deal("test", &old, 3, len, new_world).unwrap();
            let plans: Vec<Plan> = (0..new_world).map(|m| dealing.plan(m, new_world)).collect();
            let mut all: Vec<u64> = plans
                .iter()
                .flat_map(|p| positions(p, len, new_world))
                .collect();
            let counts: Vec<usize> = plans
                .iter()
                .map(|p| positions(p, len, new_world).len())
                .collect();
            assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1);
            all.extend(consumed.iter().copied());
            all.sort_unstable();
            assert_eq!(all, (0..len).collect::<Vec<_>>(), "M = {new_world}");
        }
        consumed.sort_unstable();
        assert_eq!(consumed, [0, 2, 3, 5, 6, 7, 8, 11, 14]);
    }

    #[test]
    fn contiguous_relative_steps_join_the_prefix() {
        assert_eq!(
            Consumed::new(4, &[0, 1, 3]),
            Consumed {
                prefix: 6,
                extras: vec![7]
            }
        );
        assert_eq!(
            Consumed::new(0, &[]),
            Consumed {
                prefix: 0,
                extras: vec![]
            }
        );
    }
}
