//! The file-reading cases:
//!
//! - `read_jsonl`: `Files::list(..).read_jsonl::<Row>()` over the realistic
//!   cases' generated corpus (`corpus.rs`), against a hand-written loop over
//!   the same files: `BufReader` + `read_line` into one reused `String` +
//!   `serde_json::from_str`. Both sides deserialise the same owned `Row` and
//!   fold the same checksum; target 0.8.
//! - `restore_in_file`: a fresh `read_lines` pipeline restored at the end of
//!   an uncompressed file of at least 100 MB (generated in a temporary
//!   directory and deleted afterwards), fetching its last line: the restore
//!   seeks, so this stays flat whatever the file's length; target 1 ms.
//! - `restore_in_gzip_file` (with `--features gzip`): the same at the end of
//!   the same text gzip-compressed as one member, whose restore
//!   decompresses the file up to the offset: what that costs (no target).
//! - `restore_in_zstd_file` (with `--features zstd`): the same text as one
//!   zstd frame, and as frames of 1 MiB of text: a restore decompresses
//!   from the start of the frame that holds its offset, so the first costs
//!   what decompressing 100 MB costs and the second one frame (no target).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;

use nodes_std::Files;
use nodes_std::prelude::*;
use serde::Deserialize;
use serde_json::json;

use crate::corpus::Corpus;
use crate::{Res, best_of, best_of_pair, emit, round_to};

/// What both sides deserialise from each line.
#[derive(Deserialize)]
pub(crate) struct Row {
    id: u64,
    text: String,
}

pub(crate) fn fold(sum: u64, row: &Row) -> u64 {
    sum.wrapping_mul(31)
        .wrapping_add(row.id ^ row.text.len() as u64)
}

/// The `read_jsonl` and `restore_in_file` cases.
pub(crate) fn run(quick: bool) -> Res<()> {
    read_jsonl(quick)?;
    restore_in_file(quick)
}

fn read_jsonl(quick: bool) -> Res<()> {
    let corpus = Corpus::generate(if quick { 10 } else { 1 })?;
    let paths: Vec<PathBuf> = corpus
        .files
        .iter()
        .map(|f| f.path().to_path_buf())
        .collect();
    let framework = || -> Res<(u64, u64)> {
        let mut running = Files::list(paths.clone())?.read_jsonl::<Row>().start()?;
        let (mut n, mut sum) = (0u64, 0u64);
        for row in &mut running {
            sum = fold(sum, &row?);
            n += 1;
        }
        Ok((n, sum))
    };
    let baseline = || -> Res<(u64, u64)> {
        let (mut n, mut sum) = (0u64, 0u64);
        let mut line = String::new();
        for path in &paths {
            let mut reader = BufReader::new(File::open(path)?);
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 {
                    break;
                }
                let row: Row = serde_json::from_str(line.trim_end())?;
                sum = fold(sum, &row);
                n += 1;
            }
        }
        Ok((n, sum))
    };
    let ((f_took, f_out), (b_took, b_out)) = best_of_pair(5, framework, baseline)?;
    assert_eq!(f_out, b_out, "both sides must read the same records");
    assert_eq!(f_out.0, corpus.total_records());
    emit(
        "read_jsonl",
        f_out.0,
        f_took,
        b_took,
        0.8,
        json!({
            "bytes": corpus.bytes,
            "corpus_fnv": format!("{:016x}", std::hash::Hasher::finish(&corpus.fnv)),
            "framework_ns_per_record": round_to(f_took.as_nanos() as f64 / f_out.0 as f64, 1),
            "baseline_ns_per_record": round_to(b_took.as_nanos() as f64 / b_out.0 as f64, 1),
        }),
    );
    Ok(())
}

/// The longest acceptable restore at the end of a large file.
const RESTORE_TARGET_S: f64 = 0.001;

fn restore_in_file(quick: bool) -> Res<()> {
    let _ = quick; // the file must be large to show the point: no quick size
    let dir = std::env::temp_dir().join(format!("nodes-bench-restore-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = restore_in(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn restore_in(dir: &std::path::Path) -> Res<()> {
    const TARGET_BYTES: u64 = 100 << 20;
    let path = dir.join("big.txt");
    let (mut bytes, mut lines) = (0u64, 0u64);
    {
        let mut out = BufWriter::new(File::create(&path)?);
        while bytes < TARGET_BYTES {
            let line = format!("line {lines:012} {}\n", "x".repeat(80));
            out.write_all(line.as_bytes())?;
            bytes += line.len() as u64;
            lines += 1;
        }
        out.flush()?;
    }
    let restore_s = time_restore_at_end(&path, lines)?;
    println!(
        "{}",
        json!({
            "case": "restore_in_file",
            "file_bytes": bytes,
            "lines": lines,
            "restore_s": restore_s,
            "target": RESTORE_TARGET_S,
            "met": restore_s <= RESTORE_TARGET_S,
        })
    );
    #[cfg(feature = "gzip")]
    {
        let gz = dir.join("big.txt.gz");
        let mut encoder = flate2::write::GzEncoder::new(
            BufWriter::new(File::create(&gz)?),
            flate2::Compression::fast(),
        );
        std::io::copy(&mut File::open(&path)?, &mut encoder)?;
        encoder.finish()?.flush()?;
        let compressed = std::fs::metadata(&gz)?.len();
        let restore_s = time_restore_at_end(&gz, lines)?;
        println!(
            "{}",
            json!({
                "case": "restore_in_gzip_file",
                "file_bytes": bytes,
                "compressed_bytes": compressed,
                "lines": lines,
                "restore_s": restore_s,
                "decompressed_mb_per_s": round_to(bytes as f64 / 1e6 / restore_s, 1),
            })
        );
    }
    #[cfg(feature = "zstd")]
    {
        use ruzstd::encoding::{CompressionLevel, compress_to_vec};
        let text = std::fs::read(&path)?;
        for (name, frame) in [("one", text.len()), ("many", 1 << 20)] {
            let zst = dir.join(format!("big-{name}.txt.zst"));
            let mut out = BufWriter::new(File::create(&zst)?);
            for chunk in text.chunks(frame) {
                out.write_all(&compress_to_vec(chunk, CompressionLevel::Fastest))?;
            }
            out.flush()?;
            drop(out);
            let restore_s = time_restore_at_end(&zst, lines)?;
            println!(
                "{}",
                json!({
                    "case": "restore_in_zstd_file",
                    "file_bytes": bytes,
                    "compressed_bytes": std::fs::metadata(&zst)?.len(),
                    "frames": text.len().div_ceil(frame),
                    "lines": lines,
                    "restore_s": restore_s,
                })
            );
        }
    }
    Ok(())
}

/// The time to build a `read_lines` pipeline over `path`, restore it right
/// before its last line and fetch that line (best of 5; the state is taken
/// once, not timed).
fn time_restore_at_end(path: &std::path::Path, lines: u64) -> Res<f64> {
    let build = || Files::list([path]).map(NodeExt::read_lines);
    // The state right before the last line (not timed).
    let mut loader = Loader::new(build()?);
    let mut epoch = loader.epoch();
    for _ in 0..lines - 1 {
        epoch.next().ok_or("the file ended early")??;
    }
    let state = State::from_json(&epoch.state_dict()?.to_json()?)?;
    drop(epoch);
    // Time: a fresh pipeline, restored, fetching the last line.
    let (took, last) = best_of(5, || {
        let mut fresh = Loader::new(build()?);
        fresh.load_state_dict(&state)?;
        let last = fresh.epoch().next().ok_or("no line after restore")??;
        Ok(last)
    })?;
    assert!(
        last.starts_with(&format!("line {:012}", lines - 1)),
        "restored at the wrong place: {last}"
    );
    Ok(took.as_secs_f64())
}
