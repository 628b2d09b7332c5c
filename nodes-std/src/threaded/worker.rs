//! One worker thread of a pass: take credits, pull a chunk under the source
//! lock, run the [`Stage`] on it with the lock released, queue it for the
//! consumer; until the pass ends or the consumer stops it.

use std::collections::VecDeque;
use std::time::Duration;

use nodes_core::{__private::WorkerCx, Node, Result};

use super::clock::Clock;
use super::hub::{Chunk, Items, Sender};
use super::panic::catch;
use super::plan::Plan;
use super::puller::Puller;
use super::sync::{Arc, Mutex, lock};

/// The work applied to every item on the worker (or the caller's) thread.
pub(crate) trait Stage<T, U>: Send + Sync + 'static {
    /// Processes the item at `index` (its position in the pass). Panics are
    /// caught by the caller.
    fn apply(&self, index: u64, item: T) -> Result<U>;

    /// Whether `apply` may turn an item into an error.
    const FALLIBLE: bool = true;

    /// Runs the stage over a pulled chunk's `items`, leaving them an emptied
    /// buffer to pull into next; errors stay items, and a panic is caught
    /// as an error of `node`. `spare` is an emptied buffer the consumer
    /// gave back, to fill.
    fn apply_chunk(&self, node: &'static str, items: &mut Items<T>, spare: Items<U>) -> Items<U> {
        let mut out = spare;
        out.clear();
        out.extend(items.drain(..).map(|(index, item)| {
            let apply = |item| catch(node, Some(index), || self.apply(index, item));
            (index, item.and_then(|item| apply(item).map_err(Box::new)))
        }));
        out
    }
}

/// An adaptive worker (see [`Plan::first_chunk`]) doubles its chunk while
/// pulling and processing one takes less than this, up to the plan's
/// `max_chunk`: a chunk of one item keeps latency and read-ahead low for an
/// expensive stage, but a cheap stage would pay a hand-over per item.
const CHEAP_CHUNK: Duration = Duration::from_micros(100);
/// A chunk made slower than this is worth shrinking (halving).
const DEAR_CHUNK: Duration = Duration::from_micros(500);

/// Everything one worker thread needs.
pub(crate) struct Worker<N, S, U> {
    pub(crate) puller: Arc<Mutex<Puller<N>>>,
    pub(crate) stage: std::sync::Arc<S>,
    /// Counts this worker in the pass until it returns, or reports its
    /// death if it unwinds.
    pub(crate) sender: Sender<U>,
    pub(crate) plan: Plan,
    pub(crate) clock: std::sync::Arc<dyn Clock>,
}

impl<N: Node, S: Stage<N::Item, U>, U> Worker<N, S, U> {
    /// The worker's loop (see the module docs).
    pub(crate) fn run(mut self, mut cx: WorkerCx) {
        let hub = &self.sender.hub;
        let node = self.plan.node;
        let spin = self.plan.spin;
        let (adaptive, max) = (self.plan.adaptive_chunks, self.plan.max_chunk);
        let mut size = self.plan.first_chunk();
        let mut buffer = VecDeque::new();
        let mut spare = VecDeque::new();
        loop {
            let granted = hub.acquire(size, spin);
            if granted == 0 {
                return;
            }
            // A chunk's cost is what the source and the stage spent on it,
            // not the wait for the lock.
            let (mut pulled, started) = {
                let mut puller = lock(&self.puller);
                if puller.done || hub.stopping() {
                    drop(puller);
                    hub.release(granted);
                    return;
                }
                let started = adaptive.then(|| self.clock.now());
                let buffer = std::mem::take(&mut buffer);
                let pulled =
                    cx.with(|cx| puller.pull_chunk(cx, granted, || hub.stopping(), buffer));
                (pulled, started)
            };
            hub.release(granted - pulled.items.len().min(granted));
            let last = pulled.end.is_some();
            if let Some((first, _)) = pulled.items.front() {
                // Were this thread to die now, the consumer is told at the
                // chunk's first item, the one it waits for in order.
                self.sender.index = *first;
            }
            let out = std::mem::take(&mut spare);
            let items = self.stage.apply_chunk(node, &mut pulled.items, out);
            let chunk = Chunk {
                items,
                snapshots: std::mem::take(&mut pulled.snapshots),
                end: pulled.end,
            };
            buffer = pulled.items;
            // A short chunk (credits ran low, end of data) says little.
            if let Some(started) = started
                && chunk.items.len() >= size
            {
                let took = self.clock.now() - started;
                if took < CHEAP_CHUNK && size < max {
                    size = size.saturating_mul(2).min(max);
                    hub.grow(self.plan.window_for(size));
                } else if took > DEAR_CHUNK {
                    size = (size / 2).max(1);
                }
            }
            match hub.send(chunk) {
                Ok(returned) => spare = returned,
                Err(_closed) => return,
            }
            if last {
                return;
            }
        }
    }
}
