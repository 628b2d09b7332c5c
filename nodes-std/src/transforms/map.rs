//! [`Mapper`] and [`TryMapper`]: apply a function to every item, in the
//! caller's thread.

use std::fmt;

use crate::policy::{Counts, ErrorPolicy, Verdict, is_bad_record, is_item};
use crate::transforms::debug_fields;
use crate::{BoxError, Cx, Error, Hint, Node, NodeId, NodeName, Result};

/// This struct is created by [`NodeExt::map`](crate::NodeExt::map). See its
/// documentation for more.
///
/// Applies a function to every item of its source.
///
/// The function runs in the caller's thread, once per item, in order. A
/// panic in it is not caught: it unwinds through `next` like a panic in an
/// `Iterator::map` closure. Use [`NodeExt::try_map`](crate::NodeExt::try_map)
/// for functions that can fail.
///
/// # State
/// `source`: the source's state. Restore is the source's restore; the
/// function is not re-run.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let items: Vec<u32> = IterableWrapper::new(1..4u32).map(|x| x * 10).start()?.collect::<Result<_>>()?;
/// assert_eq!(items, [10, 20, 30]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(size_hint, counts_items = "child")]
#[must_use = "nodes do nothing until started"]
pub struct Mapper<S, F> {
    #[node(child)]
    source: S,
    #[node(config)]
    f: F,
}

crate::transforms::debug_source!(Mapper);

impl<S, F> Mapper<S, F> {
    pub(crate) fn new(source: S, f: F) -> Self {
        Mapper { source, f }
    }
}

impl<S, F, U> Node for Mapper<S, F>
where
    S: Node,
    F: FnMut(S::Item) -> U + Send,
{
    type Item = U;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            Ok(self.source.next(cx)?.map(&mut self.f))
        })
    }
}

/// This struct is created by [`NodeExt::try_map`](crate::NodeExt::try_map).
/// See its documentation for more.
///
/// Applies a fallible function to every item of its source.
///
/// # Errors
/// An `Err` from the function is [`Error::User`] naming `TryMapper` and the
/// item's index in this pass (counting from 0, bad records from the source
/// included). Such an error, or a bad record from the source
/// ([`Error::User`], [`Error::Panicked`]), is one item of the pass, and what
/// happens to it is the node's [`ErrorPolicy`] (set with
/// [`on_error`](TryMapper::on_error)):
/// - [`Deliver`](ErrorPolicy::Deliver) (the default): returned; the next call
///   maps the next item;
/// - [`Fail`](ErrorPolicy::Fail): returned, then the pass is over (`Ok(None)`
///   until the next reset);
/// - [`Skip`](ErrorPolicy::Skip): dropped, and counted in
///   [`NodeStats::skipped`](crate::NodeStats::skipped);
/// - [`SkipAtMost(n)`](ErrorPolicy::SkipAtMost): the first `n` of the pass
///   dropped (and counted), the next returned, ending the pass.
///
/// Other errors from the source (a pipeline that cannot go on) are returned
/// as they are, whatever the policy. A panic in the function is not caught.
///
/// # State
/// `source`: the source's state; `num_seen`: items taken from the source
/// this pass (the index reported with an error); `errors`: the policy's
/// count, `{"skipped": bad records dropped this pass, "ended": whether the
/// policy ended the pass}` (so a resume neither forgets nor double-counts a
/// skip). Restore is the source's restore.
///
/// ```
/// use nodes_std::prelude::*;
///
/// let mut running = IterableWrapper::new(["1", "x", "3"])
///     .try_map(|s: &str| s.parse::<u32>())
///     .start()?;
/// assert_eq!(running.next().transpose()?, Some(1));
/// let err = running.next().unwrap().unwrap_err();
/// assert_eq!(err.to_string(), "user function failed in TryMapper at item 1: invalid digit found in string");
/// assert_eq!(running.next().transpose()?, Some(3));
///
/// let skipped: Vec<u32> = IterableWrapper::new(["1", "x", "3"])
///     .try_map(|s: &str| s.parse::<u32>())
///     .on_error(ErrorPolicy::Skip)
///     .start()?
///     .collect::<Result<_>>()?;
/// assert_eq!(skipped, [1, 3]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Node)]
#[node(size_hint, resume = crate::Resume::Drops)]
#[must_use = "nodes do nothing until started"]
pub struct TryMapper<S, F> {
    #[node(child)]
    source: S,
    #[node(state)]
    num_seen: u64,
    /// Saved as a snapshot: taking a state copies the two counts.
    #[node(state, deferred)]
    errors: Counts,
    #[node(config)]
    policy: ErrorPolicy,
    #[node(config)]
    f: F,
}

impl<S: fmt::Debug, F> fmt::Debug for TryMapper<S, F> {
    debug_fields!("TryMapper", finish_non_exhaustive; source, num_seen, on_error = (policy));
}

impl<S, F> TryMapper<S, F> {
    pub(crate) fn new(source: S, f: F) -> Self {
        TryMapper {
            source,
            num_seen: 0,
            errors: Counts::default(),
            policy: ErrorPolicy::Deliver,
            f,
        }
    }

    /// Sets what happens to a bad record (an `Err` from the function, or a
    /// bad record from the source): see [`ErrorPolicy`]. The default is
    /// [`ErrorPolicy::Deliver`].
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let parse = |s: &str| s.parse::<u8>();
    /// let mut running = IterableWrapper::new(["1", "x", "3"]).try_map(parse).on_error(ErrorPolicy::Fail).start()?;
    /// assert_eq!(running.next().transpose()?, Some(1));
    /// assert!(running.next().unwrap().is_err());
    /// assert!(running.next().is_none()); // the pass is over
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    pub fn on_error(mut self, policy: ErrorPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The policy for bad records.
    pub fn error_policy(&self) -> ErrorPolicy {
        self.policy
    }
}

impl<S, F, U, E> Node for TryMapper<S, F>
where
    S: Node,
    F: FnMut(S::Item) -> std::result::Result<U, E> + Send,
    E: Into<BoxError>,
{
    type Item = U;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            loop {
                if self.errors.ended() {
                    return Ok(None);
                }
                let index = self.num_seen;
                let next = self.source.next(cx);
                if is_item(&next) {
                    // Saturating: a restored state may hold any count.
                    self.num_seen = index.saturating_add(1);
                }
                let error = match next {
                    Ok(Some(item)) => match (self.f)(item) {
                        Ok(out) => return Ok(Some(out)),
                        Err(e) => Error::user(Self::NAME, Some(index), e),
                    },
                    Ok(None) => return Ok(None),
                    Err(error) if is_bad_record(&error) => error,
                    Err(error) => return Err(error),
                };
                match self.errors.judge(self.policy, error, cx) {
                    Verdict::Deliver(error) | Verdict::DeliverAndEnd(error) => return Err(error),
                    Verdict::Skip => {}
                }
            }
        })
    }
}

/// One item per item of the source (its errors pass through, and the
/// function cannot fail): the source's hint.
impl<S: Node, F> crate::SizeHint for Mapper<S, F> {
    fn size_hint(&self) -> Hint {
        self.source.size_hint()
    }
}

/// The source's hint under the error policy: the function may fail on
/// any item, so a policy that skips or ends the pass loosens it.
impl<S: Node, F> crate::SizeHint for TryMapper<S, F> {
    fn size_hint(&self) -> Hint {
        self.errors
            .size_hint(self.policy, self.source.size_hint(), true)
    }
}
