//! The keywords of `#[node(...)]`, in one place so messages stay uniform.

pub(crate) const NODE: &str = "node";

// Field roles.
pub(crate) const CHILD: &str = "child";
pub(crate) const CHILDREN: &str = "children";
pub(crate) const STATE: &str = "state";
pub(crate) const LAZY: &str = "lazy";
pub(crate) const PARAM: &str = "param";
pub(crate) const CONFIG: &str = "config";

// Field options.
pub(crate) const DEFAULT: &str = "default";
pub(crate) const RENAME: &str = "rename";
pub(crate) const DEFERRED: &str = "deferred";
pub(crate) const COUNTS_ITEMS: &str = "counts_items";

// Container options.
pub(crate) const CRATE: &str = "crate";
pub(crate) const VERSION: &str = "version";
pub(crate) const RENAME_ALL: &str = "rename_all";
pub(crate) const INIT: &str = "init";
pub(crate) const VALIDATE: &str = "validate";
pub(crate) const SIZE_HINT: &str = "size_hint";
pub(crate) const RESUME: &str = "resume";

/// The one value of `size_hint = "..."` and `counts_items = "..."`: take
/// the single child's hint or count.
pub(crate) const FROM_CHILD: &str = "child";

/// The state key a versioned node stores its version under (matches
/// `nodes_core::VERSION_KEY`).
pub(crate) const VERSION_KEY: &str = "version";
