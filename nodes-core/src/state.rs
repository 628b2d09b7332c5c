//! [`State`]: a node's checkpoint, a plain JSON object.

use std::collections::HashMap;
use std::collections::hash_map::Entry as Slot;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

mod checksum;
mod deferred;
mod flat;
mod parse;
mod path;
mod pool;
mod scalar;

use self::deferred::Deferred;
pub use self::deferred::Snapshot;
use self::flat::Flat;
pub use self::flat::StateWriter;
use self::path::Path;

pub(crate) use self::checksum::{Algorithm, CHECKSUM_KEY};

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
///
/// # Deep and wide states
///
/// A pipeline of many nested nodes writes a state nested as deeply, and a
/// sampler over many sources one as wide; both read back in time linear in
/// their size:
///
/// - [`State::from_json`] parses objects without recursion, down to
///   [`State::MAX_DEPTH`] levels;
/// - nested states are shared, not copied: [`State::child`] and
///   [`State::insert_child`] cost O(1) whatever lies below, and a clone
///   copies only its own keys;
/// - a state with many keys finds them through a hash index;
/// - dropping and comparing states do not recurse.
///
/// Serialising (`to_json`, serde, `to_value`, `Debug`) recurses once per
/// level, as do the nodes that wrote the state.
#[derive(Clone, Default)]
pub struct State {
    /// The keys and values, owned or shared with the parent they were read from.
    body: Content,
    /// Where this state sits in the checkpoint it was read from (not saved).
    path: Path,
}

/// A state key: static for the keys nodes write (no allocation when taking a
/// state), owned for keys read back from JSON or made at run time.
pub type Key = std::borrow::Cow<'static, str>;

/// A state's keys and values: its own, or shared with the nested entry of
/// the parent it came from (copied on the first write).
#[derive(Clone)]
enum Content {
    Own(Body),
    Shared(Arc<Body>),
    /// A whole capture as one record (see [`StateWriter`]), nested when
    /// first read.
    Flat(Arc<Flat>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Own(Body::default())
    }
}

/// The entries of a state.
#[derive(Default)]
struct Body {
    /// Entries in insertion order. A node's state has a handful of keys, so a
    /// vector beats a map, and taking a state costs one allocation per node.
    entries: Vec<(Key, Entry)>,
    /// The position of each key, for wide states (built on first lookup).
    index: Index,
    /// The position after the last key found: keys are mostly read in the
    /// order they were written, so this is where the next one usually is.
    hint: AtomicUsize,
}

impl Clone for Body {
    fn clone(&self) -> Self {
        count_work(self.entries.len());
        let mut entries = match self.entries.len() {
            0 => Vec::new(),
            len => pool::entries(len),
        };
        entries.extend(self.entries.iter().cloned());
        Body {
            entries,
            index: Index::default(),
            hint: AtomicUsize::new(0),
        }
    }
}

#[derive(Clone)]
enum Entry {
    /// A JSON value that holds nothing on the heap, inline: most entries
    /// (counters, flags), kept small so that entries are cheap to move.
    Scalar(Scalar),
    /// Any other JSON value, boxed (an object inserted as a value stays
    /// here until [`State::child`] turns it into a `State`). Made only by
    /// [`Entry::json`], so it never holds what `Scalar` would.
    Json(Box<Value>),
    /// A child node's state, shared so that [`State::child`] does not copy
    /// the subtree below it.
    Child(Arc<Body>),
    /// A shared string (the loader's pipeline shape), cloned by reference.
    Shared(std::sync::Arc<str>),
    /// The integrity checksum of the state that holds this entry (a loader
    /// state), computed only when that state is serialised.
    Checksum,
    /// A node's snapshot, turned into JSON only when that is needed (see
    /// [`State::insert_deferred`]); it then reads exactly as `Json` would.
    Deferred(Arc<Deferred>),
}

/// `[]`, for walks that need a reference to the value of
/// [`Scalar::EmptyArray`].
static EMPTY_ARRAY: Value = Value::Array(Vec::new());

/// A JSON value without heap data, as [`Entry::Scalar`] holds it.
#[derive(Clone, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    /// `[]` (a node's empty list of held errors, in every state it takes).
    EmptyArray,
}

/// Whether two keys are equal; a key written from the same static string
/// (every node's own keys) is told by its address, without comparing bytes.
#[inline]
fn same_key(k: &str, key: &str) -> bool {
    k.len() == key.len() && (std::ptr::eq(k.as_ptr(), key.as_ptr()) || k == key)
}

/// Whether two scalar JSON values are written alike (numbers by their
/// kind and bits: `1` and `1.0`, `0.0` and `-0.0` differ).
fn written_alike(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => same_number(a, b),
        _ => a == b,
    }
}

fn same_number(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    a.as_u64() == b.as_u64()
        && a.as_i64() == b.as_i64()
        && a.as_f64().map(f64::to_bits) == b.as_f64().map(f64::to_bits)
}

impl Scalar {
    /// Whether `value` is this scalar, written alike.
    fn written_as(&self, value: &Value) -> bool {
        match (self, value) {
            (Scalar::Null, Value::Null) => true,
            (Scalar::Bool(a), Value::Bool(b)) => a == b,
            (Scalar::Number(a), Value::Number(b)) => same_number(a, b),
            (Scalar::EmptyArray, Value::Array(items)) => items.is_empty(),
            _ => false,
        }
    }

    /// The value as JSON (no allocation).
    fn to_value(&self) -> Value {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => Value::Bool(*b),
            Scalar::Number(n) => Value::Number(n.clone()),
            Scalar::EmptyArray => Value::Array(Vec::new()),
        }
    }
}

impl Entry {
    /// The entry holding `value`: inline when it has no heap data.
    #[inline]
    fn json(value: Value) -> Entry {
        match value {
            Value::Null => Entry::Scalar(Scalar::Null),
            Value::Bool(b) => Entry::Scalar(Scalar::Bool(b)),
            Value::Number(n) => Entry::Scalar(Scalar::Number(n)),
            Value::Array(items) if items.is_empty() => Entry::Scalar(Scalar::EmptyArray),
            value => Entry::Json(Box::new(value)),
        }
    }

    /// The entry as JSON; `owner` is the state that holds it.
    fn to_value(&self, owner: &Body) -> Value {
        match self {
            Entry::Scalar(s) => s.to_value(),
            Entry::Json(v) => (**v).clone(),
            Entry::Child(body) => body.to_value(),
            Entry::Shared(s) => Value::String(s.to_string()),
            Entry::Checksum => Value::String(owner.content_checksum()),
            Entry::Deferred(d) => d.json().clone(),
        }
    }
}

/// Drops a JSON value without recursion (serde_json's own drop recurses
/// once per level of nesting): containers are taken apart through an
/// explicit stack, scalars dropped on the way.
fn dismantle(value: Value) {
    let nested = |v: &Value| matches!(v, Value::Array(_) | Value::Object(_));
    // A value with no container inside a container drops in one level (the
    // common case, e.g. a list of numbers): no stack to allocate.
    let shallow = match &value {
        Value::Array(items) => !items.iter().any(nested),
        Value::Object(map) => !map.values().any(nested),
        _ => true,
    };
    if shallow {
        return;
    }
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items.into_iter().filter(nested)),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v).filter(nested)),
            _ => {}
        }
    }
}

impl Body {
    /// The body as a JSON value, built without recursion (nested states
    /// first, then the objects that hold them).
    fn to_value(&self) -> Value {
        // Each open object: its body, the entries still to convert, and the
        // members converted so far.
        type Open<'a> = (
            &'a Body,
            std::slice::Iter<'a, (Key, Entry)>,
            Map<String, Value>,
        );
        let mut stack: Vec<(Open<'_>, Option<&str>)> =
            vec![((self, self.entries.iter(), Map::new()), None)];
        loop {
            let Some(((owner, entries, members), _)) = stack.last_mut() else {
                unreachable!("the root is popped only to return");
            };
            let owner: &Body = owner;
            match entries.next() {
                Some((key, Entry::Child(child))) => {
                    stack.push(((child, child.entries.iter(), Map::new()), Some(key)));
                }
                Some((key, entry)) => {
                    members.insert(key.to_string(), entry.to_value(owner));
                }
                None => {
                    let Some(((_, _, members), key)) = stack.pop() else {
                        unreachable!("checked above");
                    };
                    let value = Value::Object(members);
                    match (stack.last_mut(), key) {
                        (Some(((_, _, parent), _)), Some(key)) => {
                            parent.insert(key.to_owned(), value);
                        }
                        _ => return value,
                    }
                }
            }
        }
    }

    /// How many levels of objects this body holds (1 for a flat one),
    /// counted without recursion.
    fn depth(&self) -> usize {
        let mut depth = 0;
        let mut level: Vec<&Body> = vec![self];
        while !level.is_empty() {
            depth += 1;
            level = level
                .iter()
                .flat_map(|b| b.entries.iter())
                .filter_map(|(_, e)| match e {
                    Entry::Child(c) => Some(&**c),
                    _ => None,
                })
                .collect();
        }
        depth
    }

    /// Writes the body as compact JSON, nested states through an explicit
    /// stack.
    fn write_json(&self, out: &mut impl fmt::Write) -> fmt::Result {
        fn json(out: &mut impl fmt::Write, value: &(impl Serialize + ?Sized)) -> fmt::Result {
            out.write_str(&serde_json::to_string(value).map_err(|_| fmt::Error)?)
        }
        // Each open object with its entries still to write.
        let mut stack: Vec<(&Body, std::slice::Iter<'_, (Key, Entry)>)> =
            vec![(self, self.entries.iter())];
        out.write_char('{')?;
        let mut first = true;
        while let Some((owner, top)) = stack.last_mut() {
            let owner: &Body = owner;
            let Some((key, entry)) = top.next() else {
                stack.pop();
                out.write_char('}')?;
                first = false;
                continue;
            };
            if !first {
                out.write_char(',')?;
            }
            json(out, key.as_ref())?;
            out.write_char(':')?;
            first = false;
            match entry {
                Entry::Scalar(s) => json(out, &s.to_value())?,
                Entry::Json(v) => json(out, &**v)?,
                Entry::Shared(s) => json(out, s.as_ref())?,
                Entry::Checksum => json(out, &owner.content_checksum())?,
                Entry::Deferred(d) => json(out, d.json())?,
                Entry::Child(child) => {
                    out.write_char('{')?;
                    stack.push((child, child.entries.iter()));
                    first = true;
                }
            }
        }
        Ok(())
    }

    /// The position of `key` in `entries`.
    fn position(&self, key: &str) -> Option<usize> {
        let hint = self.hint.load(Ordering::Relaxed);
        let found = if self
            .entries
            .get(hint)
            .is_some_and(|(k, _)| same_key(k, key))
        {
            count_work(1);
            Some(hint)
        } else if self.entries.len() < INDEXED_FROM {
            count_work(self.entries.len());
            self.entries.iter().position(|(k, _)| same_key(k, key))
        } else {
            count_work(1);
            self.index
                .0
                .get_or_init(|| Box::new(KeyIndex::new(&self.entries)))
                .find(&self.entries, key)
        };
        if let Some(i) = found {
            self.hint.store(i + 1, Ordering::Relaxed);
        }
        found
    }

    fn entry(&self, key: &str) -> Option<&Entry> {
        self.position(key).map(|i| &self.entries[i].1)
    }

    /// Stores `entry` under `key`, replacing what was there.
    #[inline]
    fn put(&mut self, key: Key, entry: Entry) {
        // Inlined, with the lookup apart: the entry is written straight
        // into its slot instead of being passed down by value.
        match self.position_for_put(&key) {
            Some(i) => self.entries[i].1 = entry,
            None => self.push_unindexed(key, entry),
        }
    }

    /// Where `key` is, or `None` after recording (in the index, if any)
    /// that it will be appended.
    fn position_for_put(&mut self, key: &str) -> Option<usize> {
        if self.index.0.get().is_none() && self.entries.len() >= INDEXED_FROM {
            let _ = self.index.0.set(Box::new(KeyIndex::new(&self.entries)));
        }
        // An index, once there, is kept complete.
        match self.index.0.get_mut() {
            Some(index) => {
                count_work(1);
                index.find_or_add(&self.entries, key)
            }
            None => {
                count_work(self.entries.len().max(1));
                self.entries.iter().position(|(k, _)| k == key)
            }
        }
    }

    /// Stores `entry` under `key`, a key the caller knows is not there yet
    /// (a node writing its state's fields): a narrow state appends without
    /// looking for it.
    #[inline]
    fn put_new(&mut self, key: Key, entry: Entry) {
        // With an index, kept complete; without one, appended (a lookup
        // builds it): a wide sampler's 10,000 sources are written without
        // hashing a key.
        if self.index.0.get().is_some() {
            return self.put(key, entry);
        }
        debug_assert!(
            self.entries.len() >= INDEXED_FROM || self.entries.iter().all(|(k, _)| *k != key),
            "key {key:?} written twice"
        );
        count_work(1);
        self.push_unindexed(key, entry);
    }

    /// Appends an entry whose key is known to be new (the index, if any,
    /// is rebuilt on the next lookup).
    #[inline]
    fn push_new(&mut self, key: Key, entry: Entry) {
        if self.index.0.get().is_some() {
            self.index = Index::default();
        }
        self.push_unindexed(key, entry);
    }

    /// Appends an entry, leaving the index as it is.
    #[inline]
    fn push_unindexed(&mut self, key: Key, entry: Entry) {
        if self.entries.len() == self.entries.capacity() {
            self.grow();
        }
        self.entries.push((key, entry));
    }

    /// Makes room for one more entry: a recycled vector for the first.
    #[cold]
    fn grow(&mut self) {
        if self.entries.capacity() == 0 {
            self.entries = pool::entries(1);
        } else {
            self.entries.reserve(1);
        }
    }
}

// How many levels of nested states the current thread is dropping by
// recursion (see `Drop for Body`).
thread_local!(static DROP_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });

/// Levels of nested states dropped by recursion before the explicit stack
/// takes over: far within any thread's stack.
const SHALLOW_DROP: usize = 32;

/// Drops nested states, and nested JSON values, without recursion: a state
/// nested a million levels deep must not overflow the stack when it goes
/// away.
/// A state's own shared box goes back to the thread's pool when nobody else
/// holds it, as nested ones do: `par_map` takes a snapshot state after every
/// item, and its workers get them back to drop (`Cursor::take_retired`).
impl Drop for State {
    fn drop(&mut self) {
        match &self.body {
            Content::Shared(_) => {
                if let Content::Shared(shell) = std::mem::take(&mut self.body) {
                    pool::recycle_shell(shell);
                }
            }
            Content::Flat(_) => {
                if let Content::Flat(flat) = std::mem::take(&mut self.body) {
                    flat::recycle(flat);
                }
            }
            Content::Own(_) => {}
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        self.clear();
    }
}

impl Body {
    /// Empties the body. Its entries vector, and the nested states nobody
    /// else holds, go back to the thread's [`pool`] for the next state.
    fn clear(&mut self) {
        if self.entries.capacity() == 0 {
            return;
        }
        // A state a few levels deep (every pipeline's, dropped after each
        // `state_dict()`) is emptied by plain recursion, without allocating
        // a stack: nested bodies recurse here at most `SHALLOW_DROP` levels
        // deep, deeper ones take the explicit stack of `drop_deep`.
        let depth = DROP_DEPTH.get();
        if depth >= SHALLOW_DROP {
            self.drop_deep();
            // Emptied as below: a recycled body holds nothing on the heap.
            self.index = Index::default();
            return;
        }
        DROP_DEPTH.set(depth + 1);
        let mut entries = std::mem::take(&mut self.entries);
        // One pass that leaves nothing for the generic drop to look at,
        // from the back (no drain to close).
        while let Some((_, entry)) = entries.pop() {
            match entry {
                // Own nothing on the heap: nothing to drop.
                Entry::Scalar(_) => {}
                // Nested JSON values keep their own non-recursive drop.
                Entry::Json(value) => dismantle(*value),
                // Only a nested state nobody else holds is recycled.
                Entry::Child(child) => pool::recycle_shell(child),
                Entry::Deferred(deferred) => pool::recycle_deferred(deferred),
                Entry::Shared(_) | Entry::Checksum => {}
            }
        }
        DROP_DEPTH.set(depth);
        pool::recycle_entries(entries);
        if self.index.0.get().is_some() {
            self.index = Index::default();
        }
        *self.hint.get_mut() = 0;
    }

    /// Drops the entries of a deep state through an explicit stack.
    fn drop_deep(&mut self) {
        let mut pending = vec![std::mem::take(&mut self.entries)];
        while let Some(entries) = pending.pop() {
            for (_, entry) in entries {
                match entry {
                    Entry::Child(child) => {
                        if let Some(mut child) = Arc::into_inner(child) {
                            // `child` is dropped with no entries left.
                            pending.push(std::mem::take(&mut child.entries));
                        }
                    }
                    Entry::Json(value) => dismantle(*value),
                    _ => {}
                }
            }
        }
    }
}

/// Equality compares content only, not the path a state was read from, nor
/// the order of keys (as JSON objects compare). It walks nested states
/// without recursion.
impl PartialEq for State {
    fn eq(&self, other: &Self) -> bool {
        let mut pending = Vec::new();
        if !shallow_eq(self.body(), other.body(), &mut pending) {
            return false;
        }
        while let Some((a, b)) = pending.pop() {
            if !shallow_eq(&a, &b, &mut pending) {
                return false;
            }
        }
        true
    }
}

/// Compares the entries of `a` and `b`, leaving pairs of nested states in
/// `pending` for the caller.
fn shallow_eq(a: &Body, b: &Body, pending: &mut Vec<(Arc<Body>, Arc<Body>)>) -> bool {
    if a.entries.len() != b.entries.len() {
        return false;
    }
    for (i, (key, x)) in a.entries.iter().enumerate() {
        let y = match b.entries.get(i) {
            Some((k, y)) if k == key => y,
            _ => match b.entry(key) {
                Some(y) => y,
                None => return false,
            },
        };
        // A deferred entry compares as the JSON it stands for.
        let (mut x_json, mut y_json): (Option<Entry>, Option<Entry>) = (None, None);
        let x = match x {
            Entry::Deferred(d) => &*x_json.insert(Entry::json(d.json().clone())),
            x => x,
        };
        let y = match y {
            Entry::Deferred(d) => &*y_json.insert(Entry::json(d.json().clone())),
            y => y,
        };
        let equal = match (x, y) {
            // `Entry::json` keeps each value in one form: no cross cases.
            (Entry::Scalar(x), Entry::Scalar(y)) => x == y,
            (Entry::Json(x), Entry::Json(y)) => x == y,
            (Entry::Shared(x), Entry::Shared(y)) => x == y,
            (Entry::Shared(s), Entry::Json(t)) | (Entry::Json(t), Entry::Shared(s)) => {
                t.as_str() == Some(&**s)
            }
            // Equal contents have equal checksums.
            (Entry::Checksum, Entry::Checksum) => true,
            (Entry::Checksum, Entry::Json(t)) => t.as_str().is_some_and(|t| a.checksum_matches(t)),
            (Entry::Json(t), Entry::Checksum) => t.as_str().is_some_and(|t| b.checksum_matches(t)),
            (Entry::Child(x), Entry::Child(y)) => {
                pending.push((Arc::clone(x), Arc::clone(y)));
                true
            }
            (Entry::Child(c), Entry::Json(m)) | (Entry::Json(m), Entry::Child(c)) => {
                match m.as_object() {
                    Some(m) => pending.push((Arc::clone(c), Arc::new(body_of_map(m.clone())))),
                    None => return false,
                }
                true
            }
            _ => false,
        };
        if !equal {
            return false;
        }
    }
    true
}

/// `State(<compact JSON>)`, written without recursion (a failed assertion
/// on a deep state prints it rather than overflowing the stack).
impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("State(")?;
        self.body().write_json(f)?;
        f.write_str(")")
    }
}

/// The compact JSON text, written without recursion.
impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.body().write_json(f)
    }
}

/// Serialises as the bare JSON object.
impl Serialize for State {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        self.body().serialize(serializer)
    }
}

impl Serialize for Body {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (key, entry) in &self.entries {
            match entry {
                Entry::Scalar(s) => map.serialize_entry(key.as_ref(), &s.to_value())?,
                Entry::Json(v) => map.serialize_entry(key.as_ref(), &**v)?,
                Entry::Child(s) => map.serialize_entry(key.as_ref(), &**s)?,
                Entry::Shared(s) => map.serialize_entry(key.as_ref(), s.as_ref())?,
                Entry::Checksum => map.serialize_entry(key.as_ref(), &self.content_checksum())?,
                Entry::Deferred(d) => match d.result() {
                    Ok(v) => map.serialize_entry(key.as_ref(), v)?,
                    Err(e) => {
                        return Err(serde::ser::Error::custom(format_args!(
                            "cannot serialise {key}: {e}"
                        )));
                    }
                },
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

/// The entries of a JSON object, nested objects becoming nested states
/// (without recursion, so the depth of `map` does not matter).
fn body_of_map(map: Map<String, Value>) -> Body {
    // The objects being converted, innermost last, each with its key in its
    // parent and the members still to convert.
    let mut open: Vec<(Key, Body, serde_json::map::IntoIter)> = Vec::new();
    let mut current = (Key::Borrowed(""), Body::default(), map.into_iter());
    loop {
        match current.2.next() {
            Some((key, Value::Object(inner))) => {
                open.push(current);
                current = (Key::Owned(key), Body::default(), inner.into_iter());
            }
            // The keys of a JSON object are distinct: no lookup needed.
            Some((key, value)) => current.1.push_new(Key::Owned(key), Entry::json(value)),
            None => match open.pop() {
                Some(mut parent) => {
                    let (key, child, _) = current;
                    parent.1.push_new(key, Entry::Child(Arc::new(child)));
                    current = parent;
                }
                None => return current.1,
            },
        }
    }
}

impl State {
    /// The deepest nesting of objects [`State::from_json`] accepts: a million
    /// levels, far beyond any pipeline (each nested node needs some stack to
    /// run), while keeping a malicious document from building an unbounded
    /// tree.
    pub const MAX_DEPTH: usize = parse::MAX_DEPTH;

    /// An empty state at the root path.
    pub fn new() -> Self {
        State::default()
    }

    fn from_body(body: Body) -> Self {
        State {
            body: Content::Own(body),
            path: Path::default(),
        }
    }

    fn from_content(body: Content) -> Self {
        State {
            body,
            path: Path::default(),
        }
    }

    /// The content, leaving the state empty (dropped without running its
    /// drop, as in `into_shared`).
    fn into_content(mut self) -> Content {
        let body = std::mem::take(&mut self.body);
        drop(std::mem::take(&mut self.path));
        std::mem::forget(self);
        body
    }

    /// The entries as a shared box, if they are in one (to name the paths
    /// of nested states by position).
    fn shared_body(&self) -> Option<&Arc<Body>> {
        match &self.body {
            Content::Shared(body) => Some(body),
            Content::Flat(flat) => flat.built(),
            Content::Own(_) => None,
        }
    }

    fn from_map(map: Map<String, Value>) -> Self {
        State::from_body(body_of_map(map))
    }

    fn body(&self) -> &Body {
        match &self.body {
            Content::Own(body) => body,
            Content::Shared(body) => body,
            Content::Flat(flat) => flat.body(),
        }
    }

    /// The entries, to change them (copied first if they are shared).
    #[inline]
    fn body_mut(&mut self) -> &mut Body {
        if !matches!(&self.body, Content::Own(_)) {
            self.unshare();
        }
        match &mut self.body {
            Content::Own(body) => body,
            Content::Shared(_) | Content::Flat(_) => unreachable!("made owned above"),
        }
    }

    /// Copies shared entries to own them (kept out of the inlined
    /// `body_mut`: taking a state writes to states it owns).
    #[cold]
    fn unshare(&mut self) {
        match std::mem::take(&mut self.body) {
            Content::Shared(shared) => self.body = Content::Own(Arc::unwrap_or_clone(shared)),
            Content::Flat(flat) => {
                self.body = Content::Own(Arc::unwrap_or_clone(Flat::into_shared(flat)));
            }
            own @ Content::Own(_) => self.body = own,
        }
    }

    /// The entries as an owned body (copied if they are shared).
    fn into_body(mut self) -> Body {
        match std::mem::take(&mut self.body) {
            Content::Own(body) => body,
            Content::Shared(body) => Arc::unwrap_or_clone(body),
            Content::Flat(flat) => Arc::unwrap_or_clone(Flat::into_shared(flat)),
        }
    }

    /// The entries as a shareable nested entry (no copy if already shared).
    #[inline]
    fn into_shared(mut self) -> Arc<Body> {
        let body = std::mem::take(&mut self.body);
        // What is left holds nothing on the heap but the path: dropped on
        // its own, without running the state's drop (every nested state
        // passes here).
        drop(std::mem::take(&mut self.path));
        std::mem::forget(self);
        match body {
            Content::Own(body) => pool::shared(body),
            Content::Shared(body) => body,
            Content::Flat(flat) => Flat::into_shared(flat),
        }
    }

    /// The same state with its entries behind a shared reference: clones of
    /// it, and the states it is nested into, then share them instead of
    /// copying them (for a large part that many states repeat).
    ///
    /// ```
    /// use nodes_core::State;
    ///
    /// let names = State::new().with("a", true)?.share();
    /// let mut state = State::new();
    /// state.insert_child("flags", names.clone());
    /// assert_eq!(state.child("flags")?, names);
    /// # Ok::<(), nodes_core::Error>(())
    /// ```
    pub fn share(self) -> State {
        let path = self.path.clone();
        State {
            body: Content::Shared(self.into_shared()),
            path,
        }
    }

    /// Whether `self` and `other` are the same state: entries shared (not
    /// copied) and read from the same path, so equal in content and in
    /// every path an error would name. A state and its clones, or the same
    /// child read twice, are the same; two states that merely hold equal
    /// entries may not be (use `==` to compare content).
    ///
    /// For a node that checks a state and then applies it: what it decoded
    /// while checking stays valid for the same state.
    ///
    /// ```
    /// use nodes_core::State;
    ///
    /// let mut outer = State::new();
    /// outer.insert_child("a", State::new().with("n", 1)?);
    /// assert!(outer.child("a")?.is_same(&outer.child("a")?));
    /// assert!(!outer.child("a")?.is_same(&State::new().with("n", 1)?));
    /// # Ok::<(), nodes_core::Error>(())
    /// ```
    pub fn is_same(&self, other: &State) -> bool {
        // A shared body never changes (a write copies it first); an owned
        // one cannot be told apart from a copy cheaply, so it is not.
        let shared = match (&self.body, &other.body) {
            (Content::Shared(a), Content::Shared(b)) => Arc::ptr_eq(a, b),
            (Content::Flat(a), Content::Flat(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        shared && self.path.text() == other.path.text()
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
    ///
    /// Nested objects are parsed without recursion, so a state as deep as
    /// any pipeline can write reads back; a document nested deeper than
    /// [`State::MAX_DEPTH`] objects is an [`Error::BadState`], as is invalid
    /// JSON. Other values (arrays, strings, numbers) are parsed by
    /// `serde_json`, with its nesting limit of 128.
    pub fn from_json(json: &str) -> Result<Self> {
        parse::parse(json).map(State::from_body)
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
    ///
    /// A deferred entry whose value cannot be serialised (see
    /// [`State::insert_deferred`]) shows as `null` here, and such a state
    /// then fails to load at that path: use [`State::to_json`], which
    /// returns the serialisation error instead, to write checkpoints.
    pub fn to_value(&self) -> Value {
        self.body().to_value()
    }

    /// The JSON value this state holds.
    pub fn into_value(self) -> Value {
        self.to_value()
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.body().entries.iter().map(|(k, _)| k.as_ref())
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.body().entries.len()
    }

    /// Whether the state has no keys.
    pub fn is_empty(&self) -> bool {
        self.body().entries.is_empty()
    }

    /// The path of this state inside the checkpoint it was read from (`/` at the root).
    pub fn path(&self) -> &str {
        let path = self.path.text();
        if path.is_empty() { "/" } else { path }
    }

    /// The path of `key` inside this state.
    pub fn path_of(&self, key: &str) -> String {
        pointer_join(self.path.text(), key)
    }

    fn entry(&self, key: &str) -> Option<&Entry> {
        self.body().entry(key)
    }

    #[inline]
    fn put(&mut self, key: Key, entry: Entry) {
        self.body_mut().put(key, entry);
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn insert(&mut self, key: impl Into<Key>, value: impl Serialize) -> Result<()> {
        let key = key.into();
        let value = self.json_for(&key, value)?;
        self.put(key, Entry::json(value));
        Ok(())
    }

    /// `value` as JSON, to store under `key`.
    fn json_for(&self, key: &str, value: impl Serialize) -> Result<Value> {
        serde_json::to_value(value)
            .map_err(|e| Error::bad_state(self.path_of(key), format!("cannot serialise: {e}")))
    }

    /// Stores a string under `key` (no serialisation step).
    pub(crate) fn insert_str(&mut self, key: impl Into<Key>, text: String) {
        self.put(key.into(), Entry::Json(Box::new(Value::String(text))));
    }

    /// [`State::insert`] of a key this state does not hold yet (see
    /// `Body::put_new`).
    pub(crate) fn insert_new(&mut self, key: &'static str, value: impl Serialize) -> Result<()> {
        let value = self.json_for(key, value)?;
        self.body_mut()
            .put_new(Key::Borrowed(key), Entry::json(value));
        Ok(())
    }

    /// [`State::insert_child`] of a key this state does not hold yet.
    pub(crate) fn insert_child_new(&mut self, key: impl Into<Key>, child: State) {
        let child = child.into_shared();
        self.body_mut().put_new(key.into(), Entry::Child(child));
    }

    /// Nests `child` under `key`, found at position `i` without a lookup (a
    /// state copied from a template that holds every key in order).
    pub(crate) fn insert_child_at(&mut self, i: usize, key: &'static str, child: State) {
        self.put_at(i, key, Entry::Child(child.into_shared()));
    }

    /// Stores a number under `key` at position `i`, as
    /// [`insert_child_at`](State::insert_child_at) does (no serialisation).
    pub(crate) fn insert_u64_at(&mut self, i: usize, key: &'static str, n: u64) {
        self.put_at(i, key, Entry::Scalar(Scalar::Number(n.into())));
    }

    /// Writes `entry` at position `i` if `key` is there, else by lookup.
    #[inline]
    fn put_at(&mut self, i: usize, key: &'static str, entry: Entry) {
        let body = self.body_mut();
        match body.entries.get_mut(i) {
            Some((k, slot)) if same_key(k, key) => *slot = entry,
            _ => body.put(Key::Borrowed(key), entry),
        }
    }

    /// Reserves room for at least `additional` more keys: a node about to
    /// insert many (a sampler's sources) saves the regrowth.
    pub fn reserve(&mut self, additional: usize) {
        let body = self.body_mut();
        if body.entries.capacity() == 0 {
            body.entries = pool::entries(additional);
        }
        body.entries.reserve(additional);
        let len = body.entries.len() + additional;
        if len >= INDEXED_FROM && body.index.0.get().is_none() {
            let mut index = KeyIndex::new(&body.entries);
            index.positions.reserve(len - body.entries.len());
            let _ = body.index.0.set(Box::new(index));
        }
    }

    /// Builder form of [`State::insert`].
    pub fn with(mut self, key: impl Into<Key>, value: impl Serialize) -> Result<Self> {
        self.insert(key, value)?;
        Ok(self)
    }

    /// Nests `child` under `key`.
    pub fn insert_child(&mut self, key: impl Into<Key>, child: State) {
        self.put(key.into(), Entry::Child(child.into_shared()));
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
    ///
    /// A nested state is converted without recursion; the value returned is
    /// then the caller's (serde_json drops a `Value` recursively).
    pub fn value(&self, key: &str) -> Result<Value> {
        self.value_ref(key).map(std::borrow::Cow::into_owned)
    }

    /// The JSON value under `key`, borrowed where the state holds it as
    /// JSON (a nested state is converted, as by [`State::value`]): for
    /// reading a wide value without copying it.
    ///
    /// ```
    /// use nodes_core::State;
    ///
    /// let state = State::new().with("names", ["a", "b"])?;
    /// let names = state.value_ref("names")?;
    /// assert_eq!(names.as_array().map(Vec::len), Some(2));
    /// # Ok::<(), nodes_core::Error>(())
    /// ```
    pub fn value_ref(&self, key: &str) -> Result<std::borrow::Cow<'_, Value>> {
        match self.entry(key) {
            Some(Entry::Json(v)) => Ok(std::borrow::Cow::Borrowed(&**v)),
            Some(Entry::Deferred(d)) => self.deferred_json(key, d).map(std::borrow::Cow::Borrowed),
            Some(e) => Ok(std::borrow::Cow::Owned(e.to_value(self.body()))),
            None => Err(Error::bad_state(self.path_of(key), "missing key")),
        }
    }

    /// The JSON of a deferred entry, or the error serialising it.
    fn deferred_json<'a>(&self, key: &str, deferred: &'a Deferred) -> Result<&'a Value> {
        deferred
            .result()
            .map_err(|e| Error::bad_state(self.path_of(key), format!("cannot serialise: {e}")))
    }

    /// Decodes the value under `key` as `T`.
    ///
    /// Reading a nested state this way neither builds nor drops it with
    /// recursion; decoding it as a recursive type (a tree of `T`) recurses
    /// in `T`'s own `Deserialize`, once per level: check the nesting with
    /// [`State::depth`] first when the state comes from outside.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<T> {
        // A counter or a flag: decoded from a copy on the stack (nothing to
        // free), the common case of every node's restore.
        if let Some(Entry::Scalar(scalar)) = self.entry(key) {
            let value = scalar.to_value();
            return T::deserialize(&value).map_err(|e| self.decode_error(key, &e, &value));
        }
        let value = self.value_ref(key)?;
        let decoded = T::deserialize(&*value).map_err(|e| self.decode_error(key, &e, &value));
        if let std::borrow::Cow::Owned(value) = value {
            dismantle(value);
        }
        decoded
    }

    /// The error of decoding `value`, read under `key`.
    #[cold]
    fn decode_error(&self, key: &str, error: &serde_json::Error, value: &Value) -> Error {
        Error::bad_state(
            self.path_of(key),
            format!("{}, found {}", expected_of(error), describe(value)),
        )
    }

    /// How many levels of nested states this state holds, itself included:
    /// 1 for a state without nested states, `n + 1` for one whose deepest
    /// nested state is `n` levels down (a state read by
    /// [`from_json`](State::from_json) holds every object under a key as a
    /// nested state; arrays and what is inside them are plain values, parsed
    /// with serde_json's limit of 128 levels). Counted without recursion, so
    /// a state read from outside can be checked before it is decoded into a
    /// recursive type (see [`State::get`]).
    pub fn depth(&self) -> usize {
        self.body().depth()
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
    ///
    /// The nested state is shared, not copied: walking down a state costs
    /// O(1) per level however much lies below.
    pub fn child(&self, key: &str) -> Result<State> {
        let index = self.body().position(key);
        let body = match index.map(|i| &self.body().entries[i].1) {
            Some(Entry::Child(body)) => Content::Shared(Arc::clone(body)),
            Some(Entry::Json(v)) if v.is_object() => match &**v {
                Value::Object(map) => Content::Own(body_of_map(map.clone())),
                _ => unreachable!("checked above"),
            },
            Some(Entry::Deferred(d)) => match self.deferred_json(key, d)? {
                Value::Object(map) => Content::Own(body_of_map(map.clone())),
                other => {
                    return Err(Error::bad_state(
                        self.path_of(key),
                        format!(
                            "expected a nested state (object), found {}",
                            describe(other)
                        ),
                    ));
                }
            },
            Some(other) => {
                return Err(Error::bad_state(
                    self.path_of(key),
                    format!(
                        "expected a nested state (object), found {}",
                        describe(&other.to_value(self.body()))
                    ),
                ));
            }
            None => return Err(Error::bad_state(self.path_of(key), "missing key")),
        };
        let shared = index.and_then(|i| Some((self.shared_body()?, i)));
        Ok(State {
            body,
            path: self.path.join(key, shared),
        })
    }

    /// Rejects keys other than `allowed`: a state from another node type is
    /// caught here rather than half-applied.
    ///
    /// Linear in the number of keys, however many there are.
    pub fn expect_keys(&self, node: &str, allowed: &[&str]) -> Result<()> {
        count_work(self.len());
        // The common case: exactly the allowed keys, in order.
        if self.len() == allowed.len() && self.keys().zip(allowed).all(|(k, a)| same_key(k, a)) {
            return Ok(());
        }
        // A set for long lists (a sampler's sources), a scan for short ones.
        let set: Option<std::collections::HashSet<&str>> =
            (allowed.len() >= INDEXED_FROM).then(|| allowed.iter().copied().collect());
        let is_allowed = |key: &str| match &set {
            Some(set) => set.contains(key),
            None => allowed.contains(&key),
        };
        count_work(match set {
            Some(_) => allowed.len() + self.len(),
            None => allowed.len() + self.len() * allowed.len(),
        });
        for key in self.keys() {
            if !is_allowed(key) {
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

thread_local!(static WORK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) });

/// Records `n` units of work (entries visited, paths made) done by state
/// operations on this thread: what [`crate::testing::state_work`] reports,
/// so that a test can show a restore's work grows linearly, without a clock.
#[inline]
pub(crate) fn count_work(n: usize) {
    WORK.with(|w| w.set(w.get().wrapping_add(n as u64)));
}

/// The work counted on this thread so far (see [`count_work`]).
pub(crate) fn work_done() -> u64 {
    WORK.with(std::cell::Cell::get)
}

/// States with at least this many keys find them through a [`KeyIndex`].
const INDEXED_FROM: usize = 16;

/// A lazily built [`KeyIndex`]; a clone starts without one.
#[derive(Default)]
struct Index(OnceLock<Box<KeyIndex>>);

impl Clone for Index {
    fn clone(&self) -> Self {
        Index::default()
    }
}

/// The position of each key of a wide state, by a hash of the key.
struct KeyIndex {
    positions: HashMap<u64, usize, BuildHasherDefault<Identity>>,
    /// Two keys share a hash: look keys up by scanning instead.
    collided: bool,
}

impl KeyIndex {
    fn new(entries: &[(Key, Entry)]) -> Self {
        count_work(entries.len());
        let mut index = KeyIndex {
            positions: HashMap::with_capacity_and_hasher(entries.len(), Default::default()),
            collided: false,
        };
        for (i, (key, _)) in entries.iter().enumerate() {
            if index.positions.insert(hash(key), i).is_some() {
                index.collided = true;
            }
        }
        index
    }

    fn find(&self, entries: &[(Key, Entry)], key: &str) -> Option<usize> {
        if self.collided {
            count_work(entries.len());
            return entries.iter().position(|(k, _)| k == key);
        }
        let i = *self.positions.get(&hash(key))?;
        (entries[i].0 == key).then_some(i)
    }

    /// The position of `key`, or `None` after recording that it will be
    /// appended at the end of `entries`.
    fn find_or_add(&mut self, entries: &[(Key, Entry)], key: &str) -> Option<usize> {
        if self.collided {
            return entries.iter().position(|(k, _)| k == key);
        }
        match self.positions.entry(hash(key)) {
            Slot::Occupied(slot) => {
                let i = *slot.get();
                if entries[i].0 == key {
                    return Some(i);
                }
                // Another key with the same hash: fall back to scanning.
                self.collided = true;
                entries.iter().position(|(k, _)| k == key)
            }
            Slot::Vacant(slot) => {
                slot.insert(entries.len());
                None
            }
        }
    }
}

/// FNV-1a: a fast, fixed hash for short keys.
fn hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A hasher for keys that are already hashes.
#[derive(Default)]
struct Identity(u64);

impl std::hash::Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// `path` (a JSON Pointer, `""` at the root) extended by `key`.
///
/// Paths in errors are JSON Pointers (RFC 6901): a key's `~` is written `~0`
/// and its `/` `~1`, so a key such as `dataset_node_states/s0` (a sampler's
/// child in a pipeline description) names one key, not two levels.
pub fn pointer_join(path: &str, key: &str) -> String {
    let mut out = String::with_capacity(path.len() + key.len() + 1);
    out.push_str(path);
    push_pointer_token(&mut out, key);
    out
}

/// Appends `/` and `key`, escaped as a JSON Pointer token.
fn push_pointer_token(out: &mut String, key: &str) {
    out.push('/');
    if !key.contains(['~', '/']) {
        out.push_str(key);
        return;
    }
    for c in key.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

// Reads by position, for wide states whose keys a node knows in order.
impl State {
    /// The flags of a state holding exactly `keys`, in that order, each a
    /// bool: read in place, no lookup. `None` for any other state (the
    /// caller's checks then name what is wrong).
    pub(crate) fn bools_in_order(&self, keys: &[&str]) -> Option<Vec<bool>> {
        let entries = &self.body().entries;
        count_work(entries.len());
        if entries.len() != keys.len() {
            return None;
        }
        let mut flags = Vec::with_capacity(keys.len());
        for ((k, entry), key) in entries.iter().zip(keys) {
            match entry {
                Entry::Scalar(Scalar::Bool(flag)) if same_key(k, key) => flags.push(*flag),
                _ => return None,
            }
        }
        Some(flags)
    }

    /// The nested states of a state holding exactly `keys`, in that
    /// order, each a nested state: read in place, no lookup, each with
    /// its path. `None` for any other state.
    pub(crate) fn children_in_order(&self, keys: &[&str]) -> Option<Vec<State>> {
        let entries = &self.body().entries;
        count_work(entries.len());
        if entries.len() != keys.len() {
            return None;
        }
        let shared = self.shared_body();
        let mut children = Vec::with_capacity(keys.len());
        for (i, ((k, entry), key)) in entries.iter().zip(keys).enumerate() {
            match entry {
                Entry::Child(body) if same_key(k, key) => children.push(State {
                    body: Content::Shared(Arc::clone(body)),
                    path: self.path.join(k, shared.map(|own| (own, i))),
                }),
                _ => return None,
            }
        }
        Some(children)
    }
}

// Additions for the derive's leaf states (see `__private::leaf_state`).
impl State {
    /// Writes `values` (taken from the option) over this state's, in place,
    /// when nobody else holds it and it has exactly `keys`, then `version`
    /// if not 0, as `leaf_state` writes them: the same state as a new one,
    /// without building one. Otherwise leaves both untouched and says so.
    pub(crate) fn rewrite_leaf<const K: usize>(
        &mut self,
        keys: &[&'static str; K],
        values: &mut Option<[Value; K]>,
        version: u32,
    ) -> bool {
        let Content::Shared(body) = &mut self.body else {
            return false;
        };
        let Some(body) = Arc::get_mut(body) else {
            return false;
        };
        let len = body.entries.len();
        let (fields, rest) = body.entries.split_at_mut(K.min(len));
        let versioned = match rest {
            [] => version == 0,
            [(key, Entry::Scalar(Scalar::Number(n)))] => {
                version != 0 && key == VERSION_KEY && n.as_u64() == Some(version.into())
            }
            _ => false,
        };
        if !versioned
            || fields.len() != K
            || !fields
                .iter()
                .zip(keys)
                .all(|((k, _), key)| same_key(k, key))
        {
            return false;
        }
        let Some(values) = values.take() else {
            return false;
        };
        for ((_, entry), value) in fields.iter_mut().zip(values) {
            *entry = Entry::json(value);
        }
        true
    }

    /// Stores a JSON value under a key this state does not hold yet (see
    /// `Body::put_new`), as is: no second serialisation.
    /// Whether this state's entries start with `keys`, in order, holding
    /// scalars written as `values` are (`0.0` and `-0.0` differ): read in
    /// place, no lookup.
    pub(crate) fn leaf_holds<const K: usize>(
        &self,
        keys: &[&'static str; K],
        values: &[Value; K],
    ) -> bool {
        let entries = &self.body().entries;
        entries.len() >= K
            && entries
                .iter()
                .zip(keys)
                .zip(values)
                .all(|(((k, entry), key), value)| {
                    same_key(k, key)
                        && match entry {
                            Entry::Scalar(held) => held.written_as(value),
                            Entry::Json(held) => written_alike(held, value),
                            _ => false,
                        }
                })
    }

    pub(crate) fn insert_json_new(&mut self, key: &'static str, value: Value) {
        self.body_mut()
            .put_new(Key::Borrowed(key), Entry::json(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell_of(state: &State) -> *const Body {
        match &state.body {
            Content::Shared(body) => Arc::as_ptr(body),
            Content::Own(_) | Content::Flat(_) => std::ptr::null(),
        }
    }

    /// A shared state nobody else holds gives its box back to the thread's
    /// pool when dropped (a per-item snapshot allocates nothing in steady
    /// state); one still held elsewhere does not.
    #[test]
    fn a_dropped_shared_state_recycles_its_box() {
        let first = State::new().with("n", 1).unwrap().share();
        let shell = shell_of(&first);
        let before = pool::shells_kept();
        drop(first);
        assert_eq!(pool::shells_kept(), before + 1);
        let second = State::new().with("n", 2).unwrap().share();
        assert_eq!(shell_of(&second), shell);
        assert_eq!(pool::shells_kept(), before);
        assert_eq!(second.get::<u64>("n").unwrap(), 2);
        let kept = second.clone();
        drop(second);
        assert_eq!(pool::shells_kept(), before);
        assert_eq!(kept.get::<u64>("n").unwrap(), 2);
    }

    /// Children read by position in their parent's body (no key copied)
    /// name the same paths as children whose keys are copied, at every
    /// depth, and after the parent's entries changed.
    #[test]
    fn paths_read_by_position_name_the_keys() {
        let json =
            r#"{"m": {"a/b": {"x": {"y": 1}}, "c": {"z": 2}, "wide": {"k0": {}, "k1": {}}}}"#;
        let root = State::from_json(json).unwrap();
        let m = root.child("m").unwrap();
        let ab = m.child("a/b").unwrap();
        assert_eq!(ab.path(), "/m/a~1b");
        let x = ab.child("x").unwrap();
        assert_eq!(x.path(), "/m/a~1b/x");
        assert_eq!(x.child("y").unwrap_err().state_path(), Some("/m/a~1b/x/y"));
        assert_eq!(m.child("c").unwrap().path_of("z"), "/m/c/z");
        let wide = m.child("wide").unwrap();
        let k1 = wide.child("k1").unwrap();
        let k0 = wide.child("k0").unwrap();
        drop((root, m, wide));
        assert_eq!((k0.path(), k1.path()), ("/m/wide/k0", "/m/wide/k1"));
        // The same path, other entries: its children still name their keys.
        let mut changed = State::from_json(json).unwrap().child("m").unwrap();
        let before = changed.child("c").unwrap();
        changed.insert("new", 1).unwrap();
        let mut changed = changed.share();
        changed.insert_child("d", State::new());
        let changed = changed.share();
        assert_eq!(changed.child("d").unwrap().path(), "/m/d");
        assert_eq!(changed.child("c").unwrap().path(), "/m/c");
        assert_eq!(before.path(), "/m/c");
    }

    #[test]
    fn paths_are_json_pointers_with_escaped_keys() {
        let state = State::from_json(r#"{"a/b": {"c~d": {"e": 1}}}"#).unwrap();
        let inner = state.child("a/b").unwrap().child("c~d").unwrap();
        assert_eq!(inner.path(), "/a~1b/c~0d");
        let err = inner.get::<String>("e").unwrap_err();
        assert_eq!(err.state_path(), Some("/a~1b/c~0d/e"));
        let value = state.to_value();
        assert_eq!(value.pointer("/a~1b/c~0d/e"), Some(&serde_json::json!(1)));
        assert_eq!(state.path_of("x/y"), "/x~1y");
    }

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

    /// Through serde_json, for comparison (shallow documents only).
    fn via_serde(json: &str) -> Result<State> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| Error::bad_state("/", format!("not valid JSON: {e}")))?;
        State::from_value(value)
    }

    #[test]
    fn parses_like_serde_json() {
        for json in [
            "{}",
            " { } ",
            r#"{"a":1,"b":[1,2,{"c":null}],"d":{"e":"x\"}\u00e9\ud83d\ude00","f":{}}}"#,
            "{\"n\":-1.5e3,\"t\":true,\"f\":false,\"z\":null,\"big\":18446744073709551615}",
            "{\n  \"a\" : { \"b\" :\t[ ] } ,\r\n \"c\":\"}{][,:\" }\n",
            r#"{"dup":1,"other":2,"dup":{"x":3}}"#,
            r#"{"k\u0041":"v","":{"":{}}}"#,
        ] {
            let ours = State::from_json(json).unwrap();
            let theirs = via_serde(json).unwrap();
            assert_eq!(ours, theirs, "{json}");
            assert_eq!(ours.to_json().unwrap(), theirs.to_json().unwrap(), "{json}");
            assert_eq!(ours.to_value(), theirs.to_value(), "{json}");
        }
        let dup = State::from_json(r#"{"dup":1,"other":2,"dup":{"x":3}}"#).unwrap();
        assert_eq!(dup.keys().collect::<Vec<_>>(), ["dup", "other"]);
        assert_eq!(dup.child("dup").unwrap().get::<u64>("x").unwrap(), 3);
    }

    #[test]
    fn rejects_what_serde_json_rejects() {
        for json in [
            "",
            "{",
            "}",
            "{,}",
            r#"{"a"}"#,
            r#"{"a":}"#,
            r#"{"a":1,}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":1}}"#,
            r#"{"a":1} x"#,
            r#"{a:1}"#,
            r#"{"a":tru}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":[1}"#,
            r#"{"a":"x}"#,
            r#"{"a":"\q"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":"\ud800"}"#,
            r#"{"a":{"b":1}"#,
            r#"{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"#,
            "[1]",
            "3",
            "\"{}\"",
        ] {
            assert!(via_serde(json).is_err(), "serde_json accepts {json}");
            let err = State::from_json(json).unwrap_err();
            assert!(err.is_bad_state(), "{json}: {err}");
            assert_eq!(err.state_path(), Some("/"), "{json}");
        }
        let err = State::from_json("{\n  \"a\": 1,\n  \"b\": tru\n}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad state at /: not valid JSON: invalid value at line 3 column 11"
        );
        let err = State::from_json("{\"a\": 1 2}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad state at /: not valid JSON: expected `,` or `}` at line 1 column 9"
        );
    }

    /// `{"k":{"k":...{"leaf":1}...}}`, `depth` objects in all.
    fn nested_json(depth: usize) -> String {
        let mut json = "{\"k\":".repeat(depth - 1);
        json.push_str("{\"leaf\":1}");
        json.push_str(&"}".repeat(depth - 1));
        json
    }

    /// Runs on the test thread's own stack (2 MiB under `cargo test`): deep
    /// states parse, compare, walk and drop without recursion.
    #[test]
    fn deep_states_need_no_stack() {
        let depth = 200_000;
        let json = nested_json(depth);
        let state = State::from_json(&json).unwrap();
        assert_eq!(state, State::from_json(&json).unwrap());
        let mut other =
            State::from_json(&nested_json(depth).replace("\"leaf\":1", "\"leaf\":2")).unwrap();
        assert_ne!(state, other);
        // Walk to the bottom, each level a cheap step, paths still exact.
        let mut at = state.child("k").unwrap();
        for _ in 2..depth {
            at = at.child("k").unwrap();
        }
        assert_eq!(at.get::<u64>("leaf").unwrap(), 1);
        assert_eq!(at.path().len(), 2 * (depth - 1));
        assert_eq!(
            at.path_of("leaf"),
            format!("{}/leaf", "/k".repeat(depth - 1))
        );
        // Shown, measured, and read as a plain value, without recursion
        // (decoding a non-recursive type from it fails at once).
        let shown = format!("{state}");
        assert_eq!(shown, json);
        assert_eq!(format!("{state:?}"), format!("State({json})"));
        assert_eq!(state.depth(), depth);
        assert_eq!(at.depth(), 1);
        let err = state.get::<u64>("k").unwrap_err();
        assert_eq!(err.state_path(), Some("/k"));
        assert!(err.to_string().contains("found an object"), "{err}");
        // An in-memory state holding a deep plain value drops it without
        // recursion too.
        let deep_array = (0..depth).fold(serde_json::json!(1), |v, _| Value::Array(vec![v]));
        let mut holder = Map::new();
        holder.insert("v".to_owned(), deep_array);
        drop(State::from_value(Value::Object(holder)).unwrap());
        let shallow = State::from_json(&nested_json(100)).unwrap();
        assert_eq!(
            shallow.value("k").unwrap(),
            serde_json::from_str::<Value>(&nested_json(99)).unwrap()
        );
        drop(state);
        assert_eq!(at.get::<u64>("leaf").unwrap(), 1);
        // A state built by inserting children drops without recursion too.
        for _ in 0..depth {
            let mut parent = State::new();
            parent.insert_child("k", other);
            other = parent;
        }
        drop(other);
        drop(at);
    }

    #[test]
    fn depth_is_bounded() {
        let err = State::from_json(&nested_json(State::MAX_DEPTH + 1)).unwrap_err();
        assert!(err.is_bad_state(), "{err}");
        assert!(
            err.to_string()
                .contains("nested deeper than 1000000 levels"),
            "{err}"
        );
    }

    #[test]
    fn wide_states_find_keys_and_keep_order() {
        let n = 10_000;
        let mut json = String::from("{");
        for i in 0..n {
            json.push_str(&format!("\"key{i}\":{{\"i\":{i}}},"));
        }
        json.push_str("\"key7\":{\"i\":-7}}");
        let state = State::from_json(&json).unwrap();
        assert_eq!(state.len(), n);
        assert_eq!(state.keys().nth(7), Some("key7"));
        assert_eq!(state.child("key7").unwrap().get::<i64>("i").unwrap(), -7);
        for i in (0..n).step_by(97) {
            assert_eq!(
                state.child(&format!("key{i}")).unwrap().path(),
                format!("/key{i}")
            );
        }
        assert!(!state.contains("key10000"));
        let names: Vec<String> = (0..n).map(|i| format!("key{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        state.expect_keys("N", &names).unwrap();
        assert_eq!(
            state
                .expect_keys("N", &names[1..])
                .unwrap_err()
                .state_path(),
            Some("/key0")
        );
        // Built by inserts, looked up and replaced through the index.
        let mut built = State::new();
        for i in (0..n).rev() {
            built.insert(format!("key{i}"), i).unwrap();
        }
        built.insert("key7", -7).unwrap();
        assert_eq!(built.len(), n);
        assert_eq!(built.get::<i64>("key7").unwrap(), -7);
        assert_eq!(built.clone().get::<i64>("key9").unwrap(), 9);
        // Equality ignores key order, as JSON objects do.
        let mut reversed = State::new();
        for i in 0..n {
            let value = if i == 7 { -7 } else { i as i64 };
            reversed.insert(format!("key{i}"), value).unwrap();
        }
        assert_eq!(built, reversed);
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
