// Nothing public makes the context that proves a pipeline was reset: not the
// hidden helpers the stock nodes use, not a constructor, not a literal.
// Worker threads fork theirs from the consumer's (`WorkerCx::fork` needs a `Cx`),
// and replays inside `reset` go through `Replay`, which resets the node it
// pulls and keeps its context to itself.
use nodes_std::{Cx, Replay};

fn main() {
    let _a = nodes_std::__private::worker_cx();
    let _b = Cx::new_running();
    let _c = Cx { stats: None, resets: Default::default(), forked: None, observed: false, snapshot_requested: false };
    let _d: Option<&Replay<'_, nodes_std::IterableWrapper<Vec<u8>>>> = None;
    let _e = _d.map(|r| &r.cx);
}
