//! The running-sum node of `examples/custom_node.rs`, written by hand against
//! the traits, next to the derived one: both must behave identically (same
//! items, same state documents, same errors). The hand-written version is the
//! yardstick for what the derive saves.

use nodes_std::prelude::*;
use nodes_std::{IterableWrapper, testing};

// --- derived: 15 lines of node code ---
#[derive(Node)]
struct RunningSum<S> {
    #[node(child)]
    source: S,
    #[node(state)]
    sum: u64,
}

impl<S: Node<Item = u64>> Node for RunningSum<S> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        let item = self.source.next(cx)?;
        self.sum += item.unwrap_or(0);
        Ok(item.map(|_| self.sum))
    }
}
// --- end derived ---

// --- by hand: 42 lines of node code for the same behaviour ---
struct RunningSumByHand<S> {
    source: S,
    sum: u64,
}

impl<S: Node<Item = u64>> Node for RunningSumByHand<S> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        let item = self.source.next(cx)?;
        self.sum += item.unwrap_or(0);
        Ok(item.map(|_| self.sum))
    }
}

impl<S: Node<Item = u64>> Stateful for RunningSumByHand<S> {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        match state {
            Some(s) => {
                s.expect_keys("RunningSum", &["source", "sum"])?;
                let source = s.child("source")?;
                let sum = s.get("sum")?;
                self.source.reset(Some(&source))?;
                self.sum = sum;
            }
            None => {
                self.source.reset(None)?;
                self.sum = 0;
            }
        }
        Ok(())
    }
    fn get_state(&self, cx: &Cx) -> Result<State> {
        let mut s = State::new();
        s.insert_child("source", self.source.get_state(cx)?);
        s.insert("sum", self.sum)?;
        Ok(s)
    }
    fn describe(&self) -> Description {
        Description::new("RunningSum").child("source", self.source.describe())
    }
    fn shutdown(&mut self) {
        self.source.shutdown();
    }
}
// --- end by hand ---

fn derived() -> RunningSum<IterableWrapper<std::ops::Range<u64>>> {
    RunningSum {
        source: IterableWrapper::new(1..8),
        sum: 0,
    }
}

fn by_hand() -> RunningSumByHand<IterableWrapper<std::ops::Range<u64>>> {
    RunningSumByHand {
        source: IterableWrapper::new(1..8),
        sum: 0,
    }
}

#[test]
fn derived_and_hand_written_agree_item_by_item_and_state_by_state() {
    let mut a = derived().start().unwrap();
    let mut b = by_hand().start().unwrap();
    loop {
        assert_eq!(a.get_state().unwrap(), b.get_state().unwrap());
        let (x, y) = (a.next().transpose().unwrap(), b.next().transpose().unwrap());
        assert_eq!(x, y);
        if x.is_none() {
            break;
        }
    }
    assert_eq!(a.node().describe(), b.node().describe());
}

#[test]
fn both_pass_the_save_load_protocol() {
    for midpoint in [0, 1, 6, 7] {
        testing::assert_save_load(derived, midpoint);
        testing::assert_save_load(by_hand, midpoint);
    }
}

#[test]
fn both_reject_the_same_bad_state_at_the_same_path() {
    let bad = State::from_json(r#"{"source":{"num_yielded":2},"sum":"x"}"#).unwrap();
    let mut a = derived().start().unwrap();
    let mut b = by_hand().start().unwrap();
    let (ea, eb) = (
        a.reset(Some(&bad)).unwrap_err(),
        b.reset(Some(&bad)).unwrap_err(),
    );
    assert_eq!(ea.to_string(), eb.to_string());
    assert_eq!(ea.state_path(), Some("/sum"));
}
