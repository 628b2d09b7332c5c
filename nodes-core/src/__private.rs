//! Used by generated code and by the stock nodes' worker threads. Not public API.

pub use serde;
pub use serde_json;

pub use crate::describe::{Description, first_differing_node};
pub use crate::error::{Error, Result};
pub use crate::guard::Lazy;
pub use crate::hint::Hint;
pub use crate::node::{Cx, Init, Node, SizeHint, Stateful, Validate, WorkerCx};
pub use crate::param::{NodeName, Param};
pub use crate::resume::Resume;
pub use crate::state::{Fields, SharedSnapshot, Snapshot, State};
pub use crate::state::{digest_bytes, pointer_join};

/// The logging hooks of the `tracing` feature (empty without it).
pub mod trace {
    pub use crate::trace::*;
}

/// Writes a loader state from its parts, and checks one against its
/// checksum (for `nodes_std::elastic`).
pub use crate::loader::{assemble_state as loader_state, verify_checksum};

/// What a `#[node(lazy)]` field must be: a [`Lazy`] slot.
pub trait LazySlot {
    /// Empties the slot, recording names for its error messages.
    fn clear(&mut self, node: &'static str, field: &'static str);
}

impl<T> LazySlot for Lazy<T> {
    fn clear(&mut self, node: &'static str, field: &'static str) {
        Lazy::clear(self, node, field);
    }
}

/// What a `#[node(tally)]` field must be: an `Arc` of a [`Tally`](crate::Tally).
pub trait TallyField {
    /// The tally, for the node's description.
    fn tally(&self) -> std::sync::Arc<dyn crate::Tally>;
}

impl<T: crate::Tally + 'static> TallyField for std::sync::Arc<T> {
    fn tally(&self) -> std::sync::Arc<dyn crate::Tally> {
        self.clone()
    }
}

/// The sub-state under `key` a child field is reset from, if there is a
/// state (`None`: from the start).
pub fn sub_state(state: Option<&State>, key: &str) -> Result<Option<State>> {
    state.map(|s| s.child(key)).transpose()
}

/// Called by derived nodes with the result of their `init`: a
/// [`Error::BadState`] whose path is relative (a key of the node's own state,
/// such as `"num_yielded"`) is reported at that key's full path in `state`.
pub fn root_init_error(state: Option<&State>, result: Result<()>) -> Result<()> {
    match (result, state) {
        (Err(Error::BadState { path, message }), Some(s)) if !path.starts_with('/') => {
            Err(Error::bad_state(s.path_of(&path), message))
        }
        (result, _) => result,
    }
}

/// What a `#[node(children)]` field must be: a collection of child nodes,
/// `Vec<N>` (keyed by index) or an ordered map (keyed by its keys), with
/// the keys their states are saved under.
pub trait Keyed {
    /// The children's type.
    type Child: Node;
    /// The name the container's description has.
    const NAME: &'static str;
    /// The children with their keys, in order (as many as there are
    /// children, counted without making the keys).
    fn keyed(&self) -> impl ExactSizeIterator<Item = (String, &Self::Child)>;
    /// The same, mutably.
    fn keyed_mut(&mut self) -> impl Iterator<Item = (String, &mut Self::Child)>;
}

impl<N: Node> Keyed for Vec<N> {
    type Child = N;
    const NAME: &'static str = "Vec";
    fn keyed(&self) -> impl ExactSizeIterator<Item = (String, &N)> {
        self.iter().enumerate().map(|(i, c)| (i.to_string(), c))
    }
    fn keyed_mut(&mut self) -> impl Iterator<Item = (String, &mut N)> {
        self.iter_mut().enumerate().map(|(i, c)| (i.to_string(), c))
    }
}

impl<K: Ord + std::fmt::Display + Send, N: Node> Keyed for std::collections::BTreeMap<K, N> {
    type Child = N;
    const NAME: &'static str = "Map";
    fn keyed(&self) -> impl ExactSizeIterator<Item = (String, &N)> {
        self.iter().map(|(k, c)| (k.to_string(), c))
    }
    fn keyed_mut(&mut self) -> impl Iterator<Item = (String, &mut N)> {
        self.iter_mut().map(|(k, c)| (k.to_string(), c))
    }
}

/// Resets every child of `children` (a `#[node(children)]` field), from
/// the start or from its entry of `state`.
pub fn reset_children<C: Keyed>(children: &mut C, state: Option<&State>) -> Result<()> {
    if let Some(s) = state {
        expect_len(s, children.keyed().len())?;
    }
    children
        .keyed_mut()
        .try_for_each(|(key, child)| child.reset(sub_state(state, &key)?.as_ref()))
}

/// Checks every child's entry of `state` without applying it
/// ([`Stateful::check_state`]).
pub fn check_children<C: Keyed>(children: &C, state: &State) -> Result<()> {
    expect_len(state, children.keyed().len())?;
    children
        .keyed()
        .try_for_each(|(key, child)| child.check_state(&state.child(&key)?))
}

/// Each child's state, under its key.
pub fn children_state<C: Keyed>(children: &C, cx: &Cx) -> Result<State> {
    let mut out = State::new();
    for (key, child) in children.keyed() {
        out.insert_child(key, child.get_state(cx)?);
    }
    Ok(out)
}

/// Forwards shutdown to every child.
pub fn shutdown_children<C: Keyed>(children: &mut C) {
    children.keyed_mut().for_each(|(_, child)| child.shutdown());
}

/// A description grouping the children under their keys.
pub fn describe_children<C: Keyed>(children: &C) -> Description {
    let empty = Description::new(C::NAME);
    children
        .keyed()
        .fold(empty, |d, (key, child)| d.child(key, child.describe()))
}

fn expect_len(state: &State, len: usize) -> Result<()> {
    let found = state.len();
    if found == len {
        return Ok(());
    }
    let why = format!("expected states for {len} children, found {found}");
    Err(Error::bad_state(state.path(), why))
}

/// The compile-time guard behind "a node that was only constructed cannot be
/// advanced": derived and stock nodes get inherent `next()`/`get_state()`
/// methods bounded on this trait, which nothing public implements, so a call
/// on a concrete node that is not running fails with this message. (Generic
/// code and running handles go through the `Node`/`Stateful` traits.)
#[diagnostic::on_unimplemented(
    message = "`{Self}` was only constructed, not started: call `.start()` on it (or wrap it in a `Loader`) and use the handle that returns",
    label = "needs a started pipeline",
    note = "`next` and `get_state` need the `Cx` of a started pipeline, which resets the node first",
    note = "inside a node's own `next`, advance a concretely typed child with `Node::next(&mut self.child, cx)`"
)]
pub trait Started<'a> {}

// One impl, on a type nobody can name, so the compiler does not suggest adding one.
#[allow(dead_code)]
struct Unnameable;
impl Started<'_> for Unnameable {}

/// Emits the inherent guard methods for a hand-written node type:
/// `__started_guards!(impl[S: Node, F] MyNode<S, F>);` (optionally followed by
/// `where [...]`). `#[derive(Node)]` emits its guards with this macro too.
#[doc(hidden)]
#[macro_export]
macro_rules! __started_guards {
    (impl [$($gen:tt)*] $ty:ty $(where [$($wc:tt)*])?) => {
        #[automatically_derived]
        #[allow(dead_code, unreachable_pub, clippy::should_implement_trait)]
        impl<$($gen)*> $ty $(where $($wc)*)? {
            /// Not callable: start the pipeline first (see `Node`).
            #[doc(hidden)]
            pub fn next(&self) -> ::core::convert::Infallible
            where
                for<'__a> Self: $crate::__private::Started<'__a>,
            {
                ::core::unreachable!()
            }

            /// Not callable: start the pipeline first (see `Node`).
            #[doc(hidden)]
            pub fn get_state(&self) -> ::core::convert::Infallible
            where
                for<'__a> Self: $crate::__private::Started<'__a>,
            {
                ::core::unreachable!()
            }
        }
    };
}

pub use crate::__started_guards;
