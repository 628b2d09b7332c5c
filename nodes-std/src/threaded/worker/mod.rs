//! Private threading helpers for the thread-backed nodes
//! ([`ParallelMapper`](crate::ParallelMapper) and [`Prefetcher`](crate::Prefetcher)).
//!
//! The pieces, one file each:
//! - [`thread`]: naming and spawning threads, joining them, and the poison-free
//!   lock helper every other file uses.
//! - [`panic`]: running user code (a map function, a source's `next`) so that
//!   a panic becomes an [`Error::Panicked`](nodes_core::Error::Panicked) value
//!   instead of killing a worker thread silently.
//! - [`permits`]: the counting semaphore that bounds how many items are
//!   between "pulled from the source" and "returned to the consumer".
//! - [`spin`]: how a thread waiting for the other side of the hand-over
//!   spins through a short wait before it sleeps.
//! - [`reorder`]: the consumer-side buffer that turns completion order back
//!   into source order, without polling.
//! - [`ring`]: the one-worker hand-over, items over a single-producer,
//!   single-consumer ring instead of chunks over channels.
//! - [`adapt`]: when a one-worker pass runs its source on the consumer's
//!   thread instead, because the consumer only waits for the reader (an
//!   opt-in mode).
//! - [`clock`]: the clock the timing decisions read, injected for tests.
//! - [`snapshot`]: the consumer's view of its position (source snapshot plus
//!   what it received since), which is what `get_state` reports.
//!
//! Design notes that hold for every node built on these:
//! - A node's source is only ever touched by one thread at a time, and by the
//!   consumer thread only after every worker of the previous pass was joined
//!   (torchdata's bug 8: resetting a source an old reader still pulls from).
//! - Stopping never relies on timeouts: a stop flag, closed permits and dropped
//!   channel ends wake every blocked worker, and the node then joins them all.
//!   A worker blocked inside the user's own code (a source that never
//!   returns) can only be waited for, so a stuck source makes `reset` and
//!   `shutdown` wait too. That is the price of never racing on the source.

use std::fmt;

use nodes_core::Node;

pub(crate) mod adapt;
pub(crate) mod clock;
pub(crate) mod core;
pub(crate) mod panic;
pub(crate) mod permits;
pub(crate) mod reorder;
pub(crate) mod ring;
pub(crate) mod snapshot;
pub(crate) mod spin;
pub(crate) mod thread;

/// A thread-backed node's `Debug`: its name, its source as of the last
/// reset, then `fields` (what of its plan it shows, under its own names).
pub(crate) fn fmt_debug<N: Node, S, U>(
    core: &core::Threaded<N, S, U>,
    f: &mut fmt::Formatter<'_>,
    fields: &[(&str, &dyn fmt::Debug)],
) -> fmt::Result {
    let mut out = f.debug_struct(core.plan().node);
    out.field("source", &core.source_description().to_string());
    for (name, value) in fields {
        out.field(name, value);
    }
    out.finish_non_exhaustive()
}
