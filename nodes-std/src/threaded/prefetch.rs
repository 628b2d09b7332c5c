//! [`Prefetcher`]: reads ahead of the consumer on a background thread.

use std::fmt;
use std::sync::Arc;

use nodes_core::{Cx, Node, NodeId, Result, Stateful};

use crate::delegate::delegate_stateful;
use crate::policy::ErrorPolicy;
use crate::threaded::adapt::{Adapt, Policy as AdaptPolicy};
use crate::threaded::cancel::CancelHandle;
use crate::threaded::clock::SystemClock;
use crate::threaded::core::Threaded;
use crate::threaded::hub::{Chunk, Items};
use crate::threaded::plan::{Layout, Plan, Snapshots};
use crate::threaded::worker::{Sent, Stage};
use crate::transforms::{debug_fields, require};

const NAME: &str = "Prefetcher";

/// The most items the reader hands over at once.
const MAX_CHUNK: usize = 4096;

/// This struct is created by [`NodeExt::prefetch`]. See its documentation for more.
///
/// A background thread pulls items from the source ahead of the consumer, at
/// most `prefetch_factor` of them (pulled and not yet returned), in source
/// order (FIFO).
///
/// `Prefetcher` is the threaded core of [`ParallelMapper`](crate::ParallelMapper)
/// with one worker and nothing to apply: its source is shared with the reader
/// thread for the length of a pass, and its state is the consumer's position,
/// assembled from snapshots the reader takes.
///
/// Items cross the thread boundary in chunks, so a cheap item costs a few
/// nanoseconds rather than a channel operation each: the reader closes a chunk
/// when it holds half the read-ahead (at most 4096 items) or when filling it
/// has taken about 100 µs, so a slow source still delivers item by item.
///
/// The reader takes a source snapshot at the end of a chunk once the source
/// has worked for a while since the last one (at least 5 ms, and 32 times
/// what the last snapshot cost): a snapshot shares a shuffle buffer
/// copy-on-write, and the source's writes after it pay for the copy, which
/// counts as the snapshot's cost, so snapshots are kept far enough apart
/// that this costs a few percent of the source's own time.
///
/// The source always runs on the reader thread, overlapping the consumer's
/// own work. A consumer that does nothing but wait for items gains nothing
/// from the overlap and pays for the hand-over: the opt-in
/// [`inline_when_faster`](Prefetcher::inline_when_faster) lets it run the
/// source itself while that measures faster.
///
/// Each hand-over of a chunk may wake a sleeping thread, which costs a few
/// microseconds: for cheap items (say under 1 µs each) choose a
/// `prefetch_factor` in the thousands, so that chunks are large. With a small
/// factor the read-ahead bound forces a hand-over every `prefetch_factor / 2`
/// items.
///
/// # State
///
/// `{"snapshot": <source state>, "steps_since_snapshot": k}`: the last
/// snapshot whose items the consumer all received, and how many items it
/// received since. It describes only what the consumer received, never the
/// read-ahead. Restoring resets the source to the snapshot and skips the `k`
/// items (about as much source work as the snapshot spacing above: 5 ms,
/// or 32 snapshots' worth, and never more than 65,536 items: a snapshot is
/// taken at least that often, and a state with a larger `k` is refused when
/// it is offered). Once the consumer has received the end of the
/// pass, the snapshot is the source's state past its end, so that the next
/// pass after a restore starts exactly as it would have without one. While
/// the source runs on the consumer's thread (see
/// [`inline_when_faster`](Prefetcher::inline_when_faster)), the snapshot is the source's state
/// as it stands and `k` is 0: the same layout, so a state restores
/// whatever the reader of the pipeline that saved or restores it.
///
/// Replaying needs a source that yields the same items again after a
/// restore. Over a source whose order varies from run to run (an
/// out-of-order [`ParallelMapper`](crate::ParallelMapper) with workers), the
/// reader hands items over one at a time, each with its own snapshot, so that
/// nothing is ever replayed and a restore stays exact (at the cost of one
/// source state per item).
///
/// A new pass (`reset(None)`) after one the consumer stopped early first puts
/// the source back where the consumer stood, then resets it, so that the
/// read-ahead (a `Cycler` below wrapping around and moving a sampler to its
/// next epoch) does not leak into the next pass.
///
/// # Errors
///
/// A source error is one item: it reaches the consumer in its place, and the
/// pass goes on (or not, as the [`ErrorPolicy`] set with
/// [`on_error`](Prefetcher::on_error) says). A state taken after it resumes
/// after it. A panic in the source becomes [`Error::Panicked`](crate::Error::Panicked) and ends the
/// pass.
///
/// # Shutdown
///
/// `reset`, [`shutdown`](Stateful::shutdown) and drop stop the reader thread and
/// join it before returning; the source comes back to the node only then, so
/// it is never reset while the old reader might still pull from it. A reader
/// inside a source's `next` that never returns is waited for.
///
/// ```
/// use nodes_std::{IterableWrapper, NodeExt, Result};
///
/// let mut run = IterableWrapper::new(0..5u64).prefetch(2)?.start()?;
/// assert_eq!(run.next().transpose()?, Some(0));
/// let saved = run.get_state()?;
/// drop(run);
///
/// let resumed = IterableWrapper::new(0..5u64).prefetch(2)?.start_from(&saved)?;
/// let rest: Vec<u64> = resumed.collect::<Result<_>>()?;
/// assert_eq!(rest, [1, 2, 3, 4]);
/// # Ok::<(), nodes_std::Error>(())
/// ```
///
/// [`NodeExt::prefetch`]: crate::NodeExt::prefetch
#[must_use = "nodes do nothing until started"]
pub struct Prefetcher<N: Node> {
    core: Threaded<N, Pass, N::Item>,
}

/// The reader's per-item work: none.
struct Pass;

impl<T> Stage<T, T> for Pass {
    const FALLIBLE: bool = false;

    #[inline]
    fn apply(&self, _index: u64, item: T) -> Result<T> {
        Ok(item)
    }

    /// Hands the pulled chunk over as it is, and pulls into the spare
    /// buffer.
    fn apply_chunk(&self, _: &'static str, pulled: Chunk<T>, spare: Items<T>) -> Sent<T, T> {
        (pulled, spare)
    }
}

impl<N: Node> fmt::Debug for Prefetcher<N> {
    debug_fields!(NAME, finish_non_exhaustive; source = (core.source()),
        prefetch_factor = (core.plan.max_in_flight), on_error = (core.plan.policy),
        inline_when_faster = (core.adapt.is_some()));
}

impl<N: Node + 'static> Prefetcher<N>
where
    N::Item: Send + 'static,
{
    /// See [`NodeExt::prefetch`](crate::NodeExt::prefetch).
    pub(crate) fn new(source: N, prefetch_factor: usize) -> Result<Self> {
        let core = Threaded::new(source, Pass, plan(prefetch_factor)?, Arc::new(SystemClock));
        Ok(Prefetcher { core })
    }

    /// A handle that wakes this node's consumer from its wait for the
    /// reader, from another thread: see [`CancelHandle`].
    pub fn cancel_handle(&self) -> CancelHandle {
        self.core.cancel_handle()
    }

    /// Opts in to running the source on the consumer's thread while that
    /// is faster than reading ahead on the background thread. By default
    /// the source always runs on the reader.
    ///
    /// The trade-off: a background reader helps only while the consumer
    /// has work of its own to do between two items (a training step) that
    /// the reading can overlap. A consumer that only waits for the next
    /// item gains nothing from it, and pays for the hand-over: the items
    /// are built on one core and used and freed on another. In this mode
    /// the consumer measures, every few milliseconds, how many items it
    /// gets per second; after a stretch it spent a quarter or more
    /// waiting, it tries
    /// running the source itself, keeps that while it is faster, and tries
    /// the reader again from time to time (after 4 to 256 stretches of
    /// about 4 ms). The cost: while inline, the source's work runs on the
    /// consumer's thread (a `next` takes as long as the source does), and
    /// which thread runs the source depends on timing. The items, their
    /// order and the states are the same either way: switching hands out
    /// everything read ahead first, and a state taken inline is the
    /// source's own with nothing to replay.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let run = IterableWrapper::new(0..1000u64)
    ///     .map(|x| x * 2)
    ///     .prefetch(8)?
    ///     .inline_when_faster()
    ///     .start()?;
    /// let total: u64 = run.map(|x| x.unwrap()).sum();
    /// assert_eq!(total, 999 * 1000);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    pub fn inline_when_faster(mut self) -> Self {
        self.core.adapt = Some(Adapt::new(AdaptPolicy::Measured));
        self
    }

    /// Switches between the background reader and the consumer's thread
    /// every `items` items handed out, whatever the clock says: for tests
    /// of the switch (every item delivered exactly once, in order, and
    /// states exact across it). Not for production use.
    #[doc(hidden)]
    pub fn switch_every(mut self, items: u64) -> Self {
        self.core.adapt = Some(Adapt::new(AdaptPolicy::Every(items.max(1))));
        self
    }

    /// What to do with an `Err` from the source: see [`ErrorPolicy`]. The
    /// default delivers it as one item and reads on.
    ///
    /// ```
    /// use nodes_std::prelude::*;
    ///
    /// let parse = |s: &str| s.parse::<u32>();
    /// let run = IterableWrapper::new(["1", "x", "3"])
    ///     .try_map(parse)
    ///     .prefetch(4)?
    ///     .on_error(ErrorPolicy::Fail)
    ///     .start()?;
    /// let seen: Vec<bool> = run.map(|r| r.is_ok()).collect();
    /// assert_eq!(seen, [true, false]);
    /// # Ok::<(), nodes_std::Error>(())
    /// ```
    pub fn on_error(mut self, policy: ErrorPolicy) -> Self {
        self.core.set_policy(policy);
        self
    }
}

/// The plan of a prefetcher reading `prefetch_factor` items ahead.
fn plan(prefetch_factor: usize) -> Result<Plan> {
    let why = "prefetch_factor must be at least 1 (it is how many items are read ahead), found 0";
    require(prefetch_factor > 0, NAME, why)?;
    Ok(Plan {
        node: NAME,
        thread_name: "nodes-prefetch",
        workers: 1,
        in_order: true,
        max_in_flight: prefetch_factor,
        // Half the read-ahead, so the reader fills one chunk while the
        // consumer empties the other.
        max_chunk: (prefetch_factor / 2).clamp(1, MAX_CHUNK),
        adaptive_chunks: false,
        min_in_flight: prefetch_factor,
        snapshots: Snapshots::Paced,
        layout: Layout::InOrder,
        policy: ErrorPolicy::Deliver,
        spin: false,
    })
}

impl<N: Node + 'static> Node for Prefetcher<N>
where
    N::Item: Send + 'static,
{
    type Item = N::Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<N::Item>> {
        cx.observe(NodeId::of(self), NAME, |cx| self.core.next(cx))
    }
}

impl<N: Node> nodes_core::NodeName for Prefetcher<N> {
    const NAME: &'static str = NAME;
}

impl<N: Node + 'static> Stateful for Prefetcher<N>
where
    N::Item: Send + 'static,
{
    // The source's hint plus the items read ahead (see
    // `Threaded::size_hint`).
    delegate_stateful!(core: reset, check_state, get_state, shutdown, describe, resume, size_hint);
}

// A concrete `Prefetcher` that was only constructed has no `next` or
// `get_state`: calling them is a compile error that says to start the pipeline.
nodes_core::__started_guards!(impl[N: Node] Prefetcher<N>);

// Under loom the hub is built from loom's primitives: these tests use std's.
#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use std::sync::{Arc, Mutex, OnceLock};
    use std::thread::ThreadId;
    use std::time::Duration;

    use super::*;
    use crate::threaded::clock::ManualClock;
    use crate::threaded::hub::Hub;
    use crate::{IterableWrapper, NodeExt};

    /// A consumer that does nothing but wait is starved: with
    /// `inline_when_faster` it tries running the source itself. The clock
    /// moves only while the consumer waits (the source advances it once
    /// the consumer blocks, or once the reader is being stopped), so every
    /// window is all waiting, whatever the machine.
    #[test]
    fn a_starved_consumer_tries_running_the_source_itself() {
        let clock = Arc::new(ManualClock::new());
        let hub: Arc<OnceLock<Arc<Hub<u64>>>> = Arc::default();
        let threads = Arc::new(Mutex::new(Vec::<ThreadId>::new()));
        let source = {
            let (clock, hub, threads) =
                (Arc::clone(&clock), Arc::clone(&hub), Arc::clone(&threads));
            IterableWrapper::new(0..40u64).map(move |x| {
                let hub = hub.get().expect("set before the first pull");
                while !hub.consumer_waits() && !hub.stopping() {
                    std::thread::yield_now();
                }
                clock.advance(Duration::from_millis(1));
                threads.lock().unwrap().push(std::thread::current().id());
                x
            })
        };
        let core = Threaded::new(source, Pass, plan(1).unwrap(), clock);
        hub.set(core.hub()).unwrap();
        let node = Prefetcher { core }.inline_when_faster();
        let got: Vec<u64> = node.start().unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(got, (0..40).collect::<Vec<_>>());
        let me = std::thread::current().id();
        let threads = threads.lock().unwrap();
        assert_ne!(threads[0], me, "the source starts on the reader");
        assert!(threads.contains(&me), "then runs on the consumer's thread");
    }
}
