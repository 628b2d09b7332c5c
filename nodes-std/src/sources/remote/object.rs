//! Reading one remote object: [`ObjectReader`] streams it from a byte
//! offset to its end (the line readers), [`RemoteFile`] reads the ranges
//! asked for (Parquet). Every request after the first carries `If-Match`
//! with the ETag the first one saw, and a transient failure resumes at the
//! byte where it broke (see [`Retry`](super::Retry)).

use std::io::{self, Read};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use object_store::path::Path as Key;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use super::{Attempts, Connection, Failure, Store, classify};

/// The object a reader reads: where, and what it was when first read.
struct Object {
    /// Runs its requests (and keeps the runtime alive).
    connection: Arc<Connection>,
    client: Arc<dyn ObjectStore>,
    key: Key,
    url: String,
    size: u64,
    etag: Option<String>,
    attempts: Attempts,
}

impl Object {
    fn new(store: &Store, url: &str, etag: Option<&str>) -> io::Result<Object> {
        let connection = store.connection().map_err(io::Error::other)?;
        let (client, key) = connection.resolve(url).map_err(io::Error::other)?;
        Ok(Object {
            connection: Arc::clone(connection),
            client,
            key,
            url: url.to_owned(),
            size: 0,
            etag: etag.map(str::to_owned),
            attempts: Attempts::new(connection.retry()),
        })
    }

    fn options(&self, range: Option<GetRange>) -> GetOptions {
        GetOptions {
            range,
            if_match: self.etag.clone(),
            ..GetOptions::default()
        }
    }

    /// Runs `future` on the runtime, within the retry's timeout.
    fn run<T>(&self, future: impl Future<Output = object_store::Result<T>>) -> Result<T, Failure> {
        let retry = self.attempts.retry();
        match self.connection.block_on(retry.within(future)) {
            Some(got) => got.map_err(classify),
            None => Err(retry.timed_out()),
        }
    }

    /// The next bytes of `body`, within the retry's timeout; `Ok(None)` at
    /// its end.
    fn next_bytes(
        &self,
        body: &mut BoxStream<'static, object_store::Result<Bytes>>,
    ) -> Result<Option<Bytes>, Failure> {
        let retry = self.attempts.retry();
        match self.connection.block_on(retry.within(body.next())) {
            Some(got) => got.transpose().map_err(classify),
            None => Err(retry.timed_out()),
        }
    }

    /// After a failed attempt: `Ok` once it is time for another.
    fn failed(&mut self, failure: Failure) -> io::Result<()> {
        self.attempts.failed(&self.url, failure)
    }

    /// Notes the size and ETag of a response: the first one's are the
    /// object's; a later one is under `If-Match`, so they agree.
    fn saw(&mut self, meta: &object_store::ObjectMeta) {
        self.size = meta.size;
        if self.etag.is_none() {
            self.etag = meta.e_tag.clone();
        }
    }
}

/// A remote object's bytes from an offset to its end: one ranged GET whose
/// body streams while the reader parses (the HTTP client receives it on the
/// runtime's thread, bounded by its buffers), and a new GET from the byte
/// reached after a transient failure.
pub(crate) struct ObjectReader {
    object: Object,
    body: Option<BoxStream<'static, object_store::Result<Bytes>>>,
    chunk: Bytes,
    /// The object's offset just past `chunk`.
    end: u64,
}

impl ObjectReader {
    /// Opens `url` at byte `start`, requiring its ETag to be `etag` when
    /// given (a state's): an object changed since is an error.
    pub(crate) fn open(
        store: &Store,
        url: &str,
        start: u64,
        etag: Option<&str>,
    ) -> io::Result<ObjectReader> {
        let mut reader = ObjectReader {
            object: Object::new(store, url, etag)?,
            body: None,
            chunk: Bytes::new(),
            end: start,
        };
        reader.request()?;
        Ok(reader)
    }

    /// The object's size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.object.size
    }

    /// The object's ETag, if the store gives one.
    pub(crate) fn etag(&self) -> Option<&str> {
        self.object.etag.as_deref()
    }

    /// Requests the object from `end` on, retrying transient failures.
    fn request(&mut self) -> io::Result<()> {
        loop {
            // No range from 0: an empty object has no satisfiable range.
            let range = (self.end > 0).then_some(GetRange::Offset(self.end));
            let object = &self.object;
            let options = object.options(range);
            match object.run(object.client.get_opts(&object.key, options)) {
                Ok(result) => {
                    self.object.saw(&result.meta);
                    self.body = Some(result.into_stream());
                    return Ok(());
                }
                Err(failure) => {
                    let failure = self.past_the_end().unwrap_or(failure);
                    self.object.failed(failure)?;
                }
            }
        }
    }

    /// A first request from past the object's end (a restore into a
    /// shorter object without an ETag) fails without saying so: a HEAD
    /// tells it apart from a transient failure.
    fn past_the_end(&self) -> Option<Failure> {
        let object = &self.object;
        if self.end == 0 || object.etag.is_some() {
            return None;
        }
        let head = object.run(object.client.head(&object.key)).ok()?;
        (self.end >= head.size).then(|| {
            Failure::Permanent(format!(
                "offset {} is past the end of the object ({} bytes)",
                self.end, head.size
            ))
        })
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            let Some(body) = &mut self.body else {
                if self.end >= self.object.size {
                    return Ok(0);
                }
                self.request()?;
                continue;
            };
            match self.object.next_bytes(body) {
                Ok(Some(bytes)) => {
                    self.end += bytes.len() as u64;
                    self.chunk = bytes;
                    self.object.attempts.progressed();
                }
                Ok(None) if self.end >= self.object.size => {
                    self.body = None;
                    return Ok(0);
                }
                Ok(None) => {
                    self.body = None;
                    let cut = format!(
                        "the response ended at byte {} of {}",
                        self.end, self.object.size
                    );
                    self.object.failed(Failure::Transient(cut))?;
                }
                Err(failure) => {
                    self.body = None;
                    self.object.failed(failure)?;
                }
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

/// A remote object read by ranges (a Parquet file: its footer, then the
/// pages a read needs), each under `If-Match` with the ETag of the HEAD
/// that opened it.
#[cfg(feature = "parquet")]
pub(crate) struct RemoteFile {
    object: std::sync::Mutex<Object>,
    size: u64,
    etag: Option<String>,
}

#[cfg(feature = "parquet")]
impl RemoteFile {
    /// Opens `url` (a HEAD: its size and ETag).
    pub(crate) fn open(store: &Store, url: &str) -> io::Result<RemoteFile> {
        let mut object = Object::new(store, url, None)?;
        loop {
            let options = GetOptions {
                head: true,
                ..object.options(None)
            };
            match object.run(object.client.get_opts(&object.key, options)) {
                Ok(result) => {
                    object.saw(&result.meta);
                    break;
                }
                Err(failure) => object.failed(failure)?,
            }
        }
        Ok(RemoteFile {
            size: object.size,
            etag: object.etag.clone(),
            object: std::sync::Mutex::new(object),
        })
    }

    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    pub(crate) fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// The bytes of `range`, retrying transient failures from the byte a
    /// failed response reached.
    pub(crate) fn get(&self, range: std::ops::Range<u64>) -> io::Result<Bytes> {
        let mut object = self.object.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = bytes::BytesMut::new();
        let mut at = range.start;
        while at < range.end {
            let options = object.options(Some(GetRange::Bounded(at..range.end)));
            let got = object.run(object.client.get_opts(&object.key, options));
            let got = got.and_then(|response| {
                let mut body = response.into_stream();
                while let Some(bytes) = object.next_bytes(&mut body)? {
                    at += bytes.len() as u64;
                    out.extend_from_slice(&bytes);
                }
                Ok(())
            });
            match got {
                Ok(()) if at >= range.end => break,
                Ok(()) => {
                    let cut = format!("the response ended at byte {at} of {range:?}");
                    object.failed(Failure::Transient(cut))?;
                }
                Err(failure) => object.failed(failure)?,
            }
        }
        object.attempts.progressed();
        Ok(out.freeze())
    }
}
