//! [`State`]: a node's checkpoint, a plain JSON object.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

mod checksum;
pub(crate) use self::checksum::CHECKSUM_KEY;

/// A node's checkpoint: a JSON object, keys in insertion order.
///
/// It (de)serialises as the bare object, so a pipeline's state is a plain JSON
/// document any training framework can store. Each `State` also remembers the
/// JSON path it was read from (not serialised), so that every accessor error
/// names the full path, e.g. `/root/source/num_yielded: expected u64, found string`.
///
/// ```
/// use nodes_core::State;
///
/// let mut inner = State::new();
/// inner.insert("num_yielded", 3u64)?;
/// let mut outer = State::new();
/// outer.insert_child("source", inner);
///
/// let json = outer.to_json()?;
/// let back = State::from_json(&json)?;
/// assert_eq!(back.child("source")?.get::<u64>("num_yielded")?, 3);
///
/// let err = back.child("source")?.get::<String>("num_yielded").unwrap_err();
/// assert_eq!(err.to_string(), "bad state at /source/num_yielded: expected a string, found number 3");
/// # Ok::<(), nodes_core::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct State {
    /// Entries in insertion order. A node's state has a handful of keys, so a
    /// vector beats a map, and taking a state costs one allocation per node.
    entries: Vec<(Key, Entry)>,
    /// Where this state sits in the checkpoint it was read from (not saved).
    path: String,
}

/// A state key: static for the keys nodes write (no allocation when taking a
/// state), owned for keys read back from JSON or made at run time.
pub type Key = std::borrow::Cow<'static, str>;

#[derive(Clone)]
enum Entry {
    /// A plain JSON value (a nested object read back from JSON stays here
    /// until [`State::child`] turns it into a `State`).
    Json(Value),
    /// A child node's state.
    Child(State),
    /// A shared string (the loader's pipeline shape), cloned by reference.
    Shared(std::sync::Arc<str>),
    /// The integrity checksum of the state that holds this entry (a loader
    /// state), computed only when that state is serialised.
    Checksum,
}

impl Entry {
    /// The entry as JSON; `owner` is the state that holds it.
    fn to_value(&self, owner: &State) -> Value {
        match self {
            Entry::Json(v) => v.clone(),
            Entry::Child(s) => s.to_value(),
            Entry::Shared(s) => Value::String(s.to_string()),
            Entry::Checksum => Value::String(owner.content_checksum()),
        }
    }
}

/// Equality compares content only, not the path a state was read from.
impl PartialEq for State {
    fn eq(&self, other: &Self) -> bool {
        self.to_value() == other.to_value()
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "State({})", self.to_value())
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_value())
    }
}

/// Serialises as the bare JSON object.
impl Serialize for State {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (key, entry) in &self.entries {
            match entry {
                Entry::Json(v) => map.serialize_entry(key.as_ref(), v)?,
                Entry::Child(s) => map.serialize_entry(key.as_ref(), s)?,
                Entry::Shared(s) => map.serialize_entry(key.as_ref(), s.as_ref())?,
                Entry::Checksum => map.serialize_entry(key.as_ref(), &self.content_checksum())?,
            }
        }
        map.end()
    }
}

/// Deserialises from a JSON object (anything else is an error).
impl<'de> Deserialize<'de> for State {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(deserializer)?;
        Ok(State::from_map(map))
    }
}

impl State {
    /// An empty state at the root path.
    pub fn new() -> Self {
        State::default()
    }

    fn from_map(map: Map<String, Value>) -> Self {
        State {
            entries: map
                .into_iter()
                .map(|(k, v)| (Key::Owned(k), Entry::Json(v)))
                .collect(),
            path: String::new(),
        }
    }

    /// Wraps a JSON value, which must be an object.
    pub fn from_value(value: Value) -> Result<Self> {
        match value {
            Value::Object(map) => Ok(State::from_map(map)),
            other => Err(Error::bad_state(
                "/",
                format!("expected a JSON object, found {}", describe(&other)),
            )),
        }
    }

    /// Parses a JSON document, which must hold an object.
    pub fn from_json(json: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| Error::bad_state("/", format!("not valid JSON: {e}")))?;
        State::from_value(value)
    }

    /// The state as a compact JSON document.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::bad_state(self.path(), e.to_string()))
    }

    /// The state as a pretty-printed JSON document.
    pub fn to_json_pretty(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::bad_state(self.path(), e.to_string()))
    }

    /// The state as a JSON value.
    pub fn to_value(&self) -> Value {
        Value::Object(
            self.entries
                .iter()
                .map(|(k, e)| (k.to_string(), e.to_value(self)))
                .collect(),
        )
    }

    /// The JSON value this state holds.
    pub fn into_value(self) -> Value {
        self.to_value()
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_ref())
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the state has no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The path of this state inside the checkpoint it was read from (`/` at the root).
    pub fn path(&self) -> &str {
        if self.path.is_empty() {
            "/"
        } else {
            &self.path
        }
    }

    /// The path of `key` inside this state.
    pub fn path_of(&self, key: &str) -> String {
        format!("{}/{}", self.path, key)
    }

    fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, e)| e)
    }

    fn put(&mut self, key: Key, entry: Entry) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = entry,
            None => {
                if self.entries.capacity() == 0 {
                    self.entries.reserve_exact(4);
                }
                self.entries.push((key, entry));
            }
        }
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn insert(&mut self, key: impl Into<Key>, value: impl Serialize) -> Result<()> {
        let key = key.into();
        let value = serde_json::to_value(value)
            .map_err(|e| Error::bad_state(self.path_of(&key), format!("cannot serialise: {e}")))?;
        self.put(key, Entry::Json(value));
        Ok(())
    }

    /// Builder form of [`State::insert`].
    pub fn with(mut self, key: impl Into<Key>, value: impl Serialize) -> Result<Self> {
        self.insert(key, value)?;
        Ok(self)
    }

    /// Nests `child` under `key`.
    pub fn insert_child(&mut self, key: impl Into<Key>, child: State) {
        self.put(key.into(), Entry::Child(child));
    }

    /// Stores a shared string under `key` without copying it.
    pub(crate) fn insert_shared(&mut self, key: impl Into<Key>, text: std::sync::Arc<str>) {
        self.put(key.into(), Entry::Shared(text));
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.entry(key).is_some()
    }

    /// A copy of the JSON value under `key`, or an error naming the missing path.
    pub fn value(&self, key: &str) -> Result<Value> {
        self.entry(key)
            .map(|e| e.to_value(self))
            .ok_or_else(|| Error::bad_state(self.path_of(key), "missing key"))
    }

    /// Decodes the value under `key` as `T`.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<T> {
        let owned;
        let value = match self.entry(key) {
            Some(Entry::Json(v)) => v,
            Some(other) => {
                owned = other.to_value(self);
                &owned
            }
            None => return Err(Error::bad_state(self.path_of(key), "missing key")),
        };
        T::deserialize(value).map_err(|e| {
            Error::bad_state(
                self.path_of(key),
                format!("{}, found {}", expected_of(&e), describe(value)),
            )
        })
    }

    /// Decodes the value under `key` as `T`, or `None` when the key is absent.
    pub fn get_opt<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        if self.contains(key) {
            self.get(key).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The nested state under `key`, carrying its full path.
    pub fn child(&self, key: &str) -> Result<State> {
        let path = self.path_of(key);
        match self.entry(key) {
            Some(Entry::Child(s)) => Ok(State {
                entries: s.entries.clone(),
                path,
            }),
            Some(Entry::Json(Value::Object(map))) => Ok(State {
                path,
                ..State::from_map(map.clone())
            }),
            Some(other) => Err(Error::bad_state(
                path,
                format!(
                    "expected a nested state (object), found {}",
                    describe(&other.to_value(self))
                ),
            )),
            None => Err(Error::bad_state(path, "missing key")),
        }
    }

    /// Rejects keys other than `allowed`: a state from another node type is
    /// caught here rather than half-applied.
    pub fn expect_keys(&self, node: &str, allowed: &[&str]) -> Result<()> {
        for key in self.keys() {
            if !allowed.contains(&key) {
                return Err(Error::bad_state(
                    self.path_of(key),
                    format!(
                        "unexpected key for {node} (expected one of: {}); is this state from another pipeline?",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        for key in allowed {
            if *key != VERSION_KEY && !self.contains(key) {
                return Err(Error::bad_state(
                    self.path_of(key),
                    format!("missing key for {node}; is this state from another pipeline?"),
                ));
            }
        }
        Ok(())
    }

    /// Checks the state's format version against `expected`.
    ///
    /// Version 0 means "unversioned": the key must then be absent.
    pub fn expect_version(&self, node: &str, expected: u32) -> Result<()> {
        let found: Option<u32> = self.get_opt(VERSION_KEY)?;
        match (expected, found) {
            (0, None) => Ok(()),
            (e, Some(f)) if e == f => Ok(()),
            (e, f) => Err(Error::bad_state(
                self.path_of(VERSION_KEY),
                format!(
                    "{node} expects state version {e}, found {}",
                    f.map_or_else(|| "no version".to_owned(), |v| v.to_string())
                ),
            )),
        }
    }

    /// Records the state format version (nothing for version 0).
    pub fn set_version(&mut self, version: u32) -> Result<()> {
        if version != 0 {
            self.insert(VERSION_KEY, version)?;
        }
        Ok(())
    }

    /// Re-roots this state at `path` (used when a state is handed down the tree
    /// by a route other than [`State::child`]).
    pub fn at_path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }
}

/// The key under which a versioned node stores its state format version.
pub const VERSION_KEY: &str = "version";

/// A short description of a JSON value, for error messages.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) if s.len() <= 40 => format!("string {s:?}"),
        Value::String(_) => "a string".to_owned(),
        Value::Array(a) => format!("an array of {} values", a.len()),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// Extracts the "expected ..." part of a serde_json error, dropping serde's own
/// description of the found value (we describe it ourselves, uniformly).
fn expected_of(error: &serde_json::Error) -> String {
    let text = error.to_string();
    if let Some(pos) = text.find(", expected ") {
        let expected = &text[pos + 2..];
        let expected = expected.split(" at line ").next().unwrap_or(expected);
        return expected.to_owned();
    }
    text.split(" at line ").next().unwrap_or(&text).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_type_names_path_and_types() {
        let mut inner = State::new();
        inner.insert("n", "seven").unwrap();
        let mut outer = State::new();
        outer.insert_child("source", inner);
        let err = outer.child("source").unwrap().get::<u64>("n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad state at /source/n: expected u64, found string \"seven\""
        );
    }

    #[test]
    fn missing_key_and_non_object_child() {
        let s = State::new().with("x", 1).unwrap();
        assert_eq!(s.get::<u64>("y").unwrap_err().state_path(), Some("/y"));
        let err = s.child("x").unwrap_err();
        assert_eq!(err.state_path(), Some("/x"));
        assert!(err.to_string().contains("found number 1"), "{err}");
    }

    #[test]
    fn serialises_as_bare_object() {
        let s = State::new()
            .with("a", 1)
            .unwrap()
            .with("b", [1, 2])
            .unwrap();
        assert_eq!(s.to_json().unwrap(), r#"{"a":1,"b":[1,2]}"#);
        assert_eq!(State::from_json(r#"{"a":1,"b":[1,2]}"#).unwrap(), s);
        assert!(State::from_json("[1]").unwrap_err().is_bad_state());
        assert!(State::from_json("{").unwrap_err().is_bad_state());
    }

    #[test]
    fn versions_and_keys() {
        let mut s = State::new().with("a", 1).unwrap();
        s.set_version(2).unwrap();
        s.expect_version("N", 2).unwrap();
        let err = s.expect_version("N", 3).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad state at /version: N expects state version 3, found 2"
        );
        assert!(s.expect_keys("N", &["a", "version"]).is_ok());
        let err = s.expect_keys("N", &["b"]).unwrap_err();
        assert_eq!(err.state_path(), Some("/a"));
    }
}
