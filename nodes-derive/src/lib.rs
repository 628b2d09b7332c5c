//! `#[derive(Node)]`: implements `Stateful` (`reset`, `get_state`,
//! `describe`, `shutdown`) for a node from its annotated fields; the author
//! implements `Node` itself, which is only `type Item` and `next` (and
//! optionally an `init` method, named by `#[node(init)]`).
//!
//! Use it through `nodes-std`, which documents the attributes and re-exports
//! the macro. The crate is a switchboard: parse into a model (`ast`,
//! `attr`), check the model (`check`), then generate (`expand`); on any
//! error, `expand` emits the errors plus a stub impl so the rest of the
//! user's code still type-checks.

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;

use proc_macro::TokenStream;

/// Derives `Stateful`, the checkpointing half of a node (`reset`,
/// `get_state`, `describe`, `shutdown`, `resume`, and `size_hint`
/// when asked), for a struct with
/// named fields, from the role of each field. It does not implement `Node`
/// itself: write `impl Node for YourNode` with the item type and `next`.
///
/// Every field has exactly one role (a field without one is a compile error):
///
/// - `#[node(child)]`: a child node, reset first, its state nested under the
///   field's key;
/// - `#[node(children)]`: a `Vec` or `BTreeMap` of child nodes;
/// - `#[node(state)]` (optionally `default = expr`): saved, restored, and set
///   to its default on a fresh reset; `#[node(state, counts_items)]` marks a
///   `u64` that counts the items returned, the only state that changes
///   between items (`Stateful::resume` then is `Resume::CountsItems` with its key);
/// - `#[node(lazy)]`: a `Lazy<T>` slot cleared on every reset and filled by
///   `Init::init`;
/// - `#[node(param)]`: configuration that decides the output, shown by
///   `describe()` and part of the checkpoint's fingerprint (its type
///   implements `Param`, a stable text rendering, never `Debug`);
/// - `#[node(config)]`: configuration that is neither saved nor shown
///   (closures, datasets, bounds that may change between runs), nor reset:
///   never a field that changes as the node runs, which would leak from one
///   epoch into the next (`nodes_std::testing::assert_save_load` compares a
///   fresh node's epoch 1 with one after a full epoch 0 and names the state
///   field such a leak made differ);
/// - `#[node(tally)]`: an `Arc` of a `Tally`, the node's live count of its
///   pass, attached to its description for `Epoch::progress` (neither
///   reset, saved nor compared: the node keeps it current).
///
/// It also implements `NodeName` (`NAME` is the struct's name), which
/// `describe()` uses and `cx.observe(NodeId::of(self), Self::NAME, ...)`
/// should too.
///
/// Fields also take `rename = "key"`; the struct takes `init`, `validate`,
/// `size_hint`, `counts_items = "child"` (the single child's count is the
/// node's: no state of its own, one item per item), `resume = expr` (what
/// `Stateful::resume` returns, `self` in scope; instead of `counts_items`),
/// `version = N`, `rename_all = "..."` and `crate = ::path`.
/// `nodes_std` documents them in full.
///
/// # Size hints
///
/// The derive writes `Stateful::size_hint` only when the struct says where
/// the hint comes from, because only the author knows whether the node
/// passes its child's items through one for one:
///
/// - no attribute: the trait's default, `Hint::UNKNOWN` (no bounds, may
///   fail), which is sound for any node (a node that filters, groups or
///   expands must not claim its child's count);
/// - `#[node(size_hint = "child")]`: the node returns exactly one item per
///   item of its single `#[node(child)]` field (a map, a tap, a counter), so
///   the child's bounds are forwarded. It is an error on a node without
///   exactly one `child` field (or with `children`). `may_fail` stays
///   `true`: the derive cannot see whether `next` adds errors of its own;
/// - `#[node(size_hint)]`: the node computes its own hint; implement
///   `SizeHint` for it.
#[proc_macro_derive(Node, attributes(node))]
pub fn derive_node(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive(&input).into()
}
