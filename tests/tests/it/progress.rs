//! `Epoch::progress` over file pipelines: files done and bytes read follow
//! the file each item comes from and end at the listing's totals, after a
//! restore, on a rank's share, inside an interleave and behind a prefetch,
//! for compressed files too.

use std::path::PathBuf;

use nodes_std::prelude::*;
use nodes_std::{Files, IterableWrapper, Progress};

use crate::support::corpus::TempDir;

/// Lines per file (0 for an empty file); each line is `f{file}:{line}:`
/// padded to 100 bytes with its end, so the larger files span several
/// read buffers.
const LINES: [usize; 5] = [3000, 0, 10, 2000, 1];

fn corpus(name: &str) -> (TempDir, Vec<u64>) {
    let dir = TempDir::new(name);
    let sizes = LINES
        .iter()
        .enumerate()
        .map(|(file, &lines)| {
            let text: String = (0..lines)
                .map(|line| format!("{:<99}\n", format!("f{file}:{line}:")))
                .collect();
            dir.write(&format!("f{file}.txt"), &text);
            text.len() as u64
        })
        .collect();
    (dir, sizes)
}

/// The file a line comes from.
fn file_of(line: &str) -> usize {
    line[1..line.find(':').unwrap()].parse().unwrap()
}

fn start(total: u64, files: u64) -> Progress {
    Progress {
        files_done: 0,
        files_total: Some(files),
        bytes_read: 0,
        bytes_total: Some(total),
    }
}

fn done(total: u64, files: u64) -> Progress {
    Progress {
        files_done: files,
        bytes_read: total,
        ..start(total, files)
    }
}

/// While an item of file `file` is returned, the files before it are done
/// and it is open.
fn assert_in_file(progress: Progress, sizes: &[u64], file: usize) {
    let before: u64 = sizes[..file].iter().sum();
    assert_eq!(progress.files_done, file as u64, "{progress:?}");
    assert!(
        (before..=before + sizes[file]).contains(&progress.bytes_read),
        "{progress:?} in file {file}"
    );
}

#[test]
fn progress_follows_the_file_read_and_ends_at_the_totals() -> Result<()> {
    let (dir, sizes) = corpus("progress-plain");
    let total: u64 = sizes.iter().sum();
    let mut loader = Loader::new(Files::in_dir(dir.path())?.read_lines());
    for _ in 0..2 {
        let mut epoch = loader.epoch();
        assert_eq!(epoch.progress(), start(total, 5));
        let mut last = epoch.progress();
        let mut within_first = false;
        while let Some(line) = epoch.next() {
            let progress = epoch.progress();
            assert_in_file(progress, &sizes, file_of(&line?));
            assert!(
                progress.bytes_read >= last.bytes_read,
                "{last:?} then {progress:?}"
            );
            within_first |= progress.bytes_read > 0 && progress.bytes_read < sizes[0];
            last = progress;
        }
        assert!(within_first, "the bytes read move within a file");
        assert_eq!(epoch.progress(), done(total, 5));
        assert_eq!(epoch.progress().fraction(), Some(1.0));
    }
    Ok(())
}

#[test]
fn a_restore_resumes_the_progress_where_the_state_was() -> Result<()> {
    let (dir, sizes) = corpus("progress-restore");
    let total: u64 = sizes.iter().sum();
    let build = || Files::in_dir(dir.path()).map(|f| f.read_lines());
    // Cuts in the first file, in the middle of file 3 and at its last line.
    for cut in [1, 3000 + 10 + 700, 5010] {
        let mut loader = Loader::new(build()?);
        let mut epoch = loader.epoch();
        let mut line = String::new();
        for _ in 0..cut {
            line = epoch.next().expect("an item")?;
        }
        let state = epoch.state_dict()?;
        let mut loader = Loader::new(build()?);
        loader.load_state_dict(&state)?;
        let mut epoch = loader.epoch();
        // A loaded state's epoch looks one item ahead (to start the next
        // epoch if none is left): the progress is where that item is.
        let restored = epoch.progress();
        let next = epoch.next().expect("an item")?;
        assert_in_file(restored, &sizes, file_of(&next));
        assert!(file_of(&next) >= file_of(&line));
        while let Some(line) = epoch.next() {
            assert_in_file(epoch.progress(), &sizes, file_of(&line?));
        }
        assert_eq!(epoch.progress(), done(total, 5));
    }
    Ok(())
}

#[test]
fn a_rank_counts_its_share_of_the_files() -> Result<()> {
    let (dir, sizes) = corpus("progress-ranks");
    // Every file but the empty one, so that each rank's files show in its lines.
    std::fs::remove_file(dir.path().join("f1.txt")).unwrap();
    let mut files_of_all = 0;
    for rank in 0..3 {
        let files = Files::in_dir(dir.path())?.shuffle_files(7);
        let mut loader = Loader::new(files.shard(rank, 3)?.read_lines());
        for _ in 0..2 {
            let mut epoch = loader.epoch();
            let mut mine: Vec<usize> = Vec::new();
            while let Some(line) = epoch.next() {
                let file = file_of(&line?);
                if mine.last() != Some(&file) {
                    mine.push(file);
                }
                assert_eq!(epoch.progress().files_done, mine.len() as u64 - 1);
            }
            let bytes: u64 = mine.iter().map(|&f| sizes[f]).sum();
            let count = mine.len() as u64;
            assert_eq!(
                epoch.progress(),
                done(bytes, count),
                "rank {rank}: {mine:?}"
            );
            files_of_all += count;
        }
    }
    assert_eq!(files_of_all, 2 * 4);
    Ok(())
}

/// Reads an epoch of an interleave of the files (maybe behind a prefetch)
/// and checks its progress against the lines returned: a file all of
/// whose lines were returned is done, but for the two the interleave may
/// hold open; one with lines still to come is not, unless `ahead` (a
/// prefetch reads further on its own thread).
fn check_interleaved<N: Node<Item = String>>(node: N, sizes: &[u64], ahead: bool) -> Result<()> {
    let total: u64 = sizes.iter().sum();
    let mut loader = Loader::new(node);
    let mut epoch = loader.epoch();
    assert_eq!(epoch.progress(), start(total, 4));
    let mut seen = [0usize; 5];
    while let Some(line) = epoch.next() {
        seen[file_of(&line?)] += 1;
        let progress = epoch.progress();
        let finished = (0..5)
            .filter(|&f| LINES[f] > 0 && seen[f] == LINES[f])
            .count() as u64;
        assert!(
            progress.files_done + 2 >= finished,
            "{progress:?} after {seen:?}"
        );
        assert!(
            ahead || progress.files_done <= finished,
            "{progress:?} after {seen:?}"
        );
        assert!(progress.bytes_read <= total);
    }
    assert_eq!(epoch.progress(), done(total, 4));
    Ok(())
}

#[test]
fn interleaved_and_prefetched_readers_are_counted() -> Result<()> {
    let (dir, mut sizes) = corpus("progress-interleave");
    // No empty file: one is done before it returns a line.
    std::fs::remove_file(dir.path().join("f1.txt")).unwrap();
    sizes[1] = 0;
    let interleaved = || {
        Files::in_dir(dir.path())?.interleave(2, 16, |path: PathBuf| {
            IterableWrapper::new(vec![path]).read_lines()
        })
    };
    check_interleaved(interleaved()?, &sizes, false)?;
    check_interleaved(interleaved()?.prefetch(8)?, &sizes, true)
}

#[cfg(feature = "zstd")]
#[test]
fn compressed_files_count_their_stored_bytes() -> Result<()> {
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};
    let (dir, mut sizes) = corpus("progress-zstd");
    for file in [0, 3] {
        let name = format!("f{file}.txt");
        let text = std::fs::read(dir.path().join(&name)).unwrap();
        std::fs::remove_file(dir.path().join(&name)).unwrap();
        let packed = compress_to_vec(&text[..], CompressionLevel::Fastest);
        sizes[file] = packed.len() as u64;
        dir.write(&format!("{name}.zst"), packed);
    }
    let total: u64 = sizes.iter().sum();
    let mut loader = Loader::new(Files::in_dir(dir.path())?.read_lines());
    let mut epoch = loader.epoch();
    assert_eq!(epoch.progress(), start(total, 5));
    while let Some(line) = epoch.next() {
        assert_in_file(epoch.progress(), &sizes, file_of(&line?));
    }
    assert_eq!(epoch.progress(), done(total, 5));
    Ok(())
}

#[test]
fn without_a_listing_the_readers_count_and_no_total_is_known() -> Result<()> {
    let (dir, sizes) = corpus("progress-no-listing");
    let paths: Vec<PathBuf> = (0..5)
        .map(|f| dir.path().join(format!("f{f}.txt")))
        .collect();
    let mut loader = Loader::new(IterableWrapper::new(paths).read_lines());
    let mut epoch = loader.epoch();
    for line in epoch.by_ref() {
        line?;
    }
    let progress = epoch.progress();
    let expected = Progress {
        files_done: 5,
        files_total: None,
        bytes_read: sizes.iter().sum(),
        bytes_total: None,
    };
    assert_eq!(progress, expected);
    assert_eq!(progress.fraction(), None);
    Ok(())
}
