//! The one error type of the framework.

use std::borrow::Cow;

/// Shorthand for `Result<T, nodes_core::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Boxed error returned by user functions.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in a pipeline.
///
/// Messages are lowercase without a final period and name what went wrong and
/// where: the node type, the JSON path of a state value, the item index.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A constructor or combinator was given an argument it cannot work with.
    #[error("invalid argument for {node}: {message}")]
    InvalidArgument {
        /// The node type that rejected the argument.
        node: &'static str,
        /// What was wrong and what would be accepted.
        message: String,
    },
    /// A state passed to `reset` does not fit the node it was given to.
    #[error("bad state at {path}: {message}")]
    BadState {
        /// JSON-pointer style path of the offending value, e.g. `/root/source/num_yielded`.
        path: String,
        /// What was expected and what was found.
        message: String,
    },
    /// A node was advanced or asked for its state before `reset`.
    #[error(
        "{node} was used before reset: call `reset` (a parent does this for its children) before `next` or `get_state`"
    )]
    NotReset {
        /// The node type.
        node: &'static str,
    },
    /// A `Lazy` slot was read before the node's `init` filled it.
    #[error(
        "{node}.{field} was used before `init` filled it: reset the node first, and fill the slot in `init`"
    )]
    NotInitialized {
        /// The node type.
        node: &'static str,
        /// The field name.
        field: &'static str,
    },
    /// A user function (map, filter, source...) returned an error.
    #[error("user function failed in {node}{}: {source}", fmt_index(*.index))]
    User {
        /// The node that called the function.
        node: Cow<'static, str>,
        /// The index of the item being processed, where known.
        index: Option<u64>,
        /// The user's error.
        #[source]
        source: BoxError,
    },
    /// A user function panicked; the panic was caught and turned into this error.
    #[error("user function panicked in {node}{}: {message}", fmt_index(*.index))]
    Panicked {
        /// The node that called the function.
        node: Cow<'static, str>,
        /// The index of the item being processed, where known.
        index: Option<u64>,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The pipeline cannot resume exactly as built: a node that restores by
    /// pulling its source again sits above a node whose output order varies
    /// from run to run. Reported when the pipeline starts.
    #[error("{node} cannot resume exactly over {below}: {message}")]
    InvalidPipeline {
        /// The node that refused the pipeline.
        node: &'static str,
        /// The node below it that makes the replay inexact.
        below: String,
        /// Why, and how to build the pipeline instead.
        message: String,
    },
    /// A node was used after `shutdown`.
    #[error("{node} was used after shutdown: reset it to start again")]
    ShutDown {
        /// The node type.
        node: &'static str,
    },
    /// A consumer waiting for a thread-backed node's workers was woken by
    /// its cancel handle (`nodes_std::CancelHandle`). Nothing was lost:
    /// the item waited for was not delivered, the node's state still
    /// describes exactly what was, and the next `next` goes on.
    #[error("{node} was cancelled while waiting for its workers: call `next` again to go on")]
    Cancelled {
        /// The node whose wait was cancelled.
        node: &'static str,
    },
    /// The operating system refused to start a worker thread (usually
    /// because too many threads exist, or memory for their stacks ran out).
    /// Nothing about the node's arguments is wrong: retrying later, or with
    /// fewer workers elsewhere, may succeed.
    #[error("{node} could not start a worker thread: {source}")]
    Spawn {
        /// The node that needed the thread.
        node: &'static str,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A node found one of its own invariants broken: a bug in this library,
    /// not in the user's code or data (a panic in user code is
    /// [`Error::Panicked`], a state that does not fit is [`Error::BadState`]).
    /// The node fails instead of hanging or delivering wrong data; reset it
    /// to go on.
    #[error("internal error in {node}: {message} (this is a bug in nodes, please report it)")]
    Internal {
        /// The node that found the broken invariant.
        node: &'static str,
        /// What was expected and what happened.
        message: String,
    },
}

/// ` at item <index>`, or nothing when the index is unknown.
fn fmt_index(index: Option<u64>) -> String {
    index.map_or_else(String::new, |i| format!(" at item {i}"))
}

impl Error {
    /// An [`Error::InvalidArgument`] for `node`.
    pub fn invalid_argument(node: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            node,
            message: message.into(),
        }
    }

    /// An [`Error::BadState`] at `path`.
    pub fn bad_state(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::BadState {
            path: path.into(),
            message: message.into(),
        }
    }

    /// An [`Error::Spawn`]: the OS refused to start a worker thread for `node`.
    pub fn spawn(node: &'static str, source: std::io::Error) -> Self {
        Error::Spawn { node, source }
    }

    /// An [`Error::Internal`]: `node` found one of its own invariants broken.
    pub fn internal(node: &'static str, message: impl Into<String>) -> Self {
        Error::Internal {
            node,
            message: message.into(),
        }
    }

    /// An [`Error::User`] wrapping `source`.
    pub fn user(node: &'static str, index: Option<u64>, source: impl Into<BoxError>) -> Self {
        Error::User {
            node: Cow::Borrowed(node),
            index,
            source: source.into(),
        }
    }

    /// An [`Error::Panicked`] from a caught panic payload.
    pub fn from_panic(
        node: &'static str,
        index: Option<u64>,
        payload: &(dyn std::any::Any + Send),
    ) -> Self {
        Error::Panicked {
            node: Cow::Borrowed(node),
            index,
            message: panic_text(payload),
        }
    }

    /// Whether this error is about a state that does not fit.
    pub fn is_bad_state(&self) -> bool {
        matches!(self, Error::BadState { .. })
    }

    /// The JSON path of a [`Error::BadState`], if this is one.
    pub fn state_path(&self) -> Option<&str> {
        match self {
            Error::BadState { path, .. } => Some(path),
            _ => None,
        }
    }

    /// A copy of this error that can be handed to a second consumer (the
    /// user's boxed source is not `Clone`, so the copy keeps its message).
    #[cfg(test)]
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::InvalidArgument { node, message } => Error::InvalidArgument {
                node,
                message: message.clone(),
            },
            Error::BadState { path, message } => Error::BadState {
                path: path.clone(),
                message: message.clone(),
            },
            Error::NotReset { node } => Error::NotReset { node },
            Error::NotInitialized { node, field } => Error::NotInitialized { node, field },
            Error::User {
                node,
                index,
                source,
            } => Error::User {
                node: node.clone(),
                index: *index,
                source: source.to_string().into(),
            },
            Error::Panicked {
                node,
                index,
                message,
            } => Error::Panicked {
                node: node.clone(),
                index: *index,
                message: message.clone(),
            },
            Error::ShutDown { node } => Error::ShutDown { node },
            Error::Cancelled { node } => Error::Cancelled { node },
            Error::Spawn { node, source } => Error::Spawn {
                node,
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Internal { node, message } => Error::Internal {
                node,
                message: message.clone(),
            },
            Error::InvalidPipeline {
                node,
                below,
                message,
            } => Error::InvalidPipeline {
                node,
                below: below.clone(),
                message: message.clone(),
            },
        }
    }
}

/// The text of a panic payload: the message of a `&str` or `String` one,
/// a placeholder for any other type.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload.downcast_ref::<&str>().copied();
    let text = text.or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    text.unwrap_or("non-string panic payload").to_owned()
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn spawn_and_internal_have_their_own_kind_and_message() {
        let io = std::io::Error::new(std::io::ErrorKind::OutOfMemory, "no stack");
        let err = Error::spawn("ParallelMapper", io);
        assert_eq!(
            err.to_string(),
            "ParallelMapper could not start a worker thread: no stack"
        );
        assert!(matches!(
            err,
            Error::Spawn {
                node: "ParallelMapper",
                ..
            }
        ));
        assert!(!matches!(err, Error::InvalidArgument { .. }));
        let copy = err.duplicate();
        assert_eq!(copy.to_string(), err.to_string());
        let source = copy.source().expect("the OS error is the source");
        let io = source
            .downcast_ref::<std::io::Error>()
            .expect("an io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::OutOfMemory);

        let err = Error::internal(
            "Prefetcher",
            "the reader thread exited without finishing the pass",
        );
        assert_eq!(
            err.to_string(),
            "internal error in Prefetcher: the reader thread exited without finishing the pass (this is a bug in nodes, please report it)"
        );
        assert!(
            matches!(err.duplicate(), Error::Internal { node: "Prefetcher", message } if message.contains("reader thread"))
        );
        assert!(!matches!(err, Error::Panicked { .. }));
    }
}
