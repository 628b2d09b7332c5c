//! Elastic resume from Python: the states a job saved on N ranks, dealt
//! again to M ranks (see `nodes_std::elastic`).

use nodes_std::State;
use nodes_std::elastic::{BatchSizes, Reshard};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::{state_from_py, state_to_py, to_py_err};

/// The old ranks' states (dicts, in rank order), each named by its rank in
/// errors.
pub(crate) fn states(old_states: &[Bound<'_, PyAny>]) -> PyResult<Vec<State>> {
    old_states
        .iter()
        .enumerate()
        .map(|(rank, state)| {
            state_from_py(Some(state), &format!("the state of old rank {rank}"))
                .map(Option::unwrap_or_default)
        })
        .collect()
}

/// `batch_sizes=`: "per_rank", "keep_global" or "keep_global_uneven".
pub(crate) fn batch_sizes(name: &str) -> PyResult<BatchSizes> {
    match name {
        "per_rank" => Ok(BatchSizes::PerRank),
        "keep_global" => Ok(BatchSizes::KeepGlobal),
        "keep_global_uneven" => Ok(BatchSizes::KeepGlobalUneven),
        other => Err(PyValueError::new_err(format!(
            "unknown batch_sizes {other:?}: expected \"per_rank\", \"keep_global\" or \"keep_global_uneven\""
        ))),
    }
}

/// Every new rank's state, from the loader states of all old ranks (in
/// rank order).
#[pyfunction]
#[pyo3(signature = (old_states, new_world_size, batch_sizes = "per_rank"))]
pub(crate) fn reshard<'py>(
    py: Python<'py>,
    old_states: Vec<Bound<'py, PyAny>>,
    new_world_size: u64,
    batch_sizes: &str,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let (olds, sizes) = (states(&old_states)?, self::batch_sizes(batch_sizes)?);
    let news = py
        .detach(|| {
            Reshard::new(&olds)
                .batch_sizes(sizes)
                .states(new_world_size)
        })
        .map_err(to_py_err)?;
    news.iter().map(|s| state_to_py(py, s)).collect()
}

/// New rank `rank`'s state only.
#[pyfunction]
#[pyo3(signature = (old_states, rank, new_world_size, batch_sizes = "per_rank"))]
pub(crate) fn reshard_rank<'py>(
    py: Python<'py>,
    old_states: Vec<Bound<'py, PyAny>>,
    rank: u64,
    new_world_size: u64,
    batch_sizes: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let (olds, sizes) = (states(&old_states)?, self::batch_sizes(batch_sizes)?);
    let reshard = Reshard::new(&olds).batch_sizes(sizes);
    let new = py
        .detach(|| reshard.rank_state(rank, new_world_size))
        .map_err(to_py_err)?;
    state_to_py(py, &new)
}

/// The size of the outermost `batch` on new rank `rank` (`None` without
/// one): what to build that rank's pipeline with.
#[pyfunction]
#[pyo3(signature = (old_states, rank, new_world_size, batch_sizes = "per_rank"))]
pub(crate) fn new_batch_size(
    py: Python<'_>,
    old_states: Vec<Bound<'_, PyAny>>,
    rank: u64,
    new_world_size: u64,
    batch_sizes: &str,
) -> PyResult<Option<usize>> {
    let (olds, sizes) = (states(&old_states)?, self::batch_sizes(batch_sizes)?);
    let reshard = Reshard::new(&olds).batch_sizes(sizes);
    py.detach(|| reshard.new_batch_size(rank, new_world_size))
        .map_err(to_py_err)
}
