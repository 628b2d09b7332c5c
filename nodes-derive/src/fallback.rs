//! What to emit when the input is bad: the errors, plus a stub impl so that
//! code using the type as a node keeps type-checking and the user sees only
//! the real errors.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::Input;

pub(crate) fn expand(input: &Input<'_>, error: &syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    let krate = input.krate();
    let p = crate::private_path(&krate);
    let ident = input.ident;
    let name = input.name();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #errors
        #[automatically_derived]
        impl #impl_generics #p::NodeName for #ident #ty_generics #where_clause {
            const NAME: &'static str = #name;
        }
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
    }
}
