//! Code generation from a checked model. No user-facing errors are raised
//! here: everything was reported by parsing and `check`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Field, Input};
use crate::attr::Role;
use crate::ctxt::Ctxt;
use crate::{check, fallback};

pub(crate) fn derive(input: &syn::DeriveInput) -> TokenStream {
    match try_expand(input) {
        Ok(tokens) => tokens,
        Err(err) => fallback::expand(input, &err),
    }
}

fn try_expand(input: &syn::DeriveInput) -> syn::Result<TokenStream> {
    let cx = Ctxt::new();
    let model = Input::from_syn(&cx, input);
    if let Some(model) = &model {
        check::check(&cx, model);
    }
    cx.check()?;
    // `from_syn` records an error whenever it returns `None`, so this is set.
    let model = model.ok_or_else(|| syn::Error::new_spanned(input, "unsupported input"))?;
    Ok(impl_node(&model))
}

/// The path generated code reaches the runtime through.
pub(crate) fn krate(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let attrs = crate::attr::ContainerAttrs::from_ast(&cx, input);
    let _ = cx.check();
    match attrs.krate.get() {
        Some(path) => quote!(#path),
        None => quote!(::nodes_std),
    }
}

fn impl_node(input: &Input<'_>) -> TokenStream {
    let krate = krate(input.original);
    let p = quote!(#krate::__private);
    let ident = input.ident;
    let name = input.name();
    let version = input.version();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let bounds = field_bounds(input, &p);
    let mut predicates: Vec<TokenStream> = where_clause
        .map(|w| w.predicates.iter().map(|p| quote!(#p)).collect())
        .unwrap_or_default();
    predicates.push(quote!(Self: #p::Step));
    predicates.extend(bounds);

    let reset = reset_body(input, &p, &name, version);
    let get_state = get_state_body(input, &p, version);
    let describe = describe_body(input, &p, &name);
    let shutdown = shutdown_body(input, &p);

    quote! {
        #[automatically_derived]
        #[allow(unused_qualifications, clippy::needless_question_mark)]
        impl #impl_generics #p::Node for #ident #ty_generics
        where
            #(#predicates,)*
        {
            type Item = <Self as #p::Step>::Item;

            fn next(
                &mut self,
                __cx: &mut #p::Cx,
            ) -> #p::Result<::core::option::Option<Self::Item>> {
                <Self as #p::Step>::next(self, __cx)
            }

            fn reset(
                &mut self,
                __state: ::core::option::Option<&#p::State>,
            ) -> #p::Result<()> {
                #reset
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
        }
    }
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
            Some(match f.attrs.role()? {
                Role::Child => quote_spanned!(span=> #ty: #p::Node),
                Role::Children => quote_spanned!(span=> #ty: #p::Children),
                Role::State if f.attrs.default.is_set() => {
                    quote_spanned!(span=> #ty: #p::StateField)
                }
                Role::State => {
                    quote_spanned!(span=> #ty: #p::StateField + ::core::default::Default)
                }
                Role::Lazy => quote_spanned!(span=> #ty: #p::LazySlot),
                Role::Param => quote_spanned!(span=> #ty: ::core::fmt::Debug),
            })
        })
        .collect()
}

fn reset_body(input: &Input<'_>, p: &TokenStream, name: &str, version: u32) -> TokenStream {
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
    let check_children = input
        .with_role(Role::Child)
        .chain(input.with_role(Role::Children))
        .map(|f| {
            let key = &f.key;
            quote!(#p::check_child(__s, #key)?;)
        });
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
            Some(expr) => quote_spanned!(expr.span()=> self.#member = #expr;),
            None => quote!(self.#member = ::core::default::Default::default();),
        }
    });
    let clear_lazy = input.with_role(Role::Lazy).map(|f| {
        let member = f.ident;
        let field = crate::ast::unraw(member);
        quote!(#p::LazySlot::clear(&mut self.#member, #name, #field);)
    });
    let tuple = quote!((#(#decoded,)*));
    quote! {
        // Validate everything this node owns before applying anything.
        let __decoded = match __state {
            ::core::option::Option::Some(__s) => {
                __s.expect_keys(#name, &[#(#keys),*])?;
                __s.expect_version(#name, #version)?;
                #(#check_children)*
                #(#decode)*
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
        <Self as #p::Step>::init(self, __state.is_some())
    }
}

fn get_state_body(input: &Input<'_>, p: &TokenStream, version: u32) -> TokenStream {
    let parts = input.keyed().map(|f| {
        let (member, key) = (f.ident, &f.key);
        match f.attrs.role() {
            Some(Role::Child) => {
                quote!(__out.insert_child(#key, #p::Node::get_state(&self.#member, __cx)?);)
            }
            Some(Role::Children) => quote!(
                __out.insert_child(#key, #p::Children::children_state(&self.#member, __cx)?);
            ),
            _ => quote!(#p::encode_field(&mut __out, #key, &self.#member)?;),
        }
    });
    quote! {
        let mut __out = #p::State::new();
        #(#parts)*
        __out.set_version(#version)?;
        ::core::result::Result::Ok(__out)
    }
}

fn describe_body(input: &Input<'_>, p: &TokenStream, name: &str) -> TokenStream {
    let parts = input.fields.iter().filter_map(|f| {
        let (member, key) = (f.ident, &f.key);
        let field = crate::ast::unraw(member);
        match f.attrs.role()? {
            Role::Param => Some(quote!(
                __d = __d.param(#field, ::core::format_args!("{:?}", &self.#member));
            )),
            Role::Child => Some(quote!(
                __d = __d.child(#key, #p::Node::describe(&self.#member));
            )),
            Role::Children => Some(quote!(
                __d = __d.child(#key, #p::Children::describe_children(&self.#member));
            )),
            Role::State | Role::Lazy => None,
        }
    });
    quote! {
        let mut __d = #p::Description::new(#name);
        #(#parts)*
        __d
    }
}

fn shutdown_body(input: &Input<'_>, p: &TokenStream) -> TokenStream {
    let parts = input.fields.iter().filter_map(|f| {
        let member = f.ident;
        match f.attrs.role()? {
            Role::Child => Some(quote!(#p::Node::shutdown(&mut self.#member);)),
            Role::Children => Some(quote!(#p::Children::shutdown_children(&mut self.#member);)),
            _ => None,
        }
    });
    quote!(#(#parts)*)
}
