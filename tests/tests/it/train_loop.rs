//! The `train_loop` example's checkpoint handling: `--resume` reads a bounded
//! amount and checks what the checkpoint claims (issue 12, item 10), and its
//! loops, driven by `epoch.index()`, finish exactly the epochs that were left
//! from a mid-epoch or an end-of-epoch checkpoint (issue 11, item 4).

// The example's own code, as `examples/describe.rs` includes it.
#[allow(dead_code)]
#[path = "../../../examples/train_loop.rs"]
mod example;

use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use example::{BATCHES_PER_EPOCH, Checkpoint, MAX_CHECKPOINT_BYTES};
use nodes_std::prelude::*;

/// Runs `f` on its own thread; fails if it takes longer than `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("no answer within {limit:?}"))
}

/// The example's own checkpoint (epoch 1, batch 50) as JSON text, made once.
fn mid_epoch_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let checkpoint = example::train_until((1, 50)).unwrap();
        serde_json::to_string_pretty(&checkpoint).unwrap()
    })
}

fn mid_epoch() -> Checkpoint {
    serde_json::from_str(mid_epoch_json()).unwrap()
}

fn temp_file(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("nodes-train-loop-{}-{name}", std::process::id()))
}

#[test]
fn an_endless_or_oversized_file_is_refused_without_reading_it_all() {
    #[cfg(unix)]
    {
        let err = within(Duration::from_secs(60), || {
            example::read_checkpoint("/dev/zero".as_ref()).map_err(|e| e.to_string())
        })
        .err()
        .expect("/dev/zero is not a checkpoint");
        assert!(err.contains("larger than 16 MiB"), "{err}");
    }
    // A (sparse) regular file one byte over the limit.
    let file = temp_file("big.json");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(MAX_CHECKPOINT_BYTES + 1)
        .unwrap();
    let err = example::read_checkpoint(&file).err().map(|e| e.to_string());
    std::fs::remove_file(&file).unwrap();
    assert!(err.expect("over the limit").contains("larger than"));
}

#[test]
fn a_real_checkpoint_resumes_and_passes_the_check() {
    let file = temp_file("mid.json");
    std::fs::write(&file, mid_epoch_json()).unwrap();
    let read = example::read_checkpoint(&file);
    std::fs::remove_file(&file).unwrap();
    example::resume_from(read.unwrap()).unwrap();
}

#[test]
fn an_end_of_epoch_checkpoint_resumes_with_the_next_epoch_only() {
    let checkpoint = example::train_until((0, BATCHES_PER_EPOCH)).unwrap();
    assert_eq!(checkpoint.consumed.len(), 1);
    assert_eq!(checkpoint.loader.get::<u64>("epoch_index").unwrap(), 0);
    let json = serde_json::to_string(&checkpoint).unwrap();
    // One more epoch, not two: the check compares every epoch with the
    // uninterrupted run, and their number.
    example::resume_from(serde_json::from_str(&json).unwrap()).unwrap();
}

#[test]
fn a_checkpoint_that_claims_what_its_state_does_not_is_refused() {
    /// What is changed, how, and what the error says.
    type Edit = (&'static str, fn(&mut Checkpoint), &'static str);
    let edits: [Edit; 6] = [
        ("no epochs", |c| c.consumed.clear(), "ids for 0 epochs"),
        (
            "an extra epoch",
            |c| c.consumed.push(Vec::new()),
            "ids for 3 epochs",
        ),
        (
            "an id missing",
            |c| {
                c.consumed[1].pop();
            },
            "1599 ids for epoch 1",
        ),
        (
            "an id not a record",
            |c| c.consumed[0][7] = 5000,
            "id 5000 is not a record",
        ),
        (
            "an id twice",
            |c| c.consumed[0][7] = c.consumed[0][8],
            "listed twice",
        ),
        (
            "another order",
            |c| c.consumed[1].swap(0, 1),
            "differs from the uninterrupted one at sample 0",
        ),
    ];
    for (what, edit, message) in edits {
        let mut checkpoint = mid_epoch();
        edit(&mut checkpoint);
        let err = example::resume_from(checkpoint)
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"));
        assert!(err.to_string().contains(message), "{what}: {err}");
    }
}

#[test]
fn a_checkpoint_whose_loader_state_was_changed_is_refused() {
    let mut checkpoint = mid_epoch();
    let batches: u64 = checkpoint.loader.get("num_yielded").unwrap();
    assert_eq!(batches, 50);
    // A changed count (and the ids to match) no longer fits the checksum.
    let mut value = checkpoint.loader.to_value();
    value["num_yielded"] = 49.into();
    checkpoint.loader = State::from_value(value).unwrap();
    checkpoint.consumed[1].truncate(49 * 32);
    let err = example::resume_from(checkpoint).expect_err("refused");
    assert!(err.to_string().contains("/checksum"), "{err}");
}
