//! [`Pipeline`]: a Rust pipeline of Python items as one Python object,
//! which either runs on its own or is taken into a parent.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use nodes_std::prelude::*;
use nodes_std::{CancelHandle, Running};
use pyo3::exceptions::{PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;

use crate::convert::{Obj, state_from_py, state_to_py, to_py_err};
use crate::interrupt::Waits;
use crate::item::Item;
use crate::python_nodes::PyNode;

/// A pipeline of the bindings' items, type-erased.
pub(crate) type BoxNode = Box<dyn Node<Item = Item>>;

/// Where a [`Pipeline`]'s node is.
enum Slot {
    /// Built and never reset: a parent may still take it.
    Built(BoxNode),
    /// Reset, so iterated on its own. After an error reached Python the
    /// pass has ended (`ended`) until the next reset, as in torchdata.
    Started {
        running: Running<BoxNode>,
        ended: bool,
        /// The process that started it (and its threads).
        pid: u32,
    },
    /// Taken into the parent named here.
    Taken(String),
    /// Its start failed (the error went to the caller): its node is gone.
    Failed,
}

/// A Rust pipeline whose items are Python objects.
///
/// `next`, `reset` and `get_state` run with the GIL released: only the
/// Python callables and nodes inside take it, each for its own call.
#[pyclass(frozen, module = "nodes_rs._native")]
pub(crate) struct Pipeline {
    slot: Mutex<Slot>,
    /// Wake a consumer blocked on the pipeline's threaded nodes (Ctrl-C).
    cancels: Vec<CancelHandle>,
    /// The module's registry of waits, once looked up.
    waits: OnceLock<Arc<Waits>>,
}

impl Pipeline {
    pub(crate) fn new(node: BoxNode) -> Pipeline {
        Pipeline {
            slot: Mutex::new(Slot::Built(node)),
            cancels: Vec::new(),
            waits: OnceLock::new(),
        }
    }

    /// The same pipeline, cancelled also through `cancels`: those of its
    /// sources, and its own node's if it is threaded.
    pub(crate) fn with_cancels(
        mut self,
        cancels: impl IntoIterator<Item = CancelHandle>,
    ) -> Pipeline {
        self.cancels.extend(cancels);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        // A panic cannot leave a slot half-written: each arm replaces it whole.
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the node into `parent`: it is the parent's from now on.
    pub(crate) fn take(&self, py: Python<'_>, parent: &str) -> PyResult<BoxNode> {
        // Without the GIL: another thread may hold the slot while its
        // pipeline calls Python.
        let taken = py.detach(|| {
            let mut slot = self.lock();
            match std::mem::replace(&mut *slot, Slot::Taken(parent.to_owned())) {
                Slot::Built(node) => Ok(node),
                other => {
                    let why = match &other {
                        Slot::Taken(owner) => format!("it is already the source of {owner}"),
                        Slot::Failed => FAILED.to_owned(),
                        _ => "it was already reset or iterated on its own: build the whole \
                              pipeline before iterating it"
                            .to_owned(),
                    };
                    *slot = other;
                    Err(why)
                }
            }
        });
        taken.map_err(|why| {
            PyRuntimeError::new_err(format!(
                "this node cannot become the source of {parent}: {why}"
            ))
        })
    }

    /// Runs `f` on the started pipeline (starting it from its beginning if
    /// it was never reset), with the GIL released.
    fn with_running<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Running<BoxNode>, &mut bool) -> nodes_std::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut slot = self.lock();
            if let Slot::Built(_) = &*slot {
                let Slot::Built(node) = std::mem::replace(&mut *slot, Slot::Taken(String::new()))
                else {
                    unreachable!("matched above");
                };
                let outcome;
                (*slot, outcome) = start(node, None);
                outcome?;
            }
            match &mut *slot {
                Slot::Started { pid, .. } if *pid != std::process::id() => Err(forked(*pid)),
                Slot::Started { running, ended, .. } => f(running, ended),
                Slot::Taken(owner) => Err(Error::invalid_argument(
                    "Pipeline",
                    format!("this node is the source of {owner}: iterate that one"),
                )),
                Slot::Failed => Err(Error::invalid_argument("Pipeline", FAILED)),
                Slot::Built(_) => unreachable!("started above"),
            }
        })
        .map_err(to_py_err)
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        let slot = std::mem::replace(
            self.slot.get_mut().unwrap_or_else(PoisonError::into_inner),
            Slot::Taken(String::new()),
        );
        match slot {
            // A forked child has none of its parent's threads to join.
            Slot::Started { pid, .. } if pid != std::process::id() => std::mem::forget(slot),
            slot => release_while(slot),
        }
    }
}

/// Why a pipeline whose start failed cannot be used.
const FAILED: &str = "this pipeline failed to start (its error was raised then): build it again";

/// The error for a pipeline used in a process forked after it started.
pub(crate) fn forked(pid: u32) -> Error {
    Error::invalid_argument(
        "Pipeline",
        format!(
            "this pipeline started its threads in process {pid}, and this process ({}) is a fork \
             of it, which has none of them: build the pipeline in the process that iterates it \
             (or start worker processes with the spawn or forkserver method)",
            std::process::id()
        ),
    )
}

/// Drops `owned` (a pipeline, maybe with worker threads to join) without
/// holding the GIL, which those threads may be waiting for. While the
/// interpreter shuts down they can never get it: then `owned` is leaked
/// instead of joined. On a thread of nodes' own (Python's garbage collector
/// runs wherever Python code does, a pipeline's worker too), `owned` is
/// dropped on a thread of its own: a worker cannot join itself, nor wait
/// for the others while it holds their source.
pub(crate) fn release_while<T: Send + 'static>(owned: T) {
    if std::thread::current()
        .name()
        .is_some_and(|name| name.starts_with("nodes-"))
    {
        return reap_apart(owned);
    }
    let mut owned = Some(owned);
    Python::try_attach(|py| {
        let owned = owned.take();
        py.detach(move || drop(owned));
    });
    if let Some(owned) = owned {
        std::mem::forget(owned);
    }
}

/// Drops `owned` on a thread started for it; leaks it if none can start
/// (dropping it here could wait for this very thread).
fn reap_apart<T: Send + 'static>(owned: T) {
    let (send, receive) = std::sync::mpsc::channel::<T>();
    let reaper = std::thread::Builder::new()
        .name("nodes-reaper".to_owned())
        .spawn(move || drop(receive.recv()));
    match reaper {
        Ok(_) => {
            if let Err(std::sync::mpsc::SendError(owned)) = send.send(owned) {
                std::mem::forget(owned);
            }
        }
        Err(_) => std::mem::forget(owned),
    }
}

#[pymethods]
impl Pipeline {
    /// The next item; `StopIteration` at the end of the pass;
    /// `KeyboardInterrupt` if Ctrl-C interrupts its wait for the workers.
    fn next(&self, py: Python<'_>) -> PyResult<Obj> {
        loop {
            let _waiting = match self.cancels.is_empty() {
                true => None,
                false => Some(Waits::of_module(py, &self.waits)?.enter(&self.cancels)),
            };
            let step = self.with_running(py, |running, ended| {
                if *ended {
                    return Ok(Step::End);
                }
                Step::of(running.try_next(), ended)
            })?;
            if let Some(item) = step.into_item(py)? {
                return Ok(item);
            }
        }
    }

    /// Starts a new pass (`None`) or resumes from a state dict.
    #[pyo3(signature = (initial_state=None))]
    fn reset(&self, py: Python<'_>, initial_state: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let state = state_from_py(initial_state, "the pipeline")?;
        py.detach(|| {
            let mut slot = self.lock();
            match std::mem::replace(&mut *slot, Slot::Taken(String::new())) {
                Slot::Built(node) => {
                    let outcome;
                    (*slot, outcome) = start(node, state.as_ref());
                    outcome
                }
                started @ Slot::Started { pid, .. } if pid != std::process::id() => {
                    // Put back, not dropped: a fork has none of its threads to join.
                    *slot = started;
                    Err(forked(pid))
                }
                Slot::Started {
                    mut running, pid, ..
                } => {
                    let outcome = running.reset(state.as_ref());
                    *slot = Slot::Started {
                        running,
                        ended: false,
                        pid,
                    };
                    outcome
                }
                Slot::Failed => {
                    *slot = Slot::Failed;
                    Err(Error::invalid_argument("Pipeline", FAILED))
                }
                taken => {
                    *slot = taken;
                    Err(Error::invalid_argument(
                        "Pipeline",
                        "this node belongs to a parent",
                    ))
                }
            }
        })
        .map_err(to_py_err)
    }

    /// The state dict of the position after the last item returned.
    fn get_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.with_running(py, |running, _| running.get_state())?;
        state_to_py(py, &state)
    }

    /// The pipeline's shape: node names, parameters and children.
    fn describe(&self, py: Python<'_>) -> String {
        // Without the GIL: another thread may hold the slot while its
        // pipeline calls Python.
        py.detach(|| match &*self.lock() {
            Slot::Built(node) => node.describe().render_text(),
            Slot::Started { running, .. } => running.node().describe().render_text(),
            Slot::Taken(owner) => format!("(the source of {owner})"),
            Slot::Failed => "(failed to start)".to_owned(),
        })
    }

    /// Stops the pipeline's worker threads; a reset starts them again.
    fn shutdown(&self, py: Python<'_>) {
        py.detach(|| {
            if let Slot::Started { running, pid, .. } = &mut *self.lock()
                && *pid == std::process::id()
            {
                running.shutdown();
            }
        });
    }
}

/// The slot of `node` started (from `state` when given): `Started` in this
/// process, or `Failed` beside the error.
fn start(node: BoxNode, state: Option<&State>) -> (Slot, nodes_std::Result<()>) {
    let running = match state {
        Some(state) => Running::start_from(node, state),
        None => Running::start(node),
    };
    match running {
        Ok(running) => {
            let pid = std::process::id();
            let started = Slot::Started {
                running,
                ended: false,
                pid,
            };
            (started, Ok(()))
        }
        Err(e) => (Slot::Failed, Err(e)),
    }
}

/// What one pull from a pipeline gave.
pub(crate) enum Step {
    Item(Item),
    End,
    /// A cancel handle cut the wait short (see [`Waits`]).
    Cancelled,
}

impl Step {
    /// The step a pull gave; an error ends the pass (`ended`), as in
    /// torchdata, except a cancelled wait, after which the pass goes on.
    pub(crate) fn of(
        pulled: nodes_std::Result<Option<Item>>,
        ended: &mut bool,
    ) -> nodes_std::Result<Step> {
        match pulled {
            Ok(Some(item)) => Ok(Step::Item(item)),
            Ok(None) => Ok(Step::End),
            Err(Error::Cancelled { .. }) => Ok(Step::Cancelled),
            Err(e) => {
                *ended = true;
                Err(e)
            }
        }
    }

    /// The item for Python: `StopIteration` at the end; after a cancelled
    /// wait, the signal's exception (`KeyboardInterrupt`), or `None` to
    /// pull again when no signal is pending (the cancel was meant for a
    /// wait that had already ended).
    pub(crate) fn into_item(self, py: Python<'_>) -> PyResult<Option<Obj>> {
        match self {
            Step::Item(item) => item.into_py(py).map(Some),
            Step::End => Err(PyStopIteration::new_err(())),
            Step::Cancelled => py.check_signals().map(|()| None),
        }
    }
}

/// The cancel handles of a source argument's threaded nodes.
pub(crate) fn cancels_of(obj: &Bound<'_, PyAny>) -> Vec<CancelHandle> {
    let pipeline = match obj.cast::<Pipeline>() {
        Ok(pipeline) => pipeline.clone(),
        Err(_) => match obj
            .getattr("_native")
            .ok()
            .and_then(|n| n.cast_into::<Pipeline>().ok())
        {
            Some(pipeline) => pipeline,
            None => return Vec::new(),
        },
    };
    pipeline.get().cancels.clone()
}

/// The node of a source argument: a native pipeline is taken into
/// `parent`; a Python `BaseNode` subclass is wrapped.
pub(crate) fn source(obj: &Bound<'_, PyAny>, parent: &str) -> PyResult<BoxNode> {
    if let Ok(pipeline) = obj.cast::<Pipeline>() {
        return pipeline.get().take(obj.py(), parent);
    }
    if let Ok(native) = obj.getattr("_native")
        && let Ok(pipeline) = native.cast::<Pipeline>()
    {
        return pipeline.get().take(obj.py(), parent);
    }
    Ok(Box::new(PyNode::new(obj)?))
}
