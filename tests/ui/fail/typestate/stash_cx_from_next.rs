// A node cannot keep the context its `next` was lent, to advance a node
// outside any running pipeline later: `Cx` cannot be cloned, and forking
// one is not public (a worker thread gets its context through a hidden
// handle that lends it only for the length of a closure, see
// `stash_worker_cx.rs`).
use std::sync::Mutex;

use nodes_std::prelude::*;

static STASH: Mutex<Option<Cx>> = Mutex::new(None);

#[derive(Node)]
struct Thief {}

impl Node for Thief {
    type Item = u8;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u8>> {
        *STASH.lock().unwrap() = Some(cx.fork());
        Ok(None)
    }
}

fn main() {
    let mut running = Thief {}.start().unwrap();
    let _ = running.next();
    drop(running);
    let mut stolen = STASH.lock().unwrap().take().unwrap();
    let mut never_reset = SamplerWrapper::new(RandomSampler::new(4, 1));
    let _ = Node::next(&mut never_reset, &mut stolen);
}
