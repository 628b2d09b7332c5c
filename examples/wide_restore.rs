//! Times `state_dict`, serialisation, parsing and `load_state_dict` for a
//! `MultiNodeWeightedSampler` over many sources (10,000 by default; the
//! first argument overrides). Run it in release:
//!
//! ```sh
//! cargo run --release --example wide_restore
//! cargo run --release --example wide_restore -- 1000
//! ```
//!
//! Prints one JSON line: the median of several runs of each step, in
//! milliseconds.

use std::time::{Duration, Instant};

use nodes_std::prelude::*;
use nodes_std::{IterableWrapper, MultiNodeWeightedSampler};

fn build(n: usize) -> impl Node<Item = u64> {
    let sources = (0..n).map(|i| (format!("s{i:05}"), IterableWrapper::new(0..100u64)));
    let weights = (0..n).map(|i| (format!("s{i:05}"), 1.0 + (i % 7) as f64));
    MultiNodeWeightedSampler::new(sources, weights)
        .expect("a valid sampler")
        .seed(5)
}

/// This thread's CPU time (Linux: `/proc/thread-self/schedstat`), which a
/// busy machine disturbs far less than the wall clock; `None` elsewhere.
fn cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

fn main() -> Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(10_000, |a| a.parse().expect("a number of sources"));
    let mut loader = Loader::new(build(n));
    let mut epoch = loader.epoch();
    for _ in 0..1000 {
        epoch.next().transpose()?;
    }
    let (mut take, mut write, mut parse, mut load) = (vec![], vec![], vec![], vec![]);
    let (mut drop_ms, mut load_cpu, mut again_cpu) = (vec![], vec![], vec![]);
    let mut target = Loader::new(build(n));
    target.state_dict()?;
    let mut json = String::new();
    for _ in 0..15 {
        let t = Instant::now();
        let state = epoch.state_dict()?;
        take.push(t.elapsed());
        let t = Instant::now();
        json = state.to_json()?;
        write.push(t.elapsed());
        let t = Instant::now();
        let parsed = State::from_json(&json)?;
        parse.push(t.elapsed());
        // A fresh loader, as when a run resumes (building it is not timed).
        let mut target = Loader::new(build(n));
        let t = Instant::now();
        let c = cpu_time();
        target.load_state_dict(&parsed)?;
        load.push(t.elapsed());
        if let (Some(c), Some(now)) = (c, cpu_time()) {
            load_cpu.push(now - c);
        }
        // Again into the same loader (it stands where the first load put it).
        let c = cpu_time();
        target.load_state_dict(&parsed)?;
        if let (Some(c), Some(now)) = (c, cpu_time()) {
            again_cpu.push(now - c);
        }
        let t = Instant::now();
        drop(target);
        drop_ms.push(t.elapsed());
    }
    // For a profiler: `WIDE_RESTORE_LOOP=100` repeats only the restore.
    if let Some(k) = std::env::var("WIDE_RESTORE_LOOP")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        let parsed = State::from_json(&json)?;
        for _ in 0..k {
            Loader::new(build(n)).load_state_dict(&parsed)?;
        }
    }
    println!(
        "{{\"sources\": {n}, \"state_bytes\": {}, \"state_dict_ms\": {:.3}, \"to_json_ms\": {:.3}, \"from_json_ms\": {:.3}, \"load_state_dict_ms\": {:.3}, \"drop_loader_ms\": {:.3}, \"load_state_dict_cpu_ms\": {:.3}, \"load_again_cpu_ms\": {:.3}}}",
        json.len(),
        median(take),
        median(write),
        median(parse),
        median(load),
        median(drop_ms),
        if load_cpu.is_empty() {
            f64::NAN
        } else {
            median(load_cpu)
        },
        if again_cpu.is_empty() {
            f64::NAN
        } else {
            median(again_cpu)
        },
    );
    Ok(())
}
