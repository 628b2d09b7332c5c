//! Unbatcher: flattening, empty batches, resume inside a batch, bad states,
//! errors from the source, and the refusal of a source whose order varies.

use crate::common::{RangeNode, collect, save_load_at_cuts};
use crate::scripted::{Script, assert_resumes_at_every_cut, pass};
use nodes_std::prelude::*;
use nodes_std::{ResetFlag, testing};

#[test]
fn unbatch_flattens_and_skips_empty_batches() {
    let out = collect(
        IterableWrapper::new(vec![vec![], vec![1u8, 2], vec![], vec![], vec![3], vec![]]).unbatch(),
    );
    assert_eq!(out, [1, 2, 3]);
    let out = collect(IterableWrapper::new(0..20u32).batch(6).unwrap().unbatch());
    assert_eq!(out, (0..20).collect::<Vec<_>>());
}

/// `0..20` in batches of four, unbatched again.
fn fours() -> impl Node<Item = u32> {
    IterableWrapper::new(0..20u32).batch(4).unwrap().unbatch()
}

#[test]
fn unbatch_state_is_source_before_batch_plus_index_and_after_it() {
    let mut running = fours().start().unwrap();
    for _ in 0..5 {
        running.next();
    }
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"source":{"source":{"num_yielded":4},"pending_errors":[]},"batch_idx":1,"after":{"source":{"num_yielded":8},"pending_errors":[]}}"#
    );
    let rest: Vec<u32> = fours()
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, (5..20).collect::<Vec<_>>());
}

#[test]
fn unbatch_save_load() {
    for batch in [1, 3, 6, 25] {
        save_load_at_cuts(|| RangeNode::new(20).batch(batch).unwrap().unbatch());
        save_load_at_cuts(|| RangeNode::new(20).batch_exact(batch).unwrap().unbatch());
    }
    for cut in [0, 2, 5, 6, 7] {
        testing::assert_save_load(
            || {
                IterableWrapper::new(vec![
                    vec![],
                    vec![1u8, 2, 3],
                    vec![],
                    vec![4],
                    vec![],
                    vec![5, 6],
                ])
                .unbatch()
            },
            cut,
        );
    }
}

#[test]
fn unbatch_rejects_an_index_past_the_batch() {
    let refused = |json: &str| {
        let state = State::from_json(json).unwrap();
        fours().start_from(&state).unwrap_err()
    };
    let err =
        refused(r#"{"source":{"source":{"num_yielded":20},"pending_errors":[]},"batch_idx":1}"#);
    assert!(
        err.to_string().contains("the source has none left"),
        "{err}"
    );
    let err =
        refused(r#"{"source":{"source":{"num_yielded":0},"pending_errors":[]},"batch_idx":9}"#);
    assert_eq!(err.state_path(), Some("/batch_idx"), "{err}");
    assert!(err.is_bad_state(), "{err}");
    let err = refused(r#"{"source":{"source":{"num_yielded":0},"pending_errors":[]},"batch":1}"#);
    assert!(err.is_bad_state(), "{err}");
}

/// Batches `[x, x + 100]` of a script's items; its bad records pass through.
fn pairs(len: u64, bad: &[u64]) -> impl Node<Item = Vec<u64>> {
    Script::with_bad(len, bad).map(|x| vec![x, x + 100])
}

#[test]
fn a_state_after_a_source_error_resumes_after_it() {
    // Before: after the error the unbatcher still held the previous batch,
    // so the state re-pulled it and the error came again on resume.
    let build = || pairs(3, &[1]).unbatch();
    let mut running = build().start().unwrap();
    let seen: Vec<_> = running.by_ref().take(3).map(|r| r.is_ok()).collect();
    assert_eq!(seen, [true, true, false]);
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"source":{"source":{"i":2}},"batch_idx":0}"#
    );
    let rest: Vec<u64> = build()
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, [2, 102]);
}

#[test]
fn unbatch_with_errors_resumes_exactly_at_every_cut() {
    for bad in [&[0][..], &[1], &[3], &[1, 2], &[0, 4]] {
        assert_resumes_at_every_cut(|| pairs(5, bad).unbatch());
    }
    // Over a batcher that holds errors until its batch is complete.
    assert_resumes_at_every_cut(|| Script::with_bad(9, &[1, 4, 5]).batch(3).unwrap().unbatch());
    let out = pass(Script::with_bad(5, &[1]).batch(2).unwrap().unbatch());
    let ok: Vec<u64> = out
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    assert_eq!(ok, [0, 2, 3, 4]);
}

/// A source of batches that says its order varies between runs, as an
/// out-of-order parallel map with workers does.
#[derive(Debug, Default)]
struct Varying {
    n: u64,
    flag: ResetFlag,
}

impl Node for Varying {
    type Item = Vec<u64>;

    fn next(&mut self, _cx: &mut Cx) -> Result<Option<Vec<u64>>> {
        self.flag.check("Varying")?;
        self.n += 1;
        Ok((self.n <= 3).then(|| vec![self.n; 2]))
    }
}

impl Stateful for Varying {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.n = state.map_or(Ok(0), |s| s.get("n"))?;
        self.flag.mark();
        Ok(())
    }

    fn get_state(&self, _cx: &Cx) -> Result<State> {
        State::new().with("n", self.n)
    }

    fn describe(&self) -> Description {
        Description::new("Varying")
            .param("workers", 2)
            .param("in_order", false)
            .with_resume(self.resume())
    }

    fn resume(&self) -> nodes_std::Resume {
        nodes_std::Resume::VaryingOrder
    }
}

#[track_caller]
fn assert_refused(result: Result<impl Sized>) {
    match result.map(|_| ()) {
        Err(
            err @ Error::InvalidPipeline {
                node: "Unbatcher", ..
            },
        ) => {
            let Error::InvalidPipeline { below, .. } = &err else {
                unreachable!()
            };
            assert_eq!(below, "Varying(workers=2, in_order=false)");
            let text = err.to_string();
            assert!(
                text.starts_with(
                    "Unbatcher cannot resume exactly over Varying(workers=2, in_order=false): "
                ),
                "{text}"
            );
            assert!(text.contains("ParallelOptions::in_order(true)"), "{text}");
            assert!(text.contains("above the `.unbatch()`"), "{text}");
        }
        Err(err) => panic!("refused with the wrong error: {err}"),
        Ok(()) => panic!("an unbatcher over a source whose order varies was accepted"),
    }
}

#[test]
fn unbatch_refuses_a_source_whose_order_varies() {
    assert_refused(Varying::default().unbatch().start());
    let state = State::from_json(r#"{"source":{"n":1},"batch_idx":1}"#).unwrap();
    assert_refused(Varying::default().unbatch().start_from(&state));
    // Through derived nodes, which forward the question.
    assert_refused(Varying::default().map(|b| b).unbatch().start());
    assert_refused(
        Loader::new(Varying::default().unbatch())
            .epoch()
            .next()
            .unwrap(),
    );
    // A source that replays exactly is accepted, and says so.
    assert_eq!(pairs(3, &[]).unbatch().describe().varying_order(), None);
    assert_eq!(collect(pairs(2, &[]).unbatch()), [0, 100, 1, 101]);
}

#[test]
fn unbatch_forwards_varying_order() {
    // A node above an unbatcher can ask through it (the unbatcher itself
    // refuses when it starts).
    assert_eq!(
        Varying::default()
            .unbatch()
            .describe()
            .varying_order()
            .as_deref(),
        Some("Varying(workers=2, in_order=false)")
    );
}
