//! [`ReadLines`] and [`ReadJsonl`]: the lines, or the JSON records, of each
//! file of a node of paths, restored by seeking to a byte offset.

use std::fmt;
use std::io::{self, BufRead, Read};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::de::StrRead;

use crate::policy::{ErrorPolicy, is_bad_record};
use crate::sources::open::{
    IDENTITY, Identity, OFFSET, PATH, Reopen, Resumed, Tail, open_at, reopen,
};
use crate::sources::reader::{FileSource, Saved, file_reader_builders};
use crate::sources::record::record_error;
use crate::{Cx, Description, Error, Node, NodeId, NodeName, Result, State, Stateful};

/// The longest line read by default: 16 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 << 20;

/// How a line becomes an item.
trait Decode {
    type Item;
    /// The item, `Ok(None)` for a line that is not a record, `Err` with what
    /// is wrong.
    fn decode(&self, line: &[u8]) -> std::result::Result<Option<Self::Item>, String>;
}

/// The state key of the lines read.
const LINE: &str = "line";

/// What [`ReadLines`] and [`ReadJsonl`] share: the source of paths, the
/// open file and the position in it.
struct LineReader<S, D> {
    files: FileSource<S, Resumed>,
    /// The file being read, and its source's state from before it was
    /// pulled, which the state saves: a restore pulls the file again.
    open: Option<(Tail, State)>,
    /// Its path.
    path: Option<PathBuf>,
    /// Bytes of the current (decompressed) file consumed.
    offset: u64,
    /// Lines of the current file consumed.
    line: u64,
    max_line_bytes: usize,
    buf: Vec<u8>,
    /// How a line becomes an item.
    decode: D,
}

/// Reads one line of at most `max` bytes (its `\n` or `\r\n` not counted)
/// into `buf`; a longer one is skipped without holding it in memory.
/// Returns the bytes consumed and whether the line fit, or `None` at the
/// end of the file.
fn read_line(
    reader: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Option<(u64, bool)>> {
    buf.clear();
    let limit = (max as u64).saturating_add(2);
    let n = (&mut *reader).take(limit).read_until(b'\n', buf)? as u64;
    if n == 0 {
        return Ok(None);
    }
    let ended = buf.last() == Some(&b'\n');
    if ended {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    // Ended, or the last line of the file, without an end.
    if ended || n < limit {
        return Ok(Some((n, buf.len() <= max)));
    }
    // Too long: skip to the end of the line, holding none of it.
    buf.clear();
    let rest = reader.skip_until(b'\n')? as u64;
    Ok(Some((n + rest, false)))
}

/// A reader's own fields of a state (see [`ReadLines`]' `# State`): the
/// position is the offset and the line.
type Fields = Saved<Resumed, Identity, (u64, u64)>;

impl<S, D> LineReader<S, D> {
    fn new(name: &'static str, source: S, decode: D) -> Self {
        LineReader {
            files: FileSource::new(name, source),
            open: None,
            path: None,
            offset: 0,
            line: 0,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            buf: Vec::new(),
            decode,
        }
    }

    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result
    where
        S: fmt::Debug,
    {
        f.debug_struct(self.files.name)
            .field("source", &self.files.source)
            .field("path", &self.path)
            .field("offset", &self.offset)
            .field("line", &self.line)
            .field("on_error", &self.files.budget.policy())
            .finish_non_exhaustive()
    }

    /// A bad record at `line` of the current file.
    fn bad_line(&self, line: u64, message: String) -> Error {
        let path = self.path.as_deref().unwrap_or(Path::new(""));
        record_error(self.files.name, path, Some(line), message)
    }

    /// Forgets the current file (ended, or failed): the position is then
    /// 0, as it is whenever no file is open. Items still to pass over are
    /// none: the file was checked to be the one another rank read, so they
    /// lie past its end (a last, short batch counted whole).
    fn close(&mut self) {
        self.files.pass_over(0, &[]);
        self.files.tally.closed();
        self.open = None;
        self.path = None;
        self.offset = 0;
        self.line = 0;
    }
}

impl<S, D: Decode> LineReader<S, D>
where
    S: Node,
    S::Item: AsRef<Path>,
{
    /// Puts the next line in `buf`: `Ok(Some(()))`, or `Ok(None)` at the end
    /// of the pass, or an error (a bad record or one from the source).
    fn advance(&mut self, cx: &mut Cx) -> Result<Option<()>> {
        let name = self.files.name;
        loop {
            if let Some((reader, _)) = &mut self.open {
                match read_line(reader, &mut self.buf, self.max_line_bytes) {
                    Ok(Some((n, fits))) => {
                        // Saturating: a restored state may hold any count.
                        self.offset = self.offset.saturating_add(n);
                        self.line = self.line.saturating_add(1);
                        if fits {
                            return Ok(Some(()));
                        }
                        let message = format!("line longer than {} bytes", self.max_line_bytes);
                        return Err(self.bad_line(self.line, message));
                    }
                    Ok(None) => self.close(),
                    #[cfg(feature = "zstd")]
                    Err(e) if super::zstd::is_damaged(&e) => {
                        let path = self.path.take().unwrap_or_default();
                        let err = Error::user(name, None, format!("{}: {e}", path.display()));
                        self.close();
                        self.files.unskippable = true;
                        return Err(err);
                    }
                    Err(e) => {
                        // The file is in no known state: go on with the next.
                        let message = format!("cannot read: {e}");
                        let err = self.bad_line(self.line + 1, message);
                        self.close();
                        return Err(err);
                    }
                }
            }
            let Some((item, before, _pulling)) = self.files.pull(cx)? else {
                return Ok(None);
            };
            let path = item.as_ref();
            if path.to_str().is_none() {
                let message = "the path is not UTF-8 (a state stores paths as text)";
                return Err(record_error(name, path, None, message.to_owned()));
            }
            // No file was open, so `offset` and `line` are 0 (see `close`).
            let reader = match self.files.resume_at.pop_front() {
                None => open_at(&self.files.opener, path, 0, None)
                    .map_err(|Reopen(_, message)| record_error(name, path, None, message))?,
                Some(at) => {
                    let reader = self.open_resumed(path, &at).inspect_err(|_| {
                        // Its saved lines cannot be told from others: no skip.
                        self.files.unskippable = true;
                    })?;
                    (self.offset, self.line) = (at.offset, at.line);
                    self.files.pass_over(at.skip, &at.ahead);
                    reader
                }
            };
            self.files.tally.opened(reader.stored());
            self.open = Some((reader, before));
            self.path = Some(path.to_owned());
            // A threaded node above then counts items of one file only.
            cx.request_snapshot();
        }
    }

    /// Opens `path` where another rank stopped reading it, if it is that
    /// file: the same name, and the same identity at the offset.
    fn open_resumed(&self, path: &Path, at: &Resumed) -> Result<Tail> {
        let name = self.files.name;
        let fail = |why: String| {
            let why = format!(
                "{name} cannot resume in `{}` where another rank stopped (offset {}): {why}",
                path.display(),
                at.offset
            );
            record_error(name, path, None, why)
        };
        let misnamed = || {
            format!(
                "the reshard dealt `{}` here: the file list changed",
                at.path
            )
        };
        let identity = Some(&at.identity);
        reopen(
            &self.files.opener,
            path,
            &at.path,
            at.offset,
            identity,
            misnamed,
        )
        .map_err(|Reopen(_, why)| fail(why))
    }

    /// The next item decoded by `D`, under the error policy.
    fn next_item(&mut self, cx: &mut Cx) -> Result<Option<D::Item>> {
        self.files.flag.check(self.files.name)?;
        loop {
            let item = self.next_one(cx);
            let made = match &item {
                Ok(made) => made.is_some(),
                Err(e) => is_bad_record(e),
            };
            // Another rank delivered it (see `Resumed::skip`).
            if !(made && self.files.passes()) {
                return item;
            }
        }
    }

    /// The next item, whatever `skip` says.
    fn next_one(&mut self, cx: &mut Cx) -> Result<Option<D::Item>> {
        while !self.files.budget.ended() {
            let made = self.decoded(cx);
            if let Some(item) = self.files.judge(made, cx) {
                return item;
            }
        }
        Ok(None)
    }

    /// The next line that is a record, decoded.
    fn decoded(&mut self, cx: &mut Cx) -> Result<Option<D::Item>> {
        while self.advance(cx)?.is_some() {
            match self.decode.decode(&self.buf) {
                Ok(None) => {}
                item => return item.map_err(|message| self.bad_line(self.line, message)),
            }
        }
        Ok(None)
    }
}

impl<S: Node, D> LineReader<S, D> {
    /// The reader's own fields of `state`, checked.
    fn checked_fields(&self, state: &State) -> Result<Fields> {
        let name = self.files.name;
        if !state.contains(IDENTITY) {
            return Err(Error::bad_state(
                state.path_of(IDENTITY),
                format!(
                    "{name}: the state has no file identity: it predates identity checks, without which a changed file would resume silently; start a new run"
                ),
            ));
        }
        let saved: Fields = self.files.fields(state, [OFFSET, LINE])?;
        let (offset, line) = saved.at;
        let stray = offset != 0 || line != 0 || saved.identity.is_some();
        match &saved.path {
            // Which of the fields is wrong cannot be told: name the node's
            // state, which holds them all.
            None if stray => Err(Error::bad_state(
                state.path().to_owned(),
                format!(
                    "{name}: an offset ({offset}), line ({line}) or identity without a file (`{PATH}` is null)"
                ),
            )),
            Some(_) if saved.identity.is_none() => Err(Error::bad_state(
                state.path_of(IDENTITY),
                format!("{name}: a file without an identity (`{IDENTITY}` is null)"),
            )),
            Some(_) if line > offset => Err(Error::bad_state(
                state.path_of(LINE),
                format!("{name}: {line} lines cannot fit in the {offset} bytes before the offset"),
            )),
            _ => Ok(saved),
        }
    }

    /// Checks `state` without applying it: the file is checked when the
    /// restore pulls it again.
    fn check_state(&self, state: &State) -> Result<()> {
        let saved = self.checked_fields(state)?;
        self.files.budget.load(state)?;
        self.files.source.check_state(&saved.source)
    }

    /// Reopens `file`, the file the source yields again, at the saved
    /// offset, if it is still the file (by name and identity) the state
    /// was taken in.
    fn reopen(&self, state: &State, file: Option<&Path>, saved: &Fields) -> Result<Tail> {
        let (name, path) = (self.files.name, saved.path.as_deref().unwrap_or_default());
        let Some(file) = file else {
            let why = format!("{name} is in `{path}`, but its source, restored, yields no file");
            return Err(Error::bad_state(state.path_of(PATH), why));
        };
        // Why the file cannot be resumed in, at the key at fault.
        let reopen_error = |Reopen(key, why)| {
            let why = format!("{name} cannot resume in `{}`: {why}", file.display());
            Error::bad_state(state.path_of(key), why)
        };
        let misnamed = || {
            format!(
                "the state is in a file named `{path}`: its source's state is not from before that file"
            )
        };
        let (opener, identity) = (&self.files.opener, saved.identity.as_ref());
        reopen(opener, file, path, saved.at.0, identity, misnamed).map_err(reopen_error)
    }

    fn reset(&mut self, state: Option<&State>) -> Result<()>
    where
        S::Item: AsRef<Path>,
    {
        self.files.replayable()?;
        let Some(state) = state else {
            self.close();
            return self.files.restart();
        };
        let mut saved = self.checked_fields(state)?;
        let counts = self.files.budget.load(state)?;
        self.close();
        let resume_at = std::mem::take(&mut saved.resume_at);
        let mut replay = self.files.restore(counts, &saved.source, resume_at)?;
        if saved.path.is_some() {
            // Pull the file the state is in again.
            let item = replay.next()?;
            let file = item.as_ref().map(AsRef::as_ref);
            let reader = self.reopen(state, file, &saved)?;
            self.path = file.map(Path::to_path_buf);
            self.files.tally.opened(reader.stored());
            self.open = Some((reader, saved.source));
            self.files.pass_over(saved.passing.0, &saved.passing.1);
        }
        (self.offset, self.line) = saved.at;
        self.files.flag.mark();
        Ok(())
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        let open = self.open.as_ref();
        let before = open.map(|(_, before)| before).zip(self.path.as_deref());
        self.files.save(cx, before, |out| {
            out.insert(OFFSET, self.offset)?;
            out.insert(LINE, self.line)?;
            let identity = open.map(|(reader, _)| reader.deferred_identity());
            out.insert_deferred(IDENTITY, std::sync::Arc::new(identity));
            Ok(())
        })
    }

    fn describe(&self) -> Description {
        let max_line_bytes = self.max_line_bytes as u64;
        self.files
            .describe(|desc| desc.param("max_line_bytes", max_line_bytes))
    }
}

/// The lines of a file, as `String`s.
struct Text;

impl Decode for Text {
    type Item = String;

    fn decode(&self, line: &[u8]) -> std::result::Result<Option<String>, String> {
        utf8(line).map(|text| Some(text.to_owned()))
    }
}

/// The line as text, or what is wrong with it.
fn utf8(line: &[u8]) -> std::result::Result<&str, String> {
    std::str::from_utf8(line)
        .map_err(|e| format!("invalid UTF-8 at byte {} of the line", e.valid_up_to()))
}

/// The lines of a file, as JSON values made by `F` from the line's
/// deserializer ([`Typed`] for a `T`).
struct Json<F>(F);

/// Deserialises a `T`.
type Typed<T> = for<'a> fn(&mut serde_json::Deserializer<StrRead<'a>>) -> serde_json::Result<T>;

fn typed<T: DeserializeOwned>(
    json: &mut serde_json::Deserializer<StrRead<'_>>,
) -> serde_json::Result<T> {
    T::deserialize(json)
}

impl<F, T> Decode for Json<F>
where
    F: for<'a> Fn(&mut serde_json::Deserializer<StrRead<'a>>) -> serde_json::Result<T>,
{
    type Item = T;

    fn decode(&self, line: &[u8]) -> std::result::Result<Option<T>, String> {
        let text = utf8(line)?;
        if text.trim().is_empty() {
            return Ok(None);
        }
        let mut json = serde_json::Deserializer::from_str(text);
        let record = (self.0)(&mut json);
        record
            .and_then(|record| json.end().map(|()| Some(record)))
            .map_err(|e| {
                // serde_json's position is in a one-line input: keep the column.
                let message = e.to_string();
                let message = match message.rsplit_once(" at line ") {
                    Some((what, _)) => what.to_owned(),
                    None => message,
                };
                let what = match e.classify() {
                    serde_json::error::Category::Data => "JSON that does not fit the record type",
                    _ => "invalid JSON",
                };
                match e.column() {
                    0 => format!("{what}: {message}"),
                    column => format!("{what} at column {column}: {message}"),
                }
            })
    }
}

macro_rules! reader_node {
    ($ty:ident [$($gen:ident),*] $item:ty, $name:literal, $($bound:tt)*) => {
        impl<S $(, $gen)*> $ty<S $(, $gen)*> {
            /// Sets the longest line read, in bytes (without its end of
            /// line); a longer line is a bad record, skipped without holding
            /// it in memory. The default is [`DEFAULT_MAX_LINE_BYTES`] (16
            /// MiB).
            ///
            /// # Errors
            /// [`Error::InvalidArgument`] for 0.
            pub fn max_line_bytes(mut self, max: usize) -> Result<Self> {
                crate::transforms::require(max > 0, $name, "max_line_bytes must be positive")?;
                self.inner.max_line_bytes = max;
                Ok(self)
            }

            /// The policy for bad records.
            pub fn error_policy(&self) -> ErrorPolicy {
                self.inner.files.budget.policy()
            }
        }

        file_reader_builders!($ty [$($gen),*]);

        impl<S: fmt::Debug $(, $gen)*> fmt::Debug for $ty<S $(, $gen)*> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.inner.debug(f)
            }
        }

        impl<S $(, $gen)*> NodeName for $ty<S $(, $gen)*> {
            const NAME: &'static str = $name;
        }

        impl<S $(, $gen)*> Node for $ty<S $(, $gen)*>
        where
            S: Node,
            S::Item: AsRef<Path>,
            $($bound)*
        {
            type Item = $item;

            fn next(&mut self, cx: &mut Cx) -> Result<Option<$item>> {
                cx.observe(NodeId::of(self), $name, |cx| self.inner.next_item(cx))
            }
        }

        impl<S: Node $(, $gen)*> Stateful for $ty<S $(, $gen)*>
        where
            S::Item: AsRef<Path>,
            $($bound)*
        {
            crate::delegate::delegate_stateful!(inner: check_state, reset, get_state, describe);

            fn shutdown(&mut self) {
                self.inner.files.shutdown();
            }
        }
    };
}

/// This struct is created by [`NodeExt::read_lines`](crate::NodeExt::read_lines).
/// See its documentation for more.
///
/// The lines of each file its source names, in turn, as `String`s without
/// their end of line (`\n` or `\r\n`); a last line without an end is a line.
/// One file is open at a time, read through a 64 KiB buffer, one line in
/// memory at a time.
///
/// Files ending in `.gz` are read as gzip (all members) with the `gzip`
/// feature, files ending in `.zst` or `.zstd` as zstd with the `zstd`
/// feature (every frame, skippable frames passed over); without the
/// feature such a file is a bad record. A zstd frame's content checksum is
/// verified at the frame's end: a mismatch, a frame that cannot be
/// decoded, or bytes after a frame that start no frame is an `Err` naming
/// the file that no error policy skips, and the reader goes on with the
/// next file. Lines of that frame may already have been delivered.
///
/// # State
/// `source`: the source's state from just before it yielded the file being
/// read (between files, its current state); `path`: that file's name (the
/// last part of its path, never the path), or `null` between files;
/// `offset`: the byte offset of the next line in it (in the decompressed
/// content); `line`: the lines of it already read; `identity`: `{"size",
/// "digest", "line_start"}`, the file's size on disk, a digest of
/// the (at most 4 KiB of) decompressed bytes before `offset`, and whether
/// `offset` is 0 or follows a `\n`; `errors`: the error policy's counts
/// (see [`TryMapper`](crate::TryMapper)). After an
/// [`elastic`](crate::elastic) reshard, `resume_at` lists the files another
/// rank began, and `skip` and `ahead` (only while there are some) the
/// items of the open file it delivered, to pass over: the next `skip`, then
/// those at `ahead` (by their count from the offset). Taking a state reads
/// no file (the digest's bytes are kept as the file is read); the source's
/// state is taken once per file, when the file is pulled.
///
/// # Restoring
/// Restore resets the source to `source` and pulls the file again (as
/// [`FlatMapper`](crate::FlatMapper) pulls its item again), so the file
/// opened is the one the source yields now: a dataset copied or moved
/// elsewhere, listed by [`Files`](crate::Files) in its new place, resumes
/// there. It then seeks to the 4 KiB before `offset` and reads them: O(1)
/// in the file's length for a plain file. A compressed file cannot seek:
/// it is decompressed from its start up to `offset` (the decompressed bytes
/// are discarded), so the restore costs what decompressing that far costs:
/// it grows with the offset: 0.16 s at the end of 105 MB of (very
/// compressible) text in the `restore_in_gzip_file` bench, so expect
/// seconds per GB of real text. The file must be the one the state was
/// taken in: a file not named `path` (the source's state is from before
/// another file), a file that no longer exists or is now shorter than
/// `offset`, and a file whose identity at `offset` differs (rewritten,
/// appended to, truncated: for a compressed file, the size is the
/// compressed file's and the digest is of the decompressed bytes) is a bad
/// state at that key naming the file, from `reset` (a loader's
/// `load_state_dict`). The state check before it reads no file: it refuses
/// a `path` of `null` with an offset, line or identity (at the reader's own
/// state), a file without an identity, and a state without `identity`
/// (saved before identity checks).
///
/// # Errors
/// A bad record is an [`Error::User`] whose source is a
/// [`RecordError`](crate::RecordError) naming the file and the line
/// (`data/a.txt:7: invalid UTF-8 at byte 3 of the line`): a file that cannot be opened (missing, deleted since the
/// list was taken, a compression that is not compiled in) or read (an I/O
/// or decompression error: the rest of that file is skipped), a line longer
/// than [`max_line_bytes`](ReadLines::max_line_bytes), a line that is not
/// UTF-8. A bad record from the source is one too. What happens to them is
/// the [`ErrorPolicy`] set with [`on_error`](ReadLines::on_error), as for
/// [`TryMapper`](crate::TryMapper): delivered (the default: the pass goes
/// on), delivered and the pass ends, skipped, or skipped up to `n` times.
///
/// Restoring needs a source that yields the same file again:
/// [`reset`](Stateful::reset) (from the start too) refuses a source whose
/// output order varies between runs (an out-of-order
/// [`ParallelMapper`](crate::ParallelMapper) with workers) with
/// [`Error::InvalidPipeline`] naming it, as `flat_map` does.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::Files;
///
/// let dir = std::env::temp_dir().join(format!("nodes-doc-lines-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("a.txt"), "one\ntwo\n")?;
/// std::fs::write(dir.join("b.txt"), "three")?;
/// let build = || Files::in_dir(&dir).map(|files| files.read_lines());
/// let mut running = build()?.start()?;
/// assert_eq!(running.next().transpose()?.as_deref(), Some("one"));
/// let state = running.get_state()?; // {"path": "a.txt", "offset": 4, "line": 1, ...}
/// let rest: Vec<String> = build()?.start_from(&state)?.collect::<Result<_>>()?;
/// assert_eq!(rest, ["two", "three"]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "nodes do nothing until started"]
pub struct ReadLines<S> {
    inner: LineReader<S, Text>,
}

reader_node!(ReadLines [] String, "ReadLines",);

impl<S> ReadLines<S> {
    pub(crate) fn new(source: S) -> Self {
        ReadLines {
            inner: LineReader::new("ReadLines", source, Text),
        }
    }
}

/// This struct is created by [`NodeExt::read_jsonl`](crate::NodeExt::read_jsonl).
/// See its documentation for more.
///
/// The records of each JSON-lines file its source names, in turn: each line
/// is one JSON value, deserialised as a `T` with `serde_json` (or by a
/// function `F`: [`read_jsonl_with`](crate::NodeExt::read_jsonl_with)); blank lines
/// are not records (they are skipped, and counted in the line numbers).
/// Files are read as by [`ReadLines`] (one line in memory at a time,
/// compressed files by extension).
///
/// # State
/// As [`ReadLines`]': `source` (from before the current file), `path`,
/// `offset` (of the next line), `line`, `identity`, `errors`; the restore
/// is the same (the file pulled again, a seek, O(1) in the file's length,
/// for a plain file).
///
/// # Errors
/// As [`ReadLines`]', plus a line that is not valid JSON for `T` (a
/// truncated last line, a wrong type): `data/a.jsonl:3: invalid JSON at
/// column 7: ...`. All follow the [`ErrorPolicy`] set with
/// [`on_error`](ReadJsonl::on_error).
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::Files;
///
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Row { id: u32 }
///
/// let dir = std::env::temp_dir().join(format!("nodes-doc-jsonl-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("a.jsonl"), "{\"id\": 1}\n{\"id\": oops}\n{\"id\": 3}\n")?;
/// let rows: Vec<Row> = Files::in_dir(&dir)?
///     .read_jsonl::<Row>()
///     .on_error(ErrorPolicy::Skip)
///     .start()?
///     .collect::<Result<_>>()?;
/// assert_eq!(rows, [Row { id: 1 }, Row { id: 3 }]);
///
/// let mut running = Files::in_dir(&dir)?.read_jsonl::<Row>().start()?;
/// running.next();
/// let err = running.next().unwrap().unwrap_err().to_string();
/// assert!(err.ends_with("a.jsonl:2: invalid JSON at column 8: expected value"), "{err}");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "nodes do nothing until started"]
pub struct ReadJsonl<S, T, F = Typed<T>> {
    inner: LineReader<S, Json<F>>,
    item: PhantomData<fn() -> T>,
}

reader_node!(ReadJsonl [T, F] T, "ReadJsonl",
    T: Send,
    F: for<'a> Fn(&mut serde_json::Deserializer<StrRead<'a>>) -> serde_json::Result<T> + Send,
);

impl<S, T: DeserializeOwned> ReadJsonl<S, T> {
    pub(crate) fn new(source: S) -> Self {
        ReadJsonl::with(source, typed::<T>)
    }
}

impl<S, T, F> ReadJsonl<S, T, F> {
    pub(crate) fn with(source: S, decode: F) -> Self {
        ReadJsonl {
            inner: LineReader::new("ReadJsonl", source, Json(decode)),
            item: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut reader: &[u8] = input;
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_line(&mut reader, &mut buf, max).unwrap() {
                None => return out,
                Some((n, true)) => out.push(format!("{}:{n}", String::from_utf8_lossy(&buf))),
                Some((n, false)) => out.push(format!("<long>:{n}")),
            }
        }
    }

    #[test]
    fn lines_end_with_lf_crlf_or_the_file() {
        assert_eq!(lines(b"a\nbc\r\n\nd", 10), ["a:2", "bc:4", ":1", "d:1"]);
        assert_eq!(lines(b"", 10), Vec::<String>::new());
    }

    #[test]
    fn long_lines_are_skipped_whole() {
        assert_eq!(lines(b"abc\nabcd\nab", 3), ["abc:4", "<long>:5", "ab:2"]);
        assert_eq!(lines(b"abc\r\n", 3), ["abc:5"]);
        let long = [vec![b'x'; 200_000], b"\nok\n".to_vec()].concat();
        assert_eq!(lines(&long, 10), ["<long>:200001", "ok:3"]);
        assert_eq!(lines(b"abcdef", 3), ["<long>:6"]);
    }

    #[test]
    fn json_errors_give_the_column() {
        let err = Json(typed::<Vec<u32>>).decode(b"[1,").unwrap_err();
        assert!(err.starts_with("invalid JSON at column 3: "), "{err}");
        let err = Json(typed::<u32>).decode(b"[1]").unwrap_err();
        assert!(
            err.starts_with("JSON that does not fit the record type"),
            "{err}"
        );
        assert_eq!(Json(typed::<u32>).decode(b"  ").unwrap(), None);
        assert_eq!(Json(typed::<u32>).decode(b"7").unwrap(), Some(7));
        // `null` is a record like any other: not a line to skip.
        let null = Json(typed::<serde_json::Value>).decode(b"null");
        assert_eq!(null.unwrap(), Some(serde_json::Value::Null));
        let err = Json(typed::<u32>).decode(b"null").unwrap_err();
        assert!(err.starts_with("JSON that does not fit"), "{err}");
        assert_eq!(
            Json(typed::<u32>).decode(b"7 8").unwrap_err(),
            "invalid JSON at column 3: trailing characters"
        );
        assert!(Text.decode(b"a\xffb").unwrap_err().contains("byte 1"));
    }
}
