//! Reading files: `Files`, `read_lines`, `read_jsonl` (and
//! `IterableWrapper::from_fn`). Save/load at every cut of a small
//! multi-file corpus (file boundaries, an empty file, a last line without
//! an end), compressed files, restore by seeking, malformed input under each
//! error policy, a changed directory, and the readers under an out-of-order
//! `par_map`.

use std::path::{Path, PathBuf};

use nodes_std::prelude::*;
use nodes_std::{Files, ParallelOptions, RecordError, testing};
use serde::Deserialize;

use crate::support::corpus::TempDir;
use crate::support::faulty::uneven;

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Row {
    id: u64,
    text: String,
}

/// A corpus of four files: 3 records, none, 1, and 2 whose last line has no
/// end of line. Ids are 0..6 in list order.
fn corpus(dir: &TempDir) {
    let row = |id: u64| format!("{{\"id\": {id}, \"text\": \"row {id}\"}}\n");
    dir.write("a.jsonl", [row(0), row(1), row(2)].concat());
    dir.write("b.jsonl", "");
    dir.write("c.jsonl", row(3));
    let mut last = [row(4), row(5)].concat();
    last.pop();
    dir.write("d.jsonl", last);
}

fn ids(rows: &[Result<Row>]) -> Vec<u64> {
    rows.iter()
        .map(|r| r.as_ref().expect("no error").id)
        .collect()
}

fn messages<T>(items: &[Result<T>]) -> Vec<String> {
    items
        .iter()
        .filter_map(|r| r.as_ref().err().map(ToString::to_string))
        .collect()
}

#[test]
fn read_jsonl_save_load_at_every_cut() {
    let dir = TempDir::new("files-save-load");
    corpus(&dir);
    let plain = || Files::in_dir(dir.path()).unwrap().read_jsonl::<Row>();
    let rows: Vec<Result<Row>> = plain().start().unwrap().collect();
    assert_eq!(ids(&rows), [0, 1, 2, 3, 4, 5]);
    // Cuts 0..=7: every record, the file boundaries (after 3 and 4: the
    // empty file lies between), after the last line (which has no end), and
    // past the end.
    for cut in 0..=7 {
        testing::assert_save_load(plain, cut);
        testing::assert_save_load(
            || {
                Files::in_dir(dir.path())
                    .unwrap()
                    .shuffle_files(5)
                    .read_jsonl::<Row>()
            },
            cut,
        );
        testing::assert_save_load(|| Files::in_dir(dir.path()).unwrap().read_lines(), cut);
    }
    for cut in 0..=4 {
        testing::assert_save_load(
            || {
                Files::glob(&format!("{}/*.jsonl", dir.path().display()))
                    .unwrap()
                    .shuffle_files(1)
                    .shard(1, 2)
                    .unwrap()
                    .read_jsonl::<Row>()
            },
            cut,
        );
    }
}

#[test]
fn shards_split_the_files_of_each_epoch() -> Result<()> {
    let dir = TempDir::new("files-shards");
    corpus(&dir);
    let mut all = Vec::new();
    for rank in 0..2 {
        let mut loader = Loader::new(
            Files::in_dir(dir.path())?
                .shuffle_files(11)
                .shard(rank, 2)?
                .read_jsonl::<Row>(),
        );
        let epoch: Vec<Row> = loader.epoch().collect::<Result<_>>()?;
        all.extend(epoch.into_iter().map(|r| r.id));
    }
    all.sort();
    assert_eq!(all, [0, 1, 2, 3, 4, 5]);
    Ok(())
}

#[test]
fn restore_starts_at_the_saved_byte_offset() -> Result<()> {
    let dir = TempDir::new("files-offset");
    dir.write("a.txt", "first\nsecond\nthird\n");
    let build = || Files::in_dir(dir.path()).map(NodeExt::read_lines);
    let mut running = build()?.start()?;
    assert_eq!(running.next().transpose()?.as_deref(), Some("first"));
    let state = running.get_state()?;
    assert_eq!(state.get::<u64>("offset")?, 6);
    assert_eq!(state.get::<u64>("line")?, 1);
    running.next().transpose()?;
    // At byte 13 (the start of "third"), with a line count that does not
    // match: the restore seeks, it does not count lines.
    let state = running.get_state()?.with("line", 7u64)?;
    assert_eq!(state.get::<u64>("offset")?, 13);
    let rest: Vec<String> = build()?.start_from(&state)?.collect::<Result<_>>()?;
    assert_eq!(rest, ["third"]);
    Ok(())
}

/// A state whose reader is to pass over items another rank delivered
/// (`skip`, then `ahead`) passes over exactly those, and none past the
/// file's end. Malformed lists are refused at their key.
#[test]
fn items_another_rank_delivered_are_passed_over() -> Result<()> {
    let dir = TempDir::new("files-pass-over");
    dir.write("a.txt", "a0\na1\na2\na3\na4\na5\n");
    dir.write("b.txt", "b0\nb1\n");
    let build = || Files::in_dir(dir.path()).map(NodeExt::read_lines);
    let mut running = build()?.start()?;
    running.next().transpose()?;
    let at_a1 = running.get_state()?;
    let passing = at_a1.clone().with("skip", 1u64)?.with("ahead", [2u64, 4])?;
    let rest: Vec<String> = build()?.start_from(&passing)?.collect::<Result<_>>()?;
    assert_eq!(rest, ["a2", "a4", "b0", "b1"]);
    // A state taken while passing keeps what is left to pass over.
    let mut resumed = build()?.start_from(&passing)?;
    assert_eq!(resumed.next().transpose()?.as_deref(), Some("a2"));
    let later = resumed.get_state()?;
    // a3 and a5 are still to pass over: the next item and the third.
    assert_eq!(later.get::<Vec<u64>>("ahead")?, [0, 2]);
    let rest: Vec<String> = build()?.start_from(&later)?.collect::<Result<_>>()?;
    assert_eq!(rest, ["a4", "b0", "b1"]);
    // Items past the file's end (a last, short batch counted whole above
    // the reader) are none: the file was checked to be the one read.
    let past_end = at_a1.clone().with("ahead", [2u64, 9])?;
    // Bounded: a reader that kept failing at the file's end would stop here.
    let got: Vec<Result<String>> = build()?.start_from(&past_end)?.take(20).collect();
    let got: Vec<String> = got.into_iter().collect::<Result<_>>()?;
    assert_eq!(got, ["a1", "a2", "a4", "a5", "b0", "b1"]);
    let mut ended = build()?.start_from(&past_end)?;
    for _ in 0..4 {
        ended.next().transpose()?;
    }
    assert_eq!(ended.next().transpose()?.as_deref(), Some("b0"));
    assert!(!ended.get_state()?.contains("ahead"));
    for (bad, key) in [
        (
            at_a1.clone().with("skip", 3u64)?.with("ahead", [1u64])?,
            "ahead",
        ),
        (at_a1.clone().with("ahead", [4u64, 2])?, "ahead"),
    ] {
        let err = build()?.start_from(&bad).unwrap_err();
        assert_eq!(err.state_path(), Some(&*format!("/{key}")), "{err}");
    }
    Ok(())
}

#[test]
fn malformed_lines_are_errors_with_path_and_line() -> Result<()> {
    let dir = TempDir::new("files-malformed");
    let a = dir.write(
        "a.jsonl",
        b"{\"id\": 0, \"text\": \"ok\"}\n{\"id\": 1, \"text\": \"\xff\"}\n",
    );
    let b = dir.write(
        "b.jsonl",
        "{\"id\": 2, \"text\": \"ok\"}\n{\"id\": oops}\n\n{\"id\": 3, \"text\": \"ok\"}\n",
    );
    let c = dir.write("c.jsonl", "{\"id\": 4, \"text\": \"ok\"}\n{\"id\": 5, \"te");
    let items: Vec<Result<Row>> = Files::in_dir(dir.path())?
        .read_jsonl::<Row>()
        .start()?
        .collect();
    let oks: Vec<u64> = items
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|r| r.id))
        .collect();
    assert_eq!(oks, [0, 2, 3, 4]);
    let errors: Vec<&RecordError> = items
        .iter()
        .filter_map(|r| match r {
            Err(Error::User { source, .. }) => source.downcast_ref::<RecordError>(),
            _ => None,
        })
        .collect();
    let at: Vec<(PathBuf, Option<u64>)> = errors
        .iter()
        .map(|e| (e.path().to_path_buf(), e.line()))
        .collect();
    assert_eq!(
        at,
        [
            (a.clone(), Some(2)),
            (b.clone(), Some(2)),
            (c.clone(), Some(2))
        ]
    );
    let text = messages(&items);
    assert!(text[0].contains("a.jsonl:2: invalid UTF-8"), "{}", text[0]);
    assert!(
        text[1].contains("b.jsonl:2: invalid JSON at column 8"),
        "{}",
        text[1]
    );
    assert!(
        text[2].contains("c.jsonl:2: invalid JSON") && text[2].contains("EOF"),
        "{}",
        text[2]
    );
    // The errors are where their lines are.
    assert!(items[1].is_err() && items[3].is_err() && items[6].is_err());

    // read_lines: the bytes that are not UTF-8 are an error; the rest are lines.
    let lines: Vec<Result<String>> = Files::list([a])?.read_lines().start()?.collect();
    assert_eq!(lines.len(), 2);
    assert!(messages(&lines)[0].contains("a.jsonl:2: invalid UTF-8 at byte 19 of the line"));
    Ok(())
}

#[test]
fn error_policies_skip_fail_or_skip_at_most() -> Result<()> {
    let dir = TempDir::new("files-policy");
    dir.write("a.txt", "1\nx\n2\ny\n3\n");
    let build = |policy| -> Result<_> {
        Ok(Files::in_dir(dir.path())?
            .read_jsonl::<u32>()
            .on_error(policy))
    };
    let mut loader = Loader::new(build(ErrorPolicy::Skip)?).record_stats();
    let got: Vec<u32> = loader.epoch().collect::<Result<_>>()?;
    assert_eq!(got, [1, 2, 3]);
    let stats = loader.stats().expect("stats are on");
    let node = stats
        .get("ReadJsonl")
        .expect("the reader shows in the stats");
    assert_eq!((node.items, node.skipped), (3, 2));
    assert!(stats.get("Files").is_some());

    let at_most: Vec<Result<u32>> = build(ErrorPolicy::SkipAtMost(1))?.start()?.collect();
    assert_eq!(
        at_most.len(),
        3,
        "1, (x skipped), 2, y delivered and the pass ends"
    );
    assert!(messages(&at_most)[0].contains("a.txt:4:"));

    let fail: Vec<Result<u32>> = build(ErrorPolicy::Fail)?.start()?.collect();
    assert_eq!(fail.len(), 2);
    assert!(messages(&fail)[0].contains("a.txt:2:"));

    // The skip count is in the state: a resume does not skip again.
    let mut running = build(ErrorPolicy::SkipAtMost(1))?.start()?;
    running.next().transpose()?;
    running.next().transpose()?; // 2, after skipping x
    let state = running.get_state()?;
    let rest: Vec<Result<u32>> = build(ErrorPolicy::SkipAtMost(1))?
        .start_from(&state)?
        .collect();
    assert_eq!(rest.len(), 1);
    assert!(rest[0].is_err());
    Ok(())
}

#[test]
fn long_lines_are_bad_records() -> Result<()> {
    let dir = TempDir::new("files-long");
    dir.write("a.txt", format!("short\n{}\nend\n", "x".repeat(100_000)));
    let items: Vec<Result<String>> = Files::in_dir(dir.path())?
        .read_lines()
        .max_line_bytes(1000)?
        .start()?
        .collect();
    assert_eq!(items.len(), 3);
    assert_eq!(items[2].as_deref().ok(), Some("end"));
    assert!(messages(&items)[0].contains("a.txt:2: line longer than 1000 bytes"));
    assert!(
        Files::in_dir(dir.path())?
            .read_lines()
            .max_line_bytes(0)
            .is_err()
    );
    Ok(())
}

#[test]
fn unreadable_and_deleted_files_are_errors_and_the_pass_goes_on() -> Result<()> {
    let dir = TempDir::new("files-unreadable");
    let a = dir.write("a.txt", "a1\n");
    let b = dir.write("b.txt", "b1\n");
    let c = dir.write("c.txt", "c1\n");
    // A directory where a file is expected: it opens, and cannot be read.
    let d = dir.path().join("d.txt");
    std::fs::create_dir(&d).unwrap();
    let mut loader = Loader::new(Files::list([&a, &b, &d, &c])?.read_lines());
    let epoch0: Vec<Result<String>> = loader.epoch().collect();
    assert_eq!(epoch0.len(), 4);
    let text = messages(&epoch0);
    assert!(text[0].contains("d.txt:1: cannot read"), "{}", text[0]);
    assert_eq!(epoch0[3].as_deref().ok(), Some("c1"));

    // Deleted between epochs: an error where it would be read.
    std::fs::remove_file(&b).unwrap();
    let epoch1: Vec<Result<String>> = loader.epoch().collect();
    let text = messages(&epoch1);
    assert!(text[0].contains("b.txt: cannot open"), "{}", text[0]);
    let oks: Vec<&str> = epoch1.iter().filter_map(|r| r.as_deref().ok()).collect();
    assert_eq!(oks, ["a1", "c1"]);
    Ok(())
}

#[test]
fn empty_or_missing_directories_and_patterns_are_refused() {
    let dir = TempDir::new("files-empty");
    let err = Files::in_dir(dir.path()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { node: "Files", .. }));
    assert!(err.to_string().contains("has no file"), "{err}");
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
    let err = Files::in_dir(dir.path().join("missing")).unwrap_err();
    assert!(err.to_string().contains("cannot list"), "{err}");
    let err = Files::glob(&format!("{}/*.jsonl", dir.path().display())).unwrap_err();
    assert!(err.to_string().contains("no file matches"), "{err}");
}

#[test]
fn a_restore_into_changed_files_is_refused_with_the_files_named() -> Result<()> {
    let dir = TempDir::new("files-changed");
    corpus(&dir);
    let build = || Files::in_dir(dir.path()).map(|f| f.read_jsonl::<Row>());
    let mut loader = Loader::new(build()?);
    let mut epoch = loader.epoch();
    for _ in 0..4 {
        epoch.next().transpose()?;
    }
    let state = State::from_json(&epoch.state_dict()?.to_json()?)?;

    // A file added before the one being read: refused, naming it.
    dir.write("bb.jsonl", "{\"id\": 9, \"text\": \"new\"}\n");
    let mut fresh = Loader::new(build()?);
    let err = fresh.load_state_dict(&state).unwrap_err();
    let text = err.to_string();
    assert!(err.is_bad_state(), "{text}");
    assert!(text.contains("/files"), "{text}");
    assert!(text.contains("taken over 4 files"), "{text}");
    // The reader saves its source's state from before the file it reads:
    // the last file that state yielded is the one before, `b.jsonl`.
    assert!(text.contains("b.jsonl`, is now file 2"), "{text}");
    assert!(
        text.contains("added near it: `") && text.contains("bb.jsonl`"),
        "{text}"
    );
    std::fs::remove_file(dir.path().join("bb.jsonl")).unwrap();

    // The file being read shortened: refused at its offset.
    let c = dir.path().join("c.jsonl");
    std::fs::write(&c, "{}\n").unwrap();
    let err = Loader::new(build()?).load_state_dict(&state).unwrap_err();
    assert!(err.to_string().contains("/offset"), "{err}");
    assert!(err.to_string().contains("c.jsonl"), "{err}");

    // Deleted: refused at its path (the directory listing still has it when
    // the pipeline is built from a list).
    std::fs::remove_file(&c).unwrap();
    let names = ["a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"].map(|n| dir.path().join(n));
    let from_list = Files::list(names)?.read_jsonl::<Row>();
    let err = from_list.start_from(&state.child("root")?).unwrap_err();
    // The list's digest differs from the directory's (other names): refused
    // at `files` first; a state from the list itself is refused at `path`.
    assert!(err.to_string().contains("/files"), "{err}");
    Ok(())
}

#[test]
fn a_deleted_file_is_refused_at_its_path() -> Result<()> {
    let dir = TempDir::new("files-deleted");
    let a = dir.write("a.txt", "1\n2\n");
    let build = || Files::list([&a]).map(NodeExt::read_lines);
    let mut running = build()?.start()?;
    running.next().transpose()?;
    let state = running.get_state()?;
    std::fs::remove_file(&a).unwrap();
    let err = build()?.start_from(&state).unwrap_err();
    assert_eq!(err.state_path(), Some("/path"), "{err}");
    assert!(err.to_string().contains("cannot open"), "{err}");
    Ok(())
}

/// A position without a file is refused at the reader's state, not at one
/// of its fields: which field is wrong cannot be told (a damaged `path` or a
/// damaged `offset`), and the error must lead to both.
#[test]
fn an_offset_without_a_file_is_refused_at_the_readers_state() -> Result<()> {
    let dir = TempDir::new("files-offset-without-file");
    let a = dir.write("a.txt", "1\n2\n");
    let build = || Files::list([&a]).map(NodeExt::read_lines);
    let mut running = build()?.start()?;
    running.next().transpose()?;
    let mut state = running.get_state()?.to_value();
    assert_eq!(state["offset"], 2, "{state}");
    state["path"] = serde_json::Value::Null;
    let err = build()?.start_from(&State::from_value(state)?).unwrap_err();
    assert_eq!(err.state_path(), Some("/"), "{err}");
    assert!(
        err.to_string().contains("without a file (`path` is null)"),
        "{err}"
    );
    Ok(())
}

/// A checkpoint whose file was damaged (another name, an offset past the
/// end) is refused: by its checksum, and without the checksum at that
/// field, by the restore that pulls the file again (the state check before
/// the checksum cannot tell: it does not know which file the source yields).
#[test]
fn a_damaged_file_or_offset_is_refused_at_its_field() -> Result<()> {
    let dir = TempDir::new("files-damaged-path");
    let a = dir.write("a.txt", "1\n2\n");
    let build = || Files::list([&a]).map(NodeExt::read_lines);
    let mut loader = Loader::new(build()?);
    let mut epoch = loader.epoch();
    epoch.next().transpose()?;
    let saved = epoch.state_dict()?.to_value();
    drop(epoch);
    for (key, value, message) in [
        (
            "path",
            serde_json::json!("missing.txt"),
            "named `missing.txt`",
        ),
        (
            "offset",
            serde_json::json!(1000),
            "past the end of the file (4 bytes)",
        ),
    ] {
        let mut damaged = saved.clone();
        damaged["root"][key] = value;
        let damaged = State::from_value(damaged)?;
        let err = Loader::new(build()?).load_state_dict(&damaged).unwrap_err();
        assert_eq!(err.state_path(), Some("/checksum"), "{err}");
        let err = Loader::new(build()?)
            .verify_checksum(false)
            .load_state_dict(&damaged)
            .unwrap_err();
        assert_eq!(
            err.state_path(),
            Some(format!("/root/{key}").as_str()),
            "{err}"
        );
        assert!(err.to_string().contains(message), "{err}");
    }
    Ok(())
}

#[test]
fn describe_shows_the_readers_and_files() -> Result<()> {
    let dir = TempDir::new("files-describe");
    corpus(&dir);
    let loader = Loader::new(
        Files::in_dir(dir.path())?
            .shuffle_files(3)
            .read_jsonl::<Row>()
            .max_line_bytes(4096)?,
    );
    let text = loader.describe().render_text();
    assert!(text.contains("ReadJsonl(max_line_bytes=4096)"), "{text}");
    assert!(text.contains("Files(seed=Some(3))"), "{text}");
    Ok(())
}

/// `files` JSONL files in `dir`, file `f` holding the numbers `100 f`,
/// `100 f + 1`, ... (`lines` of them), one per line.
fn numbered_jsonl(dir: &TempDir, files: u64, lines: u64) {
    for f in 0..files {
        let text: String = (0..lines).map(|i| format!("{}\n", f * 100 + i)).collect();
        dir.write(&format!("{f}.jsonl"), text);
    }
}

#[test]
fn read_jsonl_under_an_out_of_order_par_map_resumes_exactly_once() -> Result<()> {
    let dir = TempDir::new("files-par-map");
    numbered_jsonl(&dir, 4, 7);
    let build = || -> Result<_> {
        Files::in_dir(dir.path())?
            .read_jsonl::<u64>()
            .par_map(
                |x| {
                    // Jitter only: what is asserted holds in any completion order.
                    std::thread::sleep(std::time::Duration::from_micros((x * 37) % 200));
                    Ok(x * 2)
                },
                ParallelOptions::new(2).in_order(false),
            )?
            .batch(3)
    };
    let mut want: Vec<u64> = (0..4u64)
        .flat_map(|f| (0..7).map(move |i| (f * 100 + i) * 2))
        .collect();
    want.sort();
    let total_batches = want.len().div_ceil(3);
    for cut in 0..=total_batches {
        let mut loader = Loader::new(build()?);
        let mut epoch = loader.epoch();
        let mut got: Vec<u64> = Vec::new();
        for _ in 0..cut {
            match epoch.next() {
                Some(batch) => got.extend(batch?),
                None => break,
            }
        }
        let state = State::from_json(&epoch.state_dict()?.to_json()?)?;
        drop(epoch);
        let mut resumed = Loader::new(build()?);
        resumed.load_state_dict(&state)?;
        let mut rest = resumed.epoch();
        if rest.index() > 0 {
            // A state taken after the epoch's last item starts the next epoch.
            assert_eq!(cut, total_batches);
        } else {
            for batch in &mut rest {
                got.extend(batch?);
            }
        }
        got.sort();
        assert_eq!(got, want, "cut after {cut} batches");
    }
    Ok(())
}

/// Out of order, a `par_map` over a file reader delivers a file's items
/// only once every item of the files before it is delivered, and the
/// file's first line first: what it delivers ahead of a gap then lies in
/// the one file its state is in (which `elastic` relies on).
#[test]
fn an_out_of_order_par_map_finishes_each_file_before_the_next() -> Result<()> {
    let dir = TempDir::new("files-fence");
    numbered_jsonl(&dir, 6, 9);
    let mapped = Files::in_dir(dir.path())?
        .read_jsonl::<u64>()
        .par_map(uneven, ParallelOptions::new(3).in_order(false))?;
    let got: Vec<u64> = mapped.start()?.collect::<Result<_>>()?;
    assert_eq!(got.len(), 54);
    for (file, lines) in got.chunks(9).enumerate() {
        let file = file as u64;
        assert_eq!(lines[0], file * 100, "{got:?}");
        let mut sorted = lines.to_vec();
        sorted.sort();
        let want: Vec<u64> = (0..9).map(|i| file * 100 + i).collect();
        assert_eq!(sorted, want, "{got:?}");
    }
    Ok(())
}

#[test]
fn from_fn_wraps_iterators_that_are_not_clone() -> Result<()> {
    use std::io::BufRead;
    let make = || {
        IterableWrapper::from_fn(|| {
            "a\nb\nc\n"
                .as_bytes()
                .lines()
                .map(|l| l.expect("in memory"))
        })
    };
    for cut in 0..=4 {
        testing::assert_save_load(make, cut);
    }
    // A fresh iterator each epoch.
    let mut calls = 0;
    let mut loader = Loader::new(IterableWrapper::from_fn(move || {
        calls += 1;
        0..calls
    }));
    let counts: Vec<usize> = (0..3).map(|_| loader.epoch().count()).collect();
    assert_eq!(counts, [1, 2, 3]);
    Ok(())
}

#[cfg(feature = "gzip")]
#[test]
fn gzip_files_read_and_restore() -> Result<()> {
    use std::io::Write;
    let dir = TempDir::new("files-gzip");
    corpus(&dir);
    // a.jsonl and c.jsonl compressed (c as two gzip members).
    for (name, members) in [("a.jsonl", 1), ("c.jsonl", 2)] {
        let text = std::fs::read(dir.path().join(name)).unwrap();
        let cut = text.len() / members;
        let mut out = Vec::new();
        for part in [&text[..cut], &text[cut..]] {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(part).unwrap();
            out.extend(enc.finish().unwrap());
        }
        std::fs::remove_file(dir.path().join(name)).unwrap();
        dir.write(&format!("{name}.gz"), out);
    }
    let build = || Files::in_dir(dir.path()).unwrap().read_jsonl::<Row>();
    let rows: Vec<Result<Row>> = build().start()?.collect();
    let mut got = ids(&rows);
    got.sort();
    assert_eq!(got, [0, 1, 2, 3, 4, 5]);
    for cut in 0..=7 {
        testing::assert_save_load(build, cut);
    }
    // A damaged gzip file is an error naming it, and the pass goes on.
    dir.write("e.jsonl.gz", b"\x1f\x8b\x08\x00garbage");
    let items: Vec<Result<Row>> = build().start()?.collect();
    assert_eq!(messages(&items).len(), 1);
    assert!(
        messages(&items)[0].contains("e.jsonl.gz:1: cannot read"),
        "{:?}",
        messages(&items)
    );
    Ok(())
}

#[cfg(feature = "zstd")]
#[test]
fn zstd_files_read_and_restore() -> Result<()> {
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};
    let dir = TempDir::new("files-zstd");
    corpus(&dir);
    for name in ["a.jsonl", "d.jsonl"] {
        let text = std::fs::read(dir.path().join(name)).unwrap();
        std::fs::remove_file(dir.path().join(name)).unwrap();
        dir.write(
            &format!("{name}.zst"),
            compress_to_vec(&text[..], CompressionLevel::Fastest),
        );
    }
    let build = || Files::in_dir(dir.path()).unwrap().read_jsonl::<Row>();
    let rows: Vec<Result<Row>> = build().start()?.collect();
    let mut got = ids(&rows);
    got.sort();
    assert_eq!(got, [0, 1, 2, 3, 4, 5]);
    for cut in 0..=7 {
        testing::assert_save_load(build, cut);
    }
    dir.write("e.jsonl.zst", b"not zstd at all");
    let items: Vec<Result<Row>> = build().start()?.collect();
    assert!(
        messages(&items)[0].contains("e.jsonl.zst: not a zstd file"),
        "{:?}",
        messages(&items)
    );
    Ok(())
}

/// Lines of `text` as one zstd frame each, concatenated (as `cat a.zst
/// b.zst` makes), with a skippable frame (as pzstd writes) between the
/// first two.
#[cfg(feature = "zstd")]
fn zstd_frames(parts: &[&str]) -> Vec<u8> {
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};
    let mut bytes = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        bytes.extend(compress_to_vec(part.as_bytes(), CompressionLevel::Fastest));
        if i == 0 {
            bytes.extend(0x184D_2A50u32.to_le_bytes());
            bytes.extend(3u32.to_le_bytes());
            bytes.extend(b"pad");
        }
    }
    bytes
}

#[cfg(feature = "zstd")]
#[test]
fn every_zstd_frame_is_read_and_a_resume_in_a_later_frame_is_exact() -> Result<()> {
    let dir = TempDir::new("files-zstd-frames");
    let parts = ["1\n2\n", "3\n4\n5\n", "6\n"];
    dir.write("a.txt.zst", zstd_frames(&parts));
    let build = || Files::in_dir(dir.path()).unwrap().read_jsonl::<u32>();
    let got: Vec<u32> = build().start()?.collect::<Result<_>>()?;
    assert_eq!(got, [1, 2, 3, 4, 5, 6]);
    for cut in 0..=7 {
        testing::assert_save_load(build, cut);
    }
    // Bytes after the last frame that start no frame: an error naming the
    // file, under a policy that skips bad records too.
    let mut bytes = zstd_frames(&parts);
    bytes.extend(b"trailing garbage");
    dir.write("a.txt.zst", bytes);
    let items: Vec<Result<u32>> = build().on_error(ErrorPolicy::Skip).start()?.collect();
    let errors = messages(&items);
    assert_eq!(errors.len(), 1, "{items:?}");
    assert!(
        errors[0].contains("a.txt.zst") && errors[0].contains("start no zstd frame"),
        "{errors:?}"
    );
    Ok(())
}

/// A state in a zstd file names where the frame that holds its offset
/// starts; a restore decompresses from there, so earlier frames are not
/// read at all (here: damaged, which a read from the start would report).
#[cfg(feature = "zstd")]
#[test]
fn a_zstd_restore_decompresses_only_the_frame_that_holds_its_offset() -> Result<()> {
    let dir = TempDir::new("files-zstd-seek");
    let parts: Vec<String> = (0..4)
        .map(|f| (f * 100..f * 100 + 100).map(|i| format!("{i}\n")).collect())
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let bytes = zstd_frames(&parts);
    dir.write("a.txt.zst", &bytes);
    let build = || Files::in_dir(dir.path()).unwrap().read_jsonl::<u32>();
    let mut running = build().start()?;
    for _ in 0..250 {
        running.next().unwrap()?;
    }
    let state = running.get_state()?;
    let frame = state.to_value()["identity"]["frame"].clone();
    let third = parts[0].len() + parts[1].len();
    assert_eq!(frame["offset"], serde_json::json!(third), "{frame}");
    let first_two = parts[..2].iter().map(|p| {
        ruzstd::encoding::compress_to_vec(p.as_bytes(), ruzstd::encoding::CompressionLevel::Fastest)
            .len()
    });
    // The skippable frame after the first: 4 + 4 + 3 bytes.
    assert_eq!(
        frame["at"],
        serde_json::json!(first_two.sum::<usize>() + 11),
        "{frame}"
    );
    let mut damaged = bytes.clone();
    damaged[8..16].iter_mut().for_each(|b| *b ^= 0x55);
    dir.write("a.txt.zst", &damaged);
    let whole: Vec<Result<u32>> = build().start()?.collect();
    assert!(
        !messages(&whole).is_empty(),
        "the damage is in the first frame"
    );
    let rest: Vec<u32> = nodes_std::Running::start_from(build(), &state)?.collect::<Result<_>>()?;
    assert_eq!(rest, (250..400).collect::<Vec<u32>>());
    Ok(())
}

/// The same for a gzip file of several members (`cat a.gz b.gz`, bgzip):
/// a restore decompresses from the member that holds its offset.
#[cfg(feature = "gzip")]
#[test]
fn a_gzip_restore_decompresses_only_the_member_that_holds_its_offset() -> Result<()> {
    use std::io::Write as _;
    let dir = TempDir::new("files-gzip-seek");
    let members: Vec<Vec<u8>> = (0..4u32)
        .map(|m| {
            let text: String = (m * 100..m * 100 + 100).map(|i| format!("{i}\n")).collect();
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(text.as_bytes()).unwrap();
            enc.finish().unwrap()
        })
        .collect();
    let bytes = members.concat();
    dir.write("a.txt.gz", &bytes);
    let build = || Files::in_dir(dir.path()).unwrap().read_jsonl::<u32>();
    let all: Vec<u32> = build().start()?.collect::<Result<_>>()?;
    assert_eq!(all, (0..400).collect::<Vec<u32>>(), "every member is read");
    let mut running = build().start()?;
    for _ in 0..250 {
        running.next().unwrap()?;
    }
    let state = running.get_state()?;
    let frame = state.to_value()["identity"]["frame"].clone();
    let third_text: usize = (0..200u32).map(|i| format!("{i}\n").len()).sum();
    let third_at = members[0].len() + members[1].len();
    assert_eq!(
        frame,
        serde_json::json!({"at": third_at, "offset": third_text})
    );
    // Damage the first member's data: a read from the start fails its CRC.
    let mut damaged = bytes.clone();
    damaged[12..20].iter_mut().for_each(|b| *b ^= 0x55);
    dir.write("a.txt.gz", &damaged);
    let whole: Vec<Result<u32>> = build().start()?.collect();
    assert!(
        !messages(&whole).is_empty(),
        "the damage is in the first member"
    );
    let rest: Vec<u32> = nodes_std::Running::start_from(build(), &state)?.collect::<Result<_>>()?;
    assert_eq!(rest, (250..400).collect::<Vec<u32>>());
    for cut in [0, 99, 100, 101, 399, 400] {
        dir.write("a.txt.gz", &bytes);
        testing::assert_save_load(build, cut);
    }
    Ok(())
}

/// A zstd frame carries a checksum of its content: a changed byte anywhere
/// in the file either leaves the lines as they were or gives an error, and
/// a checksum that fails is an error naming the file under every policy,
/// never a bad record to skip.
#[cfg(feature = "zstd")]
#[test]
fn a_damaged_zstd_file_never_gives_changed_lines_without_an_error() -> Result<()> {
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};
    let dir = TempDir::new("files-zstd-damage");
    let text: String = (0..40).map(|i| format!("{}\n", i * 7919 % 1000)).collect();
    let good: Vec<u32> = text.lines().map(|l| l.parse().unwrap()).collect();
    let bytes = compress_to_vec(text.as_bytes(), CompressionLevel::Fastest);
    let build = |policy| {
        Files::in_dir(dir.path())
            .unwrap()
            .read_jsonl::<u32>()
            .on_error(policy)
    };
    let mut checksum_errors = 0;
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x20;
        dir.write("a.txt.zst", damaged);
        for policy in [ErrorPolicy::Deliver, ErrorPolicy::Skip] {
            let items: Vec<Result<u32>> = build(policy).start()?.collect();
            let lines: Vec<u32> = items
                .iter()
                .filter_map(|r| r.as_ref().ok().copied())
                .collect();
            let errors = messages(&items);
            // A file that does not start as zstd is a bad record, which
            // `Skip` passes over whole (and counts).
            let skipped_whole = policy == ErrorPolicy::Skip && lines.is_empty();
            assert!(
                !errors.is_empty() || lines == good || skipped_whole,
                "byte {at} changed, {policy:?}: changed lines and no error"
            );
            if errors.iter().any(|e| e.contains("checksum")) {
                assert!(errors.iter().any(|e| e.contains("a.txt.zst")), "{errors:?}");
                checksum_errors += 1;
            }
        }
    }
    // The last four bytes are the checksum itself: each change is caught by it.
    assert!(checksum_errors >= 8, "{checksum_errors}");
    Ok(())
}

/// Restores `state` into `read_lines` over `files`, expecting a bad state
/// at `key` whose message has each of `words`.
fn refused(files: Files, state: &State, key: &str, words: &[&str]) {
    let err = files.read_lines().start_from(state).unwrap_err();
    assert!(err.is_bad_state(), "{err}");
    assert_eq!(err.state_path(), Some(key), "{err}");
    for word in words {
        assert!(err.to_string().contains(word), "{word}: {err}");
    }
}

/// Issue 35, item 1 (a): a file rewritten with other content of the same
/// length is refused, rather than resumed mid-line.
#[test]
fn a_file_rewritten_under_a_state_is_refused() -> Result<()> {
    let dir = TempDir::new("files-rewritten");
    let a = dir.write("a.txt", "alpha\nbeta\ngamma\n");
    let mut running = Files::list([&a])?.read_lines().start()?;
    assert_eq!(running.next().transpose()?.as_deref(), Some("alpha"));
    let state = running.get_state()?;
    dir.write("a.txt", "0123456789\nabcde\n");
    let words = ["a.txt", "changed since the state was saved", "at offset 6"];
    refused(Files::list([&a])?, &state, "/identity", &words);
    Ok(())
}

/// Issue 35, item 1 (b): a last line without an end, read, then appended
/// to: its tail is not delivered as a line of its own.
#[test]
fn a_file_appended_to_under_a_state_is_refused() -> Result<()> {
    let dir = TempDir::new("files-appended");
    let a = dir.write("a.txt", "alpha\nbeta");
    let mut running = Files::list([&a])?.read_lines().start()?;
    running.next().transpose()?;
    assert_eq!(running.next().transpose()?.as_deref(), Some("beta"));
    let state = running.get_state()?;
    assert_eq!(state.value("identity")?["line_start"], false);
    dir.write("a.txt", "alpha\nbetaX\nnext\n");
    let words = ["a.txt", "size: 17", "size: 10"];
    refused(Files::list([&a])?, &state, "/identity", &words);
    // Unchanged, the same state resumes after the last line.
    dir.write("a.txt", "alpha\nbeta");
    let rest: Vec<String> = Files::list([&a])?
        .read_lines()
        .start_from(&state)?
        .collect::<Result<_>>()?;
    assert!(rest.is_empty(), "{rest:?}");
    Ok(())
}

/// The identity covers the 4 KiB before the offset, also when the offset
/// is further into the file: a change there is refused, one before it is
/// not seen (restore stays O(1) in the file).
#[test]
fn the_identity_covers_the_bytes_before_the_offset() -> Result<()> {
    let dir = TempDir::new("files-identity-window");
    let text: String = (0..2000).map(|i| format!("line {i:05}\n")).collect();
    let a = dir.write("a.txt", &text);
    let mut running = Files::list([&a])?.read_lines().start()?;
    for _ in 0..1000 {
        running.next().transpose()?;
    }
    let state = running.get_state()?;
    let near = text.replacen("line 00999", "line 0099X", 1);
    dir.write("a.txt", near);
    refused(
        Files::list([&a])?,
        &state,
        "/identity",
        &["at offset 11000"],
    );
    let far = text.replacen("line 00001", "line 0000X", 1);
    dir.write("a.txt", far);
    let rest = Files::list([&a])?.read_lines().start_from(&state)?;
    assert_eq!(rest.count(), 1000);
    Ok(())
}

#[test]
fn a_reader_state_without_identity_is_refused_as_older() -> Result<()> {
    let dir = TempDir::new("files-no-identity");
    let a = dir.write("a.txt", "1\n2\n");
    let mut running = Files::list([&a])?.read_lines().start()?;
    running.next().transpose()?;
    let mut state = running.get_state()?.to_value();
    state.as_object_mut().unwrap().remove("identity");
    let state = State::from_value(state)?;
    refused(
        Files::list([&a])?,
        &state,
        "/identity",
        &["predates identity checks"],
    );
    Ok(())
}

/// Copies the files of `from` into a new directory `name`.
fn copy_dir(from: &TempDir, name: &str) -> TempDir {
    let to = TempDir::new(name);
    for entry in std::fs::read_dir(from.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        to.write(&name, std::fs::read(entry.path()).unwrap());
    }
    to
}

/// Issue 35, item 2: a dataset copied to a new directory (and the old copy
/// changed) resumes from the new one, over a directory, a glob and a list,
/// also with the files listed on another thread.
#[test]
fn a_moved_dataset_resumes_from_its_new_place() -> Result<()> {
    type Build = fn(&Path) -> Result<Box<dyn Node<Item = PathBuf>>>;
    let builds: [(&str, Build); 4] = [
        ("in_dir", |d| Ok(Files::in_dir(d)?.shuffle_files(3).boxed())),
        ("glob", |d| {
            let files = Files::glob(&format!("{}/*.jsonl", d.display()))?;
            Ok(files.shuffle_files(3).boxed())
        }),
        ("list", |d| {
            let files = Files::list(["a.jsonl", "c.jsonl", "d.jsonl"].map(|n| d.join(n)))?;
            Ok(files.shuffle_files(3).boxed())
        }),
        ("prefetched", |d| {
            Ok(Files::in_dir(d)?.shuffle_files(3).prefetch(2)?.boxed())
        }),
    ];
    for (case, build) in builds {
        let reader = |d: &Path| Ok(build(d)?.read_jsonl::<Row>().boxed());
        resumes_after_a_move(case, reader, |old| {
            for name in ["a.jsonl", "c.jsonl", "d.jsonl"] {
                old.write(
                    name,
                    "{\"id\": 99, \"text\": \"old\"}\n{\"id\": 98, \"text\": \"old\"}\n",
                );
            }
        })?;
    }
    Ok(())
}

/// Cuts a run of `reader` over the corpus after every item, copies the
/// corpus to a new directory, lets `leave` change or remove the old copy,
/// and resumes from the new one: the rest must be what the uninterrupted
/// run delivered after the cut.
fn resumes_after_a_move(
    case: &str,
    reader: impl Fn(&Path) -> Result<Box<dyn Node<Item = Row>>>,
    leave: impl Fn(&TempDir),
) -> Result<()> {
    let old = TempDir::new("files-moved-from");
    corpus(&old);
    let all: Vec<Result<Row>> = reader(old.path())?.start()?.collect();
    let all = ids(&all);
    for cut in 1..all.len() {
        let mut running = reader(old.path())?.start()?;
        for _ in 0..cut {
            running.next().transpose()?;
        }
        let state = running.get_state()?;
        let new = copy_dir(&old, "files-moved-to");
        leave(&old);
        let rest: Vec<Result<Row>> = reader(new.path())?.start_from(&state)?.collect();
        assert_eq!(ids(&rest), all[cut..], "{case}, cut {cut}");
        corpus(&old);
    }
    Ok(())
}

/// A reader of one file, as `interleave` opens them.
fn open_one(path: PathBuf) -> impl Node<Item = Row> {
    IterableWrapper::new(vec![path]).read_jsonl::<Row>()
}

/// The same through `interleave`, whose open slots pull their files again
/// from the file list (itself on another thread in the second case).
#[test]
fn a_moved_dataset_read_through_interleave_resumes_from_its_new_place() -> Result<()> {
    type Build = fn(&Path) -> Result<Box<dyn Node<Item = Row>>>;
    let builds: [(&str, Build); 2] = [
        ("in_dir", |d| {
            let files = Files::in_dir(d)?.shuffle_files(3);
            Ok(files.interleave(2, 1, open_one)?.boxed())
        }),
        ("prefetched", |d| {
            let files = Files::in_dir(d)?.shuffle_files(3).prefetch(2)?;
            Ok(files.interleave(2, 1, open_one)?.boxed())
        }),
    ];
    for (case, reader) in builds {
        resumes_after_a_move(case, reader, |old| {
            for name in ["a.jsonl", "c.jsonl", "d.jsonl"] {
                std::fs::remove_file(old.path().join(name)).unwrap();
            }
        })?;
    }
    Ok(())
}

/// A reader state whose source's state is from before another file than
/// the one its `path` and identity name is refused at that field.
#[test]
fn a_reader_and_source_that_disagree_are_refused() -> Result<()> {
    let dir = TempDir::new("files-disagree");
    corpus(&dir);
    let mut running = Files::in_dir(dir.path())?.read_lines().start()?;
    running.next().transpose()?;
    let in_a = running.get_state()?;
    for _ in 0..3 {
        running.next().transpose()?;
    }
    let in_c = running.get_state()?;
    assert_eq!(
        (in_a.get::<String>("path")?, in_c.get::<String>("path")?),
        ("a.jsonl".to_owned(), "c.jsonl".to_owned())
    );
    let files = || Files::in_dir(dir.path()).unwrap();
    let mut mixed = in_a;
    mixed.insert_child("source", in_c.child("source")?);
    let words = [
        "c.jsonl",
        "a file named `a.jsonl`",
        "not from before that file",
    ];
    refused(files(), &mixed, "/path", &words);
    let words = ["c.jsonl", "changed since the state was saved"];
    refused(
        files(),
        &mixed.with("path", "c.jsonl")?,
        "/identity",
        &words,
    );
    Ok(())
}

/// A reader restores by pulling its file again, so a source whose order
/// varies between runs is refused, as under `flat_map`.
#[test]
fn a_reader_over_a_source_of_varying_order_is_refused() -> Result<()> {
    let dir = TempDir::new("files-varying-order");
    corpus(&dir);
    let out_of_order = ParallelOptions::new(2).in_order(false);
    let err = Files::in_dir(dir.path())?
        .par_map(Ok, out_of_order)?
        .read_lines()
        .start()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidPipeline { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("pulling its current source item again"),
        "{err}"
    );
    Ok(())
}

/// A compressed file's identity: the compressed file's size and a digest
/// of the decompressed bytes before the offset.
#[cfg(feature = "gzip")]
#[test]
fn a_compressed_file_rewritten_under_a_state_is_refused() -> Result<()> {
    use std::io::Write;
    let gzip = |text: &str| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(text.as_bytes()).unwrap();
        enc.finish().unwrap()
    };
    let dir = TempDir::new("files-gzip-rewritten");
    let a = dir.write("a.txt.gz", gzip("alpha\nbeta\ngamma\n"));
    let mut running = Files::list([&a])?.read_lines().start()?;
    running.next().transpose()?;
    let state = running.get_state()?;
    let rest: Vec<String> = Files::list([&a])?
        .read_lines()
        .start_from(&state)?
        .collect::<Result<_>>()?;
    assert_eq!(rest, ["beta", "gamma"]);
    dir.write("a.txt.gz", gzip("0123456789\nabcde\n"));
    refused(
        Files::list([&a])?,
        &state,
        "/identity",
        &["a.txt.gz", "at offset 6"],
    );
    Ok(())
}
