//! [`Resume`]: what a node's state promises beyond exact resume, as the
//! thread-backed nodes and elastic resharding read it from a description.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::describe::Description;

/// What a node's state promises beyond "resetting with it continues
/// exactly": how the items it returns relate to its child's, and what its
/// state holds. [`Stateful::resume`](crate::Stateful::resume) returns it and
/// [`Description`] records it, so a node that reads ahead decides how to
/// snapshot its source, and `elastic::check`/`reshard` decide how to deal a
/// saved state to another number of ranks, from the description alone,
/// even offline.
///
/// Each variant is a promise about the node itself, not its subtree; what a
/// subtree promises is read from its description
/// ([`Description::varying_order`], [`Description::counted_path`]).
/// `Replays`, the default, promises nothing more and is right for any node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Resume {
    /// Resumes exactly from its own state, and nothing more.
    #[default]
    Replays,
    /// A source whose state, within a pass, changes between items only in
    /// a count: every `Ok(Some)` adds one to the `u64` under this key and
    /// changes nothing else (an `IterableWrapper`'s `num_yielded`). A node
    /// reading ahead then works out the state after any item from one
    /// snapshot.
    CountsItems(Cow<'static, str>),
    /// Returns one item per item of its single child and keeps no state of
    /// its own: its state is its child's, nested (a `Mapper`). A count
    /// below it is its count.
    ForwardsCount,
    /// Returns one result per result of its single child (a
    /// `MapStyleWrapper` looking up one index each), with state of its own.
    OneToOne,
    /// Returns at most one item per item of its single child, passing over
    /// the rest (a `Filter`, a `TryMapper` skipping bad records).
    Drops,
    /// Returns each group of this many items of its single child as one
    /// item, the last group possibly shorter (a `Batcher`).
    Groups(u64),
    /// Holds items pulled from its single child and not yet returned, saved
    /// in its state under `buffer` (a `Shuffler`).
    Buffers,
    /// Makes an inner node from each item of its single child and reads
    /// several in turn, saving each open one's item and state under `slots`
    /// (an `Interleave`).
    Interleaves,
    /// Holds parts of items pulled from its single child and not yet
    /// returned, saved in its state under `carry` (a `Packer`'s documents
    /// not yet packed).
    Carries,
    /// Reads its single child ahead and saves the child's snapshot plus the
    /// items delivered since (`steps_since_snapshot`, `delivered_ahead`): a
    /// `ParallelMapper` or `Prefetcher`. `in_order: false` when the order it
    /// delivers in can differ between two runs from the same state.
    ReadsAhead {
        /// Whether it delivers in its child's order.
        in_order: bool,
    },
    /// Its output order can differ between two runs from the same state, so
    /// a node above cannot restore by pulling it again.
    VaryingOrder,
    /// Draws from several children (the weighted and round-robin mixes).
    /// With neither flag, a child that ends is restarted, and the next pass
    /// resets it from where its first run ended (the `CYCLE_*` stop
    /// criteria): every rank starts each pass's first runs in one epoch.
    Mixes {
        /// Whether a pass reads each child exactly once
        /// (`AllDatasetsExhausted`).
        each_once: bool,
        /// Whether a pass ends when its first child ends, leaving the other
        /// children's rest unread (`FirstDatasetExhausted`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stops_at_first_end: bool,
    },
    /// A sampler over global positions whose unread rest can be dealt to
    /// another number of ranks (`ElasticSampler`).
    Redistributable,
    /// A list of files read in a global order, the same on every rank
    /// (`Files`): under a [`Resume::Shards`] its unread rest can be dealt
    /// to another number of ranks.
    ListsFiles,
    /// Keeps every `world_size`-th item of its single child for one rank
    /// (a `Sharder`).
    Shards,
    /// Reads the files its single child yields, one after the other, and
    /// saves the open file's name, offset and identity (`read_lines`,
    /// `read_jsonl`).
    ReadsFiles,
    /// Returns the elements of a collection made from each item of its
    /// single child, and saves the child's state from before the current
    /// item (`source`), how many of its elements it returned and, part way
    /// through an item, the child's current state (`after`) (a
    /// `FlatMapper`, an `Unbatcher`).
    Expands,
}

impl Resume {
    /// Whether each item stands for a known number of its child's items
    /// (one, or a group's worth), so that a node reading ahead above can
    /// count positions per item delivered.
    pub fn counts_positions(&self) -> bool {
        matches!(
            self,
            Resume::Redistributable
                | Resume::ForwardsCount
                | Resume::OneToOne
                | Resume::Groups(_)
                | Resume::ReadsAhead { in_order: true }
        )
    }

    /// Whether its output order can differ between two runs from the same
    /// state.
    pub fn varies(&self) -> bool {
        matches!(
            self,
            Resume::VaryingOrder | Resume::ReadsAhead { in_order: false }
        )
    }

    pub(crate) fn is_replays(&self) -> bool {
        *self == Resume::Replays
    }
}

impl Description {
    /// The first node in this subtree, depth first, whose output order can
    /// differ between two runs from the same state ([`Resume::varies`]),
    /// rendered for error messages; `None` if every node replays exactly.
    pub fn varying_order(&self) -> Option<String> {
        let varies = self.subtree().find(|desc| desc.resume().varies());
        varies.map(ToString::to_string)
    }

    /// For a subtree whose state changes between items only in a count
    /// ([`Resume::CountsItems`] below a chain of [`Resume::ForwardsCount`]):
    /// the keys that lead to that count from this node's state
    /// (`["num_yielded"]`, `["source", "num_yielded"]`).
    pub fn counted_path(&self) -> Option<Vec<String>> {
        match self.resume() {
            Resume::CountsItems(key) => Some(vec![key.to_string()]),
            Resume::ForwardsCount => {
                let mut children = self.children();
                let (key, child) = children.next().filter(|_| children.len() == 0)?;
                let mut path: Vec<String> = key.split('/').map(str::to_owned).collect();
                path.extend(child.counted_path()?);
                Some(path)
            }
            _ => None,
        }
    }
}
