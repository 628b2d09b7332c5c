//! MultiNodeWeightedSampler: stop criteria, determinism, frequencies, checkpoints.

use crate::mixing_support::{
    Count, Flaky, FromVec, check_error_semantics, counts, failing_if, outcomes, per_source, run,
    run_all, sorted_items, watchdog,
};
use nodes_std::{
    Error, IterableWrapper, Loader, MultiNodeWeightedSampler, Node, NodeExt, Result, State,
    Stateful, StopCriteria, testing,
};

const W4: [f64; 4] = [0.1, 0.2, 0.3, 0.4];

fn weights(ws: &[f64]) -> Vec<(String, f64)> {
    ws.iter()
        .enumerate()
        .map(|(i, &w)| (format!("ds{i}"), w))
        .collect()
}

fn sampler(
    sizes: &[u64],
    ws: &[f64],
    stop: StopCriteria,
    seed: u64,
) -> MultiNodeWeightedSampler<Count> {
    MultiNodeWeightedSampler::new(counts(sizes), weights(ws))
        .expect("valid sampler")
        .stop_criteria(stop)
        .seed(seed)
}

fn epochs<N: Node>(node: N, n: usize) -> Vec<Vec<N::Item>> {
    let mut loader = Loader::new(node);
    (0..n)
        .map(|_| loader.epoch().collect::<Result<Vec<_>>>().expect("epoch"))
        .collect()
}

fn json(state: &State) -> State {
    State::from_json(&state.to_json().unwrap()).unwrap()
}

fn root(loader_state: &State) -> State {
    loader_state.child("root").unwrap()
}

fn source_yielded(sampler_state: &State, name: &str) -> u64 {
    sampler_state
        .child("dataset_node_states")
        .unwrap()
        .child(name)
        .unwrap()
        .get("num_yielded")
        .unwrap()
}

fn flags(sampler_state: &State, key: &str) -> Vec<bool> {
    let map = sampler_state.child(key).unwrap();
    map.keys().map(|k| map.get::<bool>(k).unwrap()).collect()
}

/// The scenario from the original design discussion: a rare source (weight
/// 0.01) makes epoch 0 long; a state taken at the end of epoch 0, and one taken
/// 5 items into epoch 1, must each describe where they were taken and resume
/// exactly. (With Python generators the second state still described the end of
/// epoch 0.)
#[test]
fn design_discussion_rare_source_state_describes_new_epoch() {
    let build = || {
        MultiNodeWeightedSampler::new(counts(&[10, 10]), [("ds0", 0.01), ("ds1", 0.99)])
            .unwrap()
            .stop_criteria(StopCriteria::CycleUntilAllDatasetsExhausted)
    };
    let mut loader = Loader::new(build());

    // Epoch 0 runs until the rare source has been exhausted too.
    let epoch0: Vec<u64> = loader.epoch().collect::<Result<_>>().unwrap();
    let counts0 = per_source(&epoch0, 2);
    assert_eq!(
        counts0[0], 10,
        "the rare source ends the epoch: {counts0:?}"
    );
    assert!(counts0[1] > 100, "the frequent source cycles: {counts0:?}");
    let end0 = json(&loader.state_dict().unwrap());
    let s = root(&end0);
    assert_eq!(s.get::<u64>("epoch").unwrap(), 0);
    assert_eq!(s.get::<u64>("num_yielded").unwrap(), epoch0.len() as u64);
    assert_eq!(flags(&s, "datasets_exhausted"), [true, true]);

    // A new epoch, stopped after 5 items.
    let mut epoch = loader.epoch();
    let first5: Vec<u64> = epoch.by_ref().take(5).collect::<Result<_>>().unwrap();
    let mid1 = json(&epoch.state_dict().unwrap());
    let rest1: Vec<u64> = epoch.collect::<Result<_>>().unwrap();
    let epoch2: Vec<u64> = loader.epoch().collect::<Result<_>>().unwrap();

    // The second state describes the new epoch, with the sources near their start.
    let s = root(&mid1);
    assert_eq!(s.get::<u64>("epoch").unwrap(), 1);
    assert_eq!(s.get::<u64>("num_yielded").unwrap(), 5);
    assert_eq!(flags(&s, "datasets_exhausted"), [false, false]);
    let (y0, y1) = (source_yielded(&s, "ds0"), source_yielded(&s, "ds1"));
    assert_eq!(y0 + y1, 5);
    assert!(
        y0 <= 1,
        "the rare source is at (or next to) its beginning: {y0}"
    );
    assert_eq!(per_source(&first5, 2), [y0 as usize, y1 as usize]);
    assert_ne!(
        [&epoch0[..], &rest1[..]].concat(),
        [&first5[..], &rest1[..]].concat(),
        "epoch 1 differs from epoch 0"
    );

    // Each state restores into a fresh pipeline and continues exactly.
    let mut fresh = Loader::new(build());
    fresh.load_state_dict(&end0).unwrap();
    let resumed: Vec<u64> = fresh.epoch().collect::<Result<_>>().unwrap();
    assert_eq!(resumed, [&first5[..], &rest1[..]].concat());
    let resumed2: Vec<u64> = fresh.epoch().collect::<Result<_>>().unwrap();
    assert_eq!(resumed2, epoch2);

    let mut fresh = Loader::new(build());
    fresh.load_state_dict(&mid1).unwrap();
    let resumed: Vec<u64> = fresh.epoch().collect::<Result<_>>().unwrap();
    assert_eq!(resumed, rest1);
    let resumed2: Vec<u64> = fresh.epoch().collect::<Result<_>>().unwrap();
    assert_eq!(resumed2, epoch2);
}

/// Directly on the node: right after `reset(None)` the state already
/// describes the new epoch (no lazily-started generator in between).
#[test]
fn state_right_after_reset_describes_the_new_epoch() {
    let mut run = sampler(&[3, 4], &[0.5, 0.5], StopCriteria::AllDatasetsExhausted, 5)
        .start()
        .unwrap();
    let epoch0: Vec<u64> = run.by_ref().collect::<Result<_>>().unwrap();
    assert_eq!(epoch0.len(), 7);
    run.reset(None).unwrap();
    let s = run.get_state().unwrap();
    assert_eq!(s.get::<u64>("epoch").unwrap(), 1);
    assert_eq!(s.get::<u64>("num_yielded").unwrap(), 0);
    assert_eq!(source_yielded(&s, "ds0") + source_yielded(&s, "ds1"), 0);
    assert_eq!(s.child("rng").unwrap().get::<u64>("word_pos").unwrap(), 0);
}

fn midpoints(epoch_len: usize) -> Vec<usize> {
    let mut m = vec![
        0,
        1,
        2,
        epoch_len / 2,
        epoch_len.saturating_sub(1),
        epoch_len,
        epoch_len + 3,
    ];
    m.sort_unstable();
    m.dedup();
    m
}

/// Save and load at the [`midpoints`] of a whole pass of `build()`.
fn save_load_at_midpoints<N>(build: impl Fn() -> N)
where
    N: Node,
    N::Item: PartialEq + std::fmt::Debug,
{
    let len = run(build(), usize::MAX).len();
    for m in midpoints(len) {
        testing::assert_save_load(&build, m);
    }
}

#[test]
fn save_load_every_stop_criterion() {
    let sizes = [3, 5, 7];
    let ws = [0.5, 0.3, 0.2];
    for stop in StopCriteria::ALL {
        if stop == StopCriteria::CycleForever {
            let build = || sampler(&sizes, &ws, stop, 11).header(40);
            for m in midpoints(40) {
                testing::assert_save_load(build, m);
            }
        } else {
            let build = || sampler(&sizes, &ws, stop, 11);
            save_load_at_midpoints(build);
        }
    }
}

#[test]
fn save_load_tagged_on_another_rank() {
    for stop in StopCriteria::ALL {
        let build = || {
            sampler(&[4, 6], &[1.0, 3.0], stop, 3)
                .rank(2, 5)
                .unwrap()
                .tagged()
                .header(30)
        };
        for m in [0, 1, 5, 9, 30] {
            testing::assert_save_load(build, m);
        }
    }
}

#[test]
fn save_load_with_zero_weight_and_empty_sources() {
    for stop in StopCriteria::ALL {
        let build = || sampler(&[4, 0, 6, 5], &[1.0, 1.0, 2.0, 0.0], stop, 8).header(35);
        save_load_at_midpoints(build);
    }
}

#[test]
fn save_load_mixed_node_types() {
    let build = || {
        MultiNodeWeightedSampler::new(
            [
                ("count", Count::new(0, 5).boxed()),
                ("vec", FromVec::new(vec![100, 101, 102]).boxed()),
            ],
            [("vec", 1.0), ("count", 2.0)],
        )
        .unwrap()
        .seed(21)
    };
    let mut all = run(
        build().stop_criteria(StopCriteria::AllDatasetsExhausted),
        usize::MAX,
    );
    all.sort_unstable();
    assert_eq!(all, [0, 1, 2, 3, 4, 100, 101, 102]);
    for m in [0, 1, 4, 8, 20] {
        testing::assert_save_load(build, m);
    }
}

#[test]
fn stop_criteria_semantics() {
    for seed in 0..10 {
        // FirstDatasetExhausted: ends when one source has given all its items.
        let items = run(
            sampler(&[10; 4], &W4, StopCriteria::FirstDatasetExhausted, seed),
            10_000,
        );
        let c = per_source(&items, 4);
        assert_eq!(*c.iter().max().unwrap(), 10, "seed {seed}: {c:?}");

        // AllDatasetsExhausted: every item exactly once.
        let mut items = run(
            sampler(&[10; 4], &W4, StopCriteria::AllDatasetsExhausted, seed),
            10_000,
        );
        assert_eq!(per_source(&items, 4), [10; 4], "seed {seed}");
        items.sort_unstable();
        items.dedup();
        assert_eq!(items.len(), 40);

        // CycleUntilAllDatasetsExhausted: every source ends at least once.
        let items = run(
            sampler(
                &[10; 4],
                &W4,
                StopCriteria::CycleUntilAllDatasetsExhausted,
                seed,
            ),
            100_000,
        );
        let c = per_source(&items, 4);
        assert!(c.iter().all(|&n| n >= 10), "seed {seed}: {c:?}");
        assert!(
            c.contains(&10),
            "seed {seed}: the last source to end ends the pass: {c:?}"
        );

        // CycleForever: never ends.
        let mut run = sampler(&[10; 4], &[1.0; 4], StopCriteria::CycleForever, seed)
            .start()
            .unwrap();
        for _ in 0..256 {
            run.next().unwrap().unwrap();
        }
        assert_eq!(run.node().num_yielded(), 256);
        assert_eq!(
            run.get_state().unwrap().get::<u64>("num_yielded").unwrap(),
            256
        );
    }
}

#[test]
fn zero_weight_source_is_never_drawn_and_does_not_block_the_end() {
    for stop in StopCriteria::ALL {
        let items = run(sampler(&[5, 5], &[1.0, 0.0], stop, 2), 50);
        let c = per_source(&items, 2);
        assert_eq!(c[1], 0, "{stop}: {c:?}");
        let expected = if stop == StopCriteria::CycleForever {
            50
        } else {
            5
        };
        assert_eq!(c[0], expected, "{stop}");
    }
}

#[test]
fn empty_sources_are_skipped_not_fatal() {
    watchdog(30, || {
        // CycleForever keeps going on the non-empty source.
        let mut run = sampler(&[3, 0], &[1.0, 1.0], StopCriteria::CycleForever, 4)
            .start()
            .unwrap();
        let items: Vec<u64> = run.by_ref().take(50).collect::<Result<_>>().unwrap();
        assert_eq!(per_source(&items, 2), [50, 0]);
        let s = run.get_state().unwrap();
        assert_eq!(flags(&s, "datasets_empty"), [false, true]);
        assert_eq!(flags(&s, "datasets_exhausted"), [true, true]);

        // Every source empty: nothing, even forever.
        for stop in StopCriteria::ALL {
            assert!(
                run_all(sampler(&[0, 0], &[1.0, 1.0], stop, 4)).is_empty(),
                "{stop}"
            );
        }
        // CycleUntilAll: the empty source counts as exhausted.
        let items = run_all(sampler(
            &[0, 5],
            &[1.0, 1.0],
            StopCriteria::CycleUntilAllDatasetsExhausted,
            4,
        ));
        assert_eq!(items, [1000, 1001, 1002, 1003, 1004]);
        let items = run_all(sampler(
            &[0, 5],
            &[1.0, 1.0],
            StopCriteria::AllDatasetsExhausted,
            4,
        ));
        assert_eq!(items, [1000, 1001, 1002, 1003, 1004]);
    });
}

#[test]
fn same_seed_and_state_same_sequence() {
    let build = || {
        sampler(
            &[4, 6, 8],
            &[0.2, 0.3, 0.5],
            StopCriteria::CycleUntilAllDatasetsExhausted,
            99,
        )
    };
    let a = epochs(build(), 3);
    let b = epochs(build(), 3);
    assert_eq!(a, b);

    // The same state, restored twice, gives the same continuation.
    let mut run = build().start().unwrap();
    run.by_ref().take(7).for_each(drop);
    let state = json(&run.get_state().unwrap());
    let rest: Vec<u64> = run.collect::<Result<_>>().unwrap();
    for _ in 0..2 {
        let again: Vec<u64> = build()
            .start_from(&state)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(again, rest);
    }
}

/// A state marked `replay` (as `elastic::reshard` writes for a `flat_map`'s
/// pending item) draws on the rank it names, whatever the sampler's own; an
/// unmarked one of another rank, or a marked one naming no rank, is refused
/// at its path.
#[test]
fn a_replayed_state_draws_on_the_rank_it_names() {
    let build = |rank: u64, world: u64| {
        sampler(
            &[9, 9, 9],
            &[0.2, 0.3, 0.5],
            StopCriteria::AllDatasetsExhausted,
            5,
        )
        .rank(rank, world)
        .unwrap()
    };
    let mut run = build(1, 2).start().unwrap();
    run.by_ref().take(4).for_each(drop);
    let state = json(&run.get_state().unwrap());
    let rest: Vec<u64> = run.collect::<Result<_>>().unwrap();
    let with_rng = |rng: serde_json::Value| {
        let mut value = state.to_value();
        value["rng"] = rng;
        State::from_value(value).unwrap()
    };
    let mut rng = state.value("rng").unwrap();
    rng["replay"] = true.into();
    let replayed: Vec<u64> = build(0, 3)
        .start_from(&with_rng(rng.clone()))
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(replayed, rest);
    let err = build(0, 3).start_from(&state).unwrap_err();
    assert_eq!(err.state_path(), Some("/rng/rank"), "{err}");
    rng["rank"] = 2.into();
    let err = build(0, 3).start_from(&with_rng(rng)).unwrap_err();
    assert_eq!(err.state_path(), Some("/rng/rank"), "{err}");
}

#[test]
fn epochs_seeds_and_ranks_give_other_sequences() {
    let build = |seed: u64, rank: u64| {
        sampler(&[10; 4], &W4, StopCriteria::AllDatasetsExhausted, seed)
            .rank(rank, 8)
            .unwrap()
    };
    // Every rank of a job draws a different sequence.
    let per_rank: Vec<Vec<u64>> = (0..8).map(|r| run_all(build(0, r))).collect();
    for i in 0..8 {
        for j in i + 1..8 {
            assert_ne!(per_rank[i], per_rank[j], "ranks {i} and {j}");
        }
    }
    // Every epoch differs.
    let e = epochs(build(0, 3), 3);
    assert_ne!(e[0], e[1]);
    assert_ne!(e[1], e[2]);
    assert_ne!(e[0], e[2]);
    // Another seed, another sequence.
    assert_ne!(run_all(build(1, 0)), per_rank[0]);
    // Same rank and seed, same sequence.
    assert_eq!(run_all(build(0, 5)), per_rank[5]);
}

/// Empirical frequencies over 1e5 draws (fixed seed, so deterministic): each
/// within one percentage point of its normalised weight, and a chi-square
/// goodness-of-fit statistic below the 0.1% critical value.
#[test]
fn frequencies_match_weights_over_1e5_draws() {
    const DRAWS: usize = 100_000;
    // (weights, chi-square critical value at p = 0.001 for len - 1 degrees of freedom)
    let cases: [(&[f64], f64); 3] = [
        (&[0.1, 0.2, 0.3, 0.4], 16.27),
        (&[0.01, 0.99], 10.83),
        (&[2.0, 1.0, 1.0, 0.5, 0.5], 18.47),
    ];
    for (ws, critical) in cases {
        let items = run(
            sampler(&vec![7; ws.len()], ws, StopCriteria::CycleForever, 1234),
            DRAWS,
        );
        assert_eq!(items.len(), DRAWS);
        let counts = per_source(&items, ws.len());
        let total: f64 = ws.iter().sum();
        let mut chi2 = 0.0;
        let mut report = Vec::new();
        for (i, (&w, &n)) in ws.iter().zip(&counts).enumerate() {
            let p = w / total;
            let f = n as f64 / DRAWS as f64;
            let expected = p * DRAWS as f64;
            chi2 += (n as f64 - expected).powi(2) / expected;
            report.push(format!(
                "ds{i}: weight {p:.4} freq {f:.5} (diff {:+.5})",
                f - p
            ));
            assert!((f - p).abs() < 0.01, "ds{i}: frequency {f} vs weight {p}");
        }
        println!(
            "weights {ws:?}: {}; chi2 {chi2:.2} (critical {critical})",
            report.join(", ")
        );
        assert!(
            chi2 < critical,
            "chi-square {chi2} >= {critical} for {ws:?}: {counts:?}"
        );
    }
}

/// Restore never replays the draws: a generator position far beyond anything
/// a replay could reach in a test's lifetime is restored instantly.
#[test]
fn restore_jumps_to_the_generator_position() {
    watchdog(30, || {
        let build = || sampler(&[5, 5], &[1.0, 1.0], StopCriteria::CycleForever, 6);
        // After 1e5 draws: restoring continues exactly.
        let mut run = build().start().unwrap();
        run.by_ref().take(100_000).for_each(drop);
        let state = json(&run.get_state().unwrap());
        assert_eq!(
            state.child("rng").unwrap().get::<u64>("word_pos").unwrap(),
            200_000
        );
        let next: Vec<u64> = run.by_ref().take(20).collect::<Result<_>>().unwrap();
        // The first 20 items of a fresh sampler restored from `state`.
        let first_20 = |state: &State| -> Vec<u64> {
            let run = build().start_from(state).unwrap();
            run.take(20).collect::<Result<_>>().unwrap()
        };
        assert_eq!(first_20(&state), next);

        // A position 2^62 words into the stream.
        let mut value = state.into_value();
        value["rng"]["word_pos"] = serde_json::json!(1u64 << 62);
        let far = State::from_value(value).unwrap();
        let a = first_20(&far);
        let b = first_20(&far);
        assert_eq!(a, b);
        assert_ne!(a, next);
    });
}

#[test]
fn epoch_advances_only_if_the_pass_had_started() {
    let mut run = sampler(&[3, 3], &[1.0, 1.0], StopCriteria::AllDatasetsExhausted, 0)
        .start()
        .unwrap();
    assert_eq!(run.node().epoch(), 0);
    run.reset(None).unwrap();
    assert_eq!(run.node().epoch(), 0, "no next since the last reset");
    run.next().unwrap().unwrap();
    run.reset(None).unwrap();
    assert_eq!(run.node().epoch(), 1);
    run.reset(None).unwrap();
    assert_eq!(run.node().epoch(), 1);
    // An epoch that ended also counts as started.
    run.by_ref().for_each(drop);
    run.reset(None).unwrap();
    assert_eq!(run.node().epoch(), 2);
}

#[test]
fn tagged_items_name_their_source_and_keep_the_state() {
    let build = || {
        sampler(
            &[3, 4, 5],
            &[1.0, 2.0, 3.0],
            StopCriteria::AllDatasetsExhausted,
            17,
        )
    };
    let mut plain = build().start().unwrap();
    let mut tagged = build().tagged().start().unwrap();
    for _ in 0..12 {
        let p = plain.next().unwrap().unwrap();
        let t = tagged.next().unwrap().unwrap();
        assert_eq!(t.item, p);
        assert_eq!(&*t.source, format!("ds{}", p / 1000));
        assert_eq!(tagged.get_state().unwrap(), plain.get_state().unwrap());
    }
    assert!(tagged.next().is_none());
}

/// One error semantics: an `Err` from a source is one item. It takes the
/// draw that chose the source (as the item would have), the pass goes on,
/// and a state taken right after it resumes exactly. Sources fail at their
/// first item (so also right after every restart), in the middle and at
/// their last item; one source has a single item, which fails (before, the
/// draw was taken back and that source was asked again forever).
#[test]
fn source_error_is_one_item_in_every_stop_criterion() {
    let build = |stop: StopCriteria, seed: u64| {
        move |failing: bool| {
            let source = |base, len, fail_at| failing_if(failing, base, len, fail_at);
            MultiNodeWeightedSampler::new(
                [
                    ("a", source(0, 7, &[2, 6])),
                    ("b", source(1000, 4, &[])),
                    ("c", source(2000, 5, &[0, 3])),
                    ("d", source(3000, 1, &[0])),
                ],
                [("a", 1.0), ("b", 2.0), ("c", 1.5), ("d", 0.5)],
            )
            .unwrap()
            .stop_criteria(stop)
            .seed(seed)
        }
    };
    let failed = |item: u64| [2, 6, 2000, 2003, 3000].contains(&item);
    for stop in StopCriteria::ALL {
        let mut errors = 0;
        for seed in 0..4 {
            errors += check_error_semantics(build(stop, seed), failed, 40);
        }
        assert!(errors >= 4, "{stop}: only {errors} errors seen");
    }
}

/// A source that fails once without moving on (a transient error): the
/// error takes its draw, the item comes at a later draw of that source, and
/// every item of every source is still delivered exactly once.
#[test]
fn transient_source_error_takes_a_draw_and_loses_nothing() {
    let build = |seed: u64, fail_at: Option<u64>| {
        let b = match fail_at {
            Some(k) => Flaky::new(1000, 6, k).boxed(),
            None => Count::new(1000, 6).boxed(),
        };
        MultiNodeWeightedSampler::new(
            [("a", Count::new(0, 6).boxed()), ("b", b)],
            [("a", 1.0), ("b", 1.0)],
        )
        .unwrap()
        .stop_criteria(StopCriteria::AllDatasetsExhausted)
        .seed(seed)
    };
    for seed in 0..8 {
        let mut want = run_all(build(seed, None));
        want.sort_unstable();
        for fail_at in 0..6 {
            let all = outcomes(&mut build(seed, Some(fail_at)).start().unwrap(), 100);
            let errors: Vec<&String> = all.iter().filter_map(|o| o.as_ref().err()).collect();
            assert_eq!(errors.len(), 1, "{all:?}");
            assert!(errors[0].contains("transient failure"), "{errors:?}");
            let got = sorted_items(&all);
            assert_eq!(got, want, "seed {seed}, failure at item {fail_at}");
        }
    }
}

#[test]
fn rejects_invalid_arguments() {
    fn err(r: Result<MultiNodeWeightedSampler<Count>>) -> String {
        match r {
            Err(Error::InvalidArgument { node, message }) => {
                assert_eq!(node, "MultiNodeWeightedSampler");
                message
            }
            Err(other) => panic!("wrong error: {other}"),
            Ok(_) => panic!("accepted"),
        }
    }
    let two = || counts(&[3, 3]);
    let cases: Vec<(Result<MultiNodeWeightedSampler<Count>>, &str)> = vec![
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", 1.0), ("x", 1.0)]),
            "not a source",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", 1.0)]),
            "no weight for source \"ds1\"",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", 1.0), ("ds1", 1.0), ("ds0", 2.0)]),
            "more than once",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", -1.0), ("ds1", 1.0)]),
            "non-negative",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", f64::NAN), ("ds1", 1.0)]),
            "finite",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", f64::INFINITY), ("ds1", 1.0)]),
            "finite",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", f64::NEG_INFINITY), ("ds1", 1.0)]),
            "finite",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", 0.0), ("ds1", 0.0)]),
            "all weights are zero",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", 1e308), ("ds1", 1e308)]),
            "finite sum",
        ),
        (
            MultiNodeWeightedSampler::new(
                Vec::<(String, Count)>::new(),
                Vec::<(String, f64)>::new(),
            ),
            "at least one source",
        ),
        (
            MultiNodeWeightedSampler::new(
                [("a", Count::new(0, 1)), ("a", Count::new(0, 1))],
                [("a", 1.0)],
            ),
            "appears more than once",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", 1.0), ("ds1", 1.0)])
                .and_then(|s| s.rank(2, 2)),
            "rank 2 is not below world_size 2",
        ),
        (
            MultiNodeWeightedSampler::new(two(), [("ds0", 1.0), ("ds1", 1.0)])
                .and_then(|s| s.rank(0, 0)),
            "world_size must be at least 1",
        ),
    ];
    for (result, want) in cases {
        let message = err(result);
        assert!(
            message.contains(want),
            "{message:?} should contain {want:?}"
        );
    }
    // Valid edge cases.
    let s = MultiNodeWeightedSampler::new(two(), [("ds1", 0.0), ("ds0", 1e-300)]).unwrap();
    let s = s.rank(7, 8).unwrap();
    assert_eq!((s.get_rank(), s.world_size()), (7, 8));
}

#[test]
fn rejects_states_that_do_not_fit_and_keeps_running() {
    let build = || sampler(&[5, 5], &[1.0, 1.0], StopCriteria::AllDatasetsExhausted, 3);
    let mut donor = build().start().unwrap();
    donor.by_ref().take(3).for_each(drop);
    let good = donor.get_state().unwrap();

    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone().into_value();
        f(&mut v);
        State::from_value(v).unwrap()
    };
    let cases = [
        (
            edit(&|v| v["rng"]["seed"] = 4.into()),
            "/rng/seed",
            "taken with seed 4, this MultiNodeWeightedSampler has seed 3",
        ),
        (edit(&|v| v["rng"]["rank"] = 1.into()), "/rng/rank", "rank"),
        (
            edit(&|v| v["dataset_keys"] = serde_json::json!(["ds1", "ds0"])),
            "/dataset_keys",
            "mismatch between the dataset keys",
        ),
        (edit(&|v| v["extra"] = 1.into()), "/extra", "unexpected key"),
        (
            edit(&|v| {
                v.as_object_mut().unwrap().remove("epoch");
            }),
            "/epoch",
            "missing key",
        ),
        (
            edit(&|v| v["epoch"] = "one".into()),
            "/epoch",
            "expected u64",
        ),
        (
            edit(&|v| {
                v["dataset_node_states"]
                    .as_object_mut()
                    .unwrap()
                    .remove("ds1");
            }),
            "/dataset_node_states/ds1",
            "missing key",
        ),
        (
            edit(&|v| v["dataset_node_states"]["ds1"]["num_yielded"] = 99.into()),
            "/dataset_node_states/ds1/num_yielded",
            "past the end",
        ),
        (
            edit(&|v| v["datasets_empty"]["ds0"] = true.into()),
            "/datasets_empty/ds0",
            "exhausted",
        ),
    ];
    let mut run = build().start().unwrap();
    run.by_ref().take(2).for_each(drop);
    let before = run.get_state().unwrap();
    for (state, path, want) in cases {
        let err = run.reset(Some(&state)).unwrap_err();
        assert_eq!(err.state_path(), Some(path), "{err}");
        assert!(
            err.to_string().contains(want),
            "{err} should contain {want:?}"
        );
        assert_eq!(run.get_state().unwrap(), before, "rolled back after {path}");
    }
    // It carries on as if nothing had happened.
    let rest: Vec<u64> = run.collect::<Result<_>>().unwrap();
    let mut reference = build().start().unwrap();
    reference.by_ref().take(2).for_each(drop);
    assert_eq!(rest, reference.collect::<Result<Vec<_>>>().unwrap());
}

#[test]
fn state_layout() {
    let mut run = sampler(
        &[2, 3],
        &[1.0, 3.0],
        StopCriteria::CycleUntilAllDatasetsExhausted,
        42,
    )
    .start()
    .unwrap();
    run.by_ref().take(3).for_each(drop);
    let state = run.get_state().unwrap();
    println!("{}", state.to_json_pretty().unwrap());
    let keys: Vec<&str> = state.keys().collect();
    assert_eq!(
        keys,
        [
            "epoch",
            "num_yielded",
            "started",
            "rng",
            "dataset_keys",
            "datasets_exhausted",
            "datasets_empty",
            "dataset_node_states"
        ]
    );
    let rng = state.child("rng").unwrap();
    assert_eq!(rng.get::<u64>("seed").unwrap(), 42);
    assert_eq!(rng.get::<u64>("rank").unwrap(), 0);
    assert_eq!(rng.get::<u64>("world_size").unwrap(), 1);
    assert_eq!(rng.get::<u64>("word_pos").unwrap(), 6);
    assert_eq!(
        state.get::<Vec<String>>("dataset_keys").unwrap(),
        ["ds0", "ds1"]
    );
    assert_eq!(
        source_yielded(&state, "ds0") + source_yielded(&state, "ds1"),
        3
    );
}

#[test]
fn describe_lists_parameters_and_sources() {
    let s = sampler(
        &[2, 3],
        &[1.0, 3.0],
        StopCriteria::FirstDatasetExhausted,
        42,
    )
    .tagged();
    let d = s.describe();
    assert_eq!(
        d.to_string(),
        "MultiNodeWeightedSampler(weights={ds0: 1, ds1: 3}, stop_criteria=FIRST_DATASET_EXHAUSTED, seed=42, rank=0, world_size=1, tag_output=true)"
    );
    let children: Vec<&str> = d.children().map(|(k, _)| k).collect();
    assert_eq!(
        children,
        ["dataset_node_states/ds0", "dataset_node_states/ds1"]
    );
    let debug = format!("{s:?}");
    assert!(
        debug.contains("ds1") && debug.contains("FirstDatasetExhausted"),
        "{debug}"
    );
}

/// With the stock source: different iterable types, boxed, every criterion.
#[test]
fn save_load_over_iterable_wrappers() {
    for stop in StopCriteria::ALL {
        let build = || {
            let sampler = MultiNodeWeightedSampler::new(
                [
                    ("range", IterableWrapper::new(0..6u64).boxed()),
                    ("vec", IterableWrapper::new(vec![100u64, 101, 102]).boxed()),
                ],
                [("range", 0.6), ("vec", 0.4)],
            )
            .unwrap()
            .stop_criteria(stop)
            .seed(77);
            sampler.header(30)
        };
        save_load_at_midpoints(build);
    }
}

/// The sampler reports to `Loader::record_stats`: one item per item returned.
#[test]
fn reports_to_loader_statistics() {
    let build = || sampler(&[3, 4], &[1.0, 1.0], StopCriteria::AllDatasetsExhausted, 0);
    let mut loader = Loader::new(build()).record_stats();
    let epoch0: Vec<u64> = loader.epoch().collect::<Result<_>>().unwrap();
    let epoch1: Vec<u64> = loader.epoch().collect::<Result<_>>().unwrap();
    let stats = loader.stats().unwrap();
    let row = stats.get("MultiNodeWeightedSampler").unwrap();
    assert_eq!(row.items as usize, epoch0.len() + epoch1.len());
    assert_eq!(row.items, 14);
}

/// The launcher's `RANK`/`WORLD_SIZE` pick the default stream. Environment
/// variables are per process, so the test re-runs itself in a child process
/// with them set (setting them here would race with the other tests).
#[test]
fn default_rank_comes_from_the_launcher_environment() {
    const CHILD: &str = "NODES_TEST_WEIGHTED_ENV_CHILD";
    let build = || {
        MultiNodeWeightedSampler::new(counts(&[50, 50]), [("ds0", 1.0), ("ds1", 1.0)])
            .map(|s| s.seed(7))
    };
    if std::env::var_os(CHILD).is_some() {
        let sampler = build().unwrap();
        assert_eq!((sampler.get_rank(), sampler.world_size()), (1, 2));
        let from_env = run(sampler, 20);
        let explicit = run(build().unwrap().rank(1, 2).unwrap(), 20);
        assert_eq!(from_env, explicit);
        assert_ne!(from_env, run(build().unwrap().rank(0, 1).unwrap(), 20));
        return;
    }
    let me = std::env::current_exe().unwrap();
    let test = "weighted_sampler::default_rank_comes_from_the_launcher_environment";
    let status = std::process::Command::new(&me)
        .args(["--exact", test, "--test-threads=1"])
        .env(CHILD, "1")
        .env("RANK", "1")
        .env("WORLD_SIZE", "2")
        .status()
        .unwrap();
    assert!(status.success(), "the child run failed");
    let bad = std::process::Command::new(&me)
        .args(["--exact", test, "--test-threads=1"])
        .env(CHILD, "1")
        .env("RANK", "1")
        .env_remove("WORLD_SIZE")
        .output()
        .unwrap();
    assert!(!bad.status.success(), "RANK without WORLD_SIZE must fail");
    let stdout = String::from_utf8_lossy(&bad.stdout);
    assert!(stdout.contains("must be set together"), "{stdout}");
    // Without the variables, this process draws rank 0 of 1's stream.
    if std::env::var_os("RANK").is_none() && std::env::var_os("WORLD_SIZE").is_none() {
        let sampler = build().unwrap();
        assert_eq!((sampler.get_rank(), sampler.world_size()), (0, 1));
    }
}

#[test]
fn a_restored_count_at_its_maximum_is_refused_not_overflowed() {
    let node = || sampler(&[3, 3], &[0.5, 0.5], StopCriteria::AllDatasetsExhausted, 1);
    let mut running = node().start().unwrap();
    running.next().unwrap().unwrap();
    let state = running.get_state().unwrap().to_json().unwrap();
    let at_max = state.replacen(
        r#""num_yielded":1"#,
        &format!(r#""num_yielded":{}"#, u64::MAX),
        1,
    );
    assert_ne!(at_max, state, "{state}");
    // No pass gets there: every item takes a draw, and the generator's
    // position says one was drawn, so the count is refused, not overflowed.
    let err = node()
        .start_from(&State::from_json(&at_max).unwrap())
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/rng/word_pos"), "{err}");
    let mut restored = node()
        .start_from(&State::from_json(&state).unwrap())
        .unwrap();
    assert_eq!(restored.by_ref().map(Result::unwrap).count(), 5);
}

/// Each setter takes effect: the getter reads it back, and the draws follow it.
#[test]
fn seed_sets_the_seed() {
    let build = || MultiNodeWeightedSampler::new(counts(&[20, 20]), weights(&[1.0, 1.0])).unwrap();
    let seeded = build().seed(9);
    assert_eq!(seeded.get_seed(), 9);
    assert_eq!(epochs(seeded, 2), epochs(build().seed(9), 2));
    assert_ne!(epochs(build().seed(9), 2), epochs(build().seed(10), 2));
}

#[test]
fn rank_sets_the_rank() {
    let build = || MultiNodeWeightedSampler::new(counts(&[20, 20]), weights(&[1.0, 1.0])).unwrap();
    let ranked = build().rank(1, 3).unwrap();
    assert_eq!((ranked.get_rank(), ranked.world_size()), (1, 3));
    assert!(build().rank(3, 3).is_err());
    assert_eq!(epochs(ranked, 1), epochs(build().rank(1, 3).unwrap(), 1));
    assert_ne!(
        epochs(build().rank(0, 3).unwrap(), 1),
        epochs(build().rank(1, 3).unwrap(), 1)
    );
}

#[test]
fn stop_criteria_sets_the_stop_criteria() {
    let build = || MultiNodeWeightedSampler::new(counts(&[5, 30]), weights(&[1.0, 1.0])).unwrap();
    let first = build().stop_criteria(StopCriteria::FirstDatasetExhausted);
    assert_eq!(
        first.get_stop_criteria(),
        StopCriteria::FirstDatasetExhausted
    );
    let all = build().stop_criteria(StopCriteria::AllDatasetsExhausted);
    assert!(epochs(first, 1)[0].len() < epochs(all, 1)[0].len());
    let round_robin = nodes_std::MultiNodeRoundRobinSampler::new(counts(&[2, 3]))
        .unwrap()
        .stop_criteria(StopCriteria::AllDatasetsExhausted);
    assert_eq!(
        round_robin.get_stop_criteria(),
        StopCriteria::AllDatasetsExhausted
    );
}
