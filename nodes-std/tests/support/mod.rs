//! Test support shared by the thread-node tests: a hand-written counting
//! source, a watchdog for tests that could hang, a gate to control worker
//! timing, and a thread counter.
//!
//! Each integration-test binary uses a different part of this module.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nodes_std::{Cx, Description, Error, Node, ResetFlag, Result, State, Stateful};

/// Yields `0, 1, ..., len - 1`; state `{"n": items yielded}`.
///
/// Hand-written rather than an `IterableWrapper`, for the fault injection.
///
/// Optional: a sleep before every item, an error or a panic at one index, and
/// a shared counter of every item pulled (across resets and clones).
#[derive(Debug)]
pub(crate) struct Counting {
    len: u64,
    n: u64,
    sleep: Option<Duration>,
    fail_at: Option<u64>,
    panic_at: Option<u64>,
    pulled: Arc<AtomicU64>,
    flag: ResetFlag,
}

impl Counting {
    pub(crate) fn new(len: u64) -> Self {
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

    pub(crate) fn sleep(mut self, per_item: Duration) -> Self {
        self.sleep = Some(per_item);
        self
    }

    pub(crate) fn fail_at(mut self, index: u64) -> Self {
        self.fail_at = Some(index);
        self
    }

    pub(crate) fn panic_at(mut self, index: u64) -> Self {
        self.panic_at = Some(index);
        self
    }

    /// Counts pulls into `counter` (share it to observe a source inside a node).
    pub(crate) fn counted(mut self, counter: &Arc<AtomicU64>) -> Self {
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
            return Err(Error::user(
                "Counting",
                Some(i),
                format!("source failed at {i}"),
            ));
        }
        if self.panic_at == Some(i) {
            panic!("source panicked at {i}");
        }
        Ok(Some(i))
    }
}

impl Stateful for Counting {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        let n = match state {
            Some(s) => {
                s.expect_keys("Counting", &["n"])?;
                let n: u64 = s.get("n")?;
                if n > self.len {
                    return Err(Error::bad_state(s.path_of("n"), "beyond the end"));
                }
                n
            }
            None => 0,
        };
        self.n = n;
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
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        let _ = tx.send(result);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(value)) => {
            let _ = handle.join();
            value
        }
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(_) => panic!("{what}: still running after 60 s (deadlock?)"),
    }
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

/// Threads of this process right now.
pub(crate) fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Waits (up to 10 s) for the thread count to be `want`, returning the last
/// count seen. A thread that was joined may linger in /proc for a moment.
pub(crate) fn settle_threads(want: usize) -> usize {
    settle_threads_within(want, Duration::from_secs(10))
}

/// [`settle_threads`] with a custom limit.
pub(crate) fn settle_threads_within(want: usize, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let now = thread_count();
        if now == want || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Sorts and checks that `items` is exactly `0..len`, each once.
#[track_caller]
pub(crate) fn assert_each_once(mut items: Vec<u64>, len: u64) {
    items.sort_unstable();
    let want: Vec<u64> = (0..len).collect();
    assert_eq!(items, want, "every item exactly once");
}
