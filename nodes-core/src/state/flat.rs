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

use std::sync::{Arc, OnceLock};

use super::deferred::Deferred;
use super::{Body, Content, Entry, Key, Scalar, State, VERSION_KEY, pool};
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
    slots: Vec<Slot>,
}

/// One step of a flat record.
enum Slot {
    /// A nested state opens under this key; its entries follow, up to the
    /// matching `Close`.
    Open(Key),
    Close,
    /// An entry of the innermost open state (or of the top one).
    Put(Key, Entry),
}

/// A finished record, and its nested form once something read it.
pub(super) struct Flat {
    slots: Vec<Slot>,
    body: OnceLock<Arc<Body>>,
}

impl std::fmt::Debug for StateWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateWriter")
            .field("slots", &self.slots.len())
            .finish()
    }
}

impl StateWriter {
    /// An empty writer: [`finish`](StateWriter::finish) now gives `{}`.
    pub fn new() -> Self {
        StateWriter::default()
    }

    /// An empty writer with room for `slots` steps (a loader sizes it by
    /// its last capture).
    pub(crate) fn with_capacity(slots: usize) -> Self {
        StateWriter {
            slots: Vec::with_capacity(slots),
        }
    }

    /// How many steps were written.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Writes the entries of `state` where the writer stands: into the
    /// state opened last, or at the top.
    pub fn put_state(&mut self, state: State) {
        match state.into_content() {
            Content::Own(mut body) => self.put_entries(std::mem::take(&mut body.entries)),
            Content::Shared(body) => match Arc::try_unwrap(body) {
                Ok(mut body) => self.put_entries(std::mem::take(&mut body.entries)),
                Err(shared) => self.put_cloned(&shared),
            },
            Content::Flat(flat) => match Arc::try_unwrap(flat) {
                Ok(Flat { slots, body }) => match body.into_inner() {
                    // Read once already: its nested form is what is known good.
                    Some(body) => self.put_cloned(&body),
                    None => self.slots.extend(slots),
                },
                Err(shared) => self.put_cloned(shared.body()),
            },
        }
    }

    fn put_entries(&mut self, mut entries: Vec<(Key, Entry)>) {
        self.slots.reserve(entries.len());
        self.slots
            .extend(entries.drain(..).map(|(key, entry)| Slot::Put(key, entry)));
        pool::recycle_entries(entries);
    }

    fn put_cloned(&mut self, body: &Body) {
        self.slots.reserve(body.entries.len());
        self.slots.extend(
            body.entries
                .iter()
                .map(|(key, entry)| Slot::Put(key.clone(), entry.clone())),
        );
    }

    /// Opens a nested state under `key` (a child's), closed by
    /// [`close`](StateWriter::close).
    #[inline]
    pub(crate) fn open(&mut self, key: &'static str) {
        self.slots.push(Slot::Open(Key::Borrowed(key)));
    }

    /// Closes the nested state opened last.
    #[inline]
    pub(crate) fn close(&mut self) {
        self.slots.push(Slot::Close);
    }

    /// Writes a nested state already made (a `#[node(children)]` field's).
    pub(crate) fn put_child(&mut self, key: &'static str, child: State) {
        self.slots.push(Slot::Put(
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
        let value = serde_json::to_value(value)
            .map_err(|e| Error::bad_state(format!("/{key}"), format!("cannot serialise: {e}")))?;
        self.slots
            .push(Slot::Put(Key::Borrowed(key), Entry::json(value)));
        Ok(())
    }

    /// Writes a number (no serialisation).
    #[inline]
    pub(crate) fn put_u64(&mut self, key: &'static str, n: u64) {
        self.slots.push(Slot::Put(
            Key::Borrowed(key),
            Entry::Scalar(Scalar::Number(n.into())),
        ));
    }

    /// Writes a snapshot, serialised only when the state is.
    pub(crate) fn put_deferred<T>(&mut self, key: &'static str, value: Arc<T>)
    where
        T: serde::Serialize + Send + Sync + 'static,
    {
        self.slots
            .push(Slot::Put(Key::Borrowed(key), Deferred::entry(value)));
    }

    /// Writes the format version, as `State::set_version` does (nothing for
    /// version 0).
    #[inline]
    pub(crate) fn put_version(&mut self, version: u32) {
        if version != 0 {
            self.put_u64(VERSION_KEY, version.into());
        }
    }

    /// Writes copies of `state`'s entries from position `from` on (the
    /// constant part of a loader's template).
    pub(crate) fn put_entries_of(&mut self, state: &State, from: usize) {
        let entries = state.body().entries.get(from..).unwrap_or_default();
        self.slots.reserve(entries.len());
        self.slots.extend(
            entries
                .iter()
                .map(|(key, entry)| Slot::Put(key.clone(), entry.clone())),
        );
    }

    /// The state written.
    pub fn finish(self) -> State {
        debug_assert!(self.balanced(), "a nested state was left open");
        State::from_content(Content::Flat(Arc::new(Flat {
            slots: self.slots,
            body: OnceLock::new(),
        })))
    }

    fn balanced(&self) -> bool {
        let mut depth = 0usize;
        for slot in &self.slots {
            match slot {
                Slot::Open(_) => depth += 1,
                Slot::Close => match depth.checked_sub(1) {
                    Some(d) => depth = d,
                    None => return false,
                },
                Slot::Put(..) => {}
            }
        }
        depth == 0
    }
}

impl Flat {
    /// The nested form, built on the first call.
    pub(super) fn body(&self) -> &Arc<Body> {
        self.body
            .get_or_init(|| nest(self.slots.iter(), Clone::clone))
    }

    /// The nested form, built from the record's own entries when nobody
    /// else holds it (no copies).
    pub(super) fn into_shared(flat: Arc<Flat>) -> Arc<Body> {
        match Arc::try_unwrap(flat) {
            Ok(Flat { slots, body }) => match body.into_inner() {
                Some(body) => body,
                None => nest(slots.into_iter(), std::convert::identity),
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
/// nodes a million deep is a million open marks). `own` turns each step
/// the iterator yields into an owned one.
fn nest<S>(slots: impl Iterator<Item = S>, own: impl Fn(S) -> Slot) -> Arc<Body>
where
    S: Sized,
{
    // The open states, innermost last, each under its key.
    let mut open: Vec<(Key, Body)> = Vec::new();
    let mut top = Body::default();
    for slot in slots {
        match own(slot) {
            Slot::Open(key) => open.push((key, Body::default())),
            Slot::Put(key, entry) => match open.last_mut() {
                Some((_, body)) => body.push_unindexed(key, entry),
                None => top.push_unindexed(key, entry),
            },
            Slot::Close => {
                let Some((key, body)) = open.pop() else {
                    unreachable!("a writer closes only what it opened");
                };
                let child = Entry::Child(pool::shared(body));
                match open.last_mut() {
                    Some((_, parent)) => parent.push_unindexed(key, child),
                    None => top.push_unindexed(key, child),
                }
            }
        }
    }
    debug_assert!(open.is_empty(), "a nested state was left open");
    pool::shared(top)
}

impl Clone for Slot {
    fn clone(&self) -> Self {
        match self {
            Slot::Open(key) => Slot::Open(key.clone()),
            Slot::Close => Slot::Close,
            Slot::Put(key, entry) => Slot::Put(key.clone(), entry.clone()),
        }
    }
}
