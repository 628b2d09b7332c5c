//! Arithmetic on size hints (`(lower, Option<upper>)`, see
//! [`Stateful::size_hint`](crate::Stateful::size_hint)): saturating lower
//! bounds, upper bounds that become "unknown" on overflow.

/// A size hint: a lower bound and, if known, an upper bound.
pub(crate) type Hint = (u64, Option<u64>);

/// Nothing known.
pub(crate) const UNKNOWN: Hint = (0, None);

/// Exactly `n` left.
pub(crate) fn exact(n: u64) -> Hint {
    (n, Some(n))
}

/// An [`Iterator::size_hint`] as a node's hint.
pub(crate) fn from_usize((lower, upper): (usize, Option<usize>)) -> Hint {
    (lower as u64, upper.map(|u| u as u64))
}

/// The hint of two streams one after the other.
pub(crate) fn add((l1, u1): Hint, (l2, u2): Hint) -> Hint {
    (
        l1.saturating_add(l2),
        u1.zip(u2).and_then(|(a, b)| a.checked_add(b)),
    )
}

/// At most `n` of the stream (a header).
pub(crate) fn take((lower, upper): Hint, n: u64) -> Hint {
    (lower.min(n), Some(upper.map_or(n, |u| u.min(n))))
}

/// Any number of the stream's items may be dropped (a filter).
pub(crate) fn at_most((_, upper): Hint) -> Hint {
    (0, upper)
}

/// The stream ends after at most one item once an error comes, if one may
/// (an error policy or a source that ends the pass at an error).
pub(crate) fn may_end_early((lower, upper): Hint, may_end: bool) -> Hint {
    if may_end {
        (lower.min(1), upper)
    } else {
        (lower, upper)
    }
}
