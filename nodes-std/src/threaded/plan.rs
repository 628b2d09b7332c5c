//! How a threaded node runs: its [`Plan`] (workers, order, bounds,
//! chunking, snapshots, layout of the state, error policy), fixed when the
//! node is built and adjusted once to the source it reads.

use nodes_core::{Description, Resume};

use super::snapshot::MAX_PACED_STEPS;
use super::sync::may_spin;
use crate::elastic::walk::hides_gaps_over_files;
use crate::policy::ErrorPolicy;

/// Whether a threaded node over `source` must record the source's state
/// with every item it delivers, in source order, for its states to be
/// resharded: the source reads a redistributable sampler through a node
/// whose items do not stand for a known number of positions (a filter, a
/// `try_map` that may drop records, a mix, a shuffle). Its state then never
/// counts items past its snapshot, and the positions below are read off the
/// snapshot exactly. Pipelines without such a sampler are unaffected; file
/// pipelines too (a state per item would slow every one of them tenfold):
/// there `elastic::settle` replays, once, what such a node delivered past
/// its snapshot into the saved states.
fn needs_exact_snapshots(source: &Description) -> bool {
    let found = |f: fn(&Resume) -> bool| source.subtree().any(|desc| f(desc.resume()));
    found(|r| *r == Resume::Redistributable) && found(|r| !r.counts_positions())
}

/// Whether the described subtree runs threads of its own.
fn runs_threads(source: &Description) -> bool {
    source
        .subtree()
        .any(|desc| matches!(desc.resume(), Resume::ReadsAhead { .. }))
}

/// How many times what a writer records a restore may replay (see
/// [`Plan::replay_limit`]).
const REPLAY_HEADROOM: u64 = 16;

/// When the pulling thread records the source's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Snapshots {
    /// After every item whose index + 1 is a multiple of this.
    Every(u64),
    /// At the end of a chunk, once the source has worked for a while since
    /// the last one (see `puller.rs`), and at least every
    /// [`MAX_PACED_STEPS`](super::snapshot::MAX_PACED_STEPS) items.
    Paced,
}

/// How the state is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `{snapshot, snapshot_index, steps_since_snapshot, delivered_ahead,
    /// max_offset}`.
    Indexed,
    /// `{snapshot, steps_since_snapshot}`: delivery is always in order.
    InOrder,
}

/// Chunks of room per worker in a growing window (see [`Plan::window_for`]).
const CHUNKS_PER_WORKER: usize = 2;

/// How a [`Threaded`](super::core::Threaded) runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// The node's name, for errors and thread names.
    pub(crate) node: &'static str,
    /// Prefix of the worker threads' names.
    pub(crate) thread_name: &'static str,
    /// Worker threads; `0` runs everything on the caller's thread.
    pub(crate) workers: usize,
    /// Deliver in source order (else in completion order).
    pub(crate) in_order: bool,
    /// Items pulled and not yet handed out, at most.
    pub(crate) max_in_flight: usize,
    /// Items pulled under one hold of the source lock, at most (at least
    /// one).
    pub(crate) max_chunk: usize,
    /// Whether workers start with chunks of one item and grow them while
    /// the stage is cheap (see `worker.rs`), or always ask for `max_chunk`.
    pub(crate) adaptive_chunks: bool,
    /// The window a pass starts with; it grows with the adaptive chunks up
    /// to `max_in_flight` (see [`Plan::window_for`]).
    pub(crate) min_in_flight: usize,
    pub(crate) snapshots: Snapshots,
    pub(crate) layout: Layout,
    pub(crate) policy: ErrorPolicy,
    /// Whether a thread about to block may poll first (see `hub.rs`).
    pub(crate) spin: bool,
}

impl Plan {
    /// The window while the workers' chunks hold `chunk` items: two chunks
    /// per worker, so that a worker fills one while the consumer empties
    /// the other, within `min_in_flight..=max_in_flight`. Each hand-over
    /// may cost a wake-up, so cheap items get room for large chunks; an
    /// expensive item keeps chunks of one and the starting window, so its
    /// neighbours do not pile up in memory.
    pub(crate) fn window_for(&self, chunk: usize) -> usize {
        let max = self.max_in_flight.max(1);
        self.workers
            .max(1)
            .saturating_mul(CHUNKS_PER_WORKER)
            .saturating_mul(chunk)
            .clamp(self.min_in_flight.clamp(1, max), max)
    }

    /// The plan run over `source`. Over a source whose items past a gap no
    /// state of its files would show (a filter, shuffle, pack, mix or
    /// interleave over files, see `hides_gaps_over_files`), in order.
    /// Inline, the source's own state is exact already. With workers, a
    /// source whose order varies between runs cannot be replayed, so every
    /// item carries its own snapshot and items are delivered in pull order,
    /// one per chunk: the state then never asks for a replay. When every
    /// item must carry its source's state, in source order
    /// ([`needs_exact_snapshots`], e.g. for `elastic::reshard`), the state
    /// never counts items past its snapshot.
    pub(crate) fn over(mut self, source: &Description) -> Plan {
        // Threads below share the cores: a polling thread would take turns
        // from them.
        self.spin = may_spin(self.workers) && !runs_threads(source);
        // Out of order there, what it delivered past a gap would be no
        // position of the files, and its states could not be resharded.
        self.in_order |= hides_gaps_over_files(source);
        let varies = source.varying_order().is_some();
        if self.workers == 0 || !varies && !needs_exact_snapshots(source) {
            return self;
        }
        self.in_order = true;
        self.snapshots = Snapshots::Every(1);
        if varies {
            self.max_chunk = 1;
            self.adaptive_chunks = false;
            self.min_in_flight = self.max_in_flight;
        }
        self
    }

    /// The longest replay a restore of this node does, whatever the state
    /// offered says: many times what any writer records (a snapshot at
    /// least every `snapshot_frequency` or [`MAX_PACED_STEPS`] items, plus
    /// the read-ahead), so that a state written under other options or
    /// after a few restores in a row still loads, while a count raised
    /// together with the `max_offset` recorded beside it cannot make a
    /// restore replay without end.
    pub(crate) fn replay_limit(&self) -> u64 {
        let every = match self.snapshots {
            Snapshots::Every(every) => every.max(MAX_PACED_STEPS),
            Snapshots::Paced => MAX_PACED_STEPS,
        };
        every
            .saturating_add(self.max_in_flight as u64)
            .saturating_mul(REPLAY_HEADROOM)
    }

    /// The size of a worker's first chunk: one item when the chunks adapt
    /// (see `worker.rs`), else `max_chunk`.
    pub(crate) fn first_chunk(&self) -> usize {
        if self.adaptive_chunks {
            1
        } else {
            self.max_chunk
        }
    }
}
