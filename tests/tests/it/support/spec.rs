//! Random pipelines over every stock node, for the reliability suite.
//!
//! A [`Spec`] is a plain description of a pipeline (a tree of stock nodes
//! over small sources); [`build`] turns it into a fresh node each time it is
//! called, so a test can build the same pipeline again to restore a state
//! into it. [`spec_strategy`] generates specs for proptest.
//!
//! Every pipeline yields one item type, [`V`], so that type-changing nodes
//! (batch, zip, the samplers' tags) stack in any order.
//!
//! # Ordered and unordered pipelines
//!
//! A `ParallelMapper` with `in_order(false)` delivers items in completion
//! order, which varies from run to run. Only the *multiset* of its output is
//! defined, and it stays defined through nodes that treat items one by one
//! or keep every item (map, filter, shuffle, cycle, prefetch, another
//! parallel map, a sampler that drains all its sources once). Nodes whose
//! output depends on the order of their input (batch, header, zip, shard, a
//! cycling sampler) get an ordered input: [`legalize`] switches any
//! out-of-order map below them to in-order. What remains is either an
//! ordered pipeline (the output sequence is defined: compare it exactly) or
//! an unordered one (compare the multiset of each epoch).
//!
//! The thread-backed nodes restore by replaying their source from a snapshot
//! and skipping what the consumer had received since, which is exact only
//! when the source yields the same items again. An out-of-order map does
//! not, so [`legalize`] also gives an ordered input to every `Prefetcher`
//! and to every `ParallelMapper` that may skip on restore (all but the
//! inline ones and the in-order ones with `snapshot_frequency` 1).

use std::sync::Arc;

use nodes_std::prelude::*;
use nodes_std::{
    MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, ParallelOptions, StopCriteria,
};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::Probe;

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

    /// A hash of the value, for filters.
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
        rank: usize,
        world: usize,
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
}

/// Options of a `ParallelMapper`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Par {
    pub(crate) workers: usize,
    pub(crate) in_order: bool,
    pub(crate) max_concurrent: Option<usize>,
    pub(crate) snapshot_frequency: usize,
}

/// A pipeline: a source, or a stock node over other specs.
#[derive(Clone, Debug)]
pub(crate) enum Spec {
    Src(Source),
    Map(Box<Spec>, u64),
    TryMap(Box<Spec>),
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
    ParMap(Box<Spec>, Par),
    Prefetch(Box<Spec>, usize),
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

fn source(src: &Source) -> Pipeline {
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
    match spec {
        Spec::Src(src) => source(src),
        Spec::Map(inner, k) => {
            let k = *k;
            build(inner).map(move |v| v.mapped(k)).boxed()
        }
        Spec::TryMap(inner) => build(inner)
            .try_map(|v| Ok::<_, std::io::Error>(V::L(vec![v])))
            .boxed(),
        Spec::Filter(inner, m, r) => {
            let (m, r) = (*m, *r);
            build(inner)
                .filter(move |v| v.fingerprint() % m != r)
                .boxed()
        }
        Spec::Batch(inner, size, exact) => {
            let node = build(inner);
            let batched = if *exact {
                node.batch_exact(*size)
            } else {
                node.batch(*size)
            };
            batched.expect("sizes are positive").map(V::L).boxed()
        }
        Spec::Unbatch(inner) => build(inner).map(V::flatten).unbatch().boxed(),
        Spec::Header(inner, n) => build(inner).header(*n).boxed(),
        Spec::CycleN(inner, n) => build(inner).cycle_n(*n).expect("n is positive").boxed(),
        Spec::CycleHeader(inner, n) => build(inner).cycle().header(*n).boxed(),
        Spec::Shuffle(inner, size, seed) => build(inner)
            .shuffle(*size, *seed)
            .expect("sizes are positive")
            .boxed(),
        Spec::Zip(left, right) => build(left)
            .zip(build(right))
            .map(|(a, b)| V::P(Box::new(a), Box::new(b)))
            .boxed(),
        Spec::Shard(inner, rank, world) => build(inner)
            .shard(*rank, *world)
            .expect("rank < world")
            .boxed(),
        Spec::ParMap(inner, par) => build(inner)
            .par_map(|v| Ok(v.mapped(3)), par_options(par))
            .expect("valid options")
            .boxed(),
        Spec::Prefetch(inner, factor) => build(inner)
            .prefetch(*factor)
            .expect("factor is positive")
            .boxed(),
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
                .map(|(i, (s, _))| (format!("s{i}"), build(s)));
            let weights = sources
                .iter()
                .enumerate()
                .map(|(i, (_, w))| (format!("s{i}"), f64::from(*w)));
            let sampler = MultiNodeWeightedSampler::new(nodes, weights)
                .expect("valid weights")
                .with_stop_criteria(*stop)
                .with_seed(*seed)
                .with_rank(*rank, *world)
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
                .map(|(i, s)| (format!("s{i}"), build(s)));
            let sampler = MultiNodeRoundRobinSampler::new(nodes)
                .expect("distinct names")
                .with_stop_criteria(*stop);
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

/// Switches every out-of-order parallel map whose output reaches a node that
/// needs an ordered input to in-order (see the module docs). `need_ordered`:
/// whether the consumer of `spec`'s output needs it in a defined order.
pub(crate) fn legalize(spec: Spec, need_ordered: bool) -> Spec {
    let b = |s: Box<Spec>, need: bool| Box::new(legalize(*s, need));
    match spec {
        Spec::Src(s) => Spec::Src(s),
        // Item by item, or keeping every item: the order is passed through.
        Spec::Map(s, k) => Spec::Map(b(s, need_ordered), k),
        Spec::TryMap(s) => Spec::TryMap(b(s, need_ordered)),
        Spec::Filter(s, m, r) => Spec::Filter(b(s, need_ordered), m, r),
        Spec::Shuffle(s, n, seed) => Spec::Shuffle(b(s, need_ordered), n, seed),
        Spec::CycleN(s, n) => Spec::CycleN(b(s, need_ordered), n),
        Spec::ParMap(s, mut par) => {
            if need_ordered && par.workers > 0 {
                par.in_order = true;
            }
            // With workers, a restore replays the source from the last
            // snapshot, skipping what was received since: exact only if the
            // source yields the same items again, unless every item carries
            // its snapshot and delivery is in order (nothing to skip).
            let replays = par.workers > 0 && !(par.in_order && par.snapshot_frequency == 1);
            Spec::ParMap(b(s, need_ordered || replays), par)
        }
        // Restores by replaying its source from the last chunk's snapshot.
        Spec::Prefetch(s, n) => Spec::Prefetch(b(s, true), n),
        // The output depends on the input's order.
        Spec::Batch(s, n, exact) => Spec::Batch(b(s, true), n, exact),
        Spec::Unbatch(s) => Spec::Unbatch(b(s, true)),
        Spec::Header(s, n) => Spec::Header(b(s, true), n),
        Spec::CycleHeader(s, n) => Spec::CycleHeader(b(s, true), n),
        Spec::Zip(l, r) => Spec::Zip(b(l, true), b(r, true)),
        Spec::Shard(s, rank, world) => Spec::Shard(b(s, true), rank, world),
        Spec::Weighted {
            sources,
            stop,
            seed,
            rank,
            world,
            tagged,
            cap,
        } => {
            let need = need_ordered || stop != StopCriteria::AllDatasetsExhausted;
            Spec::Weighted {
                sources: sources
                    .into_iter()
                    .map(|(s, w)| (legalize(s, need), w))
                    .collect(),
                stop,
                seed,
                rank,
                world,
                tagged,
                cap,
            }
        }
        Spec::RoundRobin {
            sources,
            stop,
            tagged,
            cap,
        } => {
            let need = need_ordered || stop != StopCriteria::AllDatasetsExhausted;
            Spec::RoundRobin {
                sources: sources.into_iter().map(|s| legalize(s, need)).collect(),
                stop,
                tagged,
                cap,
            }
        }
    }
}

/// The children of a spec node.
pub(crate) fn children(spec: &Spec) -> Vec<&Spec> {
    match spec {
        Spec::Src(_) => Vec::new(),
        Spec::Map(s, _)
        | Spec::TryMap(s)
        | Spec::Filter(s, _, _)
        | Spec::Batch(s, _, _)
        | Spec::Unbatch(s)
        | Spec::Header(s, _)
        | Spec::CycleN(s, _)
        | Spec::CycleHeader(s, _)
        | Spec::Shuffle(s, _, _)
        | Spec::Shard(s, _, _)
        | Spec::ParMap(s, _)
        | Spec::Prefetch(s, _) => vec![&**s],
        Spec::Zip(l, r) => vec![&**l, &**r],
        Spec::Weighted { sources, .. } => sources.iter().map(|(s, _)| s).collect(),
        Spec::RoundRobin { sources, .. } => sources.iter().collect(),
    }
}

/// Whether the output sequence is defined (no out-of-order parallel map
/// with workers is left after [`legalize`]).
pub(crate) fn is_ordered(spec: &Spec) -> bool {
    let here = !matches!(spec, Spec::ParMap(_, par) if par.workers > 0 && !par.in_order);
    here && children(spec).into_iter().all(is_ordered)
}

/// How many nodes the spec has, and how many of them run threads.
pub(crate) fn count_nodes(spec: &Spec) -> (usize, usize) {
    let own = usize::from(
        matches!(spec, Spec::ParMap(_, p) if p.workers > 0) || matches!(spec, Spec::Prefetch(..)),
    );
    children(spec)
        .into_iter()
        .map(count_nodes)
        .fold((1, own), |(n, t), (cn, ct)| (n + cn, t + ct))
}

fn order_strategy() -> impl Strategy<Value = Order> {
    prop_oneof![
        Just(Order::Sequential),
        any::<u64>().prop_map(Order::Random),
        (1usize..4, any::<bool>(), any::<u64>()).prop_flat_map(|(world, pad, seed)| {
            (0..world).prop_map(move |rank| Order::Sharded {
                rank,
                world,
                pad,
                seed,
            })
        }),
    ]
}

/// Sources of at most `max_len` items.
pub(crate) fn source_strategy(max_len: usize) -> impl Strategy<Value = Source> {
    let n = max_len as u64 + 1;
    prop_oneof![
        prop::collection::vec(0u64..100, 0..=max_len).prop_map(Source::Iter),
        (0..n).prop_map(Source::Seekable),
        (0..n).prop_map(Source::Probe),
        (0..=max_len, order_strategy()).prop_map(|(n, o)| Source::Indices(n, o)),
        (
            prop::collection::vec(0u64..100, 0..=max_len),
            order_strategy()
        )
            .prop_map(|(items, o)| Source::MapStyle(items, o)),
    ]
}

fn stop_strategy() -> impl Strategy<Value = StopCriteria> {
    prop::sample::select(StopCriteria::ALL.to_vec())
}

fn par_strategy(max_workers: usize) -> impl Strategy<Value = Par> {
    (
        0..=max_workers,
        any::<bool>(),
        prop::option::of(1usize..7),
        prop_oneof![Just(1usize), 2usize..6, Just(1000)],
    )
        .prop_map(
            |(workers, in_order, max_concurrent, snapshot_frequency)| Par {
                workers,
                in_order,
                max_concurrent,
                snapshot_frequency,
            },
        )
}

/// Pipelines of depth at most `depth + 1` over sources of at most `max_len`
/// items, with parallel maps of at most `max_workers` workers, legalized.
pub(crate) fn spec_strategy(
    depth: u32,
    max_len: usize,
    max_workers: usize,
) -> impl Strategy<Value = Spec> {
    source_strategy(max_len)
        .prop_map(Spec::Src)
        .prop_recursive(depth, 64, 2, move |inner| {
            let sources = prop::collection::vec(inner.clone(), 1..=3);
            let weighted_sources = prop::collection::vec((inner.clone(), 0u8..4), 1..=3);
            prop_oneof![
                1 => (inner.clone(), 1u64..7).prop_map(|(s, k)| Spec::Map(Box::new(s), k)),
                1 => inner.clone().prop_map(|s| Spec::TryMap(Box::new(s))),
                1 => (inner.clone(), 2u64..5, 0u64..5)
                    .prop_map(|(s, m, r)| Spec::Filter(Box::new(s), m, r % m)),
                1 => (inner.clone(), 1usize..5, any::<bool>())
                    .prop_map(|(s, n, exact)| Spec::Batch(Box::new(s), n, exact)),
                1 => inner.clone().prop_map(|s| Spec::Unbatch(Box::new(s))),
                1 => (inner.clone(), 0u64..15).prop_map(|(s, n)| Spec::Header(Box::new(s), n)),
                1 => (inner.clone(), 1u64..4).prop_map(|(s, n)| Spec::CycleN(Box::new(s), n)),
                1 => (inner.clone(), 0u64..25).prop_map(|(s, n)| Spec::CycleHeader(Box::new(s), n)),
                1 => (inner.clone(), 1usize..8, any::<u64>())
                    .prop_map(|(s, n, seed)| Spec::Shuffle(Box::new(s), n, seed)),
                1 => (inner.clone(), inner.clone())
                    .prop_map(|(a, b)| Spec::Zip(Box::new(a), Box::new(b))),
                1 => (inner.clone(), 1u64..4).prop_flat_map(|(s, world)| {
                    (0..world).prop_map(move |rank| Spec::Shard(Box::new(s.clone()), rank, world))
                }),
                3 => (inner.clone(), par_strategy(max_workers))
                    .prop_map(|(s, par)| Spec::ParMap(Box::new(s), par)),
                2 => (inner.clone(), prop_oneof![Just(1usize), Just(2), Just(3), Just(16)])
                    .prop_map(|(s, n)| Spec::Prefetch(Box::new(s), n)),
                1 => (
                    weighted_sources,
                    stop_strategy(),
                    any::<u64>(),
                    1u64..3,
                    any::<bool>(),
                    0u64..30
                )
                    .prop_flat_map(|(sources, stop, seed, world, tagged, cap)| {
                        (0..world).prop_map(move |rank| {
                            let mut sources = sources.clone();
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
                        })
                    }),
                1 => (sources, stop_strategy(), any::<bool>(), 0u64..30).prop_map(
                    |(sources, stop, tagged, cap)| Spec::RoundRobin {
                        sources,
                        stop,
                        tagged,
                        cap,
                    }
                ),
            ]
        })
        .prop_map(|spec| legalize(spec, false))
}
