//! Logging through the `tracing` crate, behind the `tracing` feature.
//!
//! This is the only place that looks at the feature, and the list of
//! everything nodes logs: one function per event, called where the event
//! happens (nodes-std calls them through `__private::trace`). With the
//! feature on, each is a `tracing` event with target [`TARGET`], whose fields
//! are computed only when a subscriber wants it. With the feature off, each
//! function is empty and inlined away: no code and no branch is left at the
//! call site, which only passes values it already has.
//!
//! | event (message) | level | fields |
//! | --- | --- | --- |
//! | `epoch started` | INFO | `epoch`, `resumed_at` (items the epoch had delivered before a restore; 0 for a new epoch) |
//! | `epoch failed to start` | WARN | `epoch`, `error` |
//! | `epoch ended` | INFO | `epoch`, `items` |
//! | `state restored` | INFO | `fingerprint`, `saved_fingerprint`, `outcome = "ok"`, and for a loader `epoch`, `items` |
//! | `restore failed` | WARN | `fingerprint`, `saved_fingerprint`, `outcome = "error"`, `error` |
//! | `worker started` / `worker stopped` | DEBUG | `node`, `worker` (index), `thread` (name) |
//! | `bad record skipped` | WARN | `node`, `index`, `skipped` (this pass, this one included), `error` |
// Without the feature the bodies are empty and their parameters unused.
#![cfg_attr(not(feature = "tracing"), allow(unused_variables))]

use crate::error::{Error, Result};
use crate::node::Stateful;
use crate::state::State;

/// The target of every event nodes emits (filter with `nodes=info`).
pub const TARGET: &str = "nodes";

/// `tracing::event!` with target [`TARGET`], or nothing without the feature.
#[cfg(feature = "tracing")]
macro_rules! event {
    ($level:ident, $($rest:tt)+) => {
        ::tracing::event!(target: TARGET, ::tracing::Level::$level, $($rest)+)
    };
}

/// Without the `tracing` feature: nothing (the arguments are not evaluated).
#[cfg(not(feature = "tracing"))]
macro_rules! event {
    ($($rest:tt)*) => {
        ()
    };
}

/// A [`Loader`](crate::Loader) epoch began (`resumed_at > 0`: it continues
/// a restored state), or failed to begin.
#[inline]
pub(crate) fn epoch_started(epoch: u64, resumed_at: u64, outcome: &Result<()>) {
    match outcome {
        Ok(()) => event!(INFO, epoch, resumed_at, "epoch started"),
        Err(error) => event!(WARN, epoch, error = %error, "epoch failed to start"),
    }
}

/// A [`Loader`](crate::Loader) epoch delivered its last item.
#[inline]
pub(crate) fn epoch_ended(epoch: u64, items: u64) {
    event!(INFO, epoch, items, "epoch ended");
}

/// A pipeline took `state`, or refused it: `Loader::load_state_dict`,
/// whose `position` (epoch, items) is logged, or a reset outside a loader
/// (`Running::start_from`, `Running::reset`). `fingerprint` is this
/// pipeline's, made only when the event is wanted; the saved one is read
/// from the state.
#[inline]
pub(crate) fn restored(
    fingerprint: impl Fn() -> String,
    state: &State,
    position: Option<(u64, u64)>,
    outcome: &Result<()>,
) {
    match outcome {
        Ok(()) => event!(
            INFO,
            fingerprint = %fingerprint(),
            saved_fingerprint = %saved_fingerprint(state),
            epoch = position.map(|(epoch, _)| epoch),
            items = position.map(|(_, items)| items),
            outcome = "ok",
            "state restored"
        ),
        Err(error) => event!(
            WARN,
            fingerprint = %fingerprint(),
            saved_fingerprint = %saved_fingerprint(state),
            outcome = "error",
            error = %error,
            "restore failed"
        ),
    }
}

/// A node was reset from a state outside a loader, or refused it; nothing
/// for a reset to the start, which is not a restore.
#[inline]
pub(crate) fn node_restored<N: Stateful + ?Sized>(
    node: &N,
    state: Option<&State>,
    outcome: &Result<()>,
) {
    if let Some(state) = state {
        let fingerprint = || format!("{:016x}", node.describe().fingerprint());
        restored(fingerprint, state, None, outcome);
    }
}

/// The fingerprint a loader state was saved with, or `"none"` (a node's own
/// state, or a damaged one).
#[cfg(feature = "tracing")]
fn saved_fingerprint(state: &State) -> String {
    state
        .get::<String>("fingerprint")
        .unwrap_or_else(|_| "none".to_owned())
}

/// A worker thread of `node` started, or (`started` false) is about to end.
#[inline]
pub fn worker(node: &'static str, worker: usize, started: bool) {
    let what = if started { "started" } else { "stopped" };
    let thread = || std::thread::current().name().unwrap_or("").to_owned();
    event!(DEBUG, node, worker, thread = thread(), "worker {what}");
}

/// An error policy dropped `error`, the `skipped`-th bad record of the pass.
#[inline]
pub fn record_skipped(error: &Error, skipped: u64) {
    event!(
        WARN,
        node = error_origin(error).0,
        index = error_origin(error).1,
        skipped,
        error = %error,
        "bad record skipped"
    );
}

/// The node and the item index of a bad record, as fields (the index
/// absent when unknown).
#[cfg(feature = "tracing")]
fn error_origin(error: &Error) -> (&str, Option<u64>) {
    match error {
        Error::User { node, index, .. } | Error::Panicked { node, index, .. } => (node, *index),
        _ => ("", None),
    }
}

/// Wraps `f` so that, run on another thread, it logs to the subscriber that
/// is current here (a scoped `tracing::subscriber::with_default` one too).
#[cfg(feature = "tracing")]
pub fn with_dispatch<T>(f: impl FnOnce() -> T) -> impl FnOnce() -> T {
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    move || tracing::dispatcher::with_default(&dispatch, f)
}

/// Without the `tracing` feature: `f` itself.
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub fn with_dispatch<T>(f: impl FnOnce() -> T) -> impl FnOnce() -> T {
    f
}
