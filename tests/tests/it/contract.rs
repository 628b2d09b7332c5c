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
