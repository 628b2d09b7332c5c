//! [`BatchSizes`]: what a reshard does to the size of every `batch`, per
//! rank or to keep the job's global batch.

use nodes_core::{Description, Error, Result, Resume};

use crate::elastic::walk::RESHARD;

/// How a reshard ([`Reshard::batch_sizes`](crate::elastic::Reshard::batch_sizes))
/// sets the size of every `batch` (every node that resumes as
/// [`Resume::Groups`]) on the new ranks.
///
/// The job's *global batch* of a `batch` node is the sum of its size over
/// the old ranks: `n × N` for `batch(n)` on `N` ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BatchSizes {
    /// Every new rank batches as old rank 0 did: the global batch changes
    /// with the number of ranks (the default).
    #[default]
    PerRank,
    /// The global batch stays: each of the `M` new ranks batches
    /// `global / M` items. A global batch that `M` does not divide is an
    /// [`Error::InvalidArgument`] naming the nearest rank counts that
    /// divide it.
    KeepGlobal,
    /// The global batch stays, divided as evenly as it goes: the first
    /// `global mod M` new ranks batch one item more than the others. A
    /// global batch smaller than `M` is still an error (a rank would batch
    /// nothing).
    KeepGlobalUneven,
}

/// The global batch of every `batch` node of a pipeline, in the order
/// [`Description::subtree`] visits them: summed over the old ranks.
pub(crate) fn globals<'a>(pipelines: impl IntoIterator<Item = &'a Description>) -> Vec<u64> {
    let mut sums: Vec<u64> = Vec::new();
    for pipeline in pipelines {
        for (i, size) in sizes(pipeline).enumerate() {
            match sums.get_mut(i) {
                Some(sum) => *sum = sum.saturating_add(size),
                None => sums.push(size),
            }
        }
    }
    sums
}

/// Whether the old ranks' batch sizes (their `pipelines`, in rank order)
/// are each node's global batch dealt as [`BatchSizes::KeepGlobalUneven`]
/// deals it (equal sizes are): a job a reshard wrote, rather than ranks
/// built with sizes of their own.
pub(crate) fn dealt_evenly(pipelines: &[&Description]) -> bool {
    let globals = globals(pipelines.iter().copied());
    let world = pipelines.len() as u64;
    pipelines.iter().zip(0..).all(|(pipeline, rank)| {
        let dealt = globals
            .iter()
            .map(|&g| g / world + u64::from(rank < g % world));
        sizes(pipeline).eq(dealt)
    })
}

/// The size of every `batch` node of `pipeline`, in subtree order.
fn sizes(pipeline: &Description) -> impl Iterator<Item = u64> + '_ {
    pipeline.subtree().filter_map(|d| match d.resume() {
        Resume::Groups(size) => Some(*size),
        _ => None,
    })
}

impl BatchSizes {
    /// The size of every `batch` node of `pipeline` (old rank 0's) on new
    /// rank `rank` of `world`, in subtree order, given their [`globals`].
    pub(crate) fn for_rank(
        self,
        pipeline: &Description,
        globals: &[u64],
        rank: u64,
        world: u64,
    ) -> Result<Vec<u64>> {
        let each = globals.iter().zip(sizes(pipeline));
        each.map(|(&global, first)| self.new_size(global, first, rank, world))
            .collect()
    }

    /// The batch size of new rank `rank` of `world` for a `batch` node
    /// whose global batch is `global` and whose size on old rank 0 was
    /// `first`.
    fn new_size(self, global: u64, first: u64, rank: u64, world: u64) -> Result<u64> {
        let invalid = |why: String| Err(Error::invalid_argument(RESHARD, why));
        match self {
            BatchSizes::PerRank => Ok(first),
            _ if global < world => invalid(format!(
                "the global batch of {global} items cannot be kept on {world} ranks: a rank would batch nothing (at most {global} ranks)"
            )),
            BatchSizes::KeepGlobal if !global.is_multiple_of(world) => invalid(format!(
                "the global batch of {global} items does not divide among {world} ranks: {} do (or keep it with uneven per-rank batches, `BatchSizes::KeepGlobalUneven`)",
                nearest_divisors(global, world)
            )),
            _ => Ok(global / world + u64::from(rank < global % world)),
        }
    }
}

/// The rank counts nearest `world` below and above it that divide `global`
/// (`global > world`), as text: "4 or 6 ranks".
fn nearest_divisors(global: u64, world: u64) -> String {
    // A bounded search: this only words an error.
    const LOOK: u64 = 1 << 20;
    let below = (1..world)
        .rev()
        .take(LOOK as usize)
        .find(|&d| global.is_multiple_of(d));
    let above =
        (world + 1..=global.min(world.saturating_add(LOOK))).find(|&d| global.is_multiple_of(d));
    match (below, above) {
        (Some(b), Some(a)) => format!("{b} or {a} ranks"),
        (Some(d), None) | (None, Some(d)) => format!("{d} ranks"),
        (None, None) => "no rank count near it".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_global_batch_is_divided_or_refused_naming_the_nearest_counts() {
        assert_eq!(BatchSizes::PerRank.new_size(24, 6, 0, 5).unwrap(), 6);
        let even: Vec<u64> = (0..3)
            .map(|r| BatchSizes::KeepGlobal.new_size(24, 6, r, 3).unwrap())
            .collect();
        assert_eq!(even, [8, 8, 8]);
        let err = BatchSizes::KeepGlobal.new_size(24, 6, 0, 5).unwrap_err();
        assert!(err.to_string().contains("4 or 6 ranks do"), "{err}");
        let err = BatchSizes::KeepGlobal.new_size(23, 6, 0, 5).unwrap_err();
        assert!(err.to_string().contains(": 1 or 23 ranks do"), "{err}");
        let uneven: Vec<u64> = (0..5)
            .map(|r| BatchSizes::KeepGlobalUneven.new_size(24, 6, r, 5).unwrap())
            .collect();
        assert_eq!(uneven, [5, 5, 5, 5, 4]);
        let err = BatchSizes::KeepGlobalUneven
            .new_size(4, 2, 0, 5)
            .unwrap_err();
        assert!(err.to_string().contains("at most 4 ranks"), "{err}");
    }

    #[test]
    fn globals_sum_each_batch_node_over_the_ranks() {
        let pipeline = |outer: u64, inner: u64| {
            Description::new("Batcher")
                .with_resume(Resume::Groups(outer))
                .child(
                    "source",
                    Description::new("Batcher").with_resume(Resume::Groups(inner)),
                )
        };
        let ranks = [pipeline(5, 2), pipeline(4, 2), pipeline(4, 2)];
        assert_eq!(globals(&ranks), [13, 6]);
        assert!(dealt_evenly(&ranks.iter().collect::<Vec<_>>()));
        let odd = [pipeline(4, 2), pipeline(5, 2), pipeline(4, 2)];
        assert!(!dealt_evenly(&odd.iter().collect::<Vec<_>>()));
    }
}
