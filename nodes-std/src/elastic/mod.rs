//! Elastic resume: a job saved on N ranks resumes on M ranks, for any N and
//! M, with every item of the epoch delivered exactly once across the job.
//!
//! # How
//!
//! Each rank reads a map-style dataset through an [`ElasticSampler`]: every
//! rank wraps the same global order (a [`RandomSampler`](crate::RandomSampler)
//! with the job's seed, or a [`SequentialSampler`](crate::SequentialSampler)),
//! and rank `r` of `N` reads positions `r`, `r + N`, `r + 2N`, ... of it.
//! Its state is a *plan* (the global positions this rank reads this epoch)
//! and how far it got, so the positions a rank consumed are known from its
//! state alone.
//!
//! Each rank saves its own loader state as usual. To resume on `M` ranks,
//! [`reshard`] (offline, once) or [`reshard_rank`] (on every new rank;
//! [`load_resharded`] also loads the result) takes the states of all `N`
//! old ranks and:
//!
//! 1. reads, for each source, what every old rank consumed: its sampler's
//!    position, plus what the nodes above it had delivered that the sampler's
//!    own position does not show (the items a `par_map` or `prefetch`
//!    delivered after its source snapshot, in order or ahead of a gap; a
//!    `batch` under them counts `batch_size` positions per batch). A position
//!    a `filter` dropped counts as consumed; an item pulled but not yet
//!    delivered (read-ahead of a threaded node) does not: it goes back to the
//!    pool. Below a `shuffle`, every position the shuffle pulled counts as
//!    consumed, whether its item was returned or sits in the buffer (step 3
//!    passes the buffered items on);
//! 2. computes the global cursor: the first position no rank consumed, the
//!    last one some rank did, and the *holes* between them that nobody
//!    consumed;
//! 3. deals the holes and the rest of the order among the `M` new ranks (the
//!    `j`-th remaining position goes to rank `j mod M`: ranks differ by at
//!    most one item), and writes each new rank's loader state: its samplers at
//!    their new plans, threaded nodes with nothing delivered since their
//!    snapshot, the mixes' draws on a new stream seeded from the job seed,
//!    the epoch and the new rank and world size;
//! 4. deals the items buffered in every old rank's shuffler among the new
//!    ranks' shufflers at the same path: old rank by old rank (in rank
//!    order), each buffer in its order, the `j`-th item to new rank
//!    `j mod M`. Each new shuffler keeps its seed and epoch and draws from a
//!    stream of its own, a hash of (epoch, new rank, new world size) in the
//!    upper half of the stream numbers (an epoch's stream is its number, so
//!    the two never meet). A new rank can so hold more items than its
//!    `buffer_size` (8 ranks into 1): it returns items from its buffer
//!    without pulling until the buffer is back under its size, and a state
//!    it saves meanwhile loads again (a shuffler accepts an over-full buffer
//!    only on such a stream; any other over-full state is a bad state).
//!    Both deals start at new rank 0, so with a shuffle a new rank's share
//!    of positions and its share of buffered items each differ from
//!    another rank's by at most one: its total by at most two;
//! 5. carries over the error budgets: a `try_map` (or a `par_map`/`prefetch`
//!    with an [`ErrorPolicy`](crate::ErrorPolicy)) on the new ranks starts
//!    from the job's count, not one rank's. With `S` the bad records all old
//!    ranks skipped at that node so far this epoch, new rank `m` of `M`
//!    starts at `S / M`, plus one if `m < S mod M`: the shares add up to `S`,
//!    so the job's total is kept, and differ by at most one. Under
//!    `SkipAtMost(n)`, a new rank whose share is `n` or more ends its pass at
//!    its next bad record. A pass an old rank's policy ended is not ended on
//!    the new ranks (its error was delivered; its unread positions go back
//!    to the pool like every rank's).
//!
//! The next epochs are ordinary epochs of `M` ranks. A rank whose share is
//! empty stays in the cut epoch with nothing left (its state is marked
//! `rest_of_epoch`): its next `epoch()` is empty and has its peers' index,
//! and a state it saves then reshards with theirs.
//!
//! The cost is linear in the number of positions between the global cursor's
//! first free position and its last consumed one (plus a sort of the holes
//! found there) and in the items the old ranks' shufflers buffered, not in
//! the epoch's length.
//!
//! ```
//! use nodes_std::prelude::*;
//! use nodes_std::{ElasticSampler, elastic};
//!
//! let data: Vec<u32> = (0..20).collect();
//! let build = |rank, world| -> Result<_> {
//!     let sampler = ElasticSampler::new(RandomSampler::new(data.len(), 7), rank, world)?;
//!     MapStyleWrapper::new(data.clone(), sampler).batch(2)
//! };
//! // Two ranks read a little of epoch 0 and save.
//! let mut seen = Vec::new();
//! let mut states = Vec::new();
//! for rank in 0..2 {
//!     let mut loader = Loader::new(build(rank, 2)?);
//!     let mut epoch = loader.epoch();
//!     for _ in 0..=rank {
//!         seen.extend(epoch.next().transpose()?.unwrap());
//!     }
//!     states.push(epoch.state_dict()?);
//! }
//! // Three ranks read the rest.
//! for (rank, state) in elastic::reshard(&states, 3)?.iter().enumerate() {
//!     let mut loader = Loader::new(build(rank as u64, 3)?);
//!     loader.load_state_dict(state)?;
//!     for batch in loader.epoch() {
//!         seen.extend(batch?);
//!     }
//! }
//! seen.sort();
//! assert_eq!(seen, data);
//! # Ok::<(), nodes_std::Error>(())
//! ```
//!
//! # What is supported
//!
//! Sources: [`MapStyleWrapper`](crate::MapStyleWrapper) over an
//! [`ElasticSampler`]. Above them: `map`, `try_map`, `filter`,
//! `filter_map`, `batch`, `shuffle`, `pack`/`pack_exact` (the pieces of
//! documents a packer carries are dealt like a shuffle's buffer; each rank
//! that ends its share drops at most its short tail under `pack_exact`),
//! `par_map` (in and out of order), `prefetch`, and a
//! [`MultiNodeWeightedSampler`](crate::MultiNodeWeightedSampler) or
//! [`MultiNodeRoundRobinSampler`](crate::MultiNodeRoundRobinSampler), each
//! source with its own global order and cursor. Under
//! `StopCriteria::AllDatasetsExhausted` each source is read exactly once.
//! Under a criterion that restarts sources (`CycleUntilAllDatasetsExhausted`,
//! `CycleForever`) every rank starts a pass's first runs in one epoch, and
//! those are dealt: a source an old rank had restarted is read from where
//! its first run ended (nothing left), and what its restarts read is not
//! dealt. The new ranks restart each source at one epoch past every epoch
//! the old ranks' restarts read (its plan's `next_epoch`), so no record is
//! repeated within a run, and the next pass starts there on every rank.
//!
//! Files: [`Files`](crate::Files) (maybe shuffled) under
//! `shard(rank, world_size)` (or the row groups `Files::parquet_row_groups`
//! lists, a list of units dealt like files), read by `read_parquet` (a
//! begun file resumes at its row group and row) or by `read_lines` or
//! `read_jsonl` (plain, gzip or zstd) right above, with the same nodes
//! above the reader as above a `MapStyleWrapper`. An out-of-order
//! `par_map` right above the reader (maps, batches and in-order threaded
//! nodes may stand between) delivers a file's items only after those of
//! the files before it, so the lines it delivered past a gap are in one
//! file, and the new rank that finishes the file passes over them. A
//! file's position in the epoch's order is dealt like a sampler's
//! position; a file a rank began is a consumed position whose rest is
//! dealt whole, in old rank order, the `j`-th to new rank `j mod M`, which
//! reads it first: from its saved offset (a compressed file is
//! decompressed from its start), after checking its name and identity
//! there, passing over the lines a threaded node above had delivered past
//! that offset. Those lines all come from the one file: a file reader asks
//! the threaded node above for a snapshot at each file it opens. The shard
//! of a new rank passes on every file of its plan.
//!
//! An `interleave` may read the files in place of the reader (its function
//! makes the inner node of one path, e.g. `read_lines` over a one-path
//! `IterableWrapper`, maybe prefetched): each open slot is a begun file,
//! dealt like a reader's, and a new rank opens the slots it is dealt at
//! once, past its `cycle_length` if it must; the cycle visits those until
//! they end. A `par_map` or `prefetch` above such an interleave, or above a
//! filter, `try_map`, shuffle, pack or mix over a file reader, delivered
//! items past its snapshot that no count of lines shows: [`settle`]
//! replays them into the states first (see below). An out-of-order
//! `par_map` there runs in order: what it delivered past a gap would map
//! onto no lines of the files.
//!
//! A `par_map`/`prefetch` over a `filter`, `try_map`, `shuffle` or mix that
//! reads an [`ElasticSampler`] cannot count how many positions stand behind
//! the items it delivered since its snapshot; over such a subtree it
//! snapshots every item and delivers in source order (an out-of-order
//! `par_map` there runs in order), so its state names the positions
//! exactly. Over a subtree of `map`/`batch` only, or without an
//! `ElasticSampler`, nothing changes. Over files that would cost every file
//! pipeline a state per item (ten times slower), so there the old states
//! go through [`settle`] before [`reshard`]: it loads each into its old
//! rank's pipeline, where the threaded nodes pull those items again and
//! snapshot their sources right after them, and takes the state again.
//!
//! A `shuffle` may stand anywhere among these: over a `filter` or `batch`,
//! under or over a threaded node, under each source of a mix. Its buffered
//! items travel in the states (step 4), so nothing it holds is lost or
//! repeated. The order of the resharded epoch is another order than the
//! job would have drawn without the reshard (the buffers are regrouped and
//! the generators move to new streams); the epochs after are ordinary.
//!
//! A `flat_map` or `unbatch` part way through an item saves its source's
//! state after the item too (`after`): the reshard reads the positions
//! from it, and deals the item to one new rank as a *pending* item (the
//! old rank's state from before it, made to read only the records the item
//! came from; a weighted mix there draws on the old rank's stream again),
//! which that rank pulls again at restore, passing over what was returned.
//! Above a mix that restarts its sources, the item may span restarts: the
//! pending plan also lists the positions each later run read of the old
//! rank's share (`then`), and the replay's restarts follow it.
//!
//! `batch(n)` stays a per-rank batch of `n` by default: the job's global
//! batch is `n × world_size`, and changes with the number of ranks.
//! [`Reshard::batch_sizes`] keeps the global batch instead
//! ([`BatchSizes::KeepGlobal`], or [`BatchSizes::KeepGlobalUneven`] where the
//! new number of ranks does not divide it), and
//! [`Reshard::new_batch_size`] tells each new rank what to build its
//! pipeline with.
//!
//! # What is refused
//!
//! Pipelines whose position is not a function of global indices or files: an
//! [`IterableWrapper`](crate::IterableWrapper), a `SamplerWrapper` (use an
//! [`ElasticSampler`]), a `Cycler`, `header`, `zip`, `shard` (but over `Files` read as above),
//! and a mix under `StopCriteria::FirstDatasetExhausted` (what a pass reads
//! depends on the number of ranks).
//! The error names the node and its path in the state; [`check`] gives it
//! from a pipeline's description, before training. So
//! are incomplete state sets (a rank missing or given twice), states of
//! other pipelines, of jobs of different sizes, of different epochs, or of
//! different runs.

mod batches;
mod pending;
mod plan;
mod reshard;
mod sampler;
mod settle;
pub(crate) mod walk;

pub use self::batches::BatchSizes;
pub use self::reshard::{Reshard, check, load_resharded, reshard, reshard_rank};
pub use self::sampler::ElasticSampler;
pub(crate) use self::sampler::Plan;
pub use self::settle::{load_resharded_with, settle};
