//! Per-node statistics: counts equal the true item counts (for a
//! hand-written node and for a pipeline of stock nodes), self time excludes
//! children, threaded nodes report blocked time and queue depths, and stats
//! are off unless asked for.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::support::Probe;
use nodes_std::prelude::*;
use nodes_std::{NodeId, ParallelOptions, StopCriteria};

/// Passes items through, dropping odd ones; reports to the statistics.
struct Evens<S> {
    source: S,
}

impl<S: Node<Item = u64>> Node for Evens<S> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        cx.observe(NodeId::of(self), "Evens", |cx| {
            while let Some(x) = self.source.next(cx)? {
                if x % 2 == 0 {
                    return Ok(Some(x));
                }
            }
            Ok(None)
        })
    }
}

impl<S: Node<Item = u64>> Stateful for Evens<S> {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        match state {
            Some(s) => self.source.reset(Some(&s.child("source")?)),
            None => self.source.reset(None),
        }
    }
    fn get_state(&self, cx: &Cx) -> Result<State> {
        let mut s = State::new();
        s.insert_child("source", self.source.get_state(cx)?);
        Ok(s)
    }
    fn describe(&self) -> Description {
        Description::new("Evens").child("source", self.source.describe())
    }
}

#[test]
fn counts_equal_true_item_counts_across_epochs() {
    let mut loader = Loader::new(Evens {
        source: Probe::new(9),
    })
    .record_stats();
    let epoch0: Vec<u64> = loader.epoch().collect::<Result<_>>().unwrap();
    let epoch1: Vec<u64> = loader.epoch().collect::<Result<_>>().unwrap();
    let stats = loader.stats().unwrap();
    let evens = stats.get("Evens").unwrap();
    let probe = stats.get("Evens/Probe").unwrap();
    assert_eq!(evens.items as usize, epoch0.len() + epoch1.len());
    assert_eq!(evens.items, 10);
    assert_eq!(probe.items, 18);
    // Each call of `Evens::next` returns an item or ends the epoch.
    assert_eq!(evens.calls, 12);
    assert_eq!(probe.calls, 20);
    let table = stats.to_string();
    assert!(table.starts_with("node"), "{table}");
    assert!(table.contains("Evens/Probe"), "{table}");
}

/// Times are read on one outermost call in 16, together with every call
/// below it (so self time still excludes the children's time); counts are
/// exact.
#[test]
fn times_come_from_whole_sampled_outermost_calls() {
    let mut loader = Loader::new(Evens {
        source: Probe::new(100),
    })
    .record_stats();
    assert_eq!(loader.epoch().count(), 50);
    let stats = loader.stats().unwrap();
    let evens = stats.get("Evens").unwrap();
    let probe = stats.get("Evens/Probe").unwrap();
    // 51 calls from the loader (50 items and the end): calls 0, 16, 32 and
    // 48 are timed. The first pulls one number (0), the others two (an odd
    // one, then an even one).
    assert_eq!((evens.calls, evens.timed_calls), (51, 4));
    assert_eq!((probe.calls, probe.timed_calls), (101, 1 + 2 + 2 + 2));
    assert_eq!((evens.items, probe.items), (50, 100));
}

#[test]
fn stats_are_off_by_default() {
    let mut loader = Loader::new(Probe::new(3));
    let _ = loader.epoch().count();
    assert!(loader.stats().is_none());
}

/// Counts the calls of a closure; a test can wait for a count.
#[derive(Clone, Default)]
struct Calls(Arc<(Mutex<u64>, Condvar)>);

impl Calls {
    fn tick(&self) {
        *self.0.0.lock().unwrap() += 1;
        self.0.1.notify_all();
    }
    fn get(&self) -> u64 {
        *self.0.0.lock().unwrap()
    }
    /// Blocks until the count reaches `at_least` (the watchdog catches a
    /// count that never comes).
    fn wait_for(&self, at_least: u64) {
        let count = self.0.0.lock().unwrap();
        drop(self.0.1.wait_while(count, |n| *n < at_least).unwrap());
    }
}

/// A pipeline of stock nodes that reads every source to its end, with
/// counters in its closures: `(mapped, tried, filtered, kept)`.
fn stock_pipeline(calls: &[Calls; 4]) -> impl Node<Item = Vec<(u64, u64)>> + use<> {
    let [mapped, tried, filtered, kept] = calls.clone();
    // 30 items per pass, in a seeded order.
    let a = MapStyleWrapper::new(
        (0..30u64).collect::<Vec<_>>(),
        SamplerWrapper::new(RandomSampler::new(30, 5)),
    );
    // 10 items, read twice: 20.
    let b = IterableWrapper::new(100..110u64)
        .map(move |x| {
            mapped.tick();
            x
        })
        .cycle_n(2)
        .unwrap();
    // Every 4th of 40 items, from the 2nd: 10 (all odd).
    let c = IterableWrapper::new(0..40u64).shard(1, 4).unwrap();
    MultiNodeWeightedSampler::new(
        [("a", a.boxed()), ("b", b.boxed()), ("c", c.boxed())],
        [("a", 0.5), ("b", 0.25), ("c", 0.25)],
    )
    .unwrap()
    .stop_criteria(StopCriteria::AllDatasetsExhausted)
    .seed(1)
    // Every item of every source once: 60.
    .try_map(move |x: u64| {
        tried.tick();
        Ok::<u64, Error>(x * 3)
    })
    // The even ones: 15 of `a`, 2 x 5 of `b`, none of `c`: 25.
    .filter(move |x| {
        filtered.tick();
        let keep = x % 2 == 0;
        if keep {
            kept.tick();
        }
        keep
    })
    .shuffle(4, 9)
    .unwrap()
    // 25 items in 9 batches, unbatched again.
    .batch(3)
    .unwrap()
    .unbatch()
    // Paired with 0..25: the right side is never asked past its 25th.
    .zip(IterableWrapper::new(0..25u64))
    .header(25)
    // 7 batches (the last one of a single pair).
    .batch(4)
    .unwrap()
}

#[test]
fn stock_node_counts_equal_the_items_each_node_produced() {
    let calls: [Calls; 4] = Default::default();
    let mut loader = Loader::new(stock_pipeline(&calls)).record_stats();
    const EPOCHS: u64 = 2;
    let mut pairs = 0;
    for _ in 0..EPOCHS {
        for batch in loader.epoch() {
            pairs += batch.unwrap().len() as u64;
        }
    }
    assert_eq!(pairs, 25 * EPOCHS);
    let [mapped, tried, filtered, kept] = &calls;
    // The closures saw what their nodes produced (and consumed).
    assert_eq!(
        (mapped.get(), tried.get(), filtered.get(), kept.get()),
        (20 * EPOCHS, 60 * EPOCHS, 60 * EPOCHS, 25 * EPOCHS)
    );

    let stats = loader.stats().unwrap();
    let chain =
        "Batcher/Header/Zip/Unbatcher/Batcher/Shuffler/Filter/TryMapper/MultiNodeWeightedSampler";
    let expected: Vec<(String, u64)> = [
        ("Batcher", 7),
        ("Batcher/Header", 25),
        ("Batcher/Header/Zip", 25),
        ("Batcher/Header/Zip/IterableWrapper", 25),
        ("Batcher/Header/Zip/Unbatcher", 25),
        ("Batcher/Header/Zip/Unbatcher/Batcher", 9),
        ("Batcher/Header/Zip/Unbatcher/Batcher/Shuffler", 25),
        (
            "Batcher/Header/Zip/Unbatcher/Batcher/Shuffler/Filter",
            kept.get() / EPOCHS,
        ),
        (
            "Batcher/Header/Zip/Unbatcher/Batcher/Shuffler/Filter/TryMapper",
            tried.get() / EPOCHS,
        ),
        (chain, 60),
        ("/dataset a: MapStyleWrapper", 30),
        ("/dataset a: MapStyleWrapper/SamplerWrapper", 30),
        ("/dataset b: Cycler", 20),
        ("/dataset b: Cycler/Mapper", mapped.get() / EPOCHS),
        ("/dataset b: Cycler/Mapper/IterableWrapper", 20),
        ("/dataset c: Sharder", 10),
        ("/dataset c: Sharder/IterableWrapper", 40),
    ]
    .into_iter()
    .map(|(node, per_epoch)| {
        let node = if node.starts_with('/') {
            format!("{chain}{node}")
        } else {
            node.to_owned()
        };
        (node, per_epoch * EPOCHS)
    })
    .collect();
    let mut found: Vec<(String, u64)> = stats
        .nodes
        .iter()
        .map(|n| (n.node.clone(), n.items))
        .collect();
    found.sort();
    let mut expected = expected;
    expected.sort();
    assert_eq!(found, expected, "\n{stats}");
    for n in &stats.nodes {
        // Calls are items plus end signals (a `Shuffler` draining its buffer
        // asks its ended source again, as the contract allows).
        assert!(n.calls >= n.items, "{stats}");
        // Sequential nodes never wait on a queue.
        assert!(n.blocked.is_zero() && n.mean_queue_depth().is_none());
    }
    let sampler = stats.get("MultiNodeWeightedSampler").unwrap();
    assert!(sampler.calls > sampler.items, "the end was signalled");
}

/// Runs `f` on a thread and fails if it takes more than 60 s (a deadlock).
fn watchdog(name: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => handle.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{name}: no progress in 60 s"),
    }
}

/// A consumer faster than the workers is blocked on them; one slower than
/// them finds results queued up. Both are recorded, as samples, not timings.
#[test]
fn parallel_mapper_reports_blocked_time_and_queue_depth() {
    watchdog("ParallelMapper stats", || {
        const N: u64 = 20;
        let done = Calls::default();
        let counter = done.clone();
        let node = IterableWrapper::new(0..N)
            .par_map(
                move |x| {
                    // Load only: workers slower than the consumer make it
                    // wait often; the assertions hold either way.
                    std::thread::sleep(Duration::from_millis(2));
                    counter.tick();
                    Ok(x)
                },
                // A window as long as the pass: the workers can map all of
                // it ahead of a slow consumer.
                ParallelOptions::new(2).max_concurrent(N as usize),
            )
            .unwrap();
        let mut loader = Loader::new(node).record_stats();
        // Fast consumer: waits for every item.
        assert_eq!(loader.epoch().count() as u64, N);
        let stats = loader.stats().unwrap();
        let mapper = stats.get("ParallelMapper").expect("a row");
        assert_eq!(mapper.items, N);
        assert!(mapper.blocked > Duration::ZERO, "{stats}");
        assert!(mapper.blocked <= mapper.self_time, "{stats}");
        assert!(mapper.mean_queue_depth().is_some(), "{stats}");

        // Slow consumer: after its first call starts the pass, it waits
        // until the workers have mapped all of it, so the rest is queued.
        let mut epoch = loader.epoch();
        for received in 0..N {
            if received == 1 {
                done.wait_for(2 * N);
            }
            epoch.next().unwrap().unwrap();
        }
        assert!(epoch.next().is_none());
        drop(epoch);
        let stats = loader.stats().unwrap();
        let mapper = stats.get("ParallelMapper").expect("a row");
        assert_eq!(mapper.items, 2 * N);
        assert!(mapper.max_queue_depth >= 1, "{stats}");
    });
}

#[test]
fn prefetcher_reports_blocked_time_and_queue_depth() {
    watchdog("Prefetcher stats", || {
        const N: u64 = 20;
        let pulled = Calls::default();
        let counter = pulled.clone();
        let slow = IterableWrapper::new(0..N).map(|x| {
            // Load only, as above.
            std::thread::sleep(Duration::from_millis(2));
            x
        });
        let mut loader = Loader::new(slow.prefetch(4).unwrap()).record_stats();
        assert_eq!(loader.epoch().count() as u64, N);
        let stats = loader.stats().unwrap();
        let prefetcher = stats.get("Prefetcher").expect("a row");
        assert_eq!(prefetcher.items, N);
        assert!(prefetcher.blocked > Duration::ZERO, "{stats}");
        assert!(prefetcher.mean_queue_depth().is_some(), "{stats}");
        // The source runs on the reader thread, and shows under the prefetcher.
        assert_eq!(
            stats.get("Prefetcher/Mapper").expect("a row").items,
            N,
            "{stats}"
        );

        let fast = IterableWrapper::new(0..N).map(move |x| {
            counter.tick();
            x
        });
        // A read-ahead as long as the pass, and a consumer that waits, once
        // the pass started, until the reader has pulled all of it: the rest
        // waits in the queue.
        let mut loader = Loader::new(fast.prefetch(N as usize).unwrap()).record_stats();
        let mut epoch = loader.epoch();
        for received in 0..N {
            if received == 1 {
                pulled.wait_for(N);
            }
            epoch.next().unwrap().unwrap();
        }
        assert!(epoch.next().is_none());
        drop(epoch);
        let stats = loader.stats().unwrap();
        let prefetcher = stats.get("Prefetcher").expect("a row");
        assert_eq!(prefetcher.items, N);
        assert!(prefetcher.max_queue_depth >= 1, "{stats}");
    });
}

/// Every inline stock node reports to the statistics (moved from the
/// random-chain test of nodes-std).
#[test]
fn every_stock_node_reports_to_the_statistics() {
    let data: Vec<u64> = (0..12).collect();
    let node = IterableWrapper::new(0..20u64)
        .map(|x| x + 1)
        .try_map(|x| Ok::<_, std::io::Error>(x * 2))
        .filter(|x| x % 3 != 0)
        .batch(3)
        .unwrap()
        .unbatch()
        .header(10)
        .shuffle(4, 1)
        .unwrap()
        .zip(MapStyleWrapper::shuffled(data, 2))
        .cycle_n(2)
        .unwrap();
    let mut loader = Loader::new(node).record_stats();
    let out: Vec<(u64, u64)> = loader.epoch().collect::<Result<_>>().unwrap();
    assert_eq!(out.len(), 20);
    let stats = loader.stats().unwrap();
    for name in [
        "Cycler",
        "Zip",
        "Shuffler",
        "Header",
        "Unbatcher",
        "Batcher",
        "Filter",
        "TryMapper",
        "Mapper",
        "IterableWrapper",
        "MapStyleWrapper",
        "SamplerWrapper",
    ] {
        assert!(
            stats.nodes.iter().any(|n| n.name == name),
            "{name} missing:\n{stats}"
        );
    }
    assert_eq!(stats.get("Cycler").unwrap().items, 20);
    assert_eq!(stats.get("Header").unwrap().items, 20);
}

/// `record_stats` turns statistics on; without it there are none.
#[test]
fn record_stats_turns_statistics_on() {
    let pipeline = || IterableWrapper::new(0..5u64).map(|x| x + 1);
    let mut loader = Loader::new(pipeline()).record_stats();
    assert_eq!(loader.epoch().count(), 5);
    assert!(loader.stats().is_some());
    let mut plain = Loader::new(pipeline());
    assert_eq!(plain.epoch().count(), 5);
    assert!(plain.stats().is_none());
}

/// The rows of a mix's sources carry the labels its description gives
/// them (`dataset web: Mapper`), not their type names numbered by which
/// was called first (`Mapper#2`).
#[test]
fn the_rows_of_a_mixs_sources_carry_their_description_labels() {
    let source = |n: u64| IterableWrapper::new(0..n).map(|x| x + 1);
    let mix = MultiNodeWeightedSampler::new(
        [("web", source(6)), ("code", source(4))],
        [("web", 0.5), ("code", 0.5)],
    )
    .unwrap()
    .stop_criteria(StopCriteria::AllDatasetsExhausted);
    let mut loader = Loader::new(mix).record_stats();
    assert_eq!(loader.epoch().count(), 10);
    let described = loader.describe().render_text();
    let stats = loader.stats().unwrap();
    let mut rows: Vec<(&str, u64)> = stats.nodes.iter().map(|n| (&*n.node, n.items)).collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            ("MultiNodeWeightedSampler", 10),
            ("MultiNodeWeightedSampler/dataset code: Mapper", 4),
            (
                "MultiNodeWeightedSampler/dataset code: Mapper/IterableWrapper",
                4
            ),
            ("MultiNodeWeightedSampler/dataset web: Mapper", 6),
            (
                "MultiNodeWeightedSampler/dataset web: Mapper/IterableWrapper",
                6
            ),
        ],
        "\n{stats}"
    );
    for label in ["dataset web: Mapper", "dataset code: Mapper"] {
        assert!(described.contains(label), "{described}");
    }
}
