//! Opening a file of lines at a byte offset of its content: a seek for a
//! plain file, a decompression from the start for gzip and zstd (chosen by
//! the extension), with the errors a resume reports against the state key
//! at fault; the file's identity at that offset, which a state saves; and
//! where to resume a file another rank began ([`Resumed`]); and a
//! reader's progress count ([`ReadTally`]).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// The state key of the file's name (the last part of its path).
pub(crate) const PATH: &str = "path";
/// The state key of the byte offset in the file's (decompressed) content.
pub(crate) const OFFSET: &str = "offset";
/// The state key of the file's identity at the offset.
pub(crate) const IDENTITY: &str = "identity";

/// The read buffer of a file.
const BUFFER: usize = 64 << 10;
/// The bytes before the offset that a file's identity digests.
const WINDOW: usize = 4 << 10;

/// What a state records of the file it is in, checked on restore: the
/// file's size on disk, an `mx64` digest of the (decompressed) bytes
/// before the offset (at most [`WINDOW`], and none before the start of
/// the zstd frame or gzip member that holds it), whether the offset starts
/// a line (is 0 or follows a `\n`), a remote object's ETag, and in a
/// compressed file where that frame or member starts, which a restore
/// decompresses from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Identity {
    pub(crate) size: u64,
    pub(crate) digest: String,
    pub(crate) line_start: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) frame: Option<Frame>,
}

/// Where a frame starts: its byte in the file, and the offset of its first
/// decompressed byte.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Frame {
    pub(crate) at: u64,
    pub(crate) offset: u64,
}

/// The starts of the frames decoded so far that a reader behind a buffer
/// may still be in: shared by the zstd decoder, which adds them, and the reader,
/// which asks which frame holds its offset.
#[derive(Debug, Default)]
pub(crate) struct FrameLog(Mutex<VecDeque<Frame>>);

impl FrameLog {
    #[cfg(any(feature = "gzip", feature = "zstd"))]
    pub(crate) fn push(&self, frame: Frame) {
        let mut log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A skippable or empty frame before: decompressing from it is
        // the same, so the earlier start is kept.
        if log.back().is_none_or(|last| last.offset < frame.offset) {
            log.push_back(frame);
        }
    }

    /// The frame that holds decompressed offset `offset` (the last to
    /// start at or before it); earlier ones are forgotten.
    pub(crate) fn holding(&self, offset: u64) -> Option<Frame> {
        let mut log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        while log.get(1).is_some_and(|next| next.offset <= offset) {
            log.pop_front();
        }
        log.front().copied().filter(|f| f.offset <= offset)
    }
}

#[cfg(any(feature = "gzip", feature = "zstd"))]
/// A source that counts the bytes consumed from it, from `count`.
pub(crate) struct Counted<R> {
    pub(crate) inner: R,
    pub(crate) count: u64,
}

#[cfg(any(feature = "gzip", feature = "zstd"))]
impl<R: BufRead> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

#[cfg(any(feature = "gzip", feature = "zstd"))]
impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.count += n as u64;
        self.inner.consume(n);
    }
}

/// Where the line readers open files: local paths, and URLs through a
/// [`Store`](crate::Store) (with the `object-store` feature).
#[derive(Clone, Debug, Default)]
pub(crate) struct Opener {
    #[cfg(feature = "object-store")]
    pub(crate) store: crate::Store,
}

/// A file's reader that keeps the last bytes it consumed (at most twice
/// [`WINDOW`], so the cost per byte stays constant), for the identity at
/// the current offset without reading the file again.
pub(crate) struct Tail {
    inner: Box<dyn BufRead + Send>,
    tail: Vec<u8>,
    size: u64,
    etag: Option<String>,
    /// The (decompressed) offset of the next byte.
    pos: u64,
    /// A zstd file's frame starts.
    frames: Option<Arc<FrameLog>>,
    /// Bytes of the stored file read so far, from its start (for progress).
    stored: Arc<AtomicU64>,
}

/// The bytes of an [`Identity`], copied when a state is taken and digested
/// only if the state is serialised or read: a state taken every batch
/// copies 4 KiB instead of hashing them. Serialises as the identity.
pub(crate) struct Window {
    size: u64,
    bytes: Vec<u8>,
    etag: Option<String>,
    frame: Option<Frame>,
}

impl Window {
    /// The identity whose bytes these are.
    fn identity(&self) -> Identity {
        let digest = nodes_core::__private::digest_bytes(&self.bytes);
        Identity {
            size: self.size,
            digest: format!("mx64:{digest:016x}"),
            line_start: self.bytes.last().is_none_or(|&b| b == b'\n'),
            etag: self.etag.clone(),
            frame: self.frame,
        }
    }
}

impl Serialize for Window {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.identity().serialize(s)
    }
}

impl Tail {
    /// The file's identity at the offset reached.
    pub(crate) fn identity(&self) -> Identity {
        self.deferred_identity().identity()
    }

    /// The file's identity at the offset reached, to be digested later: the
    /// bytes before the offset, at most [`WINDOW`] and none before the start
    /// of the zstd frame or gzip member that holds it (a restore reads from
    /// there).
    pub(crate) fn deferred_identity(&self) -> Window {
        let frame = self.frames.as_ref().and_then(|log| log.holding(self.pos));
        let since = frame.map_or(u64::MAX, |f| self.pos - f.offset);
        let len = WINDOW.min(usize::try_from(since).unwrap_or(usize::MAX));
        Window {
            size: self.size,
            bytes: self.tail[self.tail.len().saturating_sub(len)..].to_vec(),
            etag: self.etag.clone(),
            frame,
        }
    }

    /// The file's size as stored, and the bytes of it read so far (moving
    /// as the file is read), for a [`ReadTally`].
    pub(crate) fn stored(&self) -> (u64, Arc<AtomicU64>) {
        (self.size, Arc::clone(&self.stored))
    }
}

impl Read for Tail {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.fill_buf()?.read(buf)?;
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Tail {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        // The bytes consumed are still in the buffer: no I/O for `n > 0`.
        if n > 0
            && let Ok(buffer) = self.inner.fill_buf()
        {
            let end = n.min(buffer.len());
            let consumed = &buffer[end.saturating_sub(WINDOW)..end];
            if self.tail.len() + consumed.len() > 2 * WINDOW {
                self.tail.drain(..self.tail.len().saturating_sub(WINDOW));
            }
            self.tail.extend_from_slice(consumed);
        }
        self.pos += n as u64;
        self.inner.consume(n);
    }
}

/// The compression a file's extension says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

fn compression(path: &Path) -> Compression {
    match path.extension().and_then(|e| e.to_str()) {
        Some("gz") => Compression::Gzip,
        Some("zst" | "zstd") => Compression::Zstd,
        _ => Compression::None,
    }
}

/// A reader of the decompressed bytes of `file`, which starts at `start`
/// (a zstd file's frame starts go to `log`).
fn decompressed(
    file: impl Read + Send + 'static,
    kind: Compression,
    start: Frame,
    log: &Arc<FrameLog>,
) -> Result<Box<dyn BufRead + Send>, String> {
    #[cfg(not(any(feature = "gzip", feature = "zstd")))]
    let _ = (start, log); // no frames or members to start from
    let source = BufReader::with_capacity(BUFFER, file);
    match kind {
        Compression::None => Ok(Box::new(source)),
        #[cfg(feature = "gzip")]
        Compression::Gzip => {
            let members = super::gzip::Members::new(source, start, Arc::clone(log));
            Ok(Box::new(BufReader::with_capacity(BUFFER, members)))
        }
        #[cfg(not(feature = "gzip"))]
        Compression::Gzip => Err(not_compiled_in("gzip")),
        #[cfg(feature = "zstd")]
        Compression::Zstd => {
            let frames = super::zstd::Frames::new(source, start, Arc::clone(log))?;
            Ok(Box::new(BufReader::with_capacity(BUFFER, frames)))
        }
        #[cfg(not(feature = "zstd"))]
        Compression::Zstd => Err(not_compiled_in("zstd")),
    }
}

/// Why a `kind` file cannot be read: its feature is off.
#[cfg(not(all(feature = "gzip", feature = "zstd")))]
fn not_compiled_in(kind: &str) -> String {
    format!(
        "a {kind} file, and {kind} support is not compiled in: enable the `{kind}` feature of nodes-std"
    )
}

/// Why a saved position cannot be reopened: the key it is about, and what.
pub(crate) struct Reopen(pub(crate) &'static str, pub(crate) String);

/// Opens `path` at byte `offset` of its (decompressed) content: a seek
/// (a ranged read for an object) to the identity's window before it for a
/// plain file, a decompression from the start of the frame (zstd) or
/// member (gzip) that holds it when the `saved` identity names it, from
/// the file's start otherwise; the bytes up to `offset` are read through the
/// [`Tail`]. An object must still have the `saved` ETag.
pub(crate) fn open_at(
    opener: &Opener,
    path: &Path,
    offset: u64,
    saved: Option<&Identity>,
) -> std::result::Result<Tail, Reopen> {
    let open = |e: io::Error| Reopen(PATH, format!("cannot open: {e}"));
    let kind = compression(path);
    // Where reading starts: a byte of the file, and the decompressed
    // offset there.
    let start = match kind {
        Compression::None => {
            let at = offset.saturating_sub(WINDOW as u64);
            Frame { at, offset: at }
        }
        Compression::Zstd | Compression::Gzip => saved
            .and_then(|i| i.frame)
            .filter(|f| f.offset <= offset)
            .unwrap_or_default(),
    };
    let etag = saved.and_then(|i| i.etag.as_deref());
    let (raw, size, etag): Raw = if is_remote(path) {
        remote(opener, path, start.at, etag)?
    } else {
        let mut file = File::open(path).map_err(open)?;
        let size = file.metadata().map_err(open)?.len();
        if kind == Compression::None && offset > size {
            return Err(past_the_end(offset, "file", size));
        }
        file.seek(SeekFrom::Start(start.at))
            .map_err(|e| Reopen(OFFSET, format!("cannot seek to byte {}: {e}", start.at)))?;
        (Box::new(file), size, None)
    };
    let log = Arc::new(FrameLog::default());
    let stored = Arc::new(AtomicU64::new(start.at));
    let raw = Stored(raw, Arc::clone(&stored));
    let inner = decompressed(raw, kind, start, &log).map_err(|m| match start.at {
        0 => Reopen(PATH, m),
        at => Reopen(
            IDENTITY,
            format!("no frame or member starts at byte {at}: {m}"),
        ),
    })?;
    let mut reader = Tail {
        inner,
        tail: Vec::with_capacity(2 * WINDOW),
        size,
        etag,
        pos: start.offset,
        frames: (kind != Compression::None).then_some(log),
        stored,
    };
    let mut skip = (&mut reader).take(offset - start.offset);
    io::copy(&mut skip, &mut io::sink())
        .map_err(|e| Reopen(OFFSET, format!("cannot read up to offset {offset}: {e}")))?;
    match reader.pos {
        read if read < offset => Err(past_the_end(offset, "decompressed file", read)),
        _ => Ok(reader),
    }
}

/// A stored file's bytes, counted into the second field as they are read.
struct Stored<R>(R, Arc<AtomicU64>);

impl<R: Read> Read for Stored<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1.fetch_add(n as u64, Relaxed);
        Ok(n)
    }
}

/// A file reader's count of its pass, for [`Epoch::progress`](crate::Epoch::progress):
/// the files it finished since its reset and the open one's size and bytes
/// read, which that file's reader moves.
#[derive(Debug, Default)]
pub(crate) struct ReadTally(Mutex<Reading>);

#[derive(Debug, Default)]
struct Reading {
    finished: u64,
    finished_bytes: u64,
    open: Option<(u64, Arc<AtomicU64>)>,
    /// Between asking the source for a file and opening it.
    pulling: bool,
}

/// A reader asking its source for a file: until it opens one (or this is
/// dropped), its tally says so, and the file the listing hands out does
/// not count as done.
pub(crate) struct Pulling(Arc<ReadTally>);

impl Drop for Pulling {
    fn drop(&mut self) {
        self.0.reading().pulling = false;
    }
}

impl ReadTally {
    fn reading(&self) -> std::sync::MutexGuard<'_, Reading> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// About to ask the source for a file (see [`Pulling`]).
    pub(crate) fn pulling(self: &Arc<Self>) -> Pulling {
        self.reading().pulling = true;
        Pulling(Arc::clone(self))
    }

    /// A file of `size` bytes opened, `read` of them read so far.
    pub(crate) fn opened(&self, (size, read): (u64, Arc<AtomicU64>)) {
        let mut reading = self.reading();
        reading.open = Some((size, read));
        reading.pulling = false;
    }

    /// The open file, if any, is done with (ended, or failed).
    pub(crate) fn closed(&self) {
        let mut reading = self.reading();
        if let Some((size, _)) = reading.open.take() {
            reading.finished += 1;
            reading.finished_bytes += size;
        }
    }

    /// A reset: nothing read yet.
    pub(crate) fn restart(&self) {
        *self.reading() = Reading::default();
    }
}

impl nodes_core::Tally for ReadTally {
    fn count(&self, _shard: Option<(u64, u64)>) -> nodes_core::Count {
        let reading = self.reading();
        let (open_size, open_read) = reading
            .open
            .as_ref()
            .map_or((0, 0), |(size, read)| (*size, read.load(Relaxed)));
        nodes_core::Count {
            finished_files: reading.finished,
            finished_bytes: reading.finished_bytes,
            open_files: u64::from(reading.open.is_some()),
            open_size,
            open_read,
            pulling: u64::from(reading.pulling),
            ..nodes_core::Count::default()
        }
    }
}

/// A file's bytes from where it was opened, its size and (for an object)
/// its ETag.
type Raw = (Box<dyn Read + Send>, u64, Option<String>);

/// Whether `path` names a remote object (`scheme://...`).
pub(crate) fn is_remote(path: &Path) -> bool {
    path.to_str()
        .and_then(|s| s.split_once("://"))
        .is_some_and(|(scheme, _)| {
            !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// Opens the remote object `path` at byte `start`: its reader, size and
/// ETag.
#[cfg(feature = "object-store")]
fn remote(opener: &Opener, path: &Path, start: u64, etag: Option<&str>) -> Result<Raw, Reopen> {
    use super::remote::{ObjectReader, is_changed};
    let url = path.to_str().unwrap_or_default();
    let object = ObjectReader::open(&opener.store, url, start, etag).map_err(|e| {
        let key = if is_changed(&e) { IDENTITY } else { PATH };
        Reopen(key, format!("cannot open: {e}"))
    })?;
    let (size, etag) = (object.size(), object.etag().map(str::to_owned));
    Ok((Box::new(object), size, etag))
}

#[cfg(not(feature = "object-store"))]
fn remote(_: &Opener, path: &Path, _: u64, _: Option<&str>) -> Result<Raw, Reopen> {
    Err(Reopen(
        PATH,
        format!(
            "`{}` is a URL, and object store support is not compiled in: enable the `object-store` feature of nodes-std",
            path.display()
        ),
    ))
}

/// An offset beyond the `len` bytes of `what`.
fn past_the_end(offset: u64, what: &str, len: u64) -> Reopen {
    Reopen(
        OFFSET,
        format!(
            "offset {offset} is past the end of the {what} ({len} bytes): the file changed since the state was saved"
        ),
    )
}

/// Opens `file` at `offset` if it is still the file a state named: its
/// name is `name` (else the error is `misnamed`'s), and its identity there
/// is `identity`. The error names the state key at fault.
pub(crate) fn reopen(
    opener: &Opener,
    file: &Path,
    name: &str,
    offset: u64,
    identity: Option<&Identity>,
    misnamed: impl FnOnce() -> String,
) -> std::result::Result<Tail, Reopen> {
    if file.file_name() != Some(std::ffi::OsStr::new(name)) {
        return Err(Reopen(PATH, misnamed()));
    }
    let reader = open_at(opener, file, offset, identity)?;
    let now = reader.identity();
    if identity == Some(&now) {
        return Ok(reader);
    }
    Err(Reopen(
        IDENTITY,
        format!(
            "the file changed since the state was saved: at offset {offset} it is {now:?}, the state has {identity:?}; resuming would deliver other data: restore over the files the state was taken over, or start a new run"
        ),
    ))
}

/// A file another rank began, to be read from where it stopped: the next
/// file pulled must have this name and identity (see
/// [`elastic`](crate::elastic)). A reshard puts them first in this rank's
/// plan, so they are the first files pulled, in this order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Resumed {
    pub(crate) path: String,
    pub(crate) offset: u64,
    pub(crate) line: u64,
    pub(crate) identity: Identity,
    /// Items past the offset that the other rank's threaded node delivered:
    /// read again and passed over.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) skip: u64,
    /// Later items it delivered ahead of a gap (an out-of-order
    /// `par_map`), by their count from the offset: passed over too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) ahead: Vec<u64>,
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl crate::sources::reader::Passing for Resumed {
    fn passing(&self) -> (u64, &[u64]) {
        (self.skip, &self.ahead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodes_core::Tally;

    #[test]
    fn a_reader_between_files_says_so_until_it_opens_one() {
        let tally = Arc::new(ReadTally::default());
        let pulling = tally.pulling();
        assert_eq!(tally.count(None).pulling, 1);
        tally.opened((10, Arc::new(AtomicU64::new(4))));
        let count = tally.count(None);
        assert_eq!(
            (count.pulling, count.open_files, count.open_read),
            (0, 1, 4)
        );
        drop(pulling);
        tally.closed();
        // A pull that found no file ends with its guard.
        drop(tally.pulling());
        let count = tally.count(None);
        assert_eq!((count.pulling, count.open_files), (0, 0));
        assert_eq!((count.finished_files, count.finished_bytes), (1, 10));
    }

    /// Run by CI without nodes-std's features (`cargo test -p nodes-std --lib`).
    #[cfg(not(all(feature = "gzip", feature = "zstd")))]
    #[test]
    fn compressed_files_without_their_feature_are_errors_naming_it() {
        use crate::prelude::*;
        let dir = std::env::temp_dir().join(format!("nodes-no-feature-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut files = vec![("a.txt", None)];
        if cfg!(not(feature = "gzip")) {
            files.push(("b.txt.gz", Some("gzip")));
        }
        if cfg!(not(feature = "zstd")) {
            files.push(("c.txt.zst", Some("zstd")));
        }
        for (name, _) in &files {
            std::fs::write(dir.join(name), "plain\n").unwrap();
        }
        let items: Vec<_> = (crate::Files::in_dir(&dir).unwrap().read_lines().start())
            .unwrap()
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(items.len(), files.len());
        for (item, (name, feature)) in items.iter().zip(&files) {
            match (item, feature) {
                (Ok(line), None) => assert_eq!(line, "plain"),
                (Err(e), Some(feature)) => {
                    let text = e.to_string();
                    let why = format!(
                        "{feature} support is not compiled in: enable the `{feature}` feature"
                    );
                    assert!(text.contains(&why) && text.contains(name), "{text}");
                }
                _ => panic!("{name}: {item:?}"),
            }
        }
    }
}
