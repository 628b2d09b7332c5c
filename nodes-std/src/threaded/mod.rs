//! Threaded nodes: the ones that move work to other threads. Both are thin
//! wrappers over the one threaded core in [`worker`], whose snapshot
//! protocol is described in `worker/README.md`.

pub(crate) mod par_map;
pub(crate) mod prefetch;
pub(crate) mod worker;
