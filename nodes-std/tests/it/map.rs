//! Mapper and TryMapper: order, errors with indices, panics, save/load, and
//! the bad-record policy.

use crate::common::{RangeNode, collect, save_load_at_cuts};
use crate::scripted::{Broken, Item, Script, assert_resumes_at_every_cut, pass};
use nodes_std::prelude::*;

#[test]
fn map_applies_in_order() {
    let out = collect(IterableWrapper::new(0..5u32).map(|x| x * 2).map(|x| x + 1));
    assert_eq!(out, [1, 3, 5, 7, 9]);
}

#[test]
fn map_save_load() {
    save_load_at_cuts(|| RangeNode::new(6).map(|(i, r)| i * 100 + r));
    save_load_at_cuts(|| IterableWrapper::new(vec!["a", "b", "c"]).map(str::to_uppercase));
}

#[test]
fn try_map_errors_carry_node_and_index_and_do_not_stop_the_node() {
    let mut running = IterableWrapper::new(vec!["1", "2", "x", "4", "y"])
        .try_map(|s: &str| s.parse::<u32>())
        .start()
        .unwrap();
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for item in &mut running {
        match item {
            Ok(v) => ok.push(v),
            Err(Error::User { node, index, .. }) => failed.push((node.into_owned(), index)),
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(ok, [1, 2, 4]);
    assert_eq!(
        failed,
        [
            ("TryMapper".to_owned(), Some(2)),
            ("TryMapper".to_owned(), Some(4))
        ]
    );
}

#[test]
fn try_map_index_survives_restore() {
    let build = || IterableWrapper::new(vec![1i32, 2, -3, 4]).try_map(u8::try_from);
    let mut running = build().start().unwrap();
    running.next();
    let state = running.get_state().unwrap();
    assert_eq!(state.get::<u64>("num_seen").unwrap(), 1);
    let mut resumed = build().start_from(&state).unwrap();
    assert_eq!(resumed.next().transpose().unwrap(), Some(2));
    assert!(matches!(
        resumed.next(),
        Some(Err(Error::User { index: Some(2), .. }))
    ));
    assert_eq!(resumed.next().transpose().unwrap(), Some(4));
}

#[test]
fn try_map_save_load() {
    save_load_at_cuts(|| RangeNode::new(5).try_map(|(i, r)| Ok::<_, std::io::Error>(i + r)));
}

#[test]
fn map_panics_are_not_caught() {
    let result = std::panic::catch_unwind(|| {
        collect(IterableWrapper::new(0..3u8).map(|x| {
            assert!(x < 2, "boom at {x}");
            x
        }))
    });
    let payload = result.unwrap_err();
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("boom at 2")
    );
}

fn bad_at(at: u64) -> String {
    format!("user function failed in Script at item {at}: bad")
}

/// Fails on multiples of 4 (values, not positions).
fn quarter(x: u64) -> std::result::Result<u64, String> {
    if x.is_multiple_of(4) {
        Err(format!("{x} is a multiple of 4"))
    } else {
        Ok(x * 10)
    }
}

fn mapped_at(at: u64, x: u64) -> String {
    format!("user function failed in TryMapper at item {at}: {x} is a multiple of 4")
}

#[test]
fn map_passes_source_errors_on_in_their_place() {
    let out = pass(Script::with_bad(4, &[1]).map(|x| x + 1));
    assert_eq!(out, [Ok(1), Err(bad_at(1)), Ok(3), Ok(4)]);
    assert_resumes_at_every_cut(|| Script::with_bad(6, &[0, 3, 4]).map(|x| x * 2));
}

#[test]
fn try_map_indices_count_source_errors() {
    // Before: a bad record from the source did not count, so the index of a
    // later failure was one too low.
    let out = pass(Script::with_bad(6, &[1]).try_map(quarter));
    assert_eq!(
        out,
        [
            Err(mapped_at(0, 0)),
            Err(bad_at(1)),
            Ok(20),
            Ok(30),
            Err(mapped_at(4, 4)),
            Ok(50),
        ]
    );
}

#[test]
fn try_map_resumes_exactly_at_every_cut_under_every_policy() {
    for policy in [
        ErrorPolicy::Deliver,
        ErrorPolicy::Fail,
        ErrorPolicy::Skip,
        ErrorPolicy::SkipAtMost(0),
        ErrorPolicy::SkipAtMost(2),
        ErrorPolicy::SkipAtMost(9),
    ] {
        assert_resumes_at_every_cut(|| {
            Script::with_bad(14, &[2, 3, 10])
                .try_map(quarter)
                .on_error(policy)
        });
    }
}

#[test]
fn policies_decide_what_a_pass_returns() {
    let run = |policy| pass(Script::with_bad(10, &[2]).try_map(quarter).on_error(policy));
    // Items 0 (fails), 1, 2 (bad record), 3, 4 (fails), 5, 6, 7, 8 (fails), 9.
    assert_eq!(
        run(ErrorPolicy::Deliver),
        [
            Err(mapped_at(0, 0)),
            Ok(10),
            Err(bad_at(2)),
            Ok(30),
            Err(mapped_at(4, 4)),
            Ok(50),
            Ok(60),
            Ok(70),
            Err(mapped_at(8, 8)),
            Ok(90),
        ]
    );
    assert_eq!(run(ErrorPolicy::Fail), [Err(mapped_at(0, 0))]);
    assert_eq!(
        run(ErrorPolicy::Skip),
        [Ok(10), Ok(30), Ok(50), Ok(60), Ok(70), Ok(90)]
    );
    assert_eq!(
        run(ErrorPolicy::SkipAtMost(2)),
        [Ok(10), Ok(30), Err(mapped_at(4, 4))]
    );
    assert_eq!(
        run(ErrorPolicy::SkipAtMost(3)),
        [Ok(10), Ok(30), Ok(50), Ok(60), Ok(70), Err(mapped_at(8, 8))]
    );
}

#[test]
fn fail_ends_the_pass_until_the_next_reset() {
    let mut loader = Loader::new(
        Script::with_bad(5, &[])
            .try_map(quarter)
            .on_error(ErrorPolicy::Fail),
    );
    for _ in 0..2 {
        let mut epoch = loader.epoch();
        assert!(epoch.next().unwrap().is_err());
        assert!(epoch.next().is_none());
        let state = epoch.state_dict().unwrap();
        assert_eq!(
            state.child("root").unwrap().to_json().unwrap(),
            r#"{"source":{"i":1},"num_seen":1,"errors":{"skipped":0,"ended":true}}"#
        );
    }
}

#[test]
fn the_skip_count_survives_a_restore() {
    let build = || {
        Script::with_bad(12, &[])
            .try_map(quarter)
            .on_error(ErrorPolicy::SkipAtMost(2))
    };
    let mut running = build().start().unwrap();
    // 0 skipped, then 1, 2, 3; 4 skipped, then 5.
    let first: Vec<u64> = running.by_ref().take(4).collect::<Result<_>>().unwrap();
    assert_eq!(first, [10, 20, 30, 50]);
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"source":{"i":6},"num_seen":6,"errors":{"skipped":2,"ended":false}}"#
    );
    // The third skip would be over budget: 8 is delivered and ends the pass,
    // in the resumed run as in the uninterrupted one.
    let rest = crate::scripted::drain(&mut build().start_from(&state).unwrap(), 100);
    assert_eq!(rest, [Ok(60), Ok(70), Err(mapped_at(8, 8))]);
    assert_eq!(crate::scripted::drain(&mut running, 100), rest);
    // A new pass starts with nothing counted.
    running.reset(None).unwrap();
    assert_eq!(running.next().transpose().unwrap(), Some(10));
}

#[test]
fn skips_show_in_the_loader_stats() {
    let mut loader = Loader::new(
        Script::with_bad(10, &[2])
            .try_map(quarter)
            .on_error(ErrorPolicy::Skip),
    )
    .record_stats();
    assert_eq!(loader.epoch().count(), 6);
    let stats = loader.stats().unwrap();
    let node = stats.get("TryMapper").unwrap();
    assert_eq!(node.skipped, 4, "{stats}");
    assert_eq!(node.items, 6, "{stats}");
}

#[test]
fn a_bad_errors_entry_is_rejected_at_its_path() {
    let build = || {
        Script::with_bad(4, &[])
            .try_map(quarter)
            .on_error(ErrorPolicy::Skip)
    };
    for (errors, path) in [
        (r#""errors":{"skipped":-1,"ended":false}"#, "/errors"),
        (r#""errors":{"skipped":1}"#, "/errors"),
        (
            r#""errors":{"skipped":1,"ended":false,"more":1}"#,
            "/errors",
        ),
        (r#""oops":1"#, "/oops"),
    ] {
        let json = format!(r#"{{"source":{{"i":1}},"num_seen":1,{errors}}}"#);
        let err = build()
            .start_from(&State::from_json(&json).unwrap())
            .unwrap_err();
        assert_eq!(err.state_path(), Some(path), "{json}: {err}");
    }
    let json = r#"{"source":{"i":1},"num_seen":1}"#;
    let err = build()
        .start_from(&State::from_json(json).unwrap())
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/errors"), "{err}");
}

#[test]
fn on_error_keeps_closures_compiling() {
    let out: Vec<u64> = IterableWrapper::new(0..3u64)
        .try_map(|x| Ok::<_, std::io::Error>(x + 1))
        .on_error(ErrorPolicy::SkipAtMost(1))
        .start()
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(out, [1, 2, 3]);
    let node = IterableWrapper::new(0..3u64).try_map(u8::try_from);
    assert_eq!(node.error_policy(), ErrorPolicy::Deliver);
    assert_eq!(node.describe().to_string(), "TryMapper");
}

#[test]
fn policies_pass_other_errors_on_uncounted() {
    // Not a bad record: returned under every policy, neither skipped nor
    // counted, and it does not end the pass.
    for policy in [
        ErrorPolicy::Fail,
        ErrorPolicy::Skip,
        ErrorPolicy::SkipAtMost(0),
    ] {
        let mut running = Script::new([Item(1), Broken, Item(2)])
            .try_map(quarter)
            .on_error(policy)
            .start()
            .unwrap();
        let out = crate::scripted::drain(&mut running, 10);
        assert_eq!(
            out,
            [Ok(10), Err(crate::scripted::BROKEN.to_owned()), Ok(20)],
            "{policy:?}"
        );
        let state = running.get_state().unwrap().to_json().unwrap();
        assert_eq!(
            state, r#"{"source":{"i":3},"num_seen":2,"errors":{"skipped":0,"ended":false}}"#,
            "{policy:?}"
        );
    }
}
