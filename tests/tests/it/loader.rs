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

#[test]
fn a_restore_right_before_a_failing_item_delivers_it_and_the_epoch_goes_on() {
    // Issue 11, item 2: the look-ahead after a restore used to end the epoch
    // at an `Err`, losing the rest of it. An `Err` is one item everywhere.
    for len in [10u64, 6] {
        let make = move || {
            IterableWrapper::new(0..len).try_map(|x| if x == 5 { Err("bad") } else { Ok(x) })
        };
        let show = |r: Result<u64>| r.map_err(|e| e.to_string());
        let whole: Vec<_> = Loader::new(make()).epoch().map(show).collect();
        assert_eq!(whole.len() as u64, len);
        assert!(whole[5].is_err() && whole.iter().filter(|r| r.is_err()).count() == 1);
        for cut in 0..=len as usize {
            let mut loader = Loader::new(make());
            let mut epoch = loader.epoch();
            let head: Vec<_> = epoch.by_ref().take(cut).map(show).collect();
            let saved = epoch.state_dict().unwrap();
            assert_eq!(epoch.num_yielded(), cut as u64, "an Err counts as an item");
            let json = saved.to_json().unwrap();

            let mut resumed = Loader::new(make());
            resumed
                .load_state_dict(&State::from_json(&json).unwrap())
                .unwrap();
            let mut epoch = resumed.epoch();
            if cut < len as usize {
                // The look-ahead (here possibly of the `Err`) is not in the state.
                assert_eq!(epoch.state_dict().unwrap(), saved, "len {len}, cut {cut}");
            }
            let rest: Vec<_> = epoch.map(show).collect();
            let expected_rest = if cut == len as usize {
                &whole[..]
            } else {
                &whole[cut..]
            };
            assert_eq!(rest, expected_rest, "len {len}, cut {cut}: {head:?}");
            // The epoch after it is a whole one.
            assert_eq!(resumed.epoch().map(show).collect::<Vec<_>>(), whole);
        }
    }
}

/// Reads one epoch of `loader`, returning its number and items.
fn numbered<N: Node>(loader: &mut Loader<N>) -> (u64, Vec<N::Item>) {
    let mut epoch = loader.epoch();
    let items = epoch.by_ref().collect::<Result<_>>().unwrap();
    (epoch.index(), items)
}

/// A state through JSON text, as a checkpoint file holds it.
fn through_json(state: &State) -> State {
    State::from_json(&state.to_json().unwrap()).unwrap()
}

#[test]
fn epochs_are_numbered_from_zero_and_the_number_is_in_the_state() {
    let mut loader = Loader::new(Probe::new(2));
    assert_eq!(
        loader
            .state_dict()
            .unwrap()
            .get::<u64>("epoch_index")
            .unwrap(),
        0
    );
    for k in 0..3 {
        assert_eq!(
            numbered(&mut loader),
            (k, vec![k * 1000 + 1000, k * 1000 + 1001])
        );
        let state = loader.state_dict().unwrap();
        assert_eq!(state.get::<u64>("epoch_index").unwrap(), k);
    }
}

#[test]
fn a_mid_epoch_state_resumes_in_its_epoch_and_an_end_of_epoch_state_in_the_next() {
    for k in 0..3u64 {
        for cut in 0..=3usize {
            let mut donor = Loader::new(Probe::new(3));
            for _ in 0..k {
                let _ = collect(&mut donor);
            }
            let mut epoch = donor.epoch();
            assert_eq!(epoch.index(), k);
            let _ = epoch.by_ref().take(cut).count();
            let saved = through_json(&epoch.state_dict().unwrap());
            assert_eq!(saved.get::<u64>("epoch_index").unwrap(), k);

            let mut resumed = Loader::new(Probe::new(3));
            resumed.load_state_dict(&saved).unwrap();
            let (index, rest) = numbered(&mut resumed);
            if cut == 3 {
                // Taken after the epoch's last item: the next epoch starts.
                assert_eq!((index, rest.len()), (k + 1, 3), "epoch {k}, cut {cut}");
            } else {
                assert_eq!((index, rest.len()), (k, 3 - cut), "epoch {k}, cut {cut}");
            }
            assert_eq!(numbered(&mut resumed).0, index + 1);
            // With `restart_on_end(false)` the end of epoch k is one empty epoch k.
            if cut == 3 {
                let mut resumed = Loader::new(Probe::new(3)).restart_on_end(false);
                resumed.load_state_dict(&saved).unwrap();
                assert_eq!(numbered(&mut resumed), (k, vec![]));
                assert_eq!(numbered(&mut resumed).0, k + 1);
            }
        }
    }
}

#[test]
fn a_loop_driven_by_the_epoch_index_runs_exactly_the_epochs_left() {
    // Issue 11, item 4: a loop counting epochs itself ran one epoch too many
    // after resuming an end-of-epoch checkpoint.
    const EPOCHS: u64 = 3;
    let run = |loader: &mut Loader<Probe>, stop_after: Option<u64>| {
        let mut seen = Vec::new();
        loop {
            let mut epoch = loader.epoch();
            if epoch.index() >= EPOCHS {
                return (seen, None);
            }
            while let Some(item) = epoch.next() {
                seen.push((epoch.index(), item.unwrap() % 1000));
            }
            if stop_after == Some(epoch.index()) {
                let saved = epoch.state_dict().unwrap().to_json().unwrap();
                return (seen, Some(saved));
            }
        }
    };
    let (whole, _) = run(&mut Loader::new(Probe::new(2)), None);
    assert_eq!(whole.len(), 6);
    for stop in 0..EPOCHS {
        let (head, saved) = run(&mut Loader::new(Probe::new(2)), Some(stop));
        let mut resumed = Loader::new(Probe::new(2));
        resumed
            .load_state_dict(&State::from_json(&saved.unwrap()).unwrap())
            .unwrap();
        let (tail, _) = run(&mut resumed, None);
        assert_eq!([head, tail].concat(), whole, "stopped after epoch {stop}");
    }
}

#[test]
fn a_bad_epoch_index_is_rejected_at_its_path_and_an_older_format_is_refused_as_such() {
    let mut donor = Loader::new(Probe::new(3));
    let _ = collect(&mut donor);
    let mut epoch = donor.epoch();
    let _ = epoch.next();
    let good = through_json(&epoch.state_dict().unwrap());
    assert_eq!(good.get::<u64>("epoch_index").unwrap(), 1);
    let edit = |f: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut value = good.to_value();
        let map = value.as_object_mut().unwrap();
        // Hand edits: drop the checksum, and load with the opt-out.
        map.remove("checksum");
        f(map);
        State::from_value(value).unwrap()
    };
    let mut loader = Loader::new(Probe::new(3)).verify_checksum(false);
    for (bad, path) in [
        (edit(&|m| drop(m.remove("epoch_index"))), "/epoch_index"),
        (
            edit(&|m| drop(m.insert("epoch_index".into(), "1".into()))),
            "/epoch_index",
        ),
        (
            edit(&|m| drop(m.insert("epoch_index".into(), (-1).into()))),
            "/epoch_index",
        ),
        (
            edit(&|m| drop(m.insert("epoch_index".into(), (1u64 << 63).into()))),
            "/epoch_index",
        ),
        (
            edit(&|m| drop(m.insert("format".into(), 1.into()))),
            "/format",
        ),
        (
            edit(&|m| drop(m.insert("format".into(), 4.into()))),
            "/format",
        ),
    ] {
        let err = loader.load_state_dict(&bad).unwrap_err();
        assert_eq!(err.state_path(), Some(path), "{err}");
    }
    // States written by builds before format 3 (format 1: no epoch index nor
    // checksum; format 2: a fingerprint over `Debug` renderings and the
    // pipeline as indented text) are refused, saying they are from an older
    // version, and the loader carries on from where it stood.
    let text = Loader::new(Probe::new(3)).describe().render_text();
    let format_1 = edit(&|m| {
        m.remove("epoch_index");
        m.insert("format".into(), 1.into());
        m.insert("pipeline".into(), text.clone().into());
    });
    let format_2 = edit(&|m| {
        m.insert("format".into(), 2.into());
        m.insert("pipeline".into(), text.clone().into());
    });
    for old in [format_1, format_2] {
        let mut loader = Loader::new(Probe::new(3));
        let err = loader.load_state_dict(&old).unwrap_err();
        assert_eq!(err.state_path(), Some("/format"), "{err}");
        assert!(
            err.to_string()
                .contains("this state is from an older version of nodes"),
            "{err}"
        );
        assert_eq!(
            numbered(&mut loader),
            numbered(&mut Loader::new(Probe::new(3)))
        );
    }
    let err = loader
        .load_state_dict(&edit(&|m| drop(m.insert("format".into(), 4.into()))))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("loader state format 4 is not supported (this build reads format 3)"),
        "{err}"
    );
}
