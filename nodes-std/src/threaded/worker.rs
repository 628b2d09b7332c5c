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

/// A chunk ready to send, and the emptied buffer of the chunk it came from.
pub(crate) type Sent<T, U> = (Chunk<U>, Items<T>);

/// The work applied to every item on the worker (or the caller's) thread.
pub(crate) trait Stage<T, U>: Send + Sync + 'static {
    /// Processes the item at `index` (its position in the pass). Panics are
    /// caught by the caller.
    fn apply(&self, index: u64, item: T) -> Result<U>;

    /// Whether `apply` may turn an item into an error.
    const FALLIBLE: bool = true;

    /// Runs the stage over a pulled chunk, filling `out` (an emptied buffer
    /// the consumer gave back), and returns the chunk to send with the
    /// pulled chunk's emptied buffer, to pull into next. Errors stay items,
    /// and a panic is caught as an error of `node`.
    fn apply_chunk(&self, node: &'static str, pulled: Chunk<T>, mut out: Items<U>) -> Sent<T, U> {
        let Chunk {
            mut items,
            snapshots,
            end,
            fence,
            handed,
        } = pulled;
        out.clear();
        out.extend(items.drain(..).map(|(index, item)| {
            let apply = |item| catch(node, Some(index), || self.apply(index, item));
            (index, item.and_then(|item| apply(item).map_err(Box::new)))
        }));
        (
            Chunk {
                items: out,
                snapshots,
                end,
                fence,
                handed,
            },
            items,
        )
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
        let (hub, plan) = (&self.sender.hub, self.plan);
        let mut size = plan.first_chunk();
        let (mut buffer, mut spare) = (VecDeque::new(), VecDeque::new());
        loop {
            let granted = hub.acquire(size, plan.spin);
            if granted == 0 {
                return;
            }
            // A chunk's cost is what the source and the stage spent on it,
            // not the wait for the lock.
            let (pulled, started) = {
                let mut puller = lock(&self.puller);
                if puller.done || hub.stopping() {
                    hub.release(granted);
                    return;
                }
                let started = plan.adaptive_chunks.then(|| self.clock.now());
                let buffer = std::mem::take(&mut buffer);
                let pulled =
                    cx.with(|cx| puller.pull_chunk(cx, granted, || hub.stopping(), buffer));
                (pulled, started)
            };
            hub.release(granted - pulled.items.len().min(granted));
            if let Some((first, _)) = pulled.items.front() {
                // Were this thread to die now, the consumer is told at the
                // chunk's first item, the one it waits for in order.
                self.sender.index = *first;
            }
            let out = std::mem::take(&mut spare);
            let (chunk, emptied) = self.stage.apply_chunk(plan.node, pulled, out);
            buffer = emptied;
            let last = chunk.end.is_some();
            // A short chunk (credits ran low, end of data) says little.
            if let Some(started) = started
                && chunk.items.len() >= size
            {
                let took = self.clock.now() - started;
                if took < CHEAP_CHUNK && size < plan.max_chunk {
                    size = size.saturating_mul(2).min(plan.max_chunk);
                    hub.grow(plan.window_for(size));
                } else if took > DEAR_CHUNK {
                    size = (size / 2).max(1);
                }
            }
            spare = match hub.send(chunk) {
                Ok(returned) if !last => returned,
                // The pass is closed, or this chunk ends it.
                _ => return,
            };
        }
    }
}
