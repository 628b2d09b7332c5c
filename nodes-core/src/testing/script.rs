//! A source that follows a script of items, bad records and failures: the
//! fault injector for testing how a node handles errors from below.

use crate::describe::Description;
use crate::error::{Error, Result};
use crate::guard::ResetFlag;
use crate::node::{Cx, Node, Stateful};
use crate::state::State;

/// One entry of a [`Script`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// An item.
    Item(u64),
    /// A bad record: [`Error::User`] from node `Script` with this message and
    /// the entry's position as the index.
    Bad(&'static str),
    /// A panic with this message inside `next` (a source with a bug).
    Panic(&'static str),
    /// Not a bad record: [`Error::ShutDown`] from node `Script`, an error that
    /// ends a pipeline rather than one record.
    Broken,
}

/// A source that yields its entries in order. Whatever an entry does (an
/// item, a bad record, a panic, a broken source), the source moves past it,
/// as a real source moves past a record it could not read.
///
/// # State
/// `{"i": entries passed}`; a restore past the end is an error at `/i`.
///
/// ```
/// use nodes_core::testing::{Entry, Script};
/// use nodes_core::{Error, Running};
///
/// let script = Script::new([Entry::Item(1), Entry::Bad("unreadable"), Entry::Item(3)]);
/// let mut running = Running::start(script)?;
/// assert_eq!(running.try_next()?, Some(1));
/// let err = running.try_next().unwrap_err();
/// assert!(matches!(err, Error::User { index: Some(1), .. }), "{err}");
/// assert_eq!(running.try_next()?, Some(3));
/// assert_eq!(running.try_next()?, None);
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Script {
    entries: Vec<Entry>,
    i: u64,
    flag: ResetFlag,
}

impl Script {
    /// A source of `entries`.
    pub fn new(entries: impl IntoIterator<Item = Entry>) -> Self {
        Script {
            entries: entries.into_iter().collect(),
            i: 0,
            flag: ResetFlag::default(),
        }
    }

    /// Items `0..n`, with a bad record (message `"bad"`) in place of each of
    /// `bad`.
    pub fn with_bad(n: u64, bad: &[u64]) -> Self {
        Script::new((0..n).map(|i| {
            if bad.contains(&i) {
                Entry::Bad("bad")
            } else {
                Entry::Item(i)
            }
        }))
    }
}

impl Node for Script {
    type Item = u64;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        self.flag.check(NAME)?;
        let Some(&entry) = usize::try_from(self.i)
            .ok()
            .and_then(|i| self.entries.get(i))
        else {
            return Ok(None);
        };
        let at = self.i;
        self.i += 1;
        match entry {
            Entry::Item(v) => Ok(Some(v)),
            Entry::Bad(message) => Err(Error::user(NAME, Some(at), message)),
            Entry::Panic(message) => panic!("{message}"),
            Entry::Broken => Err(Error::ShutDown { node: NAME }),
        }
    }
}

impl Stateful for Script {
    fn check_state(&self, s: &State) -> Result<()> {
        s.expect_keys(NAME, &["i"])?;
        let i: u64 = s.get("i")?;
        if i > self.entries.len() as u64 {
            let why = format!("past the end of a script of {}", self.entries.len());
            return Err(Error::bad_state(s.path_of("i"), why));
        }
        Ok(())
    }

    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        if let Some(s) = state {
            self.check_state(s)?;
        }
        self.i = state.map_or(Ok(0), |s| s.get("i"))?;
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        self.flag.check(NAME)?;
        State::new().with("i", self.i)
    }

    fn describe(&self) -> Description {
        Description::new(NAME).param("len", self.entries.len())
    }
}

impl crate::NodeName for Script {
    const NAME: &'static str = NAME;
}

const NAME: &str = "Script";
