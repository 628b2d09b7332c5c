//! [`Sharder`]: keep every `world_size`-th item, for one rank of a
//! distributed job.

use std::fmt;

use crate::policy::is_bad_record;
use crate::{Cx, Error, Node, NodeId, NodeName, Result};

/// Keeps the items whose position `i` in the source satisfies
/// `i % world_size == rank`: the shards of all ranks are disjoint and together
/// cover the source.
///
/// This struct is created by [`NodeExt::shard`](crate::NodeExt::shard) and
/// [`NodeExt::shard_from_env`](crate::NodeExt::shard_from_env). See their
/// documentation for more.
///
/// # Errors
/// A bad record from the source ([`Error::User`], [`Error::Panicked`]) takes
/// a position like any item: the rank that owns the position returns it, the
/// others drop it (it belongs to another shard), and the positions after it
/// are sharded as if it had been an item. Any other error is returned at
/// once, on every rank, without taking a position.
///
/// # State
/// `source` (the source's state) and `seen` (items, bad records included,
/// read from the source). Restoring is the source's restore.
#[derive(crate::Node)]
#[must_use = "nodes do nothing until started"]
pub struct Sharder<S> {
    #[node(child)]
    source: S,
    #[node(param)]
    rank: u64,
    #[node(param)]
    world_size: u64,
    #[node(state)]
    seen: u64,
}

impl<S> fmt::Debug for Sharder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sharder")
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl<S> Sharder<S> {
    pub(crate) fn new(source: S, rank: u64, world_size: u64) -> Result<Self> {
        if world_size == 0 {
            return Err(Error::invalid_argument(
                "Sharder",
                "world_size must be at least 1",
            ));
        }
        if rank >= world_size {
            return Err(Error::invalid_argument(
                "Sharder",
                format!("rank {rank} is not below world_size {world_size}"),
            ));
        }
        Ok(Sharder {
            source,
            rank,
            world_size,
            seen: 0,
        })
    }
}

/// Reads the launcher's `RANK` and `WORLD_SIZE` environment variables (as set
/// by `torchrun` and most launchers); `(0, 1)` when neither is set.
///
/// # Errors
/// One variable set without the other, or a value that is not a number, or a
/// rank not below the world size, is `Error::InvalidArgument`.
pub fn rank_from_env() -> Result<(u64, u64)> {
    let read = |name: &str| match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::invalid_argument(
            "rank_from_env",
            format!("{name} is not valid unicode"),
        )),
        Ok(v) => Ok(Some(v)),
    };
    parse_rank(read("RANK")?.as_deref(), read("WORLD_SIZE")?.as_deref())
}

/// The rules of [`rank_from_env`] on given values of `RANK` and `WORLD_SIZE`.
fn parse_rank(rank: Option<&str>, world_size: Option<&str>) -> Result<(u64, u64)> {
    let number = |name: &str, v: &str| -> Result<u64> {
        v.trim().parse().map_err(|_| {
            Error::invalid_argument("rank_from_env", format!("{name}={v:?} is not a number"))
        })
    };
    match (rank, world_size) {
        (None, None) => Ok((0, 1)),
        (Some(r), Some(w)) => {
            let (rank, world) = (number("RANK", r)?, number("WORLD_SIZE", w)?);
            if rank < world {
                Ok((rank, world))
            } else {
                Err(Error::invalid_argument(
                    "rank_from_env",
                    format!("RANK={rank} is not below WORLD_SIZE={world}"),
                ))
            }
        }
        _ => Err(Error::invalid_argument(
            "rank_from_env",
            "RANK and WORLD_SIZE must be set together",
        )),
    }
}

impl<S: Node> Node for Sharder<S> {
    type Item = S::Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            loop {
                let item = match self.source.next(cx) {
                    Ok(Some(item)) => Ok(item),
                    Ok(None) => return Ok(None),
                    Err(error) if is_bad_record(&error) => Err(error),
                    Err(error) => return Err(error),
                };
                let position = self.seen;
                // Wrapping: a restored state may hold any count.
                self.seen = self.seen.wrapping_add(1);
                if position % self.world_size == self.rank {
                    return item.map(Some);
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::parse_rank;

    #[test]
    fn launcher_variables() {
        assert_eq!(parse_rank(None, None).unwrap(), (0, 1));
        assert_eq!(parse_rank(Some("3"), Some(" 8 ")).unwrap(), (3, 8));
        for (r, w, needle) in [
            (Some("8"), Some("8"), "RANK=8 is not below WORLD_SIZE=8"),
            (Some("x"), Some("8"), "RANK=\"x\" is not a number"),
            (Some("1"), None, "must be set together"),
            (None, Some("2"), "must be set together"),
        ] {
            let err = parse_rank(r, w).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }
}
