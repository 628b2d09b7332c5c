//! [`NodeExt`]: the front door for starting and combining nodes.

use nodes_core::{Node, Result, Running, State};

/// Combinators and starters for every [`Node`]; implemented for all of them.
pub trait NodeExt: Node + Sized {
    /// Resets the pipeline and returns it as a plain iterator of `Result<Item>`.
    fn start(self) -> Result<Running<Self>> {
        Running::start(self)
    }

    /// Resets the pipeline from `state` and returns it as an iterator.
    fn start_from(self, state: &State) -> Result<Running<Self>> {
        Running::start_from(self, state)
    }

    /// Boxes the node, erasing its type (to mix different node types).
    fn boxed<'a>(self) -> Box<dyn Node<Item = Self::Item> + 'a>
    where
        Self: 'a,
    {
        Box::new(self)
    }
}

impl<N: Node> NodeExt for N {}
