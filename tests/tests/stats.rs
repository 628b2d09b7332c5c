//! Per-node statistics: counts equal the true item counts, self time
//! excludes children, and stats are off unless asked for.

mod support;

use nodes_std::NodeId;
use nodes_std::prelude::*;
use support::Probe;

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
    .with_stats();
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

#[test]
fn stats_are_off_by_default() {
    let mut loader = Loader::new(Probe::new(3));
    let _ = loader.epoch().count();
    assert!(loader.stats().is_none());
}
