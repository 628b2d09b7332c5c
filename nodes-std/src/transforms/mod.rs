//! Transforms: one child in, one stream out, on the caller's thread.
//! One node per file, flat, as `std::iter` adapters are.

pub(crate) mod batch;
pub(crate) mod cycle;
pub(crate) mod filter;
pub(crate) mod filter_map;
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
