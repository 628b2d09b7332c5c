//! [`CowBuffer`]: a buffer of items whose state snapshot costs O(1).
//!
//! A node that keeps items in its state (the [`Shuffler`](crate::Shuffler))
//! would otherwise convert every buffered item to JSON each time a state is
//! taken, and states are taken often: after every batch by a training loop,
//! after every item by a threaded node snapshotting its source. Here a
//! snapshot shares the buffer instead, and the JSON is written only when the
//! state is serialised (a deferred state entry, see
//! [`State::insert_deferred`](crate::State::insert_deferred)).
//!
//! # Layout and costs
//!
//! Items live in chunks of [`CHUNK`] items (`Arc<Chunk>`), listed in an
//! `Arc<Vec<..>>`. A snapshot clones the outer `Arc`: O(1). While no snapshot
//! is alive (the usual case: a state is taken, serialised or dropped, and the
//! pipeline goes on), every write finds its chunk unshared and writes in
//! place: the only cost over a `Vec` is a check of two reference counts.
//!
//! The first write after a snapshot that is still alive copies the chunk list
//! (n / `CHUNK` pointers), and the first write to each chunk the snapshot
//! still holds *freezes* that chunk: its items move to the writer, and the
//! chunk keeps their JSON for the snapshot. So a live snapshot costs at most
//! one JSON conversion per buffered item, paid only for the chunks written
//! while it lives (the shuffle writes two chunks per item), and never a copy
//! of the items: the items need not be `Clone`.
//!
//! Items could instead each sit behind their own `Arc`, so that a write
//! after a snapshot converts only the item it takes; that costs an allocation
//! per item on every pass, snapshot or not, which the common case (states
//! dropped before the next item) never recovers.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde::ser::{Error as _, Serialize, SerializeSeq, Serializer};
use serde_json::Value;

use crate::Snapshot;

/// Items per chunk: a snapshot kept alive during writes converts at most
/// this many items per chunk written, and the chunk list of a buffer of n
/// items is n / `CHUNK` pointers.
pub(crate) const CHUNK: usize = 64;

/// A sequence with `push` and `swap_remove`, and O(1) snapshots.
pub(crate) struct CowBuffer<T> {
    /// Full chunks, then the last one (never empty); shared with snapshots.
    chunks: Arc<Vec<Arc<Chunk<T>>>>,
    len: usize,
}

/// A chunk's items: the writer's, or their JSON for the snapshots that
/// still hold the chunk after the writer took the items.
struct Chunk<T>(Mutex<Items<T>>);

enum Items<T> {
    Live(Vec<T>),
    /// The JSON of the items taken out, or the error serialising them.
    Frozen(Result<Vec<Value>, String>),
}

impl<T> Chunk<T> {
    fn new(items: Vec<T>) -> Arc<Self> {
        Arc::new(Chunk(Mutex::new(Items::Live(items))))
    }

    /// The items, for reading (a panic while serialising one does not
    /// make them unreadable: they are never left half-changed).
    fn lock(&self) -> MutexGuard<'_, Items<T>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T> Default for CowBuffer<T> {
    fn default() -> Self {
        CowBuffer {
            chunks: Arc::default(),
            len: 0,
        }
    }
}

impl<T> CowBuffer<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The writes: each may have to turn items into JSON for a snapshot.
impl<T: Serialize> CowBuffer<T> {
    pub(crate) fn push(&mut self, item: T) {
        let chunks = Arc::make_mut(&mut self.chunks);
        if self.len.is_multiple_of(CHUNK) {
            chunks.push(Chunk::new(Vec::with_capacity(CHUNK)));
        }
        let last = chunks.len() - 1;
        items_mut(&mut chunks[last]).push(item);
        self.len += 1;
    }

    /// Removes the item at `index` and returns it, moving the last item
    /// into its place (as [`Vec::swap_remove`]).
    ///
    /// # Panics
    /// If `index` is out of bounds.
    pub(crate) fn swap_remove(&mut self, index: usize) -> T {
        assert!(index < self.len, "swap_remove index {index} out of bounds");
        let chunks = Arc::make_mut(&mut self.chunks);
        let last_chunk = chunks.last_mut().expect("a buffer with items has chunks");
        let last = items_mut(last_chunk)
            .pop()
            .expect("the last chunk is never empty");
        self.len -= 1;
        if self.len.is_multiple_of(CHUNK) {
            chunks.pop();
        }
        if index == self.len {
            return last;
        }
        self.replace(index, last)
    }

    /// Puts `item` at `index` and returns the item that was there (one
    /// chunk written, where a `push` then a `swap_remove` write two or three).
    ///
    /// # Panics
    /// If `index` is out of bounds.
    pub(crate) fn replace(&mut self, index: usize, item: T) -> T {
        assert!(index < self.len, "replace index {index} out of bounds");
        let chunk = &mut Arc::make_mut(&mut self.chunks)[index / CHUNK];
        std::mem::replace(&mut items_mut(chunk)[index % CHUNK], item)
    }
}

impl<T> Items<T> {
    /// The writer's items: the writer holds only live chunks.
    fn live(&mut self) -> &mut Vec<T> {
        match self {
            Items::Live(items) => items,
            Items::Frozen(_) => unreachable!("the writer holds only live chunks"),
        }
    }
}

/// The writer's items of `chunk`, freezing the chunk first if a snapshot
/// shares it.
fn items_mut<T: Serialize>(chunk: &mut Arc<Chunk<T>>) -> &mut Vec<T> {
    // A plain load rather than a first `get_mut` (an atomic read-modify-write
    // on every write to the buffer). Nothing takes a weak reference to a
    // chunk, and a snapshot only ever drops its references, so a count of one
    // is final; a stale larger count only freezes a chunk needlessly.
    if Arc::strong_count(chunk) != 1 {
        let mut shared = chunk.lock();
        let items = std::mem::take(shared.live());
        let json: serde_json::Result<_> = items.iter().map(serde_json::to_value).collect();
        *shared = Items::Frozen(json.map_err(|e| e.to_string()));
        drop(shared);
        *chunk = Chunk::new(items);
    }
    let chunk = Arc::get_mut(chunk).expect("a chunk the writer alone holds stays unshared");
    chunk.0.get_mut().unwrap_or_else(|e| e.into_inner()).live()
}

/// Serialises as the JSON array of the items, in buffer order. A snapshot
/// (a buffer sharing the chunks) serialises its items as they stood when it
/// was taken: the writer never changes a chunk a snapshot holds (it freezes
/// it first).
impl<T: Serialize> Serialize for CowBuffer<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len))?;
        // A chunk shared with a snapshot is never written (it is frozen
        // first), so the chunks hold exactly the items the buffer counts.
        for chunk in self.chunks.iter() {
            match &*chunk.lock() {
                Items::Live(items) => items.iter().try_for_each(|i| seq.serialize_element(i))?,
                Items::Frozen(Ok(values)) => {
                    values.iter().try_for_each(|v| seq.serialize_element(v))?
                }
                Items::Frozen(Err(e)) => return Err(S::Error::custom(e)),
            }
        }
        seq.end()
    }
}

/// A snapshot is a buffer that shares the chunks: later writes to this one
/// do not change it.
impl<T> Snapshot for CowBuffer<T>
where
    T: Serialize + Send + 'static,
{
    type Frozen = CowBuffer<T>;

    fn snapshot(&self) -> CowBuffer<T> {
        let chunks = Arc::clone(&self.chunks);
        CowBuffer {
            chunks,
            len: self.len,
        }
    }
}

/// Reads the array that [`Serialize`] writes.
impl<'de, T: Serialize + DeserializeOwned> Deserialize<'de> for CowBuffer<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut buffer = CowBuffer::default();
        for item in Vec::<T>::deserialize(deserializer)? {
            buffer.push(item);
        }
        Ok(buffer)
    }
}

impl<T> fmt::Debug for CowBuffer<T> {
    crate::transforms::debug_fields!("CowBuffer", finish_non_exhaustive; len);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// An item that is not `Clone` (the buffer must not need it).
    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Item(u64, String);

    fn json<T: Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap()
    }

    /// With no snapshot alive, a write finds its chunk unshared and writes
    /// in place; with one alive, the chunk it writes is frozen and replaced.
    #[test]
    fn a_write_freezes_a_chunk_only_while_a_snapshot_holds_it() {
        let mut buffer = CowBuffer::default();
        for i in 0..3 {
            buffer.push(Item(i, "x".repeat(100)));
        }
        let before = Arc::as_ptr(&buffer.chunks[0]);
        buffer.replace(0, Item(9, String::new()));
        assert_eq!(Arc::as_ptr(&buffer.chunks[0]), before);
        let snapshot = buffer.snapshot();
        buffer.replace(1, Item(10, String::new()));
        assert_ne!(Arc::as_ptr(&buffer.chunks[0]), before);
        assert!(matches!(&*snapshot.chunks[0].lock(), Items::Frozen(Ok(_))));
        assert_eq!(
            json(&snapshot),
            json(&[
                Item(9, String::new()),
                Item(1, "x".repeat(100)),
                Item(2, "x".repeat(100))
            ])
        );
    }

    /// A small xorshift, to drive the operations.
    fn rng(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed | 1;
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    #[test]
    fn behaves_as_a_vec_and_snapshots_stay_as_taken() {
        for seed in 1..20 {
            let mut draw = rng(seed);
            let mut buffer = CowBuffer::default();
            let mut model: Vec<Item> = Vec::new();
            // Snapshots kept alive across writes, with the JSON they must give.
            let mut kept: Vec<(CowBuffer<Item>, String)> = Vec::new();
            let mut next = 0;
            for _ in 0..3000 {
                match draw(10) {
                    0..=4 => {
                        buffer.push(Item(next, format!("i{next}")));
                        model.push(Item(next, format!("i{next}")));
                        next += 1;
                    }
                    5..=6 if !model.is_empty() => {
                        let i = draw(model.len() as u64) as usize;
                        assert_eq!(buffer.swap_remove(i), model.swap_remove(i));
                    }
                    7 if !model.is_empty() => {
                        let i = draw(model.len() as u64) as usize;
                        let item = || Item(next, format!("r{next}"));
                        let old = std::mem::replace(&mut model[i], item());
                        assert_eq!(buffer.replace(i, item()), old);
                        next += 1;
                    }
                    8 => {
                        kept.push((buffer.snapshot(), json(&model)));
                        if kept.len() > 3 {
                            kept.remove(draw(kept.len() as u64) as usize);
                        }
                    }
                    _ => {
                        // Serialise a kept snapshot now (JSON taken from the
                        // items still live) or later (from frozen chunks).
                        if let Some((snapshot, expected)) = kept.last() {
                            assert_eq!(&json(snapshot), expected);
                        }
                    }
                }
                assert_eq!(buffer.len(), model.len());
                assert_eq!(buffer.is_empty(), model.is_empty());
            }
            assert_eq!(json(&buffer), json(&model));
            for (snapshot, expected) in &kept {
                assert_eq!(&json(snapshot), expected, "seed {seed}");
            }
            let back: CowBuffer<Item> = serde_json::from_str(&json(&model)).unwrap();
            assert_eq!(json(&back), json(&model));
            assert_eq!(back.len(), model.len());
        }
    }

    #[test]
    fn a_write_after_a_snapshot_freezes_only_the_chunks_it_touches() {
        let mut buffer = CowBuffer::default();
        for i in 0..(4 * CHUNK as u64) {
            buffer.push(i);
        }
        let snapshot = buffer.snapshot();
        let expected: Vec<u64> = (0..4 * CHUNK as u64).collect();
        // Takes item 1 (chunk 0) and moves the last item (chunk 3) there.
        assert_eq!(buffer.swap_remove(1), 1);
        let frozen: Vec<bool> = snapshot
            .chunks
            .iter()
            .map(|c| matches!(&*c.lock(), Items::Frozen(_)))
            .collect();
        assert_eq!(frozen, [true, false, false, true]);
        assert_eq!(json(&snapshot), json(&expected));
        drop(snapshot);
        // Alone again: writes in place.
        let before = Arc::as_ptr(&buffer.chunks[1]);
        buffer.swap_remove(CHUNK + 1);
        assert_eq!(Arc::as_ptr(&buffer.chunks[1]), before);
    }

    #[test]
    fn an_item_that_cannot_be_serialised_fails_the_snapshot_not_the_buffer() {
        let bad = || BTreeMap::from([((1u8, 2u8), 3u8)]);
        let mut buffer = CowBuffer::default();
        buffer.push(bad());
        buffer.push(bad());
        let snapshot = buffer.snapshot();
        assert!(serde_json::to_string(&snapshot).is_err());
        // Frozen with the error: the writer keeps its items.
        assert_eq!(buffer.swap_remove(0), bad());
        assert!(serde_json::to_string(&snapshot).is_err());
        assert_eq!(buffer.len(), 1);
    }
}
