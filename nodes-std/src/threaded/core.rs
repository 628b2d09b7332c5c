//! [`Threaded`]: the one lifecycle behind every thread-backed node.
//!
//! It owns a source and pulls from it on the caller's thread (`workers ==
//! 0`) or on worker threads (`worker.rs`, handing chunks over through
//! `hub.rs` to the consumer's `pool.rs`), applies the node's [`Stage`] to
//! every item, keeps the consumer's position with the snapshot protocol of
//! `snapshot.rs`, and applies the node's [`ErrorPolicy`] where items are
//! delivered, so that a bad record counts the same whatever the worker
//! count. Written once: reset (stop and join the old pass, put the source
//! back where the consumer stood, restore, start the new pass), next, end
//! of pass (join, snapshot the source past its end), shutdown and drop.

use std::borrow::Cow;

use nodes_core::__private::{WorkerCx, trace};
use nodes_core::{Cx, Description, Error, Hint, Node, Replay, Result, Resume, State};

use super::adapt::{Adapt, Mode};
use super::cancel::CancelHandle;
use super::clock::Clock;
use super::hub::{Flow, Hub, Sender};
use super::panic::{catch, guard};
use super::plan::{Layout, Plan, Snapshots};
use super::pool::Pool;
use super::puller::{Broke, Puller};
use super::snapshot::{self, Cursor, MAX_PACED_STEPS, Saved};
use super::sync::{Arc, Mutex, lock, spawn};
use super::worker::{Stage, Worker};
use crate::policy::{Counts, ERRORS, ErrorBudget, ErrorPolicy, Verdict, is_bad_record};

/// Where the node stands.
enum Phase<U> {
    /// Never reset, or the last reset failed.
    Idle,
    /// The consumer pulls and processes (`workers == 0`, or the source came
    /// back to the consumer, see `adapt.rs`).
    Inline,
    /// Reset; the workers start at the first `next`, from the consumer's
    /// context.
    Ready,
    /// Workers are running.
    Running(Box<Pool<U>>),
    /// The pass ended; workers joined.
    Finished,
    /// `shutdown` was called; workers joined.
    ShutDown,
}

/// A source pulled on the caller's thread or on workers, with the
/// consumer's position and the error policy. See the module docs.
pub(crate) struct Threaded<N: Node, S, U> {
    /// Declared first, so that dropping the node drops the pool first,
    /// which stops and joins the workers before anything they share goes.
    phase: Phase<U>,
    /// The plan as built.
    pub(crate) plan: Plan,
    /// The plan as run over this source (see [`Plan::over`]).
    run: Plan,
    puller: Arc<Mutex<Puller<N>>>,
    stage: std::sync::Arc<S>,
    hub: Arc<Hub<U>>,
    /// The source's description, refreshed whenever the source is at home.
    source_description: Description,
    /// What the consumer received (with workers; inline the source's own
    /// state is exact).
    cursor: Cursor,
    /// The consumer received the end of data: the source stands where the
    /// consumer does.
    ended: bool,
    budget: ErrorBudget,
    /// The span of the skips this pass was restored with: from the first
    /// item not delivered to one past the last delivered ahead (0 without).
    restored_span: u64,
    /// Whether the source may run on the consumer's thread for a while, and
    /// when (one worker in order only; see `adapt.rs`). Set before the
    /// first reset.
    pub(crate) adapt: Option<Adapt>,
    /// The source stands where the consumer does: no workers, or the source
    /// came back to the consumer mid-pass (`cursor` is then stale until the
    /// next reader starts).
    at_consumer: bool,
    /// Where the timing decisions read the time.
    clock: std::sync::Arc<dyn Clock>,
    /// The path of the source's count ([`Description::counted_path`]) this
    /// pass, when workers pull it.
    counted: Option<Vec<String>>,
    /// Where the source broke this pass (shared with the puller).
    broke: Arc<Broke>,
}

impl<N: Node, S, U> Threaded<N, S, U> {
    /// The hand-over, for tests that order their events after it.
    #[cfg(test)]
    #[cfg(not(loom))]
    pub(crate) fn hub(&self) -> Arc<Hub<U>> {
        Arc::clone(&self.hub)
    }

    /// The source as of the last reset, for the node's `Debug` (which goes
    /// on with what of its plan it shows, under its own names).
    pub(crate) fn source(&self) -> String {
        self.source_description.to_string()
    }

    /// The node's description: its source (as of the last reset) keyed by
    /// where its state lives in ours, and, for a node that may deliver out
    /// of order (the indexed layout), its order. The error policy, worker
    /// counts and read-ahead are not shown: they may change between a save
    /// and a restore.
    pub(crate) fn describe(&self) -> Description {
        let mut description = Description::new(self.plan.node);
        if self.plan.layout == Layout::Indexed {
            description = description.param("in_order", self.plan.in_order);
        }
        let source = self.source_description.clone();
        let description = description.child_as("source", snapshot::SNAPSHOT, source);
        description.with_resume(self.resume())
    }

    /// Reads ahead; out of order only on workers, and only where its plan
    /// over this source keeps the order asked for.
    pub(crate) fn resume(&self) -> Resume {
        Resume::ReadsAhead {
            in_order: self.run.in_order || self.run.workers == 0,
        }
    }
}

impl<N, S, U> Threaded<N, S, U>
where
    N: Node + 'static,
    N::Item: Send + 'static,
    S: Stage<N::Item, U>,
    U: Send + 'static,
{
    /// A node over `source` that was not reset yet, reading the time from
    /// `clock` (a [`SystemClock`](super::clock::SystemClock) but in tests).
    pub(crate) fn new(source: N, stage: S, plan: Plan, clock: std::sync::Arc<dyn Clock>) -> Self {
        let source_description = source.describe();
        // Taken when the node is built: a tree does not change shape.
        let run = plan.over(&source_description);
        let puller = Puller::new(source, &run, std::sync::Arc::clone(&clock));
        Threaded {
            broke: Arc::clone(&puller.broke),
            counted: None,
            run,
            plan,
            source_description,
            puller: Arc::new(Mutex::new(puller)),
            stage: std::sync::Arc::new(stage),
            hub: Arc::new(Hub::new(plan.node)),
            phase: Phase::Idle,
            cursor: Cursor::new(State::new(), 0, []),
            ended: false,
            budget: ErrorBudget::new(plan.policy),
            restored_span: 0,
            adapt: None,
            at_consumer: false,
            clock,
        }
    }

    /// Sets the error policy (a builder step: before the first reset).
    pub(crate) fn set_policy(&mut self, policy: ErrorPolicy) {
        self.plan.policy = policy;
        self.run.policy = policy;
        self.budget = ErrorBudget::new(policy);
    }

    /// A handle that wakes this node's consumer from its wait for the
    /// workers (see [`CancelHandle`]).
    pub(crate) fn cancel_handle(&self) -> CancelHandle {
        let hub = Arc::clone(&self.hub);
        let wake = std::sync::Arc::new(move || hub.cancel());
        CancelHandle { wake }
    }

    /// The bound on what a state this node writes this pass can record
    /// (`max_offset`, before the offsets delivered ahead): a snapshot is
    /// taken at least every `snapshot_frequency` items that are not restored
    /// skips, so at most that many plus the restored skips are delivered
    /// after the one a state names. Items delivered ahead of a gap are not
    /// replayed (they are passed over while pulling) and the writer adds
    /// their largest offset.
    fn max_offset(&self) -> u64 {
        let every = match self.run.snapshots {
            Snapshots::Every(every) => every,
            Snapshots::Paced => MAX_PACED_STEPS,
        };
        every
            .saturating_add(self.run.max_in_flight as u64)
            .saturating_add(self.restored_span.saturating_mul(2))
    }

    /// How many more items the consumer gets this pass: the source's hint
    /// plus what was pulled and not yet handed out, then the error policy
    /// (and whether the stage may turn an item into an error). It never
    /// waits for the workers: while one holds the source, the upper bound
    /// is unknown.
    pub(crate) fn size_hint(&self) -> Hint {
        // Only a running worker holds the source. The read-ahead is counted
        // under the source's lock, so that no pull moves items from the
        // source to the read-ahead between the two counts.
        let puller = self.puller.try_lock();
        // What was pulled and not yet handed out: at least the items held,
        // at most those ahead (deferred errors were handed out of their chunk).
        let (held, ahead) = match &self.phase {
            Phase::Idle | Phase::ShutDown => return Hint::UNKNOWN,
            Phase::Finished => return Hint::exact(0),
            Phase::Running(pool) => {
                let deferred = pool.deferred.len();
                (pool.current.items.len() + deferred, pool.ahead() + deferred)
            }
            Phase::Inline | Phase::Ready => (0, 0),
        };
        let read_ahead = Hint::from_iterator((held, Some(ahead)));
        let source = puller.map_or(Hint::UNKNOWN, |p| p.size_hint());
        self.budget.size_hint(source.then(read_ahead), S::FALLIBLE)
    }

    /// The next item for the consumer, after the error policy.
    pub(crate) fn next(&mut self, cx: &mut Cx) -> Result<Option<U>> {
        // The common case first: the current chunk holds a good item that
        // carries no snapshot and nothing waits before it.
        if let Phase::Running(pool) = &mut self.phase
            && let Some((index, value)) = pool.take_plain(self.cursor.low())
        {
            self.cursor.deliver(index, None);
            self.count_handed_out(cx);
            return Ok(Some(value));
        }
        let node = self.plan.node;
        loop {
            let handed_back = matches!(&self.phase, Phase::Running(pool) if pool.handed_back());
            if handed_back || (matches!(self.phase, Phase::Ready) && self.wants(Mode::Inline)) {
                // The source stands where the consumer does: everything the
                // reader read ahead is out, or a reset put it there (and it
                // was faster here last pass). Go on inline.
                self.phase = Phase::Inline;
                self.at_consumer = true;
            }
            if handed_back && self.wants(Mode::Threaded) {
                // The consumer meanwhile wants the reader back.
                self.go_threaded(cx);
            }
            if let Phase::Ready = self.phase {
                self.phase = Phase::Running(Box::new(self.spawn_pool(cx)?));
            }
            let timed = self.adapt.is_some() || cx.timing();
            let clock = timed.then_some(&*self.clock);
            let delivered = match &mut self.phase {
                Phase::Running(pool) => pool.next(&mut self.cursor, cx, clock)?,
                Phase::Inline => self.next_inline(cx),
                Phase::Finished => return Ok(None),
                Phase::ShutDown => return Err(Error::ShutDown { node }),
                Phase::Idle | Phase::Ready => return Err(Error::NotReset { node }),
            };
            let handed_out = match delivered {
                None => return self.end_of_data(cx),
                Some(Ok(value)) => Ok(Some(value)),
                Some(Err(error)) if is_bad_record(&error) => match self.budget.judge(error, cx) {
                    Verdict::Deliver(error) => Err(error),
                    Verdict::DeliverAndEnd(error) => {
                        // Dropping the pool stops and joins its workers.
                        self.phase = Phase::Finished;
                        return Err(error);
                    }
                    Verdict::Skip => continue,
                },
                // Not a bad record: no policy applies (the pass ends by itself).
                Some(Err(error)) => return Err(error),
            };
            self.count_handed_out(cx);
            return handed_out;
        }
    }

    /// Inline: pull one item and process it here; `None` at the end.
    fn next_inline(&mut self, cx: &mut Cx) -> Option<Result<U>> {
        let node = self.plan.node;
        let (index, item) = {
            let mut puller = lock(&self.puller);
            if puller.done {
                return None;
            }
            puller.pull_one(cx)?
        };
        Some(
            item.map_err(|error| *error)
                .and_then(|item| catch(node, Some(index), || self.stage.apply(index, item))),
        )
    }

    /// Whether the adaptation wants the source in `mode` now.
    fn wants(&self, mode: Mode) -> bool {
        self.adapt.as_ref().is_some_and(|adapt| adapt.mode == mode)
    }

    /// Counts an item handed out, and switches between the reader and the
    /// consumer's thread when the adaptation says so (see `adapt.rs`).
    #[inline]
    fn count_handed_out(&mut self, cx: &Cx) {
        if self.adapt.as_mut().is_some_and(Adapt::tick) {
            self.adapt_look(cx);
        }
    }

    #[cold]
    fn adapt_look(&mut self, cx: &Cx) {
        let waited = match &self.phase {
            Phase::Running(pool) => pool.waited,
            _ => std::time::Duration::ZERO,
        };
        let Some(adapt) = &mut self.adapt else {
            return;
        };
        match (adapt.look(self.clock.now(), waited), &mut self.phase) {
            // The reader stops now; the pass goes on inline once what it
            // read ahead is handed out (see `next`).
            (Some(Mode::Inline), Phase::Running(pool)) => pool.stop(Flow::Halted),
            (Some(Mode::Threaded), Phase::Inline) => self.go_threaded(cx),
            // Still handing back, or the pass is over: `next` and the next
            // reset follow the adaptation's mode.
            _ => {}
        }
    }

    /// Inline mid-pass, with the source where the consumer stands: starts a
    /// reader from a snapshot of it. A source whose state cannot be taken
    /// stays inline (its `get_state` reports the failure to the consumer).
    fn go_threaded(&mut self, cx: &Cx) {
        let mut puller = lock(&self.puller);
        if puller.done {
            return;
        }
        let Ok(snapshot) = catch(self.plan.node, None, || puller.source.get_state(cx)) else {
            return;
        };
        puller.restart_pacing();
        self.cursor = Cursor::new(snapshot, puller.next_index, puller.skip.iter().copied());
        drop(puller);
        self.at_consumer = false;
        self.phase = Phase::Ready;
    }

    /// The consumer reached the end of the pass. If the source really
    /// ended (not when a worker died, leaving others' read-ahead behind),
    /// it stands where the consumer does: past its end, which can differ
    /// from where the last snapshot and the count after it put it (a
    /// sampler asked for one more index moves to its next epoch on the next
    /// reset). With workers, that position is snapshotted, so that
    /// restoring a state taken at the end of a pass sets the source up for
    /// the next pass exactly as the uninterrupted run does.
    fn end_of_data(&mut self, cx: &Cx) -> Result<Option<U>> {
        self.phase = Phase::Finished;
        if self.broke.get().is_some() {
            // The pass ended early: a restore must not read on.
            self.budget.end_pass();
        }
        let puller = lock(&self.puller);
        self.ended = puller.done;
        if self.ended && self.run.workers > 0 {
            let snapshot = catch(self.plan.node, None, || puller.source.get_state(cx))?;
            self.cursor = Cursor::new(snapshot, puller.next_index, []);
        }
        Ok(None)
    }

    /// Decodes and checks a saved state, without applying anything: the
    /// position and the error counts kept beside it.
    fn decode(&self, state: &State) -> Result<(Saved, Counts)> {
        let limit = self.plan.replay_limit();
        let saved = Saved::decode(self.plan.node, state, self.plan.layout, limit)?;
        let counts = state.contains(ERRORS).then(|| self.budget.load(state));
        Ok((saved, counts.transpose()?.unwrap_or_default()))
    }

    /// Checks a saved state as `reset` would take it, the source's part
    /// included, without applying anything.
    pub(crate) fn check_state(&self, state: &State) -> Result<()> {
        let (saved, _) = self.decode(state)?;
        lock(&self.puller).source.check_state(&saved.snapshot)
    }

    /// Starts a pass: from the start (`None`) or from a saved state.
    pub(crate) fn reset(&mut self, state: Option<&State>) -> Result<()> {
        let node = self.plan.node;
        // Validate everything before touching anything.
        let (saved, counts) = state.map(|s| self.decode(s)).transpose()?.unzip();
        // A new pass after one the consumer did not finish starts from where
        // the consumer stood, not from where the workers got to.
        let was_reset = !matches!(self.phase, Phase::Idle);
        let rewind = saved.is_none() && was_reset && !self.ended && !self.at_consumer;
        // Unusable until this reset succeeds.
        self.phase = Phase::Idle;
        self.ended = false;
        self.at_consumer = self.run.workers == 0;
        if let Some(adapt) = &mut self.adapt {
            adapt.new_pass();
        }
        if rewind {
            // Its source may have run ahead of the consumer, and what it did
            // there can outlive the pass: a `Cycler` below it resets its own
            // source on every wrap, which moves a sampler to its next epoch.
            // Without the rewind, how far the workers happened to read ahead
            // would decide the next pass's order, and a pipeline restored
            // from a checkpoint (which stands at the consumer's position)
            // would disagree with one that ran straight through. Costs at
            // most the replay of one snapshot interval.
            let (snapshot, base, low, _) = self.cursor.parts();
            let (snapshot, base) = self.counted_forward(snapshot, base, low);
            let mut puller = lock(&self.puller);
            let source = &mut puller.source;
            catch(node, None, || {
                replay(node, source, Some(&*snapshot), low - base).map(drop)
            })?;
        }
        let snapshot = self.reset_source(saved.as_ref())?;
        let base = saved.as_ref().map_or(0, |s| s.resume);
        let ahead = saved.map(|s| s.ahead).unwrap_or_default();
        self.restored_span = ahead.last().map_or(0, |&last| last + 1 - base);
        self.cursor = Cursor::new(snapshot, base, ahead);
        self.budget.restore(counts.unwrap_or_default());
        self.phase = if self.budget.ended() {
            Phase::Finished
        } else if self.at_consumer {
            Phase::Inline
        } else {
            Phase::Ready
        };
        Ok(())
    }

    /// Resets the source (no worker is left) to `saved`, pulls the items the
    /// consumer had received since its snapshot again, and returns the
    /// snapshot the cursor starts from.
    fn reset_source(&mut self, saved: Option<&Saved>) -> Result<State> {
        let node = self.plan.node;
        let threaded = self.run.workers > 0;
        let mut puller = lock(&self.puller);
        let puller = &mut *puller;
        puller.done = false;
        puller.broke.set(None);
        puller.restart_pacing();
        puller.next_index = saved.map_or(0, |s| s.resume);
        puller.skip = saved.iter().flat_map(|s| s.ahead.iter().copied()).collect();
        puller.skip_path = saved.map(|s| s.ahead_path.clone()).unwrap_or_default();
        self.counted = self.source_description.counted_path().filter(|_| threaded);
        puller.counted = self.counted.is_some();
        let steps = saved.map_or(0, |s| s.steps);
        let snapshot = saved.map(|s| &s.snapshot);
        let (replay, ended) = replay(node, &mut puller.source, snapshot, steps)?;
        if let (Some(i), Some(saved)) = (ended, saved) {
            let why = format!(
                "the source ended after {i} of the {steps} items to skip: the state does not belong to this source"
            );
            return Err(Error::bad_state(saved.steps_path.clone(), why));
        }
        let snapshot = threaded.then(|| replay.get_state()).transpose()?;
        // Where the source's end is known, an item delivered ahead past it
        // is refused now rather than when the pass gets there.
        let left = puller.source.size_hint().upper.unwrap_or(u64::MAX);
        let end = puller.next_index.saturating_add(left);
        let beyond = puller
            .skip
            .iter()
            .enumerate()
            .find(|&(_, &item)| item >= end);
        if let Some((i, item)) = beyond {
            let path = format!("{}/{i}", puller.skip_path);
            let why = format!(
                "the state says item {item} was delivered, but the source ends before item {end}: the state does not belong to this source"
            );
            return Err(Error::bad_state(path, why));
        }
        self.source_description = puller.source.describe();
        Ok(snapshot.unwrap_or_default())
    }

    /// Starts the worker threads.
    fn spawn_pool(&self, cx: &Cx) -> Result<Pool<U>> {
        let plan = self.run;
        self.hub
            .open(plan.window_for(plan.first_chunk()), plan.max_in_flight);
        let mut pool = Pool::new(Arc::clone(&self.hub), plan);
        for i in 0..plan.workers {
            let worker = Worker {
                puller: Arc::clone(&self.puller),
                stage: std::sync::Arc::clone(&self.stage),
                sender: Sender::join(&self.hub),
                plan,
                clock: std::sync::Arc::clone(&self.clock),
            };
            let worker_cx = WorkerCx::fork(cx);
            let run = move || {
                trace::worker(plan.node, i, true);
                worker.run(worker_cx);
                trace::worker(plan.node, i, false);
            };
            let name = format!("{}-{i}", plan.thread_name);
            // On failure `pool` is dropped, which stops and joins the others.
            pool.workers
                .push(spawn(plan.node, name, trace::with_dispatch(run))?);
        }
        Ok(pool)
    }

    /// The consumer's position in the node's layout, with the error counts
    /// when the policy keeps any.
    pub(crate) fn get_state(&self, cx: &Cx) -> Result<State> {
        let node = self.plan.node;
        if let Phase::Idle = self.phase {
            return Err(Error::NotReset { node });
        }
        cx.check_live(node)?;
        let inline;
        let cursor = if self.at_consumer {
            // Inline, or the source came back to the consumer mid-pass: its
            // own state is exact.
            let puller = lock(&self.puller);
            let skip = puller.skip.iter().copied();
            inline = Cursor::new(puller.source.get_state(cx)?, puller.next_index, skip);
            &inline
        } else {
            &self.cursor
        };
        let (snapshot, base, low, ahead) = cursor.parts();
        let (snapshot, base) = self.counted_forward(snapshot, base, low);
        let layout = self.plan.layout;
        let mut state = snapshot::encode(layout, &snapshot, base, low, ahead, self.max_offset())?;
        // A source that broke ends the pass once its last item was received,
        // even before the consumer asked for the end.
        let mut budget = self.budget;
        if self.broke.get().is_some_and(|end| low >= end) {
            budget.end_pass();
        }
        if budget.policy() != ErrorPolicy::Deliver || budget.ended() {
            budget.save(&mut state)?;
        }
        Ok(state)
    }

    /// Over a source that counts its items ([`Description::counted_path`]), which
    /// takes no snapshot per item: `snapshot`, taken before item `base`,
    /// moved forward over the items up to `low`, and the index it then
    /// stands before. The state records no steps, as if a snapshot had been
    /// taken after every item. Not past an item at which the source broke
    /// (a panic leaves its count unknown): that item stays a step.
    fn counted_forward<'a>(
        &self,
        snapshot: &'a State,
        base: u64,
        low: u64,
    ) -> (Cow<'a, State>, u64) {
        let upto = self.broke.get().map_or(low, |end| low.min(end - 1));
        let path = self.counted.as_ref().filter(|_| upto > base);
        match path.and_then(|path| count_moved(snapshot, path, upto - base)) {
            Some(moved) => (Cow::Owned(moved), upto),
            // Not counted, nothing to move over, or not the promised count:
            // keep the steps (a replay).
            None => (Cow::Borrowed(snapshot), base),
        }
    }

    /// Stops the workers (dropping the pool joins them) and shuts the
    /// source down.
    pub(crate) fn shutdown(&mut self) {
        if !matches!(self.phase, Phase::Idle) {
            self.phase = Phase::ShutDown;
        }
        lock(&self.puller).source.shutdown();
    }
}

/// Resets `source` to `snapshot` (or to its start) and pulls `steps` items
/// again without processing them (an `Err` was an item too), so that it
/// stands where a consumer that received them does; also the count pulled,
/// if the source ended before all of them.
fn replay<'a, N: Node>(
    node: &'static str,
    source: &'a mut N,
    snapshot: Option<&State>,
    steps: u64,
) -> Result<(Replay<'a, N>, Option<u64>)> {
    let mut replay = Replay::reset(source, snapshot)?;
    for i in 0..steps {
        if let Ok(None) = guard(node, Some(i), || replay.next())? {
            return Ok((replay, Some(i)));
        }
    }
    Ok((replay, None))
}

/// `state` with the count at `path` (keys down through nested states) raised
/// by `by`; `None` if there is no `u64` there.
fn count_moved(state: &State, path: &[String], by: u64) -> Option<State> {
    let (key, below) = path.split_first()?;
    let mut moved = state.clone();
    if below.is_empty() {
        let count: u64 = state.get(key).ok()?;
        moved.insert(key.clone(), count.checked_add(by)?).ok()?;
    } else {
        let child = state.child(key).ok()?;
        moved.insert_child(key.clone(), count_moved(&child, below, by)?);
    }
    Some(moved)
}

#[cfg(test)]
mod tests {
    use super::super::hub::Slot;

    /// Chunks cross between cores item by item: an item keeps its error out
    /// of line, so that a small item stays small.
    #[test]
    fn a_chunk_item_of_a_word_is_three_words() {
        assert_eq!(std::mem::size_of::<(u64, Slot<u64>)>(), 24);
        assert!(std::mem::size_of::<nodes_core::Error>() > 24);
    }
}
