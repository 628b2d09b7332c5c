//! Sources: where items come from. Iterable wrappers, map-style datasets
//! read through a sampler, and the samplers themselves.
//!
//! Nothing here has a child node; everything above imports from here.

#[cfg(feature = "parquet")]
pub(crate) mod arrow_row;
pub(crate) mod files;
pub(crate) mod glob;
#[cfg(feature = "gzip")]
pub(crate) mod gzip;
pub(crate) mod iterable;
pub(crate) mod lines;
pub(crate) mod map_style;
pub(crate) mod open;
#[cfg(feature = "parquet")]
pub(crate) mod parquet;
#[cfg(feature = "parquet")]
pub(crate) mod parquet_file;
pub(crate) mod permute;
pub(crate) mod reader;
pub(crate) mod record;
#[cfg(feature = "object-store")]
pub(crate) mod remote;
#[cfg(feature = "parquet")]
pub(crate) mod row_groups;
pub(crate) mod sampler_wrapper;
#[cfg(feature = "zstd")]
pub(crate) mod zstd;
