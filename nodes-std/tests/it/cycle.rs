//! Cycler: wrap-around, max_cycles, empty sources, counters, save/load, and
//! errors as items.

use crate::common::{RangeNode, collect, save_load_at_cuts};
use crate::scripted::{Bad, Item, Script, assert_resumes_at_every_cut, pass};
use nodes_std::prelude::*;
use nodes_std::testing;

#[test]
fn cycle_wraps_around_and_counts() {
    let mut running = IterableWrapper::new(0..5u8).cycle().start().unwrap();
    let out: Vec<u8> = running.by_ref().take(12).collect::<Result<_>>().unwrap();
    assert_eq!(out, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]);
    assert_eq!(running.node().num_cycles(), 2);
    running.reset(None).unwrap();
    assert_eq!(running.node().num_cycles(), 0);
}

#[test]
fn cycle_n_stops_after_n_passes_and_stays_ended() {
    let mut running = IterableWrapper::new(0..3u8)
        .cycle_n(2)
        .unwrap()
        .start()
        .unwrap();
    let out: Vec<u8> = running.by_ref().collect::<Result<_>>().unwrap();
    assert_eq!(out, [0, 1, 2, 0, 1, 2]);
    assert_eq!(running.node().num_cycles(), 2);
    assert!(running.next().is_none());
    assert_eq!(running.node().num_cycles(), 2, "no drift after the end");
}

#[test]
fn cycle_each_pass_is_a_new_epoch_of_the_source() {
    let out = collect(RangeNode::new(2).cycle_n(3).unwrap());
    assert_eq!(out, [(0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3)]);
    let orders = collect(
        SamplerWrapper::new(RandomSampler::new(6, 1))
            .cycle_n(2)
            .unwrap(),
    );
    assert_ne!(orders[..6], orders[6..]);
}

#[test]
fn cycle_over_an_empty_source_yields_nothing() {
    let mut running = IterableWrapper::new(0..0u8).cycle().start().unwrap();
    assert!(running.next().is_none());
    assert!(running.next().is_none());
    assert_eq!(running.node().num_cycles(), 0);
}

/// Non-empty on its first pass only.
#[derive(Node, Debug)]
struct OnceThenEmpty {
    #[node(state)]
    i: u64,
    #[node(state, default = self.passes.saturating_add(1))]
    passes: u64,
}

impl Node for OnceThenEmpty {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        if self.passes > 1 || self.i == 2 {
            return Ok(None);
        }
        self.i += 1;
        Ok(Some(self.i))
    }
}

#[test]
fn cycle_ends_when_the_source_is_empty_after_a_restart() {
    let mut running = OnceThenEmpty { i: 0, passes: 0 }.cycle().start().unwrap();
    let out: Vec<u64> = running.by_ref().collect::<Result<_>>().unwrap();
    assert_eq!(out, [1, 2]);
    assert!(running.next().is_none());
    assert_eq!(running.node().num_cycles(), 1);
}

#[test]
fn cycle_n_zero_is_an_error() {
    let err = IterableWrapper::new(0..3u8).cycle_n(0).unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument { node: "Cycler", .. }),
        "{err}"
    );
}

#[test]
fn cycle_restore_keeps_counters() {
    let mut running = IterableWrapper::new(0..3u8).cycle().start().unwrap();
    let _ = running.by_ref().take(4).count();
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"source":{"num_yielded":1},"num_cycles":1,"has_started":true,"ended":false}"#
    );
    let mut resumed = IterableWrapper::new(0..3u8)
        .cycle()
        .start_from(&state)
        .unwrap();
    let out: Vec<u8> = resumed.by_ref().take(3).collect::<Result<_>>().unwrap();
    assert_eq!(out, [1, 2, 0]);
    assert_eq!(resumed.node().num_cycles(), 2);
}

#[test]
fn cycle_save_load() {
    for cut in [0, 3, 7, 99, 100, 101] {
        testing::assert_save_load(|| RangeNode::new(50).cycle_n(2).unwrap(), cut);
    }
    save_load_at_cuts(|| RangeNode::new(4).cycle_n(3).unwrap());
    save_load_at_cuts(|| RangeNode::new(4).cycle_n(1).unwrap());
    save_load_at_cuts(|| RangeNode::new(0).cycle_n(2).unwrap());
    save_load_at_cuts(|| {
        SamplerWrapper::new(RandomSampler::new(4, 3))
            .cycle()
            .header(10)
    });
}

#[test]
fn a_source_of_bad_records_only_is_not_empty() {
    // Before: a pass with only errors counted as an empty source, so the
    // cycler ended after one pass instead of restarting.
    let out = pass(Script::new([Bad("bad")]).cycle_n(3).unwrap());
    assert_eq!(
        out,
        vec![Err("user function failed in Script at item 0: bad".to_owned()); 3]
    );
    let mut running = Script::new([Bad("bad")]).cycle().start().unwrap();
    assert_eq!(running.by_ref().take(10).filter(Result::is_err).count(), 10);
}

#[test]
fn cycle_with_errors_resumes_exactly_at_every_cut() {
    assert_resumes_at_every_cut(|| Script::with_bad(4, &[1]).cycle_n(3).unwrap());
    assert_resumes_at_every_cut(|| Script::with_bad(3, &[0]).cycle_n(2).unwrap());
    assert_resumes_at_every_cut(|| {
        Script::new([Bad("bad"), Item(1), Bad("worse")])
            .cycle()
            .header(9)
    });
    assert_resumes_at_every_cut(|| Script::new([Bad("bad")]).cycle_n(3).unwrap());
}
