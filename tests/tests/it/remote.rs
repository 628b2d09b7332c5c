//! Files in an object store (`Store`), against the S3 server at
//! `NODES_S3_ENDPOINT` (`.ci/run` starts one): listings and reads match the
//! same files on disk, plain, gzip and zstd; a state at every cut resumes
//! exactly; an object overwritten under a state is refused by name;
//! transient failures (503s, bodies cut short, responses that stall until
//! the retry's injected timer fires) through a loopback proxy lose and
//! repeat nothing; a permanent one names the object and the
//! attempts; credentials stay out of errors and `Debug`. Parquet files
//! read, resume and survive the same faults.
//!
//! Without `NODES_S3_ENDPOINT` each test prints a note and passes, unless
//! `NODES_REQUIRE_S3` is set (as `.ci/run` does): then it fails.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use nodes_std::prelude::*;
use nodes_std::{Files, Retry, Running, Store, Timer, testing};
use object_store::ObjectStoreExt;
use serde::Deserialize;

use crate::support::corpus::TempDir;

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Row {
    id: u64,
    text: String,
}

/// The S3 endpoint, or `None` (with a note) when there is none.
pub(crate) fn endpoint() -> Option<String> {
    match std::env::var("NODES_S3_ENDPOINT") {
        Ok(e) => Some(e),
        Err(_) if std::env::var_os("NODES_REQUIRE_S3").is_some() => {
            panic!("NODES_REQUIRE_S3 is set but NODES_S3_ENDPOINT is not: the S3 tests cannot run")
        }
        Err(_) => {
            eprintln!("note: NODES_S3_ENDPOINT is unset: this S3 test is skipped");
            None
        }
    }
}

/// Waits the retries asked for, recorded instead of slept.
type Waits = Arc<Mutex<Vec<Duration>>>;

/// A store for the server at `endpoint`, retrying without sleeping.
fn store(endpoint: &str, waits: &Waits) -> Store {
    one_per_request(with_retry(endpoint, retry(waits)))
}

/// `store` with a connection per request, so the proxy sees each one.
fn one_per_request(store: Store) -> Store {
    store.option("pool_max_idle_per_host", "0")
}

/// The same, keeping connections open between requests.
fn pooled(endpoint: &str, waits: &Waits) -> Store {
    with_retry(endpoint, retry(waits))
}

/// 4 attempts, the waits between them recorded in `waits`, not slept.
fn retry(waits: &Waits) -> Retry {
    let waits = Arc::clone(waits);
    Retry::new()
        .attempts(4)
        .jitter_seed(3)
        .sleep_with(move |d| waits.lock().unwrap().push(d))
}

/// A store for the server at `endpoint` that retries by `retry`.
pub(crate) fn with_retry(endpoint: &str, retry: Retry) -> Store {
    Store::from_env()
        .option("endpoint", endpoint)
        .option("allow_http", "true")
        .option("access_key_id", "test")
        .option("secret_access_key", "never-shown-secret")
        .option("region", "us-east-1")
        .retry(retry)
}

/// A bucket of the test's own.
pub(crate) struct Bucket {
    name: String,
    client: object_store::aws::AmazonS3,
    runtime: tokio::runtime::Runtime,
}

impl Bucket {
    pub(crate) fn new(endpoint: &str, tag: &str) -> Bucket {
        let name = format!("nodes-{tag}-{}", std::process::id());
        // The server creates a bucket on an unsigned PUT.
        let host = endpoint.trim_start_matches("http://");
        let mut conn = TcpStream::connect(host).unwrap();
        write!(
            conn,
            "PUT /{name} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).unwrap();
        assert!(
            reply.starts_with("HTTP/1.1 200"),
            "creating {name}: {reply}"
        );
        let client = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_bucket_name(&name)
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Bucket {
            name,
            client,
            runtime,
        }
    }

    pub(crate) fn put(&self, key: &str, bytes: Vec<u8>) {
        let key = object_store::path::Path::from(key);
        self.runtime
            .block_on(self.client.put(&key, bytes.into()))
            .unwrap();
    }

    pub(crate) fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.name)
    }
}

fn row(id: u64) -> String {
    format!(
        "{{\"id\": {id}, \"text\": \"row {id} {}\"}}\n",
        "x".repeat(id as usize % 7)
    )
}

fn rows(ids: std::ops::Range<u64>) -> String {
    ids.map(row).collect()
}

fn gzip(text: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap()
}

/// Several zstd frames, one per part.
fn zstd(parts: &[&str]) -> Vec<u8> {
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};
    parts
        .iter()
        .flat_map(|p| compress_to_vec(p.as_bytes(), CompressionLevel::Fastest))
        .collect()
}

/// The shards, by name: plain, empty, gzip and zstd.
fn shards() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        // Longer than a state's identity window: a restore reads a range.
        ("a.jsonl", rows(0..200).into_bytes()),
        ("b.jsonl", Vec::new()),
        ("c.jsonl.gz", gzip(&rows(200..225))),
        ("d.jsonl.zst", zstd(&[&rows(225..240), &rows(240..250)])),
    ]
}

/// The shards uploaded under `data/` and written to a local directory.
fn upload(bucket: &Bucket, dir: &TempDir) {
    for (name, bytes) in shards() {
        bucket.put(&format!("data/{name}"), bytes.clone());
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    bucket.put("data/sub/e.jsonl", rows(250..255).into_bytes());
}

fn ids(items: Vec<Result<Row>>) -> Vec<u64> {
    items.into_iter().map(|r| r.unwrap().id).collect()
}

fn local_ids(dir: &TempDir) -> Vec<u64> {
    let files = Files::in_dir(dir.path()).unwrap().shuffle_files(5);
    ids(files.read_jsonl::<Row>().start().unwrap().collect())
}

#[test]
fn objects_read_like_the_same_files_on_disk() {
    let Some(endpoint) = endpoint() else { return };
    let (bucket, dir) = (Bucket::new(&endpoint, "same"), TempDir::new("remote-same"));
    upload(&bucket, &dir);
    let store = store(&endpoint, &Waits::default());
    let expected = local_ids(&dir);
    assert_eq!(expected.len(), 250);

    let listed = Files::remote(&store, &bucket.url("data/")).unwrap();
    let names: Vec<String> = listed.paths().map(|p| p.display().to_string()).collect();
    let want: Vec<String> = shards()
        .iter()
        .map(|(n, _)| bucket.url(&format!("data/{n}")))
        .collect();
    assert_eq!(names, want, "a prefix lists the objects directly under it");
    let read = listed
        .shuffle_files(5)
        .read_jsonl::<Row>()
        .store(store.clone());
    let mut loader = Loader::new(read);
    let mut epoch = loader.epoch();
    let mut items = Vec::new();
    while let Some(item) = epoch.next() {
        // The listing's sizes, and every object's bytes, once read.
        let progress = epoch.progress();
        assert!(progress.bytes_read <= progress.bytes_total.unwrap_or(0));
        items.push(item);
    }
    assert_eq!(ids(items), expected);
    let bytes: u64 = shards().iter().map(|(_, b)| b.len() as u64).sum();
    let progress = epoch.progress();
    assert_eq!((progress.files_done, progress.files_total), (4, Some(4)));
    assert_eq!(
        (progress.bytes_read, progress.bytes_total),
        (bytes, Some(bytes))
    );

    let glob = Files::remote(&store, &bucket.url("data/**/*.jsonl")).unwrap();
    let names: Vec<String> = glob.paths().map(|p| p.display().to_string()).collect();
    assert_eq!(
        names,
        [
            bucket.url("data/a.jsonl"),
            bucket.url("data/b.jsonl"),
            bucket.url("data/sub/e.jsonl")
        ]
    );

    let urls = [bucket.url("data/sub/e.jsonl"), bucket.url("data/a.jsonl")];
    let listed = Files::list(urls.iter().map(Path::new)).unwrap();
    let read = listed.read_lines().store(store.clone());
    let lines: Vec<String> = read.start().unwrap().map(|l| l.unwrap()).collect();
    assert_eq!(
        lines.concat(),
        (rows(250..255) + &rows(0..200)).replace('\n', "")
    );
}

#[test]
fn a_state_at_every_cut_resumes_exactly() {
    let Some(endpoint) = endpoint() else { return };
    let (bucket, dir) = (Bucket::new(&endpoint, "cuts"), TempDir::new("remote-cuts"));
    upload(&bucket, &dir);
    let store = pooled(&endpoint, &Waits::default());
    let url = bucket.url("data/");
    let pipeline = || {
        Files::remote(&store, &url)
            .unwrap()
            .shuffle_files(5)
            .read_jsonl::<Row>()
            .store(store.clone())
            .map(|row: Row| row.id)
    };
    for cut in [0, 1, 150, 199, 200, 201, 224, 226, 239, 240, 241, 249, 250] {
        testing::assert_save_load(pipeline, cut);
    }
}

#[test]
fn an_object_overwritten_under_a_state_is_refused() {
    let Some(endpoint) = endpoint() else { return };
    let (bucket, dir) = (
        Bucket::new(&endpoint, "overwrite"),
        TempDir::new("remote-ow"),
    );
    upload(&bucket, &dir);
    let store = store(&endpoint, &Waits::default());
    let pipeline = || {
        let files = Files::list([bucket.url("data/a.jsonl")]).unwrap();
        files.read_jsonl::<Row>().store(store.clone())
    };
    let mut loader = pipeline().start().unwrap();
    for _ in 0..5 {
        loader.next().unwrap().unwrap();
    }
    let state = loader.get_state().unwrap();
    // Same size, other bytes: only the ETag tells.
    let edited = rows(0..200).replace("row 7 ", "row 8 ");
    assert_eq!(edited.len(), rows(0..200).len());
    bucket.put("data/a.jsonl", edited.into_bytes());
    let err = Running::start_from(pipeline(), &state)
        .unwrap_err()
        .to_string();
    assert!(err.contains("/identity"), "{err}");
    assert!(err.contains("a.jsonl") && err.contains("ETag"), "{err}");
}

/// What the proxy does to the next connection.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Relays the connection untouched.
    Pass,
    /// Answers 503 without asking the server.
    Unavailable,
    /// Relays the first `n` bytes of the server's answer, then hangs up.
    CutAfter(usize),
    /// Reads the request and answers nothing until the client hangs up.
    Stall,
    /// Relays the first `n` bytes of the server's answer, then sends
    /// nothing more until the client hangs up.
    StallAfter(usize),
}

/// The clock of the retries' timeouts in these tests: only the proxy moves
/// it. Each connection it stalls fires one timer: the first to wait after
/// the stall began, which is that request's (a reader makes one request at
/// a time, and a wait that bytes already sent end does not count).
#[derive(Default)]
struct StallClock {
    /// Stalls not yet timed out, and the timers waiting for one.
    state: Mutex<(usize, Vec<Waker>)>,
    /// The timeout each timer was made for.
    made: Mutex<Vec<Duration>>,
}

impl StallClock {
    fn stalled(&self) {
        let mut state = self.state.lock().unwrap();
        state.0 += 1;
        state.1.drain(..).for_each(Waker::wake);
    }

    fn timer(self: &Arc<Self>, timeout: Duration) -> Timer {
        self.made.lock().unwrap().push(timeout);
        let clock = Arc::clone(self);
        Timer::when(std::future::poll_fn(move |cx| {
            let mut state = clock.state.lock().unwrap();
            if state.0 > 0 {
                state.0 -= 1;
                return Poll::Ready(());
            }
            state.1.push(cx.waker().clone());
            Poll::Pending
        }))
    }
}

/// A loopback proxy in front of the server that applies one fault per
/// connection, in order, then relays the rest untouched.
struct Proxy {
    endpoint: String,
    served: Arc<Mutex<usize>>,
    /// Moved by the connections it stalls.
    clock: Arc<StallClock>,
}

impl Proxy {
    fn start(upstream: &str, faults: Vec<Fault>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let faults = Arc::new(Mutex::new(std::collections::VecDeque::from(faults)));
        let served = Arc::new(Mutex::new(0));
        let count = Arc::clone(&served);
        let clock = Arc::new(StallClock::default());
        let stalls = Arc::clone(&clock);
        // Ends with the test process; a blocked accept holds no lock.
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                *count.lock().unwrap() += 1;
                let fault = faults.lock().unwrap().pop_front();
                let (upstream, stalls) = (upstream.clone(), Arc::clone(&stalls));
                std::thread::spawn(move || relay(client, &upstream, fault, &stalls));
            }
        });
        Proxy {
            endpoint,
            served,
            clock,
        }
    }
}

/// Relays one connection, applying `fault`.
fn relay(mut client: TcpStream, upstream: &str, fault: Option<Fault>, clock: &StallClock) {
    match fault {
        Some(Fault::Unavailable) => {
            read_head(&mut client);
            let _ = client.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            return;
        }
        Some(Fault::Stall) => {
            read_head(&mut client);
            clock.stalled();
            // Holds the connection until the client gives up on it.
            let _ = client.read(&mut [0; 1]);
            return;
        }
        _ => {}
    }
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut s2);
        let _ = s2.shutdown(std::net::Shutdown::Write);
    });
    match fault {
        Some(Fault::CutAfter(n)) => {
            let _ = std::io::copy(&mut (&mut server).take(n as u64), &mut client);
            let _ = client.shutdown(std::net::Shutdown::Both);
            let _ = server.shutdown(std::net::Shutdown::Both);
        }
        Some(Fault::StallAfter(n)) => {
            let _ = std::io::copy(&mut (&mut server).take(n as u64), &mut client);
            clock.stalled();
            // The relay of the request ends when the client hangs up.
            let _ = up.join();
            let _ = server.shutdown(std::net::Shutdown::Both);
            return;
        }
        _ => {
            let _ = std::io::copy(&mut server, &mut client);
            let _ = client.shutdown(std::net::Shutdown::Write);
        }
    }
    let _ = up.join();
}

/// Reads a request's head (a GET or HEAD has no body).
fn read_head(client: &mut TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && client.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
}

#[test]
fn transient_failures_lose_and_repeat_nothing() {
    let Some(endpoint) = endpoint() else { return };
    let (bucket, dir) = (
        Bucket::new(&endpoint, "flaky"),
        TempDir::new("remote-flaky"),
    );
    // A big object, so that cut bodies stop inside it.
    let big = rows(0..3000);
    bucket.put("big.jsonl", big.clone().into_bytes());
    bucket.put(
        "big.jsonl.zst",
        zstd(&[&big[..big.len() / 2], &big[big.len() / 2..]]),
    );
    std::fs::write(dir.path().join("big.jsonl"), &big).unwrap();
    let faults = vec![
        Fault::Unavailable,
        Fault::CutAfter(20_000),
        Fault::Unavailable,
        Fault::Unavailable,
        Fault::CutAfter(70_000),
        Fault::CutAfter(1_000),
        Fault::CutAfter(9_000),
    ];
    let proxy = Proxy::start(&endpoint, faults.clone());
    let waits = Waits::default();
    let store = store(&proxy.endpoint, &waits);
    let files = Files::list([bucket.url("big.jsonl"), bucket.url("big.jsonl.zst")]).unwrap();
    let read = files.read_jsonl::<Row>().store(store);
    let got = ids(read.start().unwrap().collect());
    let once: Vec<u64> = (0..3000).collect();
    assert_eq!(
        got,
        [once.clone(), once].concat(),
        "every row once per object, in order"
    );
    let waits = waits.lock().unwrap();
    assert_eq!(waits.len(), faults.len(), "one retry per fault: {waits:?}");
    // Exponential backoff from 100 ms, each wait in the upper half.
    assert!(
        waits
            .iter()
            .all(|w| *w >= Duration::from_millis(50) && *w <= Duration::from_secs(15))
    );
    assert!(*proxy.served.lock().unwrap() > faults.len());
}

#[test]
fn a_permanent_failure_names_the_object_and_the_attempts() {
    let Some(endpoint) = endpoint() else { return };
    let bucket = Bucket::new(&endpoint, "down");
    bucket.put("a.jsonl", rows(0..3).into_bytes());
    let proxy = Proxy::start(&endpoint, vec![Fault::Unavailable; 4]);
    let waits = Waits::default();
    let store = store(&proxy.endpoint, &waits);
    let files = Files::list([bucket.url("a.jsonl")]).unwrap();
    let mut loader = files
        .read_jsonl::<Row>()
        .store(store.clone())
        .start()
        .unwrap();
    let err = loader.next().unwrap().unwrap_err().to_string();
    assert!(err.contains(&bucket.url("a.jsonl")), "{err}");
    assert!(err.contains("after 4 attempts"), "{err}");
    assert_eq!(waits.lock().unwrap().len(), 3);
    assert!(
        !err.contains("never-shown-secret") && !format!("{store:?}").contains("never-shown-secret")
    );
    // The next file is read: the failure ended only that one.
    let missing = Files::list([bucket.url("missing.jsonl"), bucket.url("a.jsonl")]).unwrap();
    let store = self::store(&endpoint, &waits);
    let items: Vec<Result<Row>> = missing.read_jsonl().store(store).start().unwrap().collect();
    let err = items[0].as_ref().unwrap_err().to_string();
    assert!(err.contains("missing.jsonl"), "{err}");
    assert_eq!(
        items.len(),
        4,
        "a missing object is one error, then the next file: {items:?}"
    );
}

/// Past the response that opens an object, ranges of 8 KiB are read
/// ahead, three at a time, each on a connection of its own through the
/// proxy: 503s and bodies cut short, whichever range they hit, are retried
/// from the byte reached, and a state taken mid-object resumes there.
#[test]
fn ranges_read_ahead_lose_and_repeat_nothing() {
    let Some(endpoint) = endpoint() else { return };
    let bucket = Bucket::new(&endpoint, "ahead");
    let big = rows(0..3000);
    bucket.put("big.jsonl", big.clone().into_bytes());
    let faults = vec![
        Fault::Pass,
        Fault::Pass,
        Fault::Unavailable,
        Fault::CutAfter(3_000),
        Fault::Pass,
        Fault::CutAfter(5_000),
        Fault::Unavailable,
    ];
    let proxy = Proxy::start(&endpoint, faults.clone());
    let waits = Waits::default();
    let store = store(&proxy.endpoint, &waits)
        .read_ahead(3, 8 << 10)
        .unwrap();
    let pipeline = || {
        let files = Files::list([bucket.url("big.jsonl")]).unwrap();
        files.read_jsonl::<Row>().store(store.clone())
    };
    let got = ids(pipeline().start().unwrap().collect());
    let once: Vec<u64> = (0..3000).collect();
    assert_eq!(got, once, "every row once, in order");
    let faulty = faults.iter().filter(|f| !matches!(f, Fault::Pass)).count();
    assert_eq!(waits.lock().unwrap().len(), faulty, "one retry per fault");
    // The opening response, a request per range after its first 8 KiB,
    // and one more per fault: nothing is asked twice.
    let ranges = (big.len() - (8 << 10)).div_ceil(8 << 10);
    assert_eq!(*proxy.served.lock().unwrap(), 1 + ranges + faulty);

    let mut running = pipeline().start().unwrap();
    let first: Vec<u64> = ids(running.by_ref().take(1234).collect());
    let state = running.get_state().unwrap();
    let rest = ids(Running::start_from(pipeline(), &state).unwrap().collect());
    assert_eq!([first, rest].concat(), once, "resumed mid-object");
}

#[test]
fn stalled_responses_time_out_on_the_retry_timer_and_resume() {
    let Some(endpoint) = endpoint() else { return };
    let bucket = Bucket::new(&endpoint, "stalled");
    let big = rows(0..3000);
    assert!(big.len() > 100_000, "the stalls stop inside the body");
    bucket.put("big.jsonl", big.into_bytes());
    bucket.put("small.jsonl", rows(0..3).into_bytes());
    let faults = vec![
        Fault::Stall,
        Fault::StallAfter(20_000),
        Fault::Stall,
        Fault::StallAfter(50_000),
    ];
    let proxy = Proxy::start(&endpoint, faults.clone());
    let waits = Waits::default();
    let clock = Arc::clone(&proxy.clock);
    // One attempt more than there are stalls: under load, a stall can time
    // out its request before the bytes relayed ahead of it arrive, and that
    // attempt then fails without progress (the next starts from the byte
    // reached all the same).
    let retry = retry(&waits)
        .attempts(5)
        .timeout(Duration::from_secs(7))
        .timer_with(move |timeout| clock.timer(timeout));
    // One request at a time: a stall times out the one request waiting.
    let store = one_per_request(with_retry(&proxy.endpoint, retry.clone()))
        .read_ahead(0, 1)
        .unwrap();
    let files = Files::list([bucket.url("big.jsonl")]).unwrap();
    let got = ids(files
        .read_jsonl::<Row>()
        .store(store)
        .start()
        .unwrap()
        .collect());
    let once: Vec<u64> = (0..3000).collect();
    assert_eq!(got, once, "every row once, in order");
    assert_eq!(
        waits.lock().unwrap().len(),
        faults.len(),
        "one retry per stall"
    );
    let made = proxy.clock.made.lock().unwrap().clone();
    assert!(
        made.iter().all(|t| *t == Duration::from_secs(7)),
        "{made:?}"
    );

    // A server that never answers is a failure naming the object.
    let proxy = Proxy::start(&endpoint, vec![Fault::Stall; 4]);
    let clock = Arc::clone(&proxy.clock);
    let retry = retry
        .attempts(4)
        .timer_with(move |timeout| clock.timer(timeout));
    let store = one_per_request(with_retry(&proxy.endpoint, retry));
    let files = Files::list([bucket.url("small.jsonl")]).unwrap();
    let mut loader = files.read_jsonl::<Row>().store(store).start().unwrap();
    let err = loader.next().unwrap().unwrap_err().to_string();
    assert!(err.contains(&bucket.url("small.jsonl")), "{err}");
    assert!(
        err.contains("after 4 attempts (the last: no response within 7s)"),
        "{err}"
    );
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_objects_read_resume_and_survive_faults() {
    use crate::parquet::{Row, rows, write};
    let Some(endpoint) = endpoint() else { return };
    let (bucket, dir) = (
        Bucket::new(&endpoint, "parquet"),
        TempDir::new("remote-parquet"),
    );
    let mut all = Vec::new();
    for (f, n) in [(0, 23), (1, 40)] {
        let rows = rows(f, n);
        let path = dir.path().join(format!("{f}.parquet"));
        write(&path, &rows, 7);
        bucket.put(&format!("pq/{f}.parquet"), std::fs::read(&path).unwrap());
        all.extend(rows);
    }
    let store = pooled(&endpoint, &Waits::default());
    let url = bucket.url("pq/");
    let pipeline = || {
        let files = Files::remote(&store, &url).unwrap();
        files
            .read_parquet::<Row>()
            .store(store.clone())
            .map(|r: Row| r.id)
    };
    let ids: Vec<i64> = pipeline().start().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(ids, all.iter().map(|r| r.id).collect::<Vec<_>>());
    for cut in [0, 9, 23, 50] {
        testing::assert_save_load(pipeline, cut);
    }

    // Cut inside the answer's head: its pages are smaller than a cut body.
    use Fault::*;
    let faults = vec![
        Unavailable,
        CutAfter(200),
        Pass,
        Pass,
        Unavailable,
        Pass,
        CutAfter(250),
    ];
    let proxy = Proxy::start(&endpoint, faults.clone());
    let waits = Waits::default();
    let flaky = self::store(&proxy.endpoint, &waits);
    let files = Files::list([bucket.url("pq/0.parquet"), bucket.url("pq/1.parquet")]).unwrap();
    let read = files.read_parquet::<Row>().store(flaky);
    let got: Vec<Row> = read.start().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(got, all);
    let failed = faults.iter().filter(|f| !matches!(f, Pass)).count();
    assert_eq!(waits.lock().unwrap().len(), failed);

    // Row groups listed from the objects' footers, dealt to 3 ranks.
    let mut ids: Vec<i64> = (0..3)
        .flat_map(|rank| {
            let files = Files::remote(&store, &url).unwrap();
            let groups = files.parquet_row_groups_in(&store).unwrap();
            let shard = groups.shard(rank, 3).unwrap();
            let read = shard.read_parquet::<Row>().store(store.clone());
            read.start()
                .unwrap()
                .map(|r| r.unwrap().id)
                .collect::<Vec<_>>()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, all.iter().map(|r| r.id).collect::<Vec<_>>());

    // An object overwritten under a state is refused.
    let mut running = pipeline().start().unwrap();
    for _ in 0..30 {
        running.next().unwrap().unwrap();
    }
    let state = running.get_state().unwrap();
    let path = dir.path().join("other.parquet");
    write(&path, &rows(5, 40), 7);
    bucket.put("pq/1.parquet", std::fs::read(&path).unwrap());
    let err = Running::start_from(pipeline(), &state)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/identity") && err.contains("1.parquet"),
        "{err}"
    );
}

/// A moto server of the test's own, on `port`: killed on drop.
struct OwnServer(std::process::Child);

impl OwnServer {
    /// Starts one and waits until it answers.
    fn start(program: &str, port: u16) -> OwnServer {
        let server = OwnServer(
            std::process::Command::new(program)
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        // Readiness, not ordering: poll until the port accepts.
        for _ in 0..600 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{program} did not start on port {port}");
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_read_resumes_across_a_server_restart() {
    if endpoint().is_none() {
        return;
    }
    let Ok(program) = std::env::var("NODES_MOTO_SERVER") else {
        assert!(
            std::env::var_os("NODES_REQUIRE_S3").is_none(),
            "NODES_REQUIRE_S3 is set but NODES_MOTO_SERVER is not"
        );
        eprintln!("note: NODES_MOTO_SERVER is unset: this S3 test is skipped");
        return;
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    // Far more than the socket buffers hold, so the kill cuts the body.
    let big: String = rows(0..400_000);
    let server = Arc::new(Mutex::new(Some(OwnServer::start(&program, port))));
    let bucket = Bucket::new(&endpoint, "restart");
    bucket.put("big.jsonl", big.clone().into_bytes());
    let restarted = Arc::new(Mutex::new(0));
    let retry = {
        let (server, restarted, program) = (Arc::clone(&server), Arc::clone(&restarted), program);
        let (endpoint, big) = (endpoint.clone(), big.clone());
        // The first wait brings the server back with the same bytes (moto
        // keeps objects in memory): same ETag, so the read goes on.
        Retry::new().attempts(3).sleep_with(move |_| {
            let mut restarts = restarted.lock().unwrap();
            if *restarts == 0 {
                *server.lock().unwrap() = Some(OwnServer::start(&program, port));
                Bucket::new(&endpoint, "restart").put("big.jsonl", big.clone().into_bytes());
            }
            *restarts += 1;
        })
    };
    let store = pooled(&endpoint, &Waits::default()).retry(retry);
    let files = Files::list([bucket.url("big.jsonl")]).unwrap();
    let mut running = files.read_jsonl::<Row>().store(store).start().unwrap();
    let mut got = Vec::new();
    for _ in 0..1000 {
        got.push(running.next().unwrap().unwrap().id);
    }
    drop(server.lock().unwrap().take());
    for row in running.by_ref() {
        got.push(row.unwrap().id);
    }
    // The kill cut each request in flight once: the stream and the two
    // ranges read ahead, at most.
    let cut = *restarted.lock().unwrap();
    assert!((1..=3).contains(&cut), "{cut} failed requests");
    assert_eq!(got, (0..400_000).collect::<Vec<u64>>());
}

/// Files in a bucket reshard like local ones: 2 ranks, then 3, then 1,
/// with begun plain, gzip and zstd objects finished where they stopped;
/// every record once.
#[test]
fn objects_reshard_onto_other_rank_counts_exactly_once() {
    let Some(endpoint) = endpoint() else { return };
    let (bucket, dir) = (
        Bucket::new(&endpoint, "elastic"),
        TempDir::new("remote-elastic"),
    );
    upload(&bucket, &dir);
    let store = pooled(&endpoint, &Waits::default());
    let url = bucket.url("data/");
    let build = |rank: u64, world: u64| -> Box<dyn Node<Item = Vec<String>>> {
        Files::remote(&store, &url)
            .unwrap()
            .shuffle_files(5)
            .shard(rank, world)
            .unwrap()
            .read_jsonl::<Row>()
            .store(store.clone())
            .map(|row: Row| vec![row.id.to_string()])
            .boxed()
    };
    let mut delivered = Vec::new();
    let generation = crate::elastic_files::generation;
    let two = generation(&build, None, 2, Some(&[30, 70]), &mut delivered, false);
    let three = generation(
        &build,
        Some(&two),
        3,
        Some(&[20, 0, 50]),
        &mut delivered,
        false,
    );
    generation(&build, Some(&three), 1, None, &mut delivered, false);
    let mut ids: Vec<u64> = delivered.iter().map(|id| id.parse().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..250).collect::<Vec<u64>>());
}
