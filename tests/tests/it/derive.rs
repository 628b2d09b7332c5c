//! Behaviour of the code `#[derive(Node)]` writes: state layout and key
//! order, defaults, lazy slots and `init`, children, versions, describe,
//! shutdown, and validate-then-apply restores.

use std::collections::BTreeMap;

use crate::support::Probe;
use nodes_std::prelude::*;
use nodes_std::{Init, IterableWrapper, testing};

/// Adds an offset to every item of the first source, then drains the others.
#[derive(Node)]
#[node(init, version = 2)]
struct Mixer<S: Node<Item = u64>> {
    #[node(child)]
    first: S,
    #[node(children, rename = "others")]
    rest: Vec<S>,
    #[node(state, default = self.start_offset)]
    offset: u64,
    #[node(state)]
    from_rest: u64,
    #[node(param)]
    start_offset: u64,
    #[node(lazy)]
    scratch: Lazy<Vec<u64>>,
    #[node(config)]
    inits: Vec<bool>,
}

impl<S: Node<Item = u64>> Init for Mixer<S> {
    fn init(&mut self, restored: bool) -> Result<()> {
        self.inits.push(restored);
        self.scratch.set(Vec::new());
        Ok(())
    }
}

impl<S: Node<Item = u64>> Node for Mixer<S> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        if let Some(x) = self.first.next(cx)? {
            self.offset += 1;
            self.scratch.get_mut()?.push(x);
            return Ok(Some(x + self.offset));
        }
        for s in &mut self.rest {
            if let Some(x) = s.next(cx)? {
                self.from_rest += 1;
                return Ok(Some(x));
            }
        }
        Ok(None)
    }
}

fn mixer() -> Mixer<IterableWrapper<Vec<u64>>> {
    Mixer {
        first: IterableWrapper::new(vec![1, 2, 3]),
        rest: vec![
            IterableWrapper::new(vec![10]),
            IterableWrapper::new(vec![20, 21]),
        ],
        offset: 999,
        from_rest: 999,
        start_offset: 100,
        scratch: Lazy::new(),
        inits: Vec::new(),
    }
}

#[test]
fn state_layout_is_declaration_order_with_version() {
    let mut running = mixer().start().unwrap();
    assert_eq!(running.next().unwrap().unwrap(), 1 + 101);
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"first":{"num_yielded":1},"others":{"0":{"num_yielded":0},"1":{"num_yielded":0}},"offset":101,"from_rest":0,"version":2}"#
    );
}

#[test]
fn reset_none_applies_defaults_and_calls_init() {
    let mut node = mixer();
    node.reset(None).unwrap();
    // `default = self.start_offset` for offset, `Default` for from_rest.
    assert_eq!((node.offset, node.from_rest), (100, 0));
    let state = node.get_state_for_test();
    node.reset(Some(&state)).unwrap();
    assert_eq!(node.inits, [false, true]);
}

impl<S: Node<Item = u64>> Mixer<S> {
    fn get_state_for_test(&self) -> State {
        // A state as a checkpoint would hold it, built by hand.
        let mut s = State::new();
        let mut first = State::new();
        first.insert("num_yielded", 2u64).unwrap();
        s.insert_child("first", first);
        let mut others = State::new();
        for i in 0..self.rest.len() {
            others.insert_child(
                i.to_string(),
                State::new().with("num_yielded", 0u64).unwrap(),
            );
        }
        s.insert_child("others", others);
        s.insert("offset", 7u64).unwrap();
        s.insert("from_rest", 0u64).unwrap();
        s.insert("version", 2u32).unwrap();
        s
    }
}

#[test]
fn derived_node_resumes_exactly() {
    for midpoint in [0, 1, 3, 5, 6, 9] {
        testing::assert_save_load(mixer, midpoint);
    }
}

#[test]
fn describe_lists_params_and_children() {
    assert_eq!(
        mixer().describe().render_text(),
        "Mixer(start_offset=100)\n  first: IterableWrapper\n  others: Vec\n    0: IterableWrapper\n    1: IterableWrapper\n"
    );
}

#[test]
fn bad_states_name_their_path_and_leave_the_node_unchanged() {
    let mut running = mixer().start().unwrap();
    let _ = running.next().unwrap().unwrap();
    let good = running.get_state().unwrap();

    let mut cases: Vec<(State, &str)> = Vec::new();
    let mut wrong_type = good.clone();
    wrong_type.insert("from_rest", "seven").unwrap();
    cases.push((wrong_type, "/from_rest"));
    let mut missing = State::new();
    for k in good.keys().filter(|k| *k != "offset") {
        missing
            .insert(k.to_owned(), good.value(k).unwrap())
            .unwrap();
    }
    cases.push((missing, "/offset"));
    let mut nested = good.clone();
    let mut first = good.child("first").unwrap();
    first.insert("num_yielded", -3).unwrap();
    nested.insert_child("first", first);
    cases.push((nested, "/first/num_yielded"));
    let mut version = good.clone();
    version.insert("version", 1u32).unwrap();
    cases.push((version, "/version"));
    let mut unknown = good.clone();
    unknown.insert("batch_idx", 3).unwrap();
    cases.push((unknown, "/batch_idx"));
    // A state meant for another node (an IterableWrapper's).
    cases.push((State::new().with("num_yielded", 1).unwrap(), "/num_yielded"));
    let mut few_children = good.clone();
    let mut others = State::new();
    others.insert_child("0", State::new().with("num_yielded", 0).unwrap());
    few_children.insert_child("others", others);
    cases.push((few_children, "/others"));

    for (bad, path) in cases {
        let err = running.reset(Some(&bad)).unwrap_err();
        assert_eq!(err.state_path(), Some(path), "{err}");
        // Rolled back: the node continues exactly where it stood.
        assert_eq!(running.get_state().unwrap(), good, "after {path}");
    }
    let rest: Vec<u64> = running.by_ref().collect::<Result<_>>().unwrap();
    assert_eq!(rest, [2 + 102, 3 + 103, 10, 20, 21]);
}

#[test]
fn restore_validates_before_applying_anything() {
    // Reset the node directly (no rollback handle): a bad state field must be
    // rejected before the children or other fields are touched.
    let mut node = mixer();
    node.reset(None).unwrap();
    node.offset = 55;
    let mut bad = node.get_state_for_test();
    bad.insert("from_rest", "x").unwrap();
    assert!(node.reset(Some(&bad)).is_err());
    assert_eq!(node.offset, 55);
    assert_eq!(node.inits, [false]);
}

#[derive(Node)]
#[node(init)]
struct ForgetsToFill {
    #[node(lazy)]
    cache: Lazy<u64>,
}

impl Init for ForgetsToFill {
    fn init(&mut self, _restored: bool) -> Result<()> {
        Ok(())
    }
}

impl Node for ForgetsToFill {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        Ok(Some(*self.cache.get()?))
    }
}

#[test]
fn lazy_slot_read_before_init_names_node_and_field() {
    let mut running = ForgetsToFill { cache: Lazy::new() }.start().unwrap();
    let err = running.next().unwrap().unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotInitialized {
                node: "ForgetsToFill",
                field: "cache"
            }
        ),
        "{err}"
    );
}

/// A parent that marked its child `config` by mistake: the child is never reset.
#[derive(Node)]
struct Forgetful {
    #[node(config)]
    child: Probe,
}

impl Node for Forgetful {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        Node::next(&mut self.child, cx)
    }
}

#[test]
fn runtime_guard_catches_a_child_that_was_never_reset() {
    let mut running = Forgetful {
        child: Probe::new(3),
    }
    .start()
    .unwrap();
    let err = running.next().unwrap().unwrap_err();
    assert!(matches!(err, Error::NotReset { node: "Probe" }), "{err}");
}

#[derive(Node)]
struct Fan {
    #[node(children)]
    sources: BTreeMap<String, Box<dyn Node<Item = u64>>>,
    #[node(child)]
    probe: Probe,
}

impl Node for Fan {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        for s in self.sources.values_mut() {
            if let Some(x) = s.next(cx)? {
                return Ok(Some(x));
            }
        }
        Node::next(&mut self.probe, cx)
    }
}

#[test]
fn shutdown_reaches_every_child_and_drop_shuts_down() {
    let probe = Probe::new(2);
    let boxed_probe = Probe::new(1);
    let counters = [probe.shutdowns.clone(), boxed_probe.shutdowns.clone()];
    let mut sources: BTreeMap<String, Box<dyn Node<Item = u64>>> = BTreeMap::new();
    sources.insert("a".into(), boxed_probe.boxed());
    let mut running = Fan { sources, probe }.start().unwrap();
    let items: Vec<u64> = running.by_ref().collect::<Result<_>>().unwrap();
    assert_eq!(items, [1000, 1000, 1001]);
    running.shutdown();
    let counts = || {
        counters
            .each_ref()
            .map(|c| c.load(std::sync::atomic::Ordering::SeqCst))
    };
    assert_eq!(counts(), [1, 1]);
    drop(running);
    assert_eq!(counts(), [2, 2]);
}

/// Yields `0..limit`; `validate` rejects a saved position past the limit
/// before anything is applied.
#[derive(Node)]
#[node(validate)]
struct Upto {
    #[node(param)]
    limit: u64,
    #[node(state)]
    next: u64,
}

impl nodes_std::Validate for Upto {
    fn validate(&self, state: &State) -> Result<()> {
        let next: u64 = state.get("next")?;
        if next > self.limit {
            return Err(Error::bad_state(state.path_of("next"), "past the limit"));
        }
        Ok(())
    }
}

impl Node for Upto {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        if self.next == self.limit {
            return Ok(None);
        }
        self.next += 1;
        Ok(Some(self.next - 1))
    }
}

#[test]
fn validate_hook_runs_before_anything_is_applied() {
    let mut node = Upto { limit: 3, next: 0 };
    node.reset(None).unwrap();
    node.next = 2;
    let err = node
        .reset(Some(&State::new().with("next", 9u64).unwrap()))
        .unwrap_err();
    assert_eq!(err.to_string(), "bad state at /next: past the limit");
    assert_eq!(node.next, 2);
    node.reset(Some(&State::new().with("next", 3u64).unwrap()))
        .unwrap();
    assert_eq!(node.next, 3);
}

/// A shared list: its snapshot is the `Arc`, written with `make_mut`.
#[derive(Default)]
struct Shared(std::sync::Arc<Vec<u64>>);

impl nodes_std::Snapshot for Shared {
    type Frozen = std::sync::Arc<Vec<u64>>;
    fn snapshot(&self) -> std::sync::Arc<Vec<u64>> {
        std::sync::Arc::clone(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Shared {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Vec::deserialize(d).map(|v| Shared(std::sync::Arc::new(v)))
    }
}

/// Keeps every item it has returned, saved as a snapshot.
#[derive(Node)]
struct Remember<S: Node<Item = u64>> {
    #[node(child)]
    source: S,
    #[node(state, deferred, rename = "seen")]
    history: Shared,
    #[node(state, deferred, default = Shared(std::sync::Arc::new(vec![7])))]
    marks: Shared,
}

impl<S: Node<Item = u64>> Node for Remember<S> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        let item = self.source.next(cx)?;
        if let Some(x) = item {
            std::sync::Arc::make_mut(&mut self.history.0).push(x);
        }
        Ok(item)
    }
}

#[test]
fn deferred_state_fields_save_a_snapshot_and_restore_through_serde() {
    let remember = || Remember {
        source: IterableWrapper::new(vec![1, 2, 3, 4]),
        history: Default::default(),
        marks: Default::default(),
    };
    let mut running = remember().start().unwrap();
    assert_eq!(running.try_next().unwrap(), Some(1));
    assert_eq!(running.try_next().unwrap(), Some(2));
    let state = running.get_state().unwrap();
    // Later items do not reach the state taken before them.
    assert_eq!(running.try_next().unwrap(), Some(3));
    let json = state.to_json().unwrap();
    assert_eq!(
        json,
        r#"{"source":{"num_yielded":2},"seen":[1,2],"marks":[7]}"#
    );
    // As if the fields had been plain `#[node(state)]` values.
    let plain = State::from_json(&json).unwrap();
    assert_eq!(state, plain);
    for from in [&state, &plain] {
        let mut resumed = remember().start_from(from).unwrap();
        assert_eq!(resumed.try_next().unwrap(), Some(3));
        assert_eq!(
            resumed
                .get_state()
                .unwrap()
                .get::<Vec<u64>>("seen")
                .unwrap(),
            [1, 2, 3]
        );
    }
    testing::assert_save_load(remember, 2);
}

/// A leaf whose state is one float it sets from outside.
#[derive(Node)]
struct Level {
    #[node(state)]
    level: f64,
    #[node(state)]
    name: String,
}

impl Node for Level {
    type Item = f64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<f64>> {
        Ok(Some(self.level))
    }
}

/// A leaf's state, taken again and again by nodes of one type, always
/// serialises exactly as that node's own fields (`0.0` and `-0.0` differ).
#[test]
fn leaf_states_are_shared_only_when_written_alike() {
    let json = |level: f64, name: &str| {
        let state = State::new().with("level", level).unwrap();
        let state = state.with("name", name).unwrap();
        let node = Level {
            level: 0.0,
            name: String::new(),
        };
        let running = node.start_from(&state).unwrap();
        running.get_state().unwrap().to_json().unwrap()
    };
    assert_eq!(json(0.0, "a"), r#"{"level":0.0,"name":"a"}"#);
    assert_eq!(json(0.0, "a"), r#"{"level":0.0,"name":"a"}"#);
    assert_eq!(json(-0.0, "a"), r#"{"level":-0.0,"name":"a"}"#);
    assert_eq!(json(-0.0, "b"), r#"{"level":-0.0,"name":"b"}"#);
    assert_eq!(json(1.0, "b"), r#"{"level":1.0,"name":"b"}"#);
    assert_eq!(json(1.0, "b"), r#"{"level":1.0,"name":"b"}"#);
}

/// A count of items under its own key, and another state field that does not
/// change within a pass (the promise is the author's).
#[derive(Node)]
#[node(version = 1)]
struct Numbered {
    #[node(state, counts_items, rename = "returned")]
    count: u64,
    #[node(state)]
    epoch: u64,
}

impl Node for Numbered {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        self.count += 1;
        Ok((self.count <= 5).then_some(self.count))
    }
}

/// `counts_items` makes the description's `counted_path` name the field's
/// key (as renamed), and that key counts the items; nodes without it promise
/// nothing.
#[test]
fn counts_items_names_the_key_that_counts_items() {
    let node = Numbered { count: 0, epoch: 0 };
    assert_eq!(
        node.describe().counted_path(),
        Some(vec!["returned".to_owned()])
    );
    assert_eq!(
        Stateful::resume(&node),
        nodes_std::Resume::CountsItems("returned".into())
    );
    let mut run = node.start().unwrap();
    assert_eq!(run.next().unwrap().unwrap(), 1);
    assert_eq!(run.next().unwrap().unwrap(), 2);
    assert_eq!(run.get_state().unwrap().get::<u64>("returned").unwrap(), 2);
    assert_eq!(
        IterableWrapper::new(0..3u64).describe().counted_path(),
        Some(vec!["num_yielded".to_owned()])
    );
    // A map returns one item per item, so it passes the count on, under the
    // key its child is saved at; a filter does not.
    assert_eq!(
        IterableWrapper::new(0..3u64)
            .map(|x| x)
            .describe()
            .counted_path(),
        Some(vec!["source".to_owned(), "num_yielded".to_owned()])
    );
    assert_eq!(
        IterableWrapper::new(0..3u64)
            .filter(|_| true)
            .describe()
            .counted_path(),
        None
    );
}

/// Numbers its items through the whole run in `count`, a field that changes
/// as the node runs but is wrongly marked `config` (neither saved nor
/// reset), and saves the last number in `last`: every epoch's items are
/// right, but epoch 1 after a full epoch 0 is not epoch 1 of a fresh node.
#[derive(Node)]
#[node(size_hint = "child")]
struct RunNumbered<S> {
    #[node(child)]
    source: S,
    #[node(config)]
    count: u64,
    #[node(state)]
    last: u64,
}

impl<S: Node> Node for RunNumbered<S> {
    type Item = S::Item;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        let item = self.source.next(cx)?;
        if item.is_some() {
            self.count += 1;
            self.last = self.count;
        }
        Ok(item)
    }
}

#[test]
fn a_mutable_field_marked_config_fails_the_save_load_check_naming_the_state_it_leaks_into() {
    let build = || RunNumbered {
        source: IterableWrapper::new(0..5u32),
        count: 0,
        last: 0,
    };
    for midpoint in [0, 2, 5] {
        let err = testing::check_save_load(build, midpoint).unwrap_err();
        assert!(
            err.contains("the state at the end of epoch 1 differs at /root/last: 10 after a full epoch 0, 5 in a fresh loader"),
            "{err}"
        );
        assert!(
            err.contains("a `#[node(config)]` field is neither"),
            "{err}"
        );
    }
}
