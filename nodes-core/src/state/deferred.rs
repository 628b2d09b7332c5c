//! Deferred entries: a value captured when a state is taken and turned into
//! JSON only when the state is read, compared, hashed or serialised.
//!
//! Taking a state happens often inside a pipeline (a threaded node may
//! snapshot its source after every item, a training loop may call
//! `state_dict()` after every batch), while serialising it happens when the
//! user saves a checkpoint. A node that keeps many items in its state (a
//! shuffle buffer) therefore hands [`State::insert_deferred`] an immutable,
//! shared snapshot of them: taking the state costs a reference count, and
//! the JSON conversion is paid once, by whoever first needs the JSON (a
//! clone of the state shares it). Every observer sees exactly that JSON.

use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde_json::Value;

use super::{Entry, Key, State, tree::dismantle};

/// A `#[node(state, deferred)]` field: a value that hands out an immutable
/// snapshot of itself, so that taking a state costs O(1) (or close) whatever
/// its size, and the JSON conversion waits until the state is serialised
/// (see [`State::insert_deferred`]).
///
/// The snapshot must serialise exactly as the field does (the field is
/// restored with its `Deserialize`), and must not change once handed out:
/// the node keeps writing to its own copy, e.g. with [`Arc::make_mut`],
/// which copies only while a snapshot is alive. `Arc<T>` is the simplest
/// implementation.
///
/// `#[derive(Node)]` saves a `#[node(state, deferred)]` field this way (and
/// restores it with its `Deserialize`); by hand:
///
/// ```
/// use std::sync::Arc;
/// use nodes_core::{Snapshot, State};
///
/// let mut recent: Arc<Vec<u64>> = Arc::new(vec![1]);
/// let state = State::new().with_deferred("recent", recent.snapshot());
/// Arc::make_mut(&mut recent).push(2); // copies: the state holds the old vector
/// assert_eq!(state.to_json()?, r#"{"recent":[1]}"#);
/// # Ok::<(), nodes_core::Error>(())
/// ```
pub trait Snapshot {
    /// What a snapshot holds; it serialises as the field does. The state
    /// keeps it behind one shared allocation, with its JSON once computed.
    type Frozen: Serialize + Send + Sync + 'static;

    /// An immutable snapshot of the current value.
    fn snapshot(&self) -> Self::Frozen;
}

impl<T: Serialize + Send + Sync + 'static> Snapshot for Arc<T> {
    type Frozen = Arc<T>;

    fn snapshot(&self) -> Arc<T> {
        Arc::clone(self)
    }
}

/// Anything that can become a JSON value (erases the snapshot's type).
pub(super) trait ToJson: Send + Sync {
    fn to_json_value(&self) -> serde_json::Result<Value>;
}

impl<T: Serialize + Send + Sync> ToJson for T {
    fn to_json_value(&self) -> serde_json::Result<Value> {
        serde_json::to_value(self)
    }
}

/// A snapshot and, once computed, its JSON or the error serialising it.
pub(super) struct Deferred<S: ?Sized = dyn ToJson> {
    json: OnceLock<Result<Value, String>>,
    snapshot: S,
}

/// Stands in for a value that failed to serialise where no error can be
/// returned (`to_value`, `Debug`, equality, the checksum).
static NULL: Value = Value::Null;

impl Deferred {
    /// The JSON, or the serialisation error's message.
    pub(super) fn result(&self) -> Result<&Value, &str> {
        self.json
            .get_or_init(|| self.snapshot.to_json_value().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(String::as_str)
    }

    /// The JSON, `null` if the value failed to serialise.
    pub(super) fn json(&self) -> &Value {
        self.result().unwrap_or(&NULL)
    }
}

/// The computed JSON may be nested deeply: dropped without recursion.
impl<S: ?Sized> Drop for Deferred<S> {
    fn drop(&mut self) {
        if let Some(Ok(value)) = self.json.take() {
            dismantle(value);
        }
    }
}

/// The entry of a snapshot, not converted yet.
pub(super) fn entry<T: Serialize + Send + Sync + 'static>(snapshot: T) -> Entry {
    Entry::Deferred(SharedSnapshot::new(snapshot).0)
}

/// A deferred entry made once, for a node that saves the same snapshot in
/// many states (see [`Fields::shared`](super::Fields::shared)): they share
/// it, and its JSON once computed. Not public API.
#[doc(hidden)]
#[derive(Clone)]
pub struct SharedSnapshot(pub(super) Arc<Deferred>);

impl std::fmt::Debug for SharedSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedSnapshot")
    }
}

impl SharedSnapshot {
    /// The entry of `snapshot`, its JSON not computed yet.
    pub fn new<T: Serialize + Send + Sync + 'static>(snapshot: T) -> SharedSnapshot {
        SharedSnapshot(Arc::new(Deferred {
            json: OnceLock::new(),
            snapshot,
        }))
    }
}

impl State {
    /// Stores a shared snapshot under `key`, to be converted to JSON only
    /// when the JSON is needed: when the state is serialised (`to_json`,
    /// serde, [`to_value`](State::to_value), `Debug`, `Display`), compared,
    /// hashed for a loader's checksum, or read back with
    /// [`get`](State::get), [`value`](State::value) or
    /// [`child`](State::child). The conversion happens once (clones of the
    /// state share it) and its result is kept with the state.
    ///
    /// Taking a state then costs O(1) for this key however large `value`
    /// is, as long as `value` is an immutable snapshot (an `Arc` the node
    /// will not change: a node keeps writing to its own copy, e.g. through
    /// a copy-on-write structure or [`Arc::make_mut`]).
    ///
    /// In every observable way the entry is the value inserted with
    /// [`insert`](State::insert), with one difference: an error
    /// serialising `value` is reported when the JSON is needed, not here —
    /// by `to_json`, serde, `get`, `value` and `child`; where no error can be
    /// returned (`to_value`, `Debug`, `Display`, equality, the checksum) the
    /// value reads as `null`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use nodes_core::State;
    ///
    /// let items = Arc::new(vec![3u32, 1, 2]);
    /// let mut state = State::new();
    /// state.insert_deferred("buffer", Arc::clone(&items)); // no JSON yet
    /// assert_eq!(state.to_json()?, r#"{"buffer":[3,1,2]}"#);
    /// assert_eq!(state, State::new().with("buffer", [3, 1, 2])?);
    /// assert_eq!(state.get::<Vec<u32>>("buffer")?, [3, 1, 2]);
    /// # Ok::<(), nodes_core::Error>(())
    /// ```
    pub fn insert_deferred<T>(&mut self, key: impl Into<Key>, value: Arc<T>)
    where
        T: Serialize + Send + Sync + 'static,
    {
        self.body_mut().put(key.into(), entry(value));
    }

    /// Builder form of [`State::insert_deferred`].
    pub fn with_deferred<T>(mut self, key: impl Into<Key>, value: Arc<T>) -> Self
    where
        T: Serialize + Send + Sync + 'static,
    {
        self.insert_deferred(key, value);
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde::Serializer;
    use serde_json::json;

    use super::*;

    /// Counts its serialisations.
    struct Counted {
        value: Value,
        count: AtomicUsize,
    }

    impl Serialize for Counted {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            self.count.fetch_add(1, Ordering::Relaxed);
            self.value.serialize(s)
        }
    }

    /// The same state with `value` under `key`, deferred and plain.
    fn both(value: Value) -> (State, State, Arc<Counted>) {
        let counted = Arc::new(Counted {
            value: value.clone(),
            count: AtomicUsize::new(0),
        });
        let mut deferred = State::new().with("n", 1).unwrap();
        deferred.insert_deferred("v", Arc::clone(&counted));
        deferred.insert("z", "last").unwrap();
        let plain = State::new()
            .with("n", 1)
            .unwrap()
            .with("v", value)
            .unwrap()
            .with("z", "last")
            .unwrap();
        (deferred, plain, counted)
    }

    #[test]
    fn reads_exactly_as_plain_json() {
        let values = [
            json!([1, 2, 3]),
            json!({"b": [1, {"c": null}], "a": "x"}),
            json!("text"),
            json!(18446744073709551615u64),
            json!(-1.5),
            json!([]),
            json!({}),
        ];
        for value in values {
            let (deferred, plain, counted) = both(value.clone());
            assert_eq!(counted.count.load(Ordering::Relaxed), 0, "taken lazily");
            assert_eq!(deferred, plain, "{value}");
            assert_eq!(plain, deferred, "{value}");
            assert_eq!(format!("{deferred:?}"), format!("{plain:?}"));
            assert_eq!(format!("{deferred}"), format!("{plain}"));
            assert_eq!(deferred.to_json().unwrap(), plain.to_json().unwrap());
            assert_eq!(
                deferred.to_json_pretty().unwrap(),
                plain.to_json_pretty().unwrap()
            );
            assert_eq!(deferred.to_value(), plain.to_value());
            assert_eq!(
                serde_json::to_value(&deferred).unwrap(),
                serde_json::to_value(&plain).unwrap()
            );
            assert_eq!(deferred.checksum(), plain.checksum());
            assert_eq!(deferred.value("v").unwrap(), value);
            assert_eq!(deferred.get::<Value>("v").unwrap(), value);
            assert_eq!(
                deferred.child("v").map(|c| c.to_value()).ok(),
                plain.child("v").map(|c| c.to_value()).ok()
            );
            assert_eq!(deferred.depth(), plain.depth());
            // Converted once, however often it was read (clones share it).
            let clone = deferred.clone();
            assert_eq!(clone.to_json().unwrap(), plain.to_json().unwrap());
            assert_eq!(counted.count.load(Ordering::Relaxed), 1, "{value}");
        }
        let (deferred, plain, _) = both(json!([1, 2]));
        let (other, _, _) = both(json!([1, 3]));
        assert_ne!(deferred, other);
        assert_ne!(other, plain);
        assert_ne!(deferred.checksum(), other.checksum());
        // Read back from JSON, it is plain JSON.
        let back = State::from_json(&deferred.to_json().unwrap()).unwrap();
        assert_eq!(back, deferred);
    }

    #[test]
    fn typed_reads_and_nesting() {
        let map: BTreeMap<String, u64> = [("a".to_owned(), 1), ("b".to_owned(), 2)].into();
        let state = State::new().with_deferred("m", Arc::new(map.clone()));
        assert_eq!(state.get::<BTreeMap<String, u64>>("m").unwrap(), map);
        assert_eq!(state.child("m").unwrap().get::<u64>("b").unwrap(), 2);
        assert_eq!(state.child("m").unwrap().path(), "/m");
        let err = state.get::<Vec<u64>>("m").unwrap_err();
        assert_eq!(err.state_path(), Some("/m"));
        assert!(err.to_string().contains("found an object"), "{err}");
        let list = State::new().with_deferred("l", Arc::new(vec![1u8]));
        let err = list.child("l").unwrap_err();
        assert!(
            err.to_string().contains("found an array of 1 values"),
            "{err}"
        );
        // Nested in a parent, and replaced by a later insert.
        let mut outer = State::new();
        outer.insert_child("inner", state.clone());
        assert_eq!(outer.to_json().unwrap(), r#"{"inner":{"m":{"a":1,"b":2}}}"#);
        let mut replaced = state;
        replaced.insert("m", 7).unwrap();
        assert_eq!(replaced.to_json().unwrap(), r#"{"m":7}"#);
    }

    /// A deferred object counts as a level of nesting, as the same object
    /// inserted does; a deferred array does not.
    #[test]
    fn a_deferred_object_counts_as_a_nested_state() {
        let object = json!({"a": {"b": 1}});
        let deferred = State::new().with_deferred("v", Arc::new(object.clone()));
        let plain = State::new().with("v", object).unwrap();
        assert_eq!(deferred.depth(), 3);
        assert_eq!(deferred.depth(), plain.depth());
        let list = State::new().with_deferred("v", Arc::new(json!([{"a": 1}])));
        assert_eq!(list.depth(), 1);
    }

    /// A map with non-string keys does not serialise to JSON.
    fn unserialisable() -> Arc<BTreeMap<(u8, u8), u8>> {
        Arc::new([((1, 2), 3)].into())
    }

    #[test]
    fn errors_are_reported_when_the_json_is_needed() {
        let mut plain = State::new();
        let eager = plain.insert("bad", &*unserialisable()).unwrap_err();
        assert!(eager.to_string().contains("cannot serialise"), "{eager}");
        let state = State::new().with_deferred("bad", unserialisable());
        for err in [
            state.to_json().unwrap_err(),
            state.to_json_pretty().unwrap_err(),
            state.value("bad").unwrap_err(),
            state.get::<Value>("bad").unwrap_err(),
            state.child("bad").unwrap_err(),
        ] {
            assert!(err.is_bad_state(), "{err}");
            assert!(err.to_string().contains("cannot serialise"), "{err}");
            assert!(err.to_string().contains("key must be a string"), "{err}");
        }
        assert!(serde_json::to_string(&state).is_err());
        // Where no error can be returned, it reads as null.
        assert_eq!(state.to_value(), json!({"bad": null}));
        assert_eq!(format!("{state:?}"), r#"State({"bad":null})"#);
        assert_eq!(state, State::new().with("bad", ()).unwrap());
    }
}
