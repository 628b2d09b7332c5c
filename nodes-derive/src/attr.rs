//! Parses `#[node(...)]` attributes. Parsing never fails outright: a bad key is
//! recorded in the [`Ctxt`] and skipped, so the user sees every error at once.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;

use crate::ctxt::Ctxt;
use crate::symbol::*;

/// One attribute value, remembering where it was set so a second setting can
/// be reported at its own span.
pub(crate) struct Attr<T> {
    name: &'static str,
    value: Option<(Span, T)>,
}

impl<T> Attr<T> {
    fn none(name: &'static str) -> Self {
        Attr { name, value: None }
    }

    fn set(&mut self, cx: &Ctxt, span: Span, value: T) {
        if self.value.is_some() {
            cx.push(syn::Error::new(
                span,
                format!("duplicate node attribute `{}`", self.name),
            ));
        } else {
            self.value = Some((span, value));
        }
    }

    pub(crate) fn get(&self) -> Option<&T> {
        self.value.as_ref().map(|(_, v)| v)
    }

    pub(crate) fn span(&self) -> Option<Span> {
        self.value.as_ref().map(|(s, _)| *s)
    }

    pub(crate) fn is_set(&self) -> bool {
        self.value.is_some()
    }
}

/// What a field is to the node. Every field has exactly one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    Child,
    Children,
    State,
    Lazy,
    Param,
    /// Configuration that is neither reset, saved nor described.
    Config,
}

impl Role {
    /// Every role, in the order messages list them.
    pub(crate) const ALL: [Role; 6] = [
        Role::Child,
        Role::Children,
        Role::State,
        Role::Lazy,
        Role::Param,
        Role::Config,
    ];

    pub(crate) fn keyword(self) -> &'static str {
        match self {
            Role::Child => CHILD,
            Role::Children => CHILDREN,
            Role::State => STATE,
            Role::Lazy => LAZY,
            Role::Param => PARAM,
            Role::Config => CONFIG,
        }
    }

    /// `` `child`, `children`, ..., `config` `` for messages.
    pub(crate) fn list() -> String {
        Role::ALL
            .iter()
            .map(|r| format!("`{}`", r.keyword()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The attributes of one field.
pub(crate) struct FieldAttrs {
    /// Every role keyword given, in order (more than one is an error found by `check`).
    pub(crate) roles: Vec<(Span, Role)>,
    pub(crate) default: Attr<syn::Expr>,
    pub(crate) rename: Attr<syn::LitStr>,
    /// `deferred`: a `state` field saved as a snapshot, serialised only when
    /// the state is (the field implements `Snapshot`).
    pub(crate) deferred: Attr<()>,
    /// `counts_items`: a `state` field that counts the items the node
    /// returned, and the only state that changes between items (see
    /// `Stateful::resume`, `Resume::CountsItems`).
    pub(crate) counts_items: Attr<()>,
    /// Whether a `#[node(...)]` attribute of the field had an error (already
    /// reported, so a missing role is not reported on top of it).
    pub(crate) malformed: bool,
}

impl FieldAttrs {
    pub(crate) fn from_ast(cx: &Ctxt, field: &syn::Field) -> Self {
        let mut out = FieldAttrs {
            roles: Vec::new(),
            default: Attr::none(DEFAULT),
            rename: Attr::none(RENAME),
            deferred: Attr::none(DEFERRED),
            counts_items: Attr::none(COUNTS_ITEMS),
            malformed: false,
        };
        let malformed = for_each_node_key(cx, &field.attrs, |meta| out.parse_one(cx, meta));
        out.malformed |= malformed;
        out
    }

    fn parse_one(&mut self, cx: &Ctxt, meta: &ParseNestedMeta<'_>) {
        let span = meta.path.span();
        let role = Role::ALL
            .into_iter()
            .find(|role| meta.path.is_ident(role.keyword()));
        if let Some(role) = role {
            if self.roles.iter().any(|(_, r)| *r == role) {
                cx.push(syn::Error::new(
                    span,
                    format!("duplicate node attribute `{}`", role.keyword()),
                ));
            } else {
                self.roles.push((span, role));
            }
        } else if meta.path.is_ident(DEFAULT) {
            match meta.value().and_then(|v| v.parse::<syn::Expr>()) {
                Ok(expr) => self.default.set(cx, span, expr),
                Err(err) => {
                    self.malformed = true;
                    cx.push(err);
                }
            }
        } else if meta.path.is_ident(DEFERRED) {
            self.deferred.set(cx, span, ());
        } else if meta.path.is_ident(COUNTS_ITEMS) {
            self.counts_items.set(cx, span, ());
        } else if meta.path.is_ident(RENAME) {
            match meta.value().and_then(|v| v.parse::<syn::LitStr>()) {
                Ok(lit) => self.rename.set(cx, span, lit),
                Err(err) => {
                    self.malformed = true;
                    cx.push(err);
                }
            }
        } else {
            self.malformed = true;
            cx.push(syn::Error::new(
                span,
                format!(
                    "unknown node field attribute `{}`; expected one of {}, `default = ...`, `rename = \"...\"`, `deferred`, `counts_items`",
                    path_to_string(&meta.path),
                    Role::list()
                ),
            ));
            skip_value(meta);
        }
    }

    /// The single role, if exactly one was given (more are reported by `check`).
    pub(crate) fn role(&self) -> Option<Role> {
        self.roles.first().map(|(_, r)| *r)
    }
}

/// Key styles for `rename_all`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RenameRule {
    Snake,
    Camel,
    Pascal,
    Kebab,
    ScreamingSnake,
}

impl RenameRule {
    const ALL: [(&'static str, RenameRule); 5] = [
        ("snake_case", RenameRule::Snake),
        ("camelCase", RenameRule::Camel),
        ("PascalCase", RenameRule::Pascal),
        ("kebab-case", RenameRule::Kebab),
        ("SCREAMING_SNAKE_CASE", RenameRule::ScreamingSnake),
    ];

    /// Applies the rule to a snake_case field name.
    pub(crate) fn apply(self, field: &str) -> String {
        let words = field.split('_').filter(|w| !w.is_empty());
        match self {
            RenameRule::Snake => field.to_owned(),
            RenameRule::Kebab => field.replace('_', "-"),
            RenameRule::ScreamingSnake => field.to_ascii_uppercase(),
            RenameRule::Pascal => words.map(capitalise).collect(),
            RenameRule::Camel => {
                let pascal: String = words.map(capitalise).collect();
                let mut chars = pascal.chars();
                chars
                    .next()
                    .map(|c| c.to_ascii_lowercase().to_string() + chars.as_str())
                    .unwrap_or_default()
            }
        }
    }
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// Where a derived node's size hint comes from (`#[node(size_hint ...)]`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SizeHintFrom {
    /// `size_hint`: the author's `SizeHint` impl.
    Author,
    /// `size_hint = "child"`: the single `#[node(child)]` field's.
    Child,
}

/// The attributes of the struct itself.
pub(crate) struct ContainerAttrs {
    pub(crate) krate: Attr<syn::Path>,
    pub(crate) version: Attr<u32>,
    pub(crate) rename_all: Attr<RenameRule>,
    /// `#[node(init)]`: call the author's `init(&mut self, restored: bool)` at the end of reset.
    pub(crate) init: Attr<()>,
    /// `#[node(validate)]`: call the author's `Validate::validate` before applying a state.
    pub(crate) validate: Attr<()>,
    /// `#[node(size_hint)]` / `#[node(size_hint = "child")]`; without it the
    /// node keeps the default hint, "unknown".
    pub(crate) size_hint: Attr<SizeHintFrom>,
    /// `#[node(counts_items = "child")]`: one item per item of the single
    /// child and no state of its own, so the child's count is the node's.
    pub(crate) counts_items: Attr<()>,
    /// `#[node(resume = expr)]`: what `Stateful::resume` returns (`self` is
    /// in scope).
    pub(crate) resume: Attr<syn::Expr>,
}

impl ContainerAttrs {
    pub(crate) fn from_ast(cx: &Ctxt, input: &syn::DeriveInput) -> Self {
        let mut out = ContainerAttrs {
            krate: Attr::none(CRATE),
            version: Attr::none(VERSION),
            rename_all: Attr::none(RENAME_ALL),
            init: Attr::none(INIT),
            validate: Attr::none(VALIDATE),
            size_hint: Attr::none(SIZE_HINT),
            counts_items: Attr::none(COUNTS_ITEMS),
            resume: Attr::none(RESUME),
        };
        for_each_node_key(cx, &input.attrs, |meta| out.parse_one(cx, meta));
        out
    }

    fn parse_one(&mut self, cx: &Ctxt, meta: &ParseNestedMeta<'_>) {
        let span = meta.path.span();
        if meta.path.is_ident(INIT) {
            self.init.set(cx, span, ());
        } else if meta.path.is_ident(VALIDATE) {
            self.validate.set(cx, span, ());
        } else if meta.path.is_ident(SIZE_HINT) {
            if !meta.input.peek(syn::Token![=]) {
                self.size_hint.set(cx, span, SizeHintFrom::Author);
                return;
            }
            if from_child(cx, meta, |other| {
                format!(
                    "unknown `size_hint` source {other:?}; expected `size_hint = \"child\"` (forward the single child's hint) or a bare `size_hint` (implement `SizeHint`)"
                )
            }) {
                self.size_hint.set(cx, span, SizeHintFrom::Child);
            }
        } else if meta.path.is_ident(COUNTS_ITEMS) {
            if from_child(cx, meta, |other| {
                format!(
                    "unknown `counts_items` source {other:?}; on a container only `counts_items = \"child\"` (the single child's count is the node's); on a field, `#[node(state, counts_items)]`"
                )
            }) {
                self.counts_items.set(cx, span, ());
            }
        } else if meta.path.is_ident(RESUME) {
            match meta.value().and_then(|v| v.parse::<syn::Expr>()) {
                Ok(expr) => self.resume.set(cx, span, expr),
                Err(err) => cx.push(err),
            }
        } else if meta.path.is_ident(CRATE) {
            match meta.value().and_then(|v| v.parse::<syn::Path>()) {
                Ok(path) => self.krate.set(cx, span, path),
                Err(err) => cx.push(err),
            }
        } else if meta.path.is_ident(VERSION) {
            match meta
                .value()
                .and_then(|v| v.parse::<syn::LitInt>())
                .and_then(|lit| lit.base10_parse::<u32>())
            {
                Ok(v) => self.version.set(cx, span, v),
                Err(err) => cx.push(err),
            }
        } else if meta.path.is_ident(RENAME_ALL) {
            match meta.value().and_then(|v| v.parse::<syn::LitStr>()) {
                Ok(lit) => {
                    let value = lit.value();
                    match RenameRule::ALL.iter().find(|(name, _)| *name == value) {
                        Some((_, rule)) => self.rename_all.set(cx, span, *rule),
                        None => cx.error_spanned_by(
                            &lit,
                            format!(
                                "unknown `rename_all` style {value:?}; expected one of {}",
                                RenameRule::ALL
                                    .iter()
                                    .map(|(n, _)| format!("{n:?}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ),
                    }
                }
                Err(err) => cx.push(err),
            }
        } else {
            cx.push(syn::Error::new(
                span,
                format!(
                    "unknown node container attribute `{}`; expected one of `init`, `validate`, `size_hint`, `size_hint = \"child\"`, `counts_items = \"child\"`, `resume = ...`, `crate = ...`, `version = N`, `rename_all = \"...\"`",
                    path_to_string(&meta.path)
                ),
            ));
            skip_value(meta);
        }
    }
}

/// Parses the `= "child"` of `size_hint` or `counts_items`: `true` for it;
/// any other string is an error (`unknown` writes it) at the string.
fn from_child(cx: &Ctxt, meta: &ParseNestedMeta<'_>, unknown: impl FnOnce(&str) -> String) -> bool {
    match meta.value().and_then(|v| v.parse::<syn::LitStr>()) {
        Ok(lit) if lit.value() == FROM_CHILD => true,
        Ok(lit) => {
            cx.error_spanned_by(&lit, unknown(&lit.value()));
            false
        }
        Err(err) => {
            cx.push(err);
            false
        }
    }
}

/// Calls `parse_one` for every key of every `#[node(...)]` attribute in
/// `attrs`; a malformed attribute is recorded and parsing goes on. Returns
/// whether one was malformed.
fn for_each_node_key(
    cx: &Ctxt,
    attrs: &[syn::Attribute],
    mut parse_one: impl FnMut(&ParseNestedMeta<'_>),
) -> bool {
    let mut malformed = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident(NODE)) {
        let result = attr.parse_nested_meta(|meta| {
            parse_one(&meta);
            Ok(())
        });
        if let Err(err) = result {
            malformed = true;
            cx.push(err);
        }
    }
    malformed
}

fn path_to_string(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

/// Consumes `= value` after an unknown key so parsing can go on to the next key.
fn skip_value(meta: &ParseNestedMeta<'_>) {
    if meta.input.peek(syn::Token![=]) {
        let _ = meta.value().and_then(|v| v.parse::<syn::Expr>());
    } else if meta.input.peek(syn::token::Paren) {
        let _ = meta.parse_nested_meta(|_| Ok(()));
    }
}
