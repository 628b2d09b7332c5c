//! nodes-std's integration tests: one test binary (as cargo's own suite
//! does), one module per node, with the shared fixtures as modules of this
//! crate.

mod common;
mod mixing_support;
mod scripted;
mod support;

mod batch;
mod closure_errors;
mod counted;
mod cycle;
mod filter;
mod header;
mod iterable;
// The `tracing` feature's events (CI tests with `--all-features`).
#[cfg(feature = "tracing")]
mod logging;
mod map;
mod map_style;
mod par_map;
mod prefetch;
mod round_robin_sampler;
mod sampler_wrapper;
mod samplers;
mod send_sync;
mod shard;
mod shuffle;
mod size_hint;
mod threaded;
mod unbatch;
mod weighted_sampler;
mod zip;
