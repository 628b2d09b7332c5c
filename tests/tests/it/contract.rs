//! The contract's shape: `Node` is dyn-compatible, boxed nodes are nodes, and
//! the public types are `Send`/`Sync` where a training loop needs them.

use nodes_std::prelude::*;
use nodes_std::{Epoch, IterableWrapper, Running};

fn assert_node<N: Node>() {}
fn assert_send<T: Send>() {}
fn assert_sync<T: Sync>() {}

#[test]
fn boxed_trait_objects_are_nodes() {
    assert_node::<Box<dyn Node<Item = u32>>>();
    let nodes: Vec<Box<dyn Node<Item = u32>>> = vec![
        IterableWrapper::new(vec![1u32, 2]).boxed(),
        IterableWrapper::new(3..5u32).boxed(),
    ];
    let mut out = Vec::new();
    for node in nodes {
        out.extend(node.start().unwrap().map(Result::unwrap));
    }
    assert_eq!(out, [1, 2, 3, 4]);
}

#[test]
fn public_types_are_send_and_sync_where_expected() {
    type W = IterableWrapper<Vec<u8>>;
    assert_send::<Running<W>>();
    assert_send::<Loader<W>>();
    assert_send::<Epoch<'static, W>>();
    assert_send::<State>();
    assert_sync::<State>();
    assert_send::<Error>();
    assert_sync::<Error>();
    assert_send::<Description>();
}

#[test]
fn errors_read_as_sentences_naming_what_and_where() {
    let err = Error::bad_state(
        "/root/source/num_yielded",
        "expected u64, found string \"x\"",
    );
    assert_eq!(
        err.to_string(),
        "bad state at /root/source/num_yielded: expected u64, found string \"x\""
    );
    let err = Error::user("Mapper", Some(7), "disk on fire");
    assert_eq!(
        err.to_string(),
        "user function failed in Mapper at item 7: disk on fire"
    );
    let err = Error::from_panic("ParallelMapper", Some(3), &"boom");
    assert_eq!(
        err.to_string(),
        "user function panicked in ParallelMapper at item 3: boom"
    );
}

/// Keeps the worker context it forks on every call, through the hidden
/// handle worker threads get theirs from (no public path forks a context:
/// see `tests/ui/fail/typestate/stash_*.rs`).
#[derive(Node)]
struct KeepsContexts {
    #[node(config)]
    kept: std::sync::Arc<std::sync::Mutex<Vec<nodes_std::__private::WorkerCx>>>,
}

impl Node for KeepsContexts {
    type Item = u8;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u8>> {
        let handle = nodes_std::__private::WorkerCx::fork(cx);
        self.kept.lock().unwrap().push(handle);
        Ok(Some(0))
    }
}

/// A worker's context used after its pipeline was reset (a new epoch) or
/// dropped is refused by the node it advances or takes the state of, naming
/// it: both samplers, never reset, instead of running outside any pipeline.
#[test]
fn a_context_used_after_its_pipeline_was_reset_or_dropped_is_refused() {
    let kept = std::sync::Arc::default();
    let mut loader = Loader::new(KeepsContexts {
        kept: std::sync::Arc::clone(&kept),
    });
    for _ in 0..2 {
        loader.epoch().next().unwrap().unwrap();
    }
    let mut kept = std::mem::take(&mut *kept.lock().unwrap());
    let sampler = || SamplerWrapper::new(RandomSampler::new(4, 1));
    // The second epoch's context is the running pipeline's until it goes.
    let mut live = sampler();
    live.reset(None).unwrap();
    assert!(
        kept[1]
            .with(|cx| Node::next(&mut live, cx))
            .unwrap()
            .is_some()
    );
    drop(loader);
    for handle in &mut kept {
        let err = handle
            .with(|cx| Node::next(&mut sampler(), cx))
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "invalid argument for SamplerWrapper: the context it was advanced with is from a pipeline that was reset or dropped since"
            ),
            "{err}"
        );
        let elastic = ElasticSampler::new(RandomSampler::new(4, 1), 0, 2).unwrap();
        let mut source = MapStyleWrapper::new(vec![1u8, 2, 3, 4], elastic);
        let err = handle.with(|cx| Node::next(&mut source, cx)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid argument for MapStyleWrapper: "),
            "{err}"
        );
        // Taking a state with it is refused too, even of a node that was reset.
        let err = handle
            .with(|cx| Stateful::get_state(&live, cx))
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "invalid argument for SamplerWrapper: the context it was advanced with is from a pipeline that was reset or dropped since"
            ),
            "{err}"
        );
        source.reset(None).unwrap();
        let err = handle
            .with(|cx| Stateful::get_state(&source, cx))
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid argument for MapStyleWrapper: "),
            "{err}"
        );
    }
}
