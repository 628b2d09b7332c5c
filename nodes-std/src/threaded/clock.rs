//! The clock the threaded core's timing decisions read, injected so that
//! tests drive time instead of waiting for it.

use std::time::Instant;

/// Where a node reads the time. Production uses [`SystemClock`]; tests use
/// [`ManualClock`], which moves only when told to.
pub(crate) trait Clock: Send + Sync {
    /// The time now.
    fn now(&self) -> Instant;
}

/// The operating system's monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that stands still until [`advance`](ManualClock::advance)d.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct ManualClock {
    origin: Instant,
    offset: std::sync::Mutex<std::time::Duration>,
}

#[cfg(test)]
impl ManualClock {
    pub(crate) fn new() -> ManualClock {
        ManualClock {
            origin: Instant::now(),
            offset: std::sync::Mutex::new(std::time::Duration::ZERO),
        }
    }

    /// Moves the clock forward by `by`.
    pub(crate) fn advance(&self, by: std::time::Duration) {
        *self.offset.lock().unwrap() += by;
    }
}

#[cfg(test)]
impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.origin + *self.offset.lock().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new();
        let start = clock.now();
        assert_eq!(clock.now(), start);
        clock.advance(Duration::from_millis(3));
        assert_eq!(clock.now() - start, Duration::from_millis(3));
    }
}
