//! [`Hint`]: what a node knows of the rest of its pass (how many results
//! are left, and whether any may be an `Err`), and the arithmetic nodes use
//! to build theirs from their children's.

/// How many more results the current pass returns, and whether any may be
/// an `Err`: what [`Stateful::size_hint`](crate::Stateful::size_hint)
/// returns.
///
/// Every result counts, items and `Err`s alike (an error is one item of the
/// pass). A hint must be *sound*: the results left are never fewer than
/// `lower` nor more than `upper`, and none is an `Err` if `may_fail` is
/// `false`. [`Hint::UNKNOWN`] (also the [`Default`]) says nothing and is
/// always sound.
///
/// ```
/// use nodes_core::Hint;
///
/// // Three items read ahead, then a source of 5 to 10 that cannot fail.
/// let source = Hint { lower: 5, upper: Some(10), may_fail: false };
/// let hint = Hint::exact(3).then(source);
/// assert_eq!((hint.lower, hint.upper, hint.may_fail), (8, Some(13), false));
/// // A filter may drop any of them.
/// assert_eq!(hint.at_most().lower, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hint {
    /// At least this many results are left.
    pub lower: u64,
    /// At most this many results are left, if known.
    pub upper: Option<u64>,
    /// Whether any result left may be an `Err` (panics aside). `false` is a
    /// promise that none is: a node that groups items (a batcher, where a
    /// bad record is an extra item) can then give exact bounds.
    pub may_fail: bool,
}

impl Default for Hint {
    fn default() -> Self {
        Hint::UNKNOWN
    }
}

impl Hint {
    /// Nothing known: no lower bound, no upper bound, may fail.
    pub const UNKNOWN: Hint = Hint {
        lower: 0,
        upper: None,
        may_fail: true,
    };

    /// Exactly `n` results left, none of them an `Err`.
    pub const fn exact(n: u64) -> Hint {
        Hint {
            lower: n,
            upper: Some(n),
            may_fail: false,
        }
    }

    /// An [`Iterator::size_hint`], for a source whose items cannot fail.
    pub fn from_iterator((lower, upper): (usize, Option<usize>)) -> Hint {
        Hint {
            lower: lower as u64,
            upper: upper.map(|u| u as u64),
            may_fail: false,
        }
    }

    /// Two streams one after the other: bounds added (the upper one unknown
    /// on overflow), either may fail.
    pub fn then(self, other: Hint) -> Hint {
        Hint {
            lower: self.lower.saturating_add(other.lower),
            upper: self
                .upper
                .zip(other.upper)
                .and_then(|(a, b)| a.checked_add(b)),
            may_fail: self.may_fail || other.may_fail,
        }
    }

    /// At most `n` of the stream (a header).
    pub fn take(self, n: u64) -> Hint {
        Hint {
            lower: self.lower.min(n),
            upper: Some(self.upper.map_or(n, |u| u.min(n))),
            ..self
        }
    }

    /// Any number of the stream's results may be dropped (a filter).
    pub fn at_most(self) -> Hint {
        Hint { lower: 0, ..self }
    }
}

/// A node's bounds as [`Iterator::size_hint`] reports them: the lower bound
/// saturated at `usize::MAX`, no upper bound if it does not fit.
pub(crate) fn usize_bounds(lower: u64, upper: Option<u64>) -> (usize, Option<usize>) {
    let lower = usize::try_from(lower).unwrap_or(usize::MAX);
    (lower, upper.and_then(|u| usize::try_from(u).ok()))
}
