//! The Parquet cases (`--features parquet`), over files the arrow-rs
//! writer writes with its defaults (page index on) in a temporary
//! directory:
//!
//! - `read_parquet_rows`: `read_parquet::<Row>()` against a hand-written
//!   arrow-rs loop (`ParquetRecordBatchReader`, batches of 1,024, columns
//!   downcast once per batch) building the same owned `Row`s, texts of
//!   about 24 bytes (where the per-row cost shows most); target 0.9.
//! - `read_parquet_rows_documents`: the same over texts of about 3 KB, the
//!   size of a pretraining document; target 0.9.
//! - `read_parquet_batches`: `read_parquet_batches(1024)` against the same
//!   reader's batches of 1,024 rows; target 0.9.
//! - `restore_parquet`: a fresh `read_parquet_batches` pipeline restored
//!   near the end of a file of at least 200 MB, fetching its next slice:
//!   the page index skips to the saved row's page; target 10 ms.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use nodes_std::prelude::*;
use nodes_std::{Files, Running};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::Deserialize;
use serde_json::json;

use crate::{Res, best_of, best_of_pair, emit, round_to};

#[derive(Deserialize)]
struct Row {
    id: i64,
    text: String,
}

/// Folds a row into `sum`. The row goes through `black_box`, so that the
/// optimiser cannot skip building its `String` in either loop.
fn fold(sum: u64, row: Row) -> u64 {
    let row = std::hint::black_box(row);
    sum.wrapping_mul(31)
        .wrapping_add(row.id as u64 ^ row.text.len() as u64)
}

/// Writes `rows` rows of (id, text of about `text` bytes) with the
/// writer's defaults; returns the file's size.
fn write(path: &Path, rows: i64, text: usize) -> Res<u64> {
    let mut writer = None;
    let chunk = 65_536;
    for start in (0..rows).step_by(chunk) {
        let end = rows.min(start + chunk as i64);
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(start..end));
        let texts: ArrayRef =
            Arc::new(StringArray::from_iter_values((start..end).map(|i| {
                format!("row {i} {}", "lorem ipsum ".repeat(text / 12))
            })));
        let batch = RecordBatch::try_from_iter([("id", ids), ("text", texts)])?;
        let w = match &mut writer {
            Some(w) => w,
            None => writer.insert(ArrowWriter::try_new(
                File::create(path)?,
                batch.schema(),
                None,
            )?),
        };
        w.write(&batch)?;
    }
    writer.ok_or("no rows")?.close()?;
    Ok(std::fs::metadata(path)?.len())
}

/// The Parquet cases, in a temporary directory removed afterwards.
pub(crate) fn run(quick: bool) -> Res<()> {
    let dir = std::env::temp_dir().join(format!("nodes-bench-parquet-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = cases(&dir, quick);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn cases(dir: &Path, quick: bool) -> Res<()> {
    let path = dir.join("rows.parquet");
    let rows = if quick { 100_000 } else { 1_000_000 };
    let bytes = write(&path, rows, 24)?;
    read_rows("read_parquet_rows", &path, rows as u64, (bytes, 24))?;
    read_batches(&path, rows as u64, bytes)?;
    let documents = dir.join("documents.parquet");
    let rows = if quick { 3_000 } else { 30_000 };
    let bytes = write(&documents, rows, 3_000)?;
    read_rows(
        "read_parquet_rows_documents",
        &documents,
        rows as u64,
        (bytes, 3_000),
    )?;
    let big = dir.join("big.parquet");
    let bytes = write(&big, 1_000_000, 216)?;
    restore(&big, bytes)
}

fn hand_reader(path: &Path) -> Res<parquet::arrow::arrow_reader::ParquetRecordBatchReader> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?;
    Ok(builder.with_batch_size(1024).build()?)
}

/// `case`: rows of `path` (`bytes` long, texts of about `text` bytes).
fn read_rows(case: &str, path: &Path, rows: u64, (bytes, text): (u64, usize)) -> Res<()> {
    let framework = || -> Res<(u64, u64)> {
        let mut running = Files::list([path])?.read_parquet::<Row>().start()?;
        let (mut n, mut sum) = (0u64, 0u64);
        for row in &mut running {
            let row = row?;
            sum = fold(sum, row);
            n += 1;
        }
        Ok((n, sum))
    };
    let baseline = || -> Res<(u64, u64)> {
        let (mut n, mut sum) = (0u64, 0u64);
        for batch in hand_reader(path)? {
            let batch = batch?;
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or("ids")?;
            let texts = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or("texts")?;
            for i in 0..batch.num_rows() {
                let row = Row {
                    id: ids.value(i),
                    text: texts.value(i).to_owned(),
                };
                sum = fold(sum, row);
                n += 1;
            }
        }
        Ok((n, sum))
    };
    let ((f_took, f_out), (b_took, b_out)) = best_of_pair(5, framework, baseline)?;
    assert_eq!(f_out, b_out, "both sides must read the same rows");
    assert_eq!(f_out.0, rows);
    emit(
        case,
        rows,
        f_took,
        b_took,
        0.9,
        json!({ "file_bytes": bytes, "text_bytes": text, "baseline": "arrow-rs reader, batches of 1024, rows built by hand" }),
    );
    Ok(())
}

fn read_batches(path: &Path, rows: u64, bytes: u64) -> Res<()> {
    let sum_of = |batch: &RecordBatch| -> Res<u64> {
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or("ids")?;
        Ok(batch.num_rows() as u64 ^ ids.value(0) as u64)
    };
    let framework = || -> Res<(u64, u64)> {
        let mut running = Files::list([path])?.read_parquet_batches(1024)?.start()?;
        let (mut n, mut sum) = (0u64, 0u64);
        for batch in &mut running {
            let batch = batch?;
            sum = sum.wrapping_mul(31).wrapping_add(sum_of(&batch)?);
            n += batch.num_rows() as u64;
        }
        Ok((n, sum))
    };
    let baseline = || -> Res<(u64, u64)> {
        let (mut n, mut sum) = (0u64, 0u64);
        for batch in hand_reader(path)? {
            let batch = batch?;
            sum = sum.wrapping_mul(31).wrapping_add(sum_of(&batch)?);
            n += batch.num_rows() as u64;
        }
        Ok((n, sum))
    };
    let ((f_took, f_out), (b_took, b_out)) = best_of_pair(5, framework, baseline)?;
    assert_eq!(f_out, b_out, "both sides must read the same slices");
    emit(
        "read_parquet_batches",
        rows,
        f_took,
        b_took,
        0.9,
        json!({ "file_bytes": bytes, "rows_per_batch": 1024 }),
    );
    Ok(())
}

/// The longest acceptable restore near the end of a large file.
const RESTORE_TARGET_S: f64 = 0.010;

fn restore(path: &Path, bytes: u64) -> Res<()> {
    let build = || Files::list([path])?.read_parquet_batches(1024);
    // The state before the last slices (not timed).
    let mut running = build()?.start()?;
    let mut rows = 0u64;
    while rows < 1_000_000 - 5_000 {
        rows += running.next().ok_or("the file ended early")??.num_rows() as u64;
    }
    let state = State::from_json(&running.get_state()?.to_json()?)?;
    drop(running);
    let (took, first) = best_of(5, || {
        let mut fresh = Running::start_from(build()?, &state)?;
        let batch = fresh.next().ok_or("no rows after restore")??;
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or("ids")?;
        Ok(ids.value(0))
    })?;
    assert_eq!(first as u64, rows, "restored at the wrong row");
    let restore_s = took.as_secs_f64();
    println!(
        "{}",
        json!({
            "case": "restore_parquet",
            "file_bytes": bytes,
            "row": rows,
            "restore_s": round_to(restore_s, 6),
            "target": RESTORE_TARGET_S,
            "met": restore_s <= RESTORE_TARGET_S,
        })
    );
    Ok(())
}
