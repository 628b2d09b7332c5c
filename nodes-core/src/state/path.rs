//! Where a state sits in the checkpoint it was read from, for errors: a
//! chain of keys up to the root, shared with the parent, so going one level
//! down costs O(1) however deep the state is, and its text (a JSON Pointer)
//! is built only when asked for.

use std::sync::{Arc, OnceLock};

#[derive(Clone, Default)]
pub(super) struct Path(Option<Arc<Step>>);

struct Step {
    parent: Path,
    key: Box<str>,
    /// The full path, built on first use.
    text: OnceLock<String>,
}

impl Path {
    /// The path of `key` below this one.
    pub(super) fn join(&self, key: &str) -> Path {
        Path(Some(Arc::new(Step {
            parent: self.clone(),
            key: key.into(),
            text: OnceLock::new(),
        })))
    }

    /// The path as text: `""` at the root, `/a/b` below it.
    pub(super) fn text(&self) -> &str {
        let Some(step) = &self.0 else { return "" };
        step.text.get_or_init(|| {
            // Walked up first, then written top-down: no recursion.
            let up = std::iter::successors(Some(&**step), |step| step.parent.0.as_deref());
            let steps: Vec<&Step> = up.collect();
            steps
                .iter()
                .rev()
                .map(|step| pointer_token(&step.key))
                .collect()
        })
    }
}

/// Drops a long chain of otherwise unused parents without recursion.
impl Drop for Step {
    fn drop(&mut self) {
        let mut next = self.parent.0.take();
        while let Some(step) = next {
            next = Arc::into_inner(step).and_then(|mut step| step.parent.0.take());
        }
    }
}

/// `path` (a JSON Pointer, `""` at the root) extended by `key`.
///
/// Paths in errors are JSON Pointers (RFC 6901): a key's `~` is written `~0`
/// and its `/` `~1`, so a key such as `dataset_node_states/s0` (a sampler's
/// child in a pipeline description) names one key, not two levels.
pub fn pointer_join(path: &str, key: &str) -> String {
    path.to_owned() + &pointer_token(key)
}

/// `/` and `key`, escaped as a JSON Pointer token.
fn pointer_token(key: &str) -> String {
    format!("/{}", key.replace('~', "~0").replace('/', "~1"))
}
