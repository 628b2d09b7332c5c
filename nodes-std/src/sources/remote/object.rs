//! Reading one remote object: [`ObjectReader`] streams it from a byte
//! offset to its end (the line readers), [`RemoteFile`] reads the ranges
//! asked for (Parquet). Every request after the first carries `If-Match`
//! with the ETag the first one saw, and a transient failure resumes at the
//! byte where it broke (see [`Retry`](super::Retry)).

use std::collections::VecDeque;
use std::io::{self, Read};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt};
use object_store::path::Path as Key;
use object_store::{GetOptions, GetRange, GetResult, ObjectStore, ObjectStoreExt};
use tokio::task::JoinHandle;

use super::{Attempts, Connection, Failure, ReadAhead, Store};

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
            attempts: Attempts::new(&store.retry),
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
        let within = self.attempts.retry.within(future);
        self.connection.runtime.block_on(within)
    }

    /// Sends `options` until a response comes, retrying transient failures,
    /// and notes its size and ETag: the first response's are the object's;
    /// a later one is under `If-Match`, so they agree. `at` is the first
    /// byte asked for.
    fn get(&mut self, options: GetOptions, at: u64) -> io::Result<GetResult> {
        loop {
            match self.run(self.client.get_opts(&self.key, options.clone())) {
                Ok(result) => {
                    self.size = result.meta.size;
                    if self.etag.is_none() {
                        self.etag = result.meta.e_tag.clone();
                    }
                    return Ok(result);
                }
                Err(failure) => {
                    let failure = self.past_the_end(at).unwrap_or(failure);
                    self.failed(failure)?;
                }
            }
        }
    }

    /// A first request from past the object's end (a restore into a
    /// shorter object without an ETag) fails without saying so: a HEAD
    /// tells it apart from a transient failure.
    fn past_the_end(&self, at: u64) -> Option<Failure> {
        if at == 0 || self.etag.is_some() {
            return None;
        }
        let size = self.run(self.client.head(&self.key)).ok()?.size;
        let past = format!("offset {at} is past the end of the object ({size} bytes)");
        (at >= size).then_some(Failure::Permanent(past))
    }

    /// Receives `range` in one request (no retry), each wait within the
    /// retry's timeout: what came, and the failure that cut it short.
    fn receive(&self, range: Range<u64>) -> impl Future<Output = Fetched> + Send + 'static {
        let (client, key) = (Arc::clone(&self.client), self.key.clone());
        let retry = self.attempts.retry.clone();
        let options = self.options(Some(GetRange::Bounded(range.clone())));
        async move {
            let mut parts = Vec::new();
            let mut at = range.start;
            let received = async {
                let response = retry.within(client.get_opts(&key, options)).await?;
                let mut body = response.into_stream();
                while let Some(bytes) = retry.within(body.next().map(Option::transpose)).await? {
                    at += bytes.len() as u64;
                    parts.push(bytes);
                }
                if at < range.end {
                    let cut = format!("the response ended at byte {at} of {range:?}");
                    return Err(Failure::Transient(cut));
                }
                Ok(())
            };
            let failure = received.await.err();
            (parts, failure)
        }
    }

    /// After a failed attempt: `Ok` once it is time for another.
    fn failed(&mut self, failure: Failure) -> io::Result<()> {
        self.attempts.failed(&self.url, failure)
    }
}

/// A remote object's bytes from an offset to its end. The response that
/// opens it streams while the reader parses (the HTTP client receives it
/// on the runtime's thread); past its first [`read_ahead`] bytes, ranged
/// GETs of that size run ahead of the reader, a bounded number at once
/// (see [`Store::read_ahead`]). A failed response, streamed or ranged, is
/// asked again from the byte it reached.
///
/// [`read_ahead`]: super::ReadAhead
pub(crate) struct ObjectReader {
    object: Object,
    read_ahead: ReadAhead,
    /// A response streaming from `end`, up to `stream_end`.
    body: Option<BoxStream<'static, object_store::Result<Bytes>>>,
    /// Where the streamed bytes stop: the object's end, or where the ranges
    /// read ahead take over.
    stream_end: u64,
    /// The received bytes, to read next.
    parts: VecDeque<Bytes>,
    /// The ranges read ahead, in order, each received on the runtime.
    ahead: VecDeque<(Range<u64>, JoinHandle<Fetched>)>,
    chunk: Bytes,
    /// The object's offset just past `chunk`.
    end: u64,
}

/// What a range read ahead received, and the failure that cut it short.
type Fetched = (Vec<Bytes>, Option<Failure>);

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
            read_ahead: store.read_ahead,
            body: None,
            stream_end: u64::MAX,
            parts: VecDeque::new(),
            ahead: VecDeque::new(),
            chunk: Bytes::new(),
            end: start,
        };
        reader.request()?;
        let size = reader.object.size;
        reader.stream_end = match reader.read_ahead.requests {
            0 => size,
            _ => size.min(start.saturating_add(reader.read_ahead.bytes)),
        };
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

    /// Requests the object from `end` up to `stream_end`, retrying
    /// transient failures.
    fn request(&mut self) -> io::Result<()> {
        // No range from 0: an empty object has no satisfiable range.
        let range = match self.stream_end {
            end if end < self.object.size => Some(GetRange::Bounded(self.end..end)),
            _ => (self.end > 0).then_some(GetRange::Offset(self.end)),
        };
        let options = self.object.options(range);
        self.body = Some(self.object.get(options, self.end)?.into_stream());
        Ok(())
    }

    /// Starts ranges ahead until as many run as the store allows: the first
    /// where the streamed bytes stop, each next one after the last.
    fn read_ahead(&mut self) {
        let ReadAhead { requests, bytes } = self.read_ahead;
        let mut next = self.ahead.back().map_or(self.stream_end, |(r, _)| r.end);
        while self.ahead.len() < requests && next < self.object.size {
            let range = next..self.object.size.min(next + bytes);
            next = range.end;
            let runtime = &self.object.connection.runtime;
            self.ahead
                .push_back((range.clone(), runtime.spawn(self.object.receive(range))));
        }
    }

    /// Puts the next bytes in `chunk`; `false` at the object's end.
    fn fill(&mut self) -> io::Result<bool> {
        loop {
            if let Some(part) = self.parts.pop_front() {
                // An empty chunk handed to `read` would end the object early.
                if part.is_empty() {
                    continue;
                }
                self.end += part.len() as u64;
                self.chunk = part;
                return Ok(true);
            }
            if self.end < self.stream_end.min(self.object.size) {
                let Some(body) = &mut self.body else {
                    self.request()?;
                    continue;
                };
                let failure = match self.object.run(body.next().map(Option::transpose)) {
                    Ok(Some(mut bytes)) => {
                        bytes.truncate((self.stream_end - self.end).min(bytes.len() as u64) as usize);
                        self.parts.push_back(bytes);
                        self.object.attempts.progressed();
                        self.read_ahead();
                        continue;
                    }
                    Ok(None) => Failure::Transient(format!(
                        "the response ended at byte {} of {}",
                        self.end, self.object.size
                    )),
                    Err(failure) => failure,
                };
                self.body = None;
                self.object.failed(failure)?;
                continue;
            }
            // The streamed bytes are read: the rest of a response that
            // streamed past them is not.
            self.body = None;
            let Some((range, task)) = self.ahead.pop_front() else {
                return Ok(false);
            };
            let joined = self.object.connection.runtime.block_on(task);
            let (parts, failure) = joined.unwrap_or_else(|e| {
                let failure = Failure::Transient(format!("a read ahead failed: {e}"));
                (Vec::new(), Some(failure))
            });
            // What the range did not receive streams next, after its parts.
            self.stream_end = range.end;
            self.parts.extend(parts);
            match failure {
                Some(failure) => self.object.failed(failure)?,
                None => self.object.attempts.progressed(),
            }
            self.read_ahead();
        }
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.chunk.is_empty() && !self.fill()? {
            return Ok(0);
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

impl Drop for ObjectReader {
    fn drop(&mut self) {
        // Ranges read ahead for nobody stop, rather than finish unread.
        for (_, task) in &self.ahead {
            task.abort();
        }
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
        let mut head = object.options(None);
        head.head = true;
        object.get(head, 0)?;
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
            let (parts, failure) = object
                .connection
                .runtime
                .block_on(object.receive(at..range.end));
            for part in parts {
                at += part.len() as u64;
                out.extend_from_slice(&part);
            }
            match failure {
                Some(failure) => object.failed(failure)?,
                None => break,
            }
        }
        object.attempts.progressed();
        Ok(out.freeze())
    }
}
