//! Per-node statistics, carried by the execution context when a
//! [`Loader`](crate::Loader) turns them on.
//!
//! Nodes report through [`Cx::observe`](crate::Cx::observe) (every stock node
//! does): items produced, time inside `next` excluding observed children
//! ("self time"), time blocked on workers or queues, and queue depths. With
//! stats off — the default — `observe` is a branch on a null pointer.
//!
//! With stats on, items and calls are counted exactly. Reading the clock
//! costs more than a cheap node's `next`, so times are sampled: one outermost
//! call in [`TIME_EVERY`] (a call from the loader into the root) is timed,
//! together with every call below it, starting with the first. The first
//! counts as it is (it may carry start-up costs, such as starting threads);
//! each node's time in the others is scaled up by its calls over its timed
//! calls.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// One outermost call in this many is timed, with every call below it.
pub(crate) const TIME_EVERY: u64 = 16;

/// Identifies one node instance for statistics: its address while running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId(usize);

impl NodeId {
    /// The id of `node` (its address).
    pub fn of<T: ?Sized>(node: &T) -> NodeId {
        NodeId(std::ptr::from_ref(node).cast::<()>() as usize)
    }
}

#[derive(Debug, Default, Clone)]
struct Row {
    name: &'static str,
    label: String,
    items: u64,
    calls: u64,
    /// Calls inside the first outermost call, which is always timed and is
    /// counted as it is (it may include start-up costs that the others do
    /// not have, such as starting threads), then calls inside the later
    /// timed outermost calls (index `outermost > 1`).
    timed: [Timed; 2],
    depth_sum: u64,
    depth_samples: u64,
    depth_max: u64,
    skipped: u64,
    /// The rows of the nodes this one called.
    children: Callees,
}

/// Timed calls and the time they took.
#[derive(Debug, Default, Clone, Copy)]
struct Timed {
    calls: u64,
    self_time: Duration,
    blocked: Duration,
}

impl Timed {
    fn add(&mut self, other: Timed) {
        self.calls += other.calls;
        self.self_time += other.self_time;
        self.blocked += other.blocked;
    }
}

/// Rows of the nodes seen called from one place, as `(node address, name,
/// row)`: a node and its first field share an address, so the address alone
/// does not identify a node. A list, searched in order: a node calls one or
/// a few others.
type Callees = Vec<(NodeId, &'static str, usize)>;

struct Frame {
    row: usize,
    /// When the call started, if it is timed.
    start: Option<Instant>,
    children: Duration,
}

/// Collects statistics while a pipeline runs.
#[derive(Default)]
pub(crate) struct Recorder {
    rows: Vec<Row>,
    /// The rows of the nodes called with nothing observed above them.
    roots: Callees,
    /// How many children of each name a row has seen, for sibling labels.
    sibling_counts: HashMap<(Option<usize>, &'static str), usize>,
    stack: Vec<Frame>,
    /// Outermost calls so far.
    outermost: u64,
    /// Whether the current outermost call (and all below it) is timed.
    timing: bool,
    /// The label its parent's description gives the node called next (set
    /// by [`Cx::child_role`](crate::Cx::child_role), until the next call
    /// or return).
    pub(crate) role: Option<Arc<str>>,
    /// For a worker thread's recorder: the label of the node that started
    /// the thread, which its rows are shown under.
    prefix: Option<String>,
    /// The rows of the worker threads that finished, merged by label (as
    /// many as there are nodes, whatever the number of passes), shared by
    /// every recorder forked from the same loader's.
    finished: Arc<Mutex<Merged>>,
}

impl Recorder {
    /// A recorder for a worker thread started by the node being observed now.
    pub(crate) fn fork(&self) -> Recorder {
        let here = self.stack.last().map(|f| self.rows[f.row].label.as_str());
        let prefix = match (&self.prefix, here) {
            (Some(p), Some(h)) => Some(format!("{p}/{h}")),
            (Some(p), None) => Some(p.clone()),
            (None, h) => h.map(str::to_owned),
        };
        Recorder {
            prefix,
            finished: Arc::clone(&self.finished),
            ..Recorder::default()
        }
    }

    /// Adds a worker thread's statistics to the loader's recorder.
    pub(crate) fn finish(&self) {
        merge(&mut lock(&self.finished), self.labelled_rows());
    }

    /// How many rows of finished worker threads are kept.
    #[cfg(test)]
    pub(crate) fn retained(&self) -> usize {
        lock(&self.finished).len()
    }

    /// This recorder's rows with their full labels.
    fn labelled_rows(&self) -> impl Iterator<Item = (String, &Row)> {
        self.rows.iter().map(|row| match &self.prefix {
            Some(p) => (format!("{p}/{}", row.label), row),
            None => (row.label.clone(), row),
        })
    }

    fn row_for(&mut self, id: NodeId, name: &'static str) -> usize {
        let parent = self.stack.last().map(|f| f.row);
        let callees = match parent {
            Some(p) => &self.rows[p].children,
            None => &self.roots,
        };
        let same =
            |&&(i, n, _): &&(NodeId, &str, usize)| i == id && (std::ptr::eq(n, name) || n == name);
        match callees.iter().find(same) {
            Some(&(.., row)) => row,
            None => self.new_row(id, name, parent),
        }
    }

    #[cold]
    fn new_row(&mut self, id: NodeId, name: &'static str, parent: Option<usize>) -> usize {
        let count = self.sibling_counts.entry((parent, name)).or_insert(0);
        *count += 1;
        let own = match (self.role.take(), *count) {
            (Some(role), _) => format!("{role}: {name}"),
            (None, 1) => name.to_owned(),
            (None, n) => format!("{name}#{n}"),
        };
        let label = match parent {
            Some(p) => format!("{}/{own}", self.rows[p].label),
            None => own,
        };
        self.rows.push(Row {
            name,
            label,
            ..Row::default()
        });
        let row = self.rows.len() - 1;
        match parent {
            Some(p) => self.rows[p].children.push((id, name, row)),
            None => self.roots.push((id, name, row)),
        }
        row
    }

    pub(crate) fn enter(&mut self, id: NodeId, name: &'static str) {
        if self.stack.is_empty() {
            self.timing = self.outermost.is_multiple_of(TIME_EVERY);
            self.outermost += 1;
        }
        let row = self.row_for(id, name);
        self.role = None;
        self.stack.push(Frame {
            row,
            start: self.timing.then(Instant::now),
            children: Duration::ZERO,
        });
    }

    pub(crate) fn exit(&mut self, produced: bool) {
        self.role = None;
        let Some(frame) = self.stack.pop() else {
            return;
        };
        let row = &mut self.rows[frame.row];
        row.calls += 1;
        row.items += u64::from(produced);
        if let Some(start) = frame.start {
            let elapsed = start.elapsed();
            let timed = &mut row.timed[usize::from(self.outermost > 1)];
            timed.calls += 1;
            timed.self_time += elapsed.saturating_sub(frame.children);
            if let Some(parent) = self.stack.last_mut() {
                parent.children += elapsed;
            }
        }
    }

    /// Whether the current call is timed.
    pub(crate) fn timing(&self) -> bool {
        self.timing && !self.stack.is_empty()
    }

    pub(crate) fn blocked(&mut self, waited: Duration) {
        if let (true, Some(frame)) = (self.timing, self.stack.last()) {
            self.rows[frame.row].timed[usize::from(self.outermost > 1)].blocked += waited;
        }
    }

    pub(crate) fn skipped(&mut self, n: u64) {
        if let Some(frame) = self.stack.last() {
            let row = &mut self.rows[frame.row];
            row.skipped = row.skipped.saturating_add(n);
        }
    }

    pub(crate) fn queue_depth(&mut self, depth: usize) {
        if let Some(frame) = self.stack.last() {
            let row = &mut self.rows[frame.row];
            let depth = depth as u64;
            row.depth_sum += depth;
            row.depth_samples += 1;
            row.depth_max = row.depth_max.max(depth);
        }
    }

    pub(crate) fn snapshot(&self) -> Stats {
        // Rows with the same label (the same node seen at two addresses, e.g.
        // after the loader moved) are merged.
        let mut merged = lock(&self.finished).clone();
        merge(&mut merged, self.labelled_rows());
        let mut merged: Vec<NodeStats> = merged
            .into_iter()
            .map(|(mut n, [first, later])| {
                n.timed_calls = first.calls + later.calls;
                // The first outermost call as it is; the other calls from the
                // later timed ones (or, if there are none, from the first).
                let (base, sample, scale) = if later.calls > 0 {
                    let rest = n.calls.saturating_sub(first.calls);
                    (first, later, rest as f64 / later.calls as f64)
                } else if first.calls > 0 {
                    (Timed::default(), first, n.calls as f64 / first.calls as f64)
                } else {
                    (Timed::default(), Timed::default(), 0.0)
                };
                n.self_time = base.self_time + sample.self_time.mul_f64(scale);
                n.blocked = base.blocked + sample.blocked.mul_f64(scale);
                n
            })
            .collect();
        merged.sort_by(|a, b| b.self_time.cmp(&a.self_time).then(a.node.cmp(&b.node)));
        Stats { nodes: merged }
    }
}

/// Per label: the sums of the rows of that label, and of their timed calls.
type Merged = Vec<(NodeStats, [Timed; 2])>;

/// Adds `rows` to `merged`, each to the entry of its label (a new one if
/// there is none).
fn merge<'a>(merged: &mut Merged, rows: impl Iterator<Item = (String, &'a Row)>) {
    for (label, row) in rows {
        let at = merged.iter().position(|(n, _)| n.node == label);
        let at = at.unwrap_or_else(|| {
            let entry = NodeStats {
                node: label,
                name: row.name,
                ..NodeStats::default()
            };
            merged.push((entry, [Timed::default(); 2]));
            merged.len() - 1
        });
        let (entry, sums) = &mut merged[at];
        entry.items += row.items;
        entry.calls += row.calls;
        entry.skipped += row.skipped;
        entry.depth_sum += row.depth_sum;
        entry.depth_samples += row.depth_samples;
        entry.max_queue_depth = entry.max_queue_depth.max(row.depth_max);
        for (sum, timed) in sums.iter_mut().zip(row.timed) {
            sum.add(timed);
        }
    }
}

/// A poisoned lock only means a panic while merging: the counts are kept.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A snapshot of per-node statistics, bottleneck first (most self time).
///
/// Items and calls are exact; times are estimated from a sample of the calls
/// (see [`NodeStats::timed_calls`]).
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// One entry per observed node.
    pub nodes: Vec<NodeStats>,
}

/// Statistics of one node.
#[derive(Debug, Clone, Default)]
pub struct NodeStats {
    /// Where the node sits: type names from the root, `/`-separated
    /// (`Name#2` for a second sibling of the same type; `role: Name` for a
    /// child its parent labels as its description does, such as a mix's
    /// `dataset web: Packer`).
    pub node: String,
    /// The node's type name.
    pub name: &'static str,
    /// Items returned by `next`.
    pub items: u64,
    /// Calls to `next` (items plus end signals and errors).
    pub calls: u64,
    /// Calls that were timed. Reading the clock costs more than a cheap
    /// node's `next`, so one outermost call in 16 (from the loader into the
    /// root) is timed, with every call below it, starting with the first. The
    /// times below count the first as it is and scale the others up to all
    /// calls.
    pub timed_calls: u64,
    /// Time inside `next`, excluding time inside observed children
    /// (estimated from the timed calls).
    pub self_time: Duration,
    /// Part of `self_time` spent blocked on workers or queues (estimated
    /// from the timed calls).
    pub blocked: Duration,
    /// Largest queue depth reported.
    pub max_queue_depth: u64,
    /// Bad records dropped under a skipping
    /// [`ErrorPolicy`](../nodes_std/enum.ErrorPolicy.html).
    pub skipped: u64,
    depth_sum: u64,
    depth_samples: u64,
}

impl NodeStats {
    /// Mean reported queue depth, if the node reports one.
    pub fn mean_queue_depth(&self) -> Option<f64> {
        (self.depth_samples > 0).then(|| self.depth_sum as f64 / self.depth_samples as f64)
    }
}

impl Stats {
    /// The entry for the first node whose position ends with `suffix`.
    pub fn get(&self, suffix: &str) -> Option<&NodeStats> {
        self.nodes.iter().find(|n| n.node.ends_with(suffix))
    }
}

/// A table, bottleneck first.
impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.nodes.iter().map(|n| n.node.len()).fold(4, usize::max);
        writeln!(
            f,
            "{:<width$}  {:>10}  {:>12}  {:>10}  {:>12}  {:>10}",
            "node", "items", "self ms", "self %", "blocked ms", "queue avg"
        )?;
        let total: Duration = self.nodes.iter().map(|n| n.self_time).sum();
        for n in &self.nodes {
            // Every self time is zero when the total is.
            let share =
                100.0 * n.self_time.as_secs_f64() / total.as_secs_f64().max(f64::MIN_POSITIVE);
            let queue = n
                .mean_queue_depth()
                .map_or_else(|| "-".to_owned(), |d| format!("{d:.1}"));
            writeln!(
                f,
                "{:<width$}  {:>10}  {:>12.3}  {:>9.1}%  {:>12.3}  {:>10}",
                n.node,
                n.items,
                n.self_time.as_secs_f64() * 1e3,
                share,
                n.blocked.as_secs_f64() * 1e3,
                queue
            )?;
        }
        Ok(())
    }
}
