//! Wide pipelines: taking and restoring the state of a
//! `MultiNodeWeightedSampler` does a bounded amount of work per source.
//!
//! The work is counted, not timed ([`testing::state_work`]: entries
//! visited by lookups, entries written or copied, nested states opened,
//! checksum steps, as each state counts them), so the test cannot flake on a busy machine. A step that
//! did work proportional to the number of sources *for each source* (a scan
//! of the whole state per key, a copy of a level per child) shows as a
//! count per source that grows with the number of sources. The timing
//! itself is `cargo run --release --example wide_restore`.

use nodes_std::prelude::*;
use nodes_std::testing;
use nodes_std::{IterableWrapper, MultiNodeRoundRobinSampler, MultiNodeWeightedSampler};

fn sampler(n: usize) -> MultiNodeWeightedSampler<IterableWrapper<std::ops::Range<u64>>> {
    let sources = (0..n).map(|i| (format!("s{i:05}"), IterableWrapper::new(0..100u64)));
    let weights = (0..n).map(|i| (format!("s{i:05}"), 1.0 + (i % 7) as f64));
    MultiNodeWeightedSampler::new(sources, weights)
        .unwrap()
        .seed(5)
}

/// Work per source of: `state_dict`, `load_state_dict` of the state read
/// back into a fresh loader, and again into the same loader, for a sampler
/// over `n` sources.
fn per_source(n: usize) -> [f64; 3] {
    let mut loader = Loader::new(sampler(n));
    let mut epoch = loader.epoch();
    for _ in 0..(3 * n) {
        epoch.next().transpose().unwrap();
    }
    let state = epoch.state_dict().unwrap();
    let take = testing::state_work(&state);
    let parsed = State::from_json(&state.to_json().unwrap()).unwrap();
    let mut target = Loader::new(sampler(n));
    let mut load = || {
        let before = testing::state_work(&parsed);
        target.load_state_dict(&parsed).unwrap();
        testing::state_work(&parsed) - before
    };
    let (load, again) = (load(), load());
    let n = n as f64;
    [take as f64 / n, load as f64 / n, again as f64 / n]
}

#[test]
fn state_and_restore_do_a_bounded_amount_of_work_per_source() {
    let small = per_source(1_000);
    let large = per_source(10_000);
    eprintln!("work per source at 1,000 and 10,000 sources: {small:?} {large:?}");
    for (what, (s, l)) in ["state_dict", "load_state_dict", "load again"]
        .iter()
        .zip(small.iter().zip(&large))
    {
        assert!(*s > 1.0, "{what}: the work is counted ({s} per source)");
        // Linear: ten times the sources, ten times the work, give or take
        // the per-call constant spread over 1,000 sources.
        assert!(
            *l <= s * 1.01 + 0.1,
            "{what}: {s:.2} units of work per source at 1,000 sources, {l:.2} at 10,000"
        );
    }
}

/// A state taken after `k` items of a started sampler over `n` sources.
fn state_after(n: usize, k: usize, seed: u64) -> State {
    let mut running = sampler(n).seed(seed).start().unwrap();
    for _ in 0..k {
        running.next().transpose().unwrap();
    }
    let state = running.get_state().unwrap();
    // Read back, as a loader hands a root its part of a state.
    State::from_json(&state.to_json().unwrap()).unwrap()
}

/// What a loader does: check the whole state, then apply it. The sampler
/// keeps what it decoded while checking, and applying the same state does
/// not decode it again.
#[test]
fn applying_the_state_just_checked_does_not_decode_it_again() {
    let n = 1_000;
    check_then_apply_decodes_once(|| sampler(n), &state_after(n, 3 * n, 5));
}

/// Applying `state` right after `check_state` accepted it costs less than
/// half the work of applying it alone, and leaves the node where applying it
/// alone does.
fn check_then_apply_decodes_once<N: Node>(build: impl Fn() -> N, state: &State) {
    let before = testing::state_work(state);
    let plain = build().start_from(state).unwrap();
    let alone = testing::state_work(state) - before;
    let checked = build();
    checked.check_state(state).unwrap();
    let before = testing::state_work(state);
    let checked = checked.start_from(state).unwrap();
    let after_check = testing::state_work(state) - before;
    assert!(
        after_check * 2 < alone,
        "reset after check_state: {after_check} units of work, reset alone: {alone}"
    );
    // Both stand at the same place.
    assert_eq!(plain.get_state().unwrap(), checked.get_state().unwrap());
}

/// What was decoded for one state is never applied for another, nor after
/// the configuration it was checked against changed.
#[test]
fn a_kept_decode_is_used_only_for_the_same_state() {
    let n = 20;
    let (early, late) = (state_after(n, 5, 5), state_after(n, 50, 5));
    let output = |running: nodes_std::Running<MultiNodeWeightedSampler<_>>| -> Vec<u64> {
        running.take(30).collect::<Result<_>>().unwrap()
    };
    let expected = output(sampler(n).start_from(&late).unwrap());
    // Checked one state (with equal content, or another), applied another.
    let copy = State::from_json(&late.to_json().unwrap()).unwrap();
    for checked_state in [early.clone(), copy] {
        let node = sampler(n);
        node.check_state(&checked_state).unwrap();
        assert_eq!(output(node.start_from(&late).unwrap()), expected);
    }
    // Checked, then re-seeded: the seed is compared again.
    let node = sampler(n);
    node.check_state(&late).unwrap();
    let err = node.seed(6).start_from(&late).unwrap_err();
    assert_eq!(err.state_path(), Some("/rng/seed"), "{err}");
    // Checked, then reset to the start: nothing kept is applied later.
    let node = sampler(n);
    node.check_state(&late).unwrap();
    let mut running = node.start().unwrap();
    running.reset(Some(&early)).unwrap();
    assert_eq!(
        output(running),
        output(sampler(n).start_from(&early).unwrap())
    );
}

/// The round-robin sampler keeps its decode the same way.
#[test]
fn the_round_robin_sampler_does_not_decode_a_checked_state_again() {
    let n = 1_000;
    let round_robin = || {
        let sources = (0..n).map(|i| (format!("s{i:05}"), IterableWrapper::new(0..100u64)));
        MultiNodeRoundRobinSampler::new(sources).unwrap()
    };
    let mut running = round_robin().start().unwrap();
    for _ in 0..(3 * n + 7) {
        running.next().transpose().unwrap();
    }
    let state = running.get_state().unwrap();
    check_then_apply_decodes_once(round_robin, &state);
    let other = round_robin().start().unwrap().get_state().unwrap();
    let checked = round_robin();
    checked.check_state(&state).unwrap();
    let running = checked.start_from(&other).unwrap();
    assert_eq!(running.get_state().unwrap(), other);
}

/// A sampler over two sources of unknown length (a `filter`: no check can
/// tell that a position is past the end, only the skip when applied).
fn inner(seed: u64) -> impl Node<Item = u64> {
    let source = || IterableWrapper::from_fn(|| (0..5u64).filter(|_| true));
    MultiNodeWeightedSampler::new([("x", source()), ("y", source())], [("x", 1.0), ("y", 1.0)])
        .unwrap()
        .seed(seed)
}

fn nested() -> impl Node<Item = u64> {
    let sources = (0..4).map(|i| (format!("s{i}"), inner(i)));
    let weights = (0..4).map(|i| (format!("s{i}"), 1.0));
    MultiNodeWeightedSampler::new(sources, weights)
        .unwrap()
        .seed(9)
}

/// A state whose last source fails to apply after the sampler has applied
/// the others (moving their epochs and `started` flags, which a plain
/// `reset(None)` would then advance) leaves the loader exactly where it
/// stood: fresh, or mid-epoch. The rollback point is the cheap one (shared
/// leaf states, deferred flags): it must restore like any other state.
#[test]
fn a_restore_failing_halfway_through_the_sources_leaves_the_loader_where_it_stood() {
    let mut donor = Loader::new(nested());
    assert!(donor.epoch().count() > 0);
    let mut epoch = donor.epoch();
    for _ in 0..7 {
        epoch.next().unwrap().unwrap();
    }
    let mut value = epoch.state_dict().unwrap().into_value();
    value["root"]["dataset_node_states"]["s3"]["dataset_node_states"]["y"]["num_yielded"] =
        serde_json::json!(99);
    let bad = State::from_value(value).unwrap();
    let load = |loader: &mut Loader<_>| {
        let err = loader.load_state_dict(&bad).unwrap_err();
        let path = err.state_path().unwrap_or_default().to_owned();
        assert!(
            path.contains("/s3/") && path.ends_with("num_yielded"),
            "{err}"
        );
    };
    let items = |loader: &mut Loader<_>| loader.epoch().collect::<Result<Vec<u64>>>().unwrap();

    // Fresh.
    let mut loader = Loader::new(nested()).verify_checksum(false);
    let mut control = Loader::new(nested());
    load(&mut loader);
    assert_eq!(loader.state_dict().unwrap(), control.state_dict().unwrap());
    for _ in 0..2 {
        assert_eq!(items(&mut loader), items(&mut control));
    }

    // Mid-epoch.
    let mut loader = Loader::new(nested()).verify_checksum(false);
    let mut control = Loader::new(nested());
    for l in [&mut loader, &mut control] {
        let mut epoch = l.epoch();
        for _ in 0..3 {
            epoch.next().unwrap().unwrap();
        }
    }
    load(&mut loader);
    assert_eq!(loader.state_dict().unwrap(), control.state_dict().unwrap());
    for _ in 0..2 {
        assert_eq!(items(&mut loader), items(&mut control));
    }
}

/// An edit of a loader state's `root` object.
type RootEdit = dyn Fn(&mut serde_json::Map<String, serde_json::Value>);

/// A wide sampler reads its per-source maps by position when their keys
/// are its source names in order. Any other state is read by name: the
/// same maps in another order resume exactly as the original, and a flag
/// or a source state of the wrong kind is an error naming its path.
#[test]
fn per_source_maps_in_another_order_or_of_the_wrong_kind_are_read_by_name() {
    let n = 300;
    let mut loader = Loader::new(sampler(n));
    let mut epoch = loader.epoch();
    let _ = epoch.by_ref().take(2 * n).count();
    let json = epoch.state_dict().unwrap().to_json().unwrap();
    let rest: Vec<u64> = epoch.collect::<Result<_>>().unwrap();
    let edited = |edit: &RootEdit| {
        let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
        edit(value["root"].as_object_mut().unwrap());
        State::from_value(value).unwrap()
    };
    fn reversed(map: &mut serde_json::Value) {
        let object = map.as_object_mut().unwrap();
        let members: Vec<_> = std::mem::take(object).into_iter().rev().collect();
        object.extend(members);
    }

    // Reordered, the content is the same (and so is its checksum).
    let reordered = edited(&|root| {
        for key in [
            "dataset_node_states",
            "datasets_exhausted",
            "datasets_empty",
        ] {
            reversed(&mut root[key]);
        }
    });
    assert_ne!(reordered.to_json().unwrap(), json, "the edit reorders");
    let mut target = Loader::new(sampler(n));
    target.load_state_dict(&reordered).unwrap();
    assert_eq!(target.epoch().collect::<Result<Vec<u64>>>().unwrap(), rest);

    let cases: [(&str, &RootEdit); 3] = [
        ("/root/datasets_exhausted/s00123", &|root| {
            root["datasets_exhausted"]["s00123"] = serde_json::json!("no");
        }),
        ("/root/dataset_node_states/s00200", &|root| {
            root["dataset_node_states"]["s00200"] = serde_json::json!(7);
        }),
        ("/root/dataset_node_states/s00005/num_yielded", &|root| {
            reversed(&mut root["datasets_empty"]);
            root["dataset_node_states"]["s00005"]["num_yielded"] = serde_json::json!(-1);
        }),
    ];
    for (path, edit) in cases {
        let err = target.load_state_dict(&edited(edit)).unwrap_err();
        assert_eq!(err.state_path(), Some(path), "{err}");
    }
}
