//! Code generation from a checked model. No user-facing errors are raised
//! here: everything was reported by parsing and `check`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Field, Input};
use crate::attr::{Role, SizeHintFrom};
use crate::ctxt::Ctxt;
use crate::{check, fallback};

pub(crate) fn derive(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let model = Input::from_syn(&cx, input);
    check::check(&cx, &model);
    match cx.check() {
        Ok(()) => {
            let check = crate::version_check(&model.krate());
            let node = impl_node(&model);
            quote!(#check #node)
        }
        Err(err) => fallback::expand(&model, &err),
    }
}

fn impl_node(input: &Input<'_>) -> TokenStream {
    let krate = input.krate();
    let p = crate::private_path(&krate);
    let ident = input.ident;
    let name = input.name();
    let version = input.version();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let mut predicates: Vec<TokenStream> = where_clause
        .map(|w| w.predicates.iter().map(|p| quote!(#p)).collect())
        .unwrap_or_default();
    predicates.extend(field_bounds(input, &p));
    if let Some(span) = input.attrs.init.span() {
        predicates.push(quote_spanned!(span=> Self: #p::Init));
    }
    if let Some(span) = input.attrs.validate.span() {
        predicates.push(quote_spanned!(span=> Self: #p::Validate));
    }
    if let (Some(SizeHintFrom::Author), Some(span)) =
        (input.attrs.size_hint.get(), input.attrs.size_hint.span())
    {
        predicates.push(quote_spanned!(span=> Self: #p::SizeHint));
    }

    let guards = started_guards(input, &p);
    let reset = reset_body(input, &p, version);
    let check_state = check_state_body(input, &p, version);
    let get_state = get_state_body(input, &p, version);
    let describe = describe_body(input, &p);
    let shutdown = shutdown_body(input, &p);
    let resume = resume_method(input, &p);
    let size_hint = size_hint_method(input, &p);

    quote! {
        // Inherent `next()`/`get_state()` that cannot be called: a node that was
        // only constructed gets a compile error saying to start it first.
        #guards

        #[automatically_derived]
        impl #impl_generics #p::NodeName for #ident #ty_generics #where_clause {
            const NAME: &'static str = #name;
        }

        #[automatically_derived]
        #[allow(unused_qualifications, clippy::needless_question_mark)]
        impl #impl_generics #p::Stateful for #ident #ty_generics
        where
            #(#predicates,)*
        {
            fn reset(
                &mut self,
                __state: ::core::option::Option<&#p::State>,
            ) -> #p::Result<()> {
                #reset
            }

            fn check_state(&self, __s: &#p::State) -> #p::Result<()> {
                #check_state
            }

            fn get_state(&self, __cx: &#p::Cx) -> #p::Result<#p::State> {
                #get_state
            }

            fn describe(&self) -> #p::Description {
                #describe
            }

            fn shutdown(&mut self) {
                #shutdown
            }

            #resume

            #size_hint
        }
    }
}

/// `resume`: the container's `resume = expr`; `CountsItems` with the
/// `counts_items` field's key, which must be a `u64` (a type error at the
/// field otherwise); `ForwardsCount` with `counts_items = "child"`; the
/// trait's default otherwise.
fn resume_method(input: &Input<'_>, p: &TokenStream) -> TokenStream {
    let signature = quote!(fn resume(&self) -> #p::Resume);
    if let Some(expr) = input.attrs.resume.get() {
        return quote! {
            #signature {
                #expr
            }
        };
    }
    if input.attrs.counts_items.is_set() {
        return quote! {
            #signature {
                #p::Resume::ForwardsCount
            }
        };
    }
    let Some(field) = input.fields.iter().find(|f| f.attrs.counts_items.is_set()) else {
        return TokenStream::new();
    };
    let (member, key) = (field.ident, &field.key);
    let is_u64 = quote_spanned!(field.ty.span()=> let _: &::core::primitive::u64 = &self.#member;);
    quote! {
        #signature {
            #is_u64
            #p::Resume::CountsItems(::std::borrow::Cow::Borrowed(#key))
        }
    }
}

/// The call of `__started_guards!` for this type: its generic parameters
/// without defaults (as in an `impl<...>`) and its own where clause.
fn started_guards(input: &Input<'_>, p: &TokenStream) -> TokenStream {
    let mut params = input.generics.params.clone();
    for param in &mut params {
        match param {
            syn::GenericParam::Type(t) => t.default = None,
            syn::GenericParam::Const(c) => c.default = None,
            syn::GenericParam::Lifetime(_) => {}
        }
    }
    let ident = input.ident;
    let (_, ty_generics, where_clause) = input.generics.split_for_impl();
    let where_clause = where_clause.map(|w| {
        let predicates = &w.predicates;
        quote!(where [#predicates])
    });
    quote!(#p::__started_guards!(impl [#params] #ident #ty_generics #where_clause);)
}

/// `tokens` with every span replaced by `span`.
fn respan(tokens: TokenStream, span: proc_macro2::Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tt| {
            if let proc_macro2::TokenTree::Group(g) = &tt {
                let mut group = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                tt = proc_macro2::TokenTree::Group(group);
            } else {
                tt.set_span(span);
            }
            tt
        })
        .collect()
}

/// One bound per annotated field, spanned at the field's type so that an
/// unmet bound ("`u64` is not a node") points at the field.
fn field_bounds(input: &Input<'_>, p: &TokenStream) -> Vec<TokenStream> {
    input
        .fields
        .iter()
        .filter_map(|f| {
            let ty = f.ty;
            let span = ty.span();
            // Every token of the bound carries the field's span, so the error
            // for an unmet bound points at the field type.
            let p = &respan(p.clone(), span);
            Some(match f.attrs.role()? {
                Role::Child => quote_spanned!(span=> #ty: #p::Node),
                Role::Children => quote_spanned!(span=> #ty: #p::Children),
                Role::State if f.attrs.deferred.is_set() && f.attrs.default.is_set() => {
                    quote_spanned!(span=>
                        #ty: #p::Snapshot + #p::serde::de::DeserializeOwned
                    )
                }
                Role::State if f.attrs.deferred.is_set() => quote_spanned!(span=>
                    #ty: #p::Snapshot
                        + #p::serde::de::DeserializeOwned
                        + ::core::default::Default
                ),
                Role::State if f.attrs.default.is_set() => quote_spanned!(span=>
                    #ty: #p::serde::Serialize + #p::serde::de::DeserializeOwned
                ),
                Role::State => quote_spanned!(span=>
                    #ty: #p::serde::Serialize
                        + #p::serde::de::DeserializeOwned
                        + ::core::default::Default
                ),
                Role::Lazy => quote_spanned!(span=> #ty: #p::LazySlot),
                Role::Param => quote_spanned!(span=> #ty: #p::Param),
                Role::Config => return None,
            })
        })
        .collect()
}

fn reset_body(input: &Input<'_>, p: &TokenStream, version: u32) -> TokenStream {
    let name = quote!(<Self as #p::NodeName>::NAME);
    let mut keys: Vec<String> = input.keyed().map(|f| f.key.clone()).collect();
    if version != 0 {
        keys.push(crate::symbol::VERSION_KEY.to_owned());
    }
    let state_fields: Vec<&Field<'_>> = input.with_role(Role::State).collect();
    let decoded: Vec<syn::Ident> = (0..state_fields.len())
        .map(|i| quote::format_ident!("__field{}", i))
        .collect();
    let decode = state_fields.iter().zip(&decoded).map(|(f, var)| {
        let (key, ty) = (&f.key, f.ty);
        quote!(let #var: #ty = #p::decode_field(__s, #key)?;)
    });
    let check_children = check_children(input, p);
    let reset_children = input.fields.iter().filter_map(|f| {
        let (member, key) = (f.ident, &f.key);
        match f.attrs.role()? {
            Role::Child => Some(quote!(#p::reset_child(&mut self.#member, __state, #key)?;)),
            Role::Children => Some(quote!(#p::reset_children(&mut self.#member, __state, #key)?;)),
            _ => None,
        }
    });
    let assign_restored = state_fields.iter().zip(&decoded).map(|(f, var)| {
        let member = f.ident;
        quote!(self.#member = #var;)
    });
    let assign_default = state_fields.iter().map(|f| {
        let member = f.ident;
        match f.attrs.default.get() {
            // Through a temporary, so `default = self.x + 1` does not read as
            // `self.a = self.a + 1` to lints in the user's crate.
            Some(expr) => quote_spanned!(expr.span()=> {
                let __default = #expr;
                self.#member = __default;
            }),
            None => quote!(self.#member = ::core::default::Default::default();),
        }
    });
    let clear_lazy = input.with_role(Role::Lazy).map(|f| {
        let member = f.ident;
        let field = crate::ast::unraw(member);
        quote!(#p::LazySlot::clear(&mut self.#member, #name, #field);)
    });
    let tuple = quote!((#(#decoded,)*));
    let expect_version = expect_version(input, &name, version);
    let init = match input.attrs.init.span() {
        // The author's method, called by name so a missing one is reported at the attribute.
        // A bad-state error from `init` names a key of this node's state
        // (it has no `State` to ask for the full path): root it there.
        Some(span) => quote_spanned!(span=> #p::root_init_error(
            __state,
            <Self as #p::Init>::init(self, __state.is_some()),
        )),
        None => quote!(::core::result::Result::Ok(())),
    };
    let validate = input
        .attrs
        .validate
        .span()
        .map(|span| quote_spanned!(span=> <Self as #p::Validate>::validate(self, __s)?;));
    quote! {
        // Validate everything this node owns before applying anything.
        let __decoded = match __state {
            ::core::option::Option::Some(__s) => {
                __s.expect_keys(#name, &[#(#keys),*])?;
                #expect_version
                #(#check_children)*
                #(#decode)*
                #validate
                ::core::option::Option::Some(#tuple)
            }
            ::core::option::Option::None => ::core::option::Option::None,
        };
        #(#reset_children)*
        match __decoded {
            ::core::option::Option::Some(#tuple) => { #(#assign_restored)* }
            ::core::option::Option::None => { #(#assign_default)* }
        }
        #(#clear_lazy)*
        #init
    }
}

/// Checks that each child's (or children's) state is present, for both the
/// reset and the check pass.
fn check_children<'a>(
    input: &'a Input<'_>,
    p: &'a TokenStream,
) -> impl Iterator<Item = TokenStream> + 'a {
    input
        .with_role(Role::Child)
        .chain(input.with_role(Role::Children))
        .map(move |f| {
            let key = &f.key;
            quote!(#p::check_child(__s, #key)?;)
        })
}

/// The version check, after `expect_keys`. Unversioned, it can only fail
/// on a `version` key, which `expect_keys` has rejected already unless a
/// field has that key: so it is left out (a lookup per node per restore).
fn expect_version(input: &Input<'_>, name: &TokenStream, version: u32) -> Option<TokenStream> {
    let needed = version != 0 || input.keyed().any(|f| f.key == crate::symbol::VERSION_KEY);
    needed.then(|| quote!(__s.expect_version(#name, #version)?;))
}

/// `check_state`: what `reset` checks before applying a state, then the
/// same for every child, without changing anything.
fn check_state_body(input: &Input<'_>, p: &TokenStream, version: u32) -> TokenStream {
    let name = quote!(<Self as #p::NodeName>::NAME);
    let mut keys: Vec<String> = input.keyed().map(|f| f.key.clone()).collect();
    if version != 0 {
        keys.push(crate::symbol::VERSION_KEY.to_owned());
    }
    let decode = input.with_role(Role::State).map(|f| {
        let (key, ty) = (&f.key, f.ty);
        quote!(let _: #ty = #p::decode_field(__s, #key)?;)
    });
    let check_children = check_children(input, p);
    let expect_version = expect_version(input, &name, version);
    let validate = input
        .attrs
        .validate
        .span()
        .map(|span| quote_spanned!(span=> <Self as #p::Validate>::validate(self, __s)?;));
    let children = input.fields.iter().filter_map(|f| {
        let (member, key) = (f.ident, &f.key);
        match f.attrs.role()? {
            Role::Child => Some(quote!(#p::check_child_state(&self.#member, __s, #key)?;)),
            Role::Children => Some(quote!(#p::check_children_state(&self.#member, __s, #key)?;)),
            _ => None,
        }
    });
    quote! {
        __s.expect_keys(#name, &[#(#keys),*])?;
        #expect_version
        #(#check_children)*
        #(#decode)*
        #validate
        #(#children)*
        ::core::result::Result::Ok(())
    }
}

/// `get_state`: the fields in declaration order, each child's state nested
/// under its key, then the version.
fn get_state_body(input: &Input<'_>, p: &TokenStream, version: u32) -> TokenStream {
    let parts = input.keyed().map(|f| {
        let (member, key) = (f.ident, &f.key);
        match f.attrs.role() {
            Some(Role::Child) => quote!(
                __s.child(#key, #p::Stateful::get_state(&self.#member, __cx)?);
            ),
            Some(Role::Children) => quote!(
                __s.child(#key, #p::Children::children_state(&self.#member, __cx)?);
            ),
            _ if f.attrs.deferred.is_set() => quote!(__s.deferred(#key, &self.#member);),
            _ => quote!(__s.field(#key, &self.#member)?;),
        }
    });
    quote! {
        let _ = __cx;
        let mut __s = #p::Fields::default();
        #(#parts)*
        ::core::result::Result::Ok(__s.done(#version))
    }
}

fn describe_body(input: &Input<'_>, p: &TokenStream) -> TokenStream {
    let parts = input.fields.iter().filter_map(|f| {
        let (member, key) = (f.ident, &f.key);
        let field = crate::ast::unraw(member);
        match f.attrs.role()? {
            Role::Param => Some(quote!(
                __d = __d.param(#field, &self.#member);
            )),
            Role::Child => Some(quote!(
                __d = __d.child(#key, #p::Stateful::describe(&self.#member));
            )),
            Role::Children => Some(quote!(
                __d = __d.child(#key, #p::Children::describe_children(&self.#member));
            )),
            Role::State | Role::Lazy | Role::Config => None,
        }
    });
    quote! {
        let mut __d = #p::Description::new(<Self as #p::NodeName>::NAME);
        #(#parts)*
        __d.with_resume(#p::Stateful::resume(self))
    }
}

fn shutdown_body(input: &Input<'_>, p: &TokenStream) -> TokenStream {
    let parts = input.fields.iter().filter_map(|f| {
        let member = f.ident;
        match f.attrs.role()? {
            Role::Child => Some(quote!(#p::Stateful::shutdown(&mut self.#member);)),
            Role::Children => Some(quote!(#p::Children::shutdown_children(&mut self.#member);)),
            _ => None,
        }
    });
    quote!(#(#parts)*)
}

/// `size_hint`, when the container asks for it: the single child's bounds
/// (`size_hint = "child"`), or the author's `SizeHint` (`size_hint`).
/// Without the attribute the trait's default stays ("unknown"), which is
/// sound for any node. The child's `may_fail` is not forwarded: the derive
/// cannot tell whether the node adds errors of its own (a lookup, a parse).
fn size_hint_method(input: &Input<'_>, p: &TokenStream) -> TokenStream {
    let hint = match input.attrs.size_hint.get() {
        None => return TokenStream::new(),
        // `check` made sure there is exactly one child.
        Some(SizeHintFrom::Child) => input
            .with_role(Role::Child)
            .map(|child| {
                let member = child.ident;
                quote!(#p::Hint { may_fail: true, ..#p::Stateful::size_hint(&self.#member) })
            })
            .collect(),
        Some(SizeHintFrom::Author) => quote!(<Self as #p::SizeHint>::size_hint(self)),
    };
    quote! {
        fn size_hint(&self) -> #p::Hint {
            #hint
        }
    }
}
