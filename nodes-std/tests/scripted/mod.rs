//! A scripted source of items and bad records, and the check that a pipeline
//! over it resumes exactly at every cut, errors included.
//!
//! Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::fmt::Debug;

use nodes_std::{
    Cx, Description, Error, Node, NodeExt, ResetFlag, Result, Running, State, Stateful,
};

/// One entry of a [`Script`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// An item.
    Item(u64),
    /// A bad record: `Error::User` from `Script` with this message.
    Bad(&'static str),
    /// Not a bad record: `Error::ShutDown` from `Script` (a pipeline that
    /// cannot go on). The source moves on all the same.
    Broken,
}

pub(crate) use Entry::{Bad, Broken, Item};

/// The text of a `Broken` entry's error.
pub(crate) const BROKEN: &str = "Script was used after shutdown: reset it to start again";

/// Yields its entries in order: an item, or an `Error::User` (node `Script`,
/// index = position) for a bad record. Either way the source moves on, as a
/// bad record does. State `{"i": entries returned}`.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    entries: Vec<Entry>,
    i: u64,
    flag: ResetFlag,
}

impl Script {
    pub(crate) fn new(entries: impl IntoIterator<Item = Entry>) -> Self {
        Script {
            entries: entries.into_iter().collect(),
            i: 0,
            flag: ResetFlag::default(),
        }
    }

    /// Items `0..n`, with a bad record (message `"bad"`) in place of each
    /// of `bad`.
    pub(crate) fn with_bad(n: u64, bad: &[u64]) -> Self {
        Script::new((0..n).map(|i| {
            if bad.contains(&i) {
                Bad("bad")
            } else {
                Item(i)
            }
        }))
    }
}

impl Node for Script {
    type Item = u64;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        self.flag.check("Script")?;
        let Some(&entry) = usize::try_from(self.i)
            .ok()
            .and_then(|i| self.entries.get(i))
        else {
            return Ok(None);
        };
        let at = self.i;
        self.i += 1;
        match entry {
            Item(v) => Ok(Some(v)),
            Bad(message) => Err(Error::user("Script", Some(at), message)),
            Broken => Err(Error::ShutDown { node: "Script" }),
        }
    }
}

impl Stateful for Script {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.i = match state {
            Some(s) => {
                s.expect_keys("Script", &["i"])?;
                let i: u64 = s.get("i")?;
                if i > self.entries.len() as u64 {
                    return Err(Error::bad_state(s.path_of("i"), "past the end"));
                }
                i
            }
            None => 0,
        };
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        self.flag.check("Script")?;
        State::new().with("i", self.i)
    }

    fn describe(&self) -> Description {
        Description::new("Script").param("len", self.entries.len())
    }
}

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
