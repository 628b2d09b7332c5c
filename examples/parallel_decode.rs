//! Decoding with `ParallelMapper` against `Mapper`, for CPU-heavy and
//! I/O-heavy work, printing the speedups (and checking the outputs agree).
//!
//! `cargo run --release --example parallel_decode`
//!
//! On a machine with one core of throughput, CPU-heavy decoding cannot get
//! faster (and must not get slower); I/O-heavy decoding (waiting on storage,
//! here a sleep) scales with the number of workers.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use nodes_std::prelude::*;
use nodes_std::{BoxError, ParallelOptions};

fn cpu_decode(i: u64) -> u64 {
    let mut h = i ^ 0xCBF2_9CE4_8422_2325;
    for round in 0..64 * 1024 {
        h = (h ^ round).wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

fn io_decode(i: u64) -> u64 {
    std::thread::sleep(Duration::from_micros(500));
    i * 2
}

fn time<N: Node<Item = u64>>(node: N) -> Result<(Duration, Vec<u64>)> {
    let start = Instant::now();
    let out = Loader::new(node).epoch().collect::<Result<Vec<u64>>>()?;
    Ok((start.elapsed(), out))
}

fn compare(
    name: &str,
    n: u64,
    f: fn(u64) -> u64,
    workers: usize,
) -> std::result::Result<f64, BoxError> {
    let (serial, a) = time(IterableWrapper::new(0..n).map(f))?;
    let (parallel, b) = time(
        IterableWrapper::new(0..n).par_map(move |x| Ok(f(x)), ParallelOptions::new(workers))?,
    )?;
    if a != b {
        return Err(format!("{name}: parallel output differs from serial output").into());
    }
    let speedup = serial.as_secs_f64() / parallel.as_secs_f64();
    println!(
        "{name:<4} {n:>5} items  Mapper {:>8.1} ms  ParallelMapper({workers:>2}) {:>8.1} ms  speedup {speedup:>5.2}x",
        serial.as_secs_f64() * 1e3,
        parallel.as_secs_f64() * 1e3
    );
    Ok(speedup)
}

fn main() -> ExitCode {
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
    println!("available parallelism: {cores}");
    let run = || -> std::result::Result<(), BoxError> {
        compare("cpu", 400, cpu_decode, cores.max(2))?;
        let io = compare("io", 1000, io_decode, 16)?;
        if io < 4.0 {
            return Err(format!("I/O-bound decoding with 16 workers only reached {io:.2}x").into());
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parallel_decode: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
