//! Where a state sits in the checkpoint it was read from, for errors.
//!
//! A path is a chain of keys up to the root, shared with the parent, so
//! going one level down costs O(1) however deep the state is, and its text
//! is built only when asked for. Reading the children of a wide nested
//! state (a sampler's 10,000 sources) allocates nothing for their paths: a
//! child names its key by its position in the body its parent was read
//! from, which the parent's step keeps.

use std::sync::{Arc, OnceLock};

use super::{Body, count_work, push_pointer_token};

#[derive(Clone, Default)]
pub(super) enum Path {
    /// The checkpoint itself (`""`).
    #[default]
    Root,
    /// One key below a parent path, the key copied.
    Step(Arc<Step>),
    /// The key at `index` of the body `parent` kept: no allocation.
    Entry(EntryPath),
}

pub(super) struct Step {
    /// The parent's path.
    parent: Path,
    /// The key below the parent; `None` for an entry path's own step (the
    /// entry names the key).
    key: Option<Box<str>>,
    /// The body of a shared state at this path, kept once a child is read
    /// from it, so its children's paths can name their keys by position.
    body: OnceLock<Arc<Body>>,
    /// The full path, built on first use.
    text: OnceLock<String>,
}

pub(super) struct EntryPath {
    parent: Arc<Step>,
    index: usize,
    /// This path as a step of its own, made when its text or a child of
    /// the state at it is first asked for (once for all the children).
    step: OnceLock<Arc<Step>>,
}

impl Clone for EntryPath {
    fn clone(&self) -> Self {
        EntryPath {
            parent: Arc::clone(&self.parent),
            index: self.index,
            step: self.step.clone(),
        }
    }
}

impl Path {
    /// The path of `key` below this one. `shared` is where the key sits
    /// when the state at this path is shared: its body and the key's
    /// position there.
    pub(super) fn join(&self, key: &str, shared: Option<(&Arc<Body>, usize)>) -> Path {
        count_work(1);
        let Some(step) = self.step() else {
            return Path::Step(Step::new(Path::Root, Some(key)));
        };
        if let Some((body, index)) = shared {
            // The first child read keeps the body; a later state at this
            // path with other entries (written, then shared) copies keys.
            if Arc::ptr_eq(step.body.get_or_init(|| Arc::clone(body)), body) {
                return Path::Entry(EntryPath {
                    parent: Arc::clone(step),
                    index,
                    step: OnceLock::new(),
                });
            }
        }
        Path::Step(Step::new(Path::Step(Arc::clone(step)), Some(key)))
    }

    /// This path as a step (`None` at the root).
    fn step(&self) -> Option<&Arc<Step>> {
        match self {
            Path::Root => None,
            Path::Step(step) => Some(step),
            Path::Entry(entry) => Some(entry.step.get_or_init(|| {
                let at = Path::Entry(EntryPath {
                    parent: Arc::clone(&entry.parent),
                    index: entry.index,
                    step: OnceLock::new(),
                });
                Step::new(at, None)
            })),
        }
    }

    /// The path as text: `""` at the root, `/a/b` below it.
    pub(super) fn text(&self) -> &str {
        self.step().map_or("", |step| step.text())
    }
}

impl Step {
    /// A step below `parent`, `key` copied.
    fn new(parent: Path, key: Option<&str>) -> Arc<Step> {
        Arc::new(Step {
            parent,
            key: key.map(Box::from),
            body: OnceLock::new(),
            text: OnceLock::new(),
        })
    }

    fn text(&self) -> &str {
        self.text.get_or_init(|| {
            let mut text = String::new();
            write_step_text(&mut text, self);
            text
        })
    }
}

impl EntryPath {
    fn key(&self) -> &str {
        let body = self
            .parent
            .body
            .get()
            .expect("an entry path's parent keeps the body it names");
        &body.entries[self.index].0
    }
}

/// Writes the path of `step` top-down, walking up first (no recursion: a
/// path may be deeper than the stack allows).
fn write_step_text(out: &mut String, mut step: &Step) {
    let mut keys = Vec::new();
    loop {
        if let Some(key) = &step.key {
            keys.push(&**key);
        }
        step = match &step.parent {
            Path::Root => break,
            Path::Step(parent) => parent,
            Path::Entry(entry) => {
                keys.push(entry.key());
                &entry.parent
            }
        };
    }
    for key in keys.iter().rev() {
        push_pointer_token(out, key);
    }
}

/// Drops a long chain of otherwise unused parents without recursion.
impl Drop for Step {
    fn drop(&mut self) {
        let mut next = take_parent(&mut self.parent);
        while let Some(step) = next {
            next = Arc::into_inner(step).and_then(|mut step| take_parent(&mut step.parent));
        }
    }
}

/// The step above `path`, taken out of it.
fn take_parent(path: &mut Path) -> Option<Arc<Step>> {
    match std::mem::take(path) {
        Path::Root => None,
        Path::Step(step) => Some(step),
        Path::Entry(entry) => Some(entry.parent),
    }
}
