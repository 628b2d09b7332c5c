//! The object-store cases (`--features object-store`), against the S3
//! server at `NODES_S3_ENDPOINT` (moto on loopback: see `.ci/run`); without
//! it they print a `skipped` line.
//!
//! - `read_jsonl_s3`: `read_jsonl::<Row>()` over the realistic corpus's
//!   files uploaded as objects, against a hand-written loop of
//!   `object_store` ranged reads (8 MiB each) of the same objects from the
//!   same server, split into lines and parsed with `serde_json`; target 0.9.
//! - `restore_s3`: a fresh `read_lines` pipeline restored near the end of a
//!   plain object of at least 200 MB, fetching its next line, against one
//!   hand-written ranged GET of the same bytes from the same server (the
//!   restore makes that one request), so `restore_s - request_s` should
//!   stay under 10 ms.

use std::io::Write;
use std::path::PathBuf;

use nodes_std::prelude::*;
use nodes_std::{Files, Running, Store};
use object_store::ObjectStoreExt;
use serde_json::json;

use crate::corpus::Corpus;
use crate::files::{Row, fold};
use crate::{Res, best_of, best_of_pair, emit, round_to};

/// The S3 cases, or a `skipped` line without a server.
pub(crate) fn run(quick: bool) -> Res<()> {
    let Ok(endpoint) = std::env::var("NODES_S3_ENDPOINT") else {
        for case in ["read_jsonl_s3", "restore_s3"] {
            println!(
                "{}",
                json!({ "case": case, "skipped": "NODES_S3_ENDPOINT is unset" })
            );
        }
        return Ok(());
    };
    let bucket = format!("nodes-bench-{}", std::process::id());
    nodes_examples::create_bucket(&endpoint, &bucket)
        .map_err(|e| e as Box<dyn std::error::Error>)?;
    let client = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&endpoint)
        .with_allow_http(true)
        .with_bucket_name(&bucket)
        .with_access_key_id("bench")
        .with_secret_access_key("bench")
        .with_region("us-east-1")
        .build()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = Store::from_env()
        .option("endpoint", &endpoint)
        .option("allow_http", "true")
        .option("access_key_id", "bench")
        .option("secret_access_key", "bench")
        .option("region", "us-east-1");
    let s3 = S3 {
        bucket,
        client,
        runtime,
        store,
    };
    read_jsonl(&s3, quick)?;
    restore(&s3)
}

struct S3 {
    bucket: String,
    client: object_store::aws::AmazonS3,
    runtime: tokio::runtime::Runtime,
    store: Store,
}

impl S3 {
    fn put(&self, key: &str, bytes: Vec<u8>) -> Res<()> {
        let key = object_store::path::Path::from(key);
        self.runtime.block_on(self.client.put(&key, bytes.into()))?;
        Ok(())
    }

    fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }
}

fn read_jsonl(s3: &S3, quick: bool) -> Res<()> {
    let corpus = Corpus::generate(if quick { 10 } else { 1 })?;
    let mut keys = Vec::new();
    for (i, file) in corpus.files.iter().enumerate() {
        let key = format!("corpus/{i:03}.jsonl");
        s3.put(&key, std::fs::read(file.path())?)?;
        keys.push(key);
    }
    let urls: Vec<PathBuf> = keys.iter().map(|k| PathBuf::from(s3.url(k))).collect();
    let framework = || -> Res<(u64, u64)> {
        let files = Files::list(urls.clone())?;
        let mut running = files.read_jsonl::<Row>().store(s3.store.clone()).start()?;
        let (mut n, mut sum) = (0u64, 0u64);
        for row in &mut running {
            sum = fold(sum, &row?);
            n += 1;
        }
        Ok((n, sum))
    };
    let baseline = || -> Res<(u64, u64)> {
        let (mut n, mut sum) = (0u64, 0u64);
        for key in &keys {
            let key = object_store::path::Path::from(key.as_str());
            let size = s3.runtime.block_on(s3.client.head(&key))?.size;
            let mut carry: Vec<u8> = Vec::new();
            let mut at = 0;
            while at < size {
                let end = size.min(at + (8 << 20));
                let bytes = s3.runtime.block_on(s3.client.get_range(&key, at..end))?;
                at = end;
                carry.extend_from_slice(&bytes);
                let mut start = 0;
                while let Some(nl) = carry[start..].iter().position(|&b| b == b'\n') {
                    let row: Row = serde_json::from_slice(&carry[start..start + nl])?;
                    sum = fold(sum, &row);
                    n += 1;
                    start += nl + 1;
                }
                carry.drain(..start);
            }
            if !carry.is_empty() {
                sum = fold(sum, &serde_json::from_slice(&carry)?);
                n += 1;
            }
        }
        Ok((n, sum))
    };
    let ((f_took, f_out), (b_took, b_out)) = best_of_pair(5, framework, baseline)?;
    assert_eq!(f_out, b_out, "both sides must read the same records");
    emit(
        "read_jsonl_s3",
        f_out.0,
        f_took,
        b_took,
        0.9,
        json!({ "bytes": corpus.bytes, "objects": keys.len(), "baseline": "object_store ranged reads of 8 MiB + serde_json" }),
    );
    Ok(())
}

/// The longest acceptable restore beyond one request.
const RESTORE_TARGET_S: f64 = 0.010;

fn restore(s3: &S3) -> Res<()> {
    const TARGET_BYTES: usize = 200 << 20;
    let mut text = Vec::with_capacity(TARGET_BYTES + 200);
    let mut lines = 0u64;
    while text.len() < TARGET_BYTES {
        writeln!(text, "line {lines:012} {}", "x".repeat(80))?;
        lines += 1;
    }
    let bytes = text.len() as u64;
    s3.put("big.txt", text)?;
    let url = s3.url("big.txt");
    let build = || -> Res<_> {
        Ok(Files::list([url.as_str()])?
            .read_lines()
            .store(s3.store.clone()))
    };
    // The state right before the last line (not timed).
    let mut running = build()?.start()?;
    for _ in 0..lines - 1 {
        running.next().ok_or("the object ended early")??;
    }
    let state = State::from_json(&running.get_state()?.to_json()?)?;
    drop(running);
    let (took, last) = best_of(5, || {
        let mut fresh = Running::start_from(build()?, &state)?;
        Ok(fresh.next().ok_or("no line after restore")??)
    })?;
    assert!(
        last.starts_with(&format!("line {:012}", lines - 1)),
        "restored at the wrong place: {last}"
    );
    // The one request a restore makes: the object from 4 KiB before the
    // offset (the identity's window) to its end.
    let key = object_store::path::Path::from("big.txt");
    let tail = bytes - last.len() as u64 - 1 - 4096..bytes;
    let (request, _) = best_of(5, || {
        Ok(s3
            .runtime
            .block_on(s3.client.get_range(&key, tail.clone()))?
            .len())
    })?;
    let (restore_s, request_s) = (took.as_secs_f64(), request.as_secs_f64());
    println!(
        "{}",
        json!({
            "case": "restore_s3",
            "object_bytes": bytes,
            "lines": lines,
            "restore_s": round_to(restore_s, 6),
            "request_s": round_to(request_s, 6),
            "restore_minus_request_s": round_to(restore_s - request_s, 6),
            "target": RESTORE_TARGET_S,
            "met": restore_s - request_s <= RESTORE_TARGET_S,
        })
    );
    Ok(())
}
