//! [`Prefetcher`]: reads ahead of the consumer on a background thread.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use nodes_core::__private::worker_cx;
use nodes_core::{Cx, Description, Error, Node, NodeId, ResetFlag, Result, State, Stateful};

use crate::worker::panic::catch;
use crate::worker::snapshot::{self, SNAPSHOT, STEPS, Saved};
use crate::worker::thread;

const NAME: &str = "Prefetcher";

/// The most items the reader hands over at once.
const MAX_CHUNK: usize = 4096;
/// A chunk is handed over early once it took this long to fill, so a slow
/// source still reaches the consumer item by item.
const MIN_CHUNK_TIME: Duration = Duration::from_micros(100);

/// This struct is created by [`NodeExt::prefetch`]. See its documentation for more.
///
/// A background thread pulls items from the source ahead of the consumer, at
/// most `prefetch_factor` of them (pulled and not yet returned), in source
/// order (FIFO).
///
/// `Prefetcher` is written by hand rather than with `#[derive(Node)]`:
/// threads cannot be expressed by the derive. Its source moves into the reader
/// thread for the length of a pass and comes back when the thread is joined (a
/// `#[node(child)]` field is always at home), and its state is the consumer's
/// position, assembled from snapshots the reader takes.
///
/// Items cross the thread boundary in chunks, so a cheap item costs a few
/// nanoseconds rather than a channel operation each: the reader closes a chunk
/// when it holds half the read-ahead (at most 4096 items) or when filling it
/// has taken about 100 µs, so a slow source still delivers item by item. A
/// source snapshot is taken at the end of every chunk.
///
/// Each hand-over of a chunk may wake a sleeping thread, which costs a few
/// microseconds: for cheap items (say under 1 µs each) choose a
/// `prefetch_factor` in the thousands, so that chunks are large. With a small
/// factor the read-ahead bound forces a hand-over every `prefetch_factor / 2`
/// items.
///
/// # State
///
/// `{"snapshot": <source state>, "steps_since_snapshot": k}`: the source state
/// at the end of a chunk the consumer finished, and how many items of the next
/// chunk it received. It describes only what the consumer received, never the
/// read-ahead. Restoring resets the source to the snapshot and skips the `k`
/// items (fewer than one chunk: at most 4095 items, or about 100 µs of source
/// work). Once the consumer has received the end of the pass, the snapshot
/// is the source's state past its end, so that the next pass after a restore
/// starts exactly as it would have without one.
///
/// Replaying needs a source that yields the same items again after a
/// restore: put an out-of-order [`ParallelMapper`](crate::ParallelMapper)
/// above a `Prefetcher`, not below it.
///
/// A new pass (`reset(None)`) after one the consumer stopped early first puts
/// the source back where the consumer stood, then resets it, so that the
/// read-ahead (a `Cycler` below wrapping around and moving a sampler to its
/// next epoch) does not leak into the next pass.
///
/// # Errors
///
/// A source error (or a panic in the source, as [`Error::Panicked`]) reaches
/// the consumer after every item before it. The pass is then over: `next`
/// returns `Ok(None)` until the next `reset`, and the state points before the
/// failed pull, so restoring retries it.
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
    /// The source while no reader thread has it (never reset, between passes,
    /// after the pass ended or was stopped).
    source: Option<N>,
    prefetch_factor: usize,
    source_description: Description,
    flag: ResetFlag,
    phase: Phase<N>,
    /// The source state at the end of the last chunk the consumer finished.
    snapshot: State,
    /// Items the consumer received since `snapshot`.
    steps: u64,
    /// The consumer received the end of data: the source stands where the
    /// consumer does.
    ended: bool,
    /// The rest of the chunk being handed out (empty unless running).
    current: std::vec::IntoIter<N::Item>,
}

impl<N: Node> fmt::Debug for Prefetcher<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(NAME)
            .field("source", &self.source_description.to_string())
            .field("prefetch_factor", &self.prefetch_factor)
            .field("phase", &self.phase)
            .field("steps_since_snapshot", &self.steps)
            .finish_non_exhaustive()
    }
}

/// Where the node stands.
// One per node, so its size does not matter; boxing the reader would add an
// indirection on the per-item path.
#[allow(clippy::large_enum_variant)]
enum Phase<N: Node> {
    /// Never reset, or the last reset failed.
    Idle,
    /// The reader thread is running.
    Running(Reader<N>),
    /// The pass ended (end of data or an error was delivered); reader joined.
    Finished,
    /// `shutdown` was called; reader joined.
    ShutDown,
}

impl<N: Node> fmt::Debug for Phase<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Idle => "Idle",
            Phase::Running(_) => "Running",
            Phase::Finished => "Finished",
            Phase::ShutDown => "ShutDown",
        })
    }
}

/// A batch of items handed from the reader to the consumer.
struct Chunk<T> {
    items: Vec<T>,
    /// The source state right after the last item, when the chunk ended
    /// normally (not on end of data or an error).
    snapshot: Option<State>,
    /// End of data (`Ok`) or an error, after the items.
    terminal: Option<Result<()>>,
}

/// The running reader thread and the consumer's side of its channels.
struct Reader<N: Node> {
    chunks: Receiver<Chunk<N::Item>>,
    /// Returns permits (item counts) to the reader. `None` once stopped.
    permits: Option<Sender<usize>>,
    stop: Arc<AtomicBool>,
    /// Joining gives the source back (`None` only if the thread panicked
    /// outside the source calls it guards, which would be a defect).
    handle: Option<JoinHandle<Option<N>>>,
    /// The size of the chunk being handed out, and its snapshot.
    current_len: usize,
    current_snapshot: Option<State>,
    terminal: Option<Result<()>>,
}

impl<N: Node> Reader<N> {
    /// Stops and joins the reader; returns the source. Idempotent.
    fn stop(&mut self) -> Option<N> {
        self.stop.store(true, Ordering::SeqCst);
        self.permits = None;
        drop(std::mem::replace(
            &mut self.chunks,
            crossbeam_channel::never(),
        ));
        self.handle.take().and_then(|h| h.join().ok().flatten())
    }
}

impl<N: Node> Drop for Reader<N> {
    fn drop(&mut self) {
        // The source is dropped with the node in this case.
        drop(self.stop());
    }
}

/// The reader thread: fill chunks within the permits, snapshot at each chunk's
/// end, send; until the source ends or fails, or the consumer goes away.
fn read_ahead<N: Node>(
    mut source: N,
    chunks: &Sender<Chunk<N::Item>>,
    permits: &Receiver<usize>,
    stop: &AtomicBool,
    prefetch_factor: usize,
) -> N {
    let mut cx = worker_cx();
    let mut available = prefetch_factor;
    let max_chunk = (prefetch_factor / 2).clamp(1, MAX_CHUNK);
    let mut flush_after = MIN_CHUNK_TIME;
    loop {
        while let Ok(n) = permits.try_recv() {
            available += n;
        }
        if available == 0 {
            match permits.recv() {
                Ok(n) => available += n,
                Err(_) => break,
            }
        }
        if stop.load(Ordering::Acquire) {
            break;
        }
        let limit = available.min(max_chunk);
        let mut items = Vec::with_capacity(limit);
        // One panic guard per chunk, not per item: it keeps the per-item path
        // tight. Items pulled before a panic stay in `items` and are delivered.
        let mut terminal = catch(NAME, None, || {
            Ok(fill_chunk(
                &mut source,
                &mut cx,
                &mut items,
                limit,
                stop,
                flush_after,
            ))
        })
        .unwrap_or_else(|e| Some(Err(e)));
        available -= items.len();
        let mut snapshot = None;
        if terminal.is_none() {
            let taken = Instant::now();
            match catch(NAME, None, || source.get_state(&cx)) {
                Ok(state) => snapshot = Some(state),
                Err(e) => terminal = Some(Err(e)),
            }
            // An expensive source state gets proportionally larger chunks.
            flush_after = MIN_CHUNK_TIME.max(taken.elapsed() * 8);
        }
        let last = terminal.is_some();
        let chunk = Chunk {
            items,
            snapshot,
            terminal,
        };
        if chunks.send(chunk).is_err() || last {
            break;
        }
    }
    source
}

/// Pulls up to `limit` items into `items`. `Some` is the end of the pass
/// (end of data or an error); `None` means the chunk is ready to hand over.
fn fill_chunk<N: Node>(
    source: &mut N,
    cx: &mut Cx,
    items: &mut Vec<N::Item>,
    limit: usize,
    stop: &AtomicBool,
    flush_after: Duration,
) -> Option<Result<()>> {
    let started = Instant::now();
    loop {
        match source.next(cx) {
            Ok(Some(item)) => items.push(item),
            Ok(None) => return Some(Ok(())),
            Err(e) => return Some(Err(e)),
        }
        let len = items.len();
        if len >= limit {
            return None;
        }
        // Checking the clock at powers of two keeps it off the per-item path
        // while bounding how long a started chunk waits.
        if len.is_power_of_two()
            && (stop.load(Ordering::Relaxed) || started.elapsed() >= flush_after)
        {
            return None;
        }
    }
}

impl<N> Prefetcher<N>
where
    N: Node + 'static,
    N::Item: Send + 'static,
{
    /// See [`NodeExt::prefetch`](crate::NodeExt::prefetch).
    pub(crate) fn new(source: N, prefetch_factor: usize) -> Result<Self> {
        if prefetch_factor == 0 {
            return Err(Error::invalid_argument(
                NAME,
                "prefetch_factor must be at least 1 (it is how many items are read ahead), found 0",
            ));
        }
        Ok(Prefetcher {
            source_description: source.describe(),
            source: Some(source),
            prefetch_factor,
            flag: ResetFlag::default(),
            phase: Phase::Idle,
            snapshot: State::new(),
            steps: 0,
            ended: false,
            current: Vec::new().into_iter(),
        })
    }

    /// Stops and joins the reader, if running, taking the source back.
    fn stop_reader(&mut self) {
        self.current = Vec::new().into_iter();
        if let Phase::Running(reader) = &mut self.phase
            && let Some(source) = reader.stop()
        {
            self.source = Some(source);
        }
    }

    /// Ends the pass: joins the reader and latches.
    fn finish(&mut self) {
        self.stop_reader();
        self.phase = Phase::Finished;
    }

    /// The consumer received the end of data and the reader is joined: the
    /// source now stands past its end, which can differ from the last
    /// chunk's snapshot plus the steps after it (a sampler that was asked for
    /// one more index counts as started, and moves to its next epoch on the
    /// next reset). Snapshot that position, so that restoring a state taken
    /// at the end of a pass sets the source up for the next pass exactly as
    /// the uninterrupted run does.
    fn snapshot_at_end(&mut self) -> Result<()> {
        let source = self.source.as_ref().ok_or_else(lost_source)?;
        self.snapshot = source.get_state(&worker_cx())?;
        self.steps = 0;
        Ok(())
    }

    /// The last item of a chunk was handed out: adopt the chunk's snapshot
    /// and give its permits back to the reader.
    #[inline(never)]
    fn finish_chunk(&mut self) {
        if let Phase::Running(reader) = &mut self.phase {
            if let Some(snapshot) = reader.current_snapshot.take() {
                self.snapshot = snapshot;
                self.steps = 0;
            }
            if let Some(permits) = &reader.permits {
                let _ = permits.send(reader.current_len);
            }
        }
    }

    /// `next` once the current chunk is used up: the end of the pass, or the
    /// next chunk from the reader (blocking until it arrives).
    #[inline(never)]
    fn next_chunk(&mut self, cx: &mut Cx) -> Result<Option<N::Item>> {
        self.flag.check(NAME)?;
        loop {
            let reader = match &mut self.phase {
                Phase::Running(reader) => reader,
                Phase::Finished => return Ok(None),
                Phase::ShutDown => return Err(Error::ShutDown { node: NAME }),
                Phase::Idle => return Err(Error::NotReset { node: NAME }),
            };
            if let Some(terminal) = reader.terminal.take() {
                self.ended = terminal.is_ok();
                self.finish();
                terminal?;
                self.snapshot_at_end()?;
                return Ok(None);
            }
            if cx.stats_enabled() {
                cx.record_queue_depth(reader.chunks.len());
            }
            let waiting = cx.timing().then(Instant::now);
            let received = reader.chunks.recv();
            if let Some(started) = waiting {
                cx.record_blocked(started.elapsed());
            }
            let Ok(chunk) = received else {
                // The reader always ends with a terminal chunk; this is a defect.
                self.finish();
                return Err(Error::Panicked {
                    node: NAME,
                    index: None,
                    message: "the reader thread exited without finishing the pass".to_owned(),
                });
            };
            reader.current_len = chunk.items.len();
            reader.current_snapshot = chunk.snapshot;
            reader.terminal = chunk.terminal;
            self.current = chunk.items.into_iter();
            if let Some(item) = self.current.next() {
                self.steps += 1;
                if self.current.len() == 0 {
                    self.finish_chunk();
                }
                return Ok(Some(item));
            }
        }
    }

    /// Moves the source into a new reader thread.
    fn spawn_reader(&mut self) -> Result<Reader<N>> {
        let source = self.source.take().ok_or_else(lost_source)?;
        let (chunk_tx, chunk_rx) = crossbeam_channel::unbounded();
        let (permit_tx, permit_rx) = crossbeam_channel::unbounded();
        // The source is handed over once the thread runs, so that a failure
        // to start the thread leaves it with us.
        let (source_tx, source_rx) = crossbeam_channel::bounded::<N>(1);
        let stop = Arc::new(AtomicBool::new(false));
        let prefetch_factor = self.prefetch_factor;
        let thread_stop = Arc::clone(&stop);
        let spawned = thread::spawn(NAME, "nodes-prefetch".to_owned(), move || {
            let source = source_rx.recv().ok()?;
            Some(read_ahead(
                source,
                &chunk_tx,
                &permit_rx,
                &thread_stop,
                prefetch_factor,
            ))
        });
        let handle = match spawned {
            Ok(handle) => handle,
            Err(e) => {
                self.source = Some(source);
                return Err(e);
            }
        };
        // The thread waits for the source, so this cannot fail while it lives.
        if let Err(crossbeam_channel::SendError(source)) = source_tx.send(source) {
            self.source = Some(source);
            let _ = handle.join();
            return Err(lost_source());
        }
        Ok(Reader {
            chunks: chunk_rx,
            permits: Some(permit_tx),
            stop,
            handle: Some(handle),
            current_len: 0,
            current_snapshot: None,
            terminal: None,
        })
    }
}

/// The error for a source that did not come back from its reader thread.
fn lost_source() -> Error {
    Error::Panicked {
        node: NAME,
        index: None,
        message: "the reader thread panicked and the source was lost".to_owned(),
    }
}

impl<N> Node for Prefetcher<N>
where
    N: Node + 'static,
    N::Item: Send + 'static,
{
    type Item = N::Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<N::Item>> {
        cx.observe(NodeId::of(self), NAME, |cx| {
            // The per-item path: the next item of the current chunk. Items
            // are only here after a successful reset.
            if let Some(item) = self.current.next() {
                self.steps += 1;
                if self.current.len() == 0 {
                    self.finish_chunk();
                }
                return Ok(Some(item));
            }
            self.next_chunk(cx)
        })
    }
}

impl<N> Stateful for Prefetcher<N>
where
    N: Node + 'static,
    N::Item: Send + 'static,
{
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        // Validate our own keys before touching anything.
        let saved = state.map(|s| Saved::decode_in_order(NAME, s)).transpose()?;
        // A new pass after one the consumer did not finish starts from where
        // the consumer stood, not from where the reader got to.
        let rewind = (saved.is_none() && self.flag.is_reset() && !self.ended)
            .then(|| (self.snapshot.clone(), self.steps));
        // Unusable until this reset succeeds.
        self.flag = ResetFlag::default();
        self.ended = false;
        self.stop_reader();
        self.phase = Phase::Idle;
        let source = self.source.as_mut().ok_or_else(lost_source)?;
        if let Some((snapshot, steps)) = rewind {
            snapshot::rewind(source, &snapshot, steps)?;
        }
        source.reset(saved.as_ref().map(|s| &s.snapshot))?;
        let mut cx = worker_cx();
        if let Some(saved) = &saved {
            for i in 0..saved.steps {
                if source.next(&mut cx)?.is_none() {
                    return Err(Error::bad_state(
                        saved.steps_path.clone(),
                        format!(
                            "the source ended after {i} of the {} items to skip: the state does not belong to this source",
                            saved.steps
                        ),
                    ));
                }
            }
        }
        let snapshot = source.get_state(&cx)?;
        self.source_description = source.describe();
        let reader = self.spawn_reader()?;
        self.snapshot = snapshot;
        self.steps = 0;
        self.phase = Phase::Running(reader);
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        self.flag.check(NAME)?;
        if let Phase::Idle = self.phase {
            return Err(Error::NotReset { node: NAME });
        }
        let mut state = State::new();
        state.insert_child(SNAPSHOT, self.snapshot.clone());
        state.insert(STEPS, self.steps)?;
        Ok(state)
    }

    fn describe(&self) -> Description {
        // Keyed by where the source's state lives in ours.
        Description::new(NAME).child(SNAPSHOT, self.source_description.clone())
    }

    fn shutdown(&mut self) {
        self.stop_reader();
        if !matches!(self.phase, Phase::Idle) {
            self.phase = Phase::ShutDown;
        }
        if let Some(source) = &mut self.source {
            source.shutdown();
        }
    }
}

// A concrete `Prefetcher` that was only constructed has no `next` or
// `get_state`: calling them is a compile error that says to start the pipeline.
nodes_core::__started_guards!(impl[N: Node] Prefetcher<N>);

impl<N: Node> Drop for Prefetcher<N> {
    fn drop(&mut self) {
        // Dropping the reader stops and joins its thread.
        self.phase = Phase::Idle;
    }
}
