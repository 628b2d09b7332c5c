//! A reshard that keeps the job's global batch (ranks × per-rank batch):
//! evenly where the new rank count divides it, refused naming the nearest
//! counts that do where it does not, unevenly when asked; over a
//! file-sharded streaming pipeline, chained, every line exactly once.

use nodes_std::elastic::{BatchSizes, Reshard};
use nodes_std::prelude::*;
use nodes_std::{Files, elastic};

use crate::elastic_files::Corpus;

/// 12 files of 30 lines `f:l`.
fn corpus(tag: &str) -> Corpus {
    let corpus = Corpus::empty(tag);
    for f in 0..12 {
        let text: String = (0..30).map(|l| format!("{f}:{l}\n")).collect();
        std::fs::write(corpus.dir.join(format!("{f:02}.txt")), text).unwrap();
    }
    corpus
}

fn build(
    corpus: &Corpus,
    rank: u64,
    world: u64,
    batch: usize,
) -> Result<impl Node<Item = Vec<String>> + use<>> {
    let files = Files::in_dir(&corpus.dir)?
        .shuffle_files(5)
        .shard(rank, world)?;
    files
        .read_lines()
        .filter(|l: &String| !l.ends_with(":7"))
        .shuffle(16, 3)?
        .batch(batch)
}

/// Every rank of `world` (batching `sizes[rank]`) reads `batches[rank]`
/// batches from `states` (or the start) and saves: the lines read, each
/// batch's length, and the states.
fn generation(
    corpus: &Corpus,
    states: Option<&[State]>,
    sizes: &[usize],
    batches: &[usize],
    reshard: Reshard<'_>,
) -> (Vec<String>, Vec<usize>, Vec<State>) {
    let world = sizes.len() as u64;
    let (mut lines, mut lengths, mut saved) = (Vec::new(), Vec::new(), Vec::new());
    for rank in 0..world {
        let mut loader = Loader::new(build(corpus, rank, world, sizes[rank as usize]).unwrap());
        if states.is_some() {
            reshard.load(&mut loader, rank, world).unwrap();
        }
        let mut epoch = loader.epoch();
        for _ in 0..batches[rank as usize] {
            let Some(batch) = epoch.next() else { break };
            let batch = batch.unwrap();
            lengths.push(batch.len());
            lines.extend(batch);
        }
        saved.push(epoch.state_dict().unwrap());
    }
    (lines, lengths, saved)
}

/// The 330 lines the filter keeps.
fn expected() -> Vec<String> {
    let mut all: Vec<String> = (0..12)
        .flat_map(|f| (0..30).filter(|&l| l != 7).map(move |l| format!("{f}:{l}")))
        .collect();
    all.sort();
    all
}

#[test]
fn a_kept_global_batch_is_divided_evenly_then_unevenly_and_every_line_is_read_once() {
    let corpus = corpus("global-batch");
    let none = Reshard::new(&[]);
    // 4 ranks of 6: a global batch of 24.
    let (mut lines, _, states) = generation(&corpus, None, &[6; 4], &[2, 1, 3, 0], none);

    // 3 ranks of 8 keep it; a rank built with the old size is refused.
    let keep = Reshard::new(&states).batch_sizes(BatchSizes::KeepGlobal);
    let sizes: Vec<usize> = (0..3)
        .map(|r| keep.new_batch_size(r, 3).unwrap().unwrap())
        .collect();
    assert_eq!(sizes, [8, 8, 8]);
    let mut stale = Loader::new(build(&corpus, 0, 3, 6).unwrap());
    let err = keep.load(&mut stale, 0, 3).unwrap_err().to_string();
    assert!(err.contains("batch_size"), "{err}");
    let (more, lengths, states) = generation(&corpus, Some(&states), &sizes, &[2, 4, 1], keep);
    assert!(lengths.iter().all(|&n| n == 8), "{lengths:?}");
    lines.extend(more);

    // 5 ranks cannot each batch 24 / 5 lines, unless unevenly.
    let keep = Reshard::new(&states).batch_sizes(BatchSizes::KeepGlobal);
    let err = keep.states(5).unwrap_err().to_string();
    assert!(
        err.contains("24 items does not divide among 5 ranks: 4 or 6 ranks do"),
        "{err}"
    );
    let uneven = Reshard::new(&states).batch_sizes(BatchSizes::KeepGlobalUneven);
    let sizes: Vec<usize> = (0..5)
        .map(|r| uneven.new_batch_size(r, 5).unwrap().unwrap())
        .collect();
    assert_eq!(sizes, [5, 5, 5, 5, 4]);
    let (more, lengths, states) =
        generation(&corpus, Some(&states), &sizes, &[3, 0, 2, 1, 2], uneven);
    assert!(lengths.iter().all(|&n| n == 5 || n == 4), "{lengths:?}");
    lines.extend(more);

    // Back to 2 ranks from uneven ones: 12 each, to the end of the epoch.
    let keep = Reshard::new(&states).batch_sizes(BatchSizes::KeepGlobal);
    let sizes = [12, 12];
    let (more, lengths, _) = generation(&corpus, Some(&states), &sizes, &[usize::MAX; 2], keep);
    // Only a rank's last batch may be short.
    assert!(
        lengths.iter().filter(|&&n| n != 12).count() <= 2,
        "{lengths:?}"
    );
    lines.extend(more);
    lines.sort();
    assert_eq!(lines, expected());
}

#[test]
fn per_rank_batches_are_the_default_and_stay_as_rank_0_had_them() {
    let corpus = corpus("per-rank-batch");
    let (_, _, states) = generation(&corpus, None, &[6; 4], &[1, 1, 1, 1], Reshard::new(&[]));
    let plain = Reshard::new(&states);
    assert_eq!(plain.new_batch_size(2, 3).unwrap(), Some(6));
    // The plain functions are the default reshard.
    let mut loader = Loader::new(build(&corpus, 2, 3, 6).unwrap());
    elastic::load_resharded(&mut loader, &states, 2, 3).unwrap();
    assert_eq!(
        elastic::reshard(&states, 3).unwrap()[2],
        plain.rank_state(2, 3).unwrap()
    );
}

#[test]
fn a_global_batch_smaller_than_the_new_rank_count_is_refused_even_unevenly() {
    let corpus = corpus("tiny-global-batch");
    let (_, _, states) = generation(&corpus, None, &[1; 2], &[1, 0], Reshard::new(&[]));
    let uneven = Reshard::new(&states).batch_sizes(BatchSizes::KeepGlobalUneven);
    let err = uneven.rank_state(0, 3).unwrap_err().to_string();
    assert!(
        err.contains("a rank would batch nothing (at most 2 ranks)"),
        "{err}"
    );
    assert_eq!(uneven.new_batch_size(1, 2).unwrap(), Some(1));
}
