//! The synchronisation primitives of the threaded core, in one place:
//! std's, or loom's model-checked copies under `--cfg loom`, so that the
//! loom tests run the real hand-over rather than a copy of it.
//!
//! Every wait here blocks on a condition variable whose condition is
//! changed only under its mutex, by a thread that then notifies: no wait
//! needs a timeout to end.

#[cfg(loom)]
use loom::{sync, thread};
#[cfg(not(loom))]
use std::{sync, thread};

pub(crate) use sync::atomic::{AtomicU64, AtomicUsize, Ordering};
pub(crate) use sync::{Arc, Condvar, Mutex, MutexGuard};

use nodes_core::{Error, Result};

/// Reads `atomic`: an acquire load, or under loom a read-modify-write, which
/// always reads the latest value. The hand-over's correctness rests on its
/// read-modify-writes alone; a plain read only guides a thread (whether to
/// try one, whether to hand a chunk over early), so an older value costs a
/// retry or a longer chunk, never a wake-up. Loom would otherwise branch on
/// every older value each read could see.
pub(crate) fn read(atomic: &AtomicUsize) -> usize {
    if cfg!(loom) {
        atomic.fetch_add(0, Ordering::AcqRel)
    } else {
        atomic.load(Ordering::Acquire)
    }
}

/// A worker thread's handle.
pub(crate) type JoinHandle = thread::JoinHandle<()>;

/// Locks `mutex`, ignoring poisoning.
///
/// Every lock in the threaded core guards data that stays consistent across
/// a panic: user code runs under [`catch`](super::panic::catch), so a panic
/// never unwinds out of a critical section of ours.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits on `condvar`, ignoring poisoning (see [`lock`]).
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(|e| e.into_inner())
}

/// Spawns a named thread for `node`; failure to start one is an error naming
/// the node (the OS refused, usually because too many threads exist).
pub(crate) fn spawn(
    node: &'static str,
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle> {
    thread::Builder::new()
        .name(name)
        .spawn(f)
        .map_err(|e| Error::spawn(node, e))
}

/// Whether a thread about to block may first poll for a while: only while
/// the node's threads (its `workers` and a consumer) each have a core,
/// since with more threads than cores a polling thread takes turns from
/// the ones doing the work (the caller also says no when its source runs
/// threads of its own). Never under loom, whose threads only switch at
/// the primitives. Asked once per node built (it may read cgroup files).
pub(crate) fn may_spin(workers: usize) -> bool {
    !cfg!(loom) && workers < std::thread::available_parallelism().map_or(1, usize::from)
}
