//! The core of `nodes`: the [`Node`] contract, checkpoint [`State`], the
//! [`Error`] type, the [`Running`] handle and the epoch-aware [`Loader`].
//!
//! Most users depend on `nodes-std`, which re-exports all of this together
//! with the stock nodes and `#[derive(Node)]`. Depend on `nodes-core` alone to
//! write nodes by hand with the smallest dependency set.
//!
//! ```
//! use nodes_core::{Cx, Description, Loader, Node, Result, State, Stateful};
//!
//! /// Yields 0, 1, 2, ... up to `end`; the state is the next number.
//! struct Upto { next: u32, end: u32 }
//!
//! impl Node for Upto {
//!     type Item = u32;
//!     fn next(&mut self, _cx: &mut Cx) -> Result<Option<u32>> {
//!         if self.next == self.end { return Ok(None) }
//!         self.next += 1;
//!         Ok(Some(self.next - 1))
//!     }
//! }
//! impl Stateful for Upto {
//!     fn reset(&mut self, state: Option<&State>) -> Result<()> {
//!         self.next = state.map_or(Ok(0), |s| s.get("next"))?;
//!         Ok(())
//!     }
//!     fn get_state(&self, _cx: &Cx) -> Result<State> {
//!         State::new().with("next", self.next)
//!     }
//!     fn describe(&self) -> Description {
//!         Description::new("Upto").param("end", self.end)
//!     }
//! }
//!
//! let mut loader = Loader::new(Upto { next: 0, end: 3 });
//! let items: Vec<u32> = loader.epoch().collect::<Result<_>>()?;
//! assert_eq!(items, [0, 1, 2]);
//! # Ok::<(), nodes_core::Error>(())
//! ```
//!
//! # Features
//!
//! - `tracing` (off by default): logs epochs, restores (with the pipeline
//!   fingerprint and the outcome), worker threads and skipped bad records as
//!   [`tracing`](https://docs.rs/tracing) events with target `nodes`: INFO
//!   for epochs and restores, WARN for failures and skipped records, DEBUG
//!   for worker threads. Without it no logging code is compiled in. The
//!   repository's `docs/logging.md` lists every event and its fields.
#![forbid(unsafe_code)]

mod describe;
mod error;
mod fnv;
mod guard;
mod hint;
mod loader;
mod node;
mod param;
mod progress;
mod resume;
mod running;
mod state;
mod stats;
pub mod testing;
mod trace;

#[doc(hidden)]
pub mod __private;

/// The path `#[derive(Node)]` emits: [`__private`] under this release's
/// version, so that the output of a derive from another release finds
/// nothing here.
#[doc(hidden)]
pub use crate::__private as __private_0_1_0;

/// What `#[derive(Node)]` emits first, with its own version: a derive from
/// another release than this crate's stops with an error naming both (the
/// literal is this crate's version; a unit test keeps them equal).
#[doc(hidden)]
#[macro_export]
macro_rules! __require_derive_version {
    ("0.1.0") => {};
    ($derive:literal) => {
        ::core::compile_error!(::core::concat!(
            "#[derive(Node)] is from nodes-derive ",
            $derive,
            " but nodes-core is 0.1.0: use nodes-std, nodes-core and nodes-derive of one release"
        ));
    };
}

pub use crate::describe::Description;
pub use crate::error::{BoxError, Error, Result};
pub use crate::fnv::Fnv1a64;
pub use crate::guard::{Lazy, ResetFlag};
pub use crate::hint::Hint;
pub use crate::loader::{Epoch, Loader};
pub use crate::node::{Cx, Init, Node, SizeHint, Stateful, Validate};
pub use crate::param::{NodeName, Param};
pub use crate::progress::{Count, Listed, Progress, Tally};
pub use crate::resume::Resume;
pub use crate::running::{Replay, Running};
pub use crate::state::{Key, Snapshot, State, VERSION_KEY};
pub use crate::stats::{NodeId, NodeStats, Stats};

#[cfg(test)]
mod version_tests {
    // The literal of `__require_derive_version!` and the name of the
    // versioned path, as the derive of this release writes them.
    crate::__require_derive_version!("0.1.0");
    #[allow(unused_imports)]
    use crate::__private_0_1_0 as _;

    /// Both are this crate's version: bump them with it.
    #[test]
    fn the_derive_version_check_names_this_release() {
        assert_eq!(env!("CARGO_PKG_VERSION"), "0.1.0");
    }
}
