//! Ranks: the one home of "rank `r` of `world_size`", its validation and its
//! reading from the launcher's environment. Every node that splits work by
//! rank (`Sharder`, `ShardedSampler`, the weighted sampler's streams) takes
//! `u64`s and checks them here, so the rules and the wording are the same.

use nodes_core::{Error, Result};

/// A validated `rank < world_size` pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rank {
    pub(crate) rank: u64,
    pub(crate) world_size: u64,
}

impl Rank {
    /// Rank 0 of 1: a single process.
    pub(crate) const SINGLE: Rank = Rank {
        rank: 0,
        world_size: 1,
    };

    /// Checks `rank < world_size` (so `world_size >= 1`); `node` names the
    /// caller in the error.
    pub(crate) fn new(node: &'static str, rank: u64, world_size: u64) -> Result<Rank> {
        crate::transforms::require(world_size > 0, node, "world_size must be at least 1")?;
        if rank >= world_size {
            let why = format!("rank {rank} is not below world_size {world_size}");
            return Err(Error::invalid_argument(node, why));
        }
        Ok(Rank { rank, world_size })
    }

    /// The launcher's `RANK`/`WORLD_SIZE`, or [`Rank::SINGLE`] when neither
    /// is set.
    pub(crate) fn from_env() -> Result<Rank> {
        let read = |name: &str| {
            let value = std::env::var_os(name).map(|v| v.into_string()).transpose();
            let why = || format!("{name} is not valid unicode");
            value.map_err(|_| Error::invalid_argument(FROM_ENV, why()))
        };
        Rank::parse(read("RANK")?.as_deref(), read("WORLD_SIZE")?.as_deref())
    }

    /// The rules of [`Rank::from_env`] on given values of `RANK` and
    /// `WORLD_SIZE`.
    fn parse(rank: Option<&str>, world_size: Option<&str>) -> Result<Rank> {
        let number = |name: &str, v: &str| -> Result<u64> {
            v.trim().parse().map_err(|_| {
                Error::invalid_argument(FROM_ENV, format!("{name}={v:?} is not a number"))
            })
        };
        match (rank, world_size) {
            (None, None) => Ok(Rank::SINGLE),
            (Some(r), Some(w)) => {
                let (rank, world_size) = (number("RANK", r)?, number("WORLD_SIZE", w)?);
                Rank::new(FROM_ENV, rank, world_size).map_err(|_| {
                    let why = format!("RANK={rank} is not below WORLD_SIZE={world_size}");
                    Error::invalid_argument(FROM_ENV, why)
                })
            }
            _ => Err(Error::invalid_argument(
                FROM_ENV,
                "RANK and WORLD_SIZE must be set together",
            )),
        }
    }
}

const FROM_ENV: &str = "rank_from_env";

/// Reads the launcher's `RANK` and `WORLD_SIZE` environment variables (as set
/// by `torchrun` and most launchers); `(0, 1)` when neither is set.
///
/// ```
/// let (rank, world_size) = nodes_std::rank_from_env()?;
/// assert!(rank < world_size);
/// # Ok::<(), nodes_std::Error>(())
/// ```
///
/// # Errors
/// One variable set without the other, or a value that is not a number, or a
/// rank not below the world size, is `Error::InvalidArgument`.
pub fn rank_from_env() -> Result<(u64, u64)> {
    let Rank { rank, world_size } = Rank::from_env()?;
    Ok((rank, world_size))
}

#[cfg(test)]
mod tests {
    use super::Rank;

    #[test]
    fn launcher_variables() {
        assert_eq!(Rank::parse(None, None).unwrap(), Rank::SINGLE);
        assert_eq!(
            Rank::parse(Some("3"), Some(" 8 ")).unwrap(),
            Rank {
                rank: 3,
                world_size: 8
            }
        );
        for (r, w, needle) in [
            (Some("8"), Some("8"), "RANK=8 is not below WORLD_SIZE=8"),
            (Some("1"), Some("0"), "RANK=1 is not below WORLD_SIZE=0"),
            (Some("x"), Some("8"), "RANK=\"x\" is not a number"),
            (Some("1"), None, "must be set together"),
            (None, Some("2"), "must be set together"),
        ] {
            let err = Rank::parse(r, w).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn one_wording_for_every_node() {
        let zero = Rank::new("Sharder", 0, 0).unwrap_err().to_string();
        assert!(zero.contains("Sharder") && zero.contains("world_size must be at least 1"));
        let past = Rank::new("ShardedSampler", 4, 4).unwrap_err().to_string();
        assert!(
            past.contains("ShardedSampler") && past.contains("rank 4 is not below world_size 4")
        );
        assert!(Rank::new("x", 3, 4).is_ok());
    }
}
