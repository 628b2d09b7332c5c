//! Used by generated code and by the stock nodes' worker threads. Not public API.

pub use serde;
pub use serde_json;

pub use crate::describe::Description;
pub use crate::error::{Error, Result};
pub use crate::guard::Lazy;
pub use crate::node::{Cx, Init, Node, SizeHint, Stateful, Validate};
pub use crate::param::{NodeName, Param};
pub use crate::resume::Resume;
pub use crate::state::pointer_join;
pub use crate::state::{Snapshot, State, StateWriter};

/// The logging hooks of the `tracing` feature (empty without it).
pub mod trace {
    pub use crate::trace::*;
}

/// Writes a loader state from its parts (for `nodes_std::elastic`).
pub use crate::loader::assemble_state as loader_state;

/// What a `#[node(state)]` field must be: serialisable both ways.
pub trait StateField: serde::Serialize + serde::de::DeserializeOwned {}
impl<T: serde::Serialize + serde::de::DeserializeOwned> StateField for T {}

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

/// The flags of `state` when it holds exactly `keys`, in order, each a
/// bool, read without lookups (a wide sampler's flag maps); `None`
/// otherwise, for the caller's checks to name what is wrong.
pub fn bools_in_order(state: &State, keys: &[&str]) -> Option<Vec<bool>> {
    state.bools_in_order(keys)
}

/// The nested states of `state` when it holds exactly `keys`, in order,
/// each a nested state, read without lookups (a wide sampler's sources);
/// `None` otherwise.
pub fn children_in_order(state: &State, keys: &[&str]) -> Option<Vec<State>> {
    state.children_in_order(keys)
}

/// Resets a `#[node(children)]` field from the sub-state under `key`.
pub fn reset_children<C: Children + ?Sized>(
    children: &mut C,
    state: Option<&State>,
    key: &str,
) -> Result<()> {
    match state {
        None => children.reset_children(None),
        Some(s) => children.reset_children(Some(&s.child(key)?)),
    }
}

/// Serialises a `#[node(state)]` field.
pub fn encode_field<T: serde::Serialize>(
    state: &mut State,
    key: &'static str,
    value: &T,
) -> Result<()> {
    // The derive writes each key once, into a state it just made.
    state.insert_new(key, value)
}

/// Nests `child` under a key `state` does not hold yet, appended without
/// looking for it: a `#[node(child)]` or `#[node(children)]` field's state,
/// or a stock node's (a sampler's source names, made at run time, are
/// distinct).
pub fn encode_child(
    state: &mut State,
    key: impl Into<std::borrow::Cow<'static, str>>,
    child: State,
) {
    state.insert_child_new(key, child);
}

/// Writes a `#[node(state)]` field into a pipeline's record, as
/// [`encode_field`] stores it.
#[inline]
pub fn write_field<T: serde::Serialize>(
    out: &mut crate::StateWriter,
    key: &'static str,
    value: &T,
) -> Result<()> {
    out.put_field(key, value)
}

/// Writes a `#[node(child)]` field's state into a pipeline's record: the
/// child writes its own, nested under `key`.
#[inline]
pub fn write_child<N: crate::Stateful + ?Sized>(
    out: &mut crate::StateWriter,
    key: &'static str,
    child: &N,
    cx: &Cx,
) -> Result<()> {
    out.open(key);
    child.write_state(cx, out)?;
    out.close();
    Ok(())
}

/// Writes a `#[node(children)]` field's state into a pipeline's record.
pub fn write_children<C: Children + ?Sized>(
    out: &mut crate::StateWriter,
    key: &'static str,
    children: &C,
    cx: &Cx,
) -> Result<()> {
    out.put_child(key, children.children_state(cx)?);
    Ok(())
}

/// Writes a `#[node(state, deferred)]` field's snapshot into a pipeline's
/// record, serialised only when the state is.
pub fn write_deferred_field<T: crate::Snapshot>(
    out: &mut crate::StateWriter,
    key: &'static str,
    value: &T,
) {
    out.put_deferred(key, value.snapshot());
}

/// Opens a nested state in a pipeline's record (a stock node writing its
/// own state), closed by [`write_close`].
#[inline]
pub fn write_open(out: &mut crate::StateWriter, key: &'static str) {
    out.open(key);
}

/// Opens a nested state under a name made at run time (a sampler's
/// source), closed by [`write_close`].
#[inline]
pub fn write_open_named(out: &mut crate::StateWriter, name: &std::sync::Arc<str>) {
    out.open_named(name);
}

/// Closes the nested state opened last.
#[inline]
pub fn write_close(out: &mut crate::StateWriter) {
    out.close();
}

/// Writes a shared snapshot into a pipeline's record (a stock node writing
/// its state), serialised only when the state is.
pub fn write_deferred<T>(out: &mut crate::StateWriter, key: &'static str, value: std::sync::Arc<T>)
where
    T: serde::Serialize + Send + Sync + 'static,
{
    out.put_deferred(key, value);
}

/// Writes a versioned node's format version into a pipeline's record, as
/// `State::set_version` does.
#[inline]
pub fn write_version(out: &mut crate::StateWriter, version: u32) {
    out.put_version(version);
}

/// The last state a derived leaf node (no children, no deferred fields)
/// took on this thread: one per node type (see [`leaf_state`]).
pub type LastState = std::cell::RefCell<Option<State>>;

/// A `#[node(state)]` field as JSON, as [`encode_field`] stores it.
pub fn field_json<T: serde::Serialize>(key: &'static str, value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value)
        .map_err(|e| Error::bad_state(format!("/{key}"), format!("cannot serialise: {e}")))
}

/// The state of a derived leaf node: `keys` holding `values`, then the
/// version. When the fields are scalars and the same as in the last state
/// a node of this type took on this thread (`last`), that state is
/// returned, shared: a wide sampler's sources standing at their start (a
/// loader's rollback point) then cost a reference count each, not a state
/// of their own. Scalars are compared as their JSON is written (`0.0` and
/// `-0.0` differ), so a shared state serialises exactly as a new one.
pub fn leaf_state<const K: usize>(
    last: &'static std::thread::LocalKey<LastState>,
    keys: [&'static str; K],
    values: [serde_json::Value; K],
    version: u32,
) -> Result<State> {
    let scalars = values.iter().all(|v| {
        !matches!(
            v,
            serde_json::Value::Array(_) | serde_json::Value::Object(_)
        )
    });
    if scalars {
        let same = |state: &State| state.leaf_holds(&keys, &values);
        let hit = last
            .try_with(|last| {
                last.try_borrow()
                    .ok()?
                    .as_ref()
                    .filter(|s| same(s))
                    .cloned()
            })
            .ok()
            .flatten();
        if let Some(hit) = hit {
            return Ok(hit);
        }
        // The last state, once the states that held it are gone, takes the
        // new values in place: a counter that moves costs no new state.
        let mut pending = Some(values);
        let rewritten = last
            .try_with(|last| {
                let mut last = last.try_borrow_mut().ok()?;
                let held = last.as_mut()?;
                held.rewrite_leaf(&keys, &mut pending, version)
                    .then(|| held.clone())
            })
            .ok()
            .flatten();
        if let Some(state) = rewritten {
            return Ok(state);
        }
        let Some(values) = pending else {
            unreachable!("values are taken only by a rewrite, which returns");
        };
        return new_leaf_state(last, keys, values, version, true);
    }
    new_leaf_state(last, keys, values, version, false)
}

/// A new state of `keys` holding `values`, then the version; kept as the
/// `last` state of its node type when the values are `scalars`.
fn new_leaf_state<const K: usize>(
    last: &'static std::thread::LocalKey<LastState>,
    keys: [&'static str; K],
    values: [serde_json::Value; K],
    version: u32,
    scalars: bool,
) -> Result<State> {
    let mut out = State::new();
    out.reserve(K + usize::from(version != 0));
    for (key, value) in keys.into_iter().zip(values) {
        out.insert_json_new(key, value);
    }
    out.set_version(version)?;
    if !scalars {
        return Ok(out);
    }
    let out = out.share();
    let _ = last.try_with(|last| {
        if let Ok(mut last) = last.try_borrow_mut() {
            *last = Some(out.clone());
        }
    });
    Ok(out)
}

/// Decodes a `#[node(state)]` field.
pub fn decode_field<T: serde::de::DeserializeOwned>(state: &State, key: &str) -> Result<T> {
    state.get(key)
}

/// Resets a `#[node(child)]` field from its sub-state (or from the start).
pub fn reset_child<N: Stateful + ?Sized>(
    child: &mut N,
    state: Option<&State>,
    key: &str,
) -> Result<()> {
    match state {
        None => child.reset(None),
        Some(s) => child.reset(Some(&s.child(key)?)),
    }
}

/// Called by derived nodes with the result of their `init`: a
/// [`Error::BadState`] whose path is relative (a key of the node's own state,
/// such as `"num_yielded"`) is reported at that key's full path in `state`.
pub fn root_init_error(state: Option<&State>, result: Result<()>) -> Result<()> {
    match (result, state) {
        (Err(Error::BadState { path, message }), Some(s)) if !path.starts_with('/') => {
            Err(Error::BadState {
                path: s.path_of(&path),
                message,
            })
        }
        (result, _) => result,
    }
}

/// Checks that `state` holds a nested state under `key`, without applying it.
pub fn check_child(state: &State, key: &str) -> Result<()> {
    state.child(key).map(drop)
}

/// Checks the sub-state under `key` of a `#[node(child)]` field.
pub fn check_child_state<N: Stateful + ?Sized>(child: &N, state: &State, key: &str) -> Result<()> {
    child.check_state(&state.child(key)?)
}

/// Checks the sub-state under `key` of a `#[node(children)]` field.
pub fn check_children_state<C: Children + ?Sized>(
    children: &C,
    state: &State,
    key: &str,
) -> Result<()> {
    children.check_children(&state.child(key)?)
}

/// A collection of child nodes: `Vec<N>` (keyed by index) or an ordered map
/// (keyed by its keys).
pub trait Children {
    /// Resets every child, from the start or from its entry of `state`.
    fn reset_children(&mut self, state: Option<&State>) -> Result<()>;
    /// Checks every child's entry of `state` without applying it
    /// ([`Stateful::check_state`]).
    fn check_children(&self, state: &State) -> Result<()> {
        let _ = state;
        Ok(())
    }
    /// Each child's state, keyed as above.
    fn children_state(&self, cx: &Cx) -> Result<State>;
    /// Forwards shutdown to every child.
    fn shutdown_children(&mut self);
    /// A description grouping the children under their keys.
    fn describe_children(&self) -> Description;
}

impl<N: Node> Children for Vec<N> {
    fn reset_children(&mut self, state: Option<&State>) -> Result<()> {
        if let Some(s) = state {
            expect_len(s, self.len())?;
        }
        for (i, child) in self.iter_mut().enumerate() {
            reset_child(child, state, &i.to_string())?;
        }
        Ok(())
    }

    fn check_children(&self, state: &State) -> Result<()> {
        expect_len(state, self.len())?;
        for (i, child) in self.iter().enumerate() {
            check_child_state(child, state, &i.to_string())?;
        }
        Ok(())
    }

    fn children_state(&self, cx: &Cx) -> Result<State> {
        let mut out = State::new();
        for (i, child) in self.iter().enumerate() {
            out.insert_child(i.to_string(), child.get_state(cx)?);
        }
        Ok(out)
    }

    fn shutdown_children(&mut self) {
        self.iter_mut().for_each(Stateful::shutdown);
    }

    fn describe_children(&self) -> Description {
        self.iter()
            .enumerate()
            .fold(Description::new("Vec"), |d, (i, c)| {
                d.child(i.to_string(), c.describe())
            })
    }
}

impl<K: Ord + std::fmt::Display + Send, N: Node> Children for std::collections::BTreeMap<K, N> {
    fn reset_children(&mut self, state: Option<&State>) -> Result<()> {
        if let Some(s) = state {
            expect_len(s, self.len())?;
        }
        for (k, child) in self.iter_mut() {
            reset_child(child, state, &k.to_string())?;
        }
        Ok(())
    }

    fn check_children(&self, state: &State) -> Result<()> {
        expect_len(state, self.len())?;
        for (k, child) in self {
            check_child_state(child, state, &k.to_string())?;
        }
        Ok(())
    }

    fn children_state(&self, cx: &Cx) -> Result<State> {
        let mut out = State::new();
        for (k, child) in self {
            out.insert_child(k.to_string(), child.get_state(cx)?);
        }
        Ok(out)
    }

    fn shutdown_children(&mut self) {
        self.values_mut().for_each(Stateful::shutdown);
    }

    fn describe_children(&self) -> Description {
        self.iter().fold(Description::new("Map"), |d, (k, c)| {
            d.child(k.to_string(), c.describe())
        })
    }
}

fn expect_len(state: &State, len: usize) -> Result<()> {
    let found = state.len();
    if found == len {
        Ok(())
    } else {
        Err(Error::bad_state(
            state.path(),
            format!("expected states for {len} children, found {found}"),
        ))
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    thread_local!(static LAST: LastState = const { LastState::new(None) });

    /// A leaf state is rewritten in place only once nobody holds it: a
    /// state still held keeps its values, and a rewritten one reads and
    /// serialises as a new one.
    #[test]
    fn only_a_leaf_state_nobody_holds_is_rewritten() {
        let first = leaf_state(&LAST, ["n", "done"], [json!(1), json!(false)], 2).unwrap();
        let second = leaf_state(&LAST, ["n", "done"], [json!(2), json!(false)], 2).unwrap();
        assert_eq!(
            first.to_json().unwrap(),
            r#"{"n":1,"done":false,"version":2}"#
        );
        drop(second);
        let third = leaf_state(&LAST, ["n", "done"], [json!(3), json!(true)], 2).unwrap();
        assert_eq!(first.get::<u64>("n").unwrap(), 1);
        assert_eq!(
            third.to_json().unwrap(),
            r#"{"n":3,"done":true,"version":2}"#
        );
        let fresh = State::new()
            .with("n", 3)
            .unwrap()
            .with("done", true)
            .unwrap()
            .with("version", 2)
            .unwrap();
        assert_eq!(third, fresh);
        // Other keys (another node type's state) are not written over.
        drop(third);
        let other = leaf_state(&LAST, ["m", "done"], [json!(4), json!(true)], 2).unwrap();
        assert_eq!(
            other.to_json().unwrap(),
            r#"{"m":4,"done":true,"version":2}"#
        );
    }
}
