//! Files in object stores and behind HTTP URLs: [`Store`] (where and how
//! they are read), [`Retry`] (what a transient failure gets), and the
//! connection a reader owns: an async runtime started at its first remote
//! file and shut down with it, and one client per bucket.

mod list;
mod object;

pub(crate) use list::list;
pub(crate) use object::ObjectReader;
#[cfg(feature = "parquet")]
pub(crate) use object::RemoteFile;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures_util::future::{Either, select};

use object_store::ObjectStore;
use object_store::path::Path as Key;
use rand::{Rng, SeedableRng};

/// Where remote files are read from, and how: the client options of each
/// object store (credentials, endpoint, region, ...), and the [`Retry`] of
/// transient failures.
///
/// `s3://bucket/key`, `gs://bucket/key`, `az://container/key` and
/// `http(s)://host/path` name remote files wherever a path is taken
/// ([`Files`](crate::Files) constructors and the file readers). Options
/// come from the standard environment variables of each service
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, `GOOGLE_SERVICE_ACCOUNT`,
/// `AZURE_STORAGE_ACCOUNT_NAME`, ...; see the `object_store` crate's
/// builders) and from [`Store::option`], which wins. Credentials are never
/// written into a state, an error or a log: a `Store`'s `Debug` shows the
/// option keys only.
///
/// A reader without a store of its own reads with [`Store::from_env`]. Each
/// reader starts one runtime thread at its first remote file; readers made
/// per file (inside [`interleave`](crate::NodeExt::interleave)) share one
/// connection when given clones of one `Store`.
#[derive(Clone)]
pub struct Store {
    options: Vec<(String, String)>,
    retry: Retry,
    read_ahead: ReadAhead,
    /// The runtime and clients, made at the first remote read and shared
    /// by the clones of this store (a store changed since has its own).
    connection: Arc<OnceLock<Arc<Connection>>>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.options.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Store")
            .field("option_keys", &keys)
            .field("retry", &self.retry)
            .field("read_ahead", &self.read_ahead)
            .finish_non_exhaustive()
    }
}

impl Default for Store {
    fn default() -> Store {
        Store::from_env()
    }
}

impl Store {
    /// The options of the environment, with the default [`Retry`].
    pub fn from_env() -> Store {
        Store {
            options: Vec::new(),
            retry: Retry::default(),
            read_ahead: ReadAhead {
                requests: 2,
                bytes: 8 << 20,
            },
            connection: Arc::default(),
        }
    }

    /// Sets a client option, by the `object_store` crate's name of its
    /// configuration key for the store a URL names (`"endpoint"`,
    /// `"allow_http"`, `"region"`, `"access_key_id"`, ... for S3). An
    /// unknown key is an error at the first file read.
    pub fn option(mut self, key: impl Into<String>, value: impl Into<String>) -> Store {
        self.options.push((key.into(), value.into()));
        self.connection = Arc::default();
        self
    }

    /// Sets how transient failures are retried.
    pub fn retry(mut self, retry: Retry) -> Store {
        self.retry = retry;
        self.connection = Arc::default();
        self
    }

    /// Sets how far a line reader reads ahead of where it is: up to
    /// `requests` ranged GETs of `bytes` each, made at once and received
    /// while the reader parses, the first right after the response that
    /// opened the object. At most `(requests + 1) × bytes` bytes wait in
    /// memory per reader (the ranges running, and the one being read).
    /// `0` requests streams each object in one response instead. The
    /// default is 2 requests of 8 MiB.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for more
    /// than [`MAX_READ_AHEAD`] requests, or ranges of 0 bytes.
    pub fn read_ahead(mut self, requests: usize, bytes: u64) -> crate::Result<Store> {
        let why = if requests > MAX_READ_AHEAD {
            format!("read_ahead: at most {MAX_READ_AHEAD} requests at once, found {requests}")
        } else if bytes == 0 {
            "read_ahead: ranges of at least 1 byte, found 0".to_owned()
        } else {
            self.read_ahead = ReadAhead { requests, bytes };
            self.connection = Arc::default();
            return Ok(self);
        };
        Err(crate::Error::invalid_argument("Store", why))
    }

    /// The connection, started at the first call.
    pub(crate) fn connection(&self) -> Result<&Arc<Connection>, String> {
        if let Some(c) = self.connection.get() {
            return Ok(c);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("nodes-store")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the object store runtime: {e}"))?;
        Ok(self.connection.get_or_init(|| {
            Arc::new(Connection {
                runtime,
                options: self.options.clone(),
                clients: Mutex::default(),
            })
        }))
    }
}

/// How a remote read retries a transient failure (a 5xx or 429 response,
/// a timeout, a reset connection, a body cut short): up to `attempts`
/// tries in all, waiting an exponential backoff with jitter between them
/// (`first`, doubled each time up to `max`, each wait drawn uniformly from
/// its upper half), then resuming at the byte where the failed read
/// stopped, so nothing is lost or read twice. A permanent failure (a
/// missing object, a denied request, an object changed since it was first
/// read) is not retried.
///
/// An attempt also fails (transiently) when its response, or the next
/// bytes of its body, has not come within the [`timeout`](Retry::timeout).
///
/// The waits go through an injected sleep ([`Retry::sleep_with`]), the
/// timeouts through an injected timer ([`Retry::timer_with`]) and the
/// jitter through a seeded RNG, so tests drive all three.
#[derive(Clone)]
pub struct Retry {
    attempts: u32,
    first: Duration,
    max: Duration,
    seed: u64,
    sleep: Arc<dyn Fn(Duration) + Send + Sync>,
    timeout: Duration,
    timer: Arc<dyn Fn(Duration) -> Timer + Send + Sync>,
}

/// One timeout of a remote read: it fires unless the response (or the
/// next bytes of a body) comes first. [`Retry::timer_with`] makes one per
/// wait.
pub struct Timer(Pin<Box<dyn Future<Output = ()> + Send>>);

impl Timer {
    /// Fires after `after` of real time (the default timer).
    pub fn after(after: Duration) -> Timer {
        // Made at its first poll, on the store's runtime, which drives it.
        Timer(Box::pin(async move { tokio::time::sleep(after).await }))
    }

    /// Fires when `fired` completes: a test's own clock.
    pub fn when(fired: impl Future<Output = ()> + Send + 'static) -> Timer {
        Timer(Box::pin(fired))
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer").finish_non_exhaustive()
    }
}

impl fmt::Debug for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("attempts", &self.attempts)
            .field("first", &self.first)
            .field("max", &self.max)
            .field("seed", &self.seed)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Default for Retry {
    /// 10 attempts, waits from 100 ms up to 15 s (about a minute in all),
    /// a timeout of 30 s, real sleeps and timers.
    fn default() -> Retry {
        Retry {
            attempts: 10,
            first: Duration::from_millis(100),
            max: Duration::from_secs(15),
            seed: 0,
            sleep: Arc::new(std::thread::sleep),
            timeout: Duration::from_secs(30),
            timer: Arc::new(Timer::after),
        }
    }
}

impl Retry {
    /// The default retry.
    pub fn new() -> Retry {
        Retry::default()
    }

    /// Tries a read at most `attempts` times in all (at least 1).
    pub fn attempts(mut self, attempts: u32) -> Retry {
        self.attempts = attempts.max(1);
        self
    }

    /// Waits `first` before the second attempt, doubling up to `max`.
    pub fn backoff(mut self, first: Duration, max: Duration) -> Retry {
        self.first = first;
        self.max = max.max(first);
        self
    }

    /// Seeds the jitter of the waits.
    pub fn jitter_seed(mut self, seed: u64) -> Retry {
        self.seed = seed;
        self
    }

    /// Waits by calling `sleep` (a test passes one that records the wait
    /// and returns at once).
    pub fn sleep_with(mut self, sleep: impl Fn(Duration) + Send + Sync + 'static) -> Retry {
        self.sleep = Arc::new(sleep);
        self
    }

    /// Fails an attempt whose response, or the next bytes of whose body,
    /// has not come within `timeout` (30 s by default): a stalled server is
    /// then a transient failure, retried, not a read that hangs.
    pub fn timeout(mut self, timeout: Duration) -> Retry {
        self.timeout = timeout;
        self
    }

    /// Times the timeouts with `timer`, called with the timeout once per
    /// wait, rather than with the real clock (a test passes one that fires
    /// when the test says so).
    pub fn timer_with(
        mut self,
        timer: impl Fn(Duration) -> Timer + Send + Sync + 'static,
    ) -> Retry {
        self.timer = Arc::new(timer);
        self
    }

    /// `future`'s output, its error sorted, or a transient failure if the
    /// timeout fires first.
    pub(crate) async fn within<T>(
        &self,
        future: impl Future<Output = object_store::Result<T>>,
    ) -> Result<T, Failure> {
        match select(std::pin::pin!(future), (self.timer)(self.timeout).0).await {
            Either::Left((out, _)) => out.map_err(classify),
            Either::Right(_) => Err(Failure::Transient(format!(
                "no response within {:?}",
                self.timeout
            ))),
        }
    }

    /// The wait before attempt `attempt + 1` (`attempt` ≥ 1), drawn from
    /// the upper half of the doubled backoff.
    fn wait(&self, attempt: u32, rng: &mut rand_chacha::ChaCha8Rng) -> Duration {
        let doubled = self.first.saturating_mul(1u32 << (attempt - 1).min(20));
        doubled.min(self.max).mul_f64(rng.random_range(0.5..=1.0))
    }
}

/// What a failure is: worth retrying, or final.
pub(crate) enum Failure {
    Transient(String),
    /// The object is not the one first read (its ETag changed).
    Changed(String),
    Permanent(String),
}

/// Sorts an `object_store` error.
fn classify(e: object_store::Error) -> Failure {
    use object_store::Error as E;
    match e {
        E::Precondition { .. } | E::NotModified { .. } => Failure::Changed(e.to_string()),
        E::Generic { .. } | E::JoinError { .. } => Failure::Transient(e.to_string()),
        other => Failure::Permanent(other.to_string()),
    }
}

/// The retry loop's count and jitter for one object.
pub(crate) struct Attempts {
    pub(crate) retry: Retry,
    made: u32,
    rng: rand_chacha::ChaCha8Rng,
}

impl Attempts {
    pub(crate) fn new(retry: &Retry) -> Attempts {
        Attempts {
            retry: retry.clone(),
            made: 0,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(retry.seed),
        }
    }

    /// After a failed attempt: waits and returns `Ok` if another may be
    /// made, else the final error, naming `what` and the attempts made.
    pub(crate) fn failed(&mut self, what: &str, failure: Failure) -> io::Result<()> {
        self.made += 1;
        let made = self.made;
        Err(match failure {
            Failure::Transient(_) if made < self.retry.attempts => {
                (self.retry.sleep)(self.retry.wait(made, &mut self.rng));
                return Ok(());
            }
            Failure::Transient(m) => io::Error::other(format!(
                "{what}: failed after {made} attempts (the last: {m})"
            )),
            Failure::Changed(m) => io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{what}: the object changed since it was first read or saved (its ETag no longer matches: {m}); reading on would mix two versions"
                ),
            ),
            Failure::Permanent(m) => io::Error::other(format!("{what}: {m}")),
        })
    }

    /// A read made progress: the next failure starts a new count.
    pub(crate) fn progressed(&mut self) {
        self.made = 0;
    }
}

/// The most ranged requests a reader runs ahead at once
/// ([`Store::read_ahead`]): more would only queue at the store.
pub const MAX_READ_AHEAD: usize = 64;

/// How far a reader reads ahead (see [`Store::read_ahead`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadAhead {
    pub(crate) requests: usize,
    pub(crate) bytes: u64,
}

/// The runtime and clients of a [`Store`].
pub(crate) struct Connection {
    pub(crate) runtime: tokio::runtime::Runtime,
    options: Vec<(String, String)>,
    /// One client per `scheme://host`.
    clients: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl Connection {
    /// The client and key of the object `url` names.
    pub(crate) fn resolve(&self, url: &str) -> Result<(Arc<dyn ObjectStore>, Key), String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        let root = format!("{}://{}", parsed.scheme(), parsed.authority());
        let key = Key::from_url_path(parsed.path())
            .map_err(|e| format!("`{url}`: not an object key: {e}"))?;
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = clients.get(&root) {
            return Ok((Arc::clone(client), key));
        }
        let client = self.build(&parsed, &root)?;
        clients.insert(root, Arc::clone(&client));
        Ok((client, key))
    }

    fn build(&self, url: &url::Url, root: &str) -> Result<Arc<dyn ObjectStore>, String> {
        // The retries are ours (resuming where a body broke); the client's
        // own would repeat whole requests.
        let once = object_store::RetryConfig {
            max_retries: 0,
            ..Default::default()
        };
        macro_rules! configured {
            ($builder:expr) => {{
                let mut builder = $builder.with_url(root).with_retry(once);
                // The timeouts are ours too, on the retry's timer: the
                // client's own run on the real clock, and its total one
                // would cut a long body.
                for key in ["timeout", "connect_timeout"] {
                    builder =
                        builder.with_config(key.parse().expect("a client option"), "100years");
                }
                for (k, v) in &self.options {
                    let key = k
                        .to_ascii_lowercase()
                        .parse()
                        .map_err(|_| format!("`{root}`: unknown store option `{k}`"))?;
                    builder = builder.with_config(key, v.clone());
                }
                let client = builder.build().map_err(|e| format!("`{root}`: {e}"))?;
                Arc::new(client) as Arc<dyn ObjectStore>
            }};
        }
        Ok(match url.scheme() {
            "s3" | "s3a" => configured!(object_store::aws::AmazonS3Builder::from_env()),
            "gs" => configured!(object_store::gcp::GoogleCloudStorageBuilder::from_env()),
            "az" | "azure" | "abfs" | "abfss" => {
                configured!(object_store::azure::MicrosoftAzureBuilder::from_env())
            }
            "http" | "https" => configured!(object_store::http::HttpBuilder::new()),
            other => return Err(format!("`{root}`: no object store for `{other}://`")),
        })
    }
}

/// Whether a read failed because the object changed (see
/// [`Attempts::failed`]).
pub(crate) fn is_changed(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidData
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `gs://` and `az://` are not tested against a server: their URLs
    /// resolve to clients built from a store's options, one per bucket, and
    /// a missing or unknown setting is an error naming it. No request is
    /// made.
    #[test]
    fn urls_of_every_scheme_resolve_to_configured_clients() {
        let gcs = Store::from_env().option("skip_signature", "true");
        let connection = gcs.connection().unwrap();
        let (a, key) = connection.resolve("gs://bucket/dir/a.jsonl").unwrap();
        assert_eq!(key.as_ref(), "dir/a.jsonl");
        let (b, _) = connection.resolve("gs://bucket/b.jsonl").unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one client per bucket");
        let (c, _) = connection.resolve("gs://other/b.jsonl").unwrap();
        assert!(!Arc::ptr_eq(&a, &c));

        let azure = Store::from_env()
            .option("account_name", "account")
            .option("skip_signature", "true");
        let (_, key) = azure
            .connection()
            .unwrap()
            .resolve("az://container/x/b.parquet")
            .unwrap();
        assert_eq!(key.as_ref(), "x/b.parquet");
        if std::env::var_os("AZURE_STORAGE_ACCOUNT_NAME").is_none() {
            let anonymous = Store::from_env().option("skip_signature", "true");
            let err = anonymous
                .connection()
                .unwrap()
                .resolve("az://container/b")
                .err()
                .unwrap();
            assert!(
                err.contains("az://container") && err.contains("Account"),
                "{err}"
            );
        }

        let http = Store::from_env();
        let connection = http.connection().unwrap();
        let (_, key) = connection
            .resolve("https://example.com/data/a.jsonl")
            .unwrap();
        assert_eq!(key.as_ref(), "data/a.jsonl");
        let err = connection.resolve("ftp://host/a").err().unwrap();
        assert!(err.contains("no object store for `ftp://`"), "{err}");

        let unknown = Store::from_env().option("no_such_option", "1");
        let err = unknown
            .connection()
            .unwrap()
            .resolve("s3://bucket/a")
            .err()
            .unwrap();
        assert!(
            err.contains("unknown store option `no_such_option`"),
            "{err}"
        );
    }

    #[test]
    fn read_ahead_refuses_what_it_cannot_bound() {
        let err = Store::from_env().read_ahead(MAX_READ_AHEAD + 1, 1 << 20);
        let err = err.unwrap_err().to_string();
        assert!(
            err.contains("at most 64 requests at once, found 65"),
            "{err}"
        );
        let err = Store::from_env().read_ahead(2, 0).unwrap_err().to_string();
        assert!(err.contains("at least 1 byte"), "{err}");
        let store = Store::from_env().read_ahead(MAX_READ_AHEAD, 1).unwrap();
        assert!(format!("{store:?}").contains("requests: 64"));
        assert!(Store::from_env().read_ahead(0, 1).is_ok());
    }

    #[test]
    fn debug_shows_option_keys_never_values() {
        let store = Store::from_env().option("secret_access_key", "hunter2");
        let shown = format!("{store:?}");
        assert!(
            shown.contains("secret_access_key") && !shown.contains("hunter2"),
            "{shown}"
        );
    }

    #[test]
    fn backoff_doubles_within_its_bounds_with_seeded_jitter() {
        let retry = Retry::new().backoff(Duration::from_millis(100), Duration::from_secs(1));
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let waits: Vec<Duration> = (1..=6).map(|a| retry.wait(a, &mut rng)).collect();
        for (attempt, wait) in (1u32..).zip(&waits) {
            let full =
                Duration::from_millis(100 * (1 << (attempt - 1))).min(Duration::from_secs(1));
            assert!(
                *wait >= full / 2 && *wait <= full,
                "attempt {attempt}: {wait:?}"
            );
        }
        let mut again = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let same: Vec<Duration> = (1..=6).map(|a| retry.wait(a, &mut again)).collect();
        assert_eq!(waits, same, "the jitter is seeded");
    }
}
