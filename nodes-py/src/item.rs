//! [`Item`]: what flows through the bindings' pipelines. Native stages keep
//! their data in Rust (lines, JSON records, token sequences, batches); a
//! Python object is one more kind, and each crosses into Python only where
//! Python needs it: at `next`, or as a callable's argument.

use numpy::{IntoPyArray, PyArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::convert::{Obj, attached, to_py, to_value};

/// One item of a bindings pipeline.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Item {
    /// A Python object (saved in a state as JSON, so it must be
    /// JSON-representable where a state holds it: in a shuffle buffer).
    Py(#[serde(with = "as_json")] Obj),
    /// A line of text.
    Text(String),
    /// A JSON record.
    Json(Value),
    /// A sequence of token ids: a numpy `uint32` array in Python.
    Tokens(Vec<u32>),
    /// A batch: a Python list, or one 2-D `uint32` array when every element
    /// is a token sequence of the same length.
    List(Vec<Item>),
}

impl Clone for Item {
    fn clone(&self) -> Item {
        match self {
            Item::Py(obj) => Python::attach(|py| Item::Py(obj.clone_ref(py))),
            Item::Text(s) => Item::Text(s.clone()),
            Item::Json(v) => Item::Json(v.clone()),
            Item::Tokens(t) => Item::Tokens(t.clone()),
            Item::List(items) => Item::List(items.clone()),
        }
    }
}

impl Item {
    /// The Python object of this item, moving its data where it can.
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Obj> {
        Ok(match self {
            Item::Py(obj) => obj,
            Item::Tokens(tokens) => tokens.into_pyarray(py).into_any().unbind(),
            Item::List(items) => match same_length_tokens(&items) {
                Some(len) => {
                    let rows = items.len();
                    let mut flat = Vec::with_capacity(rows * len);
                    for item in items {
                        if let Item::Tokens(tokens) = item {
                            flat.extend_from_slice(&tokens);
                        }
                    }
                    let array = flat.into_pyarray(py).reshape([rows, len])?;
                    array.into_any().unbind()
                }
                None => {
                    let list = PyList::empty(py);
                    for item in items {
                        list.append(item.into_py(py)?)?;
                    }
                    list.into_any().unbind()
                }
            },
            Item::Text(text) => PyString::new(py, &text).into_any().unbind(),
            Item::Json(value) => to_py(py, &value)?.unbind(),
        })
    }

    /// The Python object of this item, keeping the item.
    pub(crate) fn to_py(&self, py: Python<'_>) -> PyResult<Obj> {
        match self {
            Item::Py(obj) => Ok(obj.clone_ref(py)),
            Item::Text(text) => Ok(PyString::new(py, text).into_any().unbind()),
            Item::Json(value) => Ok(to_py(py, value)?.unbind()),
            other => other.clone().into_py(py),
        }
    }

    /// The token ids of this item: a token sequence, or a Python sequence
    /// (a list or an array) of non-negative integers.
    pub(crate) fn into_tokens(self) -> PyResult<Vec<u32>> {
        match self {
            Item::Tokens(tokens) => Ok(tokens),
            Item::Py(obj) => attached(|py| {
                let obj = obj.bind(py);
                obj.try_iter()?.map(|t| t?.extract::<u32>()).collect()
            }),
            other => Err(PyTypeError::new_err(format!(
                "a {} is not a sequence of token ids: tokenize it first",
                other.kind()
            ))),
        }
    }

    /// The elements of a batch (or of any Python iterable item).
    pub(crate) fn into_elements(self) -> PyResult<Vec<Item>> {
        match self {
            Item::List(items) => Ok(items),
            Item::Tokens(tokens) => attached(|py| {
                tokens
                    .into_iter()
                    .map(|t| Ok(Item::Py(t.into_pyobject(py)?.into_any().unbind())))
                    .collect()
            }),
            Item::Py(obj) => attached(|py| {
                obj.bind(py)
                    .try_iter()?
                    .map(|element| Ok(Item::Py(element?.unbind())))
                    .collect()
            }),
            other => Err(PyTypeError::new_err(format!(
                "a {} is not a batch to unbatch",
                other.kind()
            ))),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Item::Py(_) => "Python object",
            Item::Text(_) => "line of text",
            Item::Json(_) => "JSON record",
            Item::Tokens(_) => "token sequence",
            Item::List(_) => "batch",
        }
    }
}

/// The common length of a non-empty batch of token sequences, if it is one.
fn same_length_tokens(items: &[Item]) -> Option<usize> {
    let Some(Item::Tokens(first)) = items.first() else {
        return None;
    };
    let len = first.len();
    items
        .iter()
        .all(|item| matches!(item, Item::Tokens(t) if t.len() == len))
        .then_some(len)
}

/// A Python object in a state, as the JSON value it is equal to.
mod as_json {
    use super::*;

    pub(super) fn serialize<S: Serializer>(obj: &Obj, serializer: S) -> Result<S::Ok, S::Error> {
        let value = attached(|py| to_value(obj.bind(py), "an item in a state", ""))
            .map_err(|e| S::Error::custom(e.to_string()))?;
        value.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Obj, D::Error> {
        let value = Value::deserialize(deserializer)?;
        attached(|py| to_py(py, &value).map(Bound::unbind))
            .map_err(|e| D::Error::custom(e.to_string()))
    }
}
