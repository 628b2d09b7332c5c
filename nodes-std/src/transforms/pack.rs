//! [`Packer`]: concatenate token sequences and cut them into chunks of a
//! fixed length (Grain's concat-then-split packing).

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::transforms::{debug_fields, require};
use crate::{Cx, Node, NodeId, NodeName, Result};

/// This struct is created by [`NodeExt::pack`](crate::NodeExt::pack) (the
/// last chunk of a pass may be shorter) and
/// [`NodeExt::pack_exact`](crate::NodeExt::pack_exact) (a short last chunk
/// is dropped). See their documentation for more.
///
/// Concatenates the token sequences (`Vec<T>`) of its source, in order, and
/// yields them cut into `Vec<T>`s of exactly `seq_len` tokens: a document
/// longer than what is left of a chunk is split across chunks, and a chunk
/// holds the ends and starts of as many documents as fit (Grain's
/// concat-then-split). Empty sequences are skipped. After
/// [`with_segments`](Packer::with_segments) it yields [`Packed`] chunks
/// that also say which document each token belongs to and where in it, so
/// a model can keep attention within documents.
///
/// The tokens not yet yielded (at most one chunk's worth, plus the rest of a
/// document longer than a chunk) are carried from one chunk to the next and
/// are part of the state; memory is allocated as documents arrive, so a
/// huge `seq_len` costs nothing up front.
///
/// # State
/// `source`: the source's state; `carry`: the tokens pulled but not yet
/// yielded, as a list of `{"tokens": [...], "position": p}` pieces (one per
/// document, `p` the position in its document of the piece's first token).
/// Restore is the source's restore plus the carried tokens: O(carried
/// tokens), nothing is pulled again.
///
/// # Errors
/// An error from the source is returned at once, in the place of the
/// document it stands for; the tokens carried stay carried, so the chunk it
/// interrupted comes right after it, and a state taken after it resumes
/// after it.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let docs = vec![vec![1, 2, 3], vec![4, 5], vec![6, 7, 8, 9, 10]];
/// let chunks: Vec<Vec<u32>> = IterableWrapper::new(docs.clone()).pack(4)?.start()?.collect::<Result<_>>()?;
/// assert_eq!(chunks, [vec![1, 2, 3, 4], vec![5, 6, 7, 8], vec![9, 10]]);
///
/// let exact: Vec<Vec<u32>> = IterableWrapper::new(docs).pack_exact(4)?.start()?.collect::<Result<_>>()?;
/// assert_eq!(exact, [vec![1, 2, 3, 4], vec![5, 6, 7, 8]]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(resume = crate::Resume::Carries)]
#[must_use = "nodes do nothing until started"]
pub struct Packer<S, T, M = TokensOnly> {
    #[node(child)]
    source: S,
    #[node(param)]
    seq_len: usize,
    #[node(param)]
    drop_last: bool,
    /// Whether chunks carry segment ids and positions (from `M`).
    #[node(param)]
    segments: bool,
    /// Tokens pulled but not yet yielded, one piece per document.
    #[node(state)]
    carry: VecDeque<Piece<T>>,
    #[node(config)]
    mode: PhantomData<fn() -> M>,
}

/// The not-yet-yielded tokens of one document.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Piece<T> {
    tokens: VecDeque<T>,
    /// The position in its document of `tokens[0]`.
    position: u64,
}

/// A chunk with its segment ids and positions: what a [`Packer`] yields
/// after [`with_segments`](Packer::with_segments).
///
/// The three vectors have the same length. `segment_ids[i]` numbers the
/// document `tokens[i]` comes from among the documents of this chunk,
/// from 1 (the first document, often the end of one that began in the
/// previous chunk) upwards; `positions[i]` is the position of `tokens[i]`
/// in its document, from 0, so a document split across chunks goes on
/// counting in the next one (positions past `u32::MAX` stay at `u32::MAX`).
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::Packed;
///
/// let docs = vec![vec![1, 2, 3], vec![4, 5]];
/// let chunks: Vec<Packed<u32>> = IterableWrapper::new(docs).pack(4)?.with_segments().start()?.collect::<Result<_>>()?;
/// assert_eq!(chunks[0], Packed { tokens: vec![1, 2, 3, 4], segment_ids: vec![1, 1, 1, 2], positions: vec![0, 1, 2, 0] });
/// assert_eq!(chunks[1], Packed { tokens: vec![5], segment_ids: vec![1], positions: vec![1] });
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Packed<T> {
    /// The chunk's tokens.
    pub tokens: Vec<T>,
    /// For each token, its document's number in this chunk, from 1.
    pub segment_ids: Vec<u32>,
    /// For each token, its position in its document, from 0.
    pub positions: Vec<u32>,
}

/// What a [`Packer`] yields for a chunk: the tokens alone ([`TokensOnly`],
/// the default) or a [`Packed`] chunk ([`WithSegments`], after
/// [`with_segments`](Packer::with_segments)).
pub trait PackOutput<T>: Send {
    /// The packer's item type.
    type Output;
    /// Whether segment ids and positions are part of the output (and are computed).
    const SEGMENTS: bool;
    /// Builds the output; `segment_ids` and `positions` are empty unless
    /// [`SEGMENTS`](PackOutput::SEGMENTS).
    fn output(tokens: Vec<T>, segment_ids: Vec<u32>, positions: Vec<u32>) -> Self::Output;
}

/// Pack output mode: yield `Vec<T>` chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokensOnly;

/// Pack output mode: yield [`Packed`] chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WithSegments;

impl<T> PackOutput<T> for TokensOnly {
    type Output = Vec<T>;
    const SEGMENTS: bool = false;
    fn output(tokens: Vec<T>, _: Vec<u32>, _: Vec<u32>) -> Vec<T> {
        tokens
    }
}

impl<T> PackOutput<T> for WithSegments {
    type Output = Packed<T>;
    const SEGMENTS: bool = true;
    fn output(tokens: Vec<T>, segment_ids: Vec<u32>, positions: Vec<u32>) -> Packed<T> {
        Packed {
            tokens,
            segment_ids,
            positions,
        }
    }
}

impl<S: fmt::Debug, T, M> fmt::Debug for Packer<S, T, M> {
    debug_fields!("Packer", finish; source, seq_len, drop_last, segments,
        carried = (carry.iter().map(|p| p.tokens.len()).sum::<usize>()));
}

impl<S, T> Packer<S, T, TokensOnly> {
    pub(crate) fn new(source: S, seq_len: usize, drop_last: bool) -> Result<Self> {
        require(seq_len > 0, "Packer", "seq_len must be at least 1")?;
        Ok(Packer {
            source,
            seq_len,
            drop_last,
            segments: false,
            carry: VecDeque::new(),
            mode: PhantomData,
        })
    }

    /// Yields [`Packed`] chunks: the tokens with their segment ids and
    /// positions (see [`Packed`]).
    pub fn with_segments(self) -> Packer<S, T, WithSegments> {
        Packer {
            source: self.source,
            seq_len: self.seq_len,
            drop_last: self.drop_last,
            segments: true,
            carry: self.carry,
            mode: PhantomData,
        }
    }
}

impl<S, T, M> Packer<S, T, M> {
    /// The number of tokens in a full chunk.
    pub fn seq_len(&self) -> usize {
        self.seq_len
    }

    /// Whether a short last chunk is dropped.
    pub fn drop_last(&self) -> bool {
        self.drop_last
    }

    /// Cuts the next chunk of `len` tokens from the carry (which holds at
    /// least that many).
    fn cut(&mut self, len: usize) -> M::Output
    where
        M: PackOutput<T>,
    {
        let mut tokens = Vec::with_capacity(len);
        let room = if M::SEGMENTS { len } else { 0 };
        let (mut segment_ids, mut positions) = (Vec::with_capacity(room), Vec::with_capacity(room));
        let mut segment = 0u32;
        while tokens.len() < len {
            let Some(piece) = self.carry.front_mut() else {
                break;
            };
            let take = piece.tokens.len().min(len - tokens.len());
            if take > 0 {
                if M::SEGMENTS {
                    segment = segment.saturating_add(1);
                    segment_ids.extend(std::iter::repeat_n(segment, take));
                    positions.extend((0..take as u64).map(|i| {
                        u32::try_from(piece.position.saturating_add(i)).unwrap_or(u32::MAX)
                    }));
                }
                tokens.extend(piece.tokens.drain(..take));
                piece.position = piece.position.saturating_add(take as u64);
            }
            if piece.tokens.is_empty() {
                self.carry.pop_front();
            }
        }
        M::output(tokens, segment_ids, positions)
    }
}

impl<S, T, M> Node for Packer<S, T, M>
where
    S: Node<Item = Vec<T>>,
    T: Serialize + DeserializeOwned + Send,
    M: PackOutput<T>,
{
    type Item = M::Output;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<M::Output>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            let mut carried: usize = self.carry.iter().map(|p| p.tokens.len()).sum();
            while carried < self.seq_len {
                // An error leaves the carry as it is: the chunk comes after it.
                let Some(doc) = self.source.next(cx)? else {
                    if carried == 0 || self.drop_last {
                        self.carry.clear();
                        return Ok(None);
                    }
                    break;
                };
                if !doc.is_empty() {
                    carried = carried.saturating_add(doc.len());
                    self.carry.push_back(Piece {
                        tokens: VecDeque::from(doc),
                        position: 0,
                    });
                }
            }
            Ok(Some(self.cut(carried.min(self.seq_len))))
        })
    }
}
