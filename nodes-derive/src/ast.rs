//! The model a derive input is parsed into; each part keeps its `original`
//! syntax for error spans.

use syn::ext::IdentExt;

use crate::attr::{ContainerAttrs, FieldAttrs, RenameRule, Role};
use crate::ctxt::Ctxt;

/// The state key a versioned node stores its version under (matches
/// `nodes_core::VERSION_KEY`).
pub(crate) const VERSION_KEY: &str = "version";

pub(crate) struct Input<'a> {
    pub(crate) ident: &'a syn::Ident,
    pub(crate) generics: &'a syn::Generics,
    pub(crate) attrs: ContainerAttrs,
    pub(crate) fields: Vec<Field<'a>>,
}

pub(crate) struct Field<'a> {
    pub(crate) original: &'a syn::Field,
    pub(crate) ident: &'a syn::Ident,
    pub(crate) ty: &'a syn::Type,
    pub(crate) attrs: FieldAttrs,
    /// The field's state key: `rename`, else the unraw'd name under `rename_all`.
    pub(crate) key: String,
}

impl<'a> Input<'a> {
    /// Parses `input`. A shape the derive cannot handle at all (an enum, a
    /// tuple struct) is recorded as an error and gives a model without fields,
    /// so the container attributes (the `crate` path the fallback needs) are
    /// still parsed once, here.
    pub(crate) fn from_syn(cx: &mut Ctxt, input: &'a syn::DeriveInput) -> Self {
        let attrs = ContainerAttrs::from_ast(cx, input);
        let rule = attrs.rename_all.get().copied().unwrap_or(RenameRule::Snake);
        let named = match &input.data {
            syn::Data::Struct(syn::DataStruct {
                fields: syn::Fields::Named(named),
                ..
            }) => Some(&named.named),
            syn::Data::Struct(s) => {
                let message = "`#[derive(Node)]` supports only structs with named fields; name the fields so each can carry a state key";
                cx.error_spanned_by(&s.fields, message);
                None
            }
            syn::Data::Enum(e) => {
                let message = "`#[derive(Node)]` supports only structs with named fields, not enums; hold the variants in a struct field or implement `Node` by hand";
                cx.error_spanned_by(e.enum_token, message);
                None
            }
            syn::Data::Union(u) => {
                let message =
                    "`#[derive(Node)]` supports only structs with named fields, not unions";
                cx.error_spanned_by(u.union_token, message);
                None
            }
        };
        let fields = named.into_iter().flatten().filter_map(|f| {
            let ident = f.ident.as_ref()?;
            let attrs = FieldAttrs::from_ast(cx, f);
            let key = match attrs.rename.get() {
                Some(lit) => lit.value(),
                None => rule.apply(&ident.unraw().to_string()),
            };
            Some(Field {
                original: f,
                ident,
                ty: &f.ty,
                attrs,
                key,
            })
        });
        Input {
            ident: &input.ident,
            generics: &input.generics,
            fields: fields.collect(),
            attrs,
        }
    }

    /// Fields with the given role, in declaration order.
    pub(crate) fn with_role(&self, role: Role) -> impl Iterator<Item = &Field<'a>> {
        self.fields
            .iter()
            .filter(move |f| f.attrs.role() == Some(role))
    }

    /// Fields that appear in the state (children and state fields), in declaration order.
    pub(crate) fn keyed(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields
            .iter()
            .filter(|f| f.attrs.role().is_some_and(Role::is_keyed))
    }

    /// The state format version (0 = unversioned).
    pub(crate) fn version(&self) -> u32 {
        self.attrs.version.get().copied().unwrap_or(0)
    }

    /// The path generated code reaches the runtime through: the container's
    /// `crate = ...`, else `::nodes_std`.
    pub(crate) fn krate(&self) -> syn::Path {
        let default = || syn::parse_quote!(::nodes_std);
        self.attrs.krate.get().cloned().unwrap_or_else(default)
    }
}
