//! [`ParquetRowGroups`]: the row groups of the Parquet files of a
//! [`Files`], listed once from their footers as a list of [`RowGroup`]
//! units that `shuffle_files` and `shard` treat like files.

use std::path::Path;
use std::sync::Arc;

use parquet::file::metadata::{ParquetMetaDataReader, RowGroupMetaData};

use crate::sources::open::Opener;
use crate::sources::parquet::RowGroup;
use crate::sources::parquet_file::ParquetFile;
use crate::{
    Cx, Description, Error, Files, Hint, Node, NodeId, NodeName, Result, Resume, State, Stateful,
};

/// This struct is created by [`Files::parquet_row_groups`]. See its
/// documentation for more.
///
/// The row groups of the Parquet files of a [`Files`], as [`RowGroup`]
/// units (path, index, rows), listed once from the files' footers when it
/// is built. The units are a list like `Files`' (each named
/// `file#index`): [`shuffle_files`](ParquetRowGroups::shuffle_files)
/// shuffles them, [`shard`](crate::NodeExt::shard) deals them to the ranks
/// (which may outnumber the files), and
/// [`read_parquet`](crate::NodeExt::read_parquet) reads each.
/// [`elastic`](crate::elastic) reshards them like files.
///
/// # State
/// `Files`' state over the list of units (it describes itself as that
/// `Files`): its digest covers each file's identity (size and footer
/// digest, and ETag for an object) too, so a state taken before a file
/// changed is refused at `files`. [`Epoch::progress`](crate::Epoch::progress)
/// counts row groups as files and their compressed sizes as bytes.
#[must_use = "nodes do nothing until started"]
pub struct ParquetRowGroups {
    units: Files,
    groups: Arc<[RowGroup]>,
}

impl NodeName for ParquetRowGroups {
    const NAME: &'static str = "ParquetRowGroups";
}

impl ParquetRowGroups {
    pub(crate) fn new(files: &Files, opener: &Opener) -> Result<ParquetRowGroups> {
        let (mut names, mut sizes, mut salt, mut groups) = (vec![], vec![], vec![], vec![]);
        for (name, path) in files.names().iter().zip(files.paths()) {
            let refuse = |why: String| {
                let why = format!("cannot list the row groups of `{}`: {why}", path.display());
                Error::invalid_argument(Self::NAME, why)
            };
            let (rows, identity) = footer(opener, &path).map_err(refuse)?;
            salt.push(identity);
            for (index, (rows, bytes)) in rows.into_iter().enumerate() {
                names.push(format!("{name}#{index}"));
                sizes.push(bytes);
                let path = path.clone();
                groups.push(RowGroup { path, index, rows });
            }
        }
        Ok(ParquetRowGroups {
            units: files.relisted(names, Some(sizes), &salt)?,
            groups: groups.into(),
        })
    }

    /// Yields the row groups in a random order seeded by `seed`, a new one
    /// each epoch, as [`Files::shuffle_files`] does for files.
    pub fn shuffle_files(mut self, seed: u64) -> ParquetRowGroups {
        self.units = self.units.shuffle_files(seed);
        self
    }

    /// The number of row groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there is no row group (the files hold no rows).
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// The rows and size of each row group of `path` (its compressed bytes,
/// or the file's size for its only one: what `read_parquet` counts as
/// read), and the file's identity (as text, for the list's digest).
fn footer(opener: &Opener, path: &Path) -> std::result::Result<(Vec<(u64, u64)>, String), String> {
    let file = ParquetFile::open(opener, path).map_err(|e| e.to_string())?;
    let identity = file.identity().map_err(|e| e.to_string())?;
    let metadata = ParquetMetaDataReader::new()
        .parse_and_finish(&file)
        .map_err(|e| e.to_string())?;
    let groups = metadata.row_groups();
    let size = |g: &RowGroupMetaData| match groups.len() {
        1 => identity.size(),
        _ => u64::try_from(g.compressed_size()).unwrap_or(0),
    };
    let rows = groups.iter().map(|g| (g.num_rows() as u64, size(g)));
    Ok((rows.collect(), identity.to_string()))
}

impl Node for ParquetRowGroups {
    type Item = RowGroup;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<RowGroup>> {
        cx.observe(NodeId::of(self), Self::NAME, |_cx| {
            let index = self.units.advance()?;
            Ok(index.map(|i| self.groups[i].clone()))
        })
    }
}

/// `Files`' own, over the units (called by path: `Files`' inherent
/// guards of an unstarted node share the names).
impl Stateful for ParquetRowGroups {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        Stateful::reset(&mut self.units, state)
    }

    fn check_state(&self, state: &State) -> Result<()> {
        Stateful::check_state(&self.units, state)
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        Stateful::get_state(&self.units, cx)
    }

    fn describe(&self) -> Description {
        Stateful::describe(&self.units)
    }

    fn resume(&self) -> Resume {
        Stateful::resume(&self.units)
    }

    fn size_hint(&self) -> Hint {
        Stateful::size_hint(&self.units)
    }
}

nodes_core::__started_guards!(impl[] ParquetRowGroups);

impl std::fmt::Debug for ParquetRowGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(Self::NAME)
            .field("units", &self.units)
            .finish_non_exhaustive()
    }
}
