//! Run-time guards for what the type system cannot see.

use std::fmt;

use crate::error::{Error, Result};

/// Remembers whether a hand-written node has been reset.
///
/// The `Cx` token rules out advancing a pipeline that was never started, but a
/// node *inside* a running pipeline can still be skipped by a parent that
/// forgot to reset it (a hand-written impl, a trait object). Hand-written nodes
/// keep one of these, call [`ResetFlag::mark`] in `reset` and
/// [`ResetFlag::check`] in `next`/`get_state`.
///
/// ```
/// use nodes_core::ResetFlag;
///
/// let mut flag = ResetFlag::default();
/// let err = flag.check("MyNode").unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "MyNode was used before reset: call `reset` (a parent does this for its children) before `next` or `get_state`"
/// );
/// flag.mark();
/// assert!(flag.check("MyNode").is_ok());
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct ResetFlag {
    reset: bool,
}

impl fmt::Debug for ResetFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.reset { "reset" } else { "fresh" };
        write!(f, "ResetFlag({state})")
    }
}

impl ResetFlag {
    /// Records that the node was reset.
    pub fn mark(&mut self) {
        self.reset = true;
    }

    /// `Err(NotReset)` naming `node` unless [`ResetFlag::mark`] was called.
    #[inline]
    pub fn check(&self, node: &'static str) -> Result<()> {
        if self.reset {
            Ok(())
        } else {
            Err(Error::NotReset { node })
        }
    }

    /// Whether the node was reset.
    pub fn is_reset(&self) -> bool {
        self.reset
    }
}

/// A slot filled by a node's `init` after each reset: the initialized guard.
///
/// `#[derive(Node)]` clears `#[node(lazy)]` slots on every reset, before
/// calling `init`; reading a slot that `init` has not filled is an
/// [`Error::NotInitialized`] naming the node and the field, never a panic.
///
/// ```
/// use nodes_core::Lazy;
///
/// let mut slot: Lazy<Vec<u8>> = Lazy::new();
/// assert!(slot.get().is_err());
/// slot.set(vec![1, 2]);
/// assert_eq!(slot.get()?, &vec![1, 2]);
/// # Ok::<(), nodes_core::Error>(())
/// ```
pub struct Lazy<T> {
    value: Option<T>,
    node: &'static str,
    field: &'static str,
}

impl<T> Default for Lazy<T> {
    fn default() -> Self {
        Lazy::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for Lazy<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => f.debug_tuple("Lazy").field(v).finish(),
            None => f.write_str("Lazy(<not initialized>)"),
        }
    }
}

impl<T> Lazy<T> {
    /// An empty slot.
    pub const fn new() -> Self {
        Lazy {
            value: None,
            node: "node (never reset)",
            field: "lazy field",
        }
    }

    /// Fills the slot.
    pub fn set(&mut self, value: T) {
        self.value = Some(value);
    }

    /// The value, or `Err(NotInitialized)` naming the node and field.
    #[inline]
    pub fn get(&self) -> Result<&T> {
        self.value
            .as_ref()
            .ok_or_else(|| not_initialized(self.node, self.field))
    }

    /// The value mutably, or `Err(NotInitialized)` naming the node and field.
    #[inline]
    pub fn get_mut(&mut self) -> Result<&mut T> {
        // Built only when empty (not eagerly, as `ok_or` would): this is on
        // the path of every item.
        self.value
            .as_mut()
            .ok_or_else(|| not_initialized(self.node, self.field))
    }

    /// The value if filled, without an error.
    pub fn get_opt(&self) -> Option<&T> {
        self.value.as_ref()
    }

    /// Whether the slot is filled.
    pub fn is_set(&self) -> bool {
        self.value.is_some()
    }

    /// Empties the slot, returning what it held.
    pub fn take(&mut self) -> Option<T> {
        self.value.take()
    }

    /// Empties the slot and records its owner's names for error messages
    /// (the derive calls it on every reset, through `LazySlot`).
    pub(crate) fn clear(&mut self, node: &'static str, field: &'static str) {
        self.value = None;
        self.node = node;
        self.field = field;
    }
}

#[cold]
fn not_initialized(node: &'static str, field: &'static str) -> Error {
    Error::NotInitialized { node, field }
}
