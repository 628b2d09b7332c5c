//! [`Cycler`]: restart the source whenever it ends.

use crate::policy::is_item;
use crate::transforms::require;
use crate::{Cx, Hint, Node, NodeId, NodeName, Result};

/// This struct is created by [`NodeExt::cycle`](crate::NodeExt::cycle)
/// (endless) and [`NodeExt::cycle_n`](crate::NodeExt::cycle_n) (at most `n`
/// passes over the source). See their documentation for more.
///
/// Repeats its source: when the source ends, it is reset and read again.
///
/// Each restart is a `reset(None)` of the source, i.e. a new epoch of it (a
/// [`SamplerWrapper`](crate::SamplerWrapper) or a
/// [`Shuffler`](crate::Shuffler) below gives a new order each pass). A
/// source that is empty from the start yields nothing and is not restarted;
/// a source that is empty after a restart ends the cycler (no busy loop).
/// Once the cycler ends, it stays ended, without touching the source, until
/// its next reset.
///
/// # Errors
/// Errors from the source are returned as they come. A bad record
/// ([`Error::User`](crate::Error::User),
/// [`Error::Panicked`](crate::Error::Panicked)) is an item of the pass: a source
/// that yields only errors is not empty, and is restarted like any other
/// (endlessly, for [`cycle`](crate::NodeExt::cycle)).
///
/// # State
/// `source`, `num_cycles` (restarts so far this pass), `has_started`
/// (whether the source ever yielded this pass) and `ended` (the source was
/// empty after a restart). Restore is the source's restore. Unlike
/// torchdata, `max_cycles` is configuration, not state (the value given to
/// the constructor applies after a restore), and there is no `num_yielded`
/// counter (not needed to resume; it would cost a store per item).
///
/// ```
/// use nodes_std::prelude::*;
///
/// let items: Vec<u32> = IterableWrapper::new(0..3u32).cycle_n(2)?.start()?.collect::<Result<_>>()?;
/// assert_eq!(items, [0, 1, 2, 0, 1, 2]);
///
/// let endless: Vec<u32> = IterableWrapper::new(0..3u32).cycle().header(7).start()?.collect::<Result<_>>()?;
/// assert_eq!(endless, [0, 1, 2, 0, 1, 2, 0]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
#[derive(Debug, Node)]
#[node(size_hint)]
#[must_use = "nodes do nothing until started"]
pub struct Cycler<S> {
    #[node(child)]
    source: S,
    #[node(state)]
    num_cycles: u64,
    #[node(state)]
    has_started: bool,
    /// Latched when the source was empty right after a restart, so that the
    /// end does not keep resetting the source.
    #[node(state)]
    ended: bool,
    #[node(param)]
    max_cycles: Option<u64>,
}

impl<S> Cycler<S> {
    pub(crate) fn endless(source: S) -> Self {
        Cycler {
            source,
            num_cycles: 0,
            has_started: false,
            max_cycles: None,
            ended: false,
        }
    }

    pub(crate) fn with_max_cycles(source: S, max_cycles: u64) -> Result<Self> {
        let why = "max_cycles must be at least 1 (the number of passes over the source)";
        require(max_cycles > 0, "Cycler", why)?;
        Ok(Cycler {
            max_cycles: Some(max_cycles),
            ..Cycler::endless(source)
        })
    }

    /// Times the source was restarted (or found ended) this pass: after 12
    /// items over a 5-item source, 2.
    pub fn num_cycles(&self) -> u64 {
        self.num_cycles
    }

    fn exhausted(&self) -> bool {
        self.ended || self.max_cycles.is_some_and(|max| self.num_cycles >= max)
    }
}

impl<S: Node> Node for Cycler<S> {
    type Item = S::Item;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            if self.exhausted() {
                return Ok(None);
            }
            let first = self.source.next(cx);
            // A bad record is an item too: the source is not empty.
            self.has_started |= is_item(&first);
            if !matches!(first, Ok(None)) || !self.has_started {
                return first;
            }
            // Saturating: a restored state may hold any count.
            self.num_cycles = self.num_cycles.saturating_add(1);
            if self.exhausted() {
                return Ok(None);
            }
            self.source.reset(None)?;
            let item = self.source.next(cx)?;
            // The source is empty after a restart: end for good this pass.
            self.ended = item.is_none();
            Ok(item)
        })
    }
}

/// At least what is left of the source's current pass. The passes after it
/// are not known before they start (the source's hint is of its current
/// pass), so there is an upper bound only in the last pass of `cycle_n`, or
/// when the source turns out empty.
impl<S: Node> crate::SizeHint for Cycler<S> {
    fn size_hint(&self) -> Hint {
        if self.exhausted() {
            return Hint::exact(0);
        }
        let source = self.source.size_hint();
        let last_pass = self
            .max_cycles
            .is_some_and(|max| self.num_cycles.saturating_add(1) >= max);
        // An empty source that never yielded ends the pass instead of restarting.
        let empty = !self.has_started && source.upper == Some(0);
        let upper = source.upper.filter(|_| last_pass || empty);
        Hint { upper, ..source }
    }
}
