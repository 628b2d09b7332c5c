//! [`PyLoader`]: epochs over a pipeline, with checkpoints at any point
//! (the Rust `Loader`, driven from Python one item at a time).

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use nodes_std::CancelHandle;
use nodes_std::prelude::*;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{Obj, state_from_py, state_to_py, to_py_err};
use crate::handle::{BoxNode, Step, cancels_of, source};
use crate::interrupt::Waits;

/// The loader and whether its epoch has ended (an error ends it too, as
/// in torchdata: the next `start_epoch` goes on).
struct Epochs {
    loader: Loader<BoxNode>,
    ended: bool,
    /// The process that first ran the pipeline (and started its threads).
    pid: Option<u32>,
}

/// Epochs over a pipeline (torchdata's `Loader`), with the GIL released
/// while the pipeline runs.
#[pyclass(frozen, name = "Loader", module = "nodes_rs._native")]
pub(crate) struct PyLoader {
    /// Emptied only when dropped.
    epochs: Mutex<Option<Epochs>>,
    /// Wake a consumer blocked on the root's threaded nodes (Ctrl-C).
    cancels: Vec<CancelHandle>,
    /// The module's registry of waits, once looked up.
    waits: OnceLock<Arc<Waits>>,
}

impl PyLoader {
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Epochs) -> Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| match &mut *self.lock() {
            Some(epochs) => match *epochs.pid.get_or_insert_with(std::process::id) {
                pid if pid != std::process::id() => Err(crate::handle::forked(pid)),
                _ => f(epochs),
            },
            None => unreachable!("a loader is emptied only when dropped"),
        })
        .map_err(to_py_err)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Epochs>> {
        self.epochs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for PyLoader {
    fn drop(&mut self) {
        let epochs = self
            .epochs
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        match epochs.take() {
            // A forked child has none of its parent's threads to join.
            Some(e) if e.pid.is_some_and(|pid| pid != std::process::id()) => std::mem::forget(e),
            epochs => crate::handle::release_while(epochs),
        }
    }
}

#[pymethods]
impl PyLoader {
    #[new]
    #[pyo3(signature = (root, restart_on_stop_iteration=true, record_stats=false, check_shape=true))]
    fn new(
        root: &Bound<'_, PyAny>,
        restart_on_stop_iteration: bool,
        record_stats: bool,
        check_shape: bool,
    ) -> PyResult<PyLoader> {
        let cancels = cancels_of(root);
        let mut loader = Loader::new(source(root, "Loader")?)
            .restart_on_end(restart_on_stop_iteration)
            .check_shape(check_shape);
        if record_stats {
            loader = loader.record_stats();
        }
        Ok(PyLoader {
            cancels,
            waits: OnceLock::new(),
            epochs: Mutex::new(Some(Epochs {
                loader,
                ended: false,
                pid: None,
            })),
        })
    }

    /// Starts the next epoch, or resumes the state just loaded.
    fn start_epoch(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |e| {
            e.ended = false;
            e.loader.start_epoch()
        })
    }

    /// The epoch's next item; `StopIteration` at its end;
    /// `KeyboardInterrupt` if Ctrl-C interrupts its wait for the workers.
    fn next(&self, py: Python<'_>) -> PyResult<Obj> {
        loop {
            let _waiting = match self.cancels.is_empty() {
                true => None,
                false => Some(Waits::of_module(py, &self.waits)?.enter(&self.cancels)),
            };
            let step = self.run(py, |e| {
                if e.ended {
                    return Ok(Step::End);
                }
                let step = Step::of(e.loader.next_in_epoch().transpose(), &mut e.ended);
                if let Ok(Step::End) = step {
                    e.ended = true;
                }
                step
            })?;
            if let Some(item) = step.into_item(py)? {
                return Ok(item);
            }
        }
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

    /// Loads this loader's share, as rank `rank` of `world_size`, of the rest
    /// of the epoch that the ranks of a job of any size saved as `old_states`
    /// (in rank order); `batch_sizes` as for `reshard`.
    #[pyo3(signature = (old_states, rank, world_size, batch_sizes = "per_rank"))]
    fn load_resharded(
        &self,
        py: Python<'_>,
        old_states: Vec<Bound<'_, PyAny>>,
        rank: u64,
        world_size: u64,
        batch_sizes: &str,
    ) -> PyResult<()> {
        let olds = crate::elastic::states(&old_states)?;
        let sizes = crate::elastic::batch_sizes(batch_sizes)?;
        self.run(py, |e| {
            let reshard = nodes_std::elastic::Reshard::new(&olds).batch_sizes(sizes);
            reshard.load(&mut e.loader, rank, world_size)
        })
    }

    /// Refuses, naming the node, a pipeline whose state cannot be resharded.
    fn check_elastic(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |e| nodes_std::elastic::check(e.loader.describe()))
    }

    /// Per-node statistics (items, calls, time in the node and blocked,
    /// queue depths, records skipped), or `None` unless the loader was
    /// made with `record_stats`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Vec<Bound<'py, PyDict>>>> {
        let Some(stats) = self.run(py, |e| Ok(e.loader.stats()))? else {
            return Ok(None);
        };
        let rows = stats.nodes.iter().map(|n| {
            let row = PyDict::new(py);
            row.set_item("node", &n.node)?;
            row.set_item("name", n.name)?;
            row.set_item("items", n.items)?;
            row.set_item("calls", n.calls)?;
            row.set_item("timed_calls", n.timed_calls)?;
            row.set_item("self_time_s", n.self_time.as_secs_f64())?;
            row.set_item("blocked_s", n.blocked.as_secs_f64())?;
            row.set_item("max_queue_depth", n.max_queue_depth)?;
            row.set_item("mean_queue_depth", n.mean_queue_depth())?;
            row.set_item("skipped", n.skipped)?;
            Ok(row)
        });
        rows.collect::<PyResult<Vec<_>>>().map(Some)
    }

    /// The pipeline's shape: each node, its parameters and its sources.
    fn describe(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, |e| Ok(e.loader.describe().render_text()))
    }

    /// Stops the pipeline's worker threads.
    fn shutdown(&self, py: Python<'_>) {
        let _ = self.run(py, |e| {
            e.loader.shutdown();
            Ok(())
        });
    }
}
