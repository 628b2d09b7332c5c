//! [`Description`]: a node's self-portrait, for graphs and fingerprints.

use std::fmt::{self, Display, Write as _};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::param::Param;
use crate::progress::Tally;
use crate::resume::Resume;

/// What a node is: its type name, the parameters that affect the order or
/// content of its output, and its children — available without running it.
///
/// `#[derive(Node)]` writes it from the annotated fields (`#[node(param)]`
/// fields become parameters, rendered by [`Param`]); hand-written nodes build
/// it with the builder methods.
///
/// Every checkpoint records its pipeline's description (as the JSON of
/// [`to_json`](Description::to_json)) and a fingerprint of it, and a state is
/// only loaded into a pipeline that describes itself the same way.
///
/// ```
/// use nodes_core::Description;
///
/// let d = Description::new("Batcher")
///     .param("batch_size", 32)
///     .child("source", Description::new("IterableWrapper"));
/// assert_eq!(d.to_string(), "Batcher(batch_size=32)");
/// assert_eq!(d.render_text(), "Batcher(batch_size=32)\n  source: IterableWrapper\n");
/// assert_eq!(d.name(), "Batcher");
/// assert_eq!(d.get_param("batch_size"), Some("32"));
/// assert_eq!(d.children().map(|(key, child)| (key, child.name())).collect::<Vec<_>>(), [("source", "IterableWrapper")]);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Description {
    /// The node's type name, without generic arguments.
    name: String,
    /// Order-affecting parameters, as `(name, rendered value)`, in the order
    /// they were added.
    #[serde(with = "entries")]
    params: Vec<(String, String)>,
    /// Children, as `(where the child's state lives in this node's state,
    /// description)`: a key (`source`), or a `/`-separated path for a child
    /// nested deeper (`dataset_node_states/books`). Paths in shape mismatch
    /// errors are built from these, so they point into the state.
    #[serde(with = "entries")]
    children: Vec<(String, Description)>,
    /// What the node's state promises ([`Resume`]): saved, so that a state
    /// can be resharded offline, but neither compared nor fingerprinted (it
    /// follows from the node, not from its configuration).
    #[serde(default, skip_serializing_if = "Resume::is_replays")]
    resume: Resume,
    /// What this node is to its parent, where that is not its key (a
    /// threaded node's `snapshot` is its `source`): shown by the text and
    /// DOT renderings only, so it is neither saved nor compared.
    #[serde(skip)]
    role: Option<String>,
    /// Live counts of the node's pass, for [`Description::progress`]: not
    /// saved, shown or compared.
    #[serde(skip)]
    pub(crate) tallies: Vec<Arc<dyn Tally>>,
}

/// Equal names, parameters and children (keys included); roles are
/// presentation and do not count.
impl PartialEq for Description {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.params == other.params && self.children == other.children
    }
}

impl Eq for Description {}

impl Description {
    /// A description with no parameters and no children.
    pub fn new(name: impl Into<String>) -> Self {
        Description {
            name: name.into(),
            params: Vec::new(),
            children: Vec::new(),
            resume: Resume::Replays,
            role: None,
            tallies: Vec::new(),
        }
    }

    /// Records what the node's state promises (see [`Resume`]); a node's
    /// `describe` records what its [`Stateful::resume`](crate::Stateful::resume)
    /// returns (`#[derive(Node)]` does).
    pub fn with_resume(mut self, resume: Resume) -> Self {
        self.resume = resume;
        self
    }

    /// What the node's state promises, as recorded by
    /// [`with_resume`](Description::with_resume).
    pub fn resume(&self) -> &Resume {
        &self.resume
    }

    /// Adds a parameter, rendered by its [`Param`] implementation.
    pub fn param(mut self, name: impl Into<String>, value: impl Param) -> Self {
        self.params.push((name.into(), value.to_param_string()));
        self
    }

    /// Adds a child under `key` (the key its state is nested under).
    pub fn child(mut self, key: impl Into<String>, child: Description) -> Self {
        self.children.push((key.into(), child));
        self
    }

    /// Adds a child under `key` that plays `role` for this node, when the
    /// two differ: the renderings show the role first and the key after
    /// it (`source: Mapper  [state: snapshot]`); the fingerprint and the
    /// JSON see only the key.
    ///
    /// ```
    /// use nodes_core::Description;
    ///
    /// let d = Description::new("Prefetcher")
    ///     .child_as("source", "snapshot", Description::new("Mapper"));
    /// assert_eq!(d.render_text(), "Prefetcher\n  source: Mapper  [state: snapshot]\n");
    /// assert_eq!(d, Description::new("Prefetcher").child("snapshot", Description::new("Mapper")));
    /// ```
    pub fn child_as(
        self,
        role: impl Into<String>,
        key: impl Into<String>,
        mut child: Description,
    ) -> Self {
        let (role, key) = (role.into(), key.into());
        child.role = Some(role).filter(|role| *role != key);
        self.child(key, child)
    }

    /// The node's type name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parameters, as `(name, rendered value)`, in the order they were added.
    pub fn params(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.params.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The rendered value of the parameter `name`, if there is one.
    pub fn get_param(&self, name: &str) -> Option<&str> {
        self.params().find(|&(k, _)| k == name).map(|(_, v)| v)
    }

    /// The children, as `(key, description)`, where the key is where the
    /// child's state lives in this node's state.
    pub fn children(&self) -> impl ExactSizeIterator<Item = (&str, &Description)> + '_ {
        self.children.iter().map(|(k, c)| (k.as_str(), c))
    }

    /// This description and every one below it, depth first: each parent
    /// before its children, children in order. Walked with a stack rather
    /// than by recursion: a pipeline may nest thousands of levels deep.
    pub fn subtree(&self) -> impl Iterator<Item = &Description> + '_ {
        let mut open = vec![self];
        std::iter::from_fn(move || {
            let desc = open.pop()?;
            open.extend(desc.children.iter().rev().map(|(_, child)| child));
            Some(desc)
        })
    }

    /// The child under `key`, if there is one.
    pub fn get_child(&self, key: &str) -> Option<&Description> {
        self.children.iter().find(|(k, _)| k == key).map(|(_, c)| c)
    }

    /// An indented tree, one node per line: `role: Name(param=value, ...)`,
    /// followed by `[state: key]` where the child's state key is not its
    /// role.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        self.write_text(&mut out, None, 0);
        out
    }

    fn write_text(&self, out: &mut String, key: Option<&str>, depth: usize) {
        let indent = "  ".repeat(depth);
        let _ = match (&self.role, key) {
            (Some(role), Some(key)) => writeln!(out, "{indent}{role}: {self}  [state: {key}]"),
            (None, Some(key)) => writeln!(out, "{indent}{key}: {self}"),
            (_, None) => writeln!(out, "{indent}{self}"),
        };
        for (key, child) in &self.children {
            child.write_text(out, Some(key), depth + 1);
        }
    }
}

/// The node's one-line label: `Name(param=value, ...)`, or `Name` without parameters.
impl Display for Description {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        for (i, (k, v)) in self.params.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { "(" } else { ", " })?;
        }
        if !self.params.is_empty() {
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl Description {
    /// The tree as Graphviz DOT: one box per node (`Name(params)`), edges
    /// labelled with the child's role (and its state key where that
    /// differs).
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph pipeline {\n  rankdir=BT;\n  node [shape=box];\n");
        self.write_dot(&mut out, &mut 0);
        out.push_str("}\n");
        out
    }

    fn write_dot(&self, out: &mut String, next_id: &mut usize) -> usize {
        let id = *next_id;
        *next_id += 1;
        let _ = writeln!(out, "  n{id} [label={}];", dot_quote(&self.to_string()));
        for (key, child) in &self.children {
            let child_id = child.write_dot(out, next_id);
            let label = match &child.role {
                Some(role) => format!("{role} [state: {key}]"),
                None => key.clone(),
            };
            let _ = writeln!(out, "  n{child_id} -> n{id} [label={}];", dot_quote(&label));
        }
        id
    }

    /// The tree as JSON: `{"name": ..., "params": {name: value, ...},
    /// "children": {key: {...}, ...}}`, the form every checkpoint records
    /// under `pipeline` (it reads back with serde: `Description` implements
    /// `Deserialize`).
    pub fn to_json(&self) -> serde_json::Value {
        // Cannot fail: every key and value is a string.
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The tree as a state holding what [`Description::to_json`] writes
    /// (same keys, same order): a loader keeps its pipeline's description
    /// in this form.
    pub(crate) fn to_state(&self) -> crate::State {
        // A JSON object, so it always converts.
        crate::State::from_value(self.to_json()).unwrap_or_default()
    }

    /// A 64-bit fingerprint of the structure: FNV-1a over the compact JSON of
    /// [`to_json`](Description::to_json) (names, parameters as [`Param`]
    /// renders them, child keys, in order). Nothing in it comes from `Debug`,
    /// so it stays the same across Rust and crate versions.
    pub(crate) fn fingerprint(&self) -> u64 {
        let canonical = serde_json::to_string(&self.without_resume()).unwrap_or_default();
        crate::Fnv1a64::hash(canonical.as_bytes())
    }

    /// A copy with every node's resume capability left out, as the
    /// fingerprint sees it.
    fn without_resume(&self) -> Description {
        let mut bare = self.clone();
        let mut open = vec![&mut bare];
        while let Some(node) = open.pop() {
            node.resume = Resume::Replays;
            open.extend(node.children.iter_mut().map(|(_, child)| child));
        }
        bare
    }

    /// Where `self` (the pipeline a state came from) and `other` (the pipeline
    /// it is offered to) first differ, as `(path, message)`; `None` if they
    /// have the same shape.
    #[cfg(test)]
    pub(crate) fn first_difference(&self, other: &Description) -> Option<(String, String)> {
        let (path, a, b) = first_differing_node(self, other, "")?;
        Some((path, difference(a, b)))
    }
}

/// How `a` (a node of the pipeline a state came from) differs from `b` (the
/// node at the same place in the pipeline it is offered to), as
/// [`first_differing_node`] found them.
pub(crate) fn difference(a: &Description, b: &Description) -> String {
    if (&a.name, &a.params) != (&b.name, &b.params) {
        return format!("state is from {a}, pipeline has {b}");
    }
    let keys = |d: &Description| d.children().map(|(k, _)| k).collect::<Vec<_>>().join(", ");
    let (mine, theirs) = (keys(a), keys(b));
    format!("{a} has children [{mine}] in the state, [{theirs}] in the pipeline")
}

/// The first node (depth first) where `a` and `b` differ in name, parameters
/// or child keys: its path below `path` (`/` for the root) and the two nodes.
pub fn first_differing_node<'a>(
    a: &'a Description,
    b: &'a Description,
    path: &str,
) -> Option<(String, &'a Description, &'a Description)> {
    let keys = |d: &'a Description| d.children.iter().map(|(k, _)| k);
    if (&a.name, &a.params) != (&b.name, &b.params) || keys(a).ne(keys(b)) {
        let at = if path.is_empty() { "/" } else { path };
        return Some((at.to_owned(), a, b));
    }
    a.children
        .iter()
        .zip(&b.children)
        .find_map(|((k, x), (_, y))| {
            first_differing_node(x, y, &crate::state::pointer_join(path, k))
        })
}

/// `(key, value)` pairs as a JSON object, in their order both ways (a map
/// type would sort them or need another dependency).
mod entries {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
    use serde::ser::{Serialize, Serializer};

    pub(super) fn serialize<T: Serialize, S: Serializer>(
        entries: &[(String, T)],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_map(entries.iter().map(|(key, value)| (key, value)))
    }

    pub(super) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<(String, T)>, D::Error> {
        struct Entries<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for Entries<T> {
            type Value = Vec<(String, T)>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(out)
            }
        }

        deserializer.deserialize_map(Entries(PhantomData))
    }
}

fn dot_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_form_holds_what_the_json_form_writes() {
        let wide = (0..20).fold(
            Description::new("Mix")
                .param("w", "1")
                .param("a", 2u32)
                .param("w", "3"),
            |d, i| d.child(format!("dataset_node_states/s{i}"), chain(i)),
        );
        for desc in [Description::new("Leaf"), chain(4), wide] {
            let direct = desc.to_state();
            let via_json = crate::State::from_value(desc.to_json()).unwrap();
            assert_eq!(direct.to_value(), desc.to_json());
            assert_eq!(direct, via_json);
            // Same keys in the same order, hence the same checkpoint text.
            assert_eq!(direct.to_json().unwrap(), via_json.to_json().unwrap());
        }
    }

    fn chain(batch: u32) -> Description {
        Description::new("Batcher")
            .param("batch_size", batch)
            .child(
                "source",
                Description::new("Mapper").child("source", Description::new("IterableWrapper")),
            )
    }

    /// The capability is saved and read back, in the JSON and the state
    /// form alike, but two descriptions that differ only in it are the same
    /// pipeline: it follows from the nodes, not their configuration.
    #[test]
    fn the_resume_capability_is_saved_but_not_compared() {
        use crate::Resume;
        let plain = chain(4);
        let marked = Description::new("Batcher")
            .param("batch_size", 4)
            .with_resume(Resume::Groups(4))
            .child(
                "source",
                Description::new("Mapper")
                    .with_resume(Resume::ForwardsCount)
                    .child(
                        "source",
                        Description::new("IterableWrapper")
                            .with_resume(Resume::CountsItems("num_yielded".into())),
                    ),
            );
        assert_eq!(marked, plain);
        assert_eq!(marked.fingerprint(), plain.fingerprint());
        let json = marked.to_json();
        assert_eq!(json["resume"], serde_json::json!({"groups": 4}));
        assert!(
            plain.to_json().get("resume").is_none(),
            "the default is not written"
        );
        let back: Description = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back.resume(), &Resume::Groups(4));
        assert_eq!(
            back.counted_path(),
            None,
            "a batch is not one item per item"
        );
        let map = back.get_child("source").unwrap();
        assert_eq!(
            map.counted_path(),
            Some(vec!["source".to_owned(), "num_yielded".to_owned()])
        );
        assert_eq!(marked.to_state().to_value(), json);
    }

    #[test]
    fn same_shape_has_no_difference_and_the_same_fingerprint() {
        assert_eq!(chain(32).first_difference(&chain(32)), None);
        assert_eq!(chain(32).fingerprint(), chain(32).fingerprint());
        assert_ne!(chain(32).fingerprint(), chain(64).fingerprint());
    }

    #[test]
    fn changed_parameter_is_named_at_its_node() {
        let (path, msg) = chain(32).first_difference(&chain(64)).unwrap();
        assert_eq!(path, "/");
        assert_eq!(
            msg,
            "state is from Batcher(batch_size=32), pipeline has Batcher(batch_size=64)"
        );
    }

    #[test]
    fn inserted_and_removed_nodes_are_found_where_the_chains_part() {
        let inserted = Description::new("Batcher").param("batch_size", 32).child(
            "source",
            Description::new("Filter").child(
                "source",
                Description::new("Mapper").child("source", Description::new("IterableWrapper")),
            ),
        );
        let (path, msg) = chain(32).first_difference(&inserted).unwrap();
        assert_eq!(path, "/source");
        assert_eq!(msg, "state is from Mapper, pipeline has Filter");
        let removed = Description::new("Batcher")
            .param("batch_size", 32)
            .child("source", Description::new("IterableWrapper"));
        let (path, _) = chain(32).first_difference(&removed).unwrap();
        assert_eq!(path, "/source");
    }

    #[test]
    fn reordered_children_are_reported() {
        let a = Description::new("Mix")
            .child("a", Description::new("X"))
            .child("b", Description::new("Y"));
        let b = Description::new("Mix")
            .child("b", Description::new("Y"))
            .child("a", Description::new("X"));
        let (path, msg) = a.first_difference(&b).unwrap();
        assert_eq!(path, "/");
        assert_eq!(
            msg,
            "Mix has children [a, b] in the state, [b, a] in the pipeline"
        );
    }

    #[test]
    fn renders_as_text_dot_and_json_and_parses_back() {
        let d = chain(8);
        assert_eq!(
            d.render_text(),
            "Batcher(batch_size=8)\n  source: Mapper\n    source: IterableWrapper\n"
        );
        let dot = d.to_dot();
        assert!(dot.starts_with("digraph pipeline {"), "{dot}");
        assert!(
            dot.contains("n0 [label=\"Batcher(batch_size=8)\"];"),
            "{dot}"
        );
        assert!(dot.contains("n1 -> n0 [label=\"source\"];"), "{dot}");
        let json = d.to_json();
        assert_eq!(json["params"]["batch_size"], "8");
        let parsed: Description = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(parsed, d);
        assert_eq!(parsed.first_difference(&d), None);
        let (path, msg) = parsed.first_difference(&chain(9)).unwrap();
        assert_eq!(
            (path.as_str(), msg.as_str()),
            (
                "/",
                "state is from Batcher(batch_size=8), pipeline has Batcher(batch_size=9)"
            )
        );
        assert_eq!(
            serde_json::from_value::<Description>(json.clone()).unwrap(),
            d
        );
        assert!(serde_json::from_value::<Description>(serde_json::json!([1])).is_err());
        for bad in [
            serde_json::json!({"name": "A", "params": {}}),
            serde_json::json!({"name": "A", "params": {"x": 1}, "children": {}}),
            serde_json::json!({"name": "A", "params": [], "children": {}}),
            serde_json::json!({"name": "A", "params": {}, "children": {}, "extra": 1}),
        ] {
            assert!(
                serde_json::from_value::<Description>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn parameters_and_children_keep_their_order_through_json() {
        let d = Description::new("Mix")
            .param("zeta", 1)
            .param("alpha", 2)
            .child("z", Description::new("Z"))
            .child("a", Description::new("A"));
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(
            json,
            r#"{"name":"Mix","params":{"zeta":"1","alpha":"2"},"children":{"z":{"name":"Z","params":{},"children":{}},"a":{"name":"A","params":{},"children":{}}}}"#
        );
        assert_eq!(serde_json::from_str::<Description>(&json).unwrap(), d);
    }

    /// The fingerprint is part of every checkpoint: a change here makes every
    /// saved state unloadable, so it is pinned (and a change to it needs a new
    /// loader state format).
    #[test]
    fn the_fingerprint_is_pinned() {
        // FNV-1a 64 of
        // {"name":"Batcher","params":{"batch_size":"32"},"children":{"source":{"name":"Mapper",...}}}
        assert_eq!(
            format!("{:016x}", chain(32).fingerprint()),
            "d9b2a9f039253a17"
        );
        // ... and of {"name":"IterableWrapper","params":{},"children":{}}.
        assert_eq!(
            format!("{:016x}", Description::new("IterableWrapper").fingerprint()),
            "5991b0e4fe1d9ede"
        );
    }
}
