//! Checkpointable, composable data-loading pipelines: the stock nodes,
//! `#[derive(Node)]`, and everything from `nodes-core`.
//!
//! A pipeline is a tree of nodes (sources, maps, batchers, samplers,
//! prefetchers) that you can stop mid-epoch, save as a plain JSON [`State`],
//! and resume later with nothing lost and nothing repeated, as PyTorch's
//! `torchdata.nodes` does. `use nodes_std::prelude::*;` brings in what a
//! pipeline needs.
//!
//! ```
//! use nodes_std::prelude::*;
//!
//! let build = || -> Result<_> {
//!     IterableWrapper::new(0..100u32)
//!         .shuffle(16, 7)?                                    // seeded, resumable
//!         .par_map(|x| Ok(x * 2), ParallelOptions::new(2))?   // 2 threads, in order
//!         .batch(8)
//! };
//! let mut loader = Loader::new(build()?);
//! let mut epoch = loader.epoch();
//! let first = epoch.next().transpose()?;
//! let checkpoint = epoch.state_dict()?.to_json()?;            // plain JSON
//!
//! let mut resumed = Loader::new(build()?);                    // later, elsewhere
//! resumed.load_state_dict(&State::from_json(&checkpoint)?)?;
//! let rest: Vec<Vec<u32>> = resumed.epoch().collect::<Result<_>>()?;
//! assert_eq!((first.map(|b| b.len()), rest.len()), (Some(8), 12));
//! # Ok::<(), nodes_std::Error>(())
//! ```
//!
//! # Where things are
//!
//! - **Sources:** [`IterableWrapper`], [`MapStyleWrapper`] over a
//!   [`Dataset`] or [`Lookup`], [`SamplerWrapper`] over a
//!   [`SequentialSampler`], [`RandomSampler`] or [`ShardedSampler`],
//!   [`ElasticSampler`], and [`Files`] read by [`NodeExt::read_lines`] and
//!   [`NodeExt::read_jsonl`].
//! - **Transforms** are [`NodeExt`] methods: `map`, `try_map`, `filter`,
//!   `filter_map`, `flat_map`, `batch`, `unbatch`, `shuffle`, `header`,
//!   `cycle`, `shard`, `pack`.
//! - **Threads:** [`NodeExt::par_map`] with [`ParallelOptions`], and
//!   [`NodeExt::prefetch`].
//! - **Several sources:** [`MultiNodeWeightedSampler`],
//!   [`MultiNodeRoundRobinSampler`], [`NodeExt::zip`],
//!   [`NodeExt::interleave`].
//! - **Running:** [`Loader`] (epochs and checkpoints), or
//!   [`NodeExt::start`] for a bare [`Running`] pipeline.
//! - **Errors:** [`Error`]; a bad record is one `Err` item, and
//!   [`ErrorPolicy`] chooses to deliver, skip or stop.
//! - **Your own nodes:** [`Node`](trait@Node), [`Stateful`],
//!   [`#[derive(Node)]`](derive@Node), and [`testing`] to check them.
//! - **Resharding** a job onto another number of ranks: [`elastic`].
//!
//! # Features
//!
//! - `gzip`, `zstd`: read `.gz` and `.zst` files (pure Rust).
//! - `parquet`: read Parquet files ([`ReadParquet`], [`ReadParquetBatches`])
//!   on the Apache Arrow crates.
//! - `object-store`: read files in S3, GCS and Azure buckets and over
//!   HTTP(S) ([`Store`]), with every file reader.
//! - `tracing`: log epochs, restores, worker threads and skipped records
//!   through [`tracing`](https://docs.rs/tracing), target `nodes`.
//!
//! # Guides
//!
//! The repository's `docs/` folder holds the guides: checkpointing and
//! compatibility, errors and the exactly-once guarantee, custom nodes,
//! threaded nodes, reading files, distributed and elastic use, size hints,
//! logging and statistics, and the torchdata name map. `BENCHMARKS.md`
//! holds the performance figures.
#![forbid(unsafe_code)]

// Lets `#[derive(Node)]`'s default path (`::nodes_std`) work inside this crate too.
extern crate self as nodes_std;

mod cow;
mod delegate;
pub mod elastic;
mod ext;
mod mixing;
mod policy;
mod rank;
mod seed;
mod sources;
mod threaded;
mod transforms;

pub use crate::elastic::ElasticSampler;
pub use crate::ext::{NodeExt, boxed_err};
pub use crate::mixing::zip::Zip;
pub use crate::mixing::{
    MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, OutputMode, Plain, StopCriteria, Tagged,
    WithSource,
};
pub use crate::policy::ErrorPolicy;
pub use crate::rank::rank_from_env;
pub use crate::sources::files::Files;
pub use crate::sources::iterable::{FromFn, IterableWrapper, ReIterable, SeekableIterator};
pub use crate::sources::lines::{DEFAULT_MAX_LINE_BYTES, ReadJsonl, ReadLines};
pub use crate::sources::map_style::{Dataset, Lookup, MapStyleWrapper};
#[cfg(feature = "parquet")]
pub use crate::sources::parquet::{ParquetPart, ReadParquet, ReadParquetBatches, RowGroup};
pub use crate::sources::record::RecordError;
#[cfg(feature = "object-store")]
pub use crate::sources::remote::{MAX_READ_AHEAD, Retry, Store, Timer};
#[cfg(feature = "parquet")]
pub use crate::sources::row_groups::ParquetRowGroups;
pub use crate::sources::sampler_wrapper::{
    RandomSampler, Remainder, Sampler, SamplerWrapper, SequentialSampler, ShardedSampler,
};
pub use crate::threaded::cancel::CancelHandle;
pub use crate::threaded::par_map::{ParallelMapper, ParallelOptions};
pub use crate::threaded::prefetch::Prefetcher;
pub use crate::transforms::batch::Batcher;
pub use crate::transforms::cycle::Cycler;
pub use crate::transforms::filter::Filter;
pub use crate::transforms::header::Header;
pub use crate::transforms::map::{Mapper, TryMapper};
pub use crate::transforms::shard::Sharder;
pub use crate::transforms::shuffle::Shuffler;
pub use crate::transforms::unbatch::Unbatcher;
pub use nodes_core::{
    BoxError, Count, Cx, Description, Epoch, Error, Fnv1a64, Hint, Init, Lazy, Listed, Loader,
    Node, NodeId, NodeName, NodeStats, Param, Progress, Replay, ResetFlag, Result, Resume, Running,
    SizeHint, Snapshot, State, Stateful, Stats, Tally, Validate, testing,
};
pub use nodes_derive::Node;

pub use crate::mixing::interleave::Interleave;
pub use crate::transforms::filter::FilterMapper;
pub use crate::transforms::flat_map::FlatMapper;
pub use crate::transforms::pack::{PackOutput, Packed, Packer, TokensOnly, WithSegments};

#[doc(hidden)]
pub use nodes_core::{__private, __private_0_1_0, __require_derive_version};

/// Everything a pipeline author needs: `use nodes_std::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Dataset, ElasticSampler, ErrorPolicy, Files, IterableWrapper, Lookup, MapStyleWrapper,
        MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, NodeExt, Packed, ParallelOptions,
        RandomSampler, Remainder, Sampler, SamplerWrapper, SeekableIterator, SequentialSampler,
        ShardedSampler, StopCriteria, Tagged, boxed_err,
    };
    pub use nodes_core::{
        Cx, Description, Error, Hint, Init, Lazy, Loader, Node, NodeName, Param, Result, Resume,
        SizeHint, State, Stateful, Validate,
    };
    pub use nodes_derive::Node;
}
