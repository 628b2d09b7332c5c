//! Fault injection for the reliability suite: a fault that fires once, a
//! source that fails (or panics, or dawdles), and a panic hook that keeps
//! injected panics out of the test output.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nodes_std::prelude::*;
use nodes_std::{NodeId, ResetFlag};

/// How a fault shows itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// An `Err` from the user's code.
    Err,
    /// A panic in the user's code.
    Panic,
}

/// A fault at the item whose value is `at`. It fires the first time that
/// item is processed, in any pipeline built with (a clone of) it, and never
/// again: a retry after a restore then succeeds.
#[derive(Clone, Debug)]
pub(crate) struct Fault {
    pub(crate) at: u64,
    pub(crate) kind: FaultKind,
    /// In a `Faulty` source, an `Err` moves past the item (a bad record)
    /// instead of leaving it to be asked for again (a transient error).
    pub(crate) moves_on: bool,
    fired: Arc<AtomicBool>,
}

/// The text every injected panic and error carries.
pub(crate) const INJECTED: &str = "injected fault";

impl Fault {
    pub(crate) fn new(at: u64, kind: FaultKind) -> Self {
        Fault {
            at,
            kind,
            moves_on: false,
            fired: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A `Faulty` source moves past the item it fails at (see
    /// [`Fault::moves_on`]).
    pub(crate) fn moving_on(mut self) -> Self {
        self.moves_on = true;
        self
    }

    /// Whether it has fired.
    pub(crate) fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Called with each item's value: fails (the first time) at `at`.
    pub(crate) fn hit(&self, value: u64) -> std::result::Result<(), String> {
        if value != self.at {
            return Ok(());
        }
        self.fire()
    }

    /// Fails (or panics) with the fault at `at`, the first time it is
    /// called: for callers that decide themselves which item it applies to.
    pub(crate) fn fire(&self) -> std::result::Result<(), String> {
        if self.fired.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let message = format!("{INJECTED} at {}", self.at);
        match self.kind {
            FaultKind::Err => Err(message),
            FaultKind::Panic => panic!("{message}"),
        }
    }
}

/// Calls `hit` on every fault that is given.
pub(crate) fn hit_all(faults: &[Fault], value: u64) -> std::result::Result<(), String> {
    faults.iter().try_for_each(|f| f.hit(value))
}

/// Yields `0..len`; state `{"i": items yielded}`. A fault makes `next` fail
/// (or panic) at that item *without* moving on, so the next call (or a
/// restore of the state) asks for the same item again; or, for a fault
/// [`moving_on`](Fault::moving_on), fail and move past it (a bad record). Optionally sleeps
/// before every item, and counts every item it yields.
#[derive(Debug)]
pub(crate) struct Faulty {
    len: u64,
    i: u64,
    faults: Vec<Fault>,
    sleep: Option<Duration>,
    yielded: Arc<AtomicU64>,
    flag: ResetFlag,
}

impl Faulty {
    pub(crate) fn new(len: u64) -> Self {
        Faulty {
            len,
            i: 0,
            faults: Vec::new(),
            sleep: None,
            yielded: Arc::new(AtomicU64::new(0)),
            flag: ResetFlag::default(),
        }
    }

    pub(crate) fn fault(mut self, fault: Fault) -> Self {
        self.faults.push(fault);
        self
    }

    pub(crate) fn sleep(mut self, per_item: Duration) -> Self {
        self.sleep = Some(per_item);
        self
    }

    /// Counts yielded items into `counter`.
    pub(crate) fn counted(mut self, counter: &Arc<AtomicU64>) -> Self {
        self.yielded = Arc::clone(counter);
        self
    }
}

impl Node for Faulty {
    type Item = u64;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        cx.observe(NodeId::of(self), "Faulty", |_| {
            self.flag.check("Faulty")?;
            if self.i == self.len {
                return Ok(None);
            }
            if let Some(d) = self.sleep {
                std::thread::sleep(d);
            }
            let i = self.i;
            if let Err(e) = hit_all(&self.faults, i) {
                if self.faults.iter().any(|f| f.moves_on && f.at == i) {
                    self.i += 1;
                }
                return Err(Error::user("Faulty", Some(i), e));
            }
            self.i += 1;
            self.yielded.fetch_add(1, Ordering::SeqCst);
            Ok(Some(i))
        })
    }
}

impl Stateful for Faulty {
    fn check_state(&self, s: &State) -> Result<()> {
        s.expect_keys("Faulty", &["i"])?;
        let i: u64 = s.get("i")?;
        if i > self.len {
            return Err(Error::bad_state(s.path_of("i"), "past the end"));
        }
        Ok(())
    }

    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.i = match state {
            Some(s) => {
                self.check_state(s)?;
                s.get("i")?
            }
            None => 0,
        };
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        self.flag.check("Faulty")?;
        State::new().with("i", self.i)
    }

    fn describe(&self) -> Description {
        Description::new("Faulty").param("len", self.len)
    }
}

/// Installs (once per test binary) a panic hook that stays quiet about
/// injected panics and reports every other panic as usual.
pub(crate) fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !message.starts_with(INJECTED) {
                default(info);
            }
        }));
    });
}

/// Identity, slow on every third call, so that workers finish out of
/// order and an out-of-order `par_map` delivers items ahead of a gap.
pub(crate) fn uneven<T>(x: T) -> std::result::Result<T, nodes_std::BoxError> {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    if CALLS.fetch_add(1, Ordering::Relaxed).is_multiple_of(3) {
        // Load only: the tests' assertions hold in any completion order.
        std::thread::sleep(Duration::from_micros(150));
    }
    Ok(x)
}
