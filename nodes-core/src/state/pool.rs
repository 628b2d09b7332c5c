//! Recycled allocations for the states a pipeline takes over and over.
//!
//! A training loop may call `state_dict()` after every batch: each call
//! builds the same small tree (one entries vector per node, one shared box
//! per nested state) and drops it soon after. The allocator's own caches
//! hold only a few blocks of each size, so a tree of a dozen states mostly
//! went through its slow paths. Here each thread keeps a few of each kind
//! of block, emptied: taking the next state reuses them.
//!
//! Only small blocks are kept (a wide state's large vector is freed as
//! usual), at most [`KEPT`] of each kind per thread. A block freed
//! on another thread than the one that made it (a state sent away) simply
//! joins that thread's pool, or is freed once the pool is full.

use std::cell::RefCell;
use std::sync::Arc;

use super::deferred::Deferred;
use super::{Body, Entry, Key};

/// The capacity of a new entries vector for a state of a few keys (most
/// nodes' states; a large parsed document holds many such).
const SMALL: usize = 4;

/// The capacity of an entries vector for up to this many keys: enough for
/// every stock node's state (and a loader's). Vectors of both capacities
/// are recycled; a small one handed out for more keys grows to this once,
/// and is recycled at this size.
const CAPACITY: usize = 8;

/// How many blocks of each kind a thread keeps.
const KEPT: usize = 64;

/// A state's entries.
type Entries = Vec<(Key, Entry)>;

thread_local! {
    static ENTRIES: RefCell<Vec<Entries>> = const { RefCell::new(Vec::new()) };
    static SHELLS: RefCell<Vec<Arc<Body>>> = const { RefCell::new(Vec::new()) };
    static DEFERRED: RefCell<Vec<Arc<Deferred>>> = const { RefCell::new(Vec::new()) };
}

/// An empty entries vector with room for at least `len` entries.
#[inline]
pub(super) fn entries(len: usize) -> Entries {
    if len <= CAPACITY {
        let recycled = ENTRIES.try_with(|pool| pool.borrow_mut().pop());
        if let Ok(Some(mut entries)) = recycled {
            entries.reserve(len);
            return entries;
        }
    }
    Vec::with_capacity(if len <= SMALL {
        SMALL
    } else {
        len.max(CAPACITY)
    })
}

/// Takes back an emptied entries vector (freed if it is not of the kept
/// capacity or the pool is full).
#[inline]
pub(super) fn recycle_entries(entries: Entries) {
    debug_assert!(entries.is_empty(), "recycled entries must be emptied");
    if !matches!(entries.capacity(), SMALL | CAPACITY) {
        return;
    }
    let _ = ENTRIES.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < KEPT {
            pool.push(entries);
        }
    });
}

/// `body` behind a shared reference, in a recycled box when there is one.
#[inline]
pub(super) fn shared(body: Body) -> Arc<Body> {
    let recycled = SHELLS.try_with(|pool| pool.borrow_mut().pop());
    match recycled {
        Ok(Some(mut shell)) => match Arc::get_mut(&mut shell) {
            Some(empty) => {
                // A recycled shell's body was emptied (no entries vector, no
                // index): nothing on the heap, so nothing to drop.
                debug_assert_eq!(empty.entries.capacity(), 0);
                std::mem::forget(std::mem::replace(empty, body));
                shell
            }
            None => Arc::new(body),
        },
        _ => Arc::new(body),
    }
}

/// Takes back the box of a nested state nobody else holds, after emptying
/// it (its own nested states are recycled the same way); a state still
/// shared is only released.
pub(super) fn recycle_shell(mut shell: Arc<Body>) {
    let Some(body) = Arc::get_mut(&mut shell) else {
        return;
    };
    body.clear();
    let _ = SHELLS.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < KEPT {
            pool.push(shell);
        }
    });
}

/// How many emptied boxes this thread keeps now.
#[cfg(test)]
pub(super) fn shells_kept() -> usize {
    SHELLS.with(|pool| pool.borrow().len())
}

/// An empty deferred entry's box, recycled when there is one.
#[inline]
pub(super) fn deferred() -> Option<Arc<Deferred>> {
    DEFERRED
        .try_with(|pool| pool.borrow_mut().pop())
        .ok()
        .flatten()
}

/// Takes back the box of a deferred entry nobody else holds, after
/// emptying it; one still shared is only released.
pub(super) fn recycle_deferred(mut deferred: Arc<Deferred>) {
    let Some(entry) = Arc::get_mut(&mut deferred) else {
        return;
    };
    entry.clear();
    let _ = DEFERRED.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < KEPT {
            pool.push(deferred);
        }
    });
}
