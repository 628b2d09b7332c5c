//! Spawning and joining worker threads, and locking without poisoning.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};

use nodes_core::{Error, Result};

/// Locks `mutex`, ignoring poisoning.
///
/// Every lock in the thread-backed nodes guards data that stays consistent
/// across a panic: user code runs under [`catch`](super::panic::catch), so a
/// panic never unwinds out of a critical section of ours. A poisoned lock can
/// therefore only come from user code that panicked in a way we already report
/// as an error, and the data behind it is still usable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Spawns a named thread for `node`; failure to start one is an error naming
/// the node (the OS refused, usually because too many threads exist).
pub(crate) fn spawn<T, F>(node: &'static str, name: String, f: F) -> Result<JoinHandle<T>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    thread::Builder::new()
        .name(name)
        .spawn(f)
        .map_err(|e| Error::spawn(node, e))
}

/// A set of worker threads that are joined together.
///
/// Joining is explicit ([`Workers::join`]) because it must come *after* the
/// owner has told the workers to stop; the owner's `Drop` does both in order.
#[derive(Debug, Default)]
pub(crate) struct Workers {
    handles: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Adds a started thread.
    pub(crate) fn push(&mut self, handle: JoinHandle<()>) {
        self.handles.push(handle);
    }

    /// Waits for every thread to finish. A thread that panicked outside the
    /// user code we guard has nothing left to report, so its panic is dropped.
    pub(crate) fn join(&mut self) {
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}
