//! Stock nodes and `#[derive(Node)]` for checkpointable data-loading pipelines.
//!
//! This crate is the one to depend on: it re-exports everything from
//! `nodes-core` (the [`Node`] contract, [`State`], [`Loader`], ...), the
//! derive, and the stock nodes. `use nodes_std::prelude::*;` brings in what a
//! pipeline needs.
#![forbid(unsafe_code)]
// The workspace README's quickstart runs as a doc test.
#![doc = ""]
#![doc = include_str!("../../README.md")]

// Lets `#[derive(Node)]`'s default path (`::nodes_std`) work inside this crate too.
extern crate self as nodes_std;

mod cow;
mod delegate;
pub mod elastic;
mod ext;
mod hint;
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
pub use crate::sources::lines::{DEFAULT_MAX_LINE_BYTES, ReadJsonl, ReadLines, RecordError};
pub use crate::sources::map_style::{Dataset, Lookup, MapStyleWrapper};
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
    BoxError, Cx, Description, Epoch, Error, Init, Lazy, Loader, Node, NodeId, NodeName, NodeStats,
    Param, Replay, ResetFlag, Result, Running, SizeHint, Snapshot, State, StateWriter, Stateful,
    Stats, Validate, testing,
};
pub use nodes_derive::Node;

pub use crate::mixing::interleave::Interleave;
pub use crate::transforms::filter_map::FilterMapper;
pub use crate::transforms::flat_map::FlatMapper;
pub use crate::transforms::pack::{PackOutput, Packed, Packer, TokensOnly, WithSegments};

#[doc(hidden)]
pub use nodes_core::__private;

/// Everything a pipeline author needs: `use nodes_std::prelude::*;`.
pub mod prelude {
    pub use crate::ErrorPolicy;
    pub use crate::Files;
    pub use crate::NodeExt;
    pub use crate::ParallelOptions;
    pub use crate::boxed_err;
    pub use crate::{
        Dataset, ElasticSampler, IterableWrapper, Lookup, MapStyleWrapper, RandomSampler,
        Remainder, Sampler, SamplerWrapper, SeekableIterator, SequentialSampler, ShardedSampler,
    };
    pub use crate::{MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, StopCriteria, Tagged};
    pub use nodes_core::{
        Cx, Description, Error, Init, Lazy, Loader, Node, NodeName, Param, Result, State, Stateful,
        Validate,
    };
    pub use nodes_derive::Node;

    pub use crate::Packed;
}
