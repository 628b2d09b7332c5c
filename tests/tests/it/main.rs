//! The cross-crate integration tests, in one binary so that `nodes-std` and
//! proptest are linked once (the compile-fail suite is `ui.rs`; the thread
//! counts of `fault_threads.rs` need a process of their own).
//!
//! Run one module with `cargo test -p nodes-tests --test it -- <module>::`.

mod support;

mod adaptive;
mod bad_states;
mod contract;
mod cycling;
mod derive;
mod describe;
mod edited_states;
mod elastic;
mod elastic_batches;
mod elastic_cycling;
mod elastic_files;
mod elastic_grammar;
mod exactly_once;
mod faults;
mod files;
mod golden;
mod hand_written;
mod integrity;
mod load;
mod loader;
mod progress;
mod replay_bounds;
mod size_hint;
mod state;
mod stats;
mod train_loop;
mod wide;

mod one_to_many;
#[cfg(feature = "parquet")]
mod parquet;
#[cfg(feature = "object-store")]
mod remote;
