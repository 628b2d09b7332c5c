//! Guards for the reliability suite: a watchdog for anything that could hang,
//! the process's thread count, and the scale knob of the long mode.

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

/// `cases` scaled by [`scale`], or `PROPTEST_CASES` where that is more.
pub(crate) fn cases(cases: u32) -> u32 {
    let asked = std::env::var("PROPTEST_CASES").ok();
    let asked = asked.and_then(|v| v.trim().parse::<u32>().ok());
    cases.saturating_mul(scale()).max(asked.unwrap_or(0))
}

pub(crate) use nodes_std::testing::{watchdog, with_watchdog};

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
