//! Running user code so that a panic becomes an error value.

use std::panic::{self, AssertUnwindSafe};

use nodes_core::{Error, Result};

/// Runs `f`, turning a panic into [`Error::Panicked`] for `node` at `index`
/// (the panic message is kept).
///
/// `AssertUnwindSafe` is sound here in the sense that matters to us: after a
/// panic the thread-backed nodes stop the pass, and nothing the panicking code
/// touched (a source, the user's function) is used again before `reset`, which
/// resets the source. A map function with interior mutability is the user's
/// own to keep consistent, as with any thread pool.
pub(crate) fn catch<R>(
    node: &'static str,
    index: Option<u64>,
    f: impl FnOnce() -> Result<R>,
) -> Result<R> {
    guard(node, index, f).and_then(|result| result)
}

/// Runs `f`, keeping a panic apart from what `f` returns: `Err` only for a
/// panic inside this very call (an [`Error::Panicked`] that `f` merely
/// returns, from deeper down, stays inside `Ok`).
pub(crate) fn guard<R>(node: &'static str, index: Option<u64>, f: impl FnOnce() -> R) -> Result<R> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => Ok(result),
        Err(payload) => {
            let error = Error::from_panic(node, index, &*payload);
            // A payload's `Drop` is user code too, and may panic again: that
            // would unwind through our thread. Drop it under a guard, and
            // leak whatever a second failure leaves behind.
            if let Err(second) = panic::catch_unwind(AssertUnwindSafe(|| drop(payload))) {
                std::mem::forget(second);
            }
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_errors_with_message_and_index() {
        let err = catch::<()>("Node", Some(3), || panic!("boom {}", 7)).unwrap_err();
        match err {
            Error::Panicked {
                node,
                index,
                message,
            } => {
                assert_eq!(
                    (&*node, index, message.as_str()),
                    ("Node", Some(3), "boom 7")
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(catch("Node", None, || Ok(5)).unwrap(), 5);
    }
}
