//! [`State`]: a node's checkpoint, a JSON object whose entries are shared
//! copy-on-write, and its accessors. The walks that must not recurse live in
//! `tree.rs`; parsing, paths, the checksum, deferred entries and turning a
//! field's value into an entry each have a file of their own.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use triomphe::Arc as Shared;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

mod checksum;
mod deferred;
mod encode;
mod parse;
mod path;
mod tree;

pub(crate) use self::checksum::CHECKSUM_KEY;
pub use self::checksum::digest_bytes;
use self::deferred::Deferred;
pub use self::deferred::{SharedSnapshot, Snapshot};
use self::path::Path;
pub use self::path::pointer_join;

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
///   [`State::insert_child`] cost O(1) whatever lies below, a clone costs
///   O(1), and the first write to a state shared with a clone copies only
///   its own keys;
/// - a state with many keys finds them through a hash index;
/// - dropping and comparing states do not recurse.
///
/// Serialising (`to_json`, serde) recurses once per level, as do the nodes
/// that wrote the state; `to_value`, `Debug` and `Display` do not.
#[derive(Clone, Default)]
pub struct State {
    /// The keys and values, shared with clones and with the parent they
    /// were read from (copied on the first write while shared).
    body: Shared<Body>,
    /// Where this state sits in the checkpoint it was read from (not saved).
    path: Path,
}

/// A state key: static for the keys nodes write (no allocation when taking a
/// state), owned for keys read back from JSON or made at run time.
pub type Key = Cow<'static, str>;

/// The entries of a state.
#[derive(Default)]
struct Body {
    /// Entries in insertion order: a node's state has a handful of keys, so
    /// a vector beats a map.
    entries: Entries,
    /// Entries that follow `entries`, shared rather than copied: the keys
    /// every state of a loader's pipeline has (see [`Fields::share_tail`]).
    tail: Option<Shared<Body>>,
    /// The position of each key, for wide states (built on first lookup);
    /// boxed, since most bodies never build one and each new body is
    /// copied into its allocation.
    #[allow(clippy::box_collection)]
    index: OnceLock<Box<HashMap<Key, usize>>>,
    /// Entries visited, written or copied in this body, nested states
    /// opened from it, and checksum steps over it: what
    /// [`crate::testing::state_work`] adds up.
    work: AtomicU64,
    /// At least the number of levels nested below (`u32::MAX` once a value
    /// nests containers): how deep dropping it by recursion would go.
    height: u32,
}

/// A state's entries: the first four inline (most nodes have at most four
/// keys), so that a node's state is one allocation.
type Entries = smallvec::SmallVec<[(Key, Entry); 4]>;

/// The entries of a body in order, its shared tail's last.
type Iter<'a> =
    std::iter::Chain<std::slice::Iter<'a, (Key, Entry)>, std::slice::Iter<'a, (Key, Entry)>>;

#[derive(Clone)]
enum Entry {
    /// `null`, a boolean or a number, inline.
    Null,
    Bool(bool),
    Number(serde_json::Number),
    /// `[]` (a node's empty list of held errors, in every state it takes),
    /// inline.
    EmptyArray,
    /// A string, shared by clones.
    Str(Arc<str>),
    /// An array, boxed to keep entries small.
    Array(Box<Value>),
    /// A nested state, shared so that [`State::child`] does not copy it.
    Child(Shared<Body>),
    /// A node's snapshot, turned into JSON only when that is needed (see
    /// [`State::insert_deferred`]); it then reads exactly as that JSON.
    Deferred(Arc<Deferred>),
    /// The integrity checksum of the state that holds this entry (a loader
    /// state), computed only when that state is serialised.
    Checksum,
}

impl Entry {
    /// The entry holding `value`: an object becomes a nested state.
    #[inline]
    fn of(value: Value) -> Entry {
        match value {
            Value::Null => Entry::Null,
            Value::Bool(b) => Entry::Bool(b),
            Value::Number(n) => Entry::Number(n),
            Value::String(s) => Entry::Str(s.into()),
            Value::Array(items) if items.is_empty() => Entry::EmptyArray,
            Value::Array(_) => Entry::Array(Box::new(value)),
            Value::Object(map) => Entry::Child(Shared::new(tree::body_of_map(map))),
        }
    }

    /// The entry as JSON, borrowed where it is held as JSON; `owner` holds
    /// it. A nested state is converted without recursion.
    fn leaf<'a>(&'a self, owner: &Body) -> Cow<'a, Value> {
        match self {
            Entry::Null => Cow::Owned(Value::Null),
            Entry::Bool(b) => Cow::Owned(Value::Bool(*b)),
            Entry::Number(n) => Cow::Owned(Value::Number(n.clone())),
            Entry::EmptyArray => Cow::Owned(Value::Array(Vec::new())),
            Entry::Str(s) => Cow::Owned(Value::String(s.to_string())),
            Entry::Array(v) => Cow::Borrowed(v),
            Entry::Deferred(d) => Cow::Borrowed(d.json()),
            Entry::Checksum => Cow::Owned(Value::String(checksum::checksum(owner))),
            Entry::Child(body) => Cow::Owned(tree::to_value(body)),
        }
    }
}

impl Clone for Body {
    fn clone(&self) -> Self {
        Body {
            entries: self.entries.clone(),
            tail: self.tail.clone(),
            index: OnceLock::new(),
            work: AtomicU64::new(self.entries.len() as u64),
            height: self.height,
        }
    }
}

/// States with at least this many keys find them through an index.
const INDEXED_FROM: usize = 16;

impl Body {
    fn count(&self, n: usize) {
        self.work.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn iter(&self) -> Iter<'_> {
        let tail = self
            .tail
            .as_deref()
            .map_or(&[][..], |tail| &tail.entries[..]);
        self.entries.iter().chain(tail)
    }

    fn len(&self) -> usize {
        self.entries.len() + self.tail.as_ref().map_or(0, |tail| tail.entries.len())
    }

    /// The entry at position `i`.
    fn at(&self, i: usize) -> Option<&(Key, Entry)> {
        let own = self.entries.len();
        self.entries
            .get(i)
            .or_else(|| self.tail.as_ref()?.entries.get(i - own))
    }

    /// The position of `key`, and how many entries were visited to find it.
    #[inline]
    fn find(&self, key: &str) -> (Option<usize>, usize) {
        let len = self.len();
        if len < INDEXED_FROM {
            return (self.iter().position(|(k, _)| k == key), len);
        }
        let mut built = 0;
        let index = self.index.get_or_init(|| {
            built = len;
            let keys = self.iter().map(|(k, _)| k.clone());
            Box::new(keys.zip(0..).collect())
        });
        (index.get(key).copied(), built + 1)
    }

    fn get(&self, key: &str) -> Option<&Entry> {
        let (at, visited) = self.find(key);
        self.count(visited);
        at.and_then(|i| self.at(i)).map(|(_, entry)| entry)
    }

    /// Stores `entry` under `key`, replacing what was there.
    #[inline]
    fn put(&mut self, key: Key, entry: Entry) {
        self.own_tail();
        self.height = self.height.max(tree::height_of(&entry));
        let (at, visited) = self.find(&key);
        *self.work.get_mut() += visited as u64;
        match at {
            Some(i) => self.entries[i].1 = entry,
            None => self.push(key, entry),
        }
    }

    /// Appends an entry whose key is not there yet.
    #[inline]
    fn push(&mut self, key: Key, entry: Entry) {
        self.own_tail();
        if let Some(index) = self.index.get_mut() {
            index.insert(key.clone(), self.entries.len());
        }
        *self.work.get_mut() += 1;
        self.append(key, entry);
    }

    /// Puts the entry last, with its height. Alone, for a body being built
    /// by [`Fields`]: no tail or index yet, and `Fields::build` sets the
    /// count at the end. Always inlined, so that the entry is written
    /// straight into its slot rather than assembled on the stack and copied.
    #[inline(always)]
    fn append(&mut self, key: Key, entry: Entry) {
        self.height = self.height.max(tree::height_of(&entry));
        self.entries.push((key, entry));
    }

    /// Copies the shared tail in, before a write.
    fn own_tail(&mut self) {
        if let Some(tail) = self.tail.take() {
            self.entries.extend(tail.entries.iter().cloned());
        }
    }
}

/// Equality compares content only, not the path a state was read from, nor
/// the order of keys (as JSON objects compare). It walks nested states
/// without recursion.
impl PartialEq for State {
    fn eq(&self, other: &Self) -> bool {
        tree::eq(&self.body, &other.body)
    }
}

/// `State(<compact JSON>)`, written without recursion (a failed assertion
/// on a deep state prints it rather than overflowing the stack).
impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "State({self})")
    }
}

/// The compact JSON text, written without recursion.
impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        tree::write_json(&self.body, f)
    }
}

/// Serialises as the bare JSON object.
impl Serialize for State {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.body.serialize(s)
    }
}

impl Serialize for Body {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap};
        let mut map = s.serialize_map(Some(self.len()))?;
        for (key, entry) in self.iter() {
            match entry {
                Entry::Str(s) => map.serialize_entry(key, &**s)?,
                Entry::Child(body) => map.serialize_entry(key, &**body)?,
                Entry::Deferred(d) => {
                    let why = |e| S::Error::custom(format_args!("cannot serialise {key}: {e}"));
                    map.serialize_entry(key, d.result().map_err(why)?)?
                }
                other => map.serialize_entry(key, &other.leaf(self))?,
            }
        }
        map.end()
    }
}

/// Deserialises from a JSON object (anything else is an error).
impl<'de> Deserialize<'de> for State {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Map::<String, Value>::deserialize(d).map(|map| State::of(tree::body_of_map(map)))
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

    fn of(body: impl Into<Shared<Body>>) -> Self {
        State {
            body: body.into(),
            path: Path::default(),
        }
    }

    /// The entries, to change them (copied first if they are shared).
    #[inline]
    fn body_mut(&mut self) -> &mut Body {
        Shared::make_mut(&mut self.body)
    }

    /// Whether `self` and `other` are the same state: entries shared (not
    /// copied) and read from the same path, so equal in content and in
    /// every path an error would name. A state and its clones, or the same
    /// child read twice, are the same; two states that merely hold equal
    /// entries are not (use `==` to compare content).
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
        // A shared body never changes: a write copies it first.
        Shared::ptr_eq(&self.body, &other.body) && self.path.text() == other.path.text()
    }

    /// Wraps a JSON value, which must be an object.
    pub fn from_value(value: Value) -> Result<Self> {
        match value {
            Value::Object(map) => Ok(State::of(tree::body_of_map(map))),
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
        parse::parse(json).map(State::of)
    }

    /// The state as a compact JSON document.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::bad_state(self.path(), e.to_string()))
    }

    /// The state as a pretty-printed JSON document.
    pub fn to_json_pretty(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::bad_state(self.path(), e.to_string()))
    }

    /// The state as a JSON value, built without recursion.
    ///
    /// A deferred entry whose value cannot be serialised (see
    /// [`State::insert_deferred`]) shows as `null` here, and such a state
    /// then fails to load at that path: use [`State::to_json`], which
    /// returns the serialisation error instead, to write checkpoints.
    pub fn to_value(&self) -> Value {
        tree::to_value(&self.body)
    }

    /// The JSON value this state holds.
    pub fn into_value(self) -> Value {
        self.to_value()
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.body.iter().map(|(k, _)| k.as_ref())
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.body.len()
    }

    /// Whether the state has no keys.
    pub fn is_empty(&self) -> bool {
        self.body.len() == 0
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

    /// Stores `value` under `key`, replacing what was there.
    pub fn insert(&mut self, key: impl Into<Key>, value: impl Serialize) -> Result<()> {
        let key = key.into();
        let entry = encode::entry_of(&value)
            .map_err(|e| Error::bad_state(self.path_of(&key), format!("cannot serialise: {e}")))?;
        self.body_mut().put(key, entry);
        Ok(())
    }

    /// Reserves room for at least `additional` more keys: a node about to
    /// insert many (a sampler's sources) saves the regrowth.
    pub fn reserve(&mut self, additional: usize) {
        self.body_mut().entries.reserve(additional);
    }

    /// Builder form of [`State::insert`].
    pub fn with(mut self, key: impl Into<Key>, value: impl Serialize) -> Result<Self> {
        self.insert(key, value)?;
        Ok(self)
    }

    /// Nests `child` under `key`.
    pub fn insert_child(&mut self, key: impl Into<Key>, child: State) {
        self.body_mut().put(key.into(), Entry::Child(child.body));
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.body.get(key).is_some()
    }

    /// A copy of the JSON value under `key`, or an error naming the missing path.
    ///
    /// A nested state is converted without recursion; the value returned is
    /// then the caller's (serde_json drops a `Value` recursively).
    pub fn value(&self, key: &str) -> Result<Value> {
        self.value_ref(key).map(Cow::into_owned)
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
    pub fn value_ref(&self, key: &str) -> Result<Cow<'_, Value>> {
        self.json_of(key, self.body.get(key))
    }

    /// The JSON of `entry`, found under `key`; the error if it is missing,
    /// or a deferred entry that does not serialise.
    fn json_of<'a>(&'a self, key: &str, entry: Option<&'a Entry>) -> Result<Cow<'a, Value>> {
        let error = |why: String| Error::bad_state(self.path_of(key), why);
        match entry {
            Some(Entry::Deferred(d)) => d
                .result()
                .map(Cow::Borrowed)
                .map_err(|e| error(format!("cannot serialise: {e}"))),
            Some(entry) => Ok(entry.leaf(&self.body)),
            None => Err(error("missing key".to_owned())),
        }
    }

    /// Decodes the value under `key` as `T`.
    ///
    /// Reading a nested state this way neither builds nor drops it with
    /// recursion; decoding it as a recursive type (a tree of `T`) recurses
    /// in `T`'s own `Deserialize`, once per level: check the nesting with
    /// [`State::depth`] first when the state comes from outside.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<T> {
        let value = self.value_ref(key)?;
        let decoded = T::deserialize(&*value).map_err(|e| {
            let why = format!("{}, found {}", expected_of(&e), describe(&value));
            Error::bad_state(self.path_of(key), why)
        });
        if let Cow::Owned(value) = value {
            tree::dismantle(value);
        }
        decoded
    }

    /// How many levels of nested states this state holds, itself included:
    /// 1 for a state without nested states, `n + 1` for one whose deepest
    /// nested state is `n` levels down (every object under a key is a
    /// nested state; arrays and what is inside them are plain values, parsed
    /// with serde_json's limit of 128 levels). Counted without recursion, so
    /// a state read from outside can be checked before it is decoded into a
    /// recursive type (see [`State::get`]).
    pub fn depth(&self) -> usize {
        tree::depth(&self.body)
    }

    /// Decodes the value under `key` as `T`, or `None` when the key is absent.
    pub fn get_opt<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        self.contains(key).then(|| self.get(key)).transpose()
    }

    /// The nested state under `key`, carrying its full path.
    ///
    /// The nested state is shared, not copied: walking down a state costs
    /// O(1) per level however much lies below.
    pub fn child(&self, key: &str) -> Result<State> {
        let body = match self.body.get(key) {
            Some(Entry::Child(body)) => Shared::clone(body),
            other => match &*self.json_of(key, other)? {
                Value::Object(map) => Shared::new(tree::body_of_map(map.clone())),
                other => {
                    let found = describe(other);
                    let why = format!("expected a nested state (object), found {found}");
                    return Err(Error::bad_state(self.path_of(key), why));
                }
            },
        };
        self.body.count(1);
        let path = self.path.join(key);
        Ok(State { body, path })
    }

    /// Rejects keys other than `allowed`: a state from another node type is
    /// caught here rather than half-applied.
    ///
    /// Linear in the number of keys, however many there are.
    pub fn expect_keys(&self, node: &str, allowed: &[&str]) -> Result<()> {
        self.body.count(self.len());
        // The common case: exactly the allowed keys, in order.
        if self.len() == allowed.len() && self.keys().zip(allowed).all(|(k, a)| k == *a) {
            return Ok(());
        }
        self.body.count(allowed.len());
        self.reject_unknown_keys(node, allowed)?;
        self.require_keys(node, allowed)
    }

    /// Rejects the first key not in `allowed`.
    pub(crate) fn reject_unknown_keys(&self, node: &str, allowed: &[&str]) -> Result<()> {
        let set: std::collections::HashSet<&str> = allowed.iter().copied().collect();
        self.keys().find(|key| !set.contains(key)).map_or(Ok(()), |key| {
            let allowed = allowed.join(", ");
            let why = format!("unexpected key for {node} (expected one of: {allowed}); is this state from another pipeline?");
            Err(Error::bad_state(self.path_of(key), why))
        })
    }

    /// Rejects the first of `keys` that is missing (but for the version
    /// key, which an unversioned state leaves out).
    pub(crate) fn require_keys(&self, node: &str, keys: &[&str]) -> Result<()> {
        let mut missing = keys
            .iter()
            .filter(|&&key| key != VERSION_KEY && !self.contains(key));
        missing.next().map_or(Ok(()), |key| {
            let why = format!("missing key for {node}; is this state from another pipeline?");
            Err(Error::bad_state(self.path_of(key), why))
        })
    }

    /// Checks the state's format version against `expected`.
    ///
    /// Version 0 means "unversioned": the key must then be absent.
    pub fn expect_version(&self, node: &str, expected: u32) -> Result<()> {
        let found: Option<u32> = self.get_opt(VERSION_KEY)?;
        if found == Some(expected).filter(|&v| v != 0) {
            return Ok(());
        }
        let found = found.map_or_else(|| "no version".to_owned(), |v| v.to_string());
        let why = format!("{node} expects state version {expected}, found {found}");
        Err(Error::bad_state(self.path_of(VERSION_KEY), why))
    }

    /// Records the state format version (nothing for version 0).
    pub fn set_version(&mut self, version: u32) -> Result<()> {
        if version != 0 {
            self.insert(VERSION_KEY, version)?;
        }
        Ok(())
    }

    /// The work counted in this state's bodies and in every nested state's
    /// (see [`crate::testing::state_work`]), a body shared in two places
    /// counted twice.
    pub(crate) fn work(&self) -> u64 {
        let mut total = 0;
        let mut pending = vec![&*self.body];
        while let Some(body) = pending.pop() {
            total += body.work.load(Ordering::Relaxed);
            pending.extend(body.iter().filter_map(|(_, e)| match e {
                Entry::Child(child) => Some(&**child),
                _ => None,
            }));
        }
        total
    }
}

/// A node's state being built key by key in place, by [`Fields::build`]:
/// what `#[derive(Node)]` and the loader take their states with (one
/// uniqueness check per state, none per key). Not public API.
#[doc(hidden)]
pub struct Fields<'a>(&'a mut Body);

impl std::fmt::Debug for Fields<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fields")
    }
}

impl Fields<'_> {
    /// The state `fill` writes, with `version` (nothing for version 0).
    #[inline]
    pub fn build(version: u32, fill: impl FnOnce(&mut Fields<'_>) -> Result<()>) -> Result<State> {
        let mut body = Shared::<Body>::default();
        let mut fields = Fields(Shared::get_mut(&mut body).expect("a new state is not shared"));
        fill(&mut fields)?;
        if version != 0 {
            fields.append(Key::Borrowed(VERSION_KEY), Entry::Number(version.into()));
        }
        *fields.0.work.get_mut() = fields.0.len() as u64;
        Ok(State::of(body))
    }

    /// Puts an entry last: nothing is appended after [`share_tail`](Self::share_tail).
    #[inline(always)]
    fn append(&mut self, key: Key, entry: Entry) {
        debug_assert!(self.0.tail.is_none() && self.0.index.get().is_none());
        self.0.append(key, entry);
    }

    /// Room for `keys` more keys.
    pub fn reserve(&mut self, keys: usize) {
        self.0.entries.reserve(keys);
    }

    /// Appends `value` under `key`, which this state does not hold yet.
    #[inline]
    pub fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        let entry = encode::entry_of(value)
            .map_err(|e| Error::bad_state(format!("/{key}"), format!("cannot serialise: {e}")))?;
        self.append(Key::Borrowed(key), entry);
        Ok(())
    }

    /// Appends `child` under `key`, which this state does not hold yet.
    #[inline]
    pub fn child(&mut self, key: impl Into<Key>, child: State) {
        self.append(key.into(), Entry::Child(child.body));
    }

    /// Appends a `#[node(state, deferred)]` field's snapshot under `key`.
    pub fn deferred<T: Snapshot>(&mut self, key: &'static str, value: &T) {
        let entry = deferred::entry(value.snapshot());
        self.append(Key::Borrowed(key), entry);
    }

    /// Appends a snapshot shared with other states under `key`.
    pub fn shared(&mut self, key: &'static str, snapshot: &SharedSnapshot) {
        self.append(Key::Borrowed(key), Entry::Deferred(Arc::clone(&snapshot.0)));
    }

    /// Ends the state with `tail`'s entries, shared (a write to the state
    /// copies them first); nothing may be appended after.
    pub(crate) fn share_tail(&mut self, tail: &State) {
        self.0.height = self.0.height.max(tail.body.height);
        self.0.tail = Some(Shared::clone(&tail.body));
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
    let expected = text
        .find(", expected ")
        .map_or(&*text, |at| &text[at + 2..]);
    expected
        .split(" at line ")
        .next()
        .unwrap_or(expected)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clone shares its entries; the first write to a shared state
    /// copies its own keys only (nested states stay shared), and a state
    /// nobody else holds is written in place.
    #[test]
    fn a_write_to_a_shared_state_copies_only_its_own_keys() {
        let mut first = State::new().with("n", 1).unwrap();
        first.insert_child("c", State::new().with("x", 2).unwrap());
        let body = Shared::as_ptr(&first.body);
        let mut second = first.clone();
        assert!(Shared::ptr_eq(&first.body, &second.body));
        second.insert("n", 3).unwrap();
        // Two entries copied, two visited to find the key.
        assert_eq!(second.body.work.load(Ordering::Relaxed), 2 + 2);
        assert_eq!(first.get::<u64>("n").unwrap(), 1);
        assert_eq!(second.get::<u64>("n").unwrap(), 3);
        let child = |s: &State| match &s.body.entries[1].1 {
            Entry::Child(c) => Shared::as_ptr(c),
            _ => std::ptr::null(),
        };
        assert_eq!(child(&first), child(&second));
        drop(second);
        first.insert("n", 4).unwrap();
        assert_eq!(Shared::as_ptr(&first.body), body);
    }
}
