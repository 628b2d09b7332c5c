//! [`PyLoader`]: epochs over a pipeline, with checkpoints at any point
//! (the Rust `Loader`, driven from Python one item at a time).

use std::sync::{Mutex, PoisonError};

use nodes_std::prelude::*;
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;

use crate::convert::{Obj, state_from_py, state_to_py, to_py_err};
use crate::handle::{BoxNode, source};

/// The loader and whether its epoch has ended (an error ends it too, as
/// in torchdata: the next `start_epoch` goes on).
struct Epochs {
    loader: Loader<BoxNode>,
    ended: bool,
}

/// Epochs over a pipeline (torchdata's `Loader`), with the GIL released
/// while the pipeline runs.
#[pyclass(frozen, name = "Loader", module = "nodes_rs._native")]
pub(crate) struct PyLoader {
    epochs: Mutex<Epochs>,
}

impl PyLoader {
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Epochs) -> Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| f(&mut self.epochs.lock().unwrap_or_else(PoisonError::into_inner)))
            .map_err(to_py_err)
    }
}

#[pymethods]
impl PyLoader {
    #[new]
    #[pyo3(signature = (root, restart_on_stop_iteration=true))]
    fn new(root: &Bound<'_, PyAny>, restart_on_stop_iteration: bool) -> PyResult<PyLoader> {
        let loader = Loader::new(source(root, "Loader")?).restart_on_end(restart_on_stop_iteration);
        Ok(PyLoader {
            epochs: Mutex::new(Epochs {
                loader,
                ended: false,
            }),
        })
    }

    /// Starts the next epoch, or resumes the state just loaded.
    fn start_epoch(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |e| {
            e.ended = false;
            e.loader.start_epoch()
        })
    }

    /// The epoch's next item; `StopIteration` at its end.
    fn next(&self, py: Python<'_>) -> PyResult<Obj> {
        let item = self.run(py, |e| {
            if e.ended {
                return Ok(None);
            }
            match e.loader.next_in_epoch() {
                None => {
                    e.ended = true;
                    Ok(None)
                }
                Some(Err(error)) => {
                    e.ended = true;
                    Err(error)
                }
                Some(Ok(item)) => Ok(Some(item)),
            }
        })?;
        item.ok_or_else(|| PyStopIteration::new_err(()))
    }

    /// The state to resume from: after the last item returned.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.run(py, |e| e.loader.state_dict())?;
        state_to_py(py, &state)
    }

    /// Loads a state: the next epoch started resumes from it.
    fn load_state_dict(&self, py: Python<'_>, state_dict: &Bound<'_, PyAny>) -> PyResult<()> {
        let state = state_from_py(Some(state_dict), "Loader")?.unwrap_or_default();
        self.run(py, |e| e.loader.load_state_dict(&state))
    }

    /// Stops the pipeline's worker threads.
    fn shutdown(&self, py: Python<'_>) {
        let _ = self.run(py, |e| {
            e.loader.shutdown();
            Ok(())
        });
    }
}
