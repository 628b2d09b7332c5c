//! Rules that involve more than one attribute or field. Simple per-key checks
//! happen while parsing (`attr.rs`).

use std::collections::BTreeMap;

use crate::ast::{Input, VERSION_KEY};
use crate::attr::{Role, SizeHintFrom};
use crate::ctxt::Ctxt;

pub(crate) fn check(cx: &mut Ctxt, input: &Input<'_>) {
    check_roles(cx, input);
    check_options(cx, input);
    check_lazy(cx, input);
    check_keys(cx, input);
    check_crate_path(cx, input);
    check_size_hint_child(cx, input);
    check_counts_items(cx, input);
    check_counts_items_child(cx, input);
    check_resume_once(cx, input);
}

/// A field has exactly one role: an unannotated field is an error rather than
/// silently becoming configuration (a forgotten `state` on a counter would
/// leak it across epochs and out of every checkpoint).
fn check_roles(cx: &mut Ctxt, input: &Input<'_>) {
    for field in &input.fields {
        if field.attrs.roles.is_empty() && !field.attrs.malformed {
            // The field without its attributes and doc comment.
            let (vis, ident, ty) = (&field.original.vis, field.ident, field.ty);
            let message = format!(
                "field `{ident}` has no role; add one of `#[node(child)]`, `#[node(children)]`, `#[node(state)]`, `#[node(lazy)]`, `#[node(param)]`, `#[node(config)]`, `#[node(tally)]` (`state` is saved and reset, `config` is configuration that is neither saved nor shown)"
            );
            cx.error_spanned_by(quote::quote!(#vis #ident: #ty), message);
        }
        if let [(_, first), rest @ ..] = field.attrs.roles.as_slice() {
            for (span, role) in rest {
                let (role, first) = (role.keyword(), first.keyword());
                let message = format!(
                    "a field has one role: `{role}` conflicts with `{first}` on the same field"
                );
                cx.error(*span, message);
            }
        }
    }
}

/// `default` and `deferred` only on state fields; `rename` only on fields
/// that have a key.
fn check_options(cx: &mut Ctxt, input: &Input<'_>) {
    for field in &input.fields {
        let role = field.attrs.role();
        if let Some(span) = field.attrs.default.span()
            && role != Some(Role::State)
        {
            let message = "`default = ...` is only allowed with `state`: it is the value a `#[node(state)]` field takes on `reset(None)`";
            cx.error(span, message);
        }
        if let Some(span) = field.attrs.deferred.span()
            && role != Some(Role::State)
        {
            let message = "`deferred` is only allowed with `state`: it saves a `#[node(state)]` field as a snapshot serialised only when the state is";
            cx.error(span, message);
        }
        if let Some(span) = field.attrs.rename.span()
            && !role.is_some_and(Role::is_keyed)
        {
            let message = "`rename` is only allowed on `child`, `children` and `state` fields: other fields have no state key";
            cx.error(span, message);
        }
    }
}

/// A `lazy` field must be a `Lazy<T>` slot (checked by name here, and by type
/// in the generated code), and nothing fills it unless the node has an `init`.
fn check_lazy(cx: &mut Ctxt, input: &Input<'_>) {
    for field in input.with_role(Role::Lazy) {
        let is_lazy = match field.ty {
            syn::Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Lazy"),
            _ => false,
        };
        if !is_lazy {
            let message = "a `#[node(lazy)]` field must have type `Lazy<T>`: the derive clears it on every reset and `init` fills it";
            cx.error_spanned_by(field.ty, message);
        }
    }
    if input.attrs.init.is_set() {
        return;
    }
    for field in input.with_role(Role::Lazy) {
        let message = "a `#[node(lazy)]` slot is filled by `init`: add `#[node(init)]` to the struct and implement `Init` to fill it";
        cx.error_spanned_by(field.original, message);
    }
}

/// No two fields share a state key, and none takes the version key of a versioned node.
fn check_keys(cx: &mut Ctxt, input: &Input<'_>) {
    let mut seen: BTreeMap<&str, &syn::Ident> = BTreeMap::new();
    for field in input.keyed() {
        let (key, ident) = (&field.key, field.ident);
        if let Some(first) = seen.get(key.as_str()) {
            let message = format!(
                "state key `{key}` of field `{ident}` is already used by field `{first}`; give one of them another key with `#[node(rename = \"...\")]`"
            );
            cx.error_spanned_by(field.original, message);
        } else {
            seen.insert(key, ident);
        }
        if input.version() != 0 && key == VERSION_KEY {
            let message = "state key `version` is reserved for `#[node(version = N)]`; rename this field's key";
            cx.error_spanned_by(field.original, message);
        }
    }
}

/// The `crate` override must be an absolute path (`::my_facade::nodes`) or
/// start with `crate`, so it resolves the same from every module.
fn check_crate_path(cx: &mut Ctxt, input: &Input<'_>) {
    if let Some(path) = input.attrs.krate.get() {
        let starts_with_crate = path.segments.first().is_some_and(|s| s.ident == "crate");
        if path.leading_colon.is_none() && !starts_with_crate {
            let message = format!(
                "`crate` must be an absolute path, e.g. `crate = ::{}` or `crate = crate::reexport`; a relative path resolves differently in every module",
                quote::quote!(#path).to_string().replace(' ', "")
            );
            cx.error_spanned_by(path, message);
        }
    }
}

/// How many `child`, `children` and `state` fields the node has.
fn role_counts(input: &Input<'_>) -> [usize; 3] {
    [Role::Child, Role::Children, Role::State].map(|role| input.with_role(role).count())
}

/// `size_hint = "child"` forwards one child's hint: the node must have
/// exactly one `child` field and no `children` (whose hints would have to
/// be combined, which depends on what the node does with them).
fn check_size_hint_child(cx: &mut Ctxt, input: &Input<'_>) {
    let [children, lists, _] = role_counts(input);
    if let (Some(SizeHintFrom::Child), Some(span)) =
        (input.attrs.size_hint.get(), input.attrs.size_hint.span())
        && (children != 1 || lists != 0)
    {
        let message = format!(
            "`size_hint = \"child\"` forwards the hint of the single `#[node(child)]` field, but this node has {children} `child` and {lists} `children` fields; use a bare `size_hint` and implement `SizeHint` to combine them"
        );
        cx.error(span, message);
    }
}

/// `counts_items` promises that the node's state changes from one item to
/// the next only in that field: one such field, a plain `state` one, in a
/// node without children (whose states change as they please).
fn check_counts_items(cx: &mut Ctxt, input: &Input<'_>) {
    let mut counted = input
        .fields
        .iter()
        .filter_map(|f| Some((f, f.attrs.counts_items.span()?)));
    let Some((field, span)) = counted.next() else {
        return;
    };
    if field.attrs.role() != Some(Role::State) || field.attrs.deferred.is_set() {
        let message = "`counts_items` is only allowed with `state` (and not `deferred`): it marks the `u64` state field that counts the items the node returned";
        cx.error(span, message);
    }
    for (_, again) in counted {
        let message = "only one field may be `counts_items`: it promises that nothing else in the state changes from one item to the next";
        cx.error(again, message);
    }
    if let Some(child) = input
        .fields
        .iter()
        .find(|f| matches!(f.attrs.role(), Some(Role::Child | Role::Children)))
    {
        let message = format!(
            "`counts_items` needs a node without children, but field `{}` is one: a child's state may change with every item",
            child.ident
        );
        cx.error(span, message);
    }
}

/// `counts_items = "child"` promises one item per item of the single child
/// and no state of the node's own: one `child` field, no `children`, no
/// `state` fields.
fn check_counts_items_child(cx: &mut Ctxt, input: &Input<'_>) {
    let [children, lists, states] = role_counts(input);
    if let Some(span) = input.attrs.counts_items.span()
        && (children != 1 || lists != 0 || states != 0)
    {
        let message = format!(
            "`counts_items = \"child\"` forwards the count of the single `#[node(child)]` field of a node without state of its own, but this node has {children} `child`, {lists} `children` and {states} `state` fields"
        );
        cx.error(span, message);
    }
}

/// `resume = expr` says what the node promises in full: `counts_items`
/// (on the container or a field) would say it a second time.
fn check_resume_once(cx: &mut Ctxt, input: &Input<'_>) {
    let counted = input.attrs.counts_items.is_set()
        || input.fields.iter().any(|f| f.attrs.counts_items.is_set());
    if let Some(span) = input.attrs.resume.span()
        && counted
    {
        let message = "`resume = ...` and `counts_items` both say what the node's state promises: keep one (`counts_items` is `resume = Resume::CountsItems(..)` or `Resume::ForwardsCount`)";
        cx.error(span, message);
    }
}
