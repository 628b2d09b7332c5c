//! The consumer's side of a running pass: [`Pool`] holds the worker
//! threads and the chunk being handed out, puts chunks back into source
//! order (or keeps arrival order), holds an out-of-order error until its
//! turn, and stops and joins the workers.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use nodes_core::{Cx, Result, State};

use super::clock::Clock;
use super::hub::{Chunk, Flow, Hub, Slot};
use super::plan::Plan;
use super::snapshot::Cursor;
use super::sync::{Arc, JoinHandle};

/// The running workers and the consumer's side of the hand-over.
pub(crate) struct Pool<U> {
    hub: Arc<Hub<U>>,
    pub(crate) workers: Vec<JoinHandle>,
    /// In order: chunks that arrived before their turn, by first index.
    reorder: BTreeMap<u64, Chunk<U>>,
    /// The chunk being handed out (what is left of it). The credits of its
    /// items go back to the hub with its last item.
    pub(crate) current: Chunk<U>,
    /// Out of order: chunks whose next item waits for the items before a
    /// point the source asked for a snapshot at (see [`waits`]).
    held: Vec<Chunk<U>>,
    /// The end of the pass, once a worker reported it.
    end_at: Option<u64>,
    /// Out of order: errors waiting for every item before them.
    pub(crate) deferred: BTreeMap<u64, (Result<U>, Option<State>)>,
    /// Whether the consumer polls before it blocks, and delivers in source
    /// order (else in arrival order).
    plan: Plan,
    /// The workers were halted and joined for the source to come back to
    /// the consumer: what they read ahead is still handed out.
    handing_back: bool,
    /// The consumer's time spent waiting for chunks, when measured.
    pub(crate) waited: Duration,
}

impl<U> Pool<U> {
    /// A pool for a pass, whose workers are added to `workers`.
    pub(crate) fn new(hub: Arc<Hub<U>>, plan: Plan) -> Self {
        Pool {
            hub,
            workers: Vec::new(),
            reorder: BTreeMap::new(),
            current: Chunk::with(VecDeque::new()),
            held: Vec::new(),
            end_at: None,
            deferred: BTreeMap::new(),
            plan,
            handing_back: false,
            waited: Duration::ZERO,
        }
    }

    /// Stops the workers and joins them (a worker inside the user's code
    /// finishes that call first); idempotent. [`Flow::Halted`] hands the
    /// source back: what the workers read ahead is still handed out, and
    /// once it is, the source stands where the consumer does (see
    /// [`handed_back`](Self::handed_back)). [`Flow::Closed`] drops it.
    pub(crate) fn stop(&mut self, flow: Flow) {
        drop(self.hub.stop(flow));
        for worker in self.workers.drain(..) {
            // A worker that panicked outside the guarded user code sent
            // its death notice already: nothing is left to report.
            let _ = worker.join();
        }
        self.handing_back |= flow == Flow::Halted;
    }

    /// Handing back, and every item read ahead was handed out with the
    /// pass still open. (Only a one-worker pass in order hands back: no
    /// chunk waits for its turn, and no error for the items before it.)
    pub(crate) fn handed_back(&self) -> bool {
        self.handing_back
            && self.current.items.is_empty()
            && self.held.is_empty()
            && self.current.end.is_none()
            && self.end_at.is_none()
            && self.hub.queued() == 0
    }

    /// Upper bound on the items pulled and not yet handed out.
    pub(crate) fn ahead(&self) -> usize {
        self.hub.in_flight().saturating_sub(self.current.handed)
    }

    /// The front item of the current chunk if it can be handed out without
    /// more ado: a value, no snapshot after it, no deferred error waiting.
    #[inline]
    pub(crate) fn take_plain(&mut self, low: u64) -> Option<(u64, U)> {
        let (_, Ok(_)) = self.current.items.front()? else {
            return None;
        };
        let next_snapshot = self.current.snapshots.front();
        let handed = self.current.handed;
        if !self.deferred.is_empty()
            || next_snapshot.is_some_and(|(at, _, _)| *at == handed)
            || !self.plan.in_order && waits(&self.current, low)
        {
            return None;
        }
        let (index, Ok(value), _) = self.pop_current()? else {
            return None;
        };
        Some((index, value))
    }

    /// Hands out the front item of the current chunk, with the source state
    /// taken after it if one was. The chunk's credits go back with its last
    /// item: one lock per chunk, and the workers see the window free as soon
    /// as the consumer holds none of its items.
    #[inline]
    fn pop_current(&mut self) -> Option<(u64, Slot<U>, Option<State>)> {
        let current = &mut self.current;
        let (index, slot) = current.items.pop_front()?;
        if asked_at(current) {
            current.fence = Some(index);
        }
        current.handed += 1;
        let handed = current.handed;
        let snapshot = current.snapshots.pop_front_if(|(at, ..)| *at + 1 == handed);
        if current.items.is_empty() {
            self.hub.release(std::mem::take(&mut current.handed));
        }
        Some((index, slot, snapshot.map(|(_, state, _)| state)))
    }

    /// The next item in delivery order, recorded in `cursor`; `None` at the
    /// end of the pass. `clock` times the waits (for the adaptation and the
    /// stats).
    pub(crate) fn next(
        &mut self,
        cursor: &mut Cursor,
        cx: &mut Cx,
        clock: Option<&dyn Clock>,
    ) -> Result<Option<Result<U>>> {
        let (index, value, snapshot) = loop {
            // A waiting error's turn comes once everything before it was
            // delivered (or a restored state counted its index as
            // delivered ahead: the error says the state does not fit).
            if let Some(waiting) = self.deferred.first_entry()
                && *waiting.key() <= cursor.low()
            {
                let (index, (value, snapshot)) = waiting.remove_entry();
                break (index, value, snapshot);
            }
            if !self.plan.in_order && waits(&self.current, cursor.low()) {
                let waiting = std::mem::replace(&mut self.current, Chunk::with(VecDeque::new()));
                self.held.push(waiting);
            }
            if let Some((index, value, snapshot)) = self.pop_current() {
                let value = value.map_err(|error| *error);
                if !self.plan.in_order && value.is_err() && index > cursor.low() {
                    // Out of order, an error waits for its turn: only a
                    // snapshot taken after it, adopted once everything
                    // before it was delivered, resumes such a source.
                    self.deferred.insert(index, (value, snapshot));
                    continue;
                }
                break (index, value, snapshot);
            }
            self.end_at = self.current.end.take().or(self.end_at);
            if let Some(at) = self.held.iter().position(|c| !waits(c, cursor.low())) {
                self.current = self.held.swap_remove(at);
                continue;
            }
            if self.end_at.is_some_and(|end| cursor.low() >= end) {
                return Ok(None);
            }
            self.current = self.receive(cursor.low(), cx, clock)?;
        };
        if snapshot.is_some() {
            // A threaded node above snapshots here too, so the items it
            // counts past its snapshot never span one of this node's.
            cx.request_snapshot();
        }
        cursor.deliver(index, snapshot);
        Ok(Some(value))
    }

    /// Leaves the emptied buffer of the current chunk for the workers, and
    /// blocks until the chunk whose turn it is arrives (in order) or any
    /// chunk arrives (out of order).
    fn receive(&mut self, low: u64, cx: &mut Cx, clock: Option<&dyn Clock>) -> Result<Chunk<U>> {
        let mut done = std::mem::take(&mut self.current.items);
        if cx.stats_enabled() {
            cx.record_queue_depth(self.hub.queued());
        }
        loop {
            if let Some(chunk) = self.reorder.remove(&low) {
                return Ok(chunk);
            }
            let started = clock.map(|clock| (clock, clock.now()));
            let received = self
                .hub
                .receive(std::mem::take(&mut done), self.plan.spin, low);
            if let Some((clock, started)) = started {
                let waited = clock.now() - started;
                self.waited += waited;
                if cx.timing() {
                    cx.record_blocked(waited);
                }
            }
            let chunk = received?;
            if !self.plan.in_order || chunk.first_index() == low {
                return Ok(chunk);
            }
            self.reorder.insert(chunk.first_index(), chunk);
        }
    }
}

/// Out of order, whether the next item of `chunk` must wait: it is past a
/// point the source asked for a snapshot at (a file reader's first item of
/// a file) while an item before that point is still out (`low`). Items
/// delivered ahead of a gap then always lie after the snapshot a state
/// names, in the one file it is in.
fn waits<U>(chunk: &Chunk<U>, low: u64) -> bool {
    let Some(&(index, _)) = chunk.items.front() else {
        return false;
    };
    let fence = if asked_at(chunk) {
        Some(index)
    } else {
        chunk.fence
    };
    fence.is_some_and(|fence| index != low && low <= fence)
}

/// Whether the source asked for a snapshot at the next item of `chunk`.
fn asked_at<U>(chunk: &Chunk<U>) -> bool {
    let front = chunk.snapshots.front();
    front.is_some_and(|&(at, _, asked)| asked && at == chunk.handed)
}

impl<U> Drop for Pool<U> {
    fn drop(&mut self) {
        self.stop(Flow::Closed);
    }
}
