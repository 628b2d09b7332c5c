//! Exact size hints where the count is known: map-style sources and
//! samplers, batch with and without `drop_last`, shard, header, and the
//! same after a restore (what is left of the resumed pass, not the whole);
//! bounds where it is not; and the derive's `size_hint` attributes.

use nodes_std::prelude::*;
use nodes_std::{ErrorPolicy, Hint, Running, SizeHint};

/// `Running::size_hint` before every item and after the end, until the end.
fn hints<N: Node>(mut running: Running<N>) -> Vec<(u64, Option<u64>)> {
    let mut out = vec![running.size_hint()];
    while running.next().is_some() {
        out.push(running.size_hint());
    }
    out
}

/// The hint of a freshly started node.
fn first<N: Node>(node: N) -> (u64, Option<u64>) {
    node.start().unwrap().size_hint()
}

/// `n, n - 1, ..., 0`, each exact.
fn countdown(n: u64) -> Vec<(u64, Option<u64>)> {
    (0..=n).rev().map(|k| (k, Some(k))).collect()
}

#[test]
fn a_map_style_source_counts_down_exactly() {
    let data: Vec<u32> = (0..10).collect();
    assert_eq!(
        hints(MapStyleWrapper::sequential(data.clone()).start().unwrap()),
        countdown(10)
    );
    assert_eq!(
        hints(MapStyleWrapper::shuffled(data, 3).start().unwrap()),
        countdown(10)
    );
}

#[test]
fn samplers_count_their_share() {
    let random = SamplerWrapper::new(RandomSampler::new(7, 1));
    assert_eq!(hints(random.start().unwrap()), countdown(7));
    // 10 indices over 4 ranks: 3 each padded, 2 each dropped.
    let padded = ShardedSampler::new(SequentialSampler::new(10), 3, 4, Remainder::Pad).unwrap();
    assert_eq!(
        hints(SamplerWrapper::new(padded).start().unwrap()),
        countdown(3)
    );
    let dropped = ShardedSampler::new(SequentialSampler::new(10), 3, 4, Remainder::Drop).unwrap();
    assert_eq!(
        hints(SamplerWrapper::new(dropped).start().unwrap()),
        countdown(2)
    );
    let elastic = ElasticSampler::new(SequentialSampler::new(10), 1, 3).unwrap();
    assert_eq!(hints(elastic.start().unwrap()), countdown(3));
}

#[test]
fn batch_divides_and_honours_drop_last() {
    let source = || IterableWrapper::new((0..10u32).collect::<Vec<_>>());
    // 10 items in 4s: 4, 4, 2 kept; the short batch dropped.
    assert_eq!(
        hints(source().batch(4).unwrap().start().unwrap()),
        countdown(3)
    );
    assert_eq!(
        hints(source().batch_exact(4).unwrap().start().unwrap()),
        countdown(2)
    );
    assert_eq!(
        hints(source().batch(5).unwrap().start().unwrap()),
        countdown(2)
    );
    assert_eq!(
        hints(source().batch_exact(5).unwrap().start().unwrap()),
        countdown(2)
    );
    assert_eq!(
        hints(source().batch(11).unwrap().start().unwrap()),
        countdown(1)
    );
    assert_eq!(
        hints(source().batch_exact(11).unwrap().start().unwrap()),
        countdown(0)
    );
}

#[test]
fn batch_over_a_map_style_source_is_exact_from_below() {
    // A dataset lookup may fail, and an error would be an item of its own:
    // the lower bound is the batches, the upper one the items.
    let source = MapStyleWrapper::sequential((0..10u32).collect::<Vec<_>>());
    let mut running = source.batch(4).unwrap().start().unwrap();
    assert_eq!(running.size_hint(), (3, Some(10)));
    running.next().unwrap().unwrap();
    assert_eq!(running.size_hint(), (2, Some(6)));
}

#[test]
fn a_restored_pass_reports_what_is_left_of_it() {
    let build = |drop_last: bool| {
        let source = IterableWrapper::new(0..10u32).map(|x| x + 1);
        if drop_last {
            source.batch_exact(3)
        } else {
            source.batch(3)
        }
        .unwrap()
    };
    for (drop_last, total) in [(false, 4), (true, 3)] {
        let mut running = build(drop_last).start().unwrap();
        running.next().unwrap().unwrap();
        let state = running.get_state().unwrap();
        let resumed = build(drop_last).start_from(&state).unwrap();
        assert_eq!(
            hints(resumed),
            countdown(total - 1),
            "drop_last {drop_last}"
        );
    }
    // A map-style source restored after 6 of 10 items.
    let source = || MapStyleWrapper::shuffled((0..10u32).collect::<Vec<_>>(), 5);
    let mut running = source().start().unwrap();
    for _ in 0..6 {
        running.next().unwrap().unwrap();
    }
    let state = running.get_state().unwrap();
    assert_eq!(hints(source().start_from(&state).unwrap()), countdown(4));
}

#[test]
fn the_loader_epoch_reports_the_rest_of_a_resumed_epoch() {
    let build = || {
        IterableWrapper::new(0..10u32)
            .shuffle(4, 1)
            .unwrap()
            .batch(2)
            .unwrap()
    };
    let mut loader = Loader::new(build());
    let mut epoch = loader.epoch();
    assert_eq!(epoch.size_hint(), (5, Some(5)));
    epoch.next().unwrap().unwrap();
    epoch.next().unwrap().unwrap();
    assert_eq!(epoch.remaining(), (3, Some(3)));
    let state = epoch.state_dict().unwrap().to_json().unwrap();

    let mut resumed = Loader::new(build());
    resumed
        .load_state_dict(&State::from_json(&state).unwrap())
        .unwrap();
    let mut epoch = resumed.epoch();
    assert_eq!((epoch.num_yielded(), epoch.remaining()), (2, (3, Some(3))));
    assert_eq!(epoch.by_ref().count(), 3);
    assert_eq!(epoch.size_hint(), (0, Some(0)));
    // A state taken at the end of an epoch resumes with the whole next one.
    let end = resumed.state_dict().unwrap();
    let mut next = Loader::new(build());
    next.load_state_dict(&end).unwrap();
    let epoch = next.epoch();
    assert_eq!((epoch.index(), epoch.size_hint()), (1, (5, Some(5))));
}

#[test]
fn transforms_forward_or_bound_their_source() {
    let source = || IterableWrapper::new(0..10u32);
    assert_eq!(first(source().map(|x| x * 2)), (10, Some(10)));
    assert_eq!(first(source().filter(|x| x % 2 == 0)), (0, Some(10)));
    assert_eq!(first(source().header(4)), (4, Some(4)));
    assert_eq!(first(source().header(40)), (10, Some(10)));
    assert_eq!(first(source().cycle()), (10, None));
    assert_eq!(first(source().cycle().header(25)), (10, Some(25)));
    assert_eq!(first(source().cycle_n(1).unwrap()), (10, Some(10)));
    assert_eq!(
        hints(source().shard(1, 3).unwrap().start().unwrap()),
        countdown(3)
    );
    assert_eq!(first(source().zip(source().header(4))), (4, Some(4)));
    assert_eq!(first(source().batch(3).unwrap().unbatch()), (0, None));
}

#[test]
fn a_function_that_may_fail_loosens_what_follows_it() {
    let parse = |x: u32| if x == 3 { Err("three") } else { Ok(x) };
    let source = || IterableWrapper::new(0..10u32);
    // Delivered errors take their item's place.
    let deliver = source().try_map(parse);
    assert_eq!(hints(deliver.start().unwrap()), countdown(10));
    // Skipped ones do not.
    let skip = source().try_map(parse).on_error(ErrorPolicy::Skip);
    assert_eq!(skip.start().unwrap().size_hint(), (0, Some(10)));
    // A batch over it: the error comes as an extra item after its batch.
    let batched = source().try_map(parse).batch(4).unwrap().start().unwrap();
    assert_eq!(batched.size_hint(), (3, Some(10)));
    let all: Vec<_> = source()
        .try_map(parse)
        .batch(4)
        .unwrap()
        .start()
        .unwrap()
        .collect();
    assert_eq!(all.len(), 4, "three batches and the error");
}

#[test]
fn threaded_nodes_report_sound_bounds_and_exact_ends() {
    let options = || ParallelOptions::new(2);
    let mut running = IterableWrapper::new(0..50u32)
        .par_map(|x| Ok(x + 1), options())
        .unwrap()
        .prefetch(4)
        .unwrap()
        .start()
        .unwrap();
    let mut left = 50u64;
    loop {
        let (lower, upper) = running.size_hint();
        assert!(
            lower <= left && upper.is_none_or(|u| u >= left),
            "{lower} {upper:?} {left}"
        );
        if running.next().is_none() {
            break;
        }
        left -= 1;
    }
    assert_eq!((left, running.size_hint()), (0, (0, Some(0))));
    // Inline (no workers), the count is exact.
    let inline = IterableWrapper::new(0..5u32)
        .par_map(|x| Ok(x + 1), ParallelOptions::new(0))
        .unwrap();
    assert_eq!(hints(inline.start().unwrap()), countdown(5));
}

#[test]
fn mixers_give_what_their_stop_criterion_allows() {
    let sources = || {
        vec![
            ("a", IterableWrapper::new(vec![1u32, 2, 3]).boxed()),
            ("b", IterableWrapper::new(vec![4u32]).boxed()),
        ]
    };
    let rr = |stop| {
        MultiNodeRoundRobinSampler::new(sources())
            .unwrap()
            .stop_criteria(stop)
            .start()
            .unwrap()
    };
    assert_eq!(hints(rr(StopCriteria::AllDatasetsExhausted)), countdown(4));
    assert_eq!(
        rr(StopCriteria::FirstDatasetExhausted).size_hint(),
        (0, Some(4))
    );
    assert_eq!(
        rr(StopCriteria::CycleUntilAllDatasetsExhausted).size_hint(),
        (4, None)
    );
    let weighted = MultiNodeWeightedSampler::new(sources(), [("a", 1.0), ("b", 1.0)])
        .unwrap()
        .stop_criteria(StopCriteria::AllDatasetsExhausted)
        .start()
        .unwrap();
    assert_eq!(weighted.size_hint(), (0, Some(4)));
}

// The derive: nothing without the attribute, the child's hint with
// `size_hint = "child"`, the author's with a bare `size_hint`.

#[derive(Node)]
struct Plain<S> {
    #[node(child)]
    source: S,
}

#[derive(Node)]
#[node(size_hint = "child")]
struct Tap<S> {
    #[node(child)]
    source: S,
    #[node(state)]
    seen: u64,
}

#[derive(Node)]
#[node(size_hint)]
struct Pairs<S> {
    #[node(child)]
    source: S,
}

impl<S: Node<Item = u32>> Node for Plain<S> {
    type Item = u32;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u32>> {
        self.source.next(cx)
    }
}

impl<S: Node<Item = u32>> Node for Tap<S> {
    type Item = u32;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u32>> {
        let item = self.source.next(cx)?;
        self.seen += u64::from(item.is_some());
        Ok(item)
    }
}

impl<S: Node<Item = u32>> Node for Pairs<S> {
    type Item = (u32, u32);
    fn next(&mut self, cx: &mut Cx) -> Result<Option<(u32, u32)>> {
        let Some(a) = self.source.next(cx)? else {
            return Ok(None);
        };
        Ok(self.source.next(cx)?.map(|b| (a, b)))
    }
}

impl<S: Node> SizeHint for Pairs<S> {
    fn size_hint(&self) -> Hint {
        let source = self.source.size_hint();
        Hint {
            lower: source.lower / 2,
            upper: source.upper.map(|u| u / 2),
            ..source
        }
    }
}

#[test]
fn the_derive_writes_size_hint_only_when_asked() {
    let source = || IterableWrapper::new(0..7u32);
    let plain = Plain { source: source() }.start().unwrap();
    assert_eq!(
        (plain.size_hint(), plain.node().size_hint().may_fail),
        ((0, None), true)
    );
    let tap = Tap {
        source: source(),
        seen: 0,
    };
    assert_eq!(hints(tap.start().unwrap()), countdown(7));
    // `size_hint = "child"` forwards the count, not the promise of no errors.
    assert!(
        Tap {
            source: source(),
            seen: 0
        }
        .start()
        .unwrap()
        .node()
        .size_hint()
        .may_fail
    );
    let pairs = Pairs { source: source() };
    assert_eq!(hints(pairs.start().unwrap()), countdown(3));
    // (Called through `Stateful`: with `SizeHint` in scope too, the method
    // name alone is ambiguous.)
    assert!(!Stateful::size_hint(Pairs { source: source() }.start().unwrap().node()).may_fail);
    // Through a box too.
    let boxed = Pairs { source: source() }.boxed().start().unwrap();
    assert_eq!(boxed.size_hint(), (3, Some(3)));
}
