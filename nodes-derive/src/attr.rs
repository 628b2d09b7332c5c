//! Parses `#[node(...)]` attributes. Parsing never fails outright: a bad key is
//! recorded in the [`Ctxt`] and skipped, so the user sees every error at once.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::parse::Parse;
use syn::spanned::Spanned;

use crate::ctxt::Ctxt;

/// One attribute value, remembering where it was set so a second setting can
/// be reported at its own span.
pub(crate) struct Attr<T>(Option<(Span, T)>);

impl<T> Default for Attr<T> {
    fn default() -> Self {
        Attr(None)
    }
}

impl<T> Attr<T> {
    /// Sets the value of the key `meta` names. Never `Err`: a second setting
    /// is reported, but leaves the attribute well-formed.
    fn set(&mut self, cx: &mut Ctxt, meta: &ParseNestedMeta<'_>, value: T) -> syn::Result<()> {
        if self.0.is_some() {
            duplicate(cx, meta);
        } else {
            self.0 = Some((meta.path.span(), value));
        }
        Ok(())
    }

    /// Parses the key's `= value` as a `V` and sets what `convert` makes of it.
    fn parse<V: Parse>(
        &mut self,
        cx: &mut Ctxt,
        meta: &ParseNestedMeta<'_>,
        convert: impl FnOnce(V) -> syn::Result<T>,
    ) -> syn::Result<()> {
        let value = convert(meta.value()?.parse()?)?;
        self.set(cx, meta, value)
    }

    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_ref().map(|(_, v)| v)
    }

    pub(crate) fn span(&self) -> Option<Span> {
        self.0.as_ref().map(|(s, _)| *s)
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
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
    /// A live count of the node's pass, attached to its description.
    Tally,
}

impl Role {
    /// Every role with its keyword, in declaration order (`keyword` indexes
    /// it by variant).
    const ALL: [(Role, &'static str); 7] = [
        (Role::Child, "child"),
        (Role::Children, "children"),
        (Role::State, "state"),
        (Role::Lazy, "lazy"),
        (Role::Param, "param"),
        (Role::Config, "config"),
        (Role::Tally, "tally"),
    ];

    pub(crate) fn keyword(self) -> &'static str {
        Role::ALL[self as usize].1
    }

    /// Whether a field of this role has a key in the state (children and
    /// state fields do).
    pub(crate) fn is_keyed(self) -> bool {
        matches!(self, Role::Child | Role::Children | Role::State)
    }
}

/// The attributes of one field.
#[derive(Default)]
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

/// The key of a `#[node(key ...)]` entry, or `""` for a path that is not
/// one identifier (reported as unknown).
fn key_of(meta: &ParseNestedMeta<'_>) -> String {
    meta.path
        .get_ident()
        .map(ToString::to_string)
        .unwrap_or_default()
}

impl FieldAttrs {
    pub(crate) fn from_ast(cx: &mut Ctxt, field: &syn::Field) -> Self {
        let mut out = FieldAttrs::default();
        let malformed = for_each_node_key(cx, &field.attrs, |cx, meta| out.parse_one(cx, meta));
        FieldAttrs { malformed, ..out }
    }

    fn parse_one(&mut self, cx: &mut Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
        let key = key_of(meta);
        if let Some(&(role, _)) = Role::ALL.iter().find(|(_, keyword)| *keyword == key) {
            if self.roles.iter().any(|(_, r)| *r == role) {
                duplicate(cx, meta);
            } else {
                self.roles.push((meta.path.span(), role));
            }
            return Ok(());
        }
        match key.as_str() {
            "default" => self.default.parse(cx, meta, Ok),
            "rename" => self.rename.parse(cx, meta, Ok),
            "deferred" => self.deferred.set(cx, meta, ()),
            "counts_items" => self.counts_items.set(cx, meta, ()),
            _ => Err(unknown(
                meta,
                "field",
                "`child`, `children`, `state`, `lazy`, `param`, `config`, `tally`, `default = ...`, `rename = \"...\"`, `deferred`, `counts_items`",
            )),
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
    fn from_lit(lit: syn::LitStr) -> syn::Result<Self> {
        Ok(match lit.value().as_str() {
            "snake_case" => RenameRule::Snake,
            "camelCase" => RenameRule::Camel,
            "PascalCase" => RenameRule::Pascal,
            "kebab-case" => RenameRule::Kebab,
            "SCREAMING_SNAKE_CASE" => RenameRule::ScreamingSnake,
            other => {
                let message = format!(
                    "unknown `rename_all` style {other:?}; expected one of \"snake_case\", \"camelCase\", \"PascalCase\", \"kebab-case\", \"SCREAMING_SNAKE_CASE\""
                );
                return Err(syn::Error::new_spanned(&lit, message));
            }
        })
    }

    /// Applies the rule to a snake_case field name.
    pub(crate) fn apply(self, field: &str) -> String {
        match self {
            RenameRule::Snake => field.to_owned(),
            RenameRule::Kebab => field.replace('_', "-"),
            RenameRule::ScreamingSnake => field.to_ascii_uppercase(),
            RenameRule::Pascal => field
                .split('_')
                .map(|word| map_first(word, char::to_ascii_uppercase))
                .collect(),
            RenameRule::Camel => {
                map_first(&RenameRule::Pascal.apply(field), char::to_ascii_lowercase)
            }
        }
    }
}

/// `word` with its first character mapped by `f`.
fn map_first(word: &str, f: fn(&char) -> char) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| f(&c).to_string() + chars.as_str())
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
#[derive(Default)]
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
    pub(crate) fn from_ast(cx: &mut Ctxt, input: &syn::DeriveInput) -> Self {
        let mut out = ContainerAttrs::default();
        for_each_node_key(cx, &input.attrs, |cx, meta| out.parse_one(cx, meta));
        out
    }

    fn parse_one(&mut self, cx: &mut Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
        let key = key_of(meta);
        match key.as_str() {
            "init" => self.init.set(cx, meta, ()),
            "validate" => self.validate.set(cx, meta, ()),
            "size_hint" if !meta.input.peek(syn::Token![=]) => {
                self.size_hint.set(cx, meta, SizeHintFrom::Author)
            }
            "size_hint" => {
                let expected = "expected `size_hint = \"child\"` (forward the single child's hint) or a bare `size_hint` (implement `SizeHint`)";
                let parse = from_child(SizeHintFrom::Child, "size_hint", expected);
                self.size_hint.parse(cx, meta, parse)
            }
            "counts_items" => {
                let expected = "on a container only `counts_items = \"child\"` (the single child's count is the node's); on a field, `#[node(state, counts_items)]`";
                self.counts_items
                    .parse(cx, meta, from_child((), "counts_items", expected))
            }
            "resume" => self.resume.parse(cx, meta, Ok),
            "crate" => self.krate.parse(cx, meta, Ok),
            "version" => self
                .version
                .parse(cx, meta, |lit: syn::LitInt| lit.base10_parse()),
            "rename_all" => self.rename_all.parse(cx, meta, RenameRule::from_lit),
            _ => Err(unknown(
                meta,
                "container",
                "`init`, `validate`, `size_hint`, `size_hint = \"child\"`, `counts_items = \"child\"`, `resume = ...`, `crate = ...`, `version = N`, `rename_all = \"...\"`",
            )),
        }
    }
}

/// Takes the `"child"` of `size_hint = "child"` or `counts_items = "child"`
/// as `value`; any other string is an error at the string.
fn from_child<T>(
    value: T,
    key: &'static str,
    expected: &'static str,
) -> impl FnOnce(syn::LitStr) -> syn::Result<T> {
    move |lit| match lit.value() {
        source if source == "child" => Ok(value),
        source => {
            let message = format!("unknown `{key}` source {source:?}; {expected}");
            Err(syn::Error::new_spanned(&lit, message))
        }
    }
}

/// Calls `parse_one` for every key of every `#[node(...)]` attribute in
/// `attrs`; an error is recorded and parsing goes on. Returns whether there
/// was one (other than a duplicate key).
fn for_each_node_key(
    cx: &mut Ctxt,
    attrs: &[syn::Attribute],
    mut parse_one: impl FnMut(&mut Ctxt, &ParseNestedMeta<'_>) -> syn::Result<()>,
) -> bool {
    let mut malformed = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("node")) {
        let result = attr.parse_nested_meta(|meta| {
            if let Err(err) = parse_one(cx, &meta) {
                malformed = true;
                cx.push(err);
            }
            Ok(())
        });
        if let Err(err) = result {
            malformed = true;
            cx.push(err);
        }
    }
    malformed
}

fn duplicate(cx: &mut Ctxt, meta: &ParseNestedMeta<'_>) {
    let message = format!("duplicate node attribute `{}`", path_to_string(&meta.path));
    cx.error(meta.path.span(), message);
}

/// The error for an unknown key (of a `field` or `container`), after
/// consuming its `= value` or `(...)` so parsing can go on to the next key.
fn unknown(meta: &ParseNestedMeta<'_>, of: &str, expected: &str) -> syn::Error {
    if meta.input.peek(syn::Token![=]) {
        let _ = meta.value().and_then(|v| v.parse::<syn::Expr>());
    } else if meta.input.peek(syn::token::Paren) {
        let _ = meta.parse_nested_meta(|_| Ok(()));
    }
    let path = path_to_string(&meta.path);
    let message = format!("unknown node {of} attribute `{path}`; expected one of {expected}");
    syn::Error::new(meta.path.span(), message)
}

fn path_to_string(path: &syn::Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segments.join("::")
}
