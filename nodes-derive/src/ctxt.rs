//! Collects errors so the user sees every problem in one build.

use std::cell::RefCell;

use quote::ToTokens;

/// An error collector: parsing and checking push spanned errors and carry on;
/// [`Ctxt::check`] combines them at the end.
pub(crate) struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// Records an error spanning `tokens`.
    pub(crate) fn error_spanned_by(&self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens.into_token_stream(), message));
    }

    /// Records a ready-made error.
    pub(crate) fn push(&self, error: syn::Error) {
        if let Some(errors) = self.errors.borrow_mut().as_mut() {
            errors.push(error);
        }
    }

    /// All recorded errors combined into one, or `Ok` if there were none.
    pub(crate) fn check(self) -> syn::Result<()> {
        let errors = self.errors.borrow_mut().take().unwrap_or_default();
        let mut iter = errors.into_iter();
        match iter.next() {
            None => Ok(()),
            Some(mut first) => {
                for rest in iter {
                    first.combine(rest);
                }
                Err(first)
            }
        }
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        // A collector dropped with unchecked errors would swallow them: that is
        // a bug in this crate, so fail loudly (a proc-macro panic is a compile error).
        if !std::thread::panicking() && self.errors.borrow().is_some() {
            panic!("nodes-derive: Ctxt dropped without check()");
        }
    }
}
