//! Transforms: one child in, one stream out, on the caller's thread.
//! One node per file, flat, as `std::iter` adapters are.

pub(crate) mod batch;
pub(crate) mod cycle;
pub(crate) mod filter;
pub(crate) mod filter_map;
pub(crate) mod flat_map;
pub(crate) mod header;
pub(crate) mod map;
pub(crate) mod pack;
pub(crate) mod shard;
pub(crate) mod shuffle;
pub(crate) mod unbatch;
