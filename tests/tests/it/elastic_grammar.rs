//! The grammar of file pipelines that `elastic` reshards, and a property
//! test over it: every pipeline it generates is accepted by
//! `elastic::check`, and saved on N ranks, resharded to M, then to K, it
//! delivers every record of the epoch exactly once over all ranks of all
//! generations (but for `pack_exact`'s short tails: at most one per rank),
//! by the provenance (file, line) of every token.
//!
//! ```text
//! pipeline := sources group stage*            (0 to 2 stages after the group)
//! sources  := source | mix(source, source)    (weighted or round-robin,
//!                                              AllDatasetsExhausted or
//!                                              CycleUntilAllDatasetsExhausted,
//!                                              over two files or more: one
//!                                              source per half of them)
//!           | mix(source, mix(source, source))
//!                                             (weighted over a round-robin,
//!                                              the same criterion, over four
//!                                              files or more: the even
//!                                              files, and each half of the
//!                                              odd ones)
//! source   := files reader record* sgroup     (0 to 3 record stages)
//! files    := Files::list(..).shuffle_files(seed).shard(rank, world)
//! reader   := read_lines | read_jsonl | read_parquet
//!           | interleave(1..=3, 1..=2, (read_jsonl | read_parquet) [prefetch(2)])
//!           | read_parquet over the row groups of the files
//!             (Files::list(..).parquet_row_groups().shuffle_files(seed)
//!              .shard(rank, world) in place of `files`)
//! record   := map | filter | filter_map | shuffle(1..=4) | try_map
//!           | par_map(1..=2) | prefetch(1..=3) | flat_map | unbatch
//!           | par_map(1..=2, out of order)
//! group    := none | batch(1..=3) + concat | pack(4) | pack_exact(4)
//!           | pack(4).with_segments()
//! sgroup   := none | batch(1..=3) + concat | pack(4)   (each source's own)
//! stage    := map | shuffle(1..=4) | par_map(1..=2) | prefetch(1..=3)
//!           | flat_map | unbatch | par_map(1..=2, out of order)
//! ```
//!
//! An out-of-order `par_map` stands anywhere but below a `flat_map` or
//! `unbatch` where it runs out of order (the API refuses that: they pull
//! their item again), where the grammar makes it an in-order one. Above an
//! interleave, a stage that does not count its source's items, a mix or a
//! pack it runs in order (no state could show its gaps there), and its
//! states are settled like an in-order one's.
//!
//! A `flat_map` splits a record into one record per token; an `unbatch`
//! does the same (each token then made a record of its own).
//!
//! Under a mix that restarts its sources, each token carries the epoch of
//! the `Files` run it was read in (see `elastic_cycling`), and the check is
//! per source pass: the first run (epoch 0) delivers each of the source's
//! tokens exactly once, and every later run each token at most once.
//!
//! The files are on disk, or with the `object-store` feature and an S3
//! server (`NODES_S3_ENDPOINT`) uploaded there and read as `s3://` URLs
//! (a quarter of the cases). Each file is plain, gzip (two members) or
//! zstd (two frames) when those features are on; for `read_parquet`, every file is Parquet (row groups
//! of 2 rows, pages of 1 row) with the `parquet` feature. Filters act on
//! records (a line's number), before the group, so what the epoch delivers
//! does not depend on the order. Where a threaded stage stands above a
//! filter, `try_map`, shuffle, pack, mix or interleave, the states pass
//! through `elastic::settle` before each reshard; elsewhere they reshard as
//! saved (the readers pass over what a threaded node read ahead).

use std::path::PathBuf;

use nodes_std::prelude::*;
use nodes_std::{
    Files, IterableWrapper, MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, ParallelOptions,
    StopCriteria, boxed_err, elastic,
};
use proptest::prelude::*;

use crate::elastic_cycling::Tag;
use crate::elastic_files::{Corpus, generation};
use crate::support::faulty::uneven;
use crate::support::watch::config;

type Boxed<T> = Box<dyn Node<Item = T>>;

/// Where the files are read from: `None` from disk, else through this
/// store from the S3 server.
#[cfg(feature = "object-store")]
type Place = Option<nodes_std::Store>;
#[cfg(not(feature = "object-store"))]
type Place = Option<NoStore>;

/// Without the feature, no place has a store.
#[cfg(not(feature = "object-store"))]
#[derive(Clone, Debug)]
enum NoStore {}

/// `reader`, reading through the place's store, if it has one.
macro_rules! placed {
    ($reader:expr, $place:expr) => {{
        let reader = $reader;
        #[cfg(feature = "object-store")]
        let reader = match $place {
            Some(store) => reader.store(store.clone()),
            None => reader,
        };
        #[cfg(not(feature = "object-store"))]
        let _ = $place;
        reader
    }};
}

#[derive(Clone, Copy, Debug)]
enum Packing {
    Plain,
    #[cfg(feature = "gzip")]
    Gzip,
    #[cfg(feature = "zstd")]
    Zstd,
}

#[derive(Clone, Copy, Debug)]
enum Reader {
    Lines,
    Jsonl,
    /// `read_parquet` of files written as Parquet.
    Parquet,
    /// `read_parquet` of their row groups (`parquet_row_groups`), which
    /// are shuffled and sharded in place of the files.
    RowGroups,
    Interleave {
        cycle: usize,
        block: usize,
        prefetched: bool,
        /// Its function reads Parquet files (else JSON lines).
        parquet: bool,
    },
}

impl Reader {
    /// Whether the files are written as Parquet.
    fn parquet(self) -> bool {
        matches!(
            self,
            Reader::Parquet | Reader::RowGroups | Reader::Interleave { parquet: true, .. }
        )
    }
}

impl Stage {
    fn threaded(self) -> bool {
        matches!(
            self,
            Stage::ParMap(_) | Stage::Unordered(_) | Stage::Prefetch(_)
        )
    }

    /// Whether its items stand for a known number of its source's.
    fn counts(self) -> bool {
        matches!(self, Stage::Map | Stage::ParMap(_) | Stage::Prefetch(_))
    }
}

impl Shape {
    /// The shape over `files` files: a mix needs a file for each of its
    /// sources (a nested one, four), and with no mix a `par_map` may run
    /// out of order in more places.
    fn fitted(self, files: usize) -> Shape {
        match files {
            0 | 1 => Shape {
                mix: Mix::None,
                ..self
            }
            .unordered_where_accepted(),
            2 | 3 if matches!(self.mix, Mix::Nested) => Shape {
                mix: Mix::Weighted,
                ..self
            },
            _ => self,
        }
    }

    /// The shape with an out-of-order `par_map` made an in-order one where
    /// the API refuses it: below a `flat_map` or `unbatch` (they pull their
    /// item again), where it does run out of order (not above an
    /// interleave, a stage that does not count its source's items, a mix
    /// or a pack: there it runs in order).
    fn unordered_where_accepted(mut self) -> Shape {
        let mut gap = matches!(self.reader, Reader::Interleave { .. });
        let middle = !matches!(self.mix, Mix::None) || self.packs();
        let records = self.record.len();
        let expands: Vec<bool> = self
            .record
            .iter()
            .chain(&self.after)
            .map(|s| matches!(s, Stage::FlatMap | Stage::Unbatch))
            .collect();
        let stages = self.record.iter_mut().chain(self.after.iter_mut());
        for (k, stage) in stages.enumerate() {
            gap |= k == records && middle;
            if let Stage::Unordered(workers) = *stage
                && !gap
                && expands[k + 1..].iter().any(|&e| e)
            {
                *stage = Stage::ParMap(workers);
            }
            gap |= !stage.counts();
        }
        self
    }

    /// Whether a pack stands between the record stages and the stages
    /// after the group.
    fn packs(&self) -> bool {
        [self.source_group, self.group]
            .iter()
            .any(|g| matches!(g, Group::Pack | Group::PackExact | Group::PackSegments))
    }

    /// Whether a threaded stage stands above an interleave, filter,
    /// `try_map`, shuffle, pack or mix: its states then need
    /// `elastic::settle` before a reshard.
    fn needs_settle(&self) -> bool {
        let mut gap = matches!(self.reader, Reader::Interleave { .. });
        let mut needs = false;
        let mut place = |stage: &Stage, gap: &mut bool| {
            needs |= stage.threaded() && *gap;
            *gap |= !stage.counts();
        };
        for stage in &self.record {
            place(stage, &mut gap);
        }
        gap |= !matches!(self.mix, Mix::None) || self.packs();
        for stage in &self.after {
            place(stage, &mut gap);
        }
        needs
    }
}

/// The records of the Parquet files `files` names.
#[cfg(feature = "parquet")]
fn parquet_lines<S>(files: S, place: &Place) -> Boxed<String>
where
    S: Node + Send + 'static,
    S::Item: nodes_std::ParquetPart,
{
    let read = placed!(files.read_parquet::<Line>(), place);
    read.map(|l: Line| l.line).boxed()
}

#[cfg(not(feature = "parquet"))]
fn parquet_lines<S: Node>(_: S, _: &Place) -> Boxed<String> {
    unreachable!("generated with the parquet feature only")
}

/// The row groups of the Parquet files `files` names, their footers read
/// from the place.
#[cfg(feature = "parquet")]
fn row_groups(files: Files, place: &Place) -> nodes_std::ParquetRowGroups {
    #[cfg(feature = "object-store")]
    if let Some(store) = place {
        return files.parquet_row_groups_in(store).unwrap();
    }
    let _ = place;
    files.parquet_row_groups().unwrap()
}

#[cfg(not(feature = "parquet"))]
fn row_groups(_: Files, _: &Place) -> Files {
    unreachable!("generated with the parquet feature only")
}

/// A Parquet file's row: one record.
#[cfg(feature = "parquet")]
#[derive(serde::Deserialize)]
struct Line {
    line: String,
}

#[derive(Clone, Copy, Debug)]
enum Stage {
    Map,
    Filter,
    FilterMap,
    TryMap,
    Shuffle(usize),
    ParMap(usize),
    /// Out of order, slow on some records so that it delivers ahead of a gap.
    Unordered(usize),
    Prefetch(usize),
    FlatMap,
    Unbatch,
}

#[derive(Clone, Copy, Debug)]
enum Group {
    None,
    Batch(usize),
    Pack,
    PackExact,
    PackSegments,
}

#[derive(Clone, Copy, Debug)]
enum Mix {
    None,
    Weighted,
    RoundRobin,
    /// A weighted mix of a source and a round-robin mix of two.
    Nested,
}

#[derive(Clone, Debug)]
struct Shape {
    reader: Reader,
    record: Vec<Stage>,
    /// Each source's own group, above its record stages: none, a batch or
    /// a pack (which drop nothing).
    source_group: Group,
    mix: Mix,
    /// The mix restarts its sources (`CycleUntilAllDatasetsExhausted`).
    cycling: bool,
    group: Group,
    after: Vec<Stage>,
}

impl Stage {}

/// A token's line number (a token is `f:l#t`).
fn number(token: &str) -> u32 {
    let line = token.split(':').nth(1).unwrap();
    line.split('#').next().unwrap().parse().unwrap()
}

/// Whether the filters keep a record (a line's tokens).
fn kept(record: &[String]) -> bool {
    !number(&record[0]).is_multiple_of(3)
}

/// A line's record: three tokens naming it.
fn tokens(line: String) -> Vec<String> {
    let line = line.trim_matches('"');
    (0..3).map(|t| format!("{line}#{t}")).collect()
}

fn stage(node: Boxed<Vec<String>>, stage: Stage) -> Boxed<Vec<String>> {
    match stage {
        Stage::Map => node.map(|r: Vec<String>| r).boxed(),
        Stage::Filter => node.filter(|r: &Vec<String>| kept(r)).boxed(),
        Stage::FilterMap => node
            .filter_map(|r: Vec<String>| kept(&r).then_some(r))
            .boxed(),
        Stage::TryMap => node
            .try_map(boxed_err(|r: Vec<String>| Ok::<_, std::io::Error>(r)))
            .boxed(),
        Stage::Shuffle(buffer) => node.shuffle(buffer, 9).unwrap().boxed(),
        Stage::ParMap(workers) => node
            .par_map(Ok, ParallelOptions::new(workers))
            .unwrap()
            .boxed(),
        Stage::Unordered(workers) => node
            .par_map(uneven, ParallelOptions::new(workers).in_order(false))
            .unwrap()
            .boxed(),
        Stage::Prefetch(n) => node.prefetch(n).unwrap().boxed(),
        Stage::FlatMap => node
            .flat_map(|r: Vec<String>| r.into_iter().map(|t| vec![t]).collect::<Vec<_>>())
            .boxed(),
        Stage::Unbatch => node.unbatch().map(|t: String| vec![t]).boxed(),
    }
}

/// One source: `files` read as `shape` says, its records staged.
fn source(
    shape: &Shape,
    files: Vec<PathBuf>,
    place: &Place,
    rank: u64,
    world: u64,
) -> Boxed<Vec<String>> {
    let listed = Files::list(files).unwrap();
    if let Reader::RowGroups = shape.reader {
        let units = row_groups(listed, place).shuffle_files(17);
        let read = parquet_lines(units.shard(rank, world).unwrap(), place);
        return staged(shape, read.map(tokens).boxed());
    }
    let files = listed.shuffle_files(17).shard(rank, world).unwrap();
    let read: Boxed<Vec<String>> = match shape.reader {
        Reader::RowGroups => unreachable!("read above"),
        Reader::Lines => placed!(files.read_lines(), place).map(tokens).boxed(),
        Reader::Jsonl => placed!(files.read_jsonl::<String>(), place)
            .map(tokens)
            .boxed(),
        Reader::Parquet => parquet_lines(files, place).map(tokens).boxed(),
        Reader::Interleave {
            cycle,
            block,
            prefetched,
            parquet,
        } => files
            .interleave(cycle, block, {
                let place = place.clone();
                move |path: PathBuf| {
                    let one = IterableWrapper::new(vec![path]);
                    let one: Boxed<String> = if parquet {
                        parquet_lines(one, &place)
                    } else {
                        placed!(one.read_jsonl::<String>(), &place).boxed()
                    };
                    if prefetched {
                        one.prefetch(2).unwrap().boxed()
                    } else {
                        one
                    }
                }
            })
            .unwrap()
            .map(tokens)
            .boxed(),
    };
    staged(shape, read)
}

/// `read` with the shape's record stages and its sources' group above it.
fn staged(shape: &Shape, read: Boxed<Vec<String>>) -> Boxed<Vec<String>> {
    let staged = shape.record.iter().fold(read, |node, &s| stage(node, s));
    grouped(staged, shape.source_group)
}

/// `node` grouped as `group` says.
fn grouped(node: Boxed<Vec<String>>, group: Group) -> Boxed<Vec<String>> {
    match group {
        Group::None => node,
        Group::Batch(n) => node
            .batch(n)
            .unwrap()
            .map(|b: Vec<Vec<String>>| b.concat())
            .boxed(),
        Group::Pack => node.pack(4).unwrap().boxed(),
        Group::PackExact => node.pack_exact(4).unwrap().boxed(),
        Group::PackSegments => node
            .pack(4)
            .unwrap()
            .with_segments()
            .map(|p: nodes_std::Packed<String>| p.tokens)
            .boxed(),
    }
}

fn build(
    shape: &Shape,
    files: &[PathBuf],
    place: &Place,
    rank: u64,
    world: u64,
) -> Boxed<Vec<String>> {
    let half = |parity: usize| {
        files
            .iter()
            .skip(parity)
            .step_by(2)
            .cloned()
            .collect::<Vec<_>>()
    };
    // Under a mix that restarts them, each token names its run's epoch.
    let tagged = |files| -> Boxed<Vec<String>> {
        let read = source(shape, files, place, rank, world);
        if !shape.cycling {
            return read;
        }
        let tag = |(e, r): (u64, Vec<String>)| r.into_iter().map(|t| format!("{e}|{t}")).collect();
        Tag::new(read).map(tag).boxed()
    };
    let sources = || [("even", tagged(half(0))), ("odd", tagged(half(1)))];
    // Every other one of the odd files.
    let quarter = |skip: usize| {
        half(1)
            .into_iter()
            .skip(skip)
            .step_by(2)
            .collect::<Vec<_>>()
    };
    let stop = match shape.cycling {
        true => StopCriteria::CycleUntilAllDatasetsExhausted,
        false => StopCriteria::AllDatasetsExhausted,
    };
    // The shape was fitted to the files (`Shape::fitted`).
    let mixed: Boxed<Vec<String>> = match shape.mix {
        Mix::None => source(shape, files.to_vec(), place, rank, world),
        Mix::Weighted => MultiNodeWeightedSampler::new(sources(), [("even", 0.6), ("odd", 0.4)])
            .unwrap()
            .stop_criteria(stop)
            .seed(5)
            .rank(rank, world)
            .unwrap()
            .boxed(),
        Mix::RoundRobin => MultiNodeRoundRobinSampler::new(sources())
            .unwrap()
            .stop_criteria(stop)
            .boxed(),
        Mix::Nested => {
            let odd = [("odd_a", tagged(quarter(0))), ("odd_b", tagged(quarter(1)))];
            let odd = MultiNodeRoundRobinSampler::new(odd)
                .unwrap()
                .stop_criteria(stop)
                .boxed();
            let sources = [("even", tagged(half(0))), ("odd", odd)];
            MultiNodeWeightedSampler::new(sources, [("even", 0.6), ("odd", 0.4)])
                .unwrap()
                .stop_criteria(stop)
                .seed(5)
                .rank(rank, world)
                .unwrap()
                .boxed()
        }
    };
    let grouped = grouped(mixed, shape.group);
    shape.after.iter().fold(grouped, |node, &s| stage(node, s))
}

/// Writes the corpus: file `f` holds `lines[f]` JSON strings `"f:l"`,
/// stored as `packing[f]` says.
fn write(corpus: &Corpus, lines: &[u32], packing: &[Packing]) -> Vec<PathBuf> {
    lines
        .iter()
        .zip(packing)
        .enumerate()
        .map(|(f, (&n, &packing))| {
            let text: String = (0..n).map(|l| format!("\"{f}:{l}\"\n")).collect();
            let (half, rest) = text.as_bytes().split_at(text.len() / 2);
            let (name, bytes) = match packing {
                Packing::Plain => (format!("{f:02}.jsonl"), text.clone().into_bytes()),
                #[cfg(feature = "gzip")]
                Packing::Gzip => {
                    use std::io::Write;
                    let mut bytes = Vec::new();
                    for part in [half, rest] {
                        let level = flate2::Compression::default();
                        let mut enc = flate2::write::GzEncoder::new(Vec::new(), level);
                        enc.write_all(part).unwrap();
                        bytes.extend(enc.finish().unwrap());
                    }
                    (format!("{f:02}.jsonl.gz"), bytes)
                }
                #[cfg(feature = "zstd")]
                Packing::Zstd => {
                    use ruzstd::encoding::{CompressionLevel, compress_to_vec};
                    let mut bytes = Vec::new();
                    for part in [half, rest] {
                        bytes.extend(compress_to_vec(part, CompressionLevel::Fastest));
                    }
                    (format!("{f:02}.jsonl.zst"), bytes)
                }
            };
            let _ = (half, rest);
            let path = corpus.dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect()
}

/// Writes the corpus as Parquet: file `f` holds `lines[f]` rows, column
/// `line` = `"f:l"`, in row groups of 2 rows and pages of 1 (so that saves
/// and restores fall inside and between row groups and pages).
#[cfg(feature = "parquet")]
fn write_parquet(corpus: &Corpus, lines: &[u32]) -> Vec<PathBuf> {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    let props = || {
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(2))
            .set_data_page_row_count_limit(1)
            .set_write_batch_size(1)
            .build()
    };
    lines
        .iter()
        .enumerate()
        .map(|(f, &n)| {
            let path = corpus.dir.join(format!("{f:02}.parquet"));
            let rows = StringArray::from_iter_values((0..n).map(|l| format!("{f}:{l}")));
            let batch = RecordBatch::try_from_iter([("line", Arc::new(rows) as ArrayRef)]).unwrap();
            let file = std::fs::File::create(&path).unwrap();
            let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props())).unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            path
        })
        .collect()
}

#[cfg(not(feature = "parquet"))]
fn write_parquet(_: &Corpus, _: &[u32]) -> Vec<PathBuf> {
    unreachable!("generated with the parquet feature only")
}

/// Uploads `paths` to the S3 server, under a prefix of their own, and
/// returns their URLs and a store that reads them; with `s3` false, or
/// without the feature, returns them as they are.
fn placed(paths: Vec<PathBuf>, s3: bool) -> (Vec<PathBuf>, Place) {
    #[cfg(feature = "object-store")]
    if s3 {
        use std::sync::OnceLock;
        use std::sync::atomic::{AtomicUsize, Ordering};

        use crate::remote::{Bucket, endpoint, with_retry};

        static BUCKET: OnceLock<(String, Bucket)> = OnceLock::new();
        static CASE: AtomicUsize = AtomicUsize::new(0);
        let (endpoint, bucket) = BUCKET.get_or_init(|| {
            let endpoint = endpoint().expect("S3 cases are generated with a server only");
            let bucket = Bucket::new(&endpoint, "grammar");
            (endpoint, bucket)
        });
        let case = CASE.fetch_add(1, Ordering::Relaxed);
        let urls = paths
            .iter()
            .map(|path| {
                let key = format!("case{case}/{}", path.file_name().unwrap().to_str().unwrap());
                bucket.put(&key, std::fs::read(path).unwrap());
                PathBuf::from(bucket.url(&key))
            })
            .collect();
        let store = with_retry(endpoint, nodes_std::Retry::new().attempts(1));
        return (urls, Some(store));
    }
    let _ = s3;
    (paths, None)
}

/// Whether to read from the S3 server: with the feature and a server only.
fn s3() -> impl Strategy<Value = bool> {
    let server = cfg!(feature = "object-store") && std::env::var_os("NODES_S3_ENDPOINT").is_some();
    prop::sample::select(vec![false, false, false, server])
}

/// Checks the tokens delivered under a mix that restarts its sources
/// (each `epoch|token`), per source (the files of one parity): those of
/// the first run (epoch 0, on every rank) are the source's tokens, each at
/// most once, and, where `later_once`, every later run delivers a token of
/// the source at most once. Returns how many of the first run's tokens
/// were not delivered.
///
/// Under nested mixes that restart their sources, a restart of the inner
/// mix starts its sources at the epoch after their first runs, which their
/// own restarts in the pass before had read already: only the first runs
/// are told apart by their epochs there.
fn per_source_pass(
    delivered: &[String],
    expected: &[String],
    later_once: bool,
) -> Result<u64, String> {
    let file = |token: &str| token.split(':').next().unwrap().parse::<usize>().unwrap();
    let mut dropped = 0;
    for parity in 0..2 {
        let ours: Vec<&String> = expected.iter().filter(|t| file(t) % 2 == parity).collect();
        let mut runs: Vec<(u64, &str)> = delivered
            .iter()
            .map(|t| t.split_once('|').expect("a token with its epoch"))
            .filter(|(_, t)| file(t) % 2 == parity)
            .map(|(e, t)| (e.parse().unwrap(), t))
            .collect();
        runs.sort();
        let checked = |w: &&[(u64, &str)]| later_once || w[0].0 == 0;
        if let Some(w) = runs.windows(2).filter(checked).find(|w| w[0] == w[1]) {
            return Err(format!("{:?} delivered twice in one run", w[0]));
        }
        if let Some(stray) = runs.iter().find(|(_, t)| !ours.iter().any(|o| o == t)) {
            return Err(format!("{stray:?} is not a token of its source"));
        }
        let first = runs.iter().filter(|(e, _)| *e == 0).count();
        dropped += (ours.len() - first) as u64;
    }
    Ok(dropped)
}

/// Every token the epoch delivers, sorted.
fn expected(shape: &Shape, lines: &[u32]) -> Vec<String> {
    let filtered = shape
        .record
        .iter()
        .any(|s| matches!(s, Stage::Filter | Stage::FilterMap));
    let mut all: Vec<String> = lines
        .iter()
        .enumerate()
        .flat_map(|(f, &n)| (0..n).map(move |l| tokens(format!("{f}:{l}"))))
        .filter(|record| !filtered || kept(record))
        .flatten()
        .collect();
    all.sort();
    all
}

fn packing() -> impl Strategy<Value = Packing> {
    let kinds = [
        Some(Packing::Plain),
        #[cfg(feature = "gzip")]
        Some(Packing::Gzip),
        #[cfg(feature = "zstd")]
        Some(Packing::Zstd),
    ];
    prop::sample::select(kinds.into_iter().flatten().collect::<Vec<_>>())
}

/// Whether to read Parquet files: only with the feature.
fn parquet() -> impl Strategy<Value = bool> {
    prop::sample::select(vec![false, cfg!(feature = "parquet")])
}

fn record() -> impl Strategy<Value = Stage> {
    let plain = prop_oneof![
        Just(Stage::Map),
        Just(Stage::Filter),
        Just(Stage::FilterMap),
        Just(Stage::TryMap),
        (1usize..=4).prop_map(Stage::Shuffle),
        Just(Stage::FlatMap),
        Just(Stage::Unbatch),
    ];
    let threaded = prop_oneof![
        (1usize..=2).prop_map(Stage::ParMap),
        (1usize..=2).prop_map(Stage::Unordered),
        (1usize..=3).prop_map(Stage::Prefetch),
    ];
    prop_oneof![3 => plain, 1 => threaded]
}

fn after() -> impl Strategy<Value = Stage> {
    let threaded = prop_oneof![
        (1usize..=2).prop_map(Stage::ParMap),
        (1usize..=2).prop_map(Stage::Unordered),
        (1usize..=3).prop_map(Stage::Prefetch),
    ];
    let plain = prop_oneof![
        Just(Stage::Map),
        (1usize..=4).prop_map(Stage::Shuffle),
        Just(Stage::FlatMap),
        Just(Stage::Unbatch),
    ];
    prop_oneof![2 => plain, 1 => threaded]
}

fn shape() -> impl Strategy<Value = Shape> {
    let reader = prop_oneof![
        Just(Reader::Lines),
        Just(Reader::Jsonl),
        (1usize..=3, 1usize..=2, any::<bool>(), parquet()).prop_map(
            |(cycle, block, prefetched, parquet)| Reader::Interleave {
                cycle,
                block,
                prefetched,
                parquet,
            }
        ),
        parquet().prop_map(|p| if p { Reader::Parquet } else { Reader::Lines }),
        parquet().prop_map(|p| if p { Reader::RowGroups } else { Reader::Jsonl }),
    ];
    let mix = prop_oneof![
        Just(Mix::None),
        Just(Mix::Weighted),
        Just(Mix::RoundRobin),
        Just(Mix::Nested)
    ];
    let group = prop_oneof![
        Just(Group::None),
        (1usize..=3).prop_map(Group::Batch),
        Just(Group::Pack),
        Just(Group::PackExact),
        Just(Group::PackSegments),
    ];
    let source_group = prop_oneof![
        2 => Just(Group::None),
        1 => (1usize..=3).prop_map(Group::Batch),
        1 => Just(Group::Pack),
    ];
    let stages = (
        prop::collection::vec(record(), 0..=3),
        source_group,
        prop::collection::vec(after(), 0..=2),
    );
    (reader, mix, any::<bool>(), group, stages).prop_map(
        |(reader, mix, cycling, group, (record, source_group, after))| {
            Shape {
                reader,
                record,
                source_group,
                mix,
                cycling,
                group,
                after,
            }
            .unordered_where_accepted()
        },
    )
}

proptest! {
    #![proptest_config(config(512, 0x0e1a_571c))]

    #[test]
    fn every_pipeline_of_the_grammar_reshards_exactly_once(
        shape in shape(),
        files in prop::collection::vec((0u32..10, packing()), 1..8),
        n in 1u64..=4,
        m in 1u64..=5,
        k in 1u64..=3,
        takes in prop::collection::vec(0usize..10, 9),
        s3 in s3(),
    ) {
        let corpus = Corpus::empty("grammar");
        let (lines, packing): (Vec<u32>, Vec<Packing>) = files.into_iter().unzip();
        let shape = shape.fitted(lines.len());
        let paths = if shape.reader.parquet() {
            write_parquet(&corpus, &lines)
        } else {
            write(&corpus, &lines, &packing)
        };
        let (paths, place) = placed(paths, s3);
        let builder = |rank, world| build(&shape, &paths, &place, rank, world);
        // Only where `reshard` needs it: the other threaded stages reshard
        // through the readers' own skip.
        let settle = shape.needs_settle();
        elastic::check(&builder(0, n).describe()).unwrap();
        let mut delivered = Vec::new();
        let first = generation(&builder, None, n, Some(&takes[..n as usize]), &mut delivered, settle);
        let second = generation(&builder, Some(&first), m, Some(&takes[4..4 + m as usize]), &mut delivered, settle);
        generation(&builder, Some(&second), k, None, &mut delivered, settle);
        delivered.sort();
        let expected = expected(&shape, &lines);
        let exact = matches!(shape.group, Group::PackExact);
        if shape.cycling && !matches!(shape.mix, Mix::None) && lines.len() >= 2 {
            let later_once = !matches!(shape.mix, Mix::Nested);
            let dropped = per_source_pass(&delivered, &expected, later_once)
                .map_err(TestCaseError::fail)?;
            prop_assert!(exact || dropped == 0, "{dropped} tokens dropped");
            prop_assert!(dropped <= 3 * (n + m + k), "{dropped} tokens dropped");
        } else if exact {
            prop_assert!(delivered.windows(2).all(|w| w[0] != w[1]), "a token twice: {delivered:?}");
            prop_assert!(delivered.iter().all(|t| expected.binary_search(t).is_ok()), "a stray token");
            // A source of a mix ends its share on its own: its tail is the packer's.
            let dropped = (expected.len() - delivered.len()) as u64;
            prop_assert!(dropped <= 3 * (n + m + k), "{dropped} tokens dropped");
        } else {
            prop_assert_eq!(delivered, expected);
        }
    }
}
