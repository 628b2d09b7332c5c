//! Sources and helpers for the mixing tests: sources that fail, flake or
//! vary in given ways, and the checks of the samplers' error semantics.

use std::time::Duration;

use nodes_std::{Cx, Description, Error, Node, NodeExt, ResetFlag, Result, State, Stateful};

/// Yields `base, base + 1, ..., base + len - 1`; state = number yielded,
/// restored directly.
#[derive(Debug)]
pub(crate) struct Count {
    base: u64,
    len: u64,
    yielded: u64,
    flag: ResetFlag,
}

impl Count {
    pub(crate) fn new(base: u64, len: u64) -> Self {
        Count {
            base,
            len,
            yielded: 0,
            flag: ResetFlag::default(),
        }
    }
}

impl Node for Count {
    type Item = u64;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        self.flag.check("Count")?;
        if self.yielded == self.len {
            return Ok(None);
        }
        self.yielded += 1;
        Ok(Some(self.base + self.yielded - 1))
    }
}

impl Stateful for Count {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        let yielded = match state {
            None => 0,
            Some(s) => {
                s.expect_keys("Count", &["num_yielded"])?;
                let n: u64 = s.get("num_yielded")?;
                if n > self.len {
                    return Err(Error::bad_state(s.path_of("num_yielded"), "past the end"));
                }
                n
            }
        };
        self.yielded = yielded;
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        self.flag.check("Count")?;
        State::new().with("num_yielded", self.yielded)
    }

    fn describe(&self) -> Description {
        Description::new("Count")
            .param("base", self.base)
            .param("len", self.len)
    }
}

/// A source of another type: yields the items of a vector; state = position.
#[derive(Debug)]
pub(crate) struct FromVec {
    items: Vec<u64>,
    pos: usize,
}

impl FromVec {
    pub(crate) fn new(items: Vec<u64>) -> Self {
        FromVec { items, pos: 0 }
    }
}

impl Node for FromVec {
    type Item = u64;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        let item = self.items.get(self.pos).copied();
        if item.is_some() {
            self.pos += 1;
        }
        Ok(item)
    }
}

impl Stateful for FromVec {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.pos = state.map_or(Ok(0), |s| s.get("pos"))?;
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        State::new().with("pos", self.pos)
    }

    fn describe(&self) -> Description {
        Description::new("FromVec")
    }
}

/// Writes, in the `impl Stateful` of a wrapper of the [`Count`] in field
/// `$inner`, a `reset` that resets the count.
macro_rules! count_resets {
    ($inner:tt) => {
        fn reset(&mut self, state: Option<&State>) -> Result<()> {
            self.$inner.reset(state)
        }
    };
}

/// Writes, in the `impl Stateful` of a wrapper of the [`Count`] in field
/// `$inner`, a `get_state` that is the count's and a `describe` as `$name`.
macro_rules! count_state {
    ($inner:tt, $name:literal) => {
        fn get_state(&self, cx: &Cx) -> Result<State> {
            self.$inner.get_state(cx)
        }

        fn describe(&self) -> Description {
            Description::new($name)
        }
    };
}

/// Like [`Count`], but the first attempt at item `fail_at` of each pass
/// returns an error instead (the retry succeeds).
#[derive(Debug)]
pub(crate) struct Flaky {
    inner: Count,
    fail_at: u64,
    failed: bool,
}

impl Flaky {
    pub(crate) fn new(base: u64, len: u64, fail_at: u64) -> Self {
        Flaky {
            inner: Count::new(base, len),
            fail_at,
            failed: false,
        }
    }
}

impl Node for Flaky {
    type Item = u64;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        if !self.failed && self.inner.yielded == self.fail_at {
            self.failed = true;
            return Err(Error::user(
                "Flaky",
                Some(self.fail_at),
                "transient failure",
            ));
        }
        self.inner.next(cx)
    }
}

impl Stateful for Flaky {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.failed = false;
        self.inner.reset(state)
    }

    count_state!(inner, "Flaky");
}

/// Like [`Count`], but the items at the positions in `fail_at` are errors:
/// an error takes the place of its item (the position moves on past it), as
/// every stock fallible node delivers one. The state is the position.
#[derive(Debug)]
pub(crate) struct Failing {
    inner: Count,
    fail_at: Vec<u64>,
}

impl Failing {
    pub(crate) fn new(base: u64, len: u64, fail_at: &[u64]) -> Self {
        Failing {
            inner: Count::new(base, len),
            fail_at: fail_at.to_vec(),
        }
    }
}

impl Node for Failing {
    type Item = u64;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        let position = self.inner.yielded;
        match self.inner.next(cx)? {
            Some(item) if self.fail_at.contains(&position) => Err(Error::user(
                "Failing",
                Some(position),
                format!("bad record {item}"),
            )),
            other => Ok(other),
        }
    }
}

impl Stateful for Failing {
    count_resets!(inner);
    count_state!(inner, "Failing");
}

/// A [`Count`] that says its output order varies between runs (as an
/// out-of-order parallel map does).
#[derive(Debug)]
pub(crate) struct Varying(pub(crate) Count);

impl Node for Varying {
    type Item = u64;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        self.0.next(cx)
    }
}

impl Stateful for Varying {
    count_resets!(0);

    fn get_state(&self, cx: &Cx) -> Result<State> {
        self.0.get_state(cx)
    }

    fn describe(&self) -> Description {
        Description::new("Varying")
            .param("base", self.0.base)
            .with_resume(self.resume())
    }

    fn resume(&self) -> nodes_std::Resume {
        nodes_std::Resume::VaryingOrder
    }
}

/// An item or the message of an error, to compare runs that contain errors.
pub(crate) type Outcome = std::result::Result<u64, String>;

/// Runs a started node to its end (or `limit` outcomes), going on after
/// errors, and returns every outcome.
pub(crate) fn outcomes<N: Node<Item = u64>>(
    run: &mut nodes_std::Running<N>,
    limit: usize,
) -> Vec<Outcome> {
    let mut out = Vec::new();
    while out.len() < limit {
        match run.try_next() {
            Ok(Some(item)) => out.push(Ok(item)),
            Ok(None) => break,
            Err(e) => out.push(Err(e.to_string())),
        }
    }
    out
}

/// The one error semantics, checked on a node built by `build(true)` whose
/// sources fail at some items, against `build(false)`, the same node over
/// sources that do not fail:
///
/// - an `Err` takes the place of the item that failed, and the pass goes on:
///   the outcomes are the fault-free items with exactly the failed ones
///   replaced by errors (no Ok item lost, repeated or moved);
/// - a state taken after any number of outcomes, right after an error
///   included, resumes (after a JSON round trip, in a fresh node) exactly
///   as the uninterrupted run continues.
///
/// `failed(item)` says which fault-free items fail. At most `limit` outcomes
/// are compared (for endless nodes). Returns the number of errors seen.
pub(crate) fn check_error_semantics<N: Node<Item = u64>>(
    build: impl Fn(bool) -> N,
    failed: impl Fn(u64) -> bool,
    limit: usize,
) -> usize {
    let clean = outcomes(&mut build(false).start().expect("start"), limit);
    let all = outcomes(&mut build(true).start().expect("start"), limit);
    let expected: Vec<std::result::Result<u64, ()>> = clean
        .iter()
        .map(|o| match o {
            Ok(item) if failed(*item) => Err(()),
            Ok(item) => Ok(*item),
            Err(e) => panic!("the fault-free run failed: {e}"),
        })
        .collect();
    let shape: Vec<std::result::Result<u64, ()>> = all
        .iter()
        .map(|o| o.as_ref().map(|i| *i).map_err(|_| ()))
        .collect();
    assert_eq!(
        shape, expected,
        "an error must take the place of its item, and the pass go on"
    );
    for cut in 0..=all.len() {
        let mut first = build(true).start().expect("start");
        let head = outcomes(&mut first, cut);
        assert_eq!(head, all[..cut], "cut {cut}: the run is not deterministic");
        let state = first.get_state().expect("state after the cut");
        let state = State::from_json(&state.to_json().expect("to_json")).expect("from_json");
        let mut resumed = nodes_std::Running::start_from(build(true), &state).expect("restore");
        let rest = outcomes(&mut resumed, limit - cut);
        assert_eq!(
            rest,
            all[cut..],
            "cut {cut} (after {:?}): the resumed run differs",
            cut.checked_sub(1).map(|i| &all[i])
        );
    }
    all.iter().filter(|o| o.is_err()).count()
}

/// The items among `outcomes` (the errors left out), sorted.
pub(crate) fn sorted_items(outcomes: &[Outcome]) -> Vec<u64> {
    let mut items: Vec<u64> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok().copied())
        .collect();
    items.sort_unstable();
    items
}

/// `len` items from `base` that fail at the items `fail_at` if `failing`
/// (a [`Failing`]), and a plain [`Count`] otherwise.
pub(crate) fn failing_if(
    failing: bool,
    base: u64,
    len: u64,
    fail_at: &[u64],
) -> Box<dyn Node<Item = u64>> {
    if failing {
        Failing::new(base, len, fail_at).boxed()
    } else {
        Count::new(base, len).boxed()
    }
}

/// Runs `node` from the start to its end (or `limit` items).
pub(crate) fn run<N: Node>(node: N, limit: usize) -> Vec<N::Item> {
    node.start()
        .expect("start")
        .take(limit)
        .collect::<Result<_>>()
        .expect("run")
}

/// Runs `node` from the start to its end.
pub(crate) fn run_all<N: Node>(node: N) -> Vec<N::Item> {
    run(node, usize::MAX)
}

/// Sources `(name, Count)` whose items encode the source: source `i` yields
/// `1000 * i + k`.
pub(crate) fn counts(sizes: &[u64]) -> Vec<(String, Count)> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| (format!("ds{i}"), Count::new(1000 * i as u64, len)))
        .collect()
}

/// How many items came from each source, for items made by [`counts`].
pub(crate) fn per_source(items: &[u64], sources: usize) -> Vec<usize> {
    let mut out = vec![0; sources];
    for item in items {
        out[(item / 1000) as usize] += 1;
    }
    out
}

/// Runs `body` on a thread and fails if it takes longer than `secs` seconds.
#[track_caller]
pub(crate) fn watchdog<F: FnOnce() + Send + 'static>(secs: u64, body: F) {
    nodes_std::testing::watchdog("mixing test", Duration::from_secs(secs), body);
}

/// A parent that forgets to reset its child: how a child is reached before
/// its own reset (nothing public makes a context out of thin air).
pub(crate) struct Forgetful<N>(pub(crate) N);

impl<N: Node> Node for Forgetful<N> {
    type Item = N::Item;

    fn next(&mut self, cx: &mut Cx) -> Result<Option<N::Item>> {
        self.0.next(cx)
    }
}

impl<N: Node> Stateful for Forgetful<N> {
    fn reset(&mut self, _state: Option<&State>) -> Result<()> {
        Ok(())
    }

    fn get_state(&self, cx: &Cx) -> Result<State> {
        self.0.get_state(cx)
    }

    fn describe(&self) -> Description {
        Description::new("Forgetful")
    }
}
