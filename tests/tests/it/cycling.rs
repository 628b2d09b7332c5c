//! Mixes that restart their sources (the `CYCLE_*` stop criteria) over
//! sharded, shuffled files: each rank restarts its share as often as its
//! own draws make it, yet every epoch starts the same file order on every
//! rank, so the first run of the epoch's files over all ranks reads each
//! file exactly once, uninterrupted or resumed from any cut.

use std::collections::BTreeMap;

use nodes_std::prelude::*;
use nodes_std::{
    Files, IterableWrapper, MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, ParallelOptions,
    StopCriteria, testing,
};

use serde_json::json;

use crate::support::corpus::TempDir;

#[derive(Clone, Copy, Debug)]
enum Mix {
    Weighted,
    RoundRobin,
    /// Weighted, the files read under a `par_map` and a `prefetch`.
    Threaded,
}

/// `files` files of one line each, the line naming its file.
fn corpus(files: usize) -> TempDir {
    let dir = TempDir::new("cycling");
    for f in 0..files {
        dir.write(&format!("f{f:02}.txt"), format!("f{f:02}\n"));
    }
    dir
}

/// Rank `rank`'s mix of its share of the files (`a`, shuffled each epoch)
/// and 23 lines of its own (`b`), restarting each when it ends.
fn mix(dir: &TempDir, kind: Mix, rank: u64, world: u64) -> Box<dyn Node<Item = String>> {
    let files = Files::in_dir(dir.path()).unwrap().shuffle_files(5);
    let lines = files.shard(rank, world).unwrap().read_lines();
    let a = match kind {
        Mix::Threaded => lines
            .par_map(Ok, ParallelOptions::new(2))
            .unwrap()
            .prefetch(2)
            .unwrap()
            .boxed(),
        _ => lines.boxed(),
    };
    let b = IterableWrapper::new((0..23).map(|i| format!("b{i}")).collect::<Vec<_>>()).boxed();
    let stop = StopCriteria::CycleUntilAllDatasetsExhausted;
    match kind {
        Mix::Weighted | Mix::Threaded => {
            MultiNodeWeightedSampler::new([("a", a), ("b", b)], [("a", 0.6), ("b", 0.4)])
                .unwrap()
                .stop_criteria(stop)
                .seed(11)
                .rank(rank, world)
                .unwrap()
                .boxed()
        }
        Mix::RoundRobin => MultiNodeRoundRobinSampler::new([("a", a), ("b", b)])
            .unwrap()
            .stop_criteria(stop)
            .boxed(),
    }
}

#[test]
fn every_epoch_starts_the_same_file_order_on_every_rank() -> Result<()> {
    for (files, world) in [(5, 2), (7, 3), (3, 2), (8, 3)] {
        let dir = corpus(files);
        for kind in [Mix::Weighted, Mix::RoundRobin, Mix::Threaded] {
            // Per epoch, how often each file is in a rank's first run.
            let mut first_runs: BTreeMap<u64, BTreeMap<String, u32>> = BTreeMap::new();
            let mut restarted = 0;
            for rank in 0..world {
                // The rank's share: every `world`-th position of the order.
                let share = (rank as usize..files).step_by(world as usize).count();
                let mut loader = Loader::new(mix(&dir, kind, rank, world));
                for epoch in 0..5 {
                    let items: Vec<String> = loader.epoch().collect::<Result<_>>()?;
                    let a: Vec<&String> = items.iter().filter(|i| i.starts_with('f')).collect();
                    restarted += usize::from(a.len() > share);
                    let counts = first_runs.entry(epoch).or_default();
                    for line in a.into_iter().take(share) {
                        *counts.entry(line.clone()).or_default() += 1;
                    }
                }
            }
            let case = format!("{files} files on {world} ranks, {kind:?}");
            assert!(restarted > 0, "{case}: no rank restarted its files");
            for (epoch, counts) in first_runs {
                let want = (0..files).map(|f| (format!("f{f:02}"), 1)).collect();
                assert_eq!(
                    counts, want,
                    "{case}, epoch {epoch}: first runs over the ranks"
                );
            }
        }
    }
    Ok(())
}

/// The price of the alignment: the next pass of a restarted source starts
/// at the order of its second run in this pass.
#[test]
fn the_next_epochs_first_run_has_the_order_of_this_epochs_second() -> Result<()> {
    let dir = corpus(5);
    let mut loader = Loader::new(mix(&dir, Mix::RoundRobin, 0, 1));
    let mut runs = Vec::new();
    for _ in 0..3 {
        let items: Vec<String> = loader.epoch().collect::<Result<_>>()?;
        let a: Vec<String> = items.into_iter().filter(|i| i.starts_with('f')).collect();
        runs.push(a.chunks(5).map(<[String]>::to_vec).collect::<Vec<_>>());
    }
    for epoch in 0..2 {
        assert!(
            runs[epoch].len() > 2,
            "epoch {epoch} restarted its files: {:?}",
            runs[epoch]
        );
        assert_eq!(runs[epoch + 1][0], runs[epoch][1], "epoch {}", epoch + 1);
        assert_ne!(runs[epoch][0], runs[epoch][1], "a restart is a new order");
    }
    Ok(())
}

#[test]
fn a_resume_after_a_restart_keeps_the_next_epochs_order() {
    let dir = corpus(5);
    for kind in [Mix::Weighted, Mix::RoundRobin, Mix::Threaded] {
        for rank in 0..2 {
            // Cuts before, at and after the first restarts of the files.
            for midpoint in [0, 2, 4, 9, 17, 30] {
                let run = testing::check_save_load(|| mix(&dir, kind, rank, 2), midpoint);
                assert_eq!(run, Ok(()), "{kind:?}, rank {rank}, cut at {midpoint}");
            }
        }
    }
}

#[test]
fn a_damaged_first_run_end_is_refused_at_its_key() -> Result<()> {
    let dir = corpus(5);
    let mut loader = Loader::new(mix(&dir, Mix::RoundRobin, 0, 2));
    let mut epoch = loader.epoch();
    // Round robin: `a`, `b`, `a`, ... ; `a` (3 files) ends and restarts
    // after 7 items.
    for _ in 0..9 {
        epoch.next().expect("an item")?;
    }
    drop(epoch);
    let state = loader.state_dict()?.to_value();
    let ends = "/root/dataset_first_pass_ends";
    let end_of_a = state
        .pointer(&format!("{ends}/a"))
        .expect("a's first run end")
        .clone();
    // An edited state: its checksum no longer matches, which is not what this tests.
    let mut loader = Loader::new(mix(&dir, Mix::RoundRobin, 0, 2)).verify_checksum(false);
    // (source, its new first run end or none, what the error says)
    let edits = [
        ("c", Some(&end_of_a), "not a source of this sampler"),
        ("b", Some(&end_of_a), "source b has not ended in this pass"),
        (
            "a",
            None,
            "source a ended, but its first run's end is missing",
        ),
        (
            "a",
            Some(&json!(5)),
            "expected a nested state (object), found",
        ),
    ];
    for (key, end, why) in edits {
        let mut edited = state.clone();
        let saved = edited.pointer_mut(ends).unwrap().as_object_mut().unwrap();
        match end {
            None => saved.remove(key),
            Some(end) => saved.insert(key.into(), end.clone()),
        };
        // By a reset alone, as by a loader (which checks the state first).
        let mut sampler = mix(&dir, Mix::RoundRobin, 0, 2);
        let root = State::from_value(edited["root"].clone())?;
        let alone = sampler.reset(Some(&root)).unwrap_err().to_string();
        assert!(alone.contains(why), "{alone}");
        let err = loader
            .load_state_dict(&State::from_value(edited)?)
            .unwrap_err();
        let err = err.to_string();
        assert!(err.contains(&format!("{ends}/{key}:")), "{err}");
        assert!(err.contains(why), "{err}");
    }
    Ok(())
}
