//! Transforms: one child in, one stream out, on the caller's thread.
//! One node per file (a filter and a filter-map share one), flat, as
//! `std::iter` adapters are.

pub(crate) mod batch;
pub(crate) mod cycle;
pub(crate) mod filter;
pub(crate) mod flat_map;
pub(crate) mod header;
pub(crate) mod map;
pub(crate) mod pack;
pub(crate) mod shard;
pub(crate) mod shuffle;
pub(crate) mod unbatch;

/// `Ok(())` if `ok`, else the [`Error::InvalidArgument`](crate::Error::InvalidArgument)
/// of a constructor of `node`: the one check most constructors make.
pub(crate) fn require(ok: bool, node: &'static str, message: &'static str) -> crate::Result<()> {
    if ok {
        return Ok(());
    }
    Err(crate::Error::invalid_argument(node, message))
}

/// The `fmt` of a node's hand-written `Debug`, which leaves out closures
/// and buffers (as itertools' `debug_fmt_fields` does): the struct `$name`,
/// each `field` as `self.field`, each `label = (path)` as `self.path` (a
/// field of a field, a count) and each `label = {expr}` as `expr` (which
/// cannot name `self`), ended by `finish` or `finish_non_exhaustive`.
macro_rules! debug_fields {
    ($name:expr, $finish:ident $(; $($field:ident $(= $value:tt)?),* $(,)?)?) => {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct($name)
                $($(.field(
                    stringify!($field),
                    &$crate::transforms::debug_fields!(@ self $field $($value)?),
                ))*)?
                .$finish()
        }
    };
    (@ $this:ident $field:ident) => {
        $this.$field
    };
    (@ $this:ident $field:ident ($($path:tt)+)) => {
        $this.$($path)+
    };
    (@ $this:ident $field:ident $value:block) => {
        $value
    };
}
pub(crate) use debug_fields;

/// `Debug` for a node over a closure `F`: its source, nothing of the closure.
macro_rules! debug_source {
    ($ty:ident) => {
        impl<S: std::fmt::Debug, F> std::fmt::Debug for $ty<S, F> {
            $crate::transforms::debug_fields!(stringify!($ty), finish_non_exhaustive; source);
        }
    };
}
pub(crate) use debug_source;
