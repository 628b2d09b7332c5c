//! Python objects as Rust nodes: an iterable or a sampler as a source
//! ([`PySource`]), and a Python `BaseNode` subclass anywhere in a
//! pipeline ([`PyNode`]). Each call into Python attaches to the
//! interpreter for that call only.

use nodes_std::prelude::*;
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::PyIterator;

use crate::convert::{Obj, attached, state_from_py, state_to_py, to_value};
use crate::item::Item;

/// The name a Python source or node reports in errors.
const PYTHON_NODE: &str = "Python node";

/// A user error for a Python exception, so that it reaches the caller as
/// itself.
fn raised(node: &'static str, index: Option<u64>, error: PyErr) -> Error {
    Error::user(node, index, error)
}

/// Whether `obj` has the `state_dict`/`load_state_dict` pair that makes it
/// restore directly instead of being fast-forwarded.
fn is_stateful(obj: &Bound<'_, PyAny>) -> bool {
    obj.hasattr("state_dict").unwrap_or(false) && obj.hasattr("load_state_dict").unwrap_or(false)
}

/// What a [`PySource`] wraps: any iterable, or a sampler whose epoch it
/// counts (torchdata's `IterableWrapper` and `SamplerWrapper`).
pub(crate) enum Epochs {
    /// A plain iterable: every pass asks it for a fresh iterator.
    None,
    /// A sampler: the epoch moves on with each pass that started, through
    /// `updater` (or by one), and reaches the sampler's `set_epoch`.
    Counted {
        epoch: i64,
        started: bool,
        updater: Option<Obj>,
    },
}

/// A Python iterable (or sampler) as a source of its items.
///
/// # State
/// `num_yielded`; for a sampler, `epoch`; for an iterable with
/// `state_dict`/`load_state_dict`, `iterable` (its own state). Restoring
/// loads that state, or fast-forwards a fresh iterator past `num_yielded`
/// items: O(n) unless the iterable restores itself.
pub(crate) struct PySource {
    name: &'static str,
    iterable: Obj,
    iter: Option<Py<PyIterator>>,
    yielded: u64,
    epochs: Epochs,
}

impl PySource {
    pub(crate) fn new(name: &'static str, iterable: Obj, epochs: Epochs) -> PySource {
        PySource {
            name,
            iterable,
            iter: None,
            yielded: 0,
            epochs,
        }
    }

    fn restart(&mut self, py: Python<'_>, state: Option<&State>) -> PyResult<Result<()>> {
        let iterable = self.iterable.bind(py);
        let stateful = is_stateful(iterable);
        self.yielded = 0;
        let mut skip = 0;
        let mut own_state = None;
        if let Some(state) = state {
            let num_yielded: u64 = match state.get("num_yielded") {
                Ok(n) => n,
                Err(e) => return Ok(Err(e)),
            };
            self.yielded = num_yielded;
            if let Epochs::Counted { epoch, .. } = &mut self.epochs {
                match state.get("epoch") {
                    Ok(e) => *epoch = e,
                    Err(e) => return Ok(Err(e)),
                }
            }
            if stateful {
                match state.child("iterable") {
                    Ok(inner) => own_state = Some(inner),
                    Err(e) => return Ok(Err(e)),
                }
            } else {
                skip = num_yielded;
            }
        } else if let Epochs::Counted {
            epoch,
            started: true,
            updater,
        } = &mut self.epochs
        {
            *epoch = match updater {
                Some(f) => f.call1(py, (*epoch,))?.extract(py)?,
                None => epoch.saturating_add(1),
            };
        }
        if let Epochs::Counted { epoch, started, .. } = &mut self.epochs {
            *started = false;
            // Also before a stateful sampler's own state is loaded (below):
            // torchdata skips it there (its issue #1513), leaving the
            // sampler in the epoch it was built with.
            if iterable.hasattr("set_epoch")? {
                iterable.call_method1("set_epoch", (*epoch,))?;
            }
        }
        if let Some(own_state) = own_state {
            iterable.call_method1("load_state_dict", (state_to_py(py, &own_state)?,))?;
        }
        let iter = iterable.try_iter()?;
        for done in 0..skip {
            if iter.clone().next().transpose()?.is_none() {
                return Ok(Err(Error::bad_state(
                    "/num_yielded",
                    format!(
                        "{} fast-forwarded {skip} items but the iterable ended after {done}",
                        self.name
                    ),
                )));
            }
        }
        self.iter = Some(iter.unbind());
        Ok(Ok(()))
    }
}

impl Node for PySource {
    type Item = Item;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<Item>> {
        let Some(iter) = &self.iter else {
            return Err(Error::NotReset { node: self.name });
        };
        if let Epochs::Counted { started, .. } = &mut self.epochs {
            *started = true;
        }
        let item = attached(|py| {
            let item = iter.bind(py).clone().next().transpose();
            item.map(|item| item.map(Bound::unbind))
        });
        match item {
            Ok(Some(item)) => {
                self.yielded += 1;
                Ok(Some(Item::Py(item)))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(raised(self.name, Some(self.yielded), e)),
        }
    }
}

impl Stateful for PySource {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        let name = self.name;
        attached(|py| self.restart(py, state)).unwrap_or_else(|e| Err(raised(name, None, e)))
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        let mut state = State::new().with("num_yielded", self.yielded)?;
        if let Epochs::Counted { epoch, .. } = &self.epochs {
            state.insert("epoch", *epoch)?;
        }
        attached(|py| {
            let iterable = self.iterable.bind(py);
            if is_stateful(iterable) {
                let inner = iterable.call_method0("state_dict")?;
                let inner = state_from_py(Some(&inner), self.name)?.unwrap_or_default();
                state.insert_child("iterable", inner);
            }
            Ok(state)
        })
        .map_err(|e| raised(self.name, None, e))
    }

    fn describe(&self) -> Description {
        Description::new(self.name)
    }
}

/// A Python `BaseNode` subclass (its own `next`, `reset`, `get_state`) as
/// a node of a Rust pipeline; its state is the dict its `state_dict()`
/// returns, which must be JSON-representable.
pub(crate) struct PyNode {
    node: Obj,
    class: String,
}

impl PyNode {
    pub(crate) fn new(node: &Bound<'_, PyAny>) -> PyResult<PyNode> {
        for method in ["next", "reset", "get_state", "state_dict"] {
            if !node.hasattr(method)? {
                let class = node.get_type().name()?;
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "a {class} is not a node: a source must be a BaseNode (with `next`, \
                     `reset` and `get_state`), not an iterable (wrap one in IterableWrapper)"
                )));
            }
        }
        Ok(PyNode {
            class: node.get_type().name()?.to_string(),
            node: node.clone().unbind(),
        })
    }
}

impl Node for PyNode {
    type Item = Item;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<Item>> {
        let next = attached(|py| match self.node.bind(py).call_method0("__next__") {
            Ok(item) => Ok(Some(Item::Py(item.unbind()))),
            Err(e) if e.is_instance_of::<PyStopIteration>(py) => Ok(None),
            Err(e) => Err(e),
        });
        next.map_err(|e| raised(PYTHON_NODE, None, e))
    }
}

impl Stateful for PyNode {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        attached(|py| {
            let state = state.map(|s| state_to_py(py, s)).transpose()?;
            self.node.bind(py).call_method1("reset", (state,)).map(drop)
        })
        .map_err(|e| raised(PYTHON_NODE, None, e))
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        attached(|py| {
            let state = self.node.bind(py).call_method0("state_dict")?;
            let value = to_value(&state, &self.class, "")?;
            State::from_value(value).map_err(crate::convert::to_py_err)
        })
        .map_err(|e| raised(PYTHON_NODE, None, e))
    }

    fn describe(&self) -> Description {
        Description::new(self.class.clone())
    }

    fn shutdown(&mut self) {
        // Nothing to stop once the interpreter is shutting down.
        Python::try_attach(|py| {
            let node = self.node.bind(py);
            if node.hasattr("shutdown").unwrap_or(false) {
                let _ = node.call_method0("shutdown");
            }
        });
    }
}

/// The items for which a Python predicate returns a true value, counting
/// those it keeps and those it drops (torchdata's `Filter`).
#[derive(Node)]
pub(crate) struct PyFilter {
    #[node(child)]
    source: crate::handle::BoxNode,
    #[node(config)]
    predicate: Obj,
    #[node(state)]
    num_yielded: u64,
    #[node(state)]
    num_filtered: u64,
}

impl PyFilter {
    pub(crate) fn new(source: crate::handle::BoxNode, predicate: Obj) -> PyFilter {
        PyFilter {
            source,
            predicate,
            num_yielded: 0,
            num_filtered: 0,
        }
    }
}

impl Node for PyFilter {
    type Item = Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<Item>> {
        loop {
            let Some(item) = self.source.next(cx)? else {
                return Ok(None);
            };
            let keep = attached(|py| {
                let verdict = self.predicate.call1(py, (item.to_py(py)?,))?;
                verdict.is_truthy(py)
            });
            match keep {
                Ok(true) => {
                    self.num_yielded += 1;
                    return Ok(Some(item));
                }
                Ok(false) => self.num_filtered += 1,
                Err(e) => return Err(raised("Filter", Some(self.num_yielded), e)),
            }
        }
    }
}
