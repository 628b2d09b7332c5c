//! [`Description`]: a node's self-portrait, for graphs and fingerprints.

use std::fmt::{self, Display, Write as _};

use serde::Serialize;

/// What a node is: its type name, the parameters that affect the order or
/// content of its output, and its children — available without running it.
///
/// `#[derive(Node)]` writes it from the annotated fields (`#[node(param)]`
/// fields become parameters); hand-written nodes build it with the builder
/// methods.
///
/// ```
/// use nodes_core::Description;
///
/// let d = Description::new("Batcher")
///     .param("batch_size", 32)
///     .child("source", Description::new("IterableWrapper"));
/// assert_eq!(d.to_string(), "Batcher(batch_size=32)");
/// assert_eq!(d.render_text(), "Batcher(batch_size=32)\n  source: IterableWrapper\n");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Description {
    /// The node's type name, without generic arguments.
    pub name: String,
    /// Order-affecting parameters, as `(name, rendered value)`.
    pub params: Vec<(String, String)>,
    /// Children, as `(where the child's state lives in this node's state,
    /// description)`: a key (`source`), or a `/`-separated path for a child
    /// nested deeper (`dataset_node_states/books`). Paths in shape mismatch
    /// errors are built from these, so they point into the state.
    pub children: Vec<(String, Description)>,
}

impl Description {
    /// A description with no parameters and no children.
    pub fn new(name: impl Into<String>) -> Self {
        Description {
            name: name.into(),
            params: Vec::new(),
            children: Vec::new(),
        }
    }

    /// Adds a parameter.
    pub fn param(mut self, name: impl Into<String>, value: impl Display) -> Self {
        self.params.push((name.into(), value.to_string()));
        self
    }

    /// Adds a child under `key` (the key its state is nested under).
    pub fn child(mut self, key: impl Into<String>, child: Description) -> Self {
        self.children.push((key.into(), child));
        self
    }

    /// An indented tree, one node per line: `key: Name(param=value, ...)`.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        self.write_text(&mut out, None, 0);
        out
    }

    fn write_text(&self, out: &mut String, key: Option<&str>, depth: usize) {
        let indent = "  ".repeat(depth);
        match key {
            Some(k) => {
                let _ = writeln!(out, "{indent}{k}: {self}");
            }
            None => {
                let _ = writeln!(out, "{indent}{self}");
            }
        }
        for (k, child) in &self.children {
            child.write_text(out, Some(k), depth + 1);
        }
    }
}

/// The node's one-line label: `Name(param=value, ...)`, or `Name` without parameters.
impl Display for Description {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.params.is_empty() {
            f.write_char('(')?;
            for (i, (k, v)) in self.params.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{k}={v}")?;
            }
            f.write_char(')')?;
        }
        Ok(())
    }
}

impl Description {
    /// The tree as Graphviz DOT: one box per node (`Name(params)`), edges
    /// labelled with the child's key.
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph pipeline {\n  rankdir=BT;\n  node [shape=box];\n");
        let mut next_id = 0usize;
        self.write_dot(&mut out, &mut next_id);
        out.push_str("}\n");
        out
    }

    fn write_dot(&self, out: &mut String, next_id: &mut usize) -> usize {
        let id = *next_id;
        *next_id += 1;
        let _ = writeln!(out, "  n{id} [label={}];", dot_quote(&self.to_string()));
        for (key, child) in &self.children {
            let child_id = child.write_dot(out, next_id);
            let _ = writeln!(out, "  n{child_id} -> n{id} [label={}];", dot_quote(key));
        }
        id
    }

    /// The tree as JSON: `{"name": ..., "params": {...}, "children": {key: ...}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let params: serde_json::Map<String, serde_json::Value> = self
            .params
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        let children: serde_json::Map<String, serde_json::Value> = self
            .children
            .iter()
            .map(|(k, c)| (k.clone(), c.to_json()))
            .collect();
        serde_json::json!({ "name": self.name, "params": params, "children": children })
    }

    /// Parses what [`Description::to_json`] wrote.
    pub fn from_json(value: &serde_json::Value, path: &str) -> crate::Result<Description> {
        let bad = |what: &str| {
            crate::Error::bad_state(path, format!("not a pipeline description: {what}"))
        };
        let obj = value.as_object().ok_or_else(|| bad("expected an object"))?;
        let name = obj
            .get("name")
            .and_then(|v| v.as_str())
            .ok_or_else(|| bad("missing `name`"))?;
        let mut d = Description::new(name);
        for (k, v) in obj
            .get("params")
            .and_then(|v| v.as_object())
            .ok_or_else(|| bad("missing `params`"))?
        {
            let v = v
                .as_str()
                .ok_or_else(|| bad("a parameter is not a string"))?;
            d.params.push((k.clone(), v.to_owned()));
        }
        for (k, v) in obj
            .get("children")
            .and_then(|v| v.as_object())
            .ok_or_else(|| bad("missing `children`"))?
        {
            d.children
                .push((k.clone(), Description::from_json(v, path)?));
        }
        Ok(d)
    }

    /// A stable 64-bit fingerprint of the structure (FNV-1a over the rendered
    /// tree: names, parameters, child keys, in order).
    pub fn fingerprint(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self.canonical().bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash
    }

    fn canonical(&self) -> String {
        let mut out = self.to_string();
        out.push('{');
        for (k, c) in &self.children {
            out.push_str(k);
            out.push(':');
            out.push_str(&c.canonical());
            out.push(';');
        }
        out.push('}');
        out
    }

    /// Parses what [`Description::render_text`] wrote. Each node's whole label
    /// (`Name(param=value, ...)`) becomes its `name`, with no separate
    /// parameters: enough to compare shapes and to name a node in a message.
    pub fn from_text(text: &str, path: &str) -> crate::Result<Description> {
        let bad = |line: usize, what: &str| {
            crate::Error::bad_state(
                path,
                format!("not a pipeline description (line {}): {what}", line + 1),
            )
        };
        // (depth, key, node) for the chain of ancestors of the current line.
        let mut stack: Vec<(usize, String, Description)> = Vec::new();
        let fold = |stack: &mut Vec<(usize, String, Description)>, depth: usize| {
            while stack.len() > depth + 1 {
                if let Some((_, key, node)) = stack.pop()
                    && let Some((_, _, parent)) = stack.last_mut()
                {
                    parent.children.push((key, node));
                }
            }
        };
        for (i, line) in text.lines().enumerate() {
            let body = line.trim_start_matches(' ');
            let indent = line.len() - body.len();
            if indent % 2 != 0 || body.is_empty() {
                return Err(bad(i, "bad indentation"));
            }
            let depth = indent / 2;
            if (i == 0) != (depth == 0) || depth > stack.len() {
                return Err(bad(i, "bad nesting"));
            }
            fold(&mut stack, depth.saturating_sub(1));
            if depth == 0 {
                stack.push((0, String::new(), Description::new(body)));
            } else {
                let (key, label) = body
                    .split_once(": ")
                    .ok_or_else(|| bad(i, "expected `key: label`"))?;
                stack.push((depth, key.to_owned(), Description::new(label)));
            }
        }
        fold(&mut stack, 0);
        stack
            .pop()
            .map(|(_, _, root)| root)
            .ok_or_else(|| bad(0, "empty"))
    }

    /// Where `self` (the pipeline a state came from) and `other` (the pipeline
    /// it is offered to) first differ, as `(path, message)`; `None` if they
    /// have the same shape.
    pub fn first_difference(&self, other: &Description) -> Option<(String, String)> {
        self.diff_at(other, "")
    }

    fn diff_at(&self, other: &Description, path: &str) -> Option<(String, String)> {
        let here = || {
            if path.is_empty() {
                "/".to_owned()
            } else {
                path.to_owned()
            }
        };
        // Compare the rendered labels, so a description parsed back from text
        // (where the label is the name) compares like the original.
        if self.to_string() != other.to_string() {
            return Some((
                here(),
                format!("state is from {self}, pipeline has {other}"),
            ));
        }
        let keys = |d: &Description| {
            d.children
                .iter()
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>()
        };
        let (mine, theirs) = (keys(self), keys(other));
        if mine != theirs {
            return Some((
                here(),
                format!(
                    "{self} has children [{}] in the state, [{}] in the pipeline",
                    mine.join(", "),
                    theirs.join(", ")
                ),
            ));
        }
        self.children
            .iter()
            .zip(&other.children)
            .find_map(|((k, a), (_, b))| a.diff_at(b, &format!("{path}/{k}")))
    }
}

fn dot_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(batch: u32) -> Description {
        Description::new("Batcher")
            .param("batch_size", batch)
            .child(
                "source",
                Description::new("Mapper").child("source", Description::new("IterableWrapper")),
            )
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
        assert_eq!(Description::from_json(&json, "/pipeline").unwrap(), d);
        assert!(Description::from_json(&serde_json::json!([1]), "/pipeline").is_err());
        let parsed = Description::from_text(&d.render_text(), "/pipeline").unwrap();
        assert_eq!(parsed.render_text(), d.render_text());
        assert_eq!(parsed.first_difference(&d), None);
        let (path, msg) = parsed.first_difference(&chain(9)).unwrap();
        assert_eq!(
            (path.as_str(), msg.as_str()),
            (
                "/",
                "state is from Batcher(batch_size=8), pipeline has Batcher(batch_size=9)"
            )
        );
        for bad in ["", " x", "A\nB", "A\n    b: C", "A\n  nokey"] {
            assert!(Description::from_text(bad, "/p").is_err(), "{bad:?}");
        }
    }
}
