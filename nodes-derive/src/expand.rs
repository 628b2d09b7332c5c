//! Code generation from a checked model. No user-facing errors are raised
//! here: everything was reported by parsing and `check`.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;

use crate::ast::{Field, Input, VERSION_KEY};
use crate::attr::{Role, SizeHintFrom};
use crate::check;
use crate::ctxt::Ctxt;

/// The whole expansion. With errors in the input it is the errors plus a
/// stub impl, so that code using the type as a node keeps type-checking and
/// the user sees only the real errors.
pub(crate) fn derive(input: &syn::DeriveInput) -> TokenStream {
    let mut cx = Ctxt::default();
    let model = Input::from_syn(&mut cx, input);
    check::check(&mut cx, &model);
    let krate = model.krate();
    let p = private_path(&krate);
    let ident = model.ident;
    let name = ident.unraw().to_string();
    let (impl_generics, ty_generics, where_clause) = model.generics.split_for_impl();
    let (first, stateful) = match cx.check() {
        Ok(()) => {
            // nodes-core stops with an error naming both versions when it is
            // from another release than this derive.
            let version = env!("CARGO_PKG_VERSION");
            // Inherent `next()`/`get_state()` that cannot be called: a node that was
            // only constructed gets a compile error saying to start it first.
            let guards = started_guards(&model, &p);
            let first = quote!(#krate::__require_derive_version!(#version); #guards);
            (first, impl_stateful(&model, &p))
        }
        Err(err) => {
            let stub = quote! {
                #[automatically_derived]
                #[allow(unused_qualifications)]
                impl #impl_generics #p::Stateful for #ident #ty_generics #where_clause {
                    fn reset(&mut self, _: ::core::option::Option<&#p::State>) -> #p::Result<()> {
                        ::core::unreachable!()
                    }
                    fn get_state(&self, _: &#p::Cx) -> #p::Result<#p::State> {
                        ::core::unreachable!()
                    }
                    fn describe(&self) -> #p::Description {
                        ::core::unreachable!()
                    }
                }
            };
            (err.to_compile_error(), stub)
        }
    };
    quote! {
        #first
        #[automatically_derived]
        impl #impl_generics #p::NodeName for #ident #ty_generics #where_clause {
            const NAME: &'static str = #name;
        }
        #stateful
    }
}

/// `krate`'s private module as this release names it
/// (`::nodes_std::__private_0_1_0`): generated code reaches nodes-core only
/// through it, after `__require_derive_version!` has checked the release.
fn private_path(krate: &syn::Path) -> TokenStream {
    let version = env!("CARGO_PKG_VERSION").replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    let module = format_ident!("__private_{}", version);
    quote!(#krate::#module)
}

fn impl_stateful(input: &Input<'_>, p: &TokenStream) -> TokenStream {
    let ident = input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let mut predicates: Vec<TokenStream> = where_clause
        .map(|w| w.predicates.iter().map(|p| quote!(#p)).collect())
        .unwrap_or_default();
    predicates.extend(input.fields.iter().filter_map(|f| field_bound(f, p)));
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

    // What each field adds to the methods, in declaration order.
    let [mut reset, mut check, mut get, mut describe, mut shutdown] =
        <[Vec<TokenStream>; 5]>::default();
    for f in &input.fields {
        let (member, key) = (f.ident, &f.key);
        // The field's sub-state for `reset` (`None`: back to the start).
        let sub = quote!(#p::sub_state(__state, #key)?.as_ref());
        match f.attrs.role() {
            Some(Role::Child) => {
                reset.push(quote!(#p::Stateful::reset(&mut self.#member, #sub)?;));
                check.push(quote!(#p::Stateful::check_state(&self.#member, &__s.child(#key)?)?;));
                get.push(quote!(__s.child(#key, #p::Stateful::get_state(&self.#member, __cx)?);));
                describe
                    .push(quote!(__d = __d.child(#key, #p::Stateful::describe(&self.#member));));
                shutdown.push(quote!(#p::Stateful::shutdown(&mut self.#member);));
            }
            Some(Role::Children) => {
                reset.push(quote!(#p::reset_children(&mut self.#member, #sub)?;));
                check.push(quote!(#p::check_children(&self.#member, &__s.child(#key)?)?;));
                get.push(quote!(
                    __s.child(#key, #p::children_state(&self.#member, __cx)?);
                ));
                describe.push(quote!(
                    __d = __d.child(#key, #p::describe_children(&self.#member));
                ));
                shutdown.push(quote!(#p::shutdown_children(&mut self.#member);));
            }
            Some(Role::State) if f.attrs.deferred.is_set() => {
                get.push(quote!(__s.deferred(#key, &self.#member);));
            }
            Some(Role::State) => get.push(quote!(__s.field(#key, &self.#member)?;)),
            Some(Role::Param) => {
                let field = member.unraw().to_string();
                describe.push(quote!(__d = __d.param(#field, &self.#member);));
            }
            Some(Role::Tally) => {
                describe.push(quote!(__d = __d.with_tally(#p::TallyField::tally(&self.#member));));
            }
            _ => {}
        }
    }
    let reset = reset_body(input, p, &reset);
    let check_state = check_own(input, p, std::iter::repeat(quote!(_)));
    let version = input.version();
    let resume = resume_method(input, p);
    let size_hint = size_hint_method(input, p);

    quote! {
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
                #(#check)*
                ::core::result::Result::Ok(())
            }

            fn get_state(&self, __cx: &#p::Cx) -> #p::Result<#p::State> {
                __cx.check_live(<Self as #p::NodeName>::NAME)?;
                #p::Fields::build(#version, |__s| {
                    #(#get)*
                    ::core::result::Result::Ok(())
                })
            }

            fn describe(&self) -> #p::Description {
                let mut __d = #p::Description::new(<Self as #p::NodeName>::NAME);
                #(#describe)*
                __d.with_resume(#p::Stateful::resume(self))
            }

            fn shutdown(&mut self) {
                #(#shutdown)*
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
fn resume_method(input: &Input<'_>, p: &TokenStream) -> Option<TokenStream> {
    let body = if let Some(expr) = input.attrs.resume.get() {
        quote!(#expr)
    } else if input.attrs.counts_items.is_set() {
        quote!(#p::Resume::ForwardsCount)
    } else {
        let field = input
            .fields
            .iter()
            .find(|f| f.attrs.counts_items.is_set())?;
        let (member, key) = (field.ident, &field.key);
        let is_u64 =
            quote_spanned!(field.ty.span()=> let _: &::core::primitive::u64 = &self.#member;);
        quote!(#is_u64 #p::Resume::CountsItems(::std::borrow::Cow::Borrowed(#key)))
    };
    Some(quote! {
        fn resume(&self) -> #p::Resume {
            #body
        }
    })
}

/// The call of `__started_guards!` for this type: its generic parameters
/// without defaults (as in an `impl<...>`) and its own where clause.
fn started_guards(input: &Input<'_>, p: &TokenStream) -> TokenStream {
    let mut generics = input.generics.clone();
    generics.type_params_mut().for_each(|t| t.default = None);
    generics.const_params_mut().for_each(|c| c.default = None);
    let (params, ident) = (&generics.params, input.ident);
    let (_, ty_generics, where_clause) = input.generics.split_for_impl();
    let where_clause = where_clause.map(|w| {
        let predicates = &w.predicates;
        quote!(where [#predicates])
    });
    quote!(#p::__started_guards!(impl [#params] #ident #ty_generics #where_clause);)
}

/// `tokens` with every span replaced by `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    let respan_one = |mut tt: TokenTree| {
        if let TokenTree::Group(g) = &tt {
            tt = Group::new(g.delimiter(), respan(g.stream(), span)).into();
        }
        tt.set_span(span);
        tt
    };
    tokens.into_iter().map(respan_one).collect()
}

/// The bound an annotated field puts on the impl, spanned at the field's type
/// so that an unmet bound ("`u64` is not a node") points at the field.
fn field_bound(field: &Field<'_>, p: &TokenStream) -> Option<TokenStream> {
    let ty = field.ty;
    let span = ty.span();
    // Every token of the bound carries the field's span, so the error
    // for an unmet bound points at the field type.
    let p = &respan(p.clone(), span);
    let bound = match field.attrs.role()? {
        Role::Child => quote_spanned!(span=> #p::Node),
        Role::Children => quote_spanned!(span=> #p::Keyed),
        Role::State => {
            let save = if field.attrs.deferred.is_set() {
                quote_spanned!(span=> #p::Snapshot)
            } else {
                quote_spanned!(span=> #p::serde::Serialize)
            };
            let default = (!field.attrs.default.is_set())
                .then(|| quote_spanned!(span=> + ::core::default::Default));
            quote_spanned!(span=> #save + #p::serde::de::DeserializeOwned #default)
        }
        Role::Lazy => quote_spanned!(span=> #p::LazySlot),
        Role::Param => quote_spanned!(span=> #p::Param),
        Role::Tally => quote_spanned!(span=> #p::TallyField),
        Role::Config => return None,
    };
    Some(quote_spanned!(span=> #ty: #bound))
}

/// What `reset` and `check_state` check of the node's own state `__s`
/// before applying anything: its keys and version, that each child's state
/// is there, that each state field decodes (into the next of `vars`), and
/// the author's `validate`.
fn check_own(
    input: &Input<'_>,
    p: &TokenStream,
    vars: impl Iterator<Item = TokenStream>,
) -> TokenStream {
    let name = quote!(<Self as #p::NodeName>::NAME);
    let version = input.version();
    let mut keys: Vec<&str> = input.keyed().map(|f| f.key.as_str()).collect();
    if version != 0 {
        keys.push(VERSION_KEY);
    }
    // Unversioned, the version check can only fail on a `version` key, which
    // `expect_keys` has rejected already unless a field has that key: so it
    // is left out then (a lookup per node per restore).
    let expect_version = keys
        .contains(&VERSION_KEY)
        .then(|| quote!(__s.expect_version(#name, #version)?;));
    let children = input
        .with_role(Role::Child)
        .chain(input.with_role(Role::Children));
    let children = children.map(|f| &f.key);
    let decode = input.with_role(Role::State).zip(vars).map(|(f, var)| {
        let (key, ty) = (&f.key, f.ty);
        quote!(let #var: #ty = __s.get(#key)?;)
    });
    let validate = input
        .attrs
        .validate
        .span()
        .map(|span| quote_spanned!(span=> <Self as #p::Validate>::validate(self, __s)?;));
    quote! {
        __s.expect_keys(#name, &[#(#keys),*])?;
        #expect_version
        #(__s.child(#children)?;)*
        #(#decode)*
        #validate
    }
}

/// `reset`: check the node's own state as `check_state` does, reset the
/// children, then apply the decoded fields (or their defaults), clear the
/// lazy slots and call the author's `init`.
fn reset_body(input: &Input<'_>, p: &TokenStream, reset_children: &[TokenStream]) -> TokenStream {
    let name = quote!(<Self as #p::NodeName>::NAME);
    let state_fields: Vec<&Field<'_>> = input.with_role(Role::State).collect();
    let members = state_fields.iter().map(|f| f.ident);
    let decoded: Vec<syn::Ident> = (0..state_fields.len())
        .map(|i| format_ident!("__field{}", i))
        .collect();
    let check_own = check_own(input, p, decoded.iter().map(|var| quote!(#var)));
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
        let (member, field) = (f.ident, f.ident.unraw().to_string());
        quote!(#p::LazySlot::clear(&mut self.#member, #name, #field);)
    });
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
    quote! {
        // Validate everything this node owns before applying anything.
        let __decoded = match __state {
            ::core::option::Option::Some(__s) => {
                #check_own
                ::core::option::Option::Some((#(#decoded,)*))
            }
            ::core::option::Option::None => ::core::option::Option::None,
        };
        #(#reset_children)*
        match __decoded {
            ::core::option::Option::Some((#(#decoded,)*)) => { #(self.#members = #decoded;)* }
            ::core::option::Option::None => { #(#assign_default)* }
        }
        #(#clear_lazy)*
        #init
    }
}

/// `size_hint`, when the container asks for it: the single child's bounds
/// (`size_hint = "child"`), or the author's `SizeHint` (`size_hint`).
/// Without the attribute the trait's default stays ("unknown"), which is
/// sound for any node. The child's `may_fail` is not forwarded: the derive
/// cannot tell whether the node adds errors of its own (a lookup, a parse).
fn size_hint_method(input: &Input<'_>, p: &TokenStream) -> Option<TokenStream> {
    let hint = match input.attrs.size_hint.get()? {
        // `check` made sure there is exactly one child.
        SizeHintFrom::Child => {
            let child = input.with_role(Role::Child).map(|f| f.ident);
            quote!(#p::Hint { may_fail: true, ..#p::Stateful::size_hint(#(&self.#child)*) })
        }
        SizeHintFrom::Author => quote!(<Self as #p::SizeHint>::size_hint(self)),
    };
    Some(quote! {
        fn size_hint(&self) -> #p::Hint {
            #hint
        }
    })
}
