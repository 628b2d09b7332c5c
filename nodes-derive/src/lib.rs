//! `#[derive(Node)]`: implements `Stateful` (`reset`, `get_state`,
//! `describe`, `shutdown`) for a node from its annotated fields; the author
//! implements `Node` itself, which is only `type Item` and `next` (and
//! optionally an `init` method, named by `#[node(init)]`).
//!
//! Use it through `nodes-std`, which documents the attributes and re-exports
//! the macro. The crate is a switchboard: parse into a model (`ast`,
//! `attr`), check the model (`check`), then generate (`expand`); on any
//! error, `fallback` emits the errors plus a stub impl so the rest of the
//! user's code still type-checks.

extern crate proc_macro;

mod ast;
mod attr;
mod check;
mod ctxt;
mod expand;
mod fallback;
mod symbol;

use proc_macro::TokenStream;

/// Derives `Node` for a struct with named fields. See `nodes_std` for the
/// attributes (`#[node(child)]`, `children`, `state`, `lazy`, `param`, and
/// container `crate`, `version`, `rename_all`).
#[proc_macro_derive(Node, attributes(node))]
pub fn derive_node(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive(&input).into()
}
