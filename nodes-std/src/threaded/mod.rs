//! Threaded nodes: [`Prefetcher`](crate::Prefetcher) and
//! [`ParallelMapper`](crate::ParallelMapper), the ones that move work to
//! other threads. Both are thin wrappers over one threaded core; its
//! snapshot protocol and hand-over are described in `README.md` beside
//! this file.
//!
//! The core, one responsibility per file:
//! - [`core`]: the lifecycle of a pass (reset, next, end, state, shutdown);
//! - [`plan`]: how a node runs (workers, order, window, snapshots, layout);
//! - [`puller`]: the source's side (numbering, restored skips, snapshots);
//! - [`worker`]: a worker thread's loop and the per-item [`Stage`](worker::Stage);
//! - [`hub`]: the hand-over (credits, chunk queue, wake-ups, cancel);
//! - [`pool`]: the consumer's side of a running pass (chunks back into
//!   source order);
//! - [`snapshot`]: the consumer's position and the state's encoding;
//! - [`adapt`]: the opt-in switch of a prefetch's source to the consumer;
//! - [`clock`], [`sync`], [`panic`], [`cancel`]: time, primitives (std or
//!   loom), user panics as errors, and the public cancel handle.
//!
//! Design rules that hold throughout:
//! - A source is only ever touched by one thread at a time, and by the
//!   consumer only after every worker of the previous pass was joined.
//! - No wait has a timeout: every wait is for a condition changed under
//!   the same mutex by a thread that then notifies (see `hub.rs`); a stop
//!   closes the hub, which wakes every waiting worker, then joins them. A
//!   worker blocked inside the user's own code can only be waited for.

pub(crate) mod adapt;
pub(crate) mod cancel;
pub(crate) mod clock;
pub(crate) mod core;
pub(crate) mod hub;
#[cfg(test)]
#[cfg(loom)]
mod loom_tests;
pub(crate) mod panic;
pub(crate) mod par_map;
pub(crate) mod plan;
pub(crate) mod pool;
pub(crate) mod prefetch;
pub(crate) mod puller;
pub(crate) mod snapshot;
pub(crate) mod sync;
pub(crate) mod worker;
