//! [`Shuffler`]: a seeded buffer shuffle with exact resume.

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cow::CowBuffer;
use crate::seed::PassRng;
use crate::transforms::{debug_fields, require};
use crate::{Cx, Error, Hint, Node, NodeId, NodeName, Result, State, Validate};

/// This struct is created by [`NodeExt::shuffle`](crate::NodeExt::shuffle).
/// See its documentation for more.
///
/// Shuffles its source through a buffer: each item returned is drawn at
/// random from the next `buffer_size` items not yet returned.
///
/// The first call of a pass fills the buffer (`buffer_size` pulls); each
/// later call pulls one item to replace the one it returns. A buffer at
/// least as large as the pass is a full shuffle; a buffer of 1 keeps the
/// order. The randomness comes from a ChaCha8 generator seeded with `seed`
/// on stream `epoch`, and the draws are the crate's own: the same seed gives the same order on every run and
/// machine, and each epoch has its own order. The epoch advances on
/// `reset(None)` only if the previous pass was started, as for
/// [`SamplerWrapper`](crate::SamplerWrapper).
///
/// # State
/// `source` (the source's state, *after* the buffered items were pulled),
/// `epoch`, `rng` (the generator, with its position), `buffer` (the
/// buffered items themselves, in buffer order) and `started`. Keeping the items in the
/// state is what makes resume exact without replaying: restore is the
/// source's restore plus deserialising at most `buffer_size` items —
/// O(buffer_size), independent of the position. The price is the bound
/// `Item: Serialize + DeserializeOwned + 'static` and a serialised state
/// that grows with the buffer: shuffle indices or small records, not
/// decoded images. Taking a state does not convert the items: it shares the
/// buffer (copy-on-write, in chunks) and the items become JSON only when the
/// state is serialised or read, so a state costs O(1) whatever the buffer
/// size. A state kept alive while the shuffle goes on holds the items it
/// captured (the chunks written since as JSON).
///
/// # Changing the number of ranks
/// [`elastic::reshard`](crate::elastic::reshard) deals the items buffered
/// on every old rank among the new ranks' shufflers, whose generators it
/// moves to a stream of their own (see the [elastic module
/// docs](crate::elastic)). A new rank may so receive more than
/// `buffer_size` items (8 ranks into 1): it returns items from its buffer,
/// without pulling, until the buffer is back under `buffer_size`, then goes
/// on as usual. A state it saves meanwhile holds the extra items and loads
/// again.
///
/// # Errors
/// Restoring a state whose buffer holds more than `buffer_size` items is a
/// bad state, unless the state's generator is on a stream written by
/// `elastic::reshard` (the over-full buffer of a new rank, as above).
///
/// ```
/// use nodes_std::prelude::*;
///
/// let mut loader = Loader::new(IterableWrapper::new(0..10u32).shuffle(4, 7)?);
/// let epoch0: Vec<u32> = loader.epoch().collect::<Result<_>>()?;
/// let epoch1: Vec<u32> = loader.epoch().collect::<Result<_>>()?;
/// assert_ne!(epoch0, epoch1);
/// let mut sorted = epoch0.clone();
/// sorted.sort();
/// assert_eq!(sorted, (0..10).collect::<Vec<_>>());
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(validate, size_hint, resume = crate::Resume::Buffers)]
#[must_use = "nodes do nothing until started"]
pub struct Shuffler<S: Node> {
    #[node(child)]
    source: S,
    #[node(param)]
    buffer_size: usize,
    #[node(param)]
    seed: u64,
    // Declaration order is reset order: `epoch` reads the old `started`, and
    // `rng` reads the new `epoch`.
    #[node(state, default = crate::seed::epoch_after(self.epoch, self.started))]
    epoch: u64,
    #[node(state, deferred, default = PassRng::new(self.seed, self.epoch))]
    rng: PassRng,
    /// Saved as a snapshot (O(1) per state), converted to JSON only when the
    /// state is serialised: see `cow.rs`.
    #[node(state, deferred)]
    buffer: CowBuffer<S::Item>,
    /// Whether `next` ran since the last `reset(None)` (see `SamplerWrapper`
    /// for why this is state).
    #[node(state)]
    started: bool,
}

impl<S: Node + fmt::Debug> fmt::Debug for Shuffler<S> {
    debug_fields!("Shuffler", finish_non_exhaustive;
        source, buffer_size, seed, epoch, buffered = (buffer.len()));
}

impl<S: Node> Shuffler<S> {
    pub(crate) fn new(source: S, buffer_size: usize, seed: u64) -> Result<Self> {
        let why = "buffer_size must be at least 1";
        require(buffer_size > 0, "Shuffler", why)?;
        Ok(Shuffler {
            source,
            buffer_size,
            seed,
            epoch: 0,
            rng: PassRng::new(seed, 0),
            buffer: CowBuffer::default(),
            started: false,
        })
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Items currently buffered.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }
}

impl<S> Node for Shuffler<S>
where
    S: Node,
    S::Item: Serialize + DeserializeOwned + Send + 'static,
{
    type Item = S::Item;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            self.started = true;
            // Fill to one short of the buffer size, then pull one more item:
            // the draw is over the buffer and that item, as if it had been
            // pushed and the pick swap-removed (same draws, same buffer
            // order), with one write to the buffer instead of two. A buffer
            // at or over its size (one `elastic::reshard` dealt) skips both
            // and draws from the buffer alone, draining it one item a call.
            while self.buffer.len() + 1 < self.buffer_size {
                match self.source.next(cx)? {
                    Some(item) => self.buffer.push(item),
                    None => break,
                }
            }
            if self.buffer.len() + 1 == self.buffer_size
                && let Some(item) = self.source.next(cx)?
            {
                let len = self.buffer.len();
                // `below` is at most `len`, a usize.
                let pick = self.rng.below(len as u64 + 1) as usize;
                return Ok(Some(if pick == len {
                    item
                } else {
                    self.buffer.replace(pick, item)
                }));
            }
            if self.buffer.is_empty() {
                return Ok(None);
            }
            // `below` is at most `len - 1`, a usize.
            let pick = self.rng.below(self.buffer.len() as u64) as usize;
            Ok(Some(self.buffer.swap_remove(pick)))
        })
    }
}

/// Checks a restored state before any of it is applied: the buffer fits
/// (or was dealt by `elastic::reshard`, and drains first), the generator is
/// this pass's, and where the source counts its items, the generator's
/// position fits the items returned: each took one draw of one or two words
/// (four past 2^32 items).
impl<S: Node> Validate for Shuffler<S> {
    fn validate(&self, state: &State) -> Result<()> {
        let found = state.value_ref("buffer")?.as_array().map_or(0, Vec::len);
        let rng = state.child("rng")?;
        let dealt = crate::seed::is_reshard_stream(rng.get("stream")?);
        let word_pos = PassRng::check_saved("Shuffler", &rng, self.seed, state.get("epoch")?)?;
        let (path, why) = if found > self.buffer_size && !dealt {
            let why = format!(
                "Shuffler has a buffer of {} items, the state holds {found} (only a state written by elastic::reshard may hold more)",
                self.buffer_size
            );
            (state.path_of("buffer"), why)
        } else if !state.get::<bool>("started")? && (found > 0 || word_pos > 0) {
            let why = "a pass that has not started has drawn nothing and buffers nothing";
            (state.path_of("started"), why.to_owned())
        } else if let (crate::Resume::CountsItems(key), false) = (self.source.resume(), dealt)
            && let source = state.child("source")?
            && let pulled = source.get::<u64>(&key)?
            && !pulled
                .checked_sub(found as u64)
                .is_some_and(|n| (n..=n.saturating_mul(4)).contains(&word_pos))
        {
            let why = format!(
                "the source returned {pulled} items, {found} are buffered, and the generator drew {word_pos} words: these cannot all be right"
            );
            (source.path_of(&key), why)
        } else {
            return Ok(());
        };
        Err(Error::bad_state(path, why))
    }
}

/// The buffered items plus the source's: a shuffle changes the order, not
/// the count (an error from the source passes through as one item).
impl<S: Node> crate::SizeHint for Shuffler<S> {
    fn size_hint(&self) -> Hint {
        Hint::exact(self.buffer.len() as u64).then(self.source.size_hint())
    }
}
