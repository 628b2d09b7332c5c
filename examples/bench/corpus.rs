//! The realistic cases' workload: a generated JSONL corpus, the line reader
//! and the parse-and-tokenize step, shared by both sides so that neither can
//! flatter the other.
//!
//! The corpus is two datasets written to a temporary directory: a large
//! common one (64,000 records) and a small rare one (16,000 longer records),
//! about 17 MB in all, generated from a seeded ChaCha8 generator: the same
//! bytes on every run and machine (`corpus_fnv` in the output says so).
//! Records look like
//!
//! ```json
//! {"id":17,"source":"common","lang":"en","quality":0.734,"text":"word word ..."}
//! ```
//!
//! with words drawn from a skewed vocabulary, and about one record in eight
//! holding an escaped quote or a non-ASCII character, so that the parser
//! cannot always borrow the text.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Token ids are FNV-1a of the word, modulo this.
pub(crate) const VOCAB_SIZE: u64 = 32_000;

/// One dataset's shape.
struct Spec {
    name: &'static str,
    records: u64,
    /// Words per record: uniform in this range.
    words: (u64, u64),
}

const SPECS: [Spec; 2] = [
    Spec {
        name: "common",
        records: 64_000,
        words: (8, 26),
    },
    Spec {
        name: "rare",
        records: 16_000,
        words: (12, 40),
    },
];

/// The generated corpus; the directory is removed on drop.
#[derive(Debug)]
pub(crate) struct Corpus {
    dir: PathBuf,
    /// The files, in `SPECS` order (common, rare).
    pub(crate) files: Vec<JsonlFile>,
    /// Records per file.
    pub(crate) records: Vec<u64>,
    pub(crate) bytes: u64,
    /// FNV-1a of every byte written, both files in order.
    pub(crate) fnv: nodes_std::Fnv1a64,
}

impl Corpus {
    /// Writes the corpus (`divisor` 10 writes a tenth of the records, for
    /// `BENCH_QUICK`).
    pub(crate) fn generate(divisor: u64) -> io::Result<Corpus> {
        let dir = std::env::temp_dir().join(format!("nodes-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut corpus = Corpus {
            dir,
            files: Vec::new(),
            records: Vec::new(),
            bytes: 0,
            fnv: nodes_std::Fnv1a64::default(),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(2026);
        let vocabulary = vocabulary(&mut rng);
        for spec in &SPECS {
            let path = corpus.dir.join(format!("{}.jsonl", spec.name));
            let records = spec.records / divisor;
            let mut out = Hashing {
                inner: BufWriter::new(File::create(&path)?),
                fnv: corpus.fnv,
                bytes: 0,
            };
            for id in 0..records {
                write_record(&mut out, &mut rng, &vocabulary, spec, id)?;
            }
            out.inner.flush()?;
            corpus.fnv = out.fnv;
            corpus.bytes += out.bytes;
            corpus.files.push(JsonlFile(path.into()));
            corpus.records.push(records);
        }
        Ok(corpus)
    }

    pub(crate) fn total_records(&self) -> u64 {
        self.records.iter().sum()
    }
}

impl Drop for Corpus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// 20,000 lowercase words of 2 to 11 letters.
fn vocabulary(rng: &mut ChaCha8Rng) -> Vec<String> {
    (0..20_000)
        .map(|_| {
            let len = rng.random_range(2..=11);
            (0..len)
                .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
                .collect()
        })
        .collect()
}

fn write_record(
    out: &mut impl Write,
    rng: &mut ChaCha8Rng,
    vocabulary: &[String],
    spec: &Spec,
    id: u64,
) -> io::Result<()> {
    let quality: f64 = rng.random();
    write!(
        out,
        r#"{{"id":{id},"source":"{}","lang":"en","quality":{quality:.3},"text":""#,
        spec.name
    )?;
    let words = rng.random_range(spec.words.0..=spec.words.1);
    for i in 0..words {
        if i > 0 {
            out.write_all(b" ")?;
        }
        // Skewed towards the first words, as real text is.
        let u: f64 = rng.random();
        let word = &vocabulary[(u * u * u * vocabulary.len() as f64) as usize];
        out.write_all(word.as_bytes())?;
    }
    // About one record in eight needs unescaping.
    match rng.random_range(0..16u8) {
        0 => out.write_all(br#" \"quoted\" words"#)?,
        1 => out.write_all(br" caf\u00e9 na\u00efve")?,
        _ => {}
    }
    out.write_all(b"\"}\n")
}

/// A writer that hashes and counts what it writes.
struct Hashing<W> {
    inner: W,
    fnv: nodes_std::Fnv1a64,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        std::hash::Hasher::write(&mut self.fnv, &buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

// --- reading lines ---

/// One JSONL file as a re-iterable collection of lines, for
/// [`IterableWrapper`](nodes_std::IterableWrapper): each pass opens the file
/// and streams it through `BufRead::lines()`.
#[derive(Debug, Clone)]
pub(crate) struct JsonlFile(Arc<Path>);

impl JsonlFile {
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl IntoIterator for JsonlFile {
    type Item = io::Result<String>;
    type IntoIter = Lines;

    fn into_iter(self) -> Lines {
        match File::open(&self.0) {
            Ok(file) => Lines {
                lines: Some(BufReader::new(file).lines()),
                error: None,
            },
            Err(err) => Lines {
                lines: None,
                error: Some(err),
            },
        }
    }
}

/// The lines of a [`JsonlFile`]; a file that cannot be opened is one `Err`.
#[derive(Debug)]
pub(crate) struct Lines {
    lines: Option<io::Lines<BufReader<File>>>,
    error: Option<io::Error>,
}

impl Iterator for Lines {
    type Item = io::Result<String>;

    fn next(&mut self) -> Option<io::Result<String>> {
        if let Some(err) = self.error.take() {
            return Some(Err(err));
        }
        self.lines.as_mut()?.next()
    }
}

// --- parse and tokenize ---

/// A tokenized record: what the shuffle buffers hold and the batches carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sample {
    pub(crate) id: u64,
    pub(crate) tokens: Vec<u32>,
}

/// The fields the pipeline reads; serde skips the others.
#[derive(Deserialize)]
struct Record<'a> {
    id: u64,
    #[serde(borrow)]
    text: Cow<'a, str>,
}

/// Parses one JSONL line and tokenizes its text: FNV-1a (64-bit) of each
/// whitespace-separated word, modulo [`VOCAB_SIZE`].
pub(crate) fn tokenize(line: &str) -> io::Result<Sample> {
    let record: Record<'_> = serde_json::from_str(line)?;
    let tokens = record
        .text
        .split_whitespace()
        .map(|word| (fnv1a(word.as_bytes()) % VOCAB_SIZE) as u32)
        .collect();
    Ok(Sample {
        id: record.id,
        tokens,
    })
}

/// The FNV-1a prime, for the order-sensitive chain of [`Checksum`].
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    nodes_std::Fnv1a64::hash(bytes)
}

// --- what the consumer checks ---

/// What a consumer saw: both sides must see the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Checksum {
    pub(crate) batches: u64,
    pub(crate) records: u64,
    pub(crate) tokens: u64,
    /// Order-sensitive: records and batch boundaries in sequence.
    pub(crate) ordered: u64,
    /// Order-insensitive: the wrapping sum of per-record hashes.
    pub(crate) multiset: u64,
}

impl Checksum {
    /// Takes one batch. The per-record hash reads the id, the length and
    /// three tokens, so the consumer costs about the same at every stage
    /// and never dominates; `full` also hashes every token.
    #[inline]
    pub(crate) fn batch(&mut self, batch: &[Sample], full: bool) {
        self.batches += 1;
        self.ordered = (self.ordered ^ batch.len() as u64).wrapping_mul(FNV_PRIME);
        for sample in batch {
            self.record(sample, full);
        }
    }

    /// Takes one line (for the read-only stage): its length.
    #[inline]
    pub(crate) fn line(&mut self, line: &str) {
        self.records += 1;
        self.tokens += line.len() as u64;
        self.ordered = (self.ordered ^ line.len() as u64).wrapping_mul(FNV_PRIME);
    }

    /// Takes one record (for the stages before batching).
    #[inline]
    pub(crate) fn record(&mut self, sample: &Sample, full: bool) {
        let t = &sample.tokens;
        let mut h = sample.id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ t.len() as u64;
        if let (Some(first), Some(last)) = (t.first(), t.last()) {
            h = (h ^ u64::from(*first)).wrapping_mul(FNV_PRIME);
            h = (h ^ u64::from(t[t.len() / 2])).wrapping_mul(FNV_PRIME);
            h = (h ^ u64::from(*last)).wrapping_mul(FNV_PRIME);
        }
        if full {
            for &token in t {
                h = (h ^ u64::from(token)).wrapping_mul(FNV_PRIME);
            }
        }
        self.records += 1;
        self.tokens += t.len() as u64;
        self.ordered = (self.ordered ^ h).wrapping_mul(FNV_PRIME);
        self.multiset = self.multiset.wrapping_add(h);
    }

    /// Whether `other` saw the same records (ignoring order and batches).
    pub(crate) fn same_multiset(&self, other: &Checksum) -> bool {
        (self.records, self.tokens, self.multiset) == (other.records, other.tokens, other.multiset)
    }
}
