//! A scripted source of items and bad records, and the check that a pipeline
//! over it resumes exactly at every cut, errors included.
//!
//! The source itself is `nodes_std::testing::Script`.

use std::fmt::Debug;

use nodes_std::{Node, NodeExt, Running, State};

pub(crate) use nodes_std::testing::Entry::{Bad, Broken, Item};
pub(crate) use nodes_std::testing::Script;

/// The text of a `Broken` entry's error.
pub(crate) const BROKEN: &str = "Script was used after shutdown: reset it to start again";

/// One item of a pass, comparable: the item, or the error's text.
pub(crate) type Out<T> = std::result::Result<T, String>;

/// Reads at most `limit` items (errors included) until the end.
pub(crate) fn drain<N: Node>(running: &mut Running<N>, limit: usize) -> Vec<Out<N::Item>> {
    running
        .by_ref()
        .take(limit)
        .map(|r| r.map_err(|e| e.to_string()))
        .collect()
}

/// The whole pass, errors included (at most 100,000 items).
pub(crate) fn pass<N: Node>(node: N) -> Vec<Out<N::Item>> {
    let mut running = node.start().unwrap_or_else(|e| panic!("start failed: {e}"));
    drain(&mut running, 100_000)
}

/// For every cut `k` from 0 to past the end: run `k` items (errors count as
/// items), take the state, round-trip it through JSON, restore it into a
/// freshly built pipeline and read the rest. The items before the cut plus
/// the rest must be the uninterrupted pass, errors at their places.
#[track_caller]
pub(crate) fn assert_resumes_at_every_cut<N, F>(build: F)
where
    N: Node,
    N::Item: PartialEq + Debug,
    F: Fn() -> N,
{
    let whole = pass(build());
    for cut in 0..=whole.len() + 1 {
        let mut running = build().start().unwrap();
        let mut got = drain(&mut running, cut);
        let json = running
            .get_state()
            .and_then(|s| s.to_json())
            .unwrap_or_else(|e| panic!("cut {cut}: state failed: {e}"));
        let state = State::from_json(&json).unwrap();
        let mut resumed = build()
            .start_from(&state)
            .unwrap_or_else(|e| panic!("cut {cut}: restore of {json} failed: {e}"));
        got.extend(drain(&mut resumed, whole.len() + 10));
        assert_eq!(got, whole, "cut after {cut} items, state {json}");
    }
}
