//! Quick throughput check of the thread-backed nodes (not the project bench):
//! `cargo run --release -p nodes-examples --example threads_measure`.
//!
//! Prints one JSON line per case with the node figure and a baseline measured
//! in the same run. Wall-clock figures on a shared machine are noisy: the
//! node and its baseline run alternately, and each keeps its best time.
//!
//! The trivial map is `par_map` with 0 workers (an inline map). The project
//! bench (`--example bench`, issue 6) supersedes this.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use nodes_std::{IterableWrapper, Node, NodeExt, ParallelOptions};

fn range(len: u64) -> IterableWrapper<std::ops::Range<u64>> {
    IterableWrapper::new(0..len)
}

/// Best wall time of `reps` runs of `f`.
fn best(reps: usize, mut f: impl FnMut() -> u64) -> Duration {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Process CPU time (user + system, all threads, including ended ones), from
/// /proc/self/stat, in clock ticks (usually 10 ms).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of the file (utime, stime) are 12 and 13 after the name.
    let get = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(11) + get(12)
}

/// Runs `a` and `b` alternately `reps` times: best wall time of each, and
/// total CPU ticks of each. Alternating spreads the load of a shared machine
/// evenly over both.
fn paired(
    reps: usize,
    mut a: impl FnMut() -> u64,
    mut b: impl FnMut() -> u64,
) -> ((Duration, u64), (Duration, u64)) {
    let (mut best_a, mut best_b) = (Duration::MAX, Duration::MAX);
    let (mut cpu_a, mut cpu_b) = (0, 0);
    for _ in 0..reps {
        let (c, t) = (cpu_ticks(), Instant::now());
        std::hint::black_box(a());
        best_a = best_a.min(t.elapsed());
        cpu_a += cpu_ticks() - c;
        let (c, t) = (cpu_ticks(), Instant::now());
        std::hint::black_box(b());
        best_b = best_b.min(t.elapsed());
        cpu_b += cpu_ticks() - c;
    }
    ((best_a, cpu_a), (best_b, cpu_b))
}

fn drain<N: Node<Item = u64>>(node: N) -> u64 {
    node.start()
        .expect("start")
        .map(|r| r.expect("item"))
        .fold(0u64, u64::wrapping_add)
}

fn cpu_work(x: u64) -> u64 {
    let block = [x as u8; 4096];
    let mut h = x;
    for _ in 0..16 {
        let mut hasher = DefaultHasher::new();
        h.hash(&mut hasher);
        block.hash(&mut hasher);
        h = hasher.finish();
    }
    h
}

fn main() {
    let trivial = |x: u64| Ok(x.wrapping_mul(3));
    let n = 1_000_000;
    for factor in [64, 1024, 4096, 65536] {
        let ((base, base_cpu), (t, cpu)) = paired(
            15,
            || drain(range(n).par_map(trivial, ParallelOptions::new(0)).unwrap()),
            || {
                drain(
                    range(n)
                        .par_map(trivial, ParallelOptions::new(0))
                        .unwrap()
                        .prefetch(factor)
                        .unwrap(),
                )
            },
        );
        println!(
            r#"{{"case":"prefetch_trivial_map","items":{n},"prefetch_factor":{factor},"baseline_ms":{:.1},"node_ms":{:.1},"ratio":{:.2},"cpu_ratio":{:.2}}}"#,
            base.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() / base.as_secs_f64(),
            cpu as f64 / base_cpu.max(1) as f64
        );
    }

    let io = |x: u64| {
        std::thread::sleep(Duration::from_micros(200));
        Ok(x)
    };
    let n = 400;
    let serial = best(2, || {
        drain(range(n).par_map(io, ParallelOptions::new(0)).unwrap())
    });
    let n_par = 4000;
    for in_order in [true, false] {
        let par = best(3, || {
            drain(
                range(n_par)
                    .par_map(io, ParallelOptions::new(16).in_order(in_order))
                    .unwrap(),
            )
        });
        let speedup = (n_par as f64 / par.as_secs_f64()) / (n as f64 / serial.as_secs_f64());
        println!(
            r#"{{"case":"io_bound_200us","workers":16,"in_order":{in_order},"serial_items_per_s":{:.0},"node_items_per_s":{:.0},"speedup":{speedup:.1}}}"#,
            n as f64 / serial.as_secs_f64(),
            n_par as f64 / par.as_secs_f64()
        );
    }

    let cpu = |x: u64| Ok(cpu_work(x));
    let n = 3000;
    let plain = best(3, || (0..n).map(cpu_work).fold(0u64, u64::wrapping_add));
    let ((inline, _), (ordered, _)) = paired(
        7,
        || drain(range(n).par_map(cpu, ParallelOptions::new(0)).unwrap()),
        || drain(range(n).par_map(cpu, ParallelOptions::new(2)).unwrap()),
    );
    let ((ordered2, _), (unordered, _)) = paired(
        7,
        || drain(range(n).par_map(cpu, ParallelOptions::new(2)).unwrap()),
        || {
            drain(
                range(n)
                    .par_map(cpu, ParallelOptions::new(2).in_order(false))
                    .unwrap(),
            )
        },
    );
    println!(
        r#"{{"case":"cpu_bound_16x_hash_4k","items":{n},"workers":2,"plain_rust_ms":{:.1},"inline_ms":{:.1},"in_order_ms":{:.1},"out_of_order_ms":{:.1},"in_order_speed_vs_inline":{:.2},"in_order_cost_vs_out_of_order":{:.2}}}"#,
        plain.as_secs_f64() * 1e3,
        inline.as_secs_f64() * 1e3,
        ordered.as_secs_f64() * 1e3,
        unordered.as_secs_f64() * 1e3,
        inline.as_secs_f64() / ordered.as_secs_f64(),
        ordered2.as_secs_f64() / unordered.as_secs_f64()
    );
}
