//! [`ParquetRowGroups`]: the row groups of each Parquet file a source
//! names, as [`RowGroup`] units to shuffle and shard before reading.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use parquet::file::metadata::ParquetMetaDataReader;

use crate::sources::open::Opener;
use crate::sources::parquet::{Identity, NOT_UTF8, RowGroup, pulled_again};
use crate::sources::parquet_file::ParquetFile;
use crate::sources::reader::file_state;
use crate::sources::record::record_error;
use crate::transforms::flat_map::replayable;
use crate::{
    Cx, Description, Error, Node, NodeId, NodeName, Replay, ResetFlag, Result, State, Stateful,
};

const SOURCE: &str = "source";
const PATH: &str = "path";
const NEXT: &str = "next";
const IDENTITY: &str = "identity";

/// This struct is created by
/// [`NodeExt::parquet_row_groups`](crate::NodeExt::parquet_row_groups).
/// See its documentation for more.
///
/// The row groups of each Parquet file its source names, in turn, as
/// [`RowGroup`]s (path, index, rows): read from each file's footer only.
/// [`read_parquet`](crate::NodeExt::read_parquet) over them reads each
/// row group; a `shuffle` or `shard` between the two works per row group,
/// so ranks may outnumber files.
///
/// # State
/// `source` (from before the current file), `path` (its name, or `null`
/// between files), `next` (the index of the next row group to yield),
/// `identity` (the file's size and footer digest, as [`ReadParquet`]'s).
/// A restore pulls the file again and reads its footer: a file changed
/// since is an error naming it.
///
/// [`ReadParquet`]: crate::ReadParquet
#[must_use = "nodes do nothing until started"]
pub struct ParquetRowGroups<S> {
    source: S,
    /// The file being listed: its path, rows per row group, identity and
    /// the source's state from before it.
    open: Option<(PathBuf, Vec<u64>, Identity, State)>,
    /// Where files are opened (and remote ones read).
    opener: Opener,
    next: usize,
    flag: ResetFlag,
}

impl<S> ParquetRowGroups<S> {
    pub(crate) fn new(source: S) -> Self {
        ParquetRowGroups {
            source,
            open: None,
            opener: Opener::default(),
            next: 0,
            flag: ResetFlag::default(),
        }
    }

    /// Reads remote files' footers (URLs) through `store` rather than
    /// [`Store::from_env`](crate::Store::from_env).
    #[cfg(feature = "object-store")]
    pub fn store(mut self, store: crate::Store) -> Self {
        self.opener.store = store;
        self
    }
}

impl<S> NodeName for ParquetRowGroups<S> {
    const NAME: &'static str = "ParquetRowGroups";
}

/// The rows of each row group of `path`, and the file's identity.
fn footer(opener: &Opener, path: &Path) -> std::result::Result<(Vec<u64>, Identity), String> {
    let file = ParquetFile::open(opener, path).map_err(|e| e.to_string())?;
    let identity = file.identity().map_err(|e| e.to_string())?;
    let metadata = ParquetMetaDataReader::new()
        .parse_and_finish(&file)
        .map_err(|e| e.to_string())?;
    let rows = metadata.row_groups().iter().map(|g| g.num_rows() as u64);
    Ok((rows.collect(), identity))
}

impl<S: Node> Node for ParquetRowGroups<S>
where
    S::Item: AsRef<Path>,
{
    type Item = RowGroup;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<RowGroup>> {
        cx.observe(NodeId::of(self), Self::NAME, |cx| {
            self.flag.check(Self::NAME)?;
            loop {
                if let Some((path, rows, ..)) = &self.open {
                    if let Some(&count) = rows.get(self.next) {
                        let path = path.clone();
                        let index = self.next;
                        self.next += 1;
                        return Ok(Some(RowGroup {
                            path,
                            index,
                            rows: count,
                        }));
                    }
                    (self.open, self.next) = (None, 0);
                }
                let before = self.source.get_state(cx)?;
                let Some(item) = self.source.next(cx)? else {
                    return Ok(None);
                };
                let path = item.as_ref();
                if path.file_name().and_then(OsStr::to_str).is_none() {
                    return Err(record_error(Self::NAME, path, None, NOT_UTF8.to_owned()));
                }
                // A file whose footer cannot be read is a bad record.
                let (rows, identity) = footer(&self.opener, path)
                    .map_err(|why| record_error(Self::NAME, path, None, why))?;
                self.open = Some((path.to_path_buf(), rows, identity, before));
            }
        })
    }
}

impl<S: Node> Stateful for ParquetRowGroups<S>
where
    S::Item: AsRef<Path>,
{
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        replayable(&self.source, Self::NAME, Self::NAME)?;
        (self.open, self.next) = (None, 0);
        let Some(state) = state else {
            self.source.reset(None)?;
            self.flag.mark();
            return Ok(());
        };
        state.expect_keys(Self::NAME, &[SOURCE, PATH, NEXT, IDENTITY])?;
        let source = state.child(SOURCE)?;
        let name: Option<String> = state.get(PATH)?;
        let next: usize = state.get(NEXT)?;
        let identity: Option<Identity> = state.get(IDENTITY)?;
        let mut replay = Replay::reset(&mut self.source, Some(&source))?;
        let Some(name) = name else {
            self.flag.mark();
            return Ok(());
        };
        let item = replay.next()?;
        let path = pulled_again(Self::NAME, state, &name, item.as_ref())?.as_ref();
        let at_path = |why: String| Error::bad_state(state.path_of(PATH), why);
        let (rows, now) = footer(&self.opener, path)
            .map_err(|why| at_path(format!("`{}`: {why}", path.display())))?;
        if identity.as_ref() != Some(&now) {
            let why = format!(
                "{} cannot resume in `{}`: it changed since the state was saved",
                Self::NAME,
                path.display()
            );
            return Err(Error::bad_state(state.path_of(IDENTITY), why));
        }
        if next > rows.len() {
            let why = format!("row group {next} of a file of {}", rows.len());
            return Err(Error::bad_state(state.path_of(NEXT), why));
        }
        (self.open, self.next) = (Some((path.to_path_buf(), rows, now, source)), next);
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        self.flag.check(Self::NAME)?;
        let open = self.open.as_ref();
        let before = open.map(|(path, _, _, before)| (before, path.as_path()));
        let mut out = file_state(Self::NAME, &self.source, cx, before)?;
        out.insert(IDENTITY, open.map(|(_, _, identity, _)| identity))?;
        out.insert(NEXT, self.next)?;
        Ok(out)
    }

    fn describe(&self) -> Description {
        Description::new(Self::NAME).child(SOURCE, self.source.describe())
    }

    fn shutdown(&mut self) {
        self.source.shutdown();
    }
}

nodes_core::__started_guards!(impl[S] ParquetRowGroups<S>);

impl<S> std::fmt::Debug for ParquetRowGroups<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.open.as_ref().map(|(p, ..)| p);
        f.debug_struct(Self::NAME)
            .field("path", &path)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}
