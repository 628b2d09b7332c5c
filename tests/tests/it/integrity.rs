//! The integrity checksum of a loader state (issue 12, item 6): written when
//! the state is serialised, verified by `load_state_dict` after every check
//! that names a field and before any of the state is applied, with
//! `Loader::verify_checksum(false)` for states edited by hand.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nodes_std::IterableWrapper;
use nodes_std::prelude::*;
use serde_json::{Map, Value, json};

use crate::support::corrupt::{ByteChanges, every_byte_change};

/// A small pipeline whose state holds a shuffle buffer and a generator.
fn pipeline() -> impl Node<Item = Vec<u64>> {
    IterableWrapper::new(0..12u64)
        .shuffle(4, 7)
        .unwrap()
        .batch(2)
        .unwrap()
}

/// A small real checkpoint (compact JSON) two batches into epoch 1, and
/// the batches after it.
fn checkpoint() -> (String, Vec<Vec<u64>>) {
    let mut loader = Loader::new(pipeline());
    let _ = loader.epoch().count();
    let mut epoch = loader.epoch();
    let _ = epoch.by_ref().take(2).count();
    let json = epoch.state_dict().unwrap().to_json().unwrap();
    let rest = epoch.collect::<Result<_>>().unwrap();
    (json, rest)
}

fn rest_of_epoch<N: Node>(loader: &mut Loader<N>) -> Vec<N::Item> {
    loader.epoch().collect::<Result<_>>().unwrap()
}

#[test]
fn every_single_byte_change_that_alters_a_checkpoint_is_rejected() {
    let (json, rest) = checkpoint();
    // One loader for every offer: a rejected state leaves it where it stood.
    let mut loader = Loader::new(pipeline());
    let mut accepted = Vec::new();
    // The control: digit-for-digit changes, loaded without the checksum.
    let mut unverified = Loader::new(pipeline()).verify_checksum(false);
    let (mut digit_changes, mut accepted_unverified) = (0, 0);
    let ByteChanges {
        not_utf8,
        not_json,
        same_content,
        altered,
    } = every_byte_change(&json, |text, state, digit| {
        match loader.load_state_dict(state) {
            Err(err) => assert!(err.state_path().is_some(), "no path: {err}"),
            Ok(()) => {
                accepted.push(text.to_owned());
                loader = Loader::new(pipeline());
            }
        }
        if digit {
            digit_changes += 1;
            if unverified.load_state_dict(state).is_ok() {
                accepted_unverified += 1;
                unverified = Loader::new(pipeline()).verify_checksum(false);
            }
        }
    });
    let bytes = json.as_bytes();
    eprintln!(
        "{} bytes: {altered} changes alter the content, {same_content} do not, \
         {not_json} are not JSON, {not_utf8} not UTF-8; without the checksum, \
         {accepted_unverified} of {digit_changes} digit changes load",
        bytes.len()
    );
    assert!(
        accepted.is_empty(),
        "{} altered checkpoints accepted, e.g.\n{}\nfor\n{json}",
        accepted.len(),
        accepted[0]
    );
    assert!(
        altered > 50 * bytes.len(),
        "too few altered checkpoints tried"
    );
    // The checksum is what rejects them: many load without it.
    assert!(accepted_unverified > 50, "{accepted_unverified}");
    // The loader that was offered them all resumes the real one exactly.
    loader
        .load_state_dict(&State::from_json(&json).unwrap())
        .unwrap();
    assert_eq!(rest_of_epoch(&mut loader), rest);
}

#[test]
fn serialising_writes_the_checksum_and_taking_a_state_does_not_need_it() {
    let mut loader = Loader::new(pipeline());
    let state = loader.state_dict().unwrap();
    let from_json: Value = serde_json::from_str(&state.to_json().unwrap()).unwrap();
    let from_value = state.to_value();
    let from_serde = serde_json::to_value(&state).unwrap();
    let checksum = &from_value["checksum"];
    let text = checksum.as_str().expect("a string");
    assert!(
        text.len() == 21
            && text.starts_with("mx64:")
            && text[5..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{text}"
    );
    assert_eq!(&from_json["checksum"], checksum);
    assert_eq!(&from_serde["checksum"], checksum);
    assert_eq!(from_json, from_value);

    // Inside a struct of the user's, serialised by serde.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Checkpoint {
        step: u64,
        loader: State,
    }
    let written = serde_json::to_string_pretty(&Checkpoint {
        step: 7,
        loader: state.clone(),
    })
    .unwrap();
    let read: Checkpoint = serde_json::from_str(&written).unwrap();
    assert_eq!(read.loader.get::<String>("checksum").unwrap(), text);
    Loader::new(pipeline())
        .load_state_dict(&read.loader)
        .unwrap();

    // A state that never left memory has nothing to verify, even edited
    // through `State`'s own methods.
    let mut edited = state;
    edited.insert("num_yielded", 5u64).unwrap();
    Loader::new(pipeline()).load_state_dict(&edited).unwrap();
}

/// `value` with the keys of every object in reverse order.
fn reversed(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reversed(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

#[test]
fn a_reformatted_checkpoint_still_loads() {
    let (json, rest) = checkpoint();
    let value: Value = serde_json::from_str(&json).unwrap();
    // The pipeline (a JSON object since loader state format 3) names its nodes.
    assert!(json.contains(r#""name":"#), "{json}");
    for (what, text) in [
        ("pretty", serde_json::to_string_pretty(&value).unwrap()),
        ("keys reversed", reversed(&value).to_string()),
        // The same key with a letter spelt as an escape (`\u0061` is `a`).
        (
            "escapes spelt out",
            json.replace(r#""name":"#, r#""n\u0061me":"#),
        ),
    ] {
        assert_ne!(text, json);
        let mut loader = Loader::new(pipeline());
        loader
            .load_state_dict(&State::from_json(&text).unwrap())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(rest_of_epoch(&mut loader), rest, "{what}");
    }
}

/// The checkpoint with `edit` applied to its JSON value.
fn edited(json: &str, edit: impl FnOnce(&mut Map<String, Value>)) -> State {
    let mut value: Value = serde_json::from_str(json).unwrap();
    edit(value.as_object_mut().unwrap());
    State::from_value(value).unwrap()
}

#[test]
fn a_changed_or_missing_checksum_is_an_error_unless_opted_out() {
    let (json, rest) = checkpoint();
    // A loader mid-epoch, and a twin it must still match after each refusal.
    let stand = || {
        let mut loader = Loader::new(pipeline());
        let mut epoch = loader.epoch();
        let _ = epoch.by_ref().take(3).count();
        drop(epoch);
        loader
    };
    let (mut loader, mut twin) = (stand(), stand());
    // A plausible count: only the checksum can tell.
    let in_range = |m: &mut Map<String, Value>| drop(m.insert("num_yielded".into(), json!(1)));
    let cases: [(State, &str); 5] = [
        (edited(&json, in_range), "does not match its checksum"),
        (edited(&json, |m| drop(m.remove("checksum"))), "missing key"),
        (
            edited(&json, |m| drop(m.insert("checksum".into(), json!(7)))),
            "expected a string",
        ),
        (
            edited(&json, |m| {
                let upper = m["checksum"].as_str().unwrap().to_uppercase();
                m.insert("checksum".into(), json!(upper.replace("MX64", "mx64")));
            }),
            "does not match its checksum",
        ),
        (
            edited(&json, |m| {
                m.insert("checksum".into(), json!("sha256:00"));
            }),
            "algorithm \"sha256\" is not supported",
        ),
    ];
    for (state, message) in &cases {
        let err = loader.load_state_dict(state).unwrap_err();
        assert_eq!(err.state_path(), Some("/checksum"), "{err}");
        assert!(err.to_string().contains(message), "{err}");
        if *message == "missing key" || message.contains("does not match") {
            assert!(err.to_string().contains("verify_checksum(false)"), "{err}");
        }
    }
    assert_eq!(rest_of_epoch(&mut loader), rest_of_epoch(&mut twin));

    // Opted out, each loads; the edited position is where it resumes.
    for (state, _) in &cases {
        let mut loader = Loader::new(pipeline()).verify_checksum(false);
        loader.load_state_dict(state).unwrap();
    }
    let mut loader = Loader::new(pipeline()).verify_checksum(false);
    loader.load_state_dict(&cases[0].0).unwrap();
    let epoch = loader.epoch();
    assert_eq!(epoch.num_yielded(), 1);
    assert_eq!(epoch.collect::<Result<Vec<_>>>().unwrap(), rest);
}

#[test]
fn a_damaged_value_out_of_range_is_reported_at_its_own_path() {
    // The checks that name a field come before the checksum, and nothing of
    // the state stays applied.
    let build = || IterableWrapper::new(0..6u64).zip(IterableWrapper::new(0..6u64));
    let mut donor = Loader::new(build());
    let mut epoch = donor.epoch();
    let _ = epoch.by_ref().take(2).count();
    let json = epoch.state_dict().unwrap().to_json().unwrap();
    let damaged = json.replacen(r#""num_yielded":2"#, r#""num_yielded":9"#, 1);
    assert_ne!(damaged, json);
    let mut loader = Loader::new(build());
    let err = loader
        .load_state_dict(&State::from_json(&damaged).unwrap())
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/root/left/num_yielded"), "{err}");
    let first = rest_of_epoch(&mut loader);
    assert_eq!(first, rest_of_epoch(&mut Loader::new(build())));
    // In range, the same kind of damage is caught by the checksum, and the
    // root put back: the loader still gives its first epoch's sequel.
    let damaged = json.replacen(r#""num_yielded":2"#, r#""num_yielded":3"#, 1);
    let mut loader = Loader::new(build());
    let err = loader
        .load_state_dict(&State::from_json(&damaged).unwrap())
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/checksum"), "{err}");
    assert_eq!(rest_of_epoch(&mut loader), first);
}

/// `0..end`, counting the resets and checks it is asked for. State `{"n"}`,
/// at most `end`.
struct Tally {
    n: u64,
    end: u64,
    resets: Arc<AtomicUsize>,
    checks: Arc<AtomicUsize>,
}

impl Tally {
    fn new(end: u64) -> (Self, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (resets, checks) = (Arc::default(), Arc::default());
        let tally = Tally {
            n: 0,
            end,
            resets: Arc::clone(&resets),
            checks: Arc::clone(&checks),
        };
        (tally, resets, checks)
    }

    fn checked(&self, state: &State) -> Result<u64> {
        let n: u64 = state.get("n")?;
        if n > self.end {
            return Err(Error::bad_state(state.path_of("n"), "past the end"));
        }
        Ok(n)
    }
}

impl Node for Tally {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
        if self.n == self.end {
            return Ok(None);
        }
        self.n += 1;
        Ok(Some(self.n - 1))
    }
}

impl Stateful for Tally {
    fn reset(&mut self, state: Option<&State>) -> Result<()> {
        self.resets.fetch_add(1, Ordering::SeqCst);
        self.n = state.map_or(Ok(0), |s| self.checked(s))?;
        Ok(())
    }
    fn check_state(&self, state: &State) -> Result<()> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.checked(state).map(drop)
    }
    fn get_state(&self, _cx: &Cx) -> Result<State> {
        State::new().with("n", self.n)
    }
    fn describe(&self) -> Description {
        Description::new("Tally")
    }
}

/// A checkpoint of `Tally(0..6)` after two items.
fn tally_checkpoint() -> String {
    let mut loader = Loader::new(Tally::new(6).0);
    let mut epoch = loader.epoch();
    let _ = epoch.by_ref().take(2).count();
    epoch.state_dict().unwrap().to_json().unwrap()
}

#[test]
fn a_state_failing_its_checksum_is_offered_to_no_node() {
    let json = tally_checkpoint();
    let (tally, resets, checks) = Tally::new(6);
    let mut loader = Loader::new(tally);
    loader
        .load_state_dict(&State::from_json(&json).unwrap())
        .unwrap();
    let mut epoch = loader.epoch();
    assert_eq!(epoch.next().transpose().unwrap(), Some(2));
    let standing = epoch.state_dict().unwrap();
    drop(epoch);
    let (resets_before, checks_before) =
        (resets.load(Ordering::SeqCst), checks.load(Ordering::SeqCst));
    // In range: the node's checks pass, and only the checksum can tell.
    let damaged = json.replacen(r#""n":2"#, r#""n":4"#, 1);
    assert_ne!(damaged, json);
    let err = loader
        .load_state_dict(&State::from_json(&damaged).unwrap())
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/checksum"), "{err}");
    // Checked, but never applied (nor rolled back).
    assert_eq!(checks.load(Ordering::SeqCst), checks_before + 1);
    assert_eq!(resets.load(Ordering::SeqCst), resets_before);
    // The loader stands where it stood (three items into its epoch).
    assert_eq!(loader.state_dict().unwrap(), standing);
    assert_eq!(standing.child("root").unwrap().get::<u64>("n").unwrap(), 3);
}

#[test]
fn a_value_out_of_range_is_reported_at_its_path_before_the_checksum_and_nothing_is_applied() {
    let json = tally_checkpoint();
    let damaged = json.replacen(r#""n":2"#, r#""n":9"#, 1);
    let (tally, resets, _) = Tally::new(6);
    let mut loader = Loader::new(tally);
    let mut epoch = loader.epoch();
    assert_eq!(epoch.next().transpose().unwrap(), Some(0));
    let standing = epoch.state_dict().unwrap();
    drop(epoch);
    let resets_before = resets.load(Ordering::SeqCst);
    let err = loader
        .load_state_dict(&State::from_json(&damaged).unwrap())
        .unwrap_err();
    // The field's own path, although the checksum does not match either.
    assert_eq!(err.state_path(), Some("/root/n"), "{err}");
    assert_eq!(resets.load(Ordering::SeqCst), resets_before);
    assert_eq!(loader.state_dict().unwrap(), standing);
}

/// A wide pipeline's state: a value damaged in range is caught by the
/// checksum, a field error is named at its own path before the checksum,
/// and neither is applied.
#[test]
fn a_wide_pipeline_checks_its_fields_then_its_checksum() {
    use nodes_std::MultiNodeWeightedSampler;
    let build = || {
        let sources = (0..300).map(|i| (format!("s{i:03}"), IterableWrapper::new(0..20u64)));
        let weights = (0..300).map(|i| (format!("s{i:03}"), 1.0 + (i % 3) as f64));
        MultiNodeWeightedSampler::new(sources, weights)
            .unwrap()
            .seed(3)
    };
    let mut loader = Loader::new(build());
    let mut epoch = loader.epoch();
    let _ = epoch.by_ref().take(500).count();
    let json = epoch.state_dict().unwrap().to_json().unwrap();
    let rest: Vec<u64> = epoch.collect::<Result<_>>().unwrap();
    let source_count = |m: &mut Map<String, Value>, value: Value| {
        m["root"]["dataset_node_states"]["s123"]["num_yielded"] = value;
    };

    let mut target = Loader::new(build());
    // In range and consistent with the rest (a cycling source may have
    // ended once, its first run's end saved), so only the checksum tells.
    let damaged = edited(&json, |m| {
        m["root"]["datasets_exhausted"]["s123"] = json!(true);
        m["root"]["dataset_first_pass_ends"] = json!({"s123": {"num_yielded": 20}});
    });
    let err = target.load_state_dict(&damaged).unwrap_err();
    assert_eq!(err.state_path(), Some("/checksum"), "{err}");
    // In range but not what the sampler's own count says: refused there.
    let miscounted = edited(&json, |m| source_count(m, json!(0)));
    let err = target.load_state_dict(&miscounted).unwrap_err();
    assert_eq!(err.state_path(), Some("/root/num_yielded"), "{err}");
    // A field error comes first, though the checksum fails too.
    let both = edited(&json, |m| source_count(m, json!("zero")));
    let err = target.load_state_dict(&both).unwrap_err();
    assert_eq!(
        err.state_path(),
        Some("/root/dataset_node_states/s123/num_yielded"),
        "{err}"
    );
    // Neither was applied; the good state loads and resumes exactly.
    target
        .load_state_dict(&State::from_json(&json).unwrap())
        .unwrap();
    assert_eq!(rest_of_epoch(&mut target), rest);
}
