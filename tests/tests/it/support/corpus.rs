//! Small corpora of text and JSON-lines files in temporary directories, for
//! the file-reading nodes (`Files`, `read_lines`, `read_jsonl`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A directory under cargo's temporary directory for integration tests,
/// removed when dropped.
#[derive(Debug)]
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// A new, empty directory named after `name` (unique in the process).
    pub(crate) fn new(name: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a temporary directory");
        TempDir(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `content` to `name` (relative; parent directories made).
    pub(crate) fn write(&self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create a directory");
        }
        std::fs::write(&path, content).expect("write a file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The values of the shared corpus's files, file by file: `f0.jsonl` ...
/// (`f2` is empty, `f4`'s last line has no end of line).
pub(crate) const SHARED_VALUES: [&[u64]; 5] =
    [&[0, 1, 2], &[10, 11], &[], &[30, 31, 32, 33], &[40, 41]];

/// The corpus the random-pipeline generator reads: one directory in cargo's
/// temporary directory (kept, and rewritten by each process with the same
/// content, each file replaced atomically), holding
/// [`SHARED_VALUES`] as `fN.jsonl` (one `{"v": value}` per line) and as
/// `fN.txt` (one value per line).
pub(crate) fn shared_corpus() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("spec-corpus-v1");
        std::fs::create_dir_all(&dir).expect("create the corpus directory");
        let write = |name: String, content: &str| {
            let tmp = dir.join(format!(".{name}.{}", std::process::id()));
            std::fs::write(&tmp, content).expect("write the corpus");
            std::fs::rename(&tmp, dir.join(name)).expect("write the corpus");
        };
        for (i, values) in SHARED_VALUES.iter().enumerate() {
            let mut jsonl = String::new();
            let mut txt = String::new();
            for v in *values {
                jsonl += &format!("{{\"v\": {v}}}\n");
                txt += &format!("{v}\n");
            }
            if i == 4 {
                jsonl.pop();
                txt.pop();
            }
            write(format!("f{i}.jsonl"), &jsonl);
            write(format!("f{i}.txt"), &txt);
        }
        dir
    })
}
