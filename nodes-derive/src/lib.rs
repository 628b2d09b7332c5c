//! `#[derive(Node)]` (stub; the real expansion lands next).
extern crate proc_macro;
use proc_macro::TokenStream;

/// Derives `Node` (stub).
#[proc_macro_derive(Node, attributes(node))]
pub fn derive_node(_input: TokenStream) -> TokenStream {
    TokenStream::new()
}
