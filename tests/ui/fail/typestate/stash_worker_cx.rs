// The hidden handle a worker thread gets its context through lends the
// context only for the length of a closure: it cannot be kept, and used
// outside, to advance a node that no running pipeline reset.
use nodes_std::__private::WorkerCx;
use nodes_std::prelude::*;

#[derive(Node)]
struct Thief {}

impl Node for Thief {
    type Item = usize;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<usize>> {
        let mut handle = WorkerCx::fork(cx);
        let kept: &mut Cx = handle.with(|cx| cx);
        drop(handle);
        let mut never_reset = SamplerWrapper::new(RandomSampler::new(4, 1));
        Node::next(&mut never_reset, kept)
    }
}

fn main() {}
