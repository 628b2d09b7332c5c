//! Crossing the boundary: states between `State` and plain Python dicts,
//! and errors between `nodes_std::Error` and Python exceptions.

use nodes_std::{Error, State};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

pyo3::create_exception!(
    _native,
    NodesError,
    PyRuntimeError,
    "A pipeline failed in Rust: the message names the node and where."
);

/// A Python item as the Rust nodes carry it.
pub(crate) type Obj = Py<PyAny>;

/// Runs `f` attached to the interpreter; once the interpreter is shutting
/// down, an error instead of a wait that would never end.
pub(crate) fn attached<R>(f: impl for<'py> FnOnce(Python<'py>) -> PyResult<R>) -> PyResult<R> {
    Python::try_attach(f).unwrap_or_else(|| {
        Err(NodesError::new_err(
            "the Python interpreter is shutting down",
        ))
    })
}

/// The JSON value of `obj`, which must be JSON-representable: `node`
/// and the key path name the first value that is not.
pub(crate) fn to_value(obj: &Bound<'_, PyAny>, node: &str, path: &str) -> PyResult<Value> {
    let refuse = |what: String| {
        PyValueError::new_err(format!(
            "the state of {node} is not JSON-representable: {what} at key {path:?}"
        ))
    };
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(obj.extract()?));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(n) = obj.extract::<i64>() {
            return Ok(n.into());
        }
        return match obj.extract::<u64>() {
            Ok(n) => Ok(n.into()),
            Err(_) => Err(refuse("an integer beyond 64 bits".into())),
        };
    }
    if obj.is_instance_of::<PyFloat>() {
        let x: f64 = obj.extract()?;
        return Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| refuse(format!("the float {x}, which JSON cannot hold")));
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(Value::String(obj.extract()?));
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut map = Map::with_capacity(dict.len());
        for (key, value) in dict.iter() {
            let Ok(key) = key.extract::<String>() else {
                return Err(refuse(format!("a key that is not a string ({key:?})")));
            };
            let inner = format!("{path}/{key}");
            map.insert(key, to_value(&value, node, &inner)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (i, value) in obj.try_iter()?.enumerate() {
            out.push(to_value(&value?, node, &format!("{path}/{i}"))?);
        }
        return Ok(Value::Array(out));
    }
    let type_name = obj.get_type().name()?;
    Err(refuse(format!("a value of type {type_name}")))
}

/// The Python object of a JSON value: dicts, lists, and scalars.
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// A state as a Python dict. The state is written out with the GIL
/// released: a shuffle buffer's Python items are written by the thread that
/// holds the buffer, which takes the GIL for them.
pub(crate) fn state_to_py<'py>(py: Python<'py>, state: &State) -> PyResult<Bound<'py, PyAny>> {
    let value = py.detach(|| state.to_value());
    to_py(py, &value)
}

/// A Python dict (or `None`) as a state; `node` names the owner in errors.
pub(crate) fn state_from_py(obj: Option<&Bound<'_, PyAny>>, node: &str) -> PyResult<Option<State>> {
    match obj {
        None => Ok(None),
        Some(obj) if obj.is_none() => Ok(None),
        Some(obj) => {
            let value = to_value(obj, node, "")?;
            State::from_value(value).map(Some).map_err(to_py_err)
        }
    }
}

/// The Python exception for a pipeline error. An exception a Python
/// callable or node raised comes back as itself, with a note naming
/// where in the pipeline it was raised.
pub(crate) fn to_py_err(error: Error) -> PyErr {
    Python::attach(|py| {
        if let Some(original) = python_exception(&error) {
            let original = original.clone_ref(py);
            let note = format!("raised in the pipeline: {error}");
            // Notes exist from Python 3.11; on older ones the message stands.
            let value = original.value(py);
            if value.hasattr("add_note").unwrap_or(false) {
                let _ = value.call_method1("add_note", (note,));
            }
            return original;
        }
        match error {
            Error::InvalidArgument { .. }
            | Error::BadState { .. }
            | Error::InvalidPipeline { .. } => PyValueError::new_err(error.to_string()),
            other => NodesError::new_err(other.to_string()),
        }
    })
}

/// The Python exception inside a user error, if it holds one.
fn python_exception(error: &Error) -> Option<&PyErr> {
    match error {
        Error::User { source, .. } => source.downcast_ref::<PyErr>(),
        _ => None,
    }
}
