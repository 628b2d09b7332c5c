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
    /// Children, as `(key in the state, description)`.
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
