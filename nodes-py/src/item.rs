//! [`Item`]: what flows through the bindings' pipelines. Native stages keep
//! their data in Rust (lines, JSON records, token sequences, batches); a
//! Python object is one more kind, and each crosses into Python only where
//! Python needs it: at `next`, or as a callable's argument.

use numpy::{IntoPyArray, PyArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use std::borrow::Cow;

use pyo3::exceptions::PyValueError;
use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

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
    /// A JSON record (boxed: items move through buffers, and a record is
    /// several times the size of the other kinds).
    Json(Box<Value>),
    /// A JSON record as read: its validated text, parsed when a stage or
    /// Python needs it (saved in a state as the JSON value).
    Raw(#[serde(with = "raw_as_value")] Box<RawValue>),
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
            Item::Raw(raw) => Item::Raw(raw.clone()),
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
            Item::Raw(raw) => to_py(py, &parsed(&raw)?)?.unbind(),
        })
    }

    /// The Python object of this item, keeping the item.
    pub(crate) fn to_py(&self, py: Python<'_>) -> PyResult<Obj> {
        match self {
            Item::Py(obj) => Ok(obj.clone_ref(py)),
            Item::Text(text) => Ok(PyString::new(py, text).into_any().unbind()),
            Item::Json(value) => Ok(to_py(py, value)?.unbind()),
            Item::Raw(raw) => Ok(to_py(py, &parsed(raw)?)?.unbind()),
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
            Item::Json(_) | Item::Raw(_) => "JSON record",
            Item::Tokens(_) => "token sequence",
            Item::List(_) => "batch",
        }
    }
}

/// The value of a record's text (valid JSON: its reader checked it).
fn parsed(raw: &RawValue) -> PyResult<Value> {
    serde_json::from_str(raw.get()).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The string at `field` of a record's text, borrowed where it has no
/// escapes, without building the rest of the record.
pub(crate) fn field_of<'a>(raw: &'a RawValue, field: &str) -> Result<Option<Cow<'a, str>>, String> {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    FieldOf(field)
        .deserialize(&mut de)
        .map_err(|e| e.to_string())
}

/// The string at one field of a JSON record, as [`Item::Text`], read in the
/// reader's one pass over the line; a record without it is a bad record.
pub(crate) struct TextField<'f>(pub(crate) &'f str);

impl<'de> DeserializeSeed<'de> for TextField<'_> {
    type Value = Item;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Item, D::Error> {
        match FieldOf(self.0).deserialize(deserializer)? {
            Some(text) => Ok(Item::Text(text.into_owned())),
            None => Err(D::Error::custom(format!(
                "the record has no string field {:?}",
                self.0
            ))),
        }
    }
}

/// Finds one field of a JSON object, skipping the others.
struct FieldOf<'f>(&'f str);

impl<'de> DeserializeSeed<'de> for FieldOf<'_> {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FieldOf<'_> {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a JSON object with a string at {:?}", self.0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == self.0 && found.is_none() {
                found = Some(map.next_value::<BorrowedText<'de>>()?.0);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// A JSON string, borrowed from the input where it has no escapes.
struct BorrowedText<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for BorrowedText<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(s))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(s))
            }
        }
        deserializer.deserialize_str(Text).map(BorrowedText)
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

/// A record's text in a state, as its JSON value.
mod raw_as_value {
    use super::*;

    pub(super) fn serialize<S: Serializer>(
        raw: &RawValue,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let value: Value = serde_json::from_str(raw.get()).map_err(S::Error::custom)?;
        value.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Box<RawValue>, D::Error> {
        let value = Value::deserialize(deserializer)?;
        serde_json::value::to_raw_value(&value).map_err(D::Error::custom)
    }
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
