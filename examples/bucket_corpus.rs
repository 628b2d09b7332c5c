//! A corpus in a bucket, read where it lives, and a worker killed with
//! `SIGKILL` mid-run, several times: every resume continues exactly where
//! the last checkpoint was taken.
//!
//! ```sh
//! pip install 'moto[server]'   # a local S3 server, if NODES_S3_ENDPOINT names none
//! cargo run --release -p nodes-examples --features object-store,parquet --example bucket_corpus
//! ```
//!
//! It uploads two datasets to a bucket of the S3 server at
//! `NODES_S3_ENDPOINT` (or of a `moto_server` it starts on 127.0.0.1):
//! "web", four JSONL.zst shards of two zstd frames each, and "books", two
//! Parquet shards in row groups of 100 rows. Each is read by
//!
//! ```text
//! Files::remote → shuffle_files → interleave(2, 4, read_jsonl | read_parquet) → map(tokenize) → filter
//! ```
//!
//! and the two are mixed 0.7 / 0.3, packed into chunks of `SEQ_LEN`
//! tokens and batched by 4, for 2 epochs. The harness
//! (`nodes_examples::kill_resume`) runs it uninterrupted for the expected
//! log, then in worker processes killed 5 times between checkpoints, and
//! exits non-zero unless the joined log equals the uninterrupted run's.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt32Array};
use nodes_examples::kill_resume::{self, Res, Run, fnv1a};
use nodes_std::Store;
use nodes_std::prelude::*;
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

const SEED: u64 = 77;
const VOCAB: u32 = 32_000;
const SEQ_LEN: usize = 64;
const BATCH: usize = 4;

fn run() -> Run {
    Run {
        name: "bucket_corpus",
        epochs: 2,
        checkpoint_every: 20,
        step: Duration::from_millis(2),
        kills: 5,
        kill_delay_ms: 200..700,
        seed: SEED,
    }
}

/// One record of either dataset.
#[derive(Debug, Serialize, Deserialize)]
struct Rec {
    id: u32,
    text: String,
}

/// Record `id`'s text: a few words drawn from its id.
fn text(id: u32) -> String {
    const WORDS: [&str; 12] = [
        "river", "stone", "quiet", "lamp", "orbit", "cedar", "ember", "harbor", "violet", "meadow",
        "signal", "thread",
    ];
    let mut x = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n = 3 + x % 17;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            WORDS[(x % 12) as usize]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn jsonl(ids: std::ops::Range<u32>) -> Res<String> {
    let mut out = String::new();
    for id in ids {
        out += &serde_json::to_string(&Rec { id, text: text(id) })?;
        out.push('\n');
    }
    Ok(out)
}

fn zstd_frames(parts: &[String]) -> Vec<u8> {
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};
    parts
        .iter()
        .flat_map(|p| compress_to_vec(p.as_bytes(), CompressionLevel::Fastest))
        .collect()
}

fn parquet(ids: std::ops::Range<u32>) -> Res<Vec<u8>> {
    let texts: Vec<String> = ids.clone().map(text).collect();
    let batch = RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(UInt32Array::from_iter_values(ids)) as ArrayRef,
        ),
        ("text", Arc::new(StringArray::from(texts)) as ArrayRef),
    ])?;
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(100))
        .build();
    let mut out = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), Some(props))?;
    writer.write(&batch)?;
    writer.close()?;
    Ok(out)
}

/// Creates `bucket` on the server and uploads the two datasets.
fn upload(endpoint: &str, bucket: &str) -> Res<()> {
    nodes_examples::create_bucket(endpoint, bucket)?;
    let client = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_bucket_name(bucket)
        .with_access_key_id("example")
        .with_secret_access_key("example")
        .with_region("us-east-1")
        .build()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut objects = Vec::new();
    for f in 0..4u32 {
        let base = f * 1500;
        let frames = [jsonl(base..base + 750)?, jsonl(base + 750..base + 1500)?];
        objects.push((format!("web/part-{f}.jsonl.zst"), zstd_frames(&frames)));
    }
    for f in 0..2u32 {
        let base = 1_000_000 + f * 1000;
        objects.push((
            format!("books/part-{f}.parquet"),
            parquet(base..base + 1000)?,
        ));
    }
    for (key, bytes) in objects {
        let key = object_store::path::Path::from(key);
        runtime.block_on(client.put(&key, bytes.into()))?;
    }
    Ok(())
}

/// The store of the example's server (credentials are the server's dummies).
fn store(endpoint: &str) -> Store {
    Store::from_env()
        .option("endpoint", endpoint)
        .option("allow_http", "true")
        .option("access_key_id", "example")
        .option("secret_access_key", "example")
        .option("region", "us-east-1")
}

/// The record id as the first token, then each word's FNV-1a hash mod `VOCAB`.
fn tokenize(rec: Rec) -> Vec<u32> {
    let mut tokens = vec![rec.id];
    tokens.extend(
        rec.text
            .split_whitespace()
            .map(|w| (fnv1a(w.bytes()) % u64::from(VOCAB)) as u32),
    );
    tokens
}

/// The whole pipeline over the bucket.
fn pipeline(endpoint: &str, bucket: &str) -> Res<impl Node<Item = Vec<Vec<u32>>> + use<>> {
    let store = store(endpoint);
    let (for_web, for_books) = (store.clone(), store.clone());
    let web = Files::remote(&store, &format!("s3://{bucket}/web/"))?
        .shuffle_files(SEED)
        .interleave(2, 4, move |path: PathBuf| {
            IterableWrapper::new(vec![path])
                .read_jsonl::<Rec>()
                .store(for_web.clone())
        })?
        .map(tokenize)
        .filter(|tokens: &Vec<u32>| tokens.len() > 4)
        .boxed();
    let books = Files::remote(&store, &format!("s3://{bucket}/books/"))?
        .shuffle_files(SEED + 1)
        .interleave(2, 4, move |path: PathBuf| {
            IterableWrapper::new(vec![path])
                .read_parquet::<Rec>()
                .store(for_books.clone())
        })?
        .map(tokenize)
        .filter(|tokens: &Vec<u32>| tokens.len() > 4)
        .boxed();
    Ok(MultiNodeWeightedSampler::new(
        [("web", web), ("books", books)],
        [("web", 0.7), ("books", 0.3)],
    )?
    .seed(SEED)
    .rank(0, 1)?
    .pack(SEQ_LEN)?
    .batch(BATCH)?)
}

/// A `moto_server` this example started, stopped on drop.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `NODES_S3_ENDPOINT`, or a `moto_server` started on a free port.
fn server() -> Res<(String, Option<Server>)> {
    if let Ok(endpoint) = std::env::var("NODES_S3_ENDPOINT") {
        return Ok((endpoint, None));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = std::process::Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start moto_server ({e}): `pip install 'moto[server]'`, or set NODES_S3_ENDPOINT"))?;
    let server = Server(child);
    for _ in 0..600 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok((format!("http://127.0.0.1:{port}"), Some(server)));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err("moto_server did not start".into())
}

fn main() -> ExitCode {
    let worker = std::env::args().nth(1).is_some();
    // Workers reach the orchestrator's server through their arguments.
    let (endpoint, _server) = if worker {
        (String::new(), None)
    } else {
        match server() {
            Ok(found) => found,
            Err(e) => {
                eprintln!("bucket_corpus: FAILED: {e}");
                return ExitCode::FAILURE;
            }
        }
    };
    let prepare = |_: &Path| -> Res<Vec<String>> {
        let bucket = format!("nodes-bucket-corpus-{}", std::process::id());
        upload(&endpoint, &bucket)?;
        Ok(vec![endpoint.clone(), bucket])
    };
    kill_resume::main(&run(), prepare, |args: &[String]| match args {
        [endpoint, bucket] => pipeline(endpoint, bucket),
        _ => Err("usage: --child STATE_FILE LOG_FILE ENDPOINT BUCKET".into()),
    })
}
