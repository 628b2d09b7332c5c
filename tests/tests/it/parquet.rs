//! `read_parquet` and `read_parquet_batches` over files written by the
//! arrow-rs writer: every row once and in order across files and row
//! groups, as serde rows (of every column type) and as slices; column
//! projection; a state after every row resumes exactly; a changed file and
//! an edited position are refused by name; bad files and rows are errors
//! naming them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch, StringArray};
use nodes_std::prelude::*;
use nodes_std::testing::assert_save_load;
use nodes_std::{Files, IterableWrapper, ReadParquet, RowGroup, Sharder};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde::Deserialize;

/// A directory removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!(
            "nodes-parquet-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Row {
    pub(crate) id: i64,
    text: Option<String>,
    tokens: Vec<i64>,
}

/// The rows of file `f`: ids `f * 1000 ..`, every fifth text null.
pub(crate) fn rows(f: i64, n: i64) -> Vec<Row> {
    (0..n)
        .map(|i| {
            let id = f * 1000 + i;
            Row {
                id,
                text: (i % 5 != 0).then(|| format!("text {id}")),
                tokens: (0..i % 4).map(|t| id * 10 + t).collect(),
            }
        })
        .collect()
}

/// Writes `rows` with row groups of `group` rows and pages of 4 rows (so
/// a restore has pages to pass over).
pub(crate) fn write(path: &Path, rows: &[Row], group: usize) {
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.id)));
    let texts: ArrayRef = Arc::new(StringArray::from_iter(rows.iter().map(|r| r.text.clone())));
    let tokens: ArrayRef = Arc::new(ListArray::from_iter_primitive::<
        arrow_array::types::Int64Type,
        _,
        _,
    >(
        rows.iter()
            .map(|r| Some(r.tokens.iter().copied().map(Some))),
    ));
    let batch =
        RecordBatch::try_from_iter([("id", ids), ("text", texts), ("tokens", tokens)]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group))
        .set_data_page_row_count_limit(4)
        .set_write_batch_size(4)
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// Three files of 23, 0 and 40 rows, in row groups of 7.
fn corpus(dir: &Dir) -> Vec<Row> {
    let mut all = Vec::new();
    for (f, n) in [(0, 23), (1, 0), (2, 40)] {
        let rows = rows(f, n);
        write(&dir.0.join(format!("{f}.parquet")), &rows, 7);
        all.extend(rows);
    }
    all
}

fn read(dir: &Path) -> ReadParquet<Files, Row> {
    Files::in_dir(dir).unwrap().read_parquet::<Row>()
}

#[test]
fn every_row_once_in_order_across_files_and_row_groups() {
    let dir = Dir::new("rows");
    let expected = corpus(&dir);
    let rows: Vec<Row> = read(&dir.0).start().unwrap().map(Result::unwrap).collect();
    assert_eq!(rows, expected);
}

#[test]
fn a_state_after_any_row_resumes_exactly() {
    let dir = Dir::new("resume");
    let expected = corpus(&dir);
    for midpoint in [0, 1, 6, 7, 8, 22, 23, 24, 40, 62, 63] {
        assert_save_load(|| read(&dir.0), midpoint);
    }
    // And as batches of 3 (a slice never crosses a row group).
    let batches = || {
        Files::in_dir(&dir.0)
            .unwrap()
            .read_parquet_batches(3)
            .unwrap()
    };
    for midpoint in [0, 2, 3, 9, 21] {
        let all = ids_of(&mut Loader::new(batches()));
        assert_eq!(all, expected.iter().map(|r| r.id).collect::<Vec<_>>());
        let mut loader = Loader::new(batches());
        let mut epoch = loader.epoch();
        let mut before = Vec::new();
        for b in epoch.by_ref().take(midpoint) {
            let b = b.unwrap();
            assert!(b.num_rows() <= 3);
            let column = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            before.extend(column.values().iter().copied());
        }
        let state = epoch.state_dict().unwrap();
        drop(epoch);
        let mut resumed = Loader::new(batches());
        resumed.load_state_dict(&state).unwrap();
        let mut rest = ids_of(&mut resumed);
        before.append(&mut rest);
        assert_eq!(before, all, "batches, midpoint {midpoint}");
    }
}

/// The same running pipeline, reset mid-batch (to a state, or to the
/// start), reads from where it was told, not from rows it had read ahead.
#[test]
fn a_reset_mid_batch_reads_from_where_it_was_told() {
    let dir = Dir::new("reset");
    let expected: Vec<i64> = corpus(&dir).iter().map(|r| r.id).collect();
    let mut running = read(&dir.0).start().unwrap();
    let ids = |running: &mut nodes_std::Running<_>, n| -> Vec<i64> {
        let rows = running.by_ref().take(n).map(|r: Result<Row>| r.unwrap().id);
        rows.collect()
    };
    assert_eq!(ids(&mut running, 3), expected[..3]);
    let state = running.get_state().unwrap();
    assert_eq!(ids(&mut running, 5), expected[3..8]);
    running.reset(Some(&state)).unwrap();
    assert_eq!(ids(&mut running, 4), expected[3..7]);
    running.reset(None).unwrap();
    assert_eq!(ids(&mut running, 100), expected);
}

fn ids_of<N: Node<Item = RecordBatch>>(loader: &mut Loader<N>) -> Vec<i64> {
    loader
        .epoch()
        .flat_map(|b| {
            let b = b.unwrap();
            let column = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            column.values().to_vec()
        })
        .collect()
}

#[test]
fn columns_reads_only_the_named_ones_and_names_a_missing_one() {
    #[derive(Debug, PartialEq, Deserialize)]
    struct Id {
        id: i64,
    }
    let dir = Dir::new("columns");
    let expected = corpus(&dir);
    let batches = Files::in_dir(&dir.0)
        .unwrap()
        .read_parquet_batches(100)
        .unwrap()
        .columns(["id"]);
    for batch in batches.start().unwrap() {
        assert_eq!(batch.unwrap().num_columns(), 1);
    }
    let ids: Vec<Id> = Files::in_dir(&dir.0)
        .unwrap()
        .read_parquet::<Id>()
        .columns(["id"])
        .start()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        ids,
        expected.iter().map(|r| Id { id: r.id }).collect::<Vec<_>>()
    );
    let missing = Files::in_dir(&dir.0)
        .unwrap()
        .read_parquet::<Id>()
        .columns(["idx"]);
    let err = missing
        .start()
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no column `idx`") && err.contains("0.parquet"),
        "{err}"
    );
    // An empty list asks for nothing: an error at start, not every column.
    let none: [&str; 0] = [];
    let files = || Files::in_dir(&dir.0).unwrap();
    let rows = files().read_parquet::<Id>().columns(none).start();
    let batches = files().read_parquet_batches(100).unwrap().columns(none);
    for (err, node) in [
        (rows.err(), "ReadParquet"),
        (batches.start().err(), "ReadParquetBatches"),
    ] {
        let err = err.expect("an empty list of columns must not start");
        assert!(
            matches!(err, Error::InvalidArgument { node: n, .. } if n == node),
            "{err}"
        );
        assert!(err.to_string().contains("at least one column"), "{err}");
    }
}

#[test]
fn a_changed_file_or_an_edited_position_is_refused_by_name() {
    let dir = Dir::new("changed");
    let expected = corpus(&dir);
    let mut loader = Loader::new(read(&dir.0));
    let mut epoch = loader.epoch();
    let first: Vec<Row> = epoch.by_ref().take(30).map(Result::unwrap).collect();
    assert_eq!(first, expected[..30]);
    let state = epoch.state_dict().unwrap();
    drop(epoch);
    // A row past its row group's end.
    let mut edited = serde_json::to_value(&state).unwrap();
    edited["root"]["row"] = serde_json::json!(8);
    let edited: State = serde_json::from_value(edited).unwrap();
    let mut unchecked = Loader::new(read(&dir.0)).verify_checksum(false);
    let err = unchecked.load_state_dict(&edited).unwrap_err().to_string();
    assert!(err.contains("/root/row"), "{err}");
    // The file it stands in, rewritten with other rows.
    write(&dir.0.join("2.parquet"), &rows(7, 40), 7);
    let err = Loader::new(read(&dir.0))
        .load_state_dict(&state)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("2.parquet") && err.contains("changed since the state was saved"),
        "{err}"
    );
    assert!(err.contains("/root/identity"), "{err}");
}

#[test]
fn a_file_that_is_not_parquet_and_a_row_that_does_not_fit_are_errors_naming_them() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Wrong {
        id: String,
    }
    let dir = Dir::new("bad");
    write(&dir.0.join("a.parquet"), &rows(0, 3), 7);
    std::fs::write(dir.0.join("b.parquet"), "not parquet").unwrap();
    write(&dir.0.join("c.parquet"), &rows(2, 2), 7);
    let items: Vec<Result<Row>> = read(&dir.0).start().unwrap().collect();
    assert_eq!(items.len(), 6, "{items:?}");
    let err = items[3].as_ref().unwrap_err().to_string();
    assert!(err.contains("b.parquet"), "{err}");
    let ids: Vec<i64> = items
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, [0, 1, 2, 2000, 2001]);
    let wrong = Files::in_dir(&dir.0).unwrap().read_parquet::<Wrong>();
    let err = wrong
        .start()
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a.parquet") && err.contains("row group 0, row 0"),
        "{err}"
    );
    assert!(err.contains("column `id`"), "{err}");
}

/// Sharded by file across ranks, every row once.
#[test]
fn ranks_read_every_row_once() {
    let dir = Dir::new("ranks");
    let mut expected = corpus(&dir);
    let shard = |rank| -> ReadParquet<Sharder<Files>, Row> {
        Files::in_dir(&dir.0)
            .unwrap()
            .shard(rank, 2)
            .unwrap()
            .read_parquet()
    };
    let mut all: Vec<Row> = (0..2)
        .flat_map(|rank| {
            shard(rank)
                .start()
                .unwrap()
                .map(Result::unwrap)
                .collect::<Vec<_>>()
        })
        .collect();
    all.sort_by_key(|r| r.id);
    expected.sort_by_key(|r| r.id);
    assert_eq!(all, expected);
}

/// A restore reads the row group from the page that holds the saved row:
/// every page before it, in every column, is damaged after the save (the
/// footer untouched, so the identity holds), and the rest still reads.
#[test]
fn a_restore_decodes_only_the_pages_from_the_saved_row_on() {
    use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    use parquet::file::metadata::PageIndexPolicy;
    use std::io::{Seek, SeekFrom, Write};

    let dir = Dir::new("pages");
    let path = dir.0.join("a.parquet");
    let all = rows(0, 60);
    write(&path, &all, 60);
    let at = 41;
    let mut loader = Loader::new(read(&dir.0));
    let mut epoch = loader.epoch();
    let first: Vec<Row> = epoch.by_ref().take(at).map(Result::unwrap).collect();
    assert_eq!(first, all[..at]);
    let state = epoch.state_dict().unwrap();
    drop(epoch);

    let file = std::fs::File::open(&path).unwrap();
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
    let metadata = ArrowReaderMetadata::load(&file, options).unwrap();
    let index = metadata.metadata().page_index_for_row_group(0);
    let mut damaged = 0;
    let mut out = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    for column in 0..metadata.metadata().row_group(0).num_columns() {
        let pages = index.offset_index(column).unwrap().page_locations();
        for (page, next) in pages.iter().zip(pages.iter().skip(1)) {
            if next.first_row_index <= at as i64 {
                out.seek(SeekFrom::Start(page.offset as u64)).unwrap();
                out.write_all(&vec![0xff; page.compressed_page_size as usize])
                    .unwrap();
                damaged += 1;
            }
        }
    }
    drop(out);
    assert!(damaged >= 3 * 9, "{damaged} pages damaged");
    let whole: Vec<Result<Row>> = read(&dir.0).start().unwrap().collect();
    assert!(whole.iter().any(Result::is_err), "the damage does not show");

    let mut resumed = Loader::new(read(&dir.0));
    resumed.load_state_dict(&state).unwrap();
    let rest: Vec<Row> = resumed.epoch().map(Result::unwrap).collect();
    assert_eq!(rest, all[at..]);
}

/// Listed as row groups, one file of six row groups is read by four ranks
/// (more ranks than files), every row once.
#[test]
fn row_groups_shard_across_more_ranks_than_files() {
    let dir = Dir::new("groups");
    let all = rows(0, 40);
    write(&dir.0.join("a.parquet"), &all, 7);
    let mut seen = Vec::new();
    for rank in 0..4 {
        let units = Files::in_dir(&dir.0).unwrap().parquet_row_groups();
        let mine: Vec<Row> = units
            .unwrap()
            .shard(rank, 4)
            .unwrap()
            .read_parquet::<Row>()
            .start()
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(!mine.is_empty(), "rank {rank} read nothing");
        seen.extend(mine);
    }
    seen.sort_by_key(|r| r.id);
    assert_eq!(seen, all);
}

/// Row groups shuffled, then rows shuffled in a buffer: a state after any
/// row resumes exactly, and the epoch holds every row once.
#[test]
fn shuffled_row_groups_resume_exactly() {
    let dir = Dir::new("shuffled");
    let mut expected = corpus(&dir);
    let node = || {
        let units = Files::in_dir(&dir.0).unwrap().parquet_row_groups();
        let rows = units.unwrap().shuffle_files(5).read_parquet::<Row>();
        rows.map(|r: Row| (r.id, r.text, r.tokens))
            .shuffle(16, 6)
            .unwrap()
    };
    let mut ids: Vec<i64> = node().start().unwrap().map(|r| r.unwrap().0).collect();
    ids.sort_unstable();
    expected.sort_by_key(|r| r.id);
    assert_eq!(ids, expected.iter().map(|r| r.id).collect::<Vec<_>>());
    for midpoint in [0, 5, 7, 30, 62] {
        assert_save_load(node, midpoint);
    }
}

/// The list's digest covers its files' identities: a file rewritten
/// between save and restore (with as many row groups) is refused there.
#[test]
fn a_listed_file_that_changed_is_refused() {
    let dir = Dir::new("listed");
    let path = dir.0.join("a.parquet");
    write(&path, &rows(0, 40), 7);
    let units = || Files::in_dir(&dir.0).unwrap().parquet_row_groups().unwrap();
    let mut loader = Loader::new(units());
    let mut epoch = loader.epoch();
    let got: Vec<RowGroup> = epoch.by_ref().take(2).map(Result::unwrap).collect();
    assert_eq!(got.iter().map(|u| u.index).collect::<Vec<_>>(), [0, 1]);
    assert_eq!((got[0].rows, got[0].path.clone()), (7, path.clone()));
    let state = epoch.state_dict().unwrap();
    drop(epoch);
    let mut same = Loader::new(units());
    same.load_state_dict(&state).unwrap();
    let rest: Vec<usize> = same.epoch().map(|u| u.unwrap().index).collect();
    assert_eq!(rest, [2, 3, 4, 5]);
    write(&path, &rows(0, 41), 7);
    let mut resumed = Loader::new(units());
    let err = resumed.load_state_dict(&state).unwrap_err().to_string();
    assert!(
        err.contains("a.parquet#1") && err.contains("changed since the state was saved"),
        "{err}"
    );
    assert!(err.contains("/root/files"), "{err}");
}

/// A file that is not Parquet is refused when the row groups are listed,
/// by name.
#[test]
fn listing_row_groups_of_a_file_that_is_not_parquet_is_an_error() {
    let dir = Dir::new("not-parquet");
    write(&dir.0.join("a.parquet"), &rows(0, 4), 2);
    std::fs::write(dir.0.join("b.parquet"), "not parquet").unwrap();
    let err = Files::in_dir(&dir.0)
        .unwrap()
        .parquet_row_groups()
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("b.parquet") && message.contains("ParquetRowGroups"),
        "{message}"
    );
}

/// A file whose name is not UTF-8 cannot be named in a state: an error
/// naming it, then the next file.
#[cfg(unix)]
#[test]
fn a_file_name_that_is_not_utf8_is_an_error() {
    use std::os::unix::ffi::OsStrExt;

    let dir = Dir::new("utf8");
    let odd = dir.0.join(std::ffi::OsStr::from_bytes(b"a\xff.parquet"));
    write(&odd, &rows(0, 2), 7);
    write(&dir.0.join("b.parquet"), &rows(1, 2), 7);
    let items: Vec<Result<Row>> = IterableWrapper::new(vec![odd.clone(), dir.0.join("b.parquet")])
        .read_parquet::<Row>()
        .start()
        .unwrap()
        .collect();
    assert_eq!(items.len(), 3, "{items:?}");
    let err = items[0].as_ref().unwrap_err().to_string();
    assert!(err.contains("not UTF-8"), "{err}");
}

/// Two files other ranks began, dealt to one: the first no longer reads
/// (an error naming it), and the second still resumes where its rank
/// stopped.
#[test]
fn a_begun_file_that_no_longer_reads_is_an_error_and_the_next_resumes() {
    let dir = Dir::new("begun");
    for f in 0..2 {
        write(&dir.0.join(format!("{f}.parquet")), &rows(f, 10), 4);
    }
    let build = |rank, world| {
        Files::in_dir(&dir.0)
            .unwrap()
            .shard(rank, world)
            .unwrap()
            .read_parquet::<Row>()
    };
    let states: Vec<State> = (0..2)
        .map(|rank| {
            let mut loader = Loader::new(build(rank, 2));
            let mut epoch = loader.epoch();
            let first: Vec<Row> = epoch.by_ref().take(3).map(Result::unwrap).collect();
            assert_eq!(first.len(), 3);
            epoch.state_dict().unwrap()
        })
        .collect();
    std::fs::write(dir.0.join("0.parquet"), "no longer parquet").unwrap();
    let mut loader = Loader::new(build(0, 1));
    nodes_std::elastic::load_resharded(&mut loader, &states, 0, 1).unwrap();
    let items: Vec<Result<Row>> = loader.epoch().collect();
    let err = items[0].as_ref().unwrap_err().to_string();
    assert!(err.contains("0.parquet"), "{err}");
    let ids: Vec<i64> = items[1..].iter().map(|r| r.as_ref().unwrap().id).collect();
    assert_eq!(ids, (1003..1010).collect::<Vec<_>>());
}

/// `elastic::check` accepts Parquet files and row groups read through a
/// shard; one file's row groups read by four ranks, cut, reshard onto three
/// (then one) and deliver every row exactly once.
#[test]
fn row_groups_reshard_exactly_once() {
    let dir = Dir::new("check");
    corpus(&dir);
    let files = Files::in_dir(&dir.0).unwrap().shard(0, 2).unwrap();
    nodes_std::elastic::check(&files.read_parquet::<Row>().describe()).unwrap();
    let one = Dir::new("reshard-groups");
    let all = rows(0, 40);
    write(&one.0.join("a.parquet"), &all, 7);
    let build = |rank, world| {
        let units = Files::in_dir(&one.0).unwrap().parquet_row_groups().unwrap();
        let shard = units.shuffle_files(3).shard(rank, world).unwrap();
        shard.read_parquet::<Row>()
    };
    nodes_std::elastic::check(&build(0, 4).describe()).unwrap();
    let mut seen = Vec::new();
    let mut cut = |world: u64, take: usize, states: &[State]| -> Vec<State> {
        (0..world)
            .map(|rank| {
                let mut loader = Loader::new(build(rank, world));
                if !states.is_empty() {
                    nodes_std::elastic::load_resharded(&mut loader, states, rank, world).unwrap();
                }
                let mut epoch = loader.epoch();
                seen.extend(epoch.by_ref().take(take).map(|r| r.unwrap().id));
                epoch.state_dict().unwrap()
            })
            .collect()
    };
    // Four ranks of six row groups of up to 7 rows (two ranks have two):
    // each stops part way through its first.
    let states = cut(4, 3, &[]);
    let states = cut(3, 5, &states);
    cut(1, usize::MAX, &states);
    seen.sort_unstable();
    assert_eq!(seen, all.iter().map(|r| r.id).collect::<Vec<_>>());
}

/// A restore whose source yields another file than the one the state is
/// in is refused at `path`.
#[test]
fn a_restore_that_pulls_another_file_is_refused_at_path() {
    let dir = Dir::new("misnamed");
    let (a, b) = (dir.0.join("a.parquet"), dir.0.join("b.parquet"));
    write(&a, &rows(0, 5), 2);
    write(&b, &rows(0, 5), 2);
    let mut loader = Loader::new(IterableWrapper::new(vec![a.clone()]).read_parquet::<Row>());
    let mut epoch = loader.epoch();
    epoch.next().unwrap().unwrap();
    let state = epoch.state_dict().unwrap();
    drop(epoch);
    let mut other = Loader::new(IterableWrapper::new(vec![b.clone()]).read_parquet::<Row>());
    let err = other.load_state_dict(&state).unwrap_err().to_string();
    assert!(
        err.contains("/root/path") && err.contains("yields `"),
        "{err}"
    );
}

/// A struct whose fields are the columns is read in its own field order
/// (renames included); one with fewer fields ignores the others, unless it
/// denies unknown fields; a cell of the wrong type names its column.
#[test]
fn rows_fit_structs_by_column_name_in_any_field_order() {
    #[derive(Debug, PartialEq, Deserialize)]
    struct Reordered {
        tokens: Vec<i64>,
        #[serde(rename = "text")]
        words: Option<String>,
        id: i64,
    }
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Strict {
        id: i64,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct WrongType {
        tokens: Vec<i64>,
        text: Option<String>,
        id: String,
    }
    let dir = Dir::new("fit");
    let expected = corpus(&dir);
    let first = |items: Vec<Result<()>>| {
        items
            .into_iter()
            .find_map(Result::err)
            .map(|e| e.to_string())
    };
    let got: Vec<Reordered> = Files::in_dir(&dir.0)
        .unwrap()
        .read_parquet::<Reordered>()
        .start()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let want: Vec<Reordered> = expected
        .iter()
        .map(|r| Reordered {
            tokens: r.tokens.clone(),
            words: r.text.clone(),
            id: r.id,
        })
        .collect();
    assert_eq!(got, want);
    let strict = Files::in_dir(&dir.0).unwrap().read_parquet::<Strict>();
    let err = first(strict.map(|_| ()).start().unwrap().collect()).expect("an unknown column");
    assert!(err.contains("unknown field `text`"), "{err}");
    let wrong = Files::in_dir(&dir.0).unwrap().read_parquet::<WrongType>();
    let err = first(wrong.map(|_| ()).start().unwrap().collect()).expect("a wrong type");
    assert!(
        err.contains("column `id`") && err.contains("row 0"),
        "{err}"
    );
}

/// Every column type the rows read: booleans, signed and unsigned
/// integers of each width, floats, strings, binaries, dates, timestamps,
/// lists and structs, with nulls as `None`; a narrower column read into a
/// wider field; the same rows by column order and by name (an extra
/// column); and a column of the wrong type is an error naming it.
#[test]
fn every_column_type_reads_into_its_serde_type() {
    use arrow_array::{
        BinaryArray, BooleanArray, Date32Array, Float32Array, Float64Array, Int8Array, Int16Array,
        Int32Array, LargeStringArray, StructArray, TimestampMillisecondArray, UInt8Array,
        UInt16Array, UInt32Array, UInt64Array,
    };
    #[derive(Debug, PartialEq, Deserialize)]
    struct Typed {
        flag: Option<bool>,
        i8: i8,
        i16: i16,
        i32: i64,
        u8: u8,
        u16: u16,
        u32: u64,
        u64: u64,
        f32: f64,
        f64: Option<f64>,
        large: String,
        #[serde(with = "serde_bytes_as_vec")]
        bytes: Vec<u8>,
        day: i32,
        at: i64,
        list: Vec<i64>,
        pair: Pair,
    }
    #[derive(Debug, PartialEq, Deserialize)]
    struct Pair {
        a: i64,
        s: Option<String>,
    }
    /// Bytes from a serde `bytes` value.
    mod serde_bytes_as_vec {
        pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
            d: D,
        ) -> Result<Vec<u8>, D::Error> {
            struct Bytes;
            impl serde::de::Visitor<'_> for Bytes {
                type Value = Vec<u8>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("bytes")
                }
                fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                    Ok(v.to_vec())
                }
            }
            d.deserialize_bytes(Bytes)
        }
    }
    let pair = StructArray::try_from(vec![
        ("a", Arc::new(Int64Array::from(vec![7, -7, 70])) as ArrayRef),
        (
            "s",
            Arc::new(StringArray::from(vec![Some("x"), None, Some("z")])) as ArrayRef,
        ),
    ])
    .unwrap();
    let list = ListArray::from_iter_primitive::<arrow_array::types::Int64Type, _, _>([
        Some(vec![Some(1), Some(2)]),
        Some(vec![]),
        Some(vec![Some(-3)]),
    ]);
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "flag",
            Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
        ),
        ("i8", Arc::new(Int8Array::from(vec![-128, 0, 127]))),
        ("i16", Arc::new(Int16Array::from(vec![-300, 0, 300]))),
        (
            "i32",
            Arc::new(Int32Array::from(vec![i32::MIN, 0, i32::MAX])),
        ),
        ("u8", Arc::new(UInt8Array::from(vec![0, 1, 255]))),
        ("u16", Arc::new(UInt16Array::from(vec![0, 1, 65535]))),
        ("u32", Arc::new(UInt32Array::from(vec![0, 1, u32::MAX]))),
        ("u64", Arc::new(UInt64Array::from(vec![0, 1, u64::MAX]))),
        ("f32", Arc::new(Float32Array::from(vec![0.5, -1.5, 2.25]))),
        (
            "f64",
            Arc::new(Float64Array::from(vec![Some(0.125), None, Some(-8.0)])),
        ),
        (
            "large",
            Arc::new(LargeStringArray::from(vec!["a", "", "ccc"])),
        ),
        (
            "bytes",
            Arc::new(BinaryArray::from(vec![&b"\x00\x01"[..], b"", b"z"])),
        ),
        ("day", Arc::new(Date32Array::from(vec![0, 19_000, -1]))),
        (
            "at",
            Arc::new(TimestampMillisecondArray::from(vec![
                0,
                1_700_000_000_000,
                -5,
            ])),
        ),
        ("list", Arc::new(list)),
        ("pair", Arc::new(pair)),
    ];
    let want = vec![
        Typed {
            flag: Some(true),
            i8: -128,
            i16: -300,
            i32: i32::MIN.into(),
            u8: 0,
            u16: 0,
            u32: 0,
            u64: 0,
            f32: 0.5,
            f64: Some(0.125),
            large: "a".into(),
            bytes: vec![0, 1],
            day: 0,
            at: 0,
            list: vec![1, 2],
            pair: Pair {
                a: 7,
                s: Some("x".into()),
            },
        },
        Typed {
            flag: None,
            i8: 0,
            i16: 0,
            i32: 0,
            u8: 1,
            u16: 1,
            u32: 1,
            u64: 1,
            f32: -1.5,
            f64: None,
            large: String::new(),
            bytes: vec![],
            day: 19_000,
            at: 1_700_000_000_000,
            list: vec![],
            pair: Pair { a: -7, s: None },
        },
        Typed {
            flag: Some(false),
            i8: 127,
            i16: 300,
            i32: i32::MAX.into(),
            u8: 255,
            u16: 65535,
            u32: u32::MAX.into(),
            u64: u64::MAX,
            f32: 2.25,
            f64: Some(-8.0),
            large: "ccc".into(),
            bytes: b"z".to_vec(),
            day: -1,
            at: -5,
            list: vec![-3],
            pair: Pair {
                a: 70,
                s: Some("z".into()),
            },
        },
    ];
    let dir = Dir::new("types");
    let write = |name: &str, columns: Vec<(&str, ArrayRef)>| {
        write_batch(
            &dir.0.join(name),
            &RecordBatch::try_from_iter(columns).unwrap(),
        );
    };
    let rows_in = |name: &str| -> Vec<Result<Typed>> {
        let files = Files::list([dir.0.join(name)]).unwrap();
        files.read_parquet::<Typed>().start().unwrap().collect()
    };
    write("in_order.parquet", columns.clone());
    let rows: Vec<Typed> = rows_in("in_order.parquet")
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows, want, "by column order");
    let mut named = columns.clone();
    named.reverse();
    named.push(("extra", Arc::new(Int64Array::from(vec![1, 2, 3]))));
    write("by_name.parquet", named);
    let rows: Vec<Typed> = rows_in("by_name.parquet")
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows, want, "by name");
    let mut wrong = columns;
    wrong[0].1 = Arc::new(Int64Array::from(vec![1, 2, 3]));
    write("wrong.parquet", wrong);
    for row in rows_in("wrong.parquet") {
        let e = row.unwrap_err().to_string();
        assert!(
            e.contains("wrong.parquet") && e.contains("column `flag`"),
            "{e}"
        );
    }
}

/// Bad records (a file that is not Parquet, a row that does not fit) under
/// each error policy, resumed at every cut with the policy's count.
#[test]
fn error_policies_skip_or_stop_on_bad_files_and_rows() {
    use nodes_std::ErrorPolicy;
    let dir = Dir::new("policy");
    write(&dir.0.join("a.parquet"), &rows(0, 3), 7);
    std::fs::write(dir.0.join("b.parquet"), "not parquet").unwrap();
    write(&dir.0.join("c.parquet"), &rows(2, 2), 7);
    let build = |policy| read(&dir.0).on_error(policy);
    let run = |policy| -> Vec<std::result::Result<i64, String>> {
        let items = build(policy).start().unwrap();
        items
            .map(|r| r.map(|row| row.id).map_err(|e| e.to_string()))
            .collect()
    };
    let ok = |items: &[std::result::Result<i64, String>]| -> Vec<i64> {
        items
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect()
    };
    let skipped = run(ErrorPolicy::Skip);
    assert_eq!(skipped, [Ok(0), Ok(1), Ok(2), Ok(2000), Ok(2001)]);
    let failed = run(ErrorPolicy::Fail);
    assert_eq!(ok(&failed), [0, 1, 2], "the pass ends at the bad file");
    assert!(
        failed[3].as_ref().unwrap_err().contains("b.parquet"),
        "{failed:?}"
    );
    assert_eq!(failed.len(), 4);
    let at_most = run(ErrorPolicy::SkipAtMost(0));
    assert_eq!(at_most.len(), 4, "{at_most:?}");
    for cut in 0..=5 {
        nodes_std::testing::assert_save_load(|| build(ErrorPolicy::Skip).map(|r: Row| r.id), cut);
    }
}

/// Rows that are not a `T` amid rows that are (every fifth text is null,
/// and `text` is not optional): each is an `Err` naming its row, between
/// the rows around it, or skipped; a resume at every cut goes on exactly.
#[test]
fn a_row_that_does_not_fit_amid_rows_that_do_is_an_error_in_its_place() {
    use nodes_std::ErrorPolicy;
    #[derive(Debug, PartialEq, Deserialize)]
    struct Texted {
        id: i64,
        text: String,
        tokens: Vec<i64>,
    }
    let dir = Dir::new("amid");
    let expected = corpus(&dir);
    let build = |policy| {
        Files::in_dir(&dir.0)
            .unwrap()
            .read_parquet::<Texted>()
            .on_error(policy)
    };
    let items: Vec<Result<Texted>> = build(ErrorPolicy::Deliver).start().unwrap().collect();
    assert_eq!(items.len(), expected.len());
    for (item, row) in items.iter().zip(&expected) {
        match (item, &row.text) {
            (Ok(got), Some(text)) => assert_eq!((got.id, &got.text), (row.id, text)),
            (Err(e), None) => {
                let (file, at) = (row.id / 1000, row.id % 1000);
                let named = format!("{file}.parquet: row group {}, row {}", at / 7, at % 7);
                let e = e.to_string();
                assert!(e.contains(&named) && e.contains("column `text`"), "{e}");
            }
            (item, _) => panic!("row {}: {item:?}", row.id),
        }
    }
    let fit: Vec<i64> = expected
        .iter()
        .filter(|r| r.text.is_some())
        .map(|r| r.id)
        .collect();
    let skipped = build(ErrorPolicy::Skip).map(|r: Texted| r.id);
    let got: Vec<i64> = skipped.start().unwrap().map(Result::unwrap).collect();
    assert_eq!(got, fit);
    for cut in [0, 1, 3, 4, 5, 17, 18, 19, 40, fit.len()] {
        nodes_std::testing::assert_save_load(
            || build(ErrorPolicy::Skip).map(|r: Texted| r.id),
            cut,
        );
    }
}

/// Rows are read as `T` a few dozen at a time, ahead of their delivery,
/// from a decoded batch of up to 1,024: over a row group of 150 rows, rows
/// that do not fit past the first few dozen are errors in their place, and
/// a state or reset at any row around those chunks goes on exactly.
#[test]
fn rows_read_ahead_of_a_large_row_group_resume_exactly() {
    use nodes_std::ErrorPolicy;
    #[derive(Debug, PartialEq, Deserialize)]
    struct Texted {
        id: i64,
        text: String,
    }
    let dir = Dir::new("ahead");
    let mut rows = rows(0, 150);
    let unfit = [40, 100];
    for row in &mut rows {
        row.text = (!unfit.contains(&row.id)).then(|| format!("text {}", row.id));
    }
    write(&dir.0.join("0.parquet"), &rows, 1024);
    let build = |policy| {
        Files::in_dir(&dir.0)
            .unwrap()
            .read_parquet::<Texted>()
            .columns(["id", "text"])
            .on_error(policy)
    };
    let items: Vec<Result<Texted>> = build(ErrorPolicy::Deliver).start().unwrap().collect();
    assert_eq!(items.len(), rows.len());
    for (id, item) in (0..).zip(&items) {
        match item {
            Ok(got) => assert_eq!((got.id, got.text.clone()), (id, format!("text {id}"))),
            Err(e) => {
                let e = e.to_string();
                let named = format!("row group 0, row {id}: column `text`");
                assert!(unfit.contains(&id) && e.contains(&named), "row {id}: {e}");
            }
        }
    }
    for cut in [
        0, 1, 31, 32, 33, 39, 40, 41, 63, 64, 65, 72, 73, 96, 97, 98, 147, 148,
    ] {
        assert_save_load(|| build(ErrorPolicy::Skip).map(|r: Texted| r.id), cut);
    }
    let mut running = build(ErrorPolicy::Skip)
        .map(|r: Texted| r.id)
        .start()
        .unwrap();
    let ids = |running: &mut nodes_std::Running<_>, n| -> Vec<i64> {
        running.by_ref().take(n).map(Result::unwrap).collect()
    };
    assert_eq!(ids(&mut running, 35), (0..35).collect::<Vec<_>>());
    let state = running.get_state().unwrap();
    assert_eq!(ids(&mut running, 8), [35, 36, 37, 38, 39, 41, 42, 43]);
    running.reset(Some(&state)).unwrap();
    assert_eq!(ids(&mut running, 6), [35, 36, 37, 38, 39, 41]);
}

/// The bytes read after a node's first item (its decoded rows, for a
/// Parquet reader), and the file's size.
fn after_first<N: Node>(node: N) -> (u64, u64) {
    let mut loader = Loader::new(node);
    let mut epoch = loader.epoch();
    epoch.next().unwrap().unwrap();
    let progress = epoch.progress();
    (progress.bytes_read, progress.bytes_total.unwrap())
}

/// A text that neither compresses nor repeats within itself: 64 KB of
/// letters drawn from `seed`.
fn random_text(seed: i64) -> String {
    let mut x = seed as u64 + 1;
    (0..65_536)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            char::from(b'a' + (x >> 59) as u8 % 26)
        })
        .collect()
}

/// A row of an id and a text.
#[derive(Debug, PartialEq, Deserialize)]
struct Doc {
    id: i64,
    text: String,
}

/// Writes one batch with the writer's defaults to `path`.
fn write_batch(path: &Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

/// Writes 48 [`Doc`]s (ids 0 to 47, texts by id from `text`) as
/// `0.parquet` in `dir`, with the writer's defaults; returns its path.
fn write_docs(dir: &Dir, text: impl Fn(i64) -> String) -> PathBuf {
    let ids = Int64Array::from_iter_values(0..48);
    let texts = StringArray::from_iter_values(ids.values().iter().map(|&i| text(i)));
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(ids) as ArrayRef),
        ("text", Arc::new(texts) as ArrayRef),
    ])
    .unwrap();
    let path = dir.0.join("0.parquet");
    write_batch(&path, &batch);
    path
}

/// One 64 KB text in each of 48 rows is stored once (the writer's
/// dictionary) but decoded once per row: the reader sizes its decoded
/// batches by the bytes decoded (the footer's count of the texts' bytes),
/// so it decodes a few rows at a time, not all 48 (3 MB) at once.
#[test]
fn a_large_text_repeated_in_every_row_is_decoded_a_few_rows_at_a_time() {
    let dir = Dir::new("repeated-cells");
    let text = random_text(7);
    let path = write_docs(&dir, |_| text.clone());
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 2 * 65_536, "the text is stored once: {size} bytes");
    let docs = || Files::in_dir(&dir.0).unwrap().read_parquet::<Doc>();
    let (read, total) = after_first(docs());
    assert!(read > 0 && read * 4 <= total, "{read} of {total} bytes");
    let mut running = docs().start().unwrap();
    for id in 0..48 {
        let doc = running.next().unwrap().unwrap();
        assert!(doc.id == id && doc.text == text, "row {id}");
    }
    assert!(running.next().is_none());
}

/// Rows of large cells are decoded a few at a time, as many as about half a
/// megabyte of the columns read holds, not 1,024 at a time: after the first
/// row of a row group of 48 rows with 64 KB texts, progress counts a part
/// of it; read through `id` alone (8 bytes a row), all of it. Every row
/// arrives, in order, and a state at any row around the decoded batches
/// resumes exactly.
#[test]
fn rows_of_large_cells_are_decoded_a_few_at_a_time() {
    #[derive(Debug, PartialEq, Deserialize)]
    struct Id {
        id: i64,
    }
    // Letters that neither compress nor repeat: stored at full size.
    let text = random_text;
    let dir = Dir::new("large-cells");
    write_docs(&dir, text);
    let docs = || Files::in_dir(&dir.0).unwrap().read_parquet::<Doc>();
    let (read, size) = after_first(docs());
    assert!(read > 0 && read * 4 <= size, "{read} of {size} bytes");
    let only_ids = Files::in_dir(&dir.0)
        .unwrap()
        .read_parquet::<Id>()
        .columns(["id"]);
    assert_eq!(after_first(only_ids), (size, size));
    let mut running = docs().start().unwrap();
    for id in 0..48 {
        let doc = running.next().unwrap().unwrap();
        assert!(doc.id == id && doc.text == text(id), "row {id}");
    }
    assert!(running.next().is_none());
    // About 8 rows hold 512 KB: every cut through the first few batches.
    for cut in (0..=16).chain([47]) {
        assert_save_load(
            || docs().map(move |d: Doc| (d.id, d.text == text(d.id))),
            cut,
        );
    }
}

/// Over row groups, progress counts each as a file, and ends at the bytes
/// it counted for them; a file of one row group counts its whole size.
#[test]
fn progress_over_row_groups_ends_where_it_counted() {
    let dir = Dir::new("progress-groups");
    corpus(&dir);
    write(&dir.0.join("3.parquet"), &rows(3, 3000), 3000);
    let units = Files::in_dir(&dir.0).unwrap().parquet_row_groups().unwrap();
    let count = units.len() as u64;
    assert_eq!(count, 4 + 6 + 1);
    let mut loader = Loader::new(units.read_parquet::<Row>());
    let mut epoch = loader.epoch();
    let start = epoch.progress();
    assert_eq!((start.files_done, start.files_total), (0, Some(count)));
    let mut last = 0;
    while let Some(row) = epoch.next() {
        let id = row.unwrap().id;
        let progress = epoch.progress();
        assert!(progress.bytes_read >= last, "{progress:?}");
        last = progress.bytes_read;
        // Within the last file, of one row group (of small rows, decoded
        // 1,024 at a time): its size, part read.
        if id == 3000 {
            assert!(
                progress.bytes_read < progress.bytes_total.unwrap(),
                "{progress:?}"
            );
        }
    }
    let progress = epoch.progress();
    assert_eq!(
        (progress.files_done, progress.files_total),
        (count, Some(count))
    );
    assert_eq!(
        Some(progress.bytes_read),
        progress.bytes_total,
        "{progress:?}"
    );
}

#[test]
fn progress_moves_by_row_group_and_ends_at_the_files_sizes() {
    let dir = Dir::new("progress");
    corpus(&dir);
    let sizes: Vec<u64> = (0..3)
        .map(|f| {
            std::fs::metadata(dir.0.join(format!("{f}.parquet")))
                .unwrap()
                .len()
        })
        .collect();
    let total: u64 = sizes.iter().sum();
    let mut loader = Loader::new(read(&dir.0));
    let mut epoch = loader.epoch();
    let mut within = std::collections::BTreeSet::new();
    while let Some(row) = epoch.next() {
        let file = (row.unwrap().id / 1000) as usize;
        let progress = epoch.progress();
        let before: u64 = sizes[..file].iter().sum();
        assert_eq!(progress.files_done, file as u64, "{progress:?}");
        assert!((before..=before + sizes[file]).contains(&progress.bytes_read));
        within.insert(progress.bytes_read - before);
    }
    // Row groups of 7 rows: the count moves within a file.
    assert!(within.len() >= 5, "{within:?}");
    let progress = epoch.progress();
    assert_eq!((progress.files_done, progress.files_total), (3, Some(3)));
    assert_eq!(
        (progress.bytes_read, progress.bytes_total),
        (total, Some(total))
    );
}
