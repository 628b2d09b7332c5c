//! Fixtures shared by the node tests.

use std::fmt::Debug;

use nodes_std::prelude::*;
use nodes_std::testing;

/// torchdata's `StatefulRangeNode`: yields `(i, resets)` for `i < n`, where
/// `resets` counts every `reset(None)`, so an extra or missing reset anywhere
/// above it shows in the data.
#[derive(Node, Debug)]
pub(crate) struct RangeNode {
    #[node(config)]
    n: u64,
    #[node(state)]
    i: u64,
    #[node(state, default = self.resets.saturating_add(1))]
    resets: u64,
}

impl RangeNode {
    pub(crate) fn new(n: u64) -> Self {
        RangeNode { n, i: 0, resets: 0 }
    }
}

impl Node for RangeNode {
    type Item = (u64, u64);

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<(u64, u64)>> {
        if self.i >= self.n {
            return Ok(None);
        }
        self.i += 1;
        Ok(Some((self.i - 1, self.resets)))
    }
}

/// All items of one pass.
pub(crate) fn collect<N: Node>(node: N) -> Vec<N::Item> {
    node.start()
        .and_then(|r| r.collect::<Result<Vec<_>>>())
        .unwrap_or_else(|e| panic!("pipeline failed: {e}"))
}

/// The items of `epochs` consecutive epochs through a Loader.
pub(crate) fn epochs<N: Node>(node: N, epochs: usize) -> Vec<Vec<N::Item>> {
    let mut loader = Loader::new(node);
    (0..epochs)
        .map(|_| {
            loader
                .epoch()
                .collect::<Result<Vec<_>>>()
                .unwrap_or_else(|e| panic!("epoch failed: {e}"))
        })
        .collect()
}

/// `assert_save_load` at the cut points the issue asks for: 0, 1, len - 1,
/// len and past the end (`len` = items of the first epoch).
#[track_caller]
pub(crate) fn save_load_at_cuts<N, F>(factory: F)
where
    N: Node,
    N::Item: PartialEq + Debug,
    F: Fn() -> N,
{
    let len = collect(factory()).len();
    let mut cuts = vec![0, 1, len.saturating_sub(1), len, len + 2];
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts {
        testing::assert_save_load(&factory, cut);
    }
}
