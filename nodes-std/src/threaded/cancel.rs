//! [`CancelHandle`]: wakes a consumer blocked waiting for a threaded
//! node's workers, from another thread.

use std::fmt;

/// Wakes a consumer blocked in `next` on a [`Prefetcher`](crate::Prefetcher)
/// or [`ParallelMapper`](crate::ParallelMapper), from any thread (a Ctrl-C
/// handler, a watchdog). Made by their `cancel_handle`; cloning it gives
/// another handle to the same node.
///
/// [`cancel`](CancelHandle::cancel) makes the consumer's wait for the
/// workers end with [`Error::Cancelled`](crate::Error::Cancelled): the
/// wait going on now, or else the next one. Nothing is lost: the item
/// waited for stays where it was, the state still describes exactly what
/// was received, and calling `next` again goes on with the pass. A consumer
/// that is not waiting for the workers (an item was ready, or the source
/// runs on its own thread) is not interrupted; user code is never
/// interrupted.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::Error;
///
/// let node = IterableWrapper::new(0..3u64).prefetch(2)?;
/// let cancel = node.cancel_handle();
/// let mut run = node.start()?;
/// cancel.cancel();
/// assert!(matches!(run.next(), Some(Err(Error::Cancelled { .. }))));
/// // The pass goes on where it stood.
/// let rest: Vec<u64> = run.collect::<Result<_>>()?;
/// assert_eq!(rest, [0, 1, 2]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Clone)]
pub struct CancelHandle {
    /// Wakes the node's consumer (see `Threaded::cancel_handle`).
    pub(crate) wake: std::sync::Arc<dyn Fn() + Send + Sync>,
}

impl CancelHandle {
    /// Ends the consumer's current (or next) wait for the workers with
    /// [`Error::Cancelled`](crate::Error::Cancelled).
    pub fn cancel(&self) {
        (self.wake)();
    }
}

impl fmt::Debug for CancelHandle {
    crate::transforms::debug_fields!("CancelHandle", finish_non_exhaustive);
}
