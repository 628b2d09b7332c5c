//! Collects errors so the user sees every problem in one build.

use std::fmt::Display;

use proc_macro2::Span;
use quote::ToTokens;

/// An error collector: parsing and checking push spanned errors and carry on;
/// [`Ctxt::check`] combines them at the end.
#[derive(Default)]
pub(crate) struct Ctxt(Vec<syn::Error>);

impl Ctxt {
    /// Records an error at `span`.
    pub(crate) fn error(&mut self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Records an error spanning `tokens`.
    pub(crate) fn error_spanned_by(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records a ready-made error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        self.0.push(error);
    }

    /// All recorded errors combined into one, or `Ok` if there were none.
    pub(crate) fn check(self) -> syn::Result<()> {
        let combined = self.0.into_iter().reduce(|mut all, error| {
            all.combine(error);
            all
        });
        combined.map_or(Ok(()), Err)
    }
}
