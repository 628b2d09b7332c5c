//! The one error type of the framework.

use std::fmt;

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
        node: &'static str,
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
        node: &'static str,
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
}

fn fmt_index(index: Option<u64>) -> impl fmt::Display {
    struct At(Option<u64>);
    impl fmt::Display for At {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self.0 {
                Some(i) => write!(f, " at item {i}"),
                None => Ok(()),
            }
        }
    }
    At(index)
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

    /// An [`Error::User`] wrapping `source`.
    pub fn user(node: &'static str, index: Option<u64>, source: impl Into<BoxError>) -> Self {
        Error::User {
            node,
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
        let message = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_owned()
        };
        Error::Panicked {
            node,
            index,
            message,
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

    /// A copy of this error that can be handed to a second consumer.
    ///
    /// Errors produced on worker threads may need to be reported twice (once at
    /// the item's position, once to a later caller); the user's boxed source is
    /// not `Clone`, so the copy keeps its message instead.
    pub fn duplicate(&self) -> Error {
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
                node,
                index: *index,
                source: source.to_string().into(),
            },
            Error::Panicked {
                node,
                index,
                message,
            } => Error::Panicked {
                node,
                index: *index,
                message: message.clone(),
            },
            Error::ShutDown { node } => Error::ShutDown { node },
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
