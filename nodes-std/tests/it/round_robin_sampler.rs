//! MultiNodeRoundRobinSampler: stop criteria, order, tagging, checkpoints.

use crate::mixing_support::{
    Count, Flaky, FromVec, check_error_semantics, counts, failing_if, outcomes, per_source, run,
    run_all, sorted_items, watchdog,
};
use nodes_std::{
    Error, MultiNodeRoundRobinSampler, NodeExt, Result, State, Stateful, StopCriteria, testing,
};

fn rr(sizes: &[u64], stop: StopCriteria) -> MultiNodeRoundRobinSampler<Count> {
    MultiNodeRoundRobinSampler::new(counts(sizes))
        .unwrap()
        .stop_criteria(stop)
}

#[test]
fn counting_facts_for_unequal_sources() {
    use StopCriteria::*;
    // Sizes 1, 2, 3 (torchdata's documented example).
    assert_eq!(
        run_all(rr(&[1, 2, 3], AllDatasetsExhausted)),
        [0, 1000, 2000, 1001, 2001, 2002]
    );
    assert_eq!(
        run_all(rr(&[1, 2, 3], FirstDatasetExhausted)),
        [0, 1000, 2000]
    );
    let cycle = run_all(rr(&[1, 2, 3], CycleUntilAllDatasetsExhausted));
    assert_eq!(
        cycle,
        [0, 1000, 2000, 0, 1001, 2001, 0, 1000, 2002, 0, 1001]
    );
    assert_eq!(per_source(&cycle, 3), [4, 4, 3]);
    // Sizes 4, 5, 6: d × s_max + (d − 1) = 20.
    assert_eq!(
        run_all(rr(&[4, 5, 6], CycleUntilAllDatasetsExhausted)).len(),
        20
    );
    // torchdata's parametrised counts: "unequal" sources of n + i items.
    for n in [1u64, 4, 8] {
        for d in [1usize, 2, 4] {
            let sizes: Vec<u64> = (0..d as u64).map(|i| n + i).collect();
            let total: u64 = sizes.iter().sum();
            assert_eq!(
                run_all(rr(&sizes, AllDatasetsExhausted)).len() as u64,
                total
            );
            assert_eq!(
                run_all(rr(&sizes, FirstDatasetExhausted)).len() as u64,
                d as u64 * n
            );
        }
        let d = 3u64;
        let sizes: Vec<u64> = (0..d).map(|i| n + i).collect();
        let max = n + d - 1;
        assert_eq!(
            run_all(rr(&sizes, CycleUntilAllDatasetsExhausted)).len() as u64,
            d * max + d - 1
        );
    }
}

#[test]
fn single_source() {
    for n in [4u64, 8, 16] {
        for stop in [
            StopCriteria::FirstDatasetExhausted,
            StopCriteria::AllDatasetsExhausted,
            StopCriteria::CycleUntilAllDatasetsExhausted,
        ] {
            let items = run_all(rr(&[n], stop));
            assert_eq!(items, (0..n).collect::<Vec<_>>(), "{stop}");
        }
        let items = run(rr(&[n], StopCriteria::CycleForever), 3 * n as usize);
        assert_eq!(items, (0..3 * n).map(|i| i % n).collect::<Vec<_>>());
    }
}

#[test]
fn cycle_forever_restarts_every_source() {
    let items = run(rr(&[1, 2], StopCriteria::CycleForever), 10);
    assert_eq!(items, [0, 1000, 0, 1001, 0, 1000, 0, 1001, 0, 1000]);
}

#[test]
fn empty_sources() {
    watchdog(30, || {
        for stop in StopCriteria::ALL {
            assert!(run_all(rr(&[0, 0, 0], stop)).is_empty(), "{stop}");
        }
        assert!(run_all(rr(&[0, 3], StopCriteria::FirstDatasetExhausted)).is_empty());
        assert_eq!(
            run_all(rr(&[0, 3], StopCriteria::AllDatasetsExhausted)),
            [1000, 1001, 1002]
        );
        // An empty source is skipped, not fatal (torchdata ends the pass there).
        assert_eq!(
            run_all(rr(&[0, 3], StopCriteria::CycleUntilAllDatasetsExhausted)),
            [1000, 1001, 1002]
        );
        let mut run = rr(&[0, 2], StopCriteria::CycleForever).start().unwrap();
        let items: Vec<u64> = run.by_ref().take(5).collect::<Result<_>>().unwrap();
        assert_eq!(items, [1000, 1001, 1000, 1001, 1000]);
        let s = run.get_state().unwrap();
        let empty = s.child("datasets_empty").unwrap();
        assert!(empty.get::<bool>("ds0").unwrap());
        assert!(!empty.get::<bool>("ds1").unwrap());
    });
}

#[test]
fn every_pass_is_the_same() {
    let mut run = rr(&[1, 2, 3], StopCriteria::CycleUntilAllDatasetsExhausted)
        .start()
        .unwrap();
    let first: Vec<u64> = run.by_ref().collect::<Result<_>>().unwrap();
    run.reset(None).unwrap();
    let second: Vec<u64> = run.by_ref().collect::<Result<_>>().unwrap();
    assert_eq!(first, second);
}

#[test]
fn save_load_every_stop_criterion() {
    for stop in StopCriteria::ALL {
        for sizes in [&[1u64, 2, 3][..], &[4, 0, 2], &[3]] {
            let build = || rr(sizes, stop).header(25);
            let len = run_all(build()).len();
            let mut cuts = vec![0, 1, 2, len / 2, len.saturating_sub(1), len, len + 2];
            cuts.sort_unstable();
            cuts.dedup();
            for m in cuts {
                testing::assert_save_load(build, m);
            }
        }
    }
}

#[test]
fn save_load_tagged_mixed_node_types() {
    let build = || {
        MultiNodeRoundRobinSampler::new([
            ("count", Count::new(0, 4).boxed()),
            ("vec", FromVec::new(vec![7, 8]).boxed()),
        ])
        .unwrap()
        .tagged()
    };
    let items = run_all(build());
    let names: Vec<&str> = items.iter().map(|t| &*t.source).collect();
    assert_eq!(
        names,
        [
            "count", "vec", "count", "vec", "count", "vec", "count", "vec"
        ]
    );
    let values: Vec<u64> = items.iter().map(|t| t.item).collect();
    assert_eq!(values, [0, 7, 1, 8, 2, 7, 3, 8]);
    for m in [0, 1, 3, 7, 8, 9] {
        testing::assert_save_load(build, m);
    }
}

#[test]
fn tagged_names_cycle_in_source_order() {
    let items = run_all(rr(&[5, 5, 5], StopCriteria::FirstDatasetExhausted).tagged());
    assert_eq!(items.len(), 15);
    for (i, t) in items.iter().enumerate() {
        assert_eq!(&*t.source, format!("ds{}", i % 3));
        assert_eq!(t.item, 1000 * (i as u64 % 3) + i as u64 / 3);
    }
}

#[test]
fn state_layout_and_progress() {
    let mut run = rr(&[1, 2, 3], StopCriteria::CycleUntilAllDatasetsExhausted)
        .start()
        .unwrap();
    let at_start = run.get_state().unwrap();
    run.next().unwrap().unwrap();
    run.next().unwrap().unwrap();
    run.next().unwrap().unwrap();
    run.next().unwrap().unwrap(); // ds0 ended and restarted
    let state = run.get_state().unwrap();
    assert_ne!(state, at_start);
    println!("{}", state.to_json_pretty().unwrap());
    let want = serde_json::json!({
        "current_dataset_index": 1,
        "dataset_keys": ["ds0", "ds1", "ds2"],
        "datasets_exhausted": {"ds0": true, "ds1": false, "ds2": false},
        "datasets_empty": {"ds0": false, "ds1": false, "ds2": false},
        "dataset_node_states": {
            "ds0": {"num_yielded": 1},
            "ds1": {"num_yielded": 1},
            "ds2": {"num_yielded": 1}
        },
        "dataset_first_pass_ends": {"ds0": {"num_yielded": 1}}
    });
    assert_eq!(state, State::from_value(want).unwrap());
    run.reset(None).unwrap();
    assert_eq!(run.get_state().unwrap(), at_start);
}

#[test]
fn rejects_states_from_other_samplers() {
    // A run over sources of the given sizes, `taken` items in.
    let started = |sizes: &[u64], taken: usize| {
        let mut run = rr(sizes, StopCriteria::AllDatasetsExhausted)
            .start()
            .unwrap();
        for _ in 0..taken {
            run.next().unwrap().unwrap();
        }
        run
    };
    let mismatch = |err: &Error| {
        err.to_string()
            .contains("mismatch between the dataset keys")
    };
    let three = started(&[2, 2, 2], 1).get_state().unwrap();

    // More sources.
    let err = started(&[2, 2, 2, 2], 0).reset(Some(&three)).unwrap_err();
    assert_eq!(err.state_path(), Some("/dataset_keys"));
    assert!(mismatch(&err), "{err}");

    // Same names, reversed order.
    let reversed = MultiNodeRoundRobinSampler::new(counts(&[2, 2, 2]).into_iter().rev()).unwrap();
    let mut reversed = reversed.start().unwrap();
    let err = reversed.reset(Some(&three)).unwrap_err();
    assert!(mismatch(&err), "{err}");

    // A cursor out of range, and a weighted sampler's state.
    let mut same = started(&[2, 2, 2], 2);
    let before = same.get_state().unwrap();
    for (key, value, path) in [
        ("current_dataset_index", 3, "/current_dataset_index"),
        ("epoch", 0, "/epoch"),
    ] {
        let mut v = three.clone().into_value();
        v[key] = value.into();
        let err = same
            .reset(Some(&State::from_value(v).unwrap()))
            .unwrap_err();
        assert_eq!(err.state_path(), Some(path));
    }
    assert_eq!(same.get_state().unwrap(), before, "rolled back");
    assert_eq!(
        same.collect::<Result<Vec<_>>>().unwrap(),
        [2000, 1, 1001, 2001]
    );

    // The right state works.
    let rest: Vec<u64> = rr(&[2, 2, 2], StopCriteria::AllDatasetsExhausted)
        .start_from(&three)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, [1000, 2000, 1, 1001, 2001]);
}

#[test]
fn rejects_invalid_arguments() {
    let err = MultiNodeRoundRobinSampler::new(Vec::<(String, Count)>::new()).unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidArgument {
            node: "MultiNodeRoundRobinSampler",
            ..
        }
    ));
    let err = MultiNodeRoundRobinSampler::new([("a", Count::new(0, 1)), ("a", Count::new(0, 1))])
        .unwrap_err();
    assert!(err.to_string().contains("appears more than once"), "{err}");
}

/// One error semantics: an `Err` from a source is one item. It takes the
/// source's turn (as the item would have), the pass goes on with the next
/// source, and a state taken right after it resumes exactly. Sources fail at
/// their first item (so also right after every restart), in the middle and
/// at their last item; one source has a single item, which fails (before,
/// the turn was kept and that source was asked again forever).
#[test]
fn source_error_is_one_item_in_every_stop_criterion() {
    let build = |stop: StopCriteria| {
        move |failing: bool| {
            let source = |base, len, fail_at| failing_if(failing, base, len, fail_at);
            MultiNodeRoundRobinSampler::new([
                ("a", source(0, 5, &[1, 4])),
                ("b", source(1000, 2, &[])),
                ("c", source(2000, 3, &[0, 2])),
                ("d", source(3000, 1, &[0])),
            ])
            .unwrap()
            .stop_criteria(stop)
        }
    };
    let failed = |item: u64| [1, 4, 2000, 2002, 3000].contains(&item);
    for stop in StopCriteria::ALL {
        let errors = check_error_semantics(build(stop), failed, 40);
        assert!(errors >= 2, "{stop}: only {errors} errors seen");
    }
}

/// A source that fails once without moving on (a transient error): the
/// error takes its turn, the item comes on the source's next turn, and
/// every item of every source is still delivered exactly once.
#[test]
fn transient_source_error_takes_a_turn_and_loses_nothing() {
    let build = |flaky: bool| {
        let b = if flaky {
            Flaky::new(1000, 3, 1).boxed()
        } else {
            Count::new(1000, 3).boxed()
        };
        MultiNodeRoundRobinSampler::new([("a", Count::new(0, 3).boxed()), ("b", b)])
            .unwrap()
            .stop_criteria(StopCriteria::AllDatasetsExhausted)
    };
    let all = outcomes(&mut build(true).start().unwrap(), 100);
    let shape: Vec<std::result::Result<u64, ()>> =
        all.iter().map(|o| o.clone().map_err(|_| ())).collect();
    // b's turn after 0 is its error; its item 1001 comes on its next turn.
    assert_eq!(
        shape,
        [Ok(0), Ok(1000), Ok(1), Err(()), Ok(2), Ok(1001), Ok(1002)]
    );
    let got = sorted_items(&all);
    let mut want = run_all(build(false));
    want.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn describe_lists_sources() {
    let d = rr(&[1, 2], StopCriteria::CycleForever).describe();
    assert_eq!(
        d.to_string(),
        "MultiNodeRoundRobinSampler(stop_criteria=CYCLE_FOREVER, tag_output=false)"
    );
    assert_eq!(d.children().len(), 2);
}

/// The sampler reports to `Loader::record_stats`: one item per item returned.
#[test]
fn reports_to_loader_statistics() {
    let mut loader =
        nodes_std::Loader::new(rr(&[1, 2, 3], StopCriteria::AllDatasetsExhausted)).record_stats();
    let epoch: Vec<u64> = loader.epoch().collect::<Result<_>>().unwrap();
    let row = loader.stats().unwrap();
    let row = row.get("MultiNodeRoundRobinSampler").unwrap();
    assert_eq!(row.items as usize, epoch.len());
    assert_eq!(row.items, 6);
}
