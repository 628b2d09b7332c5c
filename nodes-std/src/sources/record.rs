//! [`RecordError`]: the bad record of a file reader, naming the file and
//! the line.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::Error;

/// A bad record of a file: the error inside the [`Error::User`] that
/// [`ReadLines`](crate::ReadLines) and [`ReadJsonl`](crate::ReadJsonl)
/// return for a file that cannot be opened or read, a line that is too
/// long, not UTF-8 or not JSON. Displayed as `path:line: what` (`path:
/// what` when no line was read).
///
/// ```
/// use nodes_std::prelude::*;
/// use nodes_std::{Files, RecordError};
///
/// let dir = std::env::temp_dir().join(format!("nodes-doc-record-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("a.jsonl"), "1\nnot json\n3\n")?;
/// let mut running = Files::in_dir(&dir)?.read_jsonl::<u32>().start()?;
/// assert_eq!(running.next().transpose()?, Some(1));
/// let Some(Err(Error::User { source, .. })) = running.next() else { panic!("an error") };
/// let record = source.downcast_ref::<RecordError>().expect("a RecordError");
/// assert_eq!((record.path(), record.line()), (dir.join("a.jsonl").as_path(), Some(2)));
/// assert_eq!(running.next().transpose()?, Some(3));
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RecordError {
    path: PathBuf,
    line: Option<u64>,
    message: String,
}

impl RecordError {
    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The line number (from 1), where the error is about a line.
    pub fn line(&self) -> Option<u64> {
        self.line
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for RecordError {}

/// A bad record at `path` (and `line`).
pub(crate) fn record_error(
    name: &'static str,
    path: &Path,
    line: Option<u64>,
    message: String,
) -> Error {
    Error::user(
        name,
        None,
        RecordError {
            path: path.to_path_buf(),
            line,
            message,
        },
    )
}
