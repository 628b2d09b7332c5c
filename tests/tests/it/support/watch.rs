//! Guards for the reliability suite: a watchdog for anything that could hang,
//! the process's thread count, and the scale knob of the long mode.

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The environment variable that turns on the long mode.
pub(crate) const LONG_MODE_VAR: &str = "NODES_RELIABILITY_LONG";

/// How much bigger the long mode is: 1 by default (CI), 10 with
/// `NODES_RELIABILITY_LONG=1`, `n` with `NODES_RELIABILITY_LONG=n` (n > 1).
pub(crate) fn scale() -> u32 {
    match std::env::var(LONG_MODE_VAR) {
        Ok(v) => match v.trim().parse::<u32>() {
            Ok(0) => 1,
            Ok(1) => 10,
            Ok(n) => n,
            // Any other non-empty value ("yes", "true") means the default long mode.
            Err(_) if !v.trim().is_empty() => 10,
            Err(_) => 1,
        },
        Err(_) => 1,
    }
}

/// `cases` scaled by [`scale`].
pub(crate) fn cases(cases: u32) -> u32 {
    cases.saturating_mul(scale())
}

/// Runs `body` on a thread of its own and returns its result, or `Err` with
/// a message if it does not finish within `limit` (a hang becomes a test
/// failure instead of a stuck CI job). A panic in the body is turned into
/// `Err` with the panic message, so property tests can report and shrink it.
///
/// A body that hangs is left running (nothing can stop a thread from the
/// outside); the test fails anyway.
pub(crate) fn with_watchdog<T: Send + 'static>(
    limit: Duration,
    body: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("reliability-case".to_owned())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
            let _ = tx.send(result);
        })
        .map_err(|e| format!("cannot start the watchdog thread: {e}"))?;
    match rx.recv_timeout(limit) {
        Ok(Ok(value)) => {
            let _ = handle.join();
            Ok(value)
        }
        Ok(Err(payload)) => {
            let _ = handle.join();
            Err(format!("panicked: {}", panic_message(&*payload)))
        }
        Err(_) => Err(format!(
            "still running after {} s: a hang (deadlock, or a loop that never ends)",
            limit.as_secs()
        )),
    }
}

/// [`with_watchdog`] for plain tests: a hang or a panic fails the test.
#[track_caller]
pub(crate) fn watchdog<T: Send + 'static>(
    what: &str,
    limit: Duration,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    match with_watchdog(limit, body) {
        Ok(value) => value,
        Err(message) => panic!("{what}: {message}"),
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a non-string payload)".to_owned()
    }
}

/// Threads of this process right now (entries of /proc/self/task; 0 where
/// that cannot be read).
pub(crate) fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// Waits up to `limit` for the thread count to become `want` and returns the
/// last count seen: a joined thread can stay listed for a moment.
pub(crate) fn settle_threads(want: usize, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let now = thread_count();
        if now == want || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The proptest configuration of the suite: `ci_cases` cases scaled by
/// [`scale`]; a fixed seed by default, so that CI runs the same cases every
/// time (a failure reproduces), and a fresh random seed in the long mode
/// (unless `PROPTEST_RNG_SEED` picks one). Shrinking a failure is bounded
/// to two minutes.
pub(crate) fn config(ci_cases: u32, seed: u64) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, RngSeed};
    let mut config = Config::with_cases(cases(ci_cases));
    if scale() == 1 && config.rng_seed == RngSeed::Random {
        config.rng_seed = RngSeed::Fixed(seed);
    }
    config.max_shrink_time = 120_000;
    config
}
