//! Small nodes for tests, written against the traits by hand.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nodes_std::prelude::*;
use nodes_std::{NodeId, ResetFlag};

/// Yields `0..len`, counting resets: epoch `e` (reset count) yields
/// `e * 1000 + i`, so a replayed epoch is visible. State: `i`, `resets`.
/// Also counts `shutdown` calls in a shared counter.
#[derive(Debug)]
pub(crate) struct Probe {
    pub(crate) len: u64,
    i: u64,
    resets: u64,
    flag: ResetFlag,
    pub(crate) shutdowns: Arc<AtomicUsize>,
}

impl Probe {
    pub(crate) fn new(len: u64) -> Self {
        Probe {
            len,
            i: 0,
            resets: 0,
            flag: ResetFlag::default(),
            shutdowns: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl Node for Probe {
    type Item = u64;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        cx.observe(NodeId::of(self), "Probe", |_| {
            self.flag.check("Probe")?;
            if self.i == self.len {
                return Ok(None);
            }
            self.i += 1;
            // Wrapping: a mutated state may hold any count (bad_states.rs).
            Ok(Some(
                self.resets.wrapping_mul(1000).wrapping_add(self.i - 1),
            ))
        })
    }
}

impl Probe {
    /// Checks a saved state, returning `(i, resets)`.
    fn checked(&self, s: &State) -> Result<(u64, u64)> {
        s.expect_keys("Probe", &["i", "resets"])?;
        let i: u64 = s.get("i")?;
        let resets: u64 = s.get("resets")?;
        if i > self.len {
            return Err(Error::bad_state(s.path_of("i"), "past the end"));
        }
        Ok((i, resets))
    }
}

impl Stateful for Probe {
    fn check_state(&self, state: &State) -> Result<()> {
        self.checked(state).map(drop)
    }

    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        match state {
            Some(s) => {
                let (i, resets) = self.checked(s)?;
                self.i = i;
                self.resets = resets;
            }
            None => {
                self.i = 0;
                self.resets = self.resets.wrapping_add(1);
            }
        }
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        self.flag.check("Probe")?;
        State::new().with("i", self.i)?.with("resets", self.resets)
    }

    fn describe(&self) -> Description {
        Description::new("Probe").param("len", self.len)
    }

    fn shutdown(&mut self) {
        self.shutdowns.fetch_add(1, Ordering::SeqCst);
    }
}

// The reliability suite's shared parts (see README, "Reliability suite").
pub(crate) mod corpus;
pub(crate) mod corrupt;
pub(crate) mod faulty;
pub(crate) mod runner;
pub(crate) mod spec;
pub(crate) mod watch;
