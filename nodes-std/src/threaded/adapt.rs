//! Whether a one-worker pass (a `Prefetcher`) runs its source on the reader
//! thread or, for a while, on the consumer's own thread.
//!
//! A reader thread pays off only while the consumer has work of its own to
//! overlap with the source's (a training step). A consumer that only waits
//! for the next item gains nothing from it and loses what the hand-over
//! costs: on our 2-vCPU VMs the realistic pipeline's batches, built on the
//! reader and freed on the consumer, made the reader's own work 15–25%
//! slower (the allocator collecting frees made on the other core, memory
//! last written there), and a hand-written producer thread lost as much. So
//! the consumer measures how many items it gets per second of wall time in
//! each mode and keeps the faster one:
//!
//! - It starts on the reader thread, and looks at the clock only every
//!   `stride` items (a stride that keeps the looks a 32nd to a quarter of a
//!   window apart), so the per-item cost is one decrement.
//! - After a window ([`WINDOW`]) in which it spent at least a quarter of
//!   the time waiting for items, it tries its own thread for a window (a
//!   probe). Not half: part of the hand-over's cost is paid outside the
//!   wait (the items arrive from another core's cache), so a consumer that
//!   runs three times faster inline still waits only about half the time
//!   on the reader. A consumer that waits less is slower than the source,
//!   and the reader is what keeps it fed: it is never probed.
//! - A probe that beats the mode before it by [`MARGIN`] is kept, otherwise
//!   the consumer goes back. Either way the mode it settles in holds for a
//!   number of windows that doubles after every probe lost (from
//!   [`FIRST_HOLD`] up to [`MAX_HOLD`]), and then the other mode is probed
//!   again, since the consumer's work and the machine change.
//!
//! Switching keeps every item and the order: to go inline, the consumer
//! stops the reader, joins it and first hands out everything it read ahead;
//! to go back, it snapshots the source where it stands and starts a reader
//! from there (see `Threaded`).

use std::time::{Duration, Instant};

/// How long one measurement lasts.
pub(crate) const WINDOW: Duration = Duration::from_millis(4);

/// How much faster a probe must be to be kept: windows this short on a
/// shared VM vary by a few percent.
const MARGIN: f64 = 1.05;

/// Windows a mode is kept before the other is probed, after a probe won.
const FIRST_HOLD: u32 = 4;

/// The most windows a mode is kept before the other is probed again.
const MAX_HOLD: u32 = 256;

/// The largest stride between two looks at the clock.
const MAX_STRIDE: u64 = 1 << 16;

/// Where the source runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// On the reader thread, ahead of the consumer.
    Threaded,
    /// On the consumer's thread, when it asks.
    Inline,
}

impl Mode {
    fn other(self) -> Mode {
        match self {
            Mode::Threaded => Mode::Inline,
            Mode::Inline => Mode::Threaded,
        }
    }
}

/// How the mode is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// By measured throughput (see the module docs).
    Measured,
    /// Switch every so many items handed out, whatever the clock says
    /// (for tests of the switch itself).
    Every(u64),
}

/// One consumer's choice of mode, and the measurements behind it.
pub(crate) struct Adapt {
    policy: Policy,
    /// The mode the consumer runs in now.
    pub(crate) mode: Mode,
    /// Items left until the next look at the clock.
    countdown: u64,
    /// Items between two looks.
    stride: u64,
    /// The window being measured; `None` until the first look after a
    /// switch or a new pass.
    window: Option<Window>,
    /// The last rate measured in each mode (items per second), by `Mode as
    /// usize`.
    rates: [Option<f64>; 2],
    /// The current mode is a probe, to be compared with the other's rate.
    probing: bool,
    /// Windows left before the other mode may be probed.
    hold: u32,
    /// The hold set after the next probe that loses.
    next_hold: u32,
}

struct Window {
    started: Instant,
    last_look: Instant,
    items: u64,
    /// The consumer's total wait when the window started.
    waited: Duration,
}

impl Window {
    fn starting(now: Instant, waited: Duration) -> Window {
        Window {
            started: now,
            last_look: now,
            items: 0,
            waited,
        }
    }
}

impl Adapt {
    pub(crate) fn new(policy: Policy) -> Adapt {
        Adapt {
            policy,
            mode: Mode::Threaded,
            countdown: 1,
            // Only a measured policy looks at the clock in strides.
            stride: 1,
            window: None,
            rates: [None; 2],
            probing: false,
            hold: 0,
            next_hold: FIRST_HOLD,
        }
    }

    /// A new pass: the measurements so far stay, the window (and with it
    /// the stride) starts over at the next look.
    pub(crate) fn new_pass(&mut self) {
        self.window = None;
        self.countdown = 1;
    }

    /// Counts one item handed out; `true` when it is time to
    /// [`look`](Self::look).
    #[inline]
    pub(crate) fn tick(&mut self) -> bool {
        self.countdown -= 1;
        self.countdown == 0
    }

    /// Looks at the clock, which reads `now` (`waited`: the consumer's
    /// total wait for items from the current reader; zero inline).
    /// `Some(mode)` when the consumer should switch to `mode` now.
    pub(crate) fn look(&mut self, now: Instant, waited: Duration) -> Option<Mode> {
        if let Policy::Every(items) = self.policy {
            self.countdown = items.max(1);
            return Some(self.switch(self.mode.other()));
        }
        let counted = self.stride;
        let Some(window) = &mut self.window else {
            self.window = Some(Window::starting(now, waited));
            self.stride = 1;
            self.countdown = 1;
            return None;
        };
        window.items += counted;
        // Looks about a 32nd to a quarter of a window apart.
        let gap = now.saturating_duration_since(window.last_look);
        if gap < WINDOW / 32 {
            self.stride = (self.stride * 2).min(MAX_STRIDE);
        } else if gap > WINDOW / 4 {
            self.stride = (self.stride / 2).max(1);
        }
        window.last_look = now;
        let elapsed = now.saturating_duration_since(window.started);
        if elapsed < WINDOW {
            self.countdown = self.stride;
            return None;
        }
        let rate = window.items as f64 / elapsed.as_secs_f64();
        let starved = waited.saturating_sub(window.waited) * 4 >= elapsed;
        let decision = self.decide(rate, starved);
        // The next window starts here, in whichever mode.
        self.window = Some(Window::starting(now, waited));
        self.countdown = self.stride;
        decision.map(|mode| self.switch(mode))
    }

    /// The end of a window in the current mode, at `rate`.
    fn decide(&mut self, rate: f64, starved: bool) -> Option<Mode> {
        let other = self.mode.other();
        let before = self.rates[other as usize];
        self.rates[self.mode as usize] = Some(rate);
        if self.probing {
            self.probing = false;
            if before.is_none_or(|before| rate > before * MARGIN) {
                self.hold = FIRST_HOLD;
                self.next_hold = FIRST_HOLD;
                return None;
            }
            self.hold = self.next_hold;
            self.next_hold = (self.next_hold * 2).min(MAX_HOLD);
            return Some(other);
        }
        if self.hold > 0 {
            self.hold -= 1;
            return None;
        }
        // Inline, the reader is always worth another look (the consumer's
        // work may have grown); on the reader, only a starved consumer can
        // gain from doing the source's work itself.
        if self.mode == Mode::Inline || starved {
            self.probing = true;
            return Some(other);
        }
        None
    }

    /// Records a switch to `mode`; its first window starts at the next look.
    fn switch(&mut self, mode: Mode) -> Mode {
        self.mode = mode;
        if self.policy == Policy::Measured {
            self.new_pass();
        }
        mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A consumer driven through whole windows on a clock of its own.
    struct Drive {
        adapt: Adapt,
        now: Instant,
        waited: Duration,
    }

    impl Drive {
        fn new(policy: Policy) -> Drive {
            Drive {
                adapt: Adapt::new(policy),
                now: Instant::now(),
                waited: Duration::ZERO,
            }
        }

        /// One whole window (`waiting`: the share of it the consumer
        /// waited), and the switch the adaptation asks for at its end.
        fn window(&mut self, waiting: f64) -> Option<Mode> {
            // Start the window, then end it once it is long enough.
            assert!(self.adapt.tick());
            assert_eq!(self.adapt.look(self.now, self.waited), None);
            let long = WINDOW + Duration::from_millis(1);
            self.now += long;
            self.waited += long.mul_f64(waiting);
            while !self.adapt.tick() {}
            self.adapt.look(self.now, self.waited)
        }

        /// Pretends the last window in `mode` ran at `rate`.
        fn set_rate(&mut self, mode: Mode, rate: f64) {
            self.adapt.rates[mode as usize] = Some(rate);
        }
    }

    #[test]
    fn a_consumer_that_does_not_wait_keeps_the_reader() {
        let mut drive = Drive::new(Policy::Measured);
        for _ in 0..3 {
            assert_eq!(drive.window(0.2), None);
        }
        assert_eq!(drive.adapt.mode, Mode::Threaded);
    }

    #[test]
    fn a_starved_consumer_probes_inline_and_keeps_it_only_if_faster() {
        let mut drive = Drive::new(Policy::Measured);
        assert_eq!(
            drive.window(0.9),
            Some(Mode::Inline),
            "a starved consumer tries its own thread"
        );
        // The probe is compared with the reader's rate: make the reader
        // look much faster than any window can be, and the probe loses.
        drive.set_rate(Mode::Threaded, f64::MAX / 2.0);
        assert_eq!(drive.window(0.0), Some(Mode::Threaded));
        // Back on the reader, it holds for FIRST_HOLD windows before it
        // probes again.
        for _ in 0..FIRST_HOLD {
            assert_eq!(drive.window(0.9), None);
        }
        assert_eq!(drive.window(0.9), Some(Mode::Inline));
        // This time the reader was slow: the probe is kept.
        drive.set_rate(Mode::Threaded, 1.0);
        assert_eq!(drive.window(0.0), None);
        assert_eq!(drive.adapt.mode, Mode::Inline);
        // Inline, the reader is probed again after the hold.
        for _ in 0..FIRST_HOLD {
            assert_eq!(drive.window(0.0), None);
        }
        assert_eq!(drive.window(0.0), Some(Mode::Threaded));
    }

    #[test]
    fn the_hold_doubles_after_each_lost_probe() {
        let mut drive = Drive::new(Policy::Measured);
        let mut holds = Vec::new();
        for _ in 0..3 {
            assert_eq!(drive.window(0.9), Some(Mode::Inline));
            drive.set_rate(Mode::Threaded, f64::MAX / 2.0);
            assert_eq!(drive.window(0.0), Some(Mode::Threaded));
            holds.push(drive.adapt.hold);
            for _ in 0..drive.adapt.hold {
                assert_eq!(drive.window(0.9), None);
            }
        }
        assert_eq!(holds, [FIRST_HOLD, FIRST_HOLD * 2, FIRST_HOLD * 4]);
    }

    /// The looks at the clock spread out while they come often (a cheap
    /// item) and close in again when they come rarely.
    #[test]
    fn the_stride_follows_the_pace_of_the_items() {
        let mut drive = Drive::new(Policy::Measured);
        assert!(drive.adapt.tick());
        assert_eq!(drive.adapt.look(drive.now, Duration::ZERO), None);
        for _ in 0..4 {
            while !drive.adapt.tick() {}
            drive.now += Duration::from_micros(1);
            drive.adapt.look(drive.now, Duration::ZERO);
        }
        assert_eq!(drive.adapt.stride, 16, "looks a microsecond apart widen");
        while !drive.adapt.tick() {}
        drive.now += WINDOW / 2;
        drive.adapt.look(drive.now, Duration::ZERO);
        assert_eq!(drive.adapt.stride, 8, "a look half a window late narrows");
    }

    #[test]
    fn every_switches_on_the_count_alone() {
        let mut adapt = Adapt::new(Policy::Every(3));
        let now = Instant::now();
        let mut modes = Vec::new();
        for _ in 0..9 {
            if adapt.tick() {
                modes.push(adapt.look(now, Duration::ZERO));
            }
        }
        // The first look comes after the first item, then every third.
        assert_eq!(
            modes,
            [Some(Mode::Inline), Some(Mode::Threaded), Some(Mode::Inline)]
        );
    }
}
