//! A whole pipeline's state written as one flat record.
//!
//! A training loop may call `state_dict()` after every batch. Built the
//! nested way, each node of the pipeline makes a state of its own (an
//! entries vector and a shared box) and its parent nests it; on a chain of
//! five cheap nodes that cost more than moving the batch. Through
//! [`Stateful::write_state`](crate::Stateful::write_state), every node the
//! derive wrote appends its fields to one [`StateWriter`] instead, with
//! marks where a child's state opens and closes: one vector for the whole
//! tree. The record becomes the nested form the first time the state is
//! read (serialised, compared, walked), once; a state dropped unread, as
//! most are, costs that vector and nothing more.
//!
//! The steps that hold nothing on the heap (marks, and fields under the
//! nodes' own static keys whose values are scalars: nearly all of them) are
//! plain data, so the vector is freed without visiting them; the rest wait
//! in a second vector, which most records leave empty.

use std::sync::{Arc, OnceLock};

use serde_json::Number;

use super::deferred::Deferred;
use super::{Body, Content, Entry, Key, Scalar, State, VERSION_KEY};
use crate::error::{Error, Result};

/// Where a node writes its state when its parent, or the
/// [`Loader`](crate::Loader), captures a whole pipeline's state at once:
/// see [`Stateful::write_state`](crate::Stateful::write_state).
///
/// `#[derive(Node)]` writes to it. A hand-written node hands it the state
/// its [`get_state`](crate::Stateful::get_state) made (what the default
/// `write_state` does), with [`put_state`](StateWriter::put_state).
///
/// ```
/// use nodes_core::{State, StateWriter};
///
/// let mut out = StateWriter::new();
/// out.put_state(State::new().with("n", 3)?);
/// assert_eq!(out.finish().to_json()?, r#"{"n":3}"#);
/// # Ok::<(), nodes_core::Error>(())
/// ```
#[derive(Default)]
pub struct StateWriter {
    record: Record,
    /// An emptied record's box, recycled, to finish into.
    shell: Option<Arc<Flat>>,
}

/// The steps of a record, and what they hold on the heap.
#[derive(Default, Clone)]
struct Record {
    steps: Vec<Step>,
    /// What the `Held` steps refer to, in the order of those steps.
    held: Vec<Held>,
}

/// One step of a record: plain data (no drop to run).
#[derive(Clone, Copy)]
pub(super) enum Step {
    /// A nested state opens under this key; its entries follow, up to the
    /// matching `Close`.
    Open(&'static str),
    /// A nested state opens under the key the next held step names.
    OpenNamed,
    Close,
    /// An entry of the innermost open state (or of the top one).
    Inline(&'static str, Inline),
    /// The next entry of `Record::held`.
    Held,
}

/// A scalar as [`Scalar`] holds it, without heap data.
#[derive(Clone, Copy)]
pub(super) enum Inline {
    Null,
    Bool(bool),
    PosInt(u64),
    NegInt(i64),
    Float(f64),
    EmptyArray,
}

/// A step that holds something on the heap.
#[derive(Clone)]
enum Held {
    Entry(Key, Entry),
    /// The entries of a shared state from this position on, as if put one
    /// by one (a loader's constant entries: one reference count instead of
    /// a copy of each).
    Tail(Arc<Body>, usize),
    /// The key of an `OpenNamed` step (a sampler's source name, made a key
    /// only when the state is read).
    Name(Arc<str>),
}

impl Inline {
    /// The entry, if it is a scalar written alike.
    fn of(entry: &Entry) -> Option<Inline> {
        let Entry::Scalar(scalar) = entry else {
            return None;
        };
        Some(match scalar {
            Scalar::Null => Inline::Null,
            Scalar::Bool(b) => Inline::Bool(*b),
            Scalar::EmptyArray => Inline::EmptyArray,
            Scalar::Number(n) => {
                if let Some(u) = n.as_u64() {
                    Inline::PosInt(u)
                } else if let Some(i) = n.as_i64() {
                    Inline::NegInt(i)
                } else {
                    Inline::Float(n.as_f64()?)
                }
            }
        })
    }

    fn entry(self) -> Entry {
        Entry::Scalar(match self {
            Inline::Null => Scalar::Null,
            Inline::Bool(b) => Scalar::Bool(b),
            Inline::EmptyArray => Scalar::EmptyArray,
            Inline::PosInt(u) => Scalar::Number(u.into()),
            Inline::NegInt(i) => Scalar::Number(i.into()),
            // Taken from a finite number.
            Inline::Float(f) => Number::from_f64(f).map_or(Scalar::Null, Scalar::Number),
        })
    }
}

/// A finished record, and its nested form once something read it.
pub(super) struct Flat {
    record: Record,
    body: OnceLock<Arc<Body>>,
}

impl std::fmt::Debug for StateWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateWriter")
            .field("steps", &self.record.steps.len())
            .finish()
    }
}

impl StateWriter {
    /// An empty writer: [`finish`](StateWriter::finish) now gives `{}`.
    /// It reuses a record this thread dropped, if there is one.
    pub fn new() -> Self {
        StateWriter::with_capacity((0, 0))
    }

    /// An empty writer with room for `(steps, held)` (a loader sizes it by
    /// its last capture).
    pub(crate) fn with_capacity((steps, held): (usize, usize)) -> Self {
        let mut shell = RECYCLED
            .try_with(|kept| kept.borrow_mut().pop())
            .ok()
            .flatten();
        let mut record = shell
            .as_mut()
            .and_then(Arc::get_mut)
            .map(|flat| std::mem::take(&mut flat.record))
            .unwrap_or_default();
        record.steps.reserve(steps);
        record.held.reserve(held);
        StateWriter { record, shell }
    }

    /// How many steps, and held steps, were written.
    pub(crate) fn len(&self) -> (usize, usize) {
        (self.record.steps.len(), self.record.held.len())
    }

    /// Writes the entries of `state` where the writer stands: into the
    /// state opened last, or at the top.
    pub fn put_state(&mut self, state: State) {
        match state.into_content() {
            Content::Own(mut body) => self.put_entries(std::mem::take(&mut body.entries)),
            Content::Shared(body) => match Arc::try_unwrap(body) {
                Ok(mut body) => self.put_entries(std::mem::take(&mut body.entries)),
                Err(shared) => self.put_cloned(&shared.entries),
            },
            Content::Flat(flat) => match Arc::try_unwrap(flat) {
                Ok(Flat { record, body }) => match body.into_inner() {
                    // Read once already: its nested form is what is known good.
                    Some(body) => self.put_cloned(&body.entries),
                    None => {
                        self.record.steps.extend(record.steps);
                        self.record.held.extend(record.held);
                    }
                },
                Err(shared) => self.put_cloned(&shared.body().entries),
            },
        }
    }

    fn put_entries(&mut self, mut entries: Vec<(Key, Entry)>) {
        self.record.steps.reserve(entries.len());
        for (key, entry) in entries.drain(..) {
            self.put(key, entry);
        }
        super::pool::recycle_entries(entries);
    }

    fn put_cloned(&mut self, entries: &[(Key, Entry)]) {
        self.record.steps.reserve(entries.len());
        for (key, entry) in entries {
            self.put(key.clone(), entry.clone());
        }
    }

    /// Writes one entry: inline if it can be.
    #[inline]
    fn put(&mut self, key: Key, entry: Entry) {
        if let Key::Borrowed(key) = key
            && let Some(inline) = Inline::of(&entry)
        {
            self.record.steps.push(Step::Inline(key, inline));
            return;
        }
        self.hold(Held::Entry(key, entry));
    }

    fn hold(&mut self, held: Held) {
        self.record.steps.push(Step::Held);
        self.record.held.push(held);
    }

    /// Opens a nested state under `key` (a child's), closed by
    /// [`close`](StateWriter::close).
    #[inline]
    pub(crate) fn open(&mut self, key: &'static str) {
        self.record.steps.push(Step::Open(key));
    }

    /// Opens a nested state under a name made at run time (a source's).
    pub(crate) fn open_named(&mut self, name: &Arc<str>) {
        self.record.steps.push(Step::OpenNamed);
        self.record.held.push(Held::Name(Arc::clone(name)));
    }

    /// Closes the nested state opened last.
    #[inline]
    pub(crate) fn close(&mut self) {
        self.record.steps.push(Step::Close);
    }

    /// Writes a nested state already made (a `#[node(children)]` field's).
    pub(crate) fn put_child(&mut self, key: &'static str, child: State) {
        self.hold(Held::Entry(
            Key::Borrowed(key),
            Entry::Child(child.into_shared()),
        ));
    }

    /// Writes a field as JSON, as `State::insert` stores it.
    #[inline]
    pub(crate) fn put_field<T: serde::Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        // Counters, flags and structs of them: no JSON built (see
        // `scalar.rs`).
        if super::scalar::write_steps(value, key, &mut self.record.steps) {
            return Ok(());
        }
        let value = serde_json::to_value(value)
            .map_err(|e| Error::bad_state(format!("/{key}"), format!("cannot serialise: {e}")))?;
        self.put(Key::Borrowed(key), Entry::json(value));
        Ok(())
    }

    /// Writes a number (no serialisation).
    #[inline]
    pub(crate) fn put_u64(&mut self, key: &'static str, n: u64) {
        self.record.steps.push(Step::Inline(key, Inline::PosInt(n)));
    }

    /// Writes a snapshot, serialised only when the state is.
    pub(crate) fn put_deferred<T>(&mut self, key: &'static str, value: Arc<T>)
    where
        T: serde::Serialize + Send + Sync + 'static,
    {
        self.hold(Held::Entry(Key::Borrowed(key), Deferred::entry(value)));
    }

    /// Writes the format version, as `State::set_version` does (nothing for
    /// version 0).
    #[inline]
    pub(crate) fn put_version(&mut self, version: u32) {
        if version != 0 {
            self.put_u64(VERSION_KEY, version.into());
        }
    }

    /// Writes `state`'s entries from position `from` on (the constant part
    /// of a loader's template): by reference if they are shared.
    pub(crate) fn put_entries_of(&mut self, state: &State, from: usize) {
        match state.shared_body() {
            Some(shared) => self.hold(Held::Tail(Arc::clone(shared), from)),
            None => self.put_cloned(state.body().entries.get(from..).unwrap_or_default()),
        }
    }

    /// The state written.
    pub fn finish(self) -> State {
        debug_assert!(self.balanced(), "a nested state was left open");
        let StateWriter { record, shell } = self;
        let flat = match shell {
            Some(mut shell) => match Arc::get_mut(&mut shell) {
                Some(empty) => {
                    empty.record = record;
                    shell
                }
                None => Arc::new(Flat::new(record)),
            },
            None => Arc::new(Flat::new(record)),
        };
        State::from_content(Content::Flat(flat))
    }

    fn balanced(&self) -> bool {
        let mut depth = 0usize;
        for step in &self.record.steps {
            match step {
                Step::Open(_) | Step::OpenNamed => depth += 1,
                Step::Close => match depth.checked_sub(1) {
                    Some(d) => depth = d,
                    None => return false,
                },
                Step::Inline(..) | Step::Held => {}
            }
        }
        depth == 0
    }
}

/// How many emptied records a thread keeps for the next ones.
const KEPT: usize = 4;

/// The most steps a kept record has room for (about 40 KiB): a wide
/// pipeline's record is freed, not kept.
const KEPT_STEPS: usize = 1024;

thread_local! {
    /// Emptied records with their vectors' capacity: a loop that takes and
    /// drops a state per batch reuses them instead of allocating three
    /// blocks per state.
    static RECYCLED: std::cell::RefCell<Vec<Arc<Flat>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Takes back a record whose state is dropped: kept, emptied, if nobody
/// else holds it and the thread keeps fewer than [`KEPT`].
pub(super) fn recycle(mut flat: Arc<Flat>) {
    let Some(own) = Arc::get_mut(&mut flat) else {
        return;
    };
    if own.body.get().is_some()
        || own.record.steps.capacity() > KEPT_STEPS
        || own.record.held.capacity() > KEPT_STEPS
    {
        // A nested form, or a wide record's large vectors, are freed as usual.
        return;
    }
    own.record.steps.clear();
    own.record.held.clear();
    let _ = RECYCLED.try_with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.len() < KEPT {
            kept.push(flat);
        }
    });
}

impl Flat {
    fn new(record: Record) -> Flat {
        Flat {
            record,
            body: OnceLock::new(),
        }
    }

    /// The nested form, built on the first call.
    pub(super) fn body(&self) -> &Arc<Body> {
        self.body
            .get_or_init(|| nest(&self.record.steps, self.record.held.iter().cloned()))
    }

    /// The nested form, built from the record's own entries when nobody
    /// else holds it (no copies).
    pub(super) fn into_shared(flat: Arc<Flat>) -> Arc<Body> {
        match Arc::try_unwrap(flat) {
            Ok(Flat { record, body }) => match body.into_inner() {
                Some(body) => body,
                None => nest(&record.steps, record.held.into_iter()),
            },
            Err(shared) => Arc::clone(shared.body()),
        }
    }

    /// The nested form if it was built.
    pub(super) fn built(&self) -> Option<&Arc<Body>> {
        self.body.get()
    }
}

/// The nested state a record describes, without recursion (a chain of
/// nodes a million deep is a million open marks). `held` yields the held
/// steps in order.
fn nest(steps: &[Step], mut held: impl Iterator<Item = Held>) -> Arc<Body> {
    // The open states, innermost last, each under its key.
    let mut open: Vec<(Key, Body)> = Vec::new();
    let mut top = Body::default();
    for step in steps {
        let into = match (step, open.last_mut()) {
            (Step::Open(key), _) => {
                open.push((Key::Borrowed(key), Body::default()));
                continue;
            }
            (Step::OpenNamed, _) => {
                let Some(Held::Name(name)) = held.next() else {
                    unreachable!("a named open step holds its name");
                };
                open.push((Key::Owned(String::from(&*name)), Body::default()));
                continue;
            }
            (Step::Close, _) => {
                let Some((key, body)) = open.pop() else {
                    unreachable!("a writer closes only what it opened");
                };
                let child = Entry::Child(super::pool::shared(body));
                match open.last_mut() {
                    Some((_, parent)) => parent.push_unindexed(key, child),
                    None => top.push_unindexed(key, child),
                }
                continue;
            }
            (_, Some((_, body))) => body,
            (_, None) => &mut top,
        };
        match step {
            Step::Inline(key, value) => into.push_unindexed(Key::Borrowed(key), value.entry()),
            _ => match held.next() {
                Some(Held::Entry(key, entry)) => into.push_unindexed(key, entry),
                Some(Held::Tail(shared, from)) => {
                    for (key, entry) in shared.entries.get(from..).unwrap_or_default() {
                        into.push_unindexed(key.clone(), entry.clone());
                    }
                }
                Some(Held::Name(_)) | None => unreachable!("every held step has its entry"),
            },
        }
    }
    debug_assert!(open.is_empty(), "a nested state was left open");
    super::pool::shared(top)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `{"a":{"n":-3,"x":2.5,"big":u64::MAX,"on":true,"none":null,"list":[]},"s":"text","m":[1]}`
    /// written flat.
    fn written() -> State {
        let mut out = StateWriter::new();
        out.open("a");
        for (key, value) in [
            ("n", json!(-3)),
            ("x", json!(2.5)),
            ("big", json!(u64::MAX)),
            ("on", json!(true)),
            ("none", json!(null)),
            ("list", json!([])),
        ] {
            out.put_field(key, &value).unwrap();
        }
        out.close();
        out.put_field("s", "text").unwrap();
        out.put_state(State::new().with("m", [1]).unwrap());
        out.finish()
    }

    fn nested() -> State {
        let a = State::new()
            .with("n", -3)
            .and_then(|s| s.with("x", 2.5))
            .and_then(|s| s.with("big", u64::MAX))
            .and_then(|s| s.with("on", true))
            .and_then(|s| s.with("none", ()))
            .and_then(|s| s.with("list", Vec::<u8>::new()))
            .unwrap();
        let mut state = State::new();
        state.insert_child("a", a);
        state
            .with("s", "text")
            .and_then(|s| s.with("m", [1]))
            .unwrap()
    }

    #[test]
    fn a_record_reads_as_the_nested_state_it_describes() {
        let (flat, nested) = (written(), nested());
        assert_eq!(flat, nested);
        assert_eq!(flat.to_json().unwrap(), nested.to_json().unwrap());
        assert_eq!(flat.child("a").unwrap().get::<i64>("n").unwrap(), -3);
        assert_eq!(flat.child("a").unwrap().path(), "/a");
        // Serialisation and checksums walk the nested form: the same bytes.
        assert_eq!(
            flat.to_json().unwrap(),
            r#"{"a":{"n":-3,"x":2.5,"big":18446744073709551615,"on":true,"none":null,"list":[]},"s":"text","m":[1]}"#
        );
    }

    #[test]
    fn a_record_put_into_another_keeps_its_entries_in_place() {
        let shared = written();
        let held = shared.clone();
        for inner in [written(), shared] {
            let mut out = StateWriter::new();
            out.open("inner");
            out.put_state(inner);
            out.close();
            out.put_u64("after", 7);
            let mut expected = State::new();
            expected.insert_child("inner", nested());
            expected.insert("after", 7).unwrap();
            assert_eq!(out.finish().to_json().unwrap(), expected.to_json().unwrap());
        }
        assert_eq!(held, nested(), "a shared record is copied, not taken");
    }

    #[test]
    fn writing_to_a_record_copies_it_first() {
        let original = written();
        let mut changed = original.clone();
        changed.insert("s", "other").unwrap();
        assert_eq!(changed.get::<String>("s").unwrap(), "other");
        assert_eq!(original.get::<String>("s").unwrap(), "text");
        assert_eq!(original, nested());
    }

    #[test]
    fn a_recycled_record_holds_only_what_was_written_into_it() {
        for round in 0..(KEPT as u64 * 3) {
            let mut out = StateWriter::with_capacity((4, 1));
            out.put_u64("round", round);
            if round % 2 == 0 {
                out.put_field("even", "yes").unwrap();
            }
            let state = out.finish();
            let mut expected = State::new().with("round", round).unwrap();
            if round % 2 == 0 {
                expected.insert("even", "yes").unwrap();
            }
            assert_eq!(state.to_json().unwrap(), expected.to_json().unwrap());
        }
    }

    #[test]
    fn a_deep_record_nests_and_drops_without_recursion() {
        const DEPTH: usize = 200_000;
        let mut out = StateWriter::new();
        (0..DEPTH).for_each(|_| out.open("source"));
        out.put_u64("n", 1);
        (0..DEPTH).for_each(|_| out.close());
        let state = out.finish();
        let mut walked = state.child("source").unwrap();
        for _ in 1..DEPTH {
            walked = walked.child("source").unwrap();
        }
        assert_eq!(walked.get::<u64>("n").unwrap(), 1);
    }
}
