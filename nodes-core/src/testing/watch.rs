//! Hangs and leaked threads as test failures.

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs `body` on a thread of its own and returns its result, or `Err` with
/// a message if it does not finish within `limit`: a hang becomes a test
/// failure instead of a stuck CI job. A panic in the body becomes `Err` with
/// the panic message, so property tests can report and shrink it.
///
/// A body that hangs is left running (nothing can stop a thread from the
/// outside); the test fails anyway.
///
/// ```
/// use std::time::Duration;
/// use nodes_core::testing::with_watchdog;
///
/// assert_eq!(with_watchdog(Duration::from_secs(5), || 2 + 2), Ok(4));
/// let hung = with_watchdog(Duration::from_millis(10), || {
///     std::thread::sleep(Duration::from_secs(1));
/// });
/// assert!(hung.unwrap_err().contains("still running"));
/// ```
pub fn with_watchdog<T: Send + 'static>(
    limit: Duration,
    body: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("watchdog-body".to_owned())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
            let _ = tx.send(result);
        })
        .map_err(|e| format!("cannot start the watchdog thread: {e}"))?;
    let result = rx.recv_timeout(limit).map_err(|_| {
        let secs = limit.as_secs_f64();
        format!("still running after {secs:.1} s: a hang (deadlock, or a loop that never ends)")
    })?;
    let _ = handle.join();
    result.map_err(|payload| format!("panicked: {}", panic_message(&*payload)))
}

/// [`with_watchdog`] for plain tests: a hang or a panic fails the test with
/// `what` and the reason.
///
/// ```
/// use std::time::Duration;
/// let sum = nodes_core::testing::watchdog("sum", Duration::from_secs(5), || 1 + 1);
/// assert_eq!(sum, 2);
/// ```
#[track_caller]
pub fn watchdog<T: Send + 'static>(
    what: &str,
    limit: Duration,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    match with_watchdog(limit, body) {
        Ok(value) => value,
        Err(message) => panic!("{what}: {message}"),
    }
}

/// The text of a panic payload (`&str` or `String`; a placeholder for any
/// other type).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    crate::error::panic_text(payload)
}

/// Threads of this process right now: the entries of `/proc/self/task`, so
/// Linux only (0 where that cannot be read).
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// Waits up to `limit` for [`thread_count`] to become `want` and returns the
/// last count seen: a thread that was joined can stay listed for a moment.
///
/// ```
/// use std::time::Duration;
/// use nodes_core::testing::{settle_threads, thread_count};
///
/// let before = thread_count();
/// std::thread::spawn(|| ()).join().unwrap();
/// assert_eq!(settle_threads(before, Duration::from_secs(10)), before);
/// ```
pub fn settle_threads(want: usize, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let now = thread_count();
        if now == want || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
