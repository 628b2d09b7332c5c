//! Examples live in this crate's `[[example]]` targets; this library holds
//! what several of them share: [`kill_resume`], the harness that kills a
//! training worker with `SIGKILL` and checks that its resumed runs join
//! into the uninterrupted one, and [`create_bucket`] on a local S3 server.

/// Creates bucket `name` on the S3 server at `endpoint` (`http://host:port`),
/// which, like moto, creates one on an unsigned `PUT /name`.
pub fn create_bucket(endpoint: &str, name: &str) -> kill_resume::Res<()> {
    use std::io::{Read as _, Write as _};
    let host = endpoint.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(host)?;
    write!(
        conn,
        "PUT /{name} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut reply = String::new();
    conn.read_to_string(&mut reply)?;
    if !reply.starts_with("HTTP/1.1 200") {
        return Err(format!("creating bucket {name}: {reply}").into());
    }
    Ok(())
}

pub mod kill_resume {
    //! A pipeline of token batches run three ways: uninterrupted, in this
    //! process, for the expected log (one line per batch: epoch, batch, a
    //! digest of its tokens); then by workers (this program started again
    //! with `--child STATE_FILE LOG_FILE ARGS...`) that resume from
    //! `STATE_FILE` if there is one, "train" (a short sleep per batch),
    //! append a line per batch to `LOG_FILE`, and every `checkpoint_every`
    //! batches replace `STATE_FILE` atomically (a temporary file, then a
    //! rename) with the loader's state and the log lines it covers. The
    //! orchestrator kills each worker (`Child::kill`: `SIGKILL` on Unix)
    //! after a seeded random delay, so the kill lands anywhere between two
    //! checkpoints, cuts the log to the lines the last checkpoint covers,
    //! and starts a new worker, `kills` times, then lets the last one
    //! finish. It fails unless the log equals the uninterrupted run's.

    use std::io::Write as _;
    use std::ops::Range;
    use std::path::Path;
    use std::process::{Command, ExitCode};
    use std::time::{Duration, Instant};

    use nodes_std::BoxError;
    use nodes_std::prelude::*;
    use rand::{Rng as _, SeedableRng as _};
    use rand_chacha::ChaCha8Rng;
    use serde::{Deserialize, Serialize};

    /// The examples' result type.
    pub type Res<T> = std::result::Result<T, BoxError>;

    /// How a run is checkpointed and killed.
    #[derive(Debug, Clone)]
    pub struct Run {
        /// The example's name, for messages and its work directory.
        pub name: &'static str,
        /// Epochs in the run.
        pub epochs: u64,
        /// A checkpoint every this many batches.
        pub checkpoint_every: u64,
        /// A "training step": how long a worker sleeps per batch.
        pub step: Duration,
        /// How many times a worker is killed before one is let finish.
        pub kills: usize,
        /// The delay before a kill is drawn from this range (milliseconds).
        pub kill_delay_ms: Range<u64>,
        /// Seeds the kill delays.
        pub seed: u64,
    }

    /// What a worker saves: the loader's state and how many log lines
    /// (batches) were written when it was taken.
    #[derive(Serialize, Deserialize)]
    struct Checkpoint {
        loader: State,
        lines: u64,
    }

    /// FNV-1a (64 bits) of `bytes`.
    pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
        let mut hash = nodes_std::Fnv1a64::default();
        bytes
            .into_iter()
            .for_each(|b| std::hash::Hasher::write_u8(&mut hash, b));
        std::hash::Hasher::finish(&hash)
    }

    /// A batch's log line: epoch, batch number in the epoch, and a digest
    /// of its tokens.
    fn log_line(epoch: u64, batch: u64, chunks: &[Vec<u32>]) -> String {
        let digest = fnv1a(chunks.iter().flat_map(|c| {
            c.iter()
                .flat_map(|t| t.to_le_bytes())
                .chain(u32::MAX.to_le_bytes())
        }));
        let tokens: usize = chunks.iter().map(Vec::len).sum();
        format!("{epoch} {batch} {tokens} {digest:016x}")
    }

    /// The program's `main`: a worker with `--child STATE LOG ARGS...`,
    /// else the orchestrator, which makes the data in a work directory with
    /// `prepare` (returning the `ARGS` a worker needs) and builds the
    /// pipeline with `build(ARGS)`.
    pub fn main<P, B>(
        run: &Run,
        prepare: impl FnOnce(&Path) -> Res<Vec<String>>,
        build: B,
    ) -> ExitCode
    where
        P: Node<Item = Vec<Vec<u32>>>,
        B: Fn(&[String]) -> Res<P>,
    {
        let args: Vec<String> = std::env::args().collect();
        let result = match args.get(1).map(String::as_str) {
            Some("--child") => match &args[2..] {
                [state, log, rest @ ..] => {
                    child(run, Path::new(state), Path::new(log), build(rest))
                }
                _ => Err("usage: --child STATE_FILE LOG_FILE ARGS...".into()),
            },
            Some(other) => Err(format!("unknown argument {other:?}; run with no argument").into()),
            None => {
                let work =
                    std::env::temp_dir().join(format!("nodes-{}-{}", run.name, std::process::id()));
                let result = std::fs::create_dir_all(&work)
                    .map_err(BoxError::from)
                    .and_then(|()| prepare(&work))
                    .and_then(|args| orchestrate(run, &work, &args, &build));
                if result.is_ok() {
                    let _ = std::fs::remove_dir_all(&work);
                } else {
                    eprintln!("left {} for inspection", work.display());
                }
                result
            }
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{}: FAILED: {e}", run.name);
                ExitCode::FAILURE
            }
        }
    }

    /// The uninterrupted run, in this process: the expected log.
    fn reference<P: Node<Item = Vec<Vec<u32>>>>(run: &Run, pipeline: P) -> Res<Vec<String>> {
        let mut loader = Loader::new(pipeline);
        let mut lines = Vec::new();
        for _ in 0..run.epochs {
            let mut epoch = loader.epoch();
            let index = epoch.index();
            while let Some(batch) = epoch.next() {
                lines.push(log_line(index, epoch.num_yielded(), &batch?));
            }
        }
        Ok(lines)
    }

    fn read_checkpoint(file: &Path) -> Res<Option<Checkpoint>> {
        match std::fs::read_to_string(file) {
            Ok(text) => {
                Ok(Some(serde_json::from_str(&text).map_err(|e| {
                    format!("{}: not a checkpoint: {e}", file.display())
                })?))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("reading {}: {e}", file.display()).into()),
        }
    }

    /// The worker: resumes from `state_file` if it exists, trains to the
    /// end, logs every batch, checkpoints every `checkpoint_every` batches.
    fn child<P: Node<Item = Vec<Vec<u32>>>>(
        run: &Run,
        state_file: &Path,
        log_file: &Path,
        pipeline: Res<P>,
    ) -> Res<()> {
        let mut loader = Loader::new(pipeline?);
        let mut lines = 0;
        if let Some(checkpoint) = read_checkpoint(state_file)? {
            loader.load_state_dict(&checkpoint.loader)?;
            lines = checkpoint.lines;
        }
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_file)?;
        let tmp = state_file.with_extension("tmp");
        loop {
            let mut epoch = loader.epoch();
            let index = epoch.index();
            if index >= run.epochs {
                return Ok(());
            }
            while let Some(batch) = epoch.next() {
                let line = log_line(index, epoch.num_yielded(), &batch?);
                std::thread::sleep(run.step); // the training step
                // Unbuffered: once written, a line survives a SIGKILL.
                log.write_all(format!("{line}\n").as_bytes())?;
                lines += 1;
                if lines % run.checkpoint_every == 0 {
                    let checkpoint = Checkpoint {
                        loader: epoch.state_dict()?,
                        lines,
                    };
                    std::fs::write(&tmp, serde_json::to_vec(&checkpoint)?)?;
                    std::fs::rename(&tmp, state_file)?;
                }
            }
        }
    }

    /// Cuts the log to the lines the last checkpoint covers; returns how
    /// many were cut (the batches trained since that checkpoint, lost with
    /// the kill).
    fn truncate_log(state_file: &Path, log_file: &Path) -> Res<usize> {
        let keep = read_checkpoint(state_file)?.map_or(0, |c| c.lines as usize);
        let text = match std::fs::read_to_string(log_file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e.into()),
        };
        // A kill can land mid-write: only whole lines count.
        let whole: Vec<&str> = text
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .collect();
        if whole.len() < keep {
            return Err(format!(
                "the checkpoint covers {keep} log lines, the log has {}",
                whole.len()
            )
            .into());
        }
        std::fs::write(log_file, whole[..keep].concat())?;
        Ok(whole.len() - keep)
    }

    fn orchestrate<P, B>(run: &Run, work: &Path, args: &[String], build: &B) -> Res<()>
    where
        P: Node<Item = Vec<Vec<u32>>>,
        B: Fn(&[String]) -> Res<P>,
    {
        let started = Instant::now();
        let expected = reference(run, build(args)?)?;
        println!(
            "uninterrupted run: {} batches over {} epochs ({:.2} s)",
            expected.len(),
            run.epochs,
            started.elapsed().as_secs_f64()
        );
        if expected.len() < 10 * run.checkpoint_every as usize {
            return Err("the run is too short for the test to mean anything".into());
        }
        let state_file = work.join("state.json");
        let log_file = work.join("consumed.log");
        let exe = std::env::current_exe()?;
        let spawn = || {
            Command::new(&exe)
                .arg("--child")
                .arg(&state_file)
                .arg(&log_file)
                .args(args)
                .spawn()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(run.seed);
        let (mut kills, mut lost, mut finished) = (0, 0, false);
        let started = Instant::now();
        for _ in 0..run.kills {
            let mut worker = spawn()?;
            let delay = Duration::from_millis(rng.random_range(run.kill_delay_ms.clone()));
            std::thread::sleep(delay);
            if let Some(status) = worker.try_wait()? {
                // It finished before the kill: nothing left to interrupt.
                if !status.success() {
                    return Err(format!("a worker failed: {status}").into());
                }
                finished = true;
                break;
            }
            worker.kill()?; // SIGKILL on Unix
            worker.wait()?;
            kills += 1;
            let cut = truncate_log(&state_file, &log_file)?;
            lost += cut;
            let at = read_checkpoint(&state_file)?.map_or(0, |c| c.lines);
            println!(
                "kill {kills} after {} ms: resuming from the checkpoint at batch {at}, {cut} logged batches after it discarded",
                delay.as_millis()
            );
        }
        if !finished {
            let status = spawn()?.wait()?;
            if !status.success() {
                return Err(format!("the last worker failed: {status}").into());
            }
        }
        let elapsed = started.elapsed();
        let text = std::fs::read_to_string(&log_file)?;
        let got: Vec<&str> = text.lines().collect();
        if let Some(at) = got.iter().zip(&expected).position(|(a, b)| a != b) {
            return Err(format!(
                "batch {at} differs from the uninterrupted run: {:?} vs {:?}",
                got[at], expected[at]
            )
            .into());
        }
        if got.len() != expected.len() {
            return Err(format!(
                "the interrupted run logged {} batches, the uninterrupted one {}",
                got.len(),
                expected.len()
            )
            .into());
        }
        if kills == 0 {
            return Err("no worker was killed: the test did not test anything".into());
        }
        println!(
            "OK: {kills} kills (SIGKILL), {} batches, a checkpoint every {} ({} in all), \
             {lost} batches retrained after kills; the joined log equals the uninterrupted run ({:.2} s)",
            got.len(),
            run.checkpoint_every,
            got.len() as u64 / run.checkpoint_every,
            elapsed.as_secs_f64()
        );
        Ok(())
    }
}
