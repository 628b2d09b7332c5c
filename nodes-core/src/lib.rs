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
//!   workspace README's "Logging" section lists every event and its fields.
#![forbid(unsafe_code)]

mod describe;
mod error;
mod fnv;
mod guard;
mod loader;
mod node;
mod param;
mod running;
mod state;
mod stats;
pub mod testing;
mod trace;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use crate::describe::Description;
pub use crate::error::{BoxError, Error, Result};
pub use crate::fnv::Fnv1a64;
pub use crate::guard::{Lazy, ResetFlag};
pub use crate::loader::{Epoch, Loader};
pub use crate::node::{Cx, Init, Node, SizeHint, Stateful, Validate};
pub use crate::param::{NodeName, Param};
pub use crate::running::{Replay, Running};
pub use crate::state::{Key, Snapshot, State, VERSION_KEY};
pub use crate::stats::{NodeId, NodeStats, Stats};
