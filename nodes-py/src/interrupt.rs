//! Ctrl-C for a consumer blocked in a native `next`: Python's own handler
//! runs only when the main thread is back in Python, so a watcher thread
//! also hears SIGINT and cancels the waits going on (the threaded nodes'
//! cancel handles); the consumer then raises `KeyboardInterrupt`.
//!
//! The registry of waits lives in the module (`_native._interrupts`), not
//! in a static; its watcher thread starts at the first wait, not at import.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use nodes_std::CancelHandle;
use pyo3::prelude::*;

/// The waits going on, by id, and the watcher of the process that started it.
#[derive(Default)]
pub(crate) struct Waits {
    waiting: Mutex<HashMap<u64, Vec<CancelHandle>>>,
    next_id: AtomicU64,
    /// The process whose watcher thread runs (a fork has none).
    watcher: Mutex<Option<u32>>,
}

/// The module's registry of waits (`_native._interrupts`).
#[pyclass(frozen, module = "nodes_rs._native")]
#[derive(Default)]
pub(crate) struct Interrupts {
    waits: Arc<Waits>,
}

/// Removes its wait from the registry when dropped.
pub(crate) struct Waiting {
    waits: Arc<Waits>,
    id: u64,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut waiting = self
            .waits
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        waiting.remove(&self.id);
    }
}

impl Waits {
    /// The module's registry, found once per pipeline.
    pub(crate) fn of_module(py: Python<'_>, cache: &OnceLock<Arc<Waits>>) -> PyResult<Arc<Waits>> {
        if let Some(waits) = cache.get() {
            return Ok(waits.clone());
        }
        let module = py.import("nodes_rs._native")?;
        let interrupts = module.getattr("_interrupts")?.cast_into::<Interrupts>()?;
        Ok(cache.get_or_init(|| interrupts.get().waits.clone()).clone())
    }

    /// Registers a wait on `cancels` until the guard is dropped; a SIGINT
    /// meanwhile cancels it (or the next wait on them, if none is going
    /// on yet).
    pub(crate) fn enter(self: &Arc<Self>, cancels: &[CancelHandle]) -> Waiting {
        self.watch();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        waiting.insert(id, cancels.to_vec());
        Waiting {
            waits: self.clone(),
            id,
        }
    }

    /// Starts the watcher thread in this process, once.
    fn watch(self: &Arc<Self>) {
        let mut watcher = self.watcher.lock().unwrap_or_else(PoisonError::into_inner);
        if *watcher == Some(std::process::id()) {
            return;
        }
        if start_watcher(self.clone()) {
            *watcher = Some(std::process::id());
        }
    }

    fn cancel_all(&self) {
        let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        for cancel in waiting.values().flatten() {
            cancel.cancel();
        }
    }
}

/// Starts the thread that cancels the waits on each SIGINT; whether it
/// started (without it, Ctrl-C waits for the item, as before).
#[cfg(unix)]
fn start_watcher(waits: Arc<Waits>) -> bool {
    use signal_hook::consts::SIGINT;
    use signal_hook::iterator::Signals;
    let Ok(mut signals) = Signals::new([SIGINT]) else {
        return false;
    };
    std::thread::Builder::new()
        .name("nodes-ctrl-c".into())
        .spawn(move || {
            for _ in signals.forever() {
                waits.cancel_all();
            }
        })
        .is_ok()
}

#[cfg(not(unix))]
fn start_watcher(_waits: Arc<Waits>) -> bool {
    false
}
