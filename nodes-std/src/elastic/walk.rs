//! Reading one old rank's state: which positions of which source it
//! consumed, found by walking the saved pipeline description and the state
//! side by side (a child's key in a description is where its state lives).

use nodes_core::{Description, Error, Result, State};

use crate::elastic::plan::Consumed;
use crate::elastic::sampler::Plan;
use crate::mixing::StopCriteria;

pub(crate) const RESHARD: &str = "reshard";

/// One `ElasticSampler` in one old rank's state.
#[derive(Debug)]
pub(crate) struct Cut {
    /// Where its state is, in the loader state (the same on every rank).
    pub(crate) path: String,
    pub(crate) epoch: u64,
    pub(crate) rank: u64,
    pub(crate) world_size: u64,
    pub(crate) len: u64,
    pub(crate) plan: Plan,
    pub(crate) consumed: Consumed,
}

fn refuse(state: &State, name: &str, why: &str) -> Error {
    Error::invalid_argument(
        RESHARD,
        format!(
            "{name} at {} cannot be resharded: {why}",
            if state.path().is_empty() {
                "/"
            } else {
                state.path()
            }
        ),
    )
}

/// The state of the child under `key` (`a` or `a/b`).
pub(crate) fn child_at(state: &State, key: &str) -> Result<State> {
    let mut at = state.clone();
    for part in key.split('/') {
        at = at.child(part)?;
    }
    Ok(at)
}

/// The one child of a node with one source.
fn only_child<'d>(desc: &'d Description, state: &State) -> Result<(&'d str, &'d Description)> {
    let mut children = desc.children();
    match (children.next(), children.next()) {
        (Some(child), None) => Ok(child),
        _ => Err(refuse(
            state,
            desc.name(),
            "expected one child in its description",
        )),
    }
}

/// Why a node of this description cannot be resharded (with a `par_map` or
/// `prefetch` above it or not), if it cannot, whatever its state.
pub(crate) fn refusal(desc: &Description, threaded_above: bool) -> Option<&'static str> {
    match desc.name() {
        "ElasticSampler" | "MapStyleWrapper" | "Mapper" | "Batcher" | "ParallelMapper"
        | "Prefetcher" => None,
        "TryMapper" | "Filter" if threaded_above => Some(
            "below a par_map or prefetch, the number of positions behind the items it passes is not known (put it above the par_map/prefetch)",
        ),
        "TryMapper" | "Filter" => None,
        "MultiNodeWeightedSampler" | "MultiNodeRoundRobinSampler" if threaded_above => Some(
            "below a par_map or prefetch, which source its next items come from is not known (put the par_map/prefetch on each source)",
        ),
        "MultiNodeWeightedSampler" | "MultiNodeRoundRobinSampler"
            if desc.get_param("stop_criteria")
                != Some(StopCriteria::AllDatasetsExhausted.as_str()) =>
        {
            Some(
                "only StopCriteria::AllDatasetsExhausted reads each source exactly once (the other criteria restart sources, whose positions then belong to another epoch)",
            )
        }
        "MultiNodeWeightedSampler" | "MultiNodeRoundRobinSampler" => None,
        "SamplerWrapper" => Some(
            "its position counts this rank's indices, not global positions: use an ElasticSampler (ShardedSampler -> ElasticSampler::new(inner, rank, world_size))",
        ),
        "IterableWrapper" => Some(
            "the position of an iterable source is not a function of global indices: use a MapStyleWrapper over an ElasticSampler",
        ),
        "Cycler" => Some("it restarts its source, so positions are not those of one epoch"),
        "Shuffler" => Some(
            "its buffer holds items, not positions: shuffle with the ElasticSampler's order (a RandomSampler) instead",
        ),
        _ => Some(
            "elastic resume supports ElasticSampler sources under MapStyleWrapper, map, try_map, filter, batch, par_map, prefetch and the weighted or round-robin mix",
        ),
    }
}

/// Whether a node hands its child's items on with a threaded node's
/// snapshot protocol (so the nodes below it count positions per item).
fn is_threaded(desc: &Description) -> bool {
    matches!(desc.name(), "ParallelMapper" | "Prefetcher")
}

/// Checks a pipeline's description against [`refusal`]: `path` is where
/// the node's state is.
pub(crate) fn check(desc: &Description, threaded_above: bool, path: &str) -> Result<usize> {
    if let Some(why) = refusal(desc, threaded_above) {
        return Err(Error::invalid_argument(
            RESHARD,
            format!("{} at {path} cannot be resharded: {why}", desc.name()),
        ));
    }
    let below = threaded_above || is_threaded(desc);
    let mut samplers = usize::from(desc.name() == "ElasticSampler");
    for (key, child) in desc.children() {
        samplers += check(child, below, &format!("{path}/{key}"))?;
    }
    Ok(samplers)
}

/// Collects the cuts below `desc`/`state`. `relative` (ascending) are the
/// items this node yields after `state` that a threaded node above already
/// delivered: they count as consumed too. `threaded_above`: a `par_map` or
/// `prefetch` stands above (its items after its snapshot count as consumed).
pub(crate) fn walk(
    desc: &Description,
    state: &State,
    relative: &[u64],
    threaded_above: bool,
    out: &mut Vec<Cut>,
) -> Result<()> {
    let name = desc.name();
    if let Some(why) = refusal(desc, threaded_above) {
        return Err(refuse(state, name, why));
    }
    match name {
        "ElasticSampler" => {
            let num_yielded: u64 = state.get("num_yielded")?;
            out.push(Cut {
                path: state.path().to_owned(),
                epoch: state.get("epoch")?,
                rank: state.get("rank")?,
                world_size: state.get("world_size")?,
                len: state.get("len")?,
                plan: state.get("plan")?,
                consumed: Consumed::new(num_yielded, relative),
            });
            Ok(())
        }
        "MapStyleWrapper" | "Mapper" | "TryMapper" | "Filter" => {
            let (key, child) = only_child(desc, state)?;
            walk(child, &child_at(state, key)?, relative, threaded_above, out)
        }
        "Batcher" => {
            let pending = state.value("pending_errors")?;
            if pending.as_array().is_some_and(|a| !a.is_empty()) {
                return Err(refuse(
                    state,
                    name,
                    "it holds errors not yet delivered (take the state after they are)",
                ));
            }
            let size: u64 = desc
                .get_param("batch_size")
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| refuse(state, name, "no batch_size in its description"))?;
            let expanded: Vec<u64> = relative
                .iter()
                .flat_map(|&b| b * size..(b + 1) * size)
                .collect();
            let (key, child) = only_child(desc, state)?;
            walk(
                child,
                &child_at(state, key)?,
                &expanded,
                threaded_above,
                out,
            )
        }
        "ParallelMapper" | "Prefetcher" => {
            let steps: u64 = state.get("steps_since_snapshot")?;
            let ahead: Vec<u64> = state.get_opt("delivered_ahead")?.unwrap_or_default();
            let in_order = desc.get_param("in_order") != Some("false");
            let mut delivered: Vec<u64> = (0..steps).chain(ahead.iter().copied()).collect();
            if !relative.is_empty() {
                if !in_order || !ahead.is_empty() {
                    return Err(refuse(
                        state,
                        name,
                        "it delivers out of order below another threaded node",
                    ));
                }
                // In order, the items it yields next are the ones after `steps`.
                delivered.extend(relative.iter().map(|&r| steps + r));
            }
            let (key, child) = only_child(desc, state)?;
            walk(child, &child_at(state, key)?, &delivered, true, out)
        }
        // The mixes (`refusal` let only these through).
        _ => {
            for (key, child) in desc.children() {
                walk(child, &child_at(state, key)?, relative, threaded_above, out)?;
            }
            Ok(())
        }
    }
}
