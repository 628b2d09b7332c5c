//! A Parquet file where it lives, on disk or in an object store, read by
//! ranges through the parquet crate's `ChunkReader`; its [`Identity`]; the
//! parts of one a reader reads ([`ParquetPart`], [`RowGroup`]); and how far
//! a reader is through it, for progress.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::reader::{ChunkReader, Length};
use serde::{Deserialize, Serialize};

use crate::sources::open::{Opener, is_remote};
use crate::{Error, Result, State};

/// What [`ReadParquet`](crate::ReadParquet) reads of an item of its
/// source: a whole file (any path), or one row group of one ([`RowGroup`], from
/// [`Files::parquet_row_groups`](crate::Files::parquet_row_groups)).
pub trait ParquetPart {
    /// The file.
    fn file(&self) -> &Path;
    /// The one row group to read, if not the whole file.
    fn row_group(&self) -> Option<usize> {
        None
    }
}

impl<P: AsRef<Path>> ParquetPart for P {
    fn file(&self) -> &Path {
        self.as_ref()
    }
}

/// One row group of a Parquet file: the unit that
/// [`parquet_row_groups`](crate::Files::parquet_row_groups) lists, so
/// that shuffling and sharding by rank work per row group (ranks may
/// outnumber files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowGroup {
    /// The file.
    pub path: PathBuf,
    /// The row group's index in the file.
    pub index: usize,
    /// Its rows.
    pub rows: u64,
}

impl ParquetPart for RowGroup {
    fn file(&self) -> &Path {
        &self.path
    }

    fn row_group(&self) -> Option<usize> {
        Some(self.index)
    }
}

/// Why a file whose name is not text is not read.
pub(crate) const NOT_UTF8: &str = "the file name is not UTF-8 (a state stores names as text)";

/// The part a restore pulled again from its source, if its file is the one
/// named `name` that `state` is in; else a bad state at `state`'s `path`.
pub(crate) fn pulled_again<'a, P: ParquetPart>(
    node: &str,
    state: &State,
    name: &str,
    pulled: Option<&'a P>,
) -> Result<&'a P> {
    let why = match pulled {
        Some(part) if part.file().file_name() == Some(OsStr::new(name)) => return Ok(part),
        Some(part) => format!(
            "{node} is in `{name}`, but its source, restored, yields `{}`: its state is not from before that file",
            part.file().display()
        ),
        None => format!("{node} is in `{name}`, but its source, restored, yields no file"),
    };
    Err(Error::bad_state(state.path_of("path"), why))
}

/// How much of a Parquet file is read at row `row` of row group `group`,
/// for progress, as `(size, read)`: the compressed sizes of the row groups
/// read (`groups`) before it, and of its rows before `row`, scaled to the
/// file's size when the whole file is read, else to those row groups'.
pub(crate) fn read_at(
    identity: &Identity,
    metadata: &ParquetMetaData,
    groups: Range<usize>,
    (group, row): (usize, u64),
) -> (u64, u64) {
    let size_of = |g: usize| u64::try_from(metadata.row_group(g).compressed_size()).unwrap_or(0);
    let data: u64 = groups.clone().map(size_of).sum();
    let mut done: u64 = (groups.start..group.min(groups.end)).map(size_of).sum();
    if groups.contains(&group) {
        let rows = u64::try_from(metadata.row_group(group).num_rows()).unwrap_or(0);
        done += size_of(group) * row.min(rows) / rows.max(1);
    }
    let size = match groups == (0..metadata.num_row_groups()) {
        true => identity.size,
        false => data,
    };
    let read = u128::from(done) * u128::from(size) / u128::from(data.max(1));
    (size, u64::try_from(read).unwrap_or(size))
}

/// A column chunk's size once decoded into Arrow, as far as its metadata
/// tells: its uncompressed size, or where more, its values at their
/// physical width (an offset for a byte array) plus the bytes of its byte
/// arrays (which arrow-rs and pyarrow write into the footer). Encoded
/// sizes alone undercount dictionary-encoded columns: a long text
/// repeated in every row is stored once but decoded per row.
pub(crate) fn decoded_size(column: &ColumnChunkMetaData) -> u64 {
    use parquet::basic::Type as Physical;
    let width: i64 = match column.column_type() {
        Physical::BOOLEAN => 1,
        Physical::INT32 | Physical::FLOAT | Physical::BYTE_ARRAY => 4,
        Physical::INT64 | Physical::DOUBLE => 8,
        Physical::INT96 => 12,
        Physical::FIXED_LEN_BYTE_ARRAY => column.column_descr().type_length().into(),
    };
    let bytes = column.unencoded_byte_array_data_bytes().unwrap_or(0);
    let decoded = column
        .num_values()
        .saturating_mul(width)
        .saturating_add(bytes);
    u64::try_from(decoded.max(column.uncompressed_size())).unwrap_or(0)
}

/// What a state records of the file it is in, checked on restore: the
/// file's size, an `mx64` digest of its footer (the metadata, which names
/// every row group, page and statistic; never the whole file), and a
/// remote object's ETag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Identity {
    size: u64,
    footer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    etag: Option<String>,
}

impl Identity {
    /// The file's size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "size {} and footer {}", self.size, self.footer)?;
        match &self.etag {
            Some(etag) => write!(f, " and ETag {etag}"),
            None => Ok(()),
        }
    }
}

/// An open Parquet file.
pub(crate) enum ParquetFile {
    Local(File),
    #[cfg(feature = "object-store")]
    Remote(std::sync::Arc<crate::sources::remote::RemoteFile>),
}

impl ParquetFile {
    /// Opens `path`, a local path or a URL.
    pub(crate) fn open(opener: &Opener, path: &Path) -> io::Result<ParquetFile> {
        if !is_remote(path) {
            return Ok(ParquetFile::Local(File::open(path)?));
        }
        #[cfg(feature = "object-store")]
        {
            let url = path.to_str().unwrap_or_default();
            let file = crate::sources::remote::RemoteFile::open(&opener.store, url)?;
            Ok(ParquetFile::Remote(std::sync::Arc::new(file)))
        }
        #[cfg(not(feature = "object-store"))]
        {
            let _ = opener;
            Err(io::Error::other(
                "a URL, and object store support is not compiled in: enable the `object-store` feature of nodes-std",
            ))
        }
    }

    /// Another handle on the same file.
    pub(crate) fn try_clone(&self) -> io::Result<ParquetFile> {
        Ok(match self {
            ParquetFile::Local(file) => ParquetFile::Local(file.try_clone()?),
            #[cfg(feature = "object-store")]
            ParquetFile::Remote(file) => ParquetFile::Remote(std::sync::Arc::clone(file)),
        })
    }

    /// Reads the size and the footer (its length is in the last 8 bytes).
    pub(crate) fn identity(&self) -> io::Result<Identity> {
        let size = self.len();
        if size < 8 {
            return Err(io::Error::other("too short for a Parquet file"));
        }
        let tail = self.bytes(size - 8, 8)?;
        if &tail[4..] != b"PAR1" {
            return Err(io::Error::other("no Parquet footer (`PAR1`) at its end"));
        }
        let length = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        let start = size
            .checked_sub(length + 8)
            .ok_or_else(|| io::Error::other(format!("a footer of {length} bytes in {size}")))?;
        let footer = self.bytes(start, length as usize)?;
        let digest = nodes_core::__private::digest_bytes(&footer);
        Ok(Identity {
            size,
            footer: format!("mx64:{digest:016x}"),
            etag: self.etag(),
        })
    }

    fn etag(&self) -> Option<String> {
        match self {
            ParquetFile::Local(_) => None,
            #[cfg(feature = "object-store")]
            ParquetFile::Remote(file) => file.etag().map(str::to_owned),
        }
    }

    /// `length` bytes from `start`.
    fn bytes(&self, start: u64, length: usize) -> io::Result<Bytes> {
        match self {
            ParquetFile::Local(file) => {
                let size = file.len();
                // A damaged footer may ask for more than the file holds:
                // nothing is allocated for that.
                if start
                    .checked_add(length as u64)
                    .is_none_or(|end| end > size)
                {
                    return Err(io::Error::other(format!(
                        "{length} bytes at {start} asked of a file of {size}"
                    )));
                }
                let mut file = file.try_clone()?;
                file.seek(SeekFrom::Start(start))?;
                // Checked above: the length is within the file.
                let mut buffer = Vec::with_capacity(length);
                file.take(length as u64).read_to_end(&mut buffer)?;
                if buffer.len() != length {
                    return Err(io::Error::other(format!(
                        "{length} bytes at {start} asked, {} read: the file shrank",
                        buffer.len()
                    )));
                }
                Ok(buffer.into())
            }
            #[cfg(feature = "object-store")]
            ParquetFile::Remote(file) => file.get(start..start + length as u64),
        }
    }
}

impl Length for ParquetFile {
    fn len(&self) -> u64 {
        match self {
            ParquetFile::Local(file) => file.len(),
            #[cfg(feature = "object-store")]
            ParquetFile::Remote(file) => file.size(),
        }
    }
}

impl ChunkReader for ParquetFile {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(match self {
            ParquetFile::Local(file) => {
                let mut file = file.try_clone()?;
                file.seek(SeekFrom::Start(start))?;
                Box::new(BufReader::new(file))
            }
            #[cfg(feature = "object-store")]
            ParquetFile::Remote(file) => Box::new(Ranges {
                file: std::sync::Arc::clone(file),
                at: start,
                chunk: Bytes::new(),
            }),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        Ok(self.bytes(start, length)?)
    }
}

/// A remote file read from an offset on, 64 KiB per request.
#[cfg(feature = "object-store")]
struct Ranges {
    file: std::sync::Arc<crate::sources::remote::RemoteFile>,
    at: u64,
    chunk: Bytes,
}

#[cfg(feature = "object-store")]
impl Read for Ranges {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.chunk.is_empty() && self.at < self.file.size() {
            let end = self.file.size().min(self.at + (64 << 10));
            self.chunk = self.file.get(self.at..end)?;
            self.at = end;
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}
