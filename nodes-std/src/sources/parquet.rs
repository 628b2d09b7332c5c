//! [`ReadParquet`] and [`ReadParquetBatches`]: the rows of each Parquet
//! file a source names, as serde types or as Arrow `RecordBatch` slices,
//! resumed at a (row group, row) through the page index.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use arrow_array::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::file::metadata::PageIndexPolicy;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::sources::arrow_row;
use crate::sources::open::{IDENTITY, is_zero};
pub(crate) use crate::sources::parquet_file::{Identity, NOT_UTF8, pulled_again};
use crate::sources::parquet_file::{ParquetFile, decoded_size, read_at};
pub use crate::sources::parquet_file::{ParquetPart, RowGroup};
use crate::sources::reader::{FileSource, Saved, file_reader_builders};
use crate::sources::record::record_error;
use crate::{Cx, Description, Error, Node, NodeId, NodeName, Result, State, Stateful};

/// The state keys of the position.
const ROW_GROUP: &str = "row_group";
const ROW: &str = "row";

/// A file another rank began, to be read from where it stopped: the next
/// file pulled must have this name and identity (see
/// [`elastic`](crate::elastic), which puts such files first in a rank's
/// plan, in this order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Resumed {
    path: String,
    identity: Identity,
    row_group: usize,
    row: u64,
    /// Items past that row that the other rank's threaded node delivered:
    /// read again and passed over.
    #[serde(default, skip_serializing_if = "is_zero")]
    skip: u64,
    /// Later items it delivered ahead of a gap, by their count from that
    /// row: passed over too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ahead: Vec<u64>,
}

/// Rows decoded at a time when items are rows.
const DECODE_ROWS: usize = 1024;

/// The bytes of a decoded batch when items are rows, by the row group's
/// decoded size of the columns read ([`decoded_size`]): small enough to
/// stay in a core's cache while its rows are read, and to bound what large
/// rows hold. Rows of 512 bytes or less are decoded 1,024 at a time, of
/// 3 KB about 170, of a megabyte one at a time.
const DECODE_BYTES: u64 = 512 << 10;

/// Rows read as `T` at a time, ahead of their delivery: enough to keep
/// the general path off most rows, few enough that large rows (documents)
/// are still in cache when delivered.
const AHEAD_ROWS: usize = 32;

/// The open file: its reader's metadata, identity and row groups' sizes.
struct Open {
    path: PathBuf,
    /// The row groups of it to read.
    groups: std::ops::Range<usize>,
    file: ParquetFile,
    metadata: ArrowReaderMetadata,
    identity: Identity,
    /// The source's state from before it yielded this file.
    before: State,
    /// The row group being read, if its reader was built.
    reader: Option<ParquetRecordBatchReader>,
    /// Decoded rows not yet handed out: a batch and its first such row.
    decoded: Option<(RecordBatch, usize)>,
    /// The batch's columns downcast, when rows are read as serde types.
    rows: Option<arrow_row::Rows>,
    /// Its bytes read, for progress (see [`read_at`]).
    read: Arc<AtomicU64>,
}

impl Open {
    /// Moves the count of bytes read to row `row` of row group `group`:
    /// the file's size and that count, for a [`ReadTally`].
    fn reached(&self, at: (usize, u64)) -> (u64, Arc<AtomicU64>) {
        let metadata = self.metadata.metadata();
        let (size, read) = read_at(&self.identity, metadata, self.groups.clone(), at);
        self.read.store(read, Relaxed);
        (size, Arc::clone(&self.read))
    }
}

/// What [`ReadParquet`] and [`ReadParquetBatches`] share: the source of
/// paths, the open file and the position in it.
struct ParquetReader<S> {
    files: FileSource<S, Resumed>,
    /// Root columns to read (all when `None`).
    columns: Option<Vec<String>>,
    /// Rows per decoded batch.
    decode_rows: usize,
    /// Whether items are rows read as serde types (else batch slices).
    serde_rows: bool,
    open: Option<Open>,
    /// The row group of the next row.
    row_group: usize,
    /// Rows of that row group already handed out.
    row: u64,
}

/// The reader's fields of a state: the position is the row group and row.
type Fields = Saved<Resumed, Identity, (usize, u64)>;

impl<S: Node> ParquetReader<S>
where
    S::Item: ParquetPart,
{
    fn new(name: &'static str, source: S, decode_rows: usize, serde_rows: bool) -> Self {
        ParquetReader {
            files: FileSource::new(name, source),
            columns: None,
            decode_rows,
            serde_rows,
            open: None,
            row_group: 0,
            row: 0,
        }
    }

    /// Between files: the next call pulls the next one.
    fn close(&mut self) {
        self.files.tally.closed();
        (self.open, self.row_group, self.row) = (None, 0, 0);
        self.files.pass_over(0, &[]);
    }

    /// The next item `one` makes, with bad records under the policy.
    #[inline]
    fn judged<T>(
        &mut self,
        cx: &mut Cx,
        mut one: impl FnMut(&mut Self, &mut Cx) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        while !self.files.budget.ended() {
            let made = one(self, cx);
            if let Some(item) = self.files.judge(made, cx) {
                return item;
            }
        }
        Ok(None)
    }

    /// A bad record of the open file (or of `path`).
    fn bad(&self, path: &Path, why: impl std::fmt::Display) -> Error {
        record_error(self.files.name, path, None, why.to_string())
    }

    /// Opens the part's file at its first row: reads its footer and page
    /// index.
    fn open(&self, part: &impl ParquetPart, before: State) -> Result<Open> {
        let path = part.file();
        if path.file_name().and_then(OsStr::to_str).is_none() {
            return Err(self.bad(path, NOT_UTF8));
        }
        let file = ParquetFile::open(&self.files.opener, path).map_err(|e| self.bad(path, e))?;
        let identity = file.identity().map_err(|e| self.bad(path, e))?;
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let metadata = ArrowReaderMetadata::load(&file, options).map_err(|e| self.bad(path, e))?;
        let schema = metadata.schema();
        if let Some(missing) = self
            .columns
            .iter()
            .flatten()
            .find(|c| schema.column_with_name(c).is_none())
        {
            let names: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
            return Err(self.bad(path, format!("no column `{missing}` (it has {names:?})")));
        }
        let count = metadata.metadata().num_row_groups();
        let groups = match part.row_group() {
            None => 0..count,
            Some(g) if g < count => g..g + 1,
            Some(g) => return Err(self.bad(path, format!("no row group {g} (it has {count})"))),
        };
        Ok(Open {
            path: path.to_path_buf(),
            groups,
            file,
            metadata,
            identity,
            before,
            reader: None,
            decoded: None,
            rows: None,
            read: Arc::default(),
        })
    }

    /// A reader of row group `group` of `open` that passes over its first
    /// `skip` rows (whole pages through the page index where it has one).
    fn reader(&self, open: &Open, group: usize, skip: u64) -> Result<ParquetRecordBatchReader> {
        let file = open.file.try_clone().map_err(|e| self.bad(&open.path, e))?;
        let builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file, open.metadata.clone());
        let mask = match &self.columns {
            None => ProjectionMask::all(),
            Some(columns) => {
                let descr = builder.parquet_schema();
                ProjectionMask::columns(descr, columns.iter().map(String::as_str))
            }
        };
        let batch_rows = self.rows_per_decode(open, group, &mask);
        let rows = open.metadata.metadata().row_group(group).num_rows();
        let skip = usize::try_from(skip).unwrap_or(usize::MAX);
        let rest = usize::try_from(rows)
            .unwrap_or(usize::MAX)
            .saturating_sub(skip);
        let builder = builder.with_row_groups(vec![group]).with_projection(mask);
        // From the row group's start, no selection: the plain decode path.
        let builder = match skip {
            0 => builder,
            _ => builder.with_row_selection(RowSelection::from(vec![
                RowSelector::skip(skip),
                RowSelector::select(rest),
            ])),
        };
        builder
            .with_batch_size(batch_rows)
            .build()
            .map_err(|e| self.bad(&open.path, e))
    }

    /// Rows of row group `group` decoded at a time: for rows read as `T`,
    /// as many as [`DECODE_BYTES`] of the columns `mask` reads holds (at
    /// least one, at most `decode_rows`); for slices, the slice's rows.
    fn rows_per_decode(&self, open: &Open, group: usize, mask: &ProjectionMask) -> usize {
        if !self.serde_rows {
            return self.decode_rows;
        }
        let group = open.metadata.metadata().row_group(group);
        let bytes: u64 = (group.columns().iter().enumerate())
            .filter(|&(leaf, _)| mask.leaf_included(leaf))
            .map(|(_, c)| decoded_size(c))
            .sum();
        let rows = u64::try_from(group.num_rows()).unwrap_or(0).max(1);
        let per_row = (bytes / rows).max(1);
        usize::try_from(DECODE_BYTES / per_row)
            .unwrap_or(usize::MAX)
            .clamp(1, self.decode_rows)
    }

    /// Checks that `open` is the file another rank stopped in at `at`: the
    /// same name and identity, and a row it holds.
    fn resume(&self, open: &Open, at: &Resumed) -> Result<()> {
        let name = open.path.file_name().and_then(OsStr::to_str);
        let why = if name != Some(at.path.as_str()) {
            format!(
                "the reshard dealt `{}` here: the file list changed",
                at.path
            )
        } else if open.identity != at.identity {
            "it changed since the state was saved".to_owned()
        } else if !open.groups.contains(&at.row_group)
            || at.row > open.metadata.metadata().row_group(at.row_group).num_rows() as u64
        {
            format!("it has no row {} in row group {}", at.row, at.row_group)
        } else {
            return Ok(());
        };
        let why = format!(
            "cannot resume where another rank stopped (row group {}, row {}): {why}",
            at.row_group, at.row
        );
        Err(self.bad(&open.path, why))
    }

    /// Takes back [`deliver_decoded`](Self::deliver_decoded) (of a row
    /// still in the decoded batch).
    fn undeliver_decoded(&mut self) {
        if let Some((_, first)) = self.open.as_mut().and_then(|o| o.decoded.as_mut()) {
            *first -= 1;
            self.row -= 1;
        }
    }

    /// Counts the decoded batch's next row as delivered.
    #[inline]
    fn deliver_decoded(&mut self) {
        if let Some((_, first)) = self.open.as_mut().and_then(|o| o.decoded.as_mut()) {
            *first += 1;
            self.row += 1;
        }
    }

    /// The next item's rows (at most `want`), past the items another rank
    /// already delivered (see [`Resumed::skip`]).
    fn next_rows(&mut self, cx: &mut Cx, want: usize) -> Result<Option<(usize, usize)>> {
        loop {
            // A resumed file sets `skip` when it opens, before its first rows.
            let rows = self.advance(cx, want)?;
            if rows.is_none() || !self.files.passes() {
                return Ok(rows);
            }
        }
    }

    /// The next rows of the current row group (at most `want`): their range
    /// in the decoded batch (`Open::decoded`). Moves the
    /// position past them.
    fn advance(&mut self, cx: &mut Cx, want: usize) -> Result<Option<(usize, usize)>> {
        self.files.flag.check(self.files.name)?;
        loop {
            let Some(open) = &mut self.open else {
                let Some((item, before, _pulling)) = self.files.pull(cx)? else {
                    return Ok(None);
                };
                // An unreadable file is a bad record; the next call moves on
                // (a file another rank began, with its place).
                let resumed = self.files.resume_at.pop_front();
                let open = self.open(&item, before)?;
                (self.row_group, self.row) = (open.groups.start, 0);
                if let Some(at) = resumed {
                    self.resume(&open, &at)?;
                    (self.row_group, self.row) = (at.row_group, at.row);
                    self.files.pass_over(at.skip, &at.ahead);
                }
                self.files
                    .tally
                    .opened(open.reached((self.row_group, self.row)));
                self.open = Some(open);
                // A threaded node above then counts items of one file only.
                cx.request_snapshot();
                continue;
            };
            if let Some((batch, first)) = &mut open.decoded {
                let take = want.min(batch.num_rows() - *first);
                if take > 0 {
                    let out = (*first, take);
                    *first += take;
                    self.row += take as u64;
                    return Ok(Some(out));
                }
                // Its arrays are freed before the next batch is decoded.
                (open.decoded, open.rows) = (None, None);
            }
            if self.row_group >= open.groups.end {
                self.close();
                continue;
            }
            let Some(reader) = &mut open.reader else {
                let open = self.open.as_ref().expect("open above");
                match self.reader(open, self.row_group, self.row) {
                    Ok(reader) => self.open.as_mut().expect("open above").reader = Some(reader),
                    Err(e) => {
                        self.close();
                        return Err(e);
                    }
                }
                continue;
            };
            match reader.next() {
                Some(Ok(batch)) => {
                    open.reached((self.row_group, self.row + batch.num_rows() as u64));
                    open.rows = self.serde_rows.then(|| arrow_row::Rows::of(&batch));
                    open.decoded = Some((batch, 0));
                }
                Some(Err(e)) => {
                    let why = format!("row group {}: {e}", self.row_group);
                    let error = record_error(self.files.name, &open.path, None, why);
                    // The rest of a damaged file is not read.
                    self.close();
                    return Err(error);
                }
                None => {
                    open.reader = None;
                    self.row_group += 1;
                    self.row = 0;
                }
            }
        }
    }

    fn checked_fields(&self, state: &State) -> Result<Fields> {
        let name = self.files.name;
        let saved: Fields = self.files.fields(state, [ROW_GROUP, ROW])?;
        let stray = saved.at != (0, 0) || saved.identity.is_some();
        match &saved.path {
            None if stray => Err(Error::bad_state(
                state.path().to_owned(),
                format!("{name}: a row group, row or identity without a file (`path` is null)"),
            )),
            Some(_) if saved.identity.is_none() => Err(Error::bad_state(
                state.path_of(IDENTITY),
                format!("{name}: a file without an identity"),
            )),
            _ => Ok(saved),
        }
    }

    fn check_state(&self, state: &State) -> Result<()> {
        let saved = self.checked_fields(state)?;
        self.files.budget.load(state)?;
        self.files.source.check_state(&saved.source)
    }

    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        if self.columns.as_ref().is_some_and(Vec::is_empty) {
            let why =
                "columns must name at least one column (leave `columns` out to read them all)";
            return Err(Error::invalid_argument(self.files.name, why));
        }
        self.files.replayable()?;
        let Some(state) = state else {
            self.close();
            return self.files.restart();
        };
        let saved = self.checked_fields(state)?;
        let counts = self.files.budget.load(state)?;
        self.close();
        let mut replay = self.files.restore(counts, &saved.source, saved.resume_at)?;
        let (Some(name), Some(identity)) = (&saved.path, &saved.identity) else {
            self.files.flag.mark();
            return Ok(());
        };
        let item = replay.next()?;
        let part = pulled_again(self.files.name, state, name, item.as_ref())?;
        let path = part.file();
        let changed = |why: String| {
            let why = format!(
                "{} cannot resume in `{}`: {why}",
                self.files.name,
                path.display()
            );
            Error::bad_state(state.path_of(IDENTITY), why)
        };
        let open = self
            .open(part, saved.source)
            .map_err(|e| changed(e.to_string()))?;
        if open.identity != *identity {
            return Err(changed(format!(
                "it changed since the state was saved ({identity} then, {} now)",
                open.identity
            )));
        }
        let groups = open.metadata.metadata().row_groups();
        let (g, row) = saved.at;
        let rows = groups.get(g).map(|g| g.num_rows() as u64);
        let read = &open.groups;
        if g < read.start || g > read.end || g == read.end && row > 0 {
            let why = format!("row group {g}, where it reads row groups {read:?}");
            return Err(Error::bad_state(state.path_of(ROW_GROUP), why));
        }
        if let Some(rows) = rows
            && row > rows
        {
            let why = format!("row {row} of a row group of {rows} rows");
            return Err(Error::bad_state(state.path_of(ROW), why));
        }
        (self.row_group, self.row) = saved.at;
        self.files.tally.opened(open.reached(saved.at));
        self.open = Some(open);
        self.files.pass_over(saved.passing.0, &saved.passing.1);
        self.files.flag.mark();
        Ok(())
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        let open = self.open.as_ref();
        let before = open.map(|o| (&o.before, o.path.as_path()));
        self.files.save(cx, before, |out| {
            out.insert(IDENTITY, open.map(|o| &o.identity))?;
            out.insert(ROW_GROUP, self.row_group)?;
            out.insert(ROW, self.row)
        })
    }

    fn describe(&self) -> Description {
        self.files.describe(|desc| match &self.columns {
            None => desc,
            Some(columns) => desc.param("columns", columns.join(",")),
        })
    }
}

/// This struct is created by [`NodeExt::read_parquet`](crate::NodeExt::read_parquet).
/// See its documentation for more.
///
/// The rows of each Parquet file its source names, in turn (row group by
/// row group), each read as a `T` with serde straight from the Arrow
/// arrays: a row is a map from column names to cells; integers, floats,
/// booleans, strings, binaries, dates and timestamps (as their stored
/// numbers), lists and structs are read, a null cell is `None`.
/// [`columns`](ReadParquet::columns) reads only the named columns. Rows
/// are decoded about 512 KB at a time (by the row group's uncompressed size
/// of the columns read; at most 1,024 rows, at least one), so large rows
/// hold little memory, and read as `T`s 32 at a time, in one tight loop,
/// ahead of their delivery.
///
/// # State
/// `source`: the source's state from just before it yielded the file being
/// read (between files, its current state); `path`: that file's name (the
/// last part of its path), or `null` between files; `row_group` and `row`:
/// the row group of the next row and the rows of it already read;
/// `identity`: `{"size", "footer"}`, the file's size and an `mx64` digest
/// of its footer (the metadata, which describes every row group and page;
/// never the whole file), and an object's `etag`; `errors`: the error
/// policy's count this pass; after an [`elastic`](crate::elastic) reshard,
/// `resume_at`, `skip` and `ahead` as [`ReadLines`](crate::ReadLines)'.
/// Taking a state reads no file.
///
/// # Restoring
/// Restore resets the source to `source` and pulls the file again (a
/// dataset moved elsewhere and listed there resumes), checks its name and
/// identity (a file changed since is an error naming it), and reads its
/// footer: the row group is read from the saved row on, its earlier pages
/// passed over through the page index where the file has one, so a restore
/// decodes only the pages that hold the saved row and after. O(1) in the
/// file's length.
///
/// # Errors
/// A file that cannot be opened or is not Parquet, a column it lacks, a
/// damaged page (the rest of that file is not read), and a row that is not
/// a `T` are `Err` items naming the file (and row group and row), after
/// which reading goes on (or, under [`on_error`](Self::on_error), are
/// skipped or end the pass); a state that does not fit is an
/// [`Error::BadState`] at its key.
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::IterableWrapper;
///
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Row { id: i64, text: Option<String> }
///
/// # let dir = std::env::temp_dir().join(format!("nodes-doc-parquet-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let path = dir.join("a.parquet");
/// # {
/// #     use std::sync::Arc;
/// #     use arrow_array::{Int64Array, RecordBatch, StringArray};
/// #     let batch = RecordBatch::try_from_iter([
/// #         ("id", Arc::new(Int64Array::from(vec![1, 2])) as _),
/// #         ("text", Arc::new(StringArray::from(vec![Some("one"), None])) as _),
/// #     ])?;
/// #     let mut w = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path)?, batch.schema(), None)?;
/// #     w.write(&batch)?;
/// #     w.close()?;
/// # }
/// let rows: Vec<Row> = IterableWrapper::new(vec![path]).read_parquet::<Row>().start()?.collect::<Result<_>>()?;
/// assert_eq!(rows, [Row { id: 1, text: Some("one".into()) }, Row { id: 2, text: None }]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "nodes do nothing until started"]
pub struct ReadParquet<S, T> {
    inner: ParquetReader<S>,
    ahead: Ahead<T>,
}

/// The decoded batch's next rows (at most [`AHEAD_ROWS`]), read as `T`s
/// in one tight loop when the first of them was asked for, and why the row
/// after them is not a `T`. The reader's position counts only the rows
/// delivered, so this is a cache: a reset or shutdown empties it.
struct Ahead<T> {
    rows: VecDeque<T>,
    not_a_row: Option<serde::de::value::Error>,
}

impl<T> Ahead<T> {
    fn clear(&mut self) {
        self.rows.clear();
        self.not_a_row = None;
    }
}

/// This struct is created by
/// [`NodeExt::read_parquet_batches`](crate::NodeExt::read_parquet_batches).
/// See its documentation for more.
///
/// The rows of each Parquet file its source names, as Arrow `RecordBatch`es
/// of at most `rows` rows, each within one row group; state, restore and
/// errors as [`ReadParquet`]'s (the position counts rows, so a restore
/// continues after the last slice delivered).
#[must_use = "nodes do nothing until started"]
pub struct ReadParquetBatches<S> {
    inner: ParquetReader<S>,
}

impl<S: Node, T> ReadParquet<S, T>
where
    S::Item: ParquetPart,
{
    pub(crate) fn new(source: S) -> Self {
        ReadParquet {
            inner: ParquetReader::new(Self::NAME, source, DECODE_ROWS, true),
            ahead: Ahead {
                rows: VecDeque::new(),
                not_a_row: None,
            },
        }
    }
}

impl<S: Node> ReadParquetBatches<S>
where
    S::Item: ParquetPart,
{
    pub(crate) fn new(source: S, rows: usize) -> Result<Self> {
        if rows == 0 {
            let why = "rows must be at least 1 (the most rows of a slice), found 0";
            return Err(Error::invalid_argument(Self::NAME, why));
        }
        Ok(ReadParquetBatches {
            inner: ParquetReader::new(Self::NAME, source, rows, false),
        })
    }
}

impl<S, T> NodeName for ReadParquet<S, T> {
    const NAME: &'static str = "ReadParquet";
}

impl<S> NodeName for ReadParquetBatches<S> {
    const NAME: &'static str = "ReadParquetBatches";
}

impl<S: Node, T: DeserializeOwned + Send> Node for ReadParquet<S, T>
where
    S::Item: ParquetPart,
{
    type Item = T;

    #[inline]
    fn next(&mut self, cx: &mut Cx) -> Result<Option<T>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            while self.ahead.rows.is_empty() {
                if !self.go_on(cx)? {
                    return Ok(None);
                }
            }
            self.inner.deliver_decoded();
            Ok(self.ahead.rows.pop_front())
        })
    }
}

impl<S: Node, T: DeserializeOwned + Send> ReadParquet<S, T>
where
    S::Item: ParquetPart,
{
    /// Past the rows read ahead: the row that is not a `T` (its error,
    /// unless the policy skips it), else the rest of the decoded batch
    /// read ahead; whether the pass goes on.
    #[inline(never)]
    fn go_on(&mut self, cx: &mut Cx) -> Result<bool> {
        let Some(e) = self.ahead.not_a_row.take() else {
            return self.read_ahead(cx);
        };
        let inner = &mut self.inner;
        inner.deliver_decoded();
        let open = inner.open.as_ref().map_or(Path::new(""), |o| &o.path);
        let at = format!("row group {}, row {}: {e}", inner.row_group, inner.row - 1);
        let error = inner.bad(open, at);
        match inner.files.judge::<()>(Err(error), cx) {
            Some(Err(e)) => Err(e),
            _ => Ok(true),
        }
    }

    /// Reads the decoded batch's next rows as `T`s, up to one that is not
    /// (decoding the next batch first when this one is used up); whether
    /// there was a row.
    fn read_ahead(&mut self, cx: &mut Cx) -> Result<bool> {
        let ahead = &mut self.ahead;
        let read = self.inner.judged(cx, |inner, cx| {
            inner.files.flag.check(inner.files.name)?;
            let Some((at, _)) = inner.next_rows(cx, 1)? else {
                return Ok(None);
            };
            let open = inner.open.as_ref().expect("rows were just returned");
            let rows = open.rows.as_ref().zip(open.decoded.as_ref());
            let (rows, (batch, _)) = rows.expect("rows were just returned");
            // Rows passed over after a reshard are counted one by one.
            let end = match inner.files.passing() {
                true => at + 1,
                false => batch.num_rows().min(at + AHEAD_ROWS),
            };
            for at in at..end {
                match rows.row(at) {
                    Ok(row) => ahead.rows.push_back(row),
                    Err(e) => {
                        ahead.not_a_row = Some(e);
                        break;
                    }
                }
            }
            Ok(Some(()))
        })?;
        // `next_rows` counted the first row: it counts when delivered.
        if read.is_some() {
            self.inner.undeliver_decoded();
        }
        Ok(read.is_some())
    }
}

impl<S: Node> Node for ReadParquetBatches<S>
where
    S::Item: ParquetPart,
{
    type Item = RecordBatch;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<RecordBatch>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            self.inner.judged(cx, |inner, cx| {
                let Some((at, len)) = inner.next_rows(cx, inner.decode_rows)? else {
                    return Ok(None);
                };
                let open = inner.open.as_mut().expect("rows were just returned");
                let decoded = &mut open.decoded;
                match decoded {
                    // A whole decoded batch is handed out as it is.
                    Some((batch, _)) if at == 0 && len == batch.num_rows() => {
                        Ok(decoded.take().map(|(batch, _)| batch))
                    }
                    _ => Ok(decoded.as_ref().map(|(batch, _)| batch.slice(at, len))),
                }
            })
        })
    }
}

macro_rules! parquet_stateful {
    ($ty:ident [$($gen:ident),*] $(, ahead: $ahead:ident)?) => {
        impl<S $(, $gen)*> $ty<S $(, $gen)*> {
            /// Reads only these columns (by their top-level names); a file
            /// without one of them is an `Err` naming the column and the file,
            /// and an empty list makes `start` an `Err`.
            pub fn columns<I: IntoIterator<Item = C>, C: Into<String>>(mut self, columns: I) -> Self {
                self.inner.columns = Some(columns.into_iter().map(Into::into).collect());
                self
            }
        }

        file_reader_builders!($ty [$($gen),*]);

        impl<S: Node $(, $gen)*> Stateful for $ty<S $(, $gen)*>
        where
            S::Item: ParquetPart,
        {
            crate::delegate::delegate_stateful!(inner: check_state, get_state, describe);

            fn reset(&mut self, state: Option<&State>) -> Result<()> {
                $(self.$ahead.clear();)?
                self.inner.reset(state)
            }

            fn shutdown(&mut self) {
                $(self.$ahead.clear();)?
                self.inner.files.shutdown();
            }
        }

        impl<S $(, $gen)*> std::fmt::Debug for $ty<S $(, $gen)*> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("columns", &self.inner.columns)
                    .field("row_group", &self.inner.row_group)
                    .field("row", &self.inner.row)
                    .finish_non_exhaustive()
            }
        }
    };
}

parquet_stateful!(ReadParquet[T], ahead: ahead);
parquet_stateful!(ReadParquetBatches []);

impl crate::sources::reader::Passing for Resumed {
    fn passing(&self) -> (u64, &[u64]) {
        (self.skip, &self.ahead)
    }
}
