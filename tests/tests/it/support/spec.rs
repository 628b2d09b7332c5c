//! The one random-pipeline generator of the test suite.
//!
//! A [`Spec`] is a plain description of a pipeline: a tree of stock nodes
//! over small sources. [`build`] turns it into a fresh node each time it is
//! called, so a test can build the same pipeline again to restore a state
//! into it (or [`Spec::reworked`] builds it with other worker counts, which
//! a state must not care about). [`spec_strategy`] draws specs of every
//! shape for proptest, [`chain_strategy`] draws the item-by-item chains the
//! fault tests need.
//!
//! Every pipeline yields one item type, [`V`], so that type-changing nodes
//! (batch, zip, the samplers' tags) stack in any order. User functions
//! sleep a random 0–300 µs on some items ([`Fun::jitter`]) and may fail on
//! chosen items ([`Fun::fail`]: an `Err`, every time the item is seen);
//! `try_map`, `par_map` and `prefetch` get a random [`ErrorPolicy`].
//!
//! # What one run determines
//!
//! An out-of-order `ParallelMapper` with workers delivers items in
//! completion order, which varies from run to run. What an uninterrupted
//! run then says about any other run (a resumed one) is the pipeline's
//! [`Level`]: the sequence ([`Level::Exact`]), the multiset of each epoch's
//! items ([`Level::Multiset`]: the order varies), or the multiset of each
//! epoch's plain values ([`Level::Leaves`]: batches above the varying map
//! group them differently). Errors count as items at every level.
//!
//! The generator draws out-of-order maps (with 0 to 4 workers) everywhere
//! their output is determined at one of these levels, with nothing
//! rewritten: below map, try_map, filter, shuffle, cycle, prefetch, other
//! parallel maps (in order or not, any snapshot frequency), batch, unbatch,
//! flat_map (both refused when they start), filter_map, pack (without
//! segments), the outer node of an interleave, and samplers that drain
//! every source (`AllDatasetsExhausted`). It does not draw them where one
//! run determines nothing another run could be compared with: below nodes
//! that pick *which* items pass by their position (header, zip, shard,
//! `batch_exact`'s dropped remainder, `pack_exact`'s, samplers that stop or
//! restart a source part-way, the segment ids of a pack), inside the inner
//! pipelines of an interleave (not asked for their order before they are
//! made, see `Interleave::resume`), below a filter over batches,
//! below a function that may fail on batches (the batches vary, so which
//! ones fail does too), and below an error policy that ends or cuts a pass
//! (`Fail`, `SkipAtMost`: which items come before the cut varies).

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nodes_std::prelude::*;
use nodes_std::{
    MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, ParallelOptions, StopCriteria,
};
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};
use serde::{Deserialize, Serialize};

use super::Probe;
use super::corpus::{SHARED_VALUES, shared_corpus};
use super::faulty::{Fault, Faulty};

/// The one item type of every generated pipeline.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) enum V {
    /// A plain value.
    I(u64),
    /// A batch (or a `try_map` wrapper).
    L(Vec<V>),
    /// A zipped pair, or a tagged item (tag, item).
    P(Box<V>, Box<V>),
}

impl V {
    /// An element-wise map (each leaf on its own), so it keeps any multiset
    /// of leaves a multiset.
    pub(crate) fn mapped(self, k: u64) -> V {
        match self {
            V::I(x) => V::I(x.wrapping_mul(k).wrapping_add(1) % 1000),
            V::L(xs) => V::L(xs.into_iter().map(|x| x.mapped(k)).collect()),
            V::P(a, b) => V::P(Box::new(a.mapped(k)), Box::new(b.mapped(k))),
        }
    }

    /// A hash of the value, for filters and failing items.
    pub(crate) fn fingerprint(&self) -> u64 {
        match self {
            V::I(x) => *x,
            V::L(xs) => xs
                .iter()
                .fold(7, |h, x| h.wrapping_mul(31).wrapping_add(x.fingerprint())),
            V::P(a, b) => a.fingerprint().wrapping_mul(17) ^ b.fingerprint(),
        }
    }

    /// The elements of a list; anything else as a list of one.
    pub(crate) fn flatten(self) -> Vec<V> {
        match self {
            V::L(xs) => xs,
            other => vec![other],
        }
    }

    /// The plain values inside, in order.
    pub(crate) fn leaves(&self, out: &mut Vec<u64>) {
        match self {
            V::I(x) => out.push(*x),
            V::L(xs) => xs.iter().for_each(|x| x.leaves(out)),
            V::P(a, b) => {
                a.leaves(out);
                b.leaves(out);
            }
        }
    }
}

/// One item of a run as the tests compare it: a value, or an error (by the
/// message of its root cause, which names the failed item's value; node
/// names and item indices are left out, as they may differ between worker
/// counts).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Out {
    Ok(V),
    Err(String),
}

impl Out {
    pub(crate) fn from_result(item: Result<V>) -> Out {
        match item {
            Ok(v) => Out::Ok(v),
            Err(e) => Out::Err(root_cause(&e)),
        }
    }

    pub(crate) fn is_err(&self) -> bool {
        matches!(self, Out::Err(_))
    }
}

/// The message of the innermost source of `err`.
pub(crate) fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = err;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}

/// A generated pipeline.
pub(crate) type Pipeline = Box<dyn Node<Item = V>>;

/// The order in which a sampler-driven source visits its indices.
#[derive(Clone, Debug)]
pub(crate) enum Order {
    Sequential,
    Random(u64),
    /// One rank's shard of a random order (`pad` falls back to dropping the
    /// remainder for an empty sampler, which cannot be padded).
    Sharded {
        rank: u64,
        world: u64,
        pad: bool,
        seed: u64,
    },
}

/// A leaf of the pipeline tree.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// `IterableWrapper` over a vector (restored by re-iterating).
    Iter(Vec<u64>),
    /// `IterableWrapper::seekable` over a range (restored by seeking).
    Seekable(u64),
    /// The test-support `Probe`: its items tell how often it was reset.
    Probe(u64),
    /// `SamplerWrapper` alone: the indices themselves.
    Indices(usize, Order),
    /// `MapStyleWrapper` reading a vector in the sampler's order.
    MapStyle(Vec<u64>, Order),
    /// The test-support `Faulty` over `0..len`; `true`: it carries the
    /// run's injected fault (see [`build_with`]).
    Faulty(u64, bool),
    /// `Files::list` of the shared corpus's files (indices into
    /// [`SHARED_VALUES`], repeats allowed), read with `read_jsonl` (`true`)
    /// or `read_lines` and parsed, shuffled by `shuffle_files` if a seed is
    /// given.
    Files {
        files: Vec<usize>,
        jsonl: bool,
        shuffle: Option<u64>,
    },
}

/// A record of the shared corpus's JSON-lines files.
#[derive(Deserialize)]
struct Record {
    v: u64,
}

/// What a user function does besides its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fun {
    /// `(m, r)`: items whose fingerprint is `r` modulo `m` fail with `Err`,
    /// every time they are seen (a bad record).
    pub(crate) fail: Option<(u64, u64)>,
    /// The percentage of calls that sleep a random 0–300 µs first.
    pub(crate) jitter: u8,
    /// The function carries the run's injected fault (see [`build_with`]).
    pub(crate) injected: bool,
    /// The node's error policy (`try_map`, `par_map`; a `map` has none).
    pub(crate) policy: ErrorPolicy,
}

impl Default for Fun {
    fn default() -> Self {
        Fun {
            fail: None,
            jitter: 0,
            injected: false,
            policy: ErrorPolicy::Deliver,
        }
    }
}

/// Whether an error policy ends or cuts a pass at an error: then which
/// items come before the end depends on the order, so only an exact input
/// (and an order that does not vary) determines the output.
pub(crate) fn cuts_passes(policy: ErrorPolicy) -> bool {
    matches!(policy, ErrorPolicy::Fail | ErrorPolicy::SkipAtMost(_))
}

/// Options of a `ParallelMapper`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Par {
    pub(crate) workers: usize,
    pub(crate) in_order: bool,
    pub(crate) max_concurrent: Option<usize>,
    pub(crate) snapshot_frequency: usize,
}

impl Par {
    /// Its output order varies between runs: out of order, with workers.
    pub(crate) fn varies(&self) -> bool {
        self.workers > 0 && !self.in_order
    }
}

/// Where a `prefetch` runs its source: on the reader, or on the consumer's
/// thread while that measures faster (`inline_when_faster`, `Adaptive`),
/// always on the reader (the default, `Pinned`), or switching between the two every so many items (the switch itself,
/// which the clock alone would rarely reach in a short test).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reader {
    Adaptive,
    Pinned,
    SwitchEvery(u64),
}

/// The readers `reworked` and the strategies draw from.
const READERS: [Reader; 6] = [
    Reader::Adaptive,
    Reader::Pinned,
    Reader::SwitchEvery(1),
    Reader::SwitchEvery(2),
    Reader::SwitchEvery(3),
    Reader::SwitchEvery(7),
];

fn reader_strategy() -> BoxedStrategy<Reader> {
    prop::sample::select(READERS.to_vec()).boxed()
}

/// A pipeline: a source, or a stock node over other specs.
#[derive(Clone, Debug)]
pub(crate) enum Spec {
    Src(Source),
    Map(Box<Spec>, u64, Fun),
    TryMap(Box<Spec>, Fun),
    /// Keeps items whose fingerprint is not `r` modulo `m`.
    Filter(Box<Spec>, u64, u64),
    /// Batch size, drop the last short batch.
    Batch(Box<Spec>, usize, bool),
    Unbatch(Box<Spec>),
    Header(Box<Spec>, u64),
    CycleN(Box<Spec>, u64),
    /// An endless cycle cut by a header.
    CycleHeader(Box<Spec>, u64),
    Shuffle(Box<Spec>, usize, u64),
    Zip(Box<Spec>, Box<Spec>),
    /// Rank, world size.
    Shard(Box<Spec>, u64, u64),
    ParMap(Box<Spec>, Par, Fun),
    /// Read-ahead, error policy, where the source runs.
    Prefetch(Box<Spec>, usize, ErrorPolicy, Reader),
    /// Sources with integer weights (at least one positive). `cap` bounds a
    /// `CycleForever` pass with a header; `rank < world`.
    Weighted {
        sources: Vec<(Spec, u8)>,
        stop: StopCriteria,
        seed: u64,
        rank: u64,
        world: u64,
        tagged: bool,
        cap: u64,
    },
    RoundRobin {
        sources: Vec<Spec>,
        stop: StopCriteria,
        tagged: bool,
        cap: u64,
    },
    /// `flat_map` to [`copies`]`(v, m)`: 0 to `m - 1` mapped copies.
    FlatMap(Box<Spec>, u64),
    /// `filter_map`: keeps items whose fingerprint is not `r` modulo `m`,
    /// mapped.
    FilterMap(Box<Spec>, u64, u64),
    /// `pack` of each item's leaves: sequence length, drop the last short
    /// chunk, with segment ids and positions.
    Pack(Box<Spec>, usize, bool, bool),
    /// `interleave(cycle, block)` of one `inner` pipeline per outer item,
    /// each of its items paired with that outer item.
    Interleave {
        outer: Box<Spec>,
        inner: Box<Spec>,
        cycle: usize,
        block: usize,
    },
}

/// What a generated `flat_map` makes of an item: 0 to `m - 1` copies (by
/// its fingerprint), each mapped differently.
pub(crate) fn copies(v: V, m: u64) -> Vec<V> {
    let n = v.fingerprint() % m;
    (0..n).map(|i| v.clone().mapped(i + 2)).collect()
}

/// A generated `pack`'s output as one item: the tokens, and with segments
/// a pair of the tokens and the segment ids and positions interleaved.
fn packed(tokens: Vec<u64>, segments: Option<(Vec<u32>, Vec<u32>)>) -> V {
    let tokens = V::L(tokens.into_iter().map(V::I).collect());
    match segments {
        None => tokens,
        Some((ids, positions)) => {
            let meta = ids
                .into_iter()
                .zip(positions)
                .flat_map(|(s, p)| [V::I(u64::from(s)), V::I(u64::from(p))])
                .collect();
            V::P(Box::new(tokens), Box::new(V::L(meta)))
        }
    }
}

// ---------------------------------------------------------------------------
// Building

/// A fault injected into one run (the fault tests): it fires once, at the
/// item equal to `target`, in the function or `Faulty` source marked to
/// carry it. Build every pipeline of a run with the same one.
#[derive(Clone, Debug)]
pub(crate) struct Injected {
    pub(crate) fault: Fault,
    pub(crate) target: V,
}

thread_local! {
    static JITTER: Cell<u64> = Cell::new(jitter_seed());
}

fn jitter_seed() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (time ^ NEXT.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)) | 1
}

/// Sleeps a random 0–300 µs on `percent` % of the calls.
fn jitter(percent: u8) {
    if percent == 0 {
        return;
    }
    let r = JITTER.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    });
    if r % 100 < u64::from(percent) {
        // Jitter only: every generated case is checked in any completion order.
        std::thread::sleep(Duration::from_micros((r >> 32) % 301));
    }
}

/// The user function's side: jitter, the injected fault, the bad records.
fn call(fun: Fun, injected: Option<&Injected>, v: &V) -> std::result::Result<(), String> {
    jitter(fun.jitter);
    if fun.injected
        && let Some(inj) = injected
        && *v == inj.target
    {
        inj.fault.fire()?;
    }
    match fun.fail {
        Some((m, r)) if v.fingerprint() % m == r => Err(format!("bad item {v:?}")),
        _ => Ok(()),
    }
}

fn sampler(order: &Order, len: usize) -> Box<dyn Node<Item = usize>> {
    match *order {
        Order::Sequential => SamplerWrapper::new(SequentialSampler::new(len)).boxed(),
        Order::Random(seed) => SamplerWrapper::new(RandomSampler::new(len, seed)).boxed(),
        Order::Sharded {
            rank,
            world,
            pad,
            seed,
        } => {
            let remainder = if pad && len > 0 {
                Remainder::Pad
            } else {
                Remainder::Drop
            };
            let sharded =
                ShardedSampler::new(RandomSampler::new(len, seed), rank, world, remainder)
                    .expect("the strategy makes valid shards");
            SamplerWrapper::new(sharded).boxed()
        }
    }
}

fn source(src: &Source, injected: Option<&Injected>) -> Pipeline {
    match src {
        Source::Iter(items) => IterableWrapper::new(items.clone()).map(V::I).boxed(),
        Source::Seekable(n) => IterableWrapper::seekable(0..*n).map(V::I).boxed(),
        Source::Probe(n) => Probe::new(*n).map(V::I).boxed(),
        Source::Indices(n, order) => sampler(order, *n).map(|i| V::I(i as u64)).boxed(),
        Source::MapStyle(items, order) => {
            let data: Vec<V> = items.iter().copied().map(V::I).collect();
            let len = data.len();
            MapStyleWrapper::new(data, sampler(order, len)).boxed()
        }
        Source::Faulty(n, carries) => {
            let mut node = Faulty::new(*n);
            if *carries && let Some(inj) = injected {
                node = node.fault(inj.fault.clone());
            }
            node.map(V::I).boxed()
        }
        Source::Files {
            files,
            jsonl,
            shuffle,
        } => {
            let dir = shared_corpus();
            let ext = if *jsonl { "jsonl" } else { "txt" };
            let paths = files.iter().map(|i| dir.join(format!("f{i}.{ext}")));
            let mut list = nodes_std::Files::list(paths).expect("a non-empty list");
            if let Some(seed) = shuffle {
                list = list.shuffle_files(*seed);
            }
            if *jsonl {
                list.read_jsonl::<Record>().map(|r| V::I(r.v)).boxed()
            } else {
                // A damaged state (bad_states.rs) may resume mid-line: such
                // a line reads as 999, which no corpus line holds.
                list.read_lines()
                    .map(|line| V::I(line.parse().unwrap_or(999)))
                    .boxed()
            }
        }
    }
}

fn tag(source: &Arc<str>) -> V {
    V::I(source.bytes().fold(0, |h, b| h * 31 + u64::from(b)) % 1000)
}

fn par_options(par: &Par) -> ParallelOptions {
    let options = ParallelOptions::new(par.workers)
        .in_order(par.in_order)
        .snapshot_frequency(par.snapshot_frequency);
    match par.max_concurrent {
        Some(m) => options.max_concurrent(m),
        None => options,
    }
}

/// A fresh pipeline for `spec`.
pub(crate) fn build(spec: &Spec) -> Pipeline {
    build_with(spec, None)
}

/// A fresh pipeline for `spec`, with the run's injected fault (if any) in
/// the functions and sources marked to carry it.
pub(crate) fn build_with(spec: &Spec, injected: Option<&Injected>) -> Pipeline {
    let inj = injected.cloned();
    let b = |s: &Spec| build_with(s, injected);
    match spec {
        Spec::Src(src) => source(src, injected),
        Spec::Map(inner, k, fun) => {
            let (k, fun) = (*k, *fun);
            b(inner)
                .map(move |v| {
                    if let Err(e) = call(fun, inj.as_ref(), &v) {
                        unreachable!("a map cannot fail, but {e}");
                    }
                    v.mapped(k)
                })
                .boxed()
        }
        Spec::TryMap(inner, fun) => {
            let fun = *fun;
            b(inner)
                .try_map(move |v| call(fun, inj.as_ref(), &v).map(|()| V::L(vec![v])))
                .on_error(fun.policy)
                .boxed()
        }
        Spec::Filter(inner, m, r) => {
            let (m, r) = (*m, *r);
            b(inner).filter(move |v| v.fingerprint() % m != r).boxed()
        }
        Spec::Batch(inner, size, exact) => {
            let node = b(inner);
            let batched = if *exact {
                node.batch_exact(*size)
            } else {
                node.batch(*size)
            };
            batched.expect("sizes are positive").map(V::L).boxed()
        }
        Spec::Unbatch(inner) => b(inner).map(V::flatten).unbatch().boxed(),
        Spec::Header(inner, n) => b(inner).header(*n).boxed(),
        Spec::CycleN(inner, n) => b(inner).cycle_n(*n).expect("n is positive").boxed(),
        Spec::CycleHeader(inner, n) => b(inner).cycle().header(*n).boxed(),
        Spec::Shuffle(inner, size, seed) => b(inner)
            .shuffle(*size, *seed)
            .expect("sizes are positive")
            .boxed(),
        Spec::Zip(left, right) => b(left)
            .zip(b(right))
            .map(|(a, b)| V::P(Box::new(a), Box::new(b)))
            .boxed(),
        Spec::Shard(inner, rank, world) => {
            b(inner).shard(*rank, *world).expect("rank < world").boxed()
        }
        Spec::ParMap(inner, par, fun) => {
            let fun = *fun;
            b(inner)
                .par_map(
                    move |v: V| {
                        call(fun, inj.as_ref(), &v)?;
                        Ok(v.mapped(3))
                    },
                    par_options(par).on_error(fun.policy),
                )
                .expect("valid options")
                .boxed()
        }
        Spec::Prefetch(inner, factor, policy, reader) => {
            let node = b(inner)
                .prefetch(*factor)
                .expect("factor is positive")
                .on_error(*policy);
            match reader {
                Reader::Adaptive => node.inline_when_faster().boxed(),
                Reader::Pinned => node.boxed(),
                Reader::SwitchEvery(items) => node.switch_every(*items).boxed(),
            }
        }
        Spec::Weighted {
            sources,
            stop,
            seed,
            rank,
            world,
            tagged,
            cap,
        } => {
            let nodes = sources
                .iter()
                .enumerate()
                .map(|(i, (s, _))| (format!("s{i}"), b(s)));
            let weights = sources
                .iter()
                .enumerate()
                .map(|(i, (_, w))| (format!("s{i}"), f64::from(*w)));
            let sampler = MultiNodeWeightedSampler::new(nodes, weights)
                .expect("valid weights")
                .stop_criteria(*stop)
                .seed(*seed)
                .rank(*rank, *world)
                .expect("rank < world");
            let node = if *tagged {
                sampler
                    .tagged()
                    .map(|t| V::P(Box::new(tag(&t.source)), Box::new(t.item)))
                    .boxed()
            } else {
                sampler.boxed()
            };
            capped(node, *stop, *cap)
        }
        Spec::RoundRobin {
            sources,
            stop,
            tagged,
            cap,
        } => {
            let nodes = sources
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("s{i}"), b(s)));
            let sampler = MultiNodeRoundRobinSampler::new(nodes)
                .expect("distinct names")
                .stop_criteria(*stop);
            let node = if *tagged {
                sampler
                    .tagged()
                    .map(|t| V::P(Box::new(tag(&t.source)), Box::new(t.item)))
                    .boxed()
            } else {
                sampler.boxed()
            };
            capped(node, *stop, *cap)
        }
        Spec::FlatMap(inner, m) => {
            let m = *m;
            b(inner).flat_map(move |v| copies(v, m)).boxed()
        }
        Spec::FilterMap(inner, m, r) => {
            let (m, r) = (*m, *r);
            b(inner)
                .filter_map(move |v| (v.fingerprint() % m != r).then(|| v.mapped(5)))
                .boxed()
        }
        Spec::Pack(inner, seq_len, exact, segments) => {
            let tokens = b(inner).map(|v| {
                let mut leaves = Vec::new();
                v.leaves(&mut leaves);
                leaves
            });
            let packer = if *exact {
                tokens.pack_exact(*seq_len)
            } else {
                tokens.pack(*seq_len)
            }
            .expect("seq_len is positive");
            if *segments {
                packer
                    .with_segments()
                    .map(|p| packed(p.tokens, Some((p.segment_ids, p.positions))))
                    .boxed()
            } else {
                packer.map(|tokens| packed(tokens, None)).boxed()
            }
        }
        Spec::Interleave {
            outer,
            inner,
            cycle,
            block,
        } => {
            let inner = (**inner).clone();
            b(outer)
                .interleave(*cycle, *block, move |o: V| {
                    build_with(&inner, inj.as_ref())
                        .map(move |x| V::P(Box::new(o.clone()), Box::new(x)))
                })
                .expect("cycle and block are positive")
                .boxed()
        }
    }
}

/// A `CycleForever` pass only ends when every source is empty: cut it.
fn capped(node: Pipeline, stop: StopCriteria, cap: u64) -> Pipeline {
    if stop == StopCriteria::CycleForever {
        node.header(cap).boxed()
    } else {
        node
    }
}

// ---------------------------------------------------------------------------
// Questions about a spec

/// What one uninterrupted run determines about every other run of the same
/// pipeline, epoch by epoch (see the module docs). Ordered weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// The multiset of plain values ([`V::leaves`]) and of errors.
    Leaves,
    /// The multiset of items (errors included).
    Multiset,
    /// The sequence.
    Exact,
}

impl Spec {
    /// The children of this node.
    pub(crate) fn children(&self) -> Vec<&Spec> {
        match self {
            Spec::Src(_) => Vec::new(),
            Spec::Map(s, ..)
            | Spec::TryMap(s, _)
            | Spec::Filter(s, ..)
            | Spec::Batch(s, ..)
            | Spec::Unbatch(s)
            | Spec::Header(s, _)
            | Spec::CycleN(s, _)
            | Spec::CycleHeader(s, _)
            | Spec::Shuffle(s, ..)
            | Spec::Shard(s, ..)
            | Spec::ParMap(s, ..)
            | Spec::Prefetch(s, ..)
            | Spec::FlatMap(s, _)
            | Spec::FilterMap(s, ..)
            | Spec::Pack(s, ..) => vec![&**s],
            Spec::Zip(l, r) => vec![&**l, &**r],
            Spec::Interleave { outer, inner, .. } => vec![&**outer, &**inner],
            Spec::Weighted { sources, .. } => sources.iter().map(|(s, _)| s).collect(),
            Spec::RoundRobin { sources, .. } => sources.iter().collect(),
        }
    }

    pub(crate) fn children_mut(&mut self) -> Vec<&mut Spec> {
        match self {
            Spec::Src(_) => Vec::new(),
            Spec::Map(s, ..)
            | Spec::TryMap(s, _)
            | Spec::Filter(s, ..)
            | Spec::Batch(s, ..)
            | Spec::Unbatch(s)
            | Spec::Header(s, _)
            | Spec::CycleN(s, _)
            | Spec::CycleHeader(s, _)
            | Spec::Shuffle(s, ..)
            | Spec::Shard(s, ..)
            | Spec::ParMap(s, ..)
            | Spec::Prefetch(s, ..)
            | Spec::FlatMap(s, _)
            | Spec::FilterMap(s, ..)
            | Spec::Pack(s, ..) => vec![&mut **s],
            Spec::Zip(l, r) => vec![&mut **l, &mut **r],
            Spec::Interleave { outer, inner, .. } => vec![&mut **outer, &mut **inner],
            Spec::Weighted { sources, .. } => sources.iter_mut().map(|(s, _)| s).collect(),
            Spec::RoundRobin { sources, .. } => sources.iter_mut().collect(),
        }
    }

    /// Every node of the tree, this one first (pre-order).
    pub(crate) fn nodes(&self) -> Vec<&Spec> {
        let mut out = vec![self];
        for child in self.children() {
            out.extend(child.nodes());
        }
        out
    }

    /// What one run determines, or `None` where it determines nothing
    /// comparable (the generator does not draw those).
    pub(crate) fn level(&self) -> Option<Level> {
        use Level::{Exact, Leaves, Multiset};
        let child = |s: &Spec| s.level();
        // A function that may fail needs determined items as its input; a
        // policy that cuts passes, an exact input and its own order.
        let fallible = |fun: &Fun, l: Level| (fun.fail.is_none() || l >= Multiset).then_some(l);
        let policed = |policy: ErrorPolicy, varies: bool, l: Level| {
            (!cuts_passes(policy) || (l == Exact && !varies)).then_some(l)
        };
        Some(match self {
            Spec::Src(_) => Exact,
            Spec::Map(s, _, _) | Spec::CycleN(s, _) | Spec::Shuffle(s, ..) => child(s)?,
            Spec::Prefetch(s, _, policy, _) => policed(*policy, false, child(s)?)?,
            // Refused over an order that varies (see `may_be_refused`).
            Spec::Unbatch(s) | Spec::FlatMap(s, _) => child(s)?,
            Spec::FilterMap(s, ..) => Some(child(s)?).filter(|&l| l >= Multiset)?,
            Spec::Pack(s, _, exact, segments) => match (child(s)?, exact, segments) {
                (Exact, ..) => Exact,
                // Every token is kept, in other chunks.
                (_, false, false) => Leaves,
                _ => return None,
            },
            // The outer items are saved, so its order may vary; every outer
            // item's inner pipeline is read to its end.
            Spec::Interleave { outer, inner, .. } => {
                let outer = Some(child(outer)?).filter(|&l| l >= Multiset)?;
                Some(child(inner)?).filter(|&l| l == Exact)?;
                outer
            }
            Spec::TryMap(s, fun) => policed(fun.policy, false, fallible(fun, child(s)?)?)?,
            Spec::ParMap(s, par, fun) => {
                let l = policed(fun.policy, par.varies(), fallible(fun, child(s)?)?)?;
                if par.varies() { l.min(Multiset) } else { l }
            }
            Spec::Filter(s, ..) => Some(child(s)?).filter(|&l| l >= Multiset)?,
            Spec::Batch(s, _, exact) => match (child(s)?, exact) {
                (Exact, _) => Exact,
                (_, false) => Leaves,
                (_, true) => return None,
            },
            Spec::Header(s, _) | Spec::CycleHeader(s, _) | Spec::Shard(s, ..) => {
                Some(child(s)?).filter(|&l| l == Exact)?
            }
            Spec::Zip(l, r) => Some(child(l)?.min(child(r)?)).filter(|&l| l == Exact)?,
            Spec::Weighted { stop, .. } | Spec::RoundRobin { stop, .. } => {
                let mut level = Exact;
                for s in self.children() {
                    level = level.min(child(s)?);
                }
                if level < Exact && *stop != StopCriteria::AllDatasetsExhausted {
                    return None;
                }
                level
            }
        })
    }

    /// Whether the pipeline may be refused when it starts: an `Unbatcher`
    /// or a `FlatMapper` (which restore by pulling their item again) over an
    /// out-of-order parallel map with workers, anywhere below it.
    pub(crate) fn may_be_refused(&self) -> bool {
        self.nodes().into_iter().any(|n| {
            matches!(n, Spec::Unbatch(s) | Spec::FlatMap(s, _)
                if s.nodes().into_iter().any(|m| matches!(m, Spec::ParMap(_, p, _) if p.varies())))
        })
    }

    /// The node's kind, as the method (or constructor) that makes it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Spec::Src(_) => "source",
            Spec::Map(..) => "map",
            Spec::TryMap(..) => "try_map",
            Spec::Filter(..) => "filter",
            Spec::Batch(_, _, false) => "batch",
            Spec::Batch(_, _, true) => "batch_exact",
            Spec::Unbatch(_) => "unbatch",
            Spec::Header(..) => "header",
            Spec::CycleN(..) => "cycle_n",
            Spec::CycleHeader(..) => "cycle",
            Spec::Shuffle(..) => "shuffle",
            Spec::Zip(..) => "zip",
            Spec::Shard(..) => "shard",
            Spec::ParMap(..) => "par_map",
            Spec::Prefetch(..) => "prefetch",
            Spec::Weighted { .. } => "weighted",
            Spec::RoundRobin { .. } => "round_robin",
            Spec::FlatMap(..) => "flat_map",
            Spec::FilterMap(..) => "filter_map",
            Spec::Pack(_, _, false, _) => "pack",
            Spec::Pack(_, _, true, _) => "pack_exact",
            Spec::Interleave { .. } => "interleave",
        }
    }

    /// The nodes that have an out-of-order parallel map with workers below
    /// them, by kind (for reports: which parents see a varying order).
    pub(crate) fn over_varying(&self) -> Vec<String> {
        let mut kinds: Vec<String> = Vec::new();
        for node in self.nodes() {
            let varies_below = node.children().into_iter().any(|c| {
                c.nodes()
                    .into_iter()
                    .any(|m| matches!(m, Spec::ParMap(_, p, _) if p.varies()))
            });
            if !varies_below {
                continue;
            }
            let kind = match node {
                Spec::ParMap(_, p, _) if p.varies() => "par_map(out of order)".to_owned(),
                Spec::ParMap(_, p, _) if p.workers > 0 && p.snapshot_frequency > 1 => {
                    "par_map(in order, snapshot_frequency > 1)".to_owned()
                }
                Spec::ParMap(_, p, _) if p.workers > 0 => "par_map(in order)".to_owned(),
                Spec::ParMap(..) => "par_map(0 workers)".to_owned(),
                other => other.kind().to_owned(),
            };
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds
    }

    /// How many nodes the spec has, and how many of them run threads.
    pub(crate) fn count_nodes(&self) -> (usize, usize) {
        let nodes = self.nodes();
        let threaded = nodes
            .iter()
            .filter(|n| {
                matches!(n, Spec::ParMap(_, p, _) if p.workers > 0)
                    || matches!(n, Spec::Prefetch(..))
            })
            .count();
        (nodes.len(), threaded)
    }

    /// The same pipeline with other worker counts, `max_concurrent`,
    /// snapshot frequencies and read-ahead (drawn from `seed`): none of them
    /// is part of the shape, so a state restores into it. Whether an
    /// out-of-order map has workers is kept (that changes what a run
    /// determines).
    pub(crate) fn reworked(&self, seed: u64) -> Spec {
        let mut spec = self.clone();
        let mut x = seed | 1;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        fn walk(spec: &mut Spec, next: &mut dyn FnMut(u64) -> u64) {
            match spec {
                Spec::ParMap(_, par, _) => {
                    par.workers = match (par.in_order, par.workers) {
                        (false, 0) => 0,
                        (false, _) => 1 + next(4) as usize,
                        (true, _) => next(5) as usize,
                    };
                    par.max_concurrent = [None, Some(1), Some(2), Some(5)][next(4) as usize];
                    par.snapshot_frequency = [1, 2, 5, 1000][next(4) as usize];
                }
                Spec::Prefetch(_, factor, _, reader) => {
                    *factor = [1, 2, 3, 16][next(4) as usize];
                    *reader = READERS[next(READERS.len() as u64) as usize];
                }
                _ => {}
            }
            for child in spec.children_mut() {
                walk(child, next);
            }
        }
        walk(&mut spec, &mut next);
        spec
    }
}

/// Compares two runs' epochs at `level`; `Err` describes the difference.
pub(crate) fn compare_epoch(level: Level, got: &[Out], want: &[Out]) -> Result<(), String> {
    fn sorted<T: Ord + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
        let mut v: Vec<T> = items.into_iter().collect();
        v.sort();
        v
    }
    let leaves = |items: &[Out]| {
        let mut values = Vec::new();
        let mut errors = Vec::new();
        for item in items {
            match item {
                Out::Ok(v) => v.leaves(&mut values),
                Out::Err(e) => errors.push(e.clone()),
            }
        }
        (sorted(values), sorted(errors))
    };
    let same = match level {
        Level::Exact => got == want,
        Level::Multiset => sorted(got.iter().cloned()) == sorted(want.iter().cloned()),
        Level::Leaves => leaves(got) == leaves(want),
    };
    if same {
        return Ok(());
    }
    if level == Level::Exact {
        let first = got
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        return Err(format!(
            "differs at item {first} of {} (want {}):\n    got  {}\n    want {}",
            got.len(),
            want.len(),
            show(got),
            show(want)
        ));
    }
    let (mut got_only, mut want_only) = (sorted(got.iter().cloned()), sorted(want.iter().cloned()));
    if level == Level::Leaves {
        let (g, w) = (leaves(got), leaves(want));
        return Err(format!(
            "the plain values differ as multisets:\n    got  {:?} + errors {:?}\n    want {:?} + errors {:?}",
            g.0, g.1, w.0, w.1
        ));
    }
    // Multiset: show what is extra on each side.
    let common: Vec<Out> = {
        let mut common = Vec::new();
        let mut w = want_only.clone();
        for item in &got_only {
            if let Some(i) = w.iter().position(|x| x == item) {
                common.push(w.remove(i));
            }
        }
        common
    };
    for item in &common {
        if let Some(i) = got_only.iter().position(|x| x == item) {
            got_only.remove(i);
        }
        if let Some(i) = want_only.iter().position(|x| x == item) {
            want_only.remove(i);
        }
    }
    Err(format!(
        "differs as a multiset ({} items, want {}): repeated or extra {}, lost {}",
        got.len(),
        want.len(),
        show(&got_only),
        show(&want_only)
    ))
}

/// A compact rendering of items.
pub(crate) fn show(items: &[Out]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|o| match o {
            Out::Ok(v) => format!("{v}"),
            Out::Err(e) => format!("Err({e})"),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

impl fmt::Display for V {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            V::I(x) => write!(f, "{x}"),
            V::L(xs) => {
                write!(f, "[")?;
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        write!(f, " ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
            V::P(a, b) => write!(f, "({a},{b})"),
        }
    }
}

/// The spec as the Rust chain that builds it (roughly), for reports.
impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fun = |fun: &Fun| {
            let mut s = String::new();
            if let Some((m, r)) = fun.fail {
                s += &format!(", fails on fp%{m}=={r}");
            }
            if fun.jitter > 0 {
                s += &format!(", jitter {}%", fun.jitter);
            }
            if fun.injected {
                s += ", injected";
            }
            if fun.policy != ErrorPolicy::Deliver {
                s += &format!(", on_error {:?}", fun.policy);
            }
            s
        };
        match self {
            Spec::Src(src) => match src {
                Source::Iter(items) => write!(f, "iter({items:?})"),
                Source::Seekable(n) => write!(f, "seekable(0..{n})"),
                Source::Probe(n) => write!(f, "probe({n})"),
                Source::Indices(n, order) => write!(f, "indices({n}, {order:?})"),
                Source::MapStyle(items, order) => write!(f, "map_style({items:?}, {order:?})"),
                Source::Faulty(n, carries) => {
                    write!(f, "faulty({n}{})", if *carries { ", injected" } else { "" })
                }
                Source::Files {
                    files,
                    jsonl,
                    shuffle,
                } => {
                    let read = if *jsonl { "read_jsonl" } else { "read_lines" };
                    let values: Vec<&[u64]> = files.iter().map(|i| SHARED_VALUES[*i]).collect();
                    write!(f, "files({values:?}")?;
                    if let Some(seed) = shuffle {
                        write!(f, ", shuffle_files {seed}")?;
                    }
                    write!(f, ").{read}()")
                }
            },
            Spec::Map(s, k, fn_) => write!(f, "{s}.map(*{k}{})", fun(fn_)),
            Spec::TryMap(s, fn_) => write!(f, "{s}.try_map(wrap{})", fun(fn_)),
            Spec::Filter(s, m, r) => write!(f, "{s}.filter(fp%{m}!={r})"),
            Spec::Batch(s, n, false) => write!(f, "{s}.batch({n})"),
            Spec::Batch(s, n, true) => write!(f, "{s}.batch_exact({n})"),
            Spec::Unbatch(s) => write!(f, "{s}.unbatch()"),
            Spec::Header(s, n) => write!(f, "{s}.header({n})"),
            Spec::CycleN(s, n) => write!(f, "{s}.cycle_n({n})"),
            Spec::CycleHeader(s, n) => write!(f, "{s}.cycle().header({n})"),
            Spec::Shuffle(s, n, seed) => write!(f, "{s}.shuffle({n}, {seed})"),
            Spec::Zip(l, r) => write!(f, "{l}.zip({r})"),
            Spec::Shard(s, rank, world) => write!(f, "{s}.shard({rank}, {world})"),
            Spec::ParMap(s, p, fn_) => {
                write!(f, "{s}.par_map(*3, {} workers", p.workers)?;
                if !p.in_order {
                    write!(f, ", out of order")?;
                }
                if let Some(m) = p.max_concurrent {
                    write!(f, ", max_concurrent {m}")?;
                }
                if p.snapshot_frequency != 1 {
                    write!(f, ", snapshot_frequency {}", p.snapshot_frequency)?;
                }
                write!(f, "{})", fun(fn_))
            }
            Spec::Prefetch(s, n, policy, reader) => {
                write!(f, "{s}.prefetch({n})")?;
                if *policy != ErrorPolicy::Deliver {
                    write!(f, ".on_error({policy:?})")?;
                }
                match reader {
                    Reader::Adaptive => write!(f, ".inline_when_faster()"),
                    Reader::Pinned => Ok(()),
                    Reader::SwitchEvery(items) => write!(f, ".switch_every({items})"),
                }
            }
            Spec::Weighted {
                sources,
                stop,
                seed,
                rank,
                world,
                tagged,
                cap,
            } => {
                write!(f, "weighted([")?;
                for (i, (s, w)) in sources.iter().enumerate() {
                    write!(f, "{}{s} @{w}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, "], {stop:?}, seed {seed}, rank {rank}/{world}")?;
                if *tagged {
                    write!(f, ", tagged")?;
                }
                write!(f, ")")?;
                if *stop == StopCriteria::CycleForever {
                    write!(f, ".header({cap})")?;
                }
                Ok(())
            }
            Spec::RoundRobin {
                sources,
                stop,
                tagged,
                cap,
            } => {
                write!(f, "round_robin([")?;
                for (i, s) in sources.iter().enumerate() {
                    write!(f, "{}{s}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, "], {stop:?}")?;
                if *tagged {
                    write!(f, ", tagged")?;
                }
                write!(f, ")")?;
                if *stop == StopCriteria::CycleForever {
                    write!(f, ".header({cap})")?;
                }
                Ok(())
            }
            Spec::FlatMap(s, m) => write!(f, "{s}.flat_map(copies fp%{m})"),
            Spec::FilterMap(s, m, r) => write!(f, "{s}.filter_map(fp%{m}!={r} => *5)"),
            Spec::Pack(s, n, exact, segments) => {
                write!(f, "{s}.pack{}({n})", if *exact { "_exact" } else { "" })?;
                if *segments {
                    write!(f, ".with_segments()")?;
                }
                Ok(())
            }
            Spec::Interleave {
                outer,
                inner,
                cycle,
                block,
            } => write!(f, "{outer}.interleave({cycle}, {block}, |o| {inner})"),
        }
    }
}

// ---------------------------------------------------------------------------
// Strategies

/// The knobs of [`spec_strategy`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grammar {
    /// Nodes above the sources, at most.
    pub(crate) depth: u32,
    /// Items per source, at most.
    pub(crate) max_len: usize,
    /// Workers per parallel map, at most.
    pub(crate) max_workers: usize,
    /// Functions may fail on chosen items.
    pub(crate) failures: bool,
    /// Functions may sleep on some items.
    pub(crate) jitter: bool,
    /// What one run must determine of the whole pipeline: [`Level::Exact`]
    /// draws no out-of-order map with workers.
    pub(crate) top: Level,
}

impl Grammar {
    /// The suite's default: every shape, with bad records and jitter.
    pub(crate) fn every_shape(depth: u32, max_len: usize, max_workers: usize) -> Self {
        Grammar {
            depth,
            max_len,
            max_workers,
            failures: true,
            jitter: true,
            top: Level::Leaves,
        }
    }
}

fn order_strategy() -> impl Strategy<Value = Order> {
    prop_oneof![
        Just(Order::Sequential),
        any::<u64>().prop_map(Order::Random),
        (1u64..4, any::<bool>(), any::<u64>()).prop_flat_map(|(world, pad, seed)| {
            (0..world).prop_map(move |rank| Order::Sharded {
                rank,
                world,
                pad,
                seed,
            })
        }),
    ]
}

/// Sources of at most `max_len` items (mostly more than a third of that).
fn source_strategy(max_len: usize) -> BoxedStrategy<Source> {
    let n = max_len as u64 + 1;
    let len = prop_oneof![1 => 0..=max_len, 4 => max_len / 3..=max_len];
    let count = prop_oneof![1 => 0..n, 4 => n / 3..n];
    prop_oneof![
        len.clone()
            .prop_flat_map(|l| prop::collection::vec(0u64..100, l))
            .prop_map(Source::Iter),
        count.clone().prop_map(Source::Seekable),
        count.prop_map(Source::Probe),
        (len.clone(), order_strategy()).prop_map(|(n, o)| Source::Indices(n, o)),
        (
            len.prop_flat_map(|l| prop::collection::vec(0u64..100, l)),
            order_strategy()
        )
            .prop_map(|(items, o)| Source::MapStyle(items, o)),
        (
            prop::collection::vec(0..SHARED_VALUES.len(), 1..=4),
            any::<bool>(),
            prop::option::of(any::<u64>()),
        )
            .prop_map(|(files, jsonl, shuffle)| Source::Files {
                files,
                jsonl,
                shuffle,
            }),
    ]
    .boxed()
}

/// Stop criteria; the one that drains every source (and so keeps the
/// multisets of sources whose order varies) three times as often.
fn stop_strategy() -> BoxedStrategy<StopCriteria> {
    prop_oneof![
        3 => Just(StopCriteria::AllDatasetsExhausted),
        3 => prop::sample::select(StopCriteria::ALL.to_vec()),
    ]
    .boxed()
}

/// Error policies; `cutting`: also those that end or cut a pass.
fn policy_strategy(grammar: Grammar, cutting: bool) -> BoxedStrategy<ErrorPolicy> {
    if !grammar.failures {
        return Just(ErrorPolicy::Deliver).boxed();
    }
    let mut options: Vec<(u32, BoxedStrategy<ErrorPolicy>)> = vec![
        (6, Just(ErrorPolicy::Deliver).boxed()),
        (1, Just(ErrorPolicy::Skip).boxed()),
    ];
    if cutting {
        options.push((1, Just(ErrorPolicy::Fail).boxed()));
        options.push((1, (0u64..3).prop_map(ErrorPolicy::SkipAtMost).boxed()));
    }
    Union::new_weighted(options).boxed()
}

/// User functions; `cutting`: their node's policy may end or cut a pass.
fn fun_strategy(grammar: Grammar, cutting: bool) -> BoxedStrategy<Fun> {
    let fail = if grammar.failures {
        prop_oneof![
            2 => Just(None),
            1 => (3u64..11, 0u64..11).prop_map(|(m, r)| Some((m, r % m))),
        ]
        .boxed()
    } else {
        Just(None).boxed()
    };
    let jitter = if grammar.jitter {
        prop_oneof![Just(0u8), Just(10), Just(50), Just(100)].boxed()
    } else {
        Just(0u8).boxed()
    };
    (fail, jitter, policy_strategy(grammar, cutting))
        .prop_map(|(fail, jitter, policy)| Fun {
            fail,
            jitter,
            injected: false,
            policy,
        })
        .boxed()
}

/// Parallel-map options; `varying`: whether out of order with workers.
fn par_strategy(max_workers: usize, varying: bool) -> BoxedStrategy<Par> {
    let workers = if varying {
        (1..=max_workers.max(1)).boxed()
    } else {
        (0..=max_workers).boxed()
    };
    (
        workers,
        any::<bool>(),
        prop::option::of(1usize..7),
        prop_oneof![Just(1usize), 2usize..6, Just(1000)],
    )
        .prop_map(
            move |(workers, in_order, max_concurrent, snapshot_frequency)| Par {
                workers,
                // Not varying: in order, or out of order without workers.
                in_order: if varying {
                    false
                } else {
                    in_order || workers > 0
                },
                max_concurrent,
                snapshot_frequency,
            },
        )
        .boxed()
}

/// Pipelines of at most `grammar.depth` nodes above their sources.
pub(crate) fn spec_strategy(grammar: Grammar) -> BoxedStrategy<Spec> {
    use Level::{Exact, Leaves, Multiset};
    let needs = [Leaves, Multiset, Exact];
    let idx = |l: Level| l as usize;
    // table[need]: specs of the current depth whose level is at least `need`.
    let src = source_strategy(grammar.max_len).prop_map(Spec::Src).boxed();
    let mut table: Vec<BoxedStrategy<Spec>> = needs.iter().map(|_| src.clone()).collect();
    for _ in 0..grammar.depth {
        let below = table.clone();
        let at = |l: Level| below[idx(l)].clone();
        table = needs
            .iter()
            .map(|&need| {
                let fun = fun_strategy(grammar, true);
                // What a node needs below it: a function that may fail,
                // determined items; a policy that cuts passes, exact ones.
                let below_need = move |policy: ErrorPolicy, fails: bool| {
                    if cuts_passes(policy) {
                        Exact
                    } else if fails {
                        need.max(Multiset)
                    } else {
                        need
                    }
                };
                let with_fun = |fun: BoxedStrategy<Fun>| {
                    let below = below.clone();
                    fun.prop_flat_map(move |f| {
                        let inner = below[idx(below_need(f.policy, f.fail.is_some()))].clone();
                        inner.prop_map(move |s| (s, f))
                    })
                };
                let jitter_only = fun_strategy(
                    Grammar {
                        failures: false,
                        ..grammar
                    },
                    false,
                );
                let mut options: Vec<(u32, BoxedStrategy<Spec>)> = vec![
                    (3, src.clone()),
                    (
                        1,
                        (with_fun(jitter_only), 1u64..7)
                            .prop_map(|((s, f), k)| Spec::Map(Box::new(s), k, f))
                            .boxed(),
                    ),
                    (
                        1,
                        with_fun(fun.clone())
                            .prop_map(|(s, f)| Spec::TryMap(Box::new(s), f))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(need.max(Multiset)), 2u64..5, 0u64..5)
                            .prop_map(|(s, m, r)| Spec::Filter(Box::new(s), m, r % m))
                            .boxed(),
                    ),
                    (
                        2,
                        (at(if need == Leaves { Leaves } else { Exact }), 1usize..5)
                            .prop_map(|(s, n)| Spec::Batch(Box::new(s), n, false))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(Exact), 1usize..5)
                            .prop_map(|(s, n)| Spec::Batch(Box::new(s), n, true))
                            .boxed(),
                    ),
                    (2, at(need).prop_map(|s| Spec::Unbatch(Box::new(s))).boxed()),
                    (
                        1,
                        (at(Exact), 0u64..40)
                            .prop_map(|(s, n)| Spec::Header(Box::new(s), n))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(need), 1u64..3)
                            .prop_map(|(s, n)| Spec::CycleN(Box::new(s), n))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(Exact), 0u64..40)
                            .prop_map(|(s, n)| Spec::CycleHeader(Box::new(s), n))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(need), 1usize..8, any::<u64>())
                            .prop_map(|(s, n, seed)| Spec::Shuffle(Box::new(s), n, seed))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(Exact), at(Exact))
                            .prop_map(|(a, b)| Spec::Zip(Box::new(a), Box::new(b)))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(Exact), 1u64..4)
                            .prop_flat_map(|(s, world)| {
                                (0..world).prop_map(move |rank| {
                                    Spec::Shard(Box::new(s.clone()), rank, world)
                                })
                            })
                            .boxed(),
                    ),
                    (
                        3,
                        (
                            with_fun(fun.clone()),
                            par_strategy(grammar.max_workers, false),
                        )
                            .prop_map(|((s, f), par)| Spec::ParMap(Box::new(s), par, f))
                            .boxed(),
                    ),
                    (
                        2,
                        (
                            policy_strategy(grammar, true),
                            prop_oneof![Just(1usize), Just(2), Just(3), Just(16)],
                            reader_strategy(),
                        )
                            .prop_flat_map({
                                let below = below.clone();
                                move |(policy, n, reader)| {
                                    below[idx(below_need(policy, false))].clone().prop_map(
                                        move |s| Spec::Prefetch(Box::new(s), n, policy, reader),
                                    )
                                }
                            })
                            .boxed(),
                    ),
                    (1, weighted_strategy(&below, need)),
                    (1, round_robin_strategy(&below, need)),
                    (
                        2,
                        (at(need), 2u64..4)
                            .prop_map(|(s, m)| Spec::FlatMap(Box::new(s), m))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(need.max(Multiset)), 2u64..5, 0u64..5)
                            .prop_map(|(s, m, r)| Spec::FilterMap(Box::new(s), m, r % m))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(if need == Leaves { Leaves } else { Exact }), 1usize..6)
                            .prop_map(|(s, n)| Spec::Pack(Box::new(s), n, false, false))
                            .boxed(),
                    ),
                    (
                        1,
                        (at(Exact), 1usize..6, any::<bool>(), any::<bool>())
                            .prop_map(|(s, n, exact, segments)| {
                                Spec::Pack(Box::new(s), n, exact, segments)
                            })
                            .boxed(),
                    ),
                    (
                        1,
                        (at(need.max(Multiset)), at(Exact), 1usize..4, 1usize..4)
                            .prop_map(|(outer, inner, cycle, block)| Spec::Interleave {
                                outer: Box::new(outer),
                                inner: Box::new(inner),
                                cycle,
                                block,
                            })
                            .boxed(),
                    ),
                ];
                if need <= Multiset && grammar.max_workers > 0 {
                    options.push((
                        8,
                        (
                            with_fun(fun_strategy(grammar, false)),
                            par_strategy(grammar.max_workers, true),
                        )
                            .prop_map(|((s, f), par)| Spec::ParMap(Box::new(s), par, f))
                            .boxed(),
                    ));
                }
                Union::new_weighted(options).boxed()
            })
            .collect();
    }
    table[idx(grammar.top)].clone()
}

/// The need of a sampler's sources: only a sampler that drains every
/// source keeps their multisets.
fn source_need(stop: StopCriteria, need: Level) -> Level {
    if stop == StopCriteria::AllDatasetsExhausted {
        need
    } else {
        Level::Exact
    }
}

fn weighted_strategy(below: &[BoxedStrategy<Spec>], need: Level) -> BoxedStrategy<Spec> {
    let below = below.to_vec();
    (
        stop_strategy(),
        any::<u64>(),
        1u64..3,
        any::<bool>(),
        0u64..40,
    )
        .prop_flat_map(move |(stop, seed, world, tagged, cap)| {
            let inner = below[source_need(stop, need) as usize].clone();
            (prop::collection::vec((inner, 0u8..4), 1..=3), 0..world).prop_map(
                move |(mut sources, rank)| {
                    if sources.iter().all(|(_, w)| *w == 0) {
                        sources[0].1 = 1;
                    }
                    Spec::Weighted {
                        sources,
                        stop,
                        seed,
                        rank,
                        world,
                        tagged,
                        cap,
                    }
                },
            )
        })
        .boxed()
}

fn round_robin_strategy(below: &[BoxedStrategy<Spec>], need: Level) -> BoxedStrategy<Spec> {
    let below = below.to_vec();
    (stop_strategy(), any::<bool>(), 0u64..40)
        .prop_flat_map(move |(stop, tagged, cap)| {
            let inner = below[source_need(stop, need) as usize].clone();
            prop::collection::vec(inner, 1..=3).prop_map(move |sources| Spec::RoundRobin {
                sources,
                stop,
                tagged,
                cap,
            })
        })
        .boxed()
}

/// Item-by-item chains for the fault tests: a `Faulty` source of at most
/// `max_len` items under 1 to `max_stages` maps, try_maps, parallel maps
/// (any options) and prefetches, with jitter and no bad records.
pub(crate) fn chain_strategy(max_len: u64, max_stages: usize) -> BoxedStrategy<Spec> {
    let grammar = Grammar {
        failures: false,
        ..Grammar::every_shape(0, 0, 3)
    };
    #[derive(Clone, Debug)]
    enum Stage {
        Map(u64, Fun),
        TryMap(Fun),
        ParMap(Par, Fun),
        Prefetch(usize, Reader),
    }
    let fun = fun_strategy(grammar, false);
    let stage = prop_oneof![
        1 => (1u64..7, fun.clone()).prop_map(|(k, f)| Stage::Map(k, f)),
        1 => fun.clone().prop_map(Stage::TryMap),
        3 => (prop_oneof![par_strategy(3, false), par_strategy(3, true)], fun)
            .prop_map(|(p, f)| Stage::ParMap(p, f)),
        2 => (prop_oneof![Just(1usize), Just(2), Just(8)], reader_strategy())
            .prop_map(|(n, reader)| Stage::Prefetch(n, reader)),
    ];
    (1..=max_len, prop::collection::vec(stage, 1..=max_stages))
        .prop_map(|(len, stages)| {
            stages
                .into_iter()
                .fold(Spec::Src(Source::Faulty(len, false)), |s, stage| {
                    let s = Box::new(s);
                    match stage {
                        Stage::Map(k, f) => Spec::Map(s, k, f),
                        Stage::TryMap(f) => Spec::TryMap(s, f),
                        Stage::ParMap(p, f) => Spec::ParMap(s, p, f),
                        Stage::Prefetch(n, reader) => {
                            Spec::Prefetch(s, n, ErrorPolicy::Deliver, reader)
                        }
                    }
                })
        })
        .boxed()
}

/// The stages of a chain, from the source up.
pub(crate) fn chain_stages(spec: &Spec) -> Vec<&Spec> {
    let mut stages: Vec<&Spec> = Vec::new();
    let mut at = spec;
    loop {
        stages.push(at);
        match at.children().as_slice() {
            [] => break,
            [one] => at = one,
            _ => panic!("not a chain: {spec}"),
        }
    }
    stages.reverse();
    stages
}

/// What the item-by-item node `stage` makes of `v` (no jitter, no faults).
pub(crate) fn apply(stage: &Spec, v: V) -> V {
    match stage {
        Spec::Map(_, k, _) => v.mapped(*k),
        Spec::TryMap(..) => V::L(vec![v]),
        Spec::ParMap(..) => v.mapped(3),
        _ => v,
    }
}
