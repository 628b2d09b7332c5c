//! Test support shared by the thread-node tests: the counting source of
//! `nodes_std::testing`, a source whose items depend on its epoch, a
//! watchdog for tests that could hang, and a gate to control worker timing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use nodes_std::{
    Cx, Description, Error, Node, ResetFlag, Result, Running, State, Stateful, testing,
};

pub(crate) use nodes_std::testing::Counting;

/// Yields `epoch * 1000 + i` for `i` in `0..len`; every `reset(None)` after
/// the first moves to the next epoch (like a sampler that reshuffles per
/// epoch), so its output depends on how often it was reset.
#[derive(Debug)]
pub(crate) struct Epochs {
    len: u64,
    epoch: u64,
    n: u64,
    flag: ResetFlag,
}

impl Epochs {
    pub(crate) fn new(len: u64) -> Self {
        Epochs {
            len,
            epoch: 0,
            n: 0,
            flag: ResetFlag::default(),
        }
    }
}

impl Node for Epochs {
    type Item = u64;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        self.flag.check("Epochs")?;
        if self.n == self.len {
            return Ok(None);
        }
        self.n += 1;
        Ok(Some(self.epoch * 1000 + self.n - 1))
    }
}

impl Stateful for Epochs {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        match state {
            Some(s) => {
                s.expect_keys("Epochs", &["epoch", "n"])?;
                (self.epoch, self.n) = (s.get("epoch")?, s.get("n")?);
            }
            None => {
                if self.flag.is_reset() {
                    self.epoch += 1;
                }
                self.n = 0;
            }
        }
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        State::new().with("epoch", self.epoch)?.with("n", self.n)
    }

    fn describe(&self) -> Description {
        Description::new("Epochs").param("len", self.len)
    }
}

/// Runs `body` on its own thread and fails the test if it does not finish
/// within 60 s (a hang becomes a failure instead of blocking CI). A panic in
/// the body is re-raised with its message.
///
/// The tests take a second or two; the margin is for machines whose CPUs are
/// busy with other work, where every hand-over between threads can wait for
/// a scheduler time slice.
#[track_caller]
pub(crate) fn watchdog<T: Send + 'static>(
    what: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    testing::watchdog(what, Duration::from_secs(60), body)
}

/// A gate workers can wait at until the test opens it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    pub(crate) fn wait(&self) {
        let (open, cv) = &*self.0;
        let mut open = open.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
    }

    pub(crate) fn open(&self) {
        let (open, cv) = &*self.0;
        *open.lock().unwrap() = true;
        cv.notify_all();
    }
}

/// Sorts and checks that `items` is exactly `0..len`, each once.
#[track_caller]
pub(crate) fn assert_each_once(mut items: Vec<u64>, len: u64) {
    items.sort_unstable();
    let want: Vec<u64> = (0..len).collect();
    assert_eq!(items, want, "every item exactly once");
}

/// Everything left in the pass; every item must be `Ok`.
pub(crate) fn collect<N: Node>(run: &mut Running<N>) -> Vec<N::Item> {
    run.map(|r| r.expect("no error expected")).collect()
}

/// The next `n` items; each must be there and `Ok`.
pub(crate) fn take<N: Node>(run: &mut Running<N>, n: usize) -> Vec<N::Item> {
    (0..n)
        .map(|_| run.next().expect("an item").expect("no error expected"))
        .collect()
}

/// Small item-dependent delays so that workers finish out of order.
pub(crate) fn jitter(x: u64) {
    match x % 4 {
        0 => std::thread::sleep(Duration::from_micros(400)),
        1 => std::thread::sleep(Duration::from_micros(50)),
        _ => {}
    }
}

/// A slow consumer: takes every item, pausing `pause` after each.
pub(crate) fn slowly(items: impl Iterator<Item = Result<u64>>, pause: Duration) -> Vec<u64> {
    let mut got = Vec::new();
    for item in items {
        got.push(item.unwrap());
        std::thread::sleep(pause);
    }
    got
}

/// Drains `run` (pausing a moment after every `every` items, so that the
/// threads get ahead) and checks after every item that the source, counted
/// by `pulled`, is at most `bound` items ahead of the consumer. Returns how
/// many items came.
#[track_caller]
pub(crate) fn drain_within_bound<N: Node>(
    run: &mut Running<N>,
    pulled: &AtomicU64,
    bound: usize,
    (every, pause): (u64, Duration),
) -> u64 {
    let mut received = 0;
    for item in run.by_ref() {
        item.unwrap();
        received += 1;
        if received % every == 0 {
            std::thread::sleep(pause);
        }
        let ahead = pulled.load(Ordering::SeqCst) - received;
        assert!(ahead <= bound as u64, "{ahead} items ahead, bound {bound}");
    }
    received
}

/// The node, index and message of an [`Error::Panicked`]; any other error
/// fails the test.
#[track_caller]
pub(crate) fn panicked(err: Error) -> (String, Option<u64>, String) {
    match err {
        Error::Panicked {
            node,
            index,
            message,
        } => (node.into_owned(), index, message),
        other => panic!("expected a panic error, got {other:?}"),
    }
}

/// The node and index of an [`Error::User`]; any other error fails the test.
#[track_caller]
pub(crate) fn user_error(err: &Error) -> (&str, Option<u64>) {
    match err {
        Error::User { node, index, .. } => (node, *index),
        other => panic!("expected a user error, got {other:?}"),
    }
}
