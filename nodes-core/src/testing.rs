//! Conformance checks for node authors: does a node resume exactly?

use std::fmt::Debug;

use crate::error::Result;
use crate::loader::Loader;
use crate::node::Node;
use crate::state::State;

/// Runs torchdata's save/load protocol on the pipeline built by `factory`,
/// cutting each epoch after `midpoint` items, and panics with a description of
/// the first difference.
///
/// The protocol, with every state round-tripped through JSON text:
/// 1. Reference run on one loader: the initial state; epoch 0 with a state
///    taken after `midpoint` items and one at its end; epochs 1 and 2 likewise.
/// 2. Restoring the mid-epoch-0 state — into the same loader (which has moved
///    on) and into a freshly built one — yields the rest of epoch 0, then the
///    whole of epoch 1.
/// 3. Restoring the mid-epoch-1 state yields the rest of epoch 1, then epoch 2.
/// 4. Restoring the initial state yields epoch 0, then epoch 1.
/// 5. Restoring the end-of-epoch-0 state yields epoch 1 (the next epoch starts),
///    or, with `restart_on_end(false)`, one empty epoch and then epoch 1.
///
/// ```
/// use nodes_core::{testing, Cx, Description, Node, Result, State, Stateful};
///
/// struct Count { n: u64 }
/// impl Node for Count {
///     type Item = u64;
///     fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
///         if self.n == 4 { return Ok(None) }
///         self.n += 1;
///         Ok(Some(self.n))
///     }
/// }
/// impl Stateful for Count {
///     fn reset(&mut self, s: Option<&State>) -> Result<()> {
///         self.n = s.map_or(Ok(0), |s| s.get("n"))?;
///         Ok(())
///     }
///     fn get_state(&self, _cx: &Cx) -> Result<State> { State::new().with("n", self.n) }
///     fn describe(&self) -> Description { Description::new("Count") }
/// }
/// for midpoint in [0, 1, 3, 4] {
///     testing::assert_save_load(|| Count { n: 0 }, midpoint);
/// }
/// ```
#[track_caller]
pub fn assert_save_load<N, F>(factory: F, midpoint: usize)
where
    N: Node,
    N::Item: PartialEq + Debug,
    F: Fn() -> N,
{
    if let Err(message) = check_save_load(factory, midpoint) {
        panic!("save/load check failed at midpoint {midpoint}: {message}");
    }
}

/// [`assert_save_load`] as a `Result`: `Err` describes the first difference
/// (for property tests that want to shrink instead of panicking).
pub fn check_save_load<N, F>(factory: F, midpoint: usize) -> Result<(), String>
where
    N: Node,
    N::Item: PartialEq + Debug,
    F: Fn() -> N,
{
    // 1. Reference run.
    let mut loader = Loader::new(factory());
    let initial = roundtrip(loader.state_dict())?;
    let mut epochs = Vec::new();
    let mut mids = Vec::new();
    let mut end0 = None;
    for _ in 0..4 {
        let (items, mid, end) = run_epoch_with_cut(&mut loader, midpoint)?;
        epochs.push(items);
        mids.push(mid);
        end0.get_or_insert(end);
    }
    let end0 = end0.unwrap_or_default();

    // 2. Mid-epoch 0, into the same loader and into a fresh one.
    load(
        &mut loader,
        &mids[0],
        "mid-epoch-0 state into the same loader",
    )?;
    expect_resume(&mut loader, &epochs, 0, midpoint, "the same loader")?;
    let mut fresh = Loader::new(factory());
    load(
        &mut fresh,
        &mids[0],
        "mid-epoch-0 state into a fresh loader",
    )?;
    expect_resume(&mut fresh, &epochs, 0, midpoint, "a fresh loader")?;

    // 3. Mid-epoch 1.
    let mut fresh = Loader::new(factory());
    load(&mut fresh, &mids[1], "mid-epoch-1 state")?;
    expect_resume(&mut fresh, &epochs, 1, midpoint, "a fresh loader")?;
    load(
        &mut loader,
        &mids[1],
        "mid-epoch-1 state into the same loader",
    )?;
    expect_resume(&mut loader, &epochs, 1, midpoint, "the same loader")?;

    // 4. The initial state.
    load(&mut loader, &initial, "initial state")?;
    expect(
        &mut loader,
        &epochs[0],
        "epoch 0 after restoring the initial state",
    )?;
    expect(
        &mut loader,
        &epochs[1],
        "epoch 1 after restoring the initial state",
    )?;

    // 5. End of epoch 0, with and without restart.
    let mut fresh = Loader::new(factory()).restart_on_end(false);
    load(&mut fresh, &end0, "end-of-epoch-0 state (no restart)")?;
    expect(
        &mut fresh,
        &[],
        "empty epoch after an end-of-epoch state without restart",
    )?;
    expect(&mut fresh, &epochs[1], "epoch 1 after the empty epoch")?;
    let mut fresh = Loader::new(factory());
    load(&mut fresh, &end0, "end-of-epoch-0 state")?;
    expect(
        &mut fresh,
        &epochs[1],
        "epoch 1 right after an end-of-epoch state",
    )?;
    Ok(())
}

/// After restoring the state cut at `midpoint` of epoch `e`: the rest of that
/// epoch, then the next one. A cut at the very end of an epoch is an
/// end-of-epoch state, so the loader goes straight on to the next epoch.
fn expect_resume<N: Node>(
    loader: &mut Loader<N>,
    epochs: &[Vec<N::Item>],
    e: usize,
    midpoint: usize,
    into: &str,
) -> Result<(), String>
where
    N::Item: PartialEq + Debug,
{
    let epoch = &epochs[e];
    if midpoint < epoch.len() {
        let what = format!("rest of epoch {e} after restoring mid-epoch {e} into {into}");
        expect(loader, &epoch[midpoint..], &what)?;
        let what = format!("epoch {} after restoring mid-epoch {e} into {into}", e + 1);
        expect(loader, &epochs[e + 1], &what)
    } else {
        for next in [e + 1, e + 2] {
            let what = format!("epoch {next} after restoring the end-of-epoch-{e} cut into {into}");
            expect(loader, &epochs[next], &what)?;
        }
        Ok(())
    }
}

type EpochRun<T> = (Vec<T>, State, State);

fn run_epoch_with_cut<N: Node>(
    loader: &mut Loader<N>,
    midpoint: usize,
) -> Result<EpochRun<N::Item>, String> {
    let mut items = Vec::new();
    let mut epoch = loader.epoch();
    let mut mid = None;
    loop {
        if items.len() == midpoint {
            mid = Some(roundtrip(epoch.state_dict())?);
        }
        match epoch.next() {
            Some(Ok(item)) => items.push(item),
            Some(Err(e)) => return Err(format!("reference run failed: {e}")),
            None => break,
        }
    }
    let end = roundtrip(epoch.state_dict())?;
    // A cut past the end of the epoch is the end state.
    let mid = mid.unwrap_or_else(|| end.clone());
    Ok((items, mid, end))
}

fn roundtrip(state: Result<State>) -> Result<State, String> {
    let state = state.map_err(|e| format!("state_dict failed: {e}"))?;
    let json = state
        .to_json()
        .map_err(|e| format!("state does not serialise: {e}"))?;
    State::from_json(&json).map_err(|e| format!("state does not parse back: {e}"))
}

fn load<N: Node>(loader: &mut Loader<N>, state: &State, what: &str) -> Result<(), String> {
    loader
        .load_state_dict(state)
        .map_err(|e| format!("loading the {what} failed: {e}"))
}

fn expect<N: Node>(loader: &mut Loader<N>, want: &[N::Item], what: &str) -> Result<(), String>
where
    N::Item: PartialEq + Debug,
{
    let mut got = Vec::new();
    for item in loader.epoch() {
        got.push(item.map_err(|e| format!("{what}: error after {} items: {e}", got.len()))?);
    }
    if got.as_slice() == want {
        return Ok(());
    }
    let first_diff = got
        .iter()
        .zip(want)
        .position(|(g, w)| g != w)
        .unwrap_or(got.len().min(want.len()));
    Err(format!(
        "{what}: got {} items, want {}; first difference at index {first_diff}: got {:?}, want {:?}",
        got.len(),
        want.len(),
        got.get(first_diff),
        want.get(first_diff),
    ))
}
