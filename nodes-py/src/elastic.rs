//! Elastic resume from Python: the states a job saved on N ranks, dealt
//! again to M ranks (see `nodes_std::elastic`).

use nodes_std::State;
use nodes_std::elastic;
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

/// Every new rank's state, from the loader states of all old ranks (in
/// rank order).
#[pyfunction]
pub(crate) fn reshard<'py>(
    py: Python<'py>,
    old_states: Vec<Bound<'py, PyAny>>,
    new_world_size: u64,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let olds = states(&old_states)?;
    let news = py
        .detach(|| elastic::reshard(&olds, new_world_size))
        .map_err(to_py_err)?;
    news.iter().map(|s| state_to_py(py, s)).collect()
}

/// New rank `rank`'s state only.
#[pyfunction]
pub(crate) fn reshard_rank<'py>(
    py: Python<'py>,
    old_states: Vec<Bound<'py, PyAny>>,
    rank: u64,
    new_world_size: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let olds = states(&old_states)?;
    let new = py
        .detach(|| elastic::reshard_rank(&olds, rank, new_world_size))
        .map_err(to_py_err)?;
    state_to_py(py, &new)
}
