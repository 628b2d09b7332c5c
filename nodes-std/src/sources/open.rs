//! Opening a file of lines at a byte offset of its content: a seek for a
//! plain file, a decompression from the start for gzip and zstd (chosen by
//! the extension), with the errors a resume reports against the state key
//! at fault.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// The state key of the file's path.
pub(crate) const PATH: &str = "path";
/// The state key of the byte offset in the file's (decompressed) content.
pub(crate) const OFFSET: &str = "offset";

/// The read buffer of a file.
const BUFFER: usize = 64 << 10;

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

/// A reader of the decompressed bytes of `file`.
fn decompressed(
    file: File,
    kind: Compression,
) -> std::result::Result<Box<dyn BufRead + Send>, String> {
    match kind {
        Compression::None => Ok(Box::new(BufReader::with_capacity(BUFFER, file))),
        #[cfg(feature = "gzip")]
        Compression::Gzip => Ok(Box::new(BufReader::with_capacity(
            BUFFER,
            flate2::read::MultiGzDecoder::new(file),
        ))),
        #[cfg(not(feature = "gzip"))]
        Compression::Gzip => Err(
            "a gzip file, and gzip support is not compiled in: enable the `gzip` feature of nodes-std"
                .to_owned(),
        ),
        #[cfg(feature = "zstd")]
        Compression::Zstd => {
            let frames = super::zstd::Frames::new(BufReader::with_capacity(BUFFER, file))?;
            Ok(Box::new(BufReader::with_capacity(BUFFER, frames)))
        }
        #[cfg(not(feature = "zstd"))]
        Compression::Zstd => Err(
            "a zstd file, and zstd support is not compiled in: enable the `zstd` feature of nodes-std"
                .to_owned(),
        ),
    }
}

/// Why a saved position cannot be reopened: the key it is about, and what.
pub(crate) struct Reopen(pub(crate) &'static str, pub(crate) String);

/// Opens `path` at byte `offset` of its (decompressed) content: a seek for
/// a plain file, a decompression of the first `offset` bytes otherwise.
pub(crate) fn open_at(
    path: &Path,
    offset: u64,
) -> std::result::Result<Box<dyn BufRead + Send>, Reopen> {
    can_reopen_at(path, offset)?;
    let mut file = File::open(path).map_err(|e| Reopen(PATH, format!("cannot open: {e}")))?;
    let kind = compression(path);
    if kind == Compression::None {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Reopen(OFFSET, format!("cannot seek to offset {offset}: {e}")))?;
        return Ok(Box::new(BufReader::with_capacity(BUFFER, file)));
    }
    let mut reader = decompressed(file, kind).map_err(|m| Reopen(PATH, m))?;
    let skipped = io::copy(&mut (&mut reader).take(offset), &mut io::sink()).map_err(|e| {
        Reopen(
            OFFSET,
            format!("cannot decompress up to offset {offset}: {e}"),
        )
    })?;
    if skipped < offset {
        return Err(past_the_end(offset, "decompressed file", skipped));
    }
    Ok(reader)
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

/// Whether `path` can be reopened at `offset`, as far as its metadata
/// tells (a plain file's length): what a state check can learn without
/// opening the file, so that a damaged `path` is named where it is.
pub(crate) fn can_reopen_at(path: &Path, offset: u64) -> std::result::Result<(), Reopen> {
    let meta = std::fs::metadata(path).map_err(|e| Reopen(PATH, format!("cannot open: {e}")))?;
    if compression(path) == Compression::None && offset > meta.len() {
        return Err(past_the_end(offset, "file", meta.len()));
    }
    Ok(())
}
