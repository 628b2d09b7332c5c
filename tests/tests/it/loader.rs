//! `Loader` epoch semantics, including the upstream Loader bugs listed in
//! torchdata-nodes-spec section 8, each as an expected-correct test.

use crate::support::Probe;
use nodes_std::prelude::*;
use nodes_std::{IterableWrapper, testing};

fn collect<N: Node>(loader: &mut Loader<N>) -> Vec<N::Item> {
    loader.epoch().collect::<Result<_>>().unwrap()
}

#[test]
fn each_epoch_resets_and_state_dict_on_a_fresh_loader_resets_once() {
    let mut loader = Loader::new(Probe::new(3));
    // state_dict on a fresh loader resets the root once ...
    let initial = loader.state_dict().unwrap();
    assert_eq!(
        initial.child("root").unwrap().get::<u64>("resets").unwrap(),
        1
    );
    // ... and the first epoch starts from there without resetting again.
    assert_eq!(collect(&mut loader), [1000, 1001, 1002]);
    assert_eq!(collect(&mut loader), [2000, 2001, 2002]);
}

#[test]
fn end_of_epoch_state_starts_the_next_epoch_with_a_fresh_state() {
    // Upstream bug 1: after restarting from an end-of-epoch state, the loader
    // kept reporting the stale end state for the whole next epoch.
    let mut loader = Loader::new(Probe::new(4));
    let _ = collect(&mut loader);
    let end = loader.state_dict().unwrap();

    let mut resumed = Loader::new(Probe::new(4));
    resumed.load_state_dict(&end).unwrap();
    let mut epoch = resumed.epoch();
    let first_two: Vec<u64> = epoch.by_ref().take(2).collect::<Result<_>>().unwrap();
    assert_eq!(first_two, [2000, 2001]);
    let mid = epoch.state_dict().unwrap();
    assert_eq!(mid.get::<u64>("num_yielded").unwrap(), 2);
    assert_eq!(mid.child("root").unwrap().get::<u64>("i").unwrap(), 2);

    let mut again = Loader::new(Probe::new(4));
    again.load_state_dict(&mid).unwrap();
    assert_eq!(collect(&mut again), [2002, 2003]);
}

#[test]
fn load_after_an_early_state_dict_is_applied() {
    // Upstream bug 2: state_dict() on a fresh loader, then load_state_dict(),
    // then iterating started from the beginning.
    let mut donor = Loader::new(Probe::new(5));
    let mut epoch = donor.epoch();
    let _ = epoch.by_ref().take(3).count();
    let saved = epoch.state_dict().unwrap();

    let mut loader = Loader::new(Probe::new(5));
    let _ = loader.state_dict().unwrap();
    loader.load_state_dict(&saved).unwrap();
    assert_eq!(collect(&mut loader), [1003, 1004]);
}

#[test]
fn none_items_do_not_break_the_look_ahead() {
    // Upstream bug 3: a restore position whose next item is `None` looked like
    // the end of the epoch and restarted it.
    let data = vec![Some(1u8), None, None, Some(4)];
    let make = || IterableWrapper::new(data.clone());
    let mut loader = Loader::new(make());
    let mut epoch = loader.epoch();
    let _ = epoch.next();
    let saved = epoch.state_dict().unwrap();
    let mut resumed = Loader::new(make());
    resumed.load_state_dict(&saved).unwrap();
    assert_eq!(collect(&mut resumed), [None, None, Some(4)]);
    for midpoint in 0..=4 {
        testing::assert_save_load(make, midpoint);
    }
}

#[test]
fn state_taken_after_a_peek_does_not_count_the_peeked_item() {
    let mut loader = Loader::new(Probe::new(4));
    let mut epoch = loader.epoch();
    let _ = epoch.by_ref().take(1).count();
    let saved = epoch.state_dict().unwrap();
    let mut resumed = Loader::new(Probe::new(4));
    resumed.load_state_dict(&saved).unwrap();
    // Starting the epoch peeks one item ahead; a state taken right then must
    // still describe the position before it.
    let mut epoch = resumed.epoch();
    assert_eq!(epoch.state_dict().unwrap(), saved);
    assert_eq!(epoch.next().unwrap().unwrap(), 1001);
    assert_eq!(
        epoch
            .state_dict()
            .unwrap()
            .get::<u64>("num_yielded")
            .unwrap(),
        2
    );
}

#[test]
fn restart_on_end_false_gives_one_empty_epoch() {
    let mut loader = Loader::new(Probe::new(2));
    let _ = collect(&mut loader);
    let end = loader.state_dict().unwrap();
    let mut resumed = Loader::new(Probe::new(2)).restart_on_end(false);
    resumed.load_state_dict(&end).unwrap();
    assert_eq!(collect(&mut resumed), Vec::<u64>::new());
    assert_eq!(collect(&mut resumed), [2000, 2001]);
}

#[test]
fn bad_state_is_rejected_and_the_loader_continues_where_it_stood() {
    let mut loader = Loader::new(Probe::new(6));
    let mut epoch = loader.epoch();
    let _ = epoch.by_ref().take(2).count();
    let good = epoch.state_dict().unwrap();
    drop(epoch);

    let with = |key: &'static str, json: &str| {
        let mut bad = good.clone();
        bad.insert(
            key,
            serde_json::from_str::<serde_json::Value>(json).unwrap(),
        )
        .unwrap();
        bad
    };
    let cases = [
        (with("root", r#"{"i":"two","resets":1}"#), "/root/i"),
        (with("root", r#"{"i":99,"resets":1}"#), "/root/i"),
        (with("root", r#"{"i":1}"#), "/root/resets"),
        (with("num_yielded", "-1"), "/num_yielded"),
        (with("format", "7"), "/format"),
        (with("pipeline", "[]"), "/pipeline"),
        (with("unexpected", "1"), "/unexpected"),
        (State::from_json(r#"{"num_yielded":2}"#).unwrap(), "/root"),
    ];
    for (bad, path) in &cases {
        let err = loader.load_state_dict(bad).unwrap_err();
        assert_eq!(err.state_path(), Some(*path), "{err}");
    }

    assert_eq!(loader.state_dict().unwrap(), good);
    // The current epoch is over (its iterator was dropped); the loader's root
    // still stands at item 2, so a reload of the good state resumes there.
    loader.load_state_dict(&good).unwrap();
    assert_eq!(collect(&mut loader), [1002, 1003, 1004, 1005]);
}

#[test]
fn a_failed_restore_into_a_fresh_loader_leaves_it_fresh() {
    let mut donor = Loader::new(Probe::new(2));
    let mut bad = donor.state_dict().unwrap();
    bad.insert("root", serde_json::json!({"i": 9, "resets": 0}))
        .unwrap();
    let mut loader = Loader::new(Probe::new(2));
    assert!(loader.load_state_dict(&bad).is_err());
    assert_eq!(collect(&mut loader), [1000, 1001]);
}

#[test]
fn drop_and_shutdown_reach_the_root() {
    let probe = Probe::new(2);
    let counter = probe.shutdowns.clone();
    let mut loader = Loader::new(probe);
    let _ = collect(&mut loader);
    loader.shutdown();
    assert_eq!(counter.load(std::sync::atomic::Ordering::SeqCst), 1);
    drop(loader);
    assert_eq!(counter.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[test]
fn probe_passes_the_save_load_protocol() {
    for midpoint in [0, 1, 4, 5, 8] {
        testing::assert_save_load(|| Probe::new(5), midpoint);
    }
}

#[test]
fn a_state_from_a_pipeline_of_another_shape_is_rejected_naming_the_node() {
    let mut loader = Loader::new(Probe::new(5));
    let state = loader.state_dict().unwrap();
    // Same node type, another order-affecting parameter.
    let mut other = Loader::new(Probe::new(6));
    let err = other.load_state_dict(&state).unwrap_err();
    // The path is that of the differing node's state (here the root's).
    assert_eq!(err.state_path(), Some("/root"), "{err}");
    assert!(
        err.to_string()
            .contains("state is from Probe(len=5), pipeline has Probe(len=6)"),
        "{err}"
    );
    // The opt-out accepts it (the state itself still fits).
    let mut other = Loader::new(Probe::new(6)).check_shape(false);
    other.load_state_dict(&state).unwrap();
    assert_eq!(collect(&mut other).len(), 6);
}
