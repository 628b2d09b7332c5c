//! [`Counting`]: a counting source with injected sleeps, errors and panics.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::describe::Description;
use crate::error::{Error, Result};
use crate::guard::ResetFlag;
use crate::node::{Cx, Node, Stateful};
use crate::state::State;

/// A source for testing threaded and fault-handling nodes: yields
/// `0, 1, ..., len - 1`, optionally sleeping before every item, failing
/// (`Error::User`, a bad record) or panicking at one index, and counting every
/// item pulled into a shared counter (across resets and clones).
///
/// # State
/// `{"n": items pulled}`; a restore past the end is an error at `/n`.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use nodes_core::testing::Counting;
/// use nodes_core::Running;
///
/// let pulled = Arc::new(AtomicU64::new(0));
/// let source = Counting::new(5).fail_at(2).counted(&pulled);
/// let out: Vec<_> = Running::start(source)?.map(|r| r.ok()).collect();
/// assert_eq!(out, [Some(0), Some(1), None, Some(3), Some(4)]);
/// assert_eq!(pulled.load(Ordering::SeqCst), 5);
/// # Ok::<(), nodes_core::Error>(())
/// ```
#[derive(Debug)]
pub struct Counting {
    len: u64,
    n: u64,
    sleep: Option<Duration>,
    fail_at: Option<u64>,
    panic_at: Option<u64>,
    pulled: Arc<AtomicU64>,
    flag: ResetFlag,
}

impl Counting {
    /// Items `0..len`.
    pub fn new(len: u64) -> Self {
        Counting {
            len,
            n: 0,
            sleep: None,
            fail_at: None,
            panic_at: None,
            pulled: Arc::new(AtomicU64::new(0)),
            flag: ResetFlag::default(),
        }
    }

    /// Sleeps `per_item` before every item.
    pub fn sleep(mut self, per_item: Duration) -> Self {
        self.sleep = Some(per_item);
        self
    }

    /// Returns `Error::User` in place of item `index`.
    pub fn fail_at(mut self, index: u64) -> Self {
        self.fail_at = Some(index);
        self
    }

    /// Panics in place of item `index`.
    pub fn panic_at(mut self, index: u64) -> Self {
        self.panic_at = Some(index);
        self
    }

    /// Counts pulls into `counter` (share it to observe a source inside a node).
    pub fn counted(mut self, counter: &Arc<AtomicU64>) -> Self {
        self.pulled = Arc::clone(counter);
        self
    }
}

impl Node for Counting {
    type Item = u64;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        self.flag.check("Counting")?;
        if self.n == self.len {
            return Ok(None);
        }
        let i = self.n;
        self.n += 1;
        if let Some(d) = self.sleep {
            std::thread::sleep(d);
        }
        self.pulled.fetch_add(1, Ordering::SeqCst);
        if self.fail_at == Some(i) {
            let why = format!("source failed at {i}");
            return Err(Error::user("Counting", Some(i), why));
        }
        if self.panic_at == Some(i) {
            panic!("source panicked at {i}");
        }
        Ok(Some(i))
    }
}

impl Stateful for Counting {
    fn check_state(&self, s: &State) -> Result<()> {
        s.expect_keys("Counting", &["n"])?;
        let n: u64 = s.get("n")?;
        if n > self.len {
            return Err(Error::bad_state(s.path_of("n"), "beyond the end"));
        }
        Ok(())
    }

    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        if let Some(s) = state {
            self.check_state(s)?;
        }
        self.n = state.map_or(Ok(0), |s| s.get("n"))?;
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        self.flag.check("Counting")?;
        State::new().with("n", self.n)
    }

    fn describe(&self) -> Description {
        Description::new("Counting").param("len", self.len)
    }
}

impl crate::NodeName for Counting {
    const NAME: &'static str = "Counting";
}
