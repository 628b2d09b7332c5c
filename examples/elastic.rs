//! Changing the number of ranks mid-epoch, twice: 4 ranks, then 3, then 6.
//!
//! 1. Map-style: 4 ranks (threads) read a mix of two map-style datasets
//!    (par_map decode, shuffle buffer, filter, batch), save at different
//!    per-rank progress, resume on 3 ranks, save again, resume on 6 ranks
//!    and finish the epoch. The items in the shuffle buffers at each save
//!    travel in the states to the new ranks.
//! 2. Streaming, the pipeline of LLM pretraining: two datasets of JSONL
//!    files, each `Files` → `shuffle_files` → `shard` →
//!    `interleave(read_jsonl)` → tokenize → `flat_map` into chunks of at
//!    most 5 tokens → `pack`, mixed by weight, batched and prefetched (a
//!    rank may save part way through a record's chunks). Each rank is a worker process that checkpoints every
//!    few batches and is killed with `SIGKILL` after a few checkpoints;
//!    the next generation of ranks resumes from the last checkpoints of the
//!    killed ones (`elastic::load_resharded_with`, which first settles
//!    what the prefetch read ahead). The 6 ranks of the last generation
//!    finish the epoch.
//!
//! Exits non-zero unless every item (part 1), every token by its
//! provenance (file, line, word: part 2) of the epoch was delivered exactly
//! once across all ranks of all generations.
//!
//! `cargo run --release --example elastic`

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use nodes_std::prelude::*;
use nodes_std::{
    ElasticSampler, Files, IterableWrapper, MultiNodeWeightedSampler, StopCriteria, elastic,
};
use serde::{Deserialize, Serialize};

type Res<T> = std::result::Result<T, nodes_std::BoxError>;

const SEED: u64 = 2026;
const BOOKS: u32 = 3_000;
const WEB: u32 = 1_200;
const BATCH: usize = 16;

/// An item: its source and its index there.
type Item = (u8, u32);

/// Whether the filter keeps an item (it drops one in seven).
fn keep(item: &Item) -> bool {
    item.1 % 7 != 3
}

/// Rank `rank` of `world`'s pipeline: two map-style sources, each read
/// through an ElasticSampler, decoded on 2 threads and shuffled in a buffer
/// of 64, mixed 0.7/0.3 until both are exhausted, filtered, batched.
fn pipeline(rank: u64, world: u64) -> Result<impl Node<Item = Vec<Item>>> {
    let source = |tag: u8, len: u32, seed: u64| -> Result<_> {
        let data: Vec<u32> = (0..len).collect();
        let sampler = ElasticSampler::new(RandomSampler::new(len as usize, seed), rank, world)?;
        MapStyleWrapper::new(data, sampler)
            .par_map(
                move |i| Ok((tag, i)),
                ParallelOptions::new(2).in_order(tag == 0),
            )?
            .shuffle(64, seed ^ 0x5eed)
    };
    MultiNodeWeightedSampler::new(
        [
            ("books", source(0, BOOKS, SEED)?),
            ("web", source(1, WEB, SEED + 1)?),
        ],
        [("books", 0.7), ("web", 0.3)],
    )?
    .stop_criteria(StopCriteria::AllDatasetsExhausted)
    .seed(SEED)
    .rank(rank, world)?
    .filter(keep)
    .batch(BATCH)
}

/// Runs `world` ranks on threads. Rank `r` resumes its share of the job
/// that saved `states` (or starts the epoch), takes at most `steps(r)`
/// batches and saves its state as JSON. Returns the items each rank trained
/// on and the saved states.
fn run_ranks(
    world: u64,
    states: Option<&[State]>,
    steps: impl Fn(u64) -> usize + Sync,
) -> Result<(Vec<Item>, Vec<String>)> {
    let results: Vec<Result<(Vec<Item>, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let steps = &steps;
                scope.spawn(move || -> Result<(Vec<Item>, String)> {
                    let mut loader = Loader::new(pipeline(rank, world)?);
                    if let Some(states) = states {
                        elastic::load_resharded(&mut loader, states, rank, world)?;
                    }
                    let mut trained = Vec::new();
                    // Still epoch 0, for a rank with nothing left of it too.
                    let mut epoch = loader.epoch();
                    assert_eq!(epoch.index(), 0, "rank {rank} of {world}");
                    for _ in 0..steps(rank) {
                        match epoch.next() {
                            Some(batch) => trained.extend(batch?),
                            None => break,
                        }
                    }
                    Ok((trained, epoch.state_dict()?.to_json()?))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank panicked"))
            .collect()
    });
    let mut items = Vec::new();
    let mut saved = Vec::new();
    for (rank, result) in results.into_iter().enumerate() {
        let (trained, state) = result?;
        println!("  rank {rank}: {} items", trained.len());
        items.extend(trained);
        saved.push(state);
    }
    Ok((items, saved))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("--worker") => worker(&args[1..]),
        Some(other) => Err(format!("unknown argument {other:?}; run with no argument").into()),
        None => run().and_then(|()| run_streaming()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("elastic: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Res<()> {
    println!("part 1: map-style datasets, ranks on threads");
    let mut delivered: Vec<Item> = Vec::new();

    println!("4 ranks, unequal progress, then save:");
    let (items, saved) = run_ranks(4, None, |rank| 5 + 6 * rank as usize)?;
    delivered.extend(items);
    let states: Vec<State> = saved
        .iter()
        .map(|s| State::from_json(s))
        .collect::<Result<_>>()?;

    println!("resume on 3 ranks, unequal progress, then save:");
    let (items, saved) = run_ranks(3, Some(&states), |rank| 8 + 5 * rank as usize)?;
    delivered.extend(items);
    let states: Vec<State> = saved
        .iter()
        .map(|s| State::from_json(s))
        .collect::<Result<_>>()?;

    println!("resume on 6 ranks, to the end of the epoch:");
    let (items, _) = run_ranks(6, Some(&states), |_| usize::MAX)?;
    delivered.extend(items);

    // Item by item: every item of the epoch that the filter keeps, once.
    let mut counts: BTreeMap<Item, u32> = BTreeMap::new();
    for item in &delivered {
        *counts.entry(*item).or_default() += 1;
    }
    let expected: Vec<Item> = (0..BOOKS)
        .map(|i| (0, i))
        .chain((0..WEB).map(|i| (1, i)))
        .filter(keep)
        .collect();
    let repeated: Vec<_> = counts.iter().filter(|&(_, &c)| c > 1).collect();
    let lost: Vec<_> = expected
        .iter()
        .filter(|i| !counts.contains_key(i))
        .collect();
    let foreign = counts.keys().filter(|i| !keep(i)).count();
    println!(
        "epoch 0: {} items delivered across 4 -> 3 -> 6 ranks, {} expected; {} lost, {} repeated, {} filtered items delivered",
        delivered.len(),
        expected.len(),
        lost.len(),
        repeated.len(),
        foreign
    );
    if !lost.is_empty() || !repeated.is_empty() || foreign > 0 || delivered.len() != expected.len()
    {
        return Err(format!(
            "not exactly once: lost {:?}, repeated {:?}",
            &lost[..lost.len().min(10)],
            &repeated[..repeated.len().min(10)]
        )
        .into());
    }
    println!("every item of the epoch exactly once");
    Ok(())
}

// Part 2: the streaming pipeline, ranks in worker processes killed with SIGKILL.

/// The datasets: name, first file id, file count, mixing weight.
const DATASETS: [(&str, u32, u32, f64); 2] = [("books", 0, 8, 0.6), ("web", 100, 5, 0.4)];
const RECORDS_PER_FILE: u32 = 60;
const SEQ_LEN: usize = 32;
/// A worker checkpoints every this many batches.
const CHECKPOINT_EVERY: u64 = 2;
/// Records are split into chunks of at most this many tokens.
const CHUNK: usize = 5;

/// A record of the corpus, with where it is.
#[derive(Serialize, Deserialize)]
struct Record {
    file: u32,
    line: u32,
    text: String,
}

/// A token names where it came from: file, line and word.
fn token(file: u32, line: u32, word: usize) -> u64 {
    (u64::from(file) << 40) | (u64::from(line) << 20) | word as u64
}

fn tokenize(record: Record) -> Vec<u64> {
    let words = record.text.split(' ').enumerate();
    words
        .map(|(w, _)| token(record.file, record.line, w))
        .collect()
}

/// Writes the corpus: file `f` holds records of 1 to 17 words.
fn write_corpus(data: &Path) -> Res<Vec<u64>> {
    let mut tokens = Vec::new();
    for (name, first, count, _) in DATASETS {
        let dir = data.join(name);
        std::fs::create_dir_all(&dir)?;
        for file in first..first + count {
            let mut out = std::io::BufWriter::new(std::fs::File::create(
                dir.join(format!("{file:03}.jsonl")),
            )?);
            for line in 0..RECORDS_PER_FILE {
                let words = 1 + (file * 7 + line * 13) as usize % 17;
                let text = vec!["word"; words].join(" ");
                tokens.extend((0..words).map(|w| token(file, line, w)));
                serde_json::to_writer(&mut out, &Record { file, line, text })?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
        }
    }
    Ok(tokens)
}

/// Rank `rank` of `world`'s streaming pipeline over the corpus in `data`.
fn streaming(
    data: &Path,
    rank: u64,
    world: u64,
) -> Result<impl Node<Item = Vec<Vec<u64>>> + use<>> {
    let source = |name: &str, seed: u64| -> Result<_> {
        Files::in_dir(data.join(name))?
            .shuffle_files(seed)
            .shard(rank, world)?
            .interleave(2, 3, |path: PathBuf| {
                IterableWrapper::new(vec![path]).read_jsonl::<Record>()
            })?
            .flat_map(|record: Record| {
                let tokens = tokenize(record);
                tokens
                    .chunks(CHUNK)
                    .map(<[u64]>::to_vec)
                    .collect::<Vec<_>>()
            })
            .pack(SEQ_LEN)
    };
    let (books, web) = (DATASETS[0], DATASETS[1]);
    MultiNodeWeightedSampler::new(
        [
            (books.0, source(books.0, SEED)?),
            (web.0, source(web.0, SEED + 1)?),
        ],
        [(books.0, books.3), (web.0, web.3)],
    )?
    .stop_criteria(StopCriteria::AllDatasetsExhausted)
    .seed(SEED)
    .rank(rank, world)?
    .batch(4)?
    .prefetch(2)
}

/// What a worker saves every [`CHECKPOINT_EVERY`] batches: its loader's
/// state and the tokens it trained on up to it.
#[derive(Serialize, Deserialize)]
struct Checkpoint {
    state: State,
    tokens: Vec<u64>,
}

fn checkpoint_file(dir: &Path, rank: u64) -> PathBuf {
    dir.join(format!("rank{rank}.json"))
}

/// A worker: `--worker DATA DIR OLD_DIR|- RANK WORLD OLD_WORLD`. Resumes its
/// share of the job that checkpointed into `OLD_DIR` (or starts the
/// epoch), trains, and checkpoints into `DIR` (atomically: a temporary file,
/// then a rename), saying so on stdout, until the epoch ends or it is
/// killed.
fn worker(args: &[String]) -> Res<()> {
    let [data, dir, old, rank, world, old_world] = args else {
        return Err("usage: --worker DATA DIR OLD_DIR|- RANK WORLD OLD_WORLD".into());
    };
    let (data, dir) = (Path::new(data), Path::new(dir));
    let (rank, world, old_world): (u64, u64, u64) =
        (rank.parse()?, world.parse()?, old_world.parse()?);
    let build = |r, w| streaming(data, r, w);
    let mut loader = Loader::new(build(rank, world)?);
    if old != "-" {
        let states = (0..old_world)
            .map(|r| {
                let text = std::fs::read_to_string(checkpoint_file(Path::new(old), r))?;
                Ok(serde_json::from_str::<Checkpoint>(&text)?.state)
            })
            .collect::<Res<Vec<State>>>()?;
        elastic::load_resharded_with(&mut loader, build, &states, rank, world)?;
    }
    let mut tokens = Vec::new();
    let mut epoch = loader.epoch();
    let (file, tmp) = (
        checkpoint_file(dir, rank),
        dir.join(format!("rank{rank}.tmp")),
    );
    let mut stdout = std::io::stdout();
    for batches in 1.. {
        let batch = epoch.next().transpose()?;
        let ended = batch.is_none();
        tokens.extend(batch.into_iter().flatten().flatten());
        if ended || batches % CHECKPOINT_EVERY == 0 {
            let checkpoint = Checkpoint {
                state: epoch.state_dict()?,
                tokens: tokens.clone(),
            };
            std::fs::write(&tmp, serde_json::to_vec(&checkpoint)?)?;
            std::fs::rename(&tmp, &file)?;
            writeln!(stdout, "checkpoint")?;
            stdout.flush()?;
        }
        if ended {
            break;
        }
    }
    Ok(())
}

/// Runs a generation of `world` worker processes, rank `r` resuming from
/// the checkpoints in `old` (of `old_world` ranks) and killed with
/// `SIGKILL` right after its `kill_after(r)`-th checkpoint (never, for
/// `None`). Returns the tokens each rank's last checkpoint covers.
fn generation(
    data: &Path,
    dir: &Path,
    old: Option<(&Path, u64)>,
    world: u64,
    kill_after: impl Fn(u64) -> Option<usize> + Sync,
) -> Res<Vec<u64>> {
    std::fs::create_dir_all(dir)?;
    let exe = std::env::current_exe()?;
    let (old_dir, old_world) = match old {
        Some((path, w)) => (path.display().to_string(), w),
        None => ("-".to_owned(), 0),
    };
    let outcomes: Vec<Res<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let (exe, old_dir, kill_after) = (&exe, &old_dir, &kill_after);
                scope.spawn(move || -> Res<String> {
                    let mut child = Command::new(exe)
                        .arg("--worker")
                        .args([data.display().to_string(), dir.display().to_string()])
                        .args([old_dir.clone(), rank.to_string(), world.to_string()])
                        .arg(old_world.to_string())
                        .stdout(Stdio::piped())
                        .spawn()?;
                    let lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
                    let mut seen = 0;
                    for line in lines {
                        line?;
                        seen += 1;
                        if Some(seen) == kill_after(rank) {
                            child.kill()?; // SIGKILL on Unix
                            child.wait()?;
                            return Ok(format!("killed after checkpoint {seen}"));
                        }
                    }
                    let status = child.wait()?;
                    if !status.success() {
                        return Err(format!("rank {rank} of {world} failed: {status}").into());
                    }
                    Ok(format!("finished its share ({seen} checkpoints)"))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank's thread panicked"))
            .collect()
    });
    let mut tokens = Vec::new();
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        let text = std::fs::read_to_string(checkpoint_file(dir, rank as u64))?;
        let checkpoint: Checkpoint = serde_json::from_str(&text)?;
        println!(
            "  rank {rank}: {}, its last checkpoint after {} tokens",
            outcome?,
            checkpoint.tokens.len()
        );
        tokens.extend(checkpoint.tokens);
    }
    Ok(tokens)
}

fn run_streaming() -> Res<()> {
    println!("part 2: a streaming pipeline over files, ranks in processes killed with SIGKILL");
    let work = std::env::temp_dir().join(format!("nodes-elastic-{}", std::process::id()));
    let result = (|| -> Res<()> {
        let data = work.join("data");
        let mut expected = write_corpus(&data)?;
        let gens = [work.join("gen0"), work.join("gen1"), work.join("gen2")];
        println!("4 ranks, each killed after 1 to 4 checkpoints:");
        let mut delivered = generation(&data, &gens[0], None, 4, |r| Some(1 + r as usize))?;
        println!("resume on 3 ranks, each killed after 3, 1 or 2 checkpoints:");
        let kills = [3, 1, 2];
        delivered.extend(generation(&data, &gens[1], Some((&gens[0], 4)), 3, |r| {
            Some(kills[r as usize])
        })?);
        println!("resume on 6 ranks, to the end of the epoch:");
        delivered.extend(generation(&data, &gens[2], Some((&gens[1], 3)), 6, |_| {
            None
        })?);
        let mut counts: BTreeMap<u64, u32> = BTreeMap::new();
        for t in &delivered {
            *counts.entry(*t).or_default() += 1;
        }
        expected.sort_unstable();
        let repeated = counts.values().filter(|&&c| c > 1).count();
        let lost = expected.iter().filter(|t| !counts.contains_key(t)).count();
        let foreign = counts
            .keys()
            .filter(|t| expected.binary_search(t).is_err())
            .count();
        println!(
            "epoch 0: {} tokens delivered across 4 -> 3 -> 6 ranks, {} in the corpus; {lost} lost, {repeated} repeated, {foreign} unknown",
            delivered.len(),
            expected.len()
        );
        if lost + repeated + foreign > 0 || delivered.len() != expected.len() {
            return Err("not exactly once".into());
        }
        println!("every token of the epoch exactly once, by its file, line and word");
        Ok(())
    })();
    match &result {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&work);
        }
        Err(_) => eprintln!("left {} for inspection", work.display()),
    }
    result
}
