//! Bad states: real checkpoints of random pipelines, mutated, then loaded.
//!
//! A state that cannot fit is always an `Err` naming a JSON path inside the
//! state (near the mutation), never a panic and never a hang; afterwards the
//! loader (or started pipeline) carries on from where it stood, exactly like
//! a twin that was never offered the bad state.
//!
//! Mutations: delete a key, add an unknown key, change a value's JSON type,
//! replace a number with a huge, negative, fractional or nearby one, swap
//! two parts of the state, swap in the state of another pipeline shape
//! (with and without the loader's shape check), random JSON in place of a
//! part or of the whole state, and corrupted JSON text. Mutations that can
//! still make a valid state (a nearby number, a swap, a state from a
//! pipeline of the same shape) may load; everything else must be rejected.
//!
//! `NODES_RELIABILITY_LONG=1` runs ten times the cases. For longer runs, the
//! cargo-fuzz target `fuzz/fuzz_targets/load_state.rs` feeds arbitrary
//! bytes to the same entry points (see README, "Reliability suite").

use std::time::Duration;

use crate::support::spec::{
    Grammar, Level, Out, Pipeline, Spec, V, build, compare_epoch, spec_strategy,
};
use crate::support::watch::{config, with_watchdog};
use nodes_std::prelude::*;
use nodes_std::{MultiNodeWeightedSampler, ParallelOptions, Running};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// A number to put in place of another.
#[derive(Clone, Copy, Debug)]
enum Num {
    Max,
    MaxMinus1,
    TwoPow64,
    Minus1,
    MinI64,
    Half,
    Huge,
    PlusOne,
    MinusOne,
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Delete the key at the `n`-th path (modulo the number of paths).
    DeleteKey(usize),
    /// Add an unknown key to the `n`-th object.
    UnknownKey(usize, Value),
    /// Replace the `n`-th value with one of another JSON type.
    WrongType(usize, usize),
    /// Replace the `n`-th number.
    Number(usize, Num),
    /// Replace the `n`-th value with a copy of the `m`-th.
    Swap(usize, usize),
    /// Replace the `n`-th value with random JSON.
    RandomPart(usize, Value),
    /// Random JSON instead of the whole state.
    RandomWhole(Value),
    /// The state of another pipeline, with the loader's shape check on or off.
    OtherShape { checked: bool },
    /// The JSON text cut short at a fraction of its length.
    Truncate(f64),
    /// One byte of the JSON text replaced.
    Byte(f64, u8),
}

/// Where the twins stand when the bad state is offered.
#[derive(Clone, Copy, Debug)]
enum Before {
    /// A new loader.
    Fresh,
    /// A loader that loaded the real state.
    Loaded,
    /// A loader `n` items into its first epoch (the epoch dropped there).
    MidEpoch(usize),
    /// A loader that read its first epoch to the end.
    EndOfEpoch,
    /// A new loader asked for its state once.
    AfterStateDict,
    /// A started pipeline `n` items in, offered the bad root state through
    /// `Running::reset`.
    Running(usize),
}

/// Whether the mutated state may still be a valid one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Must be rejected, with an error path related to `Mutated::at`.
    MustFail,
    /// Must be rejected, anywhere in the state.
    MustFailAnywhere,
    /// May load; if rejected, the path must still be in the state.
    MayPass,
}

struct Mutated {
    /// The text to load (`None` when the mutation produced no JSON object).
    json: String,
    /// The path of the mutation.
    at: String,
    verdict: Verdict,
    check_shape: bool,
}

/// Every path in `value` except the root, parents before children.
fn paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = format!("{prefix}/{k}");
                out.push(p.clone());
                paths(v, &p, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let p = format!("{prefix}/{i}");
                out.push(p.clone());
                paths(v, &p, out);
            }
        }
        _ => {}
    }
}

fn parent_and_key(path: &str) -> (&str, &str) {
    let cut = path.rfind('/').expect("paths start with /");
    (&path[..cut], &path[cut + 1..])
}

/// The value at `path` (`/` is the root).
fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    if path == "/" {
        Some(value)
    } else {
        value.pointer(path)
    }
}

/// The pipeline description is only compared through its fingerprint: a
/// description that still parses loads as long as the fingerprint matches.
fn in_description(path: &str) -> bool {
    path == "/pipeline" || path.starts_with("/pipeline/")
}

/// The serde form of a ChaCha generator (a Shuffler's `rng`): the generator's
/// own `Deserialize` ignores unknown fields and reads `word_pos` as `u128`.
fn in_chacha(state: &Value, path: &str) -> bool {
    let mut p = path;
    loop {
        if let Some(Value::Object(m)) = lookup(state, p)
            && m.contains_key("stream")
            && m.contains_key("word_pos")
            && m.contains_key("seed")
        {
            return true;
        }
        if p.is_empty() || p == "/" {
            return false;
        }
        p = parent_and_key(p).0;
    }
}

/// Whether `path` is an `Interleave`'s map of open slots (`slots` beside
/// `slots_used`), where a slot whose inner node ended is simply absent.
fn in_open_slots(state: &Value, path: &str) -> bool {
    let Some(parent) = path.strip_suffix("/slots") else {
        return false;
    };
    matches!(lookup(state, parent), Some(Value::Object(m)) if m.contains_key("slots_used"))
}

fn another_type(original: &Value, pick: usize) -> Value {
    let candidates = [
        Value::Null,
        json!(true),
        json!("text"),
        json!(7),
        json!(0.5),
        json!([1, 2]),
        json!({"k": 1}),
    ];
    let same = |v: &Value| {
        std::mem::discriminant(v) == std::mem::discriminant(original)
            && !(v.is_number() && v.is_f64() != original.is_f64())
    };
    let others: Vec<&Value> = candidates.iter().filter(|v| !same(v)).collect();
    others[pick % others.len()].clone()
}

fn number(n: Num, original: &Value) -> Value {
    let base = original.as_u64().unwrap_or(0);
    match n {
        Num::Max => json!(u64::MAX),
        Num::MaxMinus1 => json!(u64::MAX - 1),
        Num::TwoPow64 => serde_json::from_str("18446744073709551616").expect("a JSON number"),
        Num::Minus1 => json!(-1),
        Num::MinI64 => json!(i64::MIN),
        Num::Half => json!(0.5),
        Num::Huge => json!(1e300),
        Num::PlusOne => json!(base.wrapping_add(1)),
        Num::MinusOne => json!(base.wrapping_sub(1)),
    }
}

/// Applies `mutation` to the real state `real` (and `other`, the state of
/// another pipeline).
fn mutate(real: &State, other: &State, other_same_shape: bool, m: &Mutation) -> Option<Mutated> {
    let original = real.clone().into_value();
    let mut value = original.clone();
    let mut all = Vec::new();
    paths(&value, "", &mut all);
    // The pipeline description is a large part of a state but only matters
    // through its fingerprint: aim three mutations in four elsewhere.
    let choose = |among: &[String], n: usize| -> Option<String> {
        let outside: Vec<&String> = among.iter().filter(|p| !in_description(p)).collect();
        if n.is_multiple_of(4) || outside.is_empty() {
            among.get((n / 4) % among.len().max(1)).cloned()
        } else {
            Some(outside[(n / 4) % outside.len()].clone())
        }
    };
    let pick = |n: usize| choose(&all, n).expect("a state has keys");
    let outside = |v: Verdict, at: &str| {
        if in_description(at) {
            Verdict::MayPass
        } else {
            v
        }
    };
    let done = |value: Value, at: String, verdict: Verdict| {
        Some(Mutated {
            json: value.to_string(),
            at,
            verdict,
            check_shape: true,
        })
    };
    match m {
        Mutation::DeleteKey(n) => {
            let at = pick(*n);
            let (parent, key) = parent_and_key(&at);
            match value.pointer_mut(parent)? {
                Value::Object(map) => {
                    map.shift_remove(key);
                }
                Value::Array(items) => {
                    items.remove(key.parse::<usize>().ok()?);
                }
                _ => return None,
            }
            // Removing an array element can leave a valid array (a shorter
            // buffer, a list of offsets), and removing one of an
            // `Interleave`'s open slots leaves a valid state too (that slot
            // reads as one whose inner node ended): only the loader's
            // checksum tells them apart, and `Running::reset` has none.
            // The writer's version is informational: a state without it loads.
            // A flat_map's or unbatch's `after` only settles a threaded
            // node below on restore: a state without it loads.
            let after_item = key == "after"
                && original
                    .pointer(parent)
                    .is_some_and(|p| p.get("output_idx").or(p.get("batch_idx")).is_some());
            let verdict = if matches!(original.pointer(parent), Some(Value::Array(_)))
                || in_open_slots(&original, parent)
                || after_item
                || at == "/version"
            {
                Verdict::MayPass
            } else {
                outside(Verdict::MustFail, &at)
            };
            done(value, at, verdict)
        }
        Mutation::UnknownKey(n, extra) => {
            let mut objects: Vec<String> = all
                .iter()
                .filter(|p| original.pointer(p).is_some_and(Value::is_object))
                .cloned()
                .collect();
            objects.push(String::new());
            let at = choose(&objects, *n)?;
            let key = "__not_a_key__";
            match value.pointer_mut(&at)? {
                Value::Object(map) => {
                    map.insert(key.to_owned(), extra.clone());
                }
                _ => return None,
            }
            let verdict = if in_chacha(&original, &at) {
                Verdict::MayPass
            } else {
                outside(Verdict::MustFail, &at)
            };
            done(value, format!("{at}/{key}"), verdict)
        }
        Mutation::WrongType(n, t) => {
            let at = pick(*n);
            let slot = value.pointer_mut(&at)?;
            *slot = another_type(slot, *t);
            done(value, at.clone(), outside(Verdict::MustFail, &at))
        }
        Mutation::Number(n, num) => {
            let numbers: Vec<String> = all
                .iter()
                .filter(|p| original.pointer(p).is_some_and(Value::is_number))
                .cloned()
                .collect();
            let at = choose(&numbers, *n)?;
            let slot = value.pointer_mut(&at)?;
            *slot = number(*num, slot);
            // Every number in a state is an unsigned integer; what fits in a
            // u64 may be a valid position or count.
            let verdict = match num {
                Num::Minus1 | Num::MinI64 | Num::Half | Num::Huge => Verdict::MustFail,
                Num::TwoPow64 if !in_chacha(&original, &at) => Verdict::MustFail,
                _ => Verdict::MayPass,
            };
            done(value, at.clone(), outside(verdict, &at))
        }
        Mutation::Swap(n, k) => {
            let (a, b) = (pick(*n), pick(*k));
            if a.starts_with(&b) || b.starts_with(&a) {
                return None;
            }
            let copy = original.pointer(&b)?.clone();
            *value.pointer_mut(&a)? = copy;
            done(value, a, Verdict::MayPass)
        }
        Mutation::RandomPart(n, random) => {
            let at = pick(*n);
            *value.pointer_mut(&at)? = random.clone();
            done(value, at, Verdict::MayPass)
        }
        Mutation::RandomWhole(random) => {
            done(random.clone(), "/".to_owned(), Verdict::MustFailAnywhere)
        }
        Mutation::OtherShape { checked } => Some(Mutated {
            json: other.to_json().ok()?,
            at: "/".to_owned(),
            verdict: if *checked && !other_same_shape {
                Verdict::MustFailAnywhere
            } else {
                Verdict::MayPass
            },
            check_shape: *checked,
        }),
        Mutation::Truncate(frac) => {
            let text = original.to_string();
            let cut = ((text.len() as f64) * frac) as usize;
            Some(Mutated {
                json: text[..cut.min(text.len().saturating_sub(1))].to_owned(),
                at: "/".to_owned(),
                verdict: Verdict::MustFailAnywhere,
                check_shape: true,
            })
        }
        Mutation::Byte(frac, byte) => {
            let mut text = original.to_string().into_bytes();
            let at = (((text.len() - 1) as f64) * frac) as usize;
            text[at] = *byte;
            Some(Mutated {
                json: String::from_utf8(text).ok()?,
                at: "/".to_owned(),
                verdict: Verdict::MayPass,
                check_shape: true,
            })
        }
    }
}

/// Up to this many items per epoch are read after a load.
const ITEM_LIMIT: usize = 2000;

/// What a loader yields over its next two epochs: items, or the text of an
/// error (the epoch goes on after an error, as far as it wants).
type Epochs = Vec<Vec<Result<V, String>>>;

fn read_epochs(loader: &mut Loader<Pipeline>) -> Epochs {
    (0..2)
        .map(|_| {
            loader
                .epoch()
                .take(ITEM_LIMIT)
                .map(|r| r.map_err(|e| e.to_string()))
                .collect()
        })
        .collect()
}

/// The rest of the pass, after the items read before the bad state was
/// offered (out of order, which items came first varies from run to run:
/// only the whole pass is comparable).
fn read_running(run: &mut Running<Pipeline>, prefix: &[V]) -> Epochs {
    let mut pass: Vec<Result<V, String>> = prefix.iter().cloned().map(Ok).collect();
    pass.extend(
        run.by_ref()
            .take(ITEM_LIMIT)
            .map(|r| r.map_err(|e| e.to_string())),
    );
    vec![pass]
}

/// Equal epoch by epoch at the pipeline's level (see `support::spec`).
fn same_output(a: &Epochs, b: &Epochs, level: Level) -> bool {
    let outs = |e: &Vec<Result<V, String>>| -> Vec<Out> {
        e.iter()
            .map(|r| match r {
                Ok(v) => Out::Ok(v.clone()),
                Err(e) => Out::Err(e.clone()),
            })
            .collect()
    };
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| compare_epoch(level, &outs(x), &outs(y)).is_ok())
}

/// A loader (or started pipeline, with the items it read) standing at `before`.
enum Twin {
    Loader(Box<Loader<Pipeline>>),
    Running(Running<Pipeline>, Vec<V>),
}

fn stand(spec: &Spec, before: Before, real: &State, check_shape: bool) -> Result<Twin, String> {
    let fail = |e: Error| format!("setting up {before:?}: {e}");
    if let Before::Running(n) = before {
        let mut run = build(spec).start().map_err(fail)?;
        let read = run.by_ref().take(n).collect::<Result<Vec<V>>>();
        return Ok(Twin::Running(run, read.map_err(fail)?));
    }
    let mut loader = Loader::new(build(spec)).check_shape(check_shape);
    match before {
        Before::Fresh | Before::Running(_) => {}
        Before::Loaded => loader.load_state_dict(real).map_err(fail)?,
        Before::MidEpoch(n) => {
            for item in loader.epoch().take(n) {
                item.map_err(fail)?;
            }
        }
        Before::EndOfEpoch => {
            for item in loader.epoch().take(ITEM_LIMIT) {
                item.map_err(fail)?;
            }
        }
        Before::AfterStateDict => {
            loader.state_dict().map_err(fail)?;
        }
    }
    Ok(Twin::Loader(Box::new(loader)))
}

/// The error must name a path inside the state: one that exists in the
/// offered state, or in the original (a deleted key); for a `MustFail`
/// mutation, on the way to the mutated value or below it.
fn check_path(err: &Error, offered: &Value, original: &Value, m: &Mutated) -> Result<(), String> {
    let Some(path) = err.state_path() else {
        return Err(format!("the error names no state path: {err}"));
    };
    let exists = lookup(offered, path).is_some() || lookup(original, path).is_some();
    if !path.starts_with('/') || !exists {
        return Err(format!(
            "the error's path {path:?} is not a path in the state: {err}"
        ));
    }
    if m.verdict == Verdict::MustFail {
        let related = |a: &str, b: &str| a == b || b.starts_with(&format!("{a}/"));
        // The inner nodes of an `Interleave` are built only when the state
        // is applied, so their own checks come after the checksum, which
        // reports the damage first.
        let in_inner_node =
            path == "/checksum" && m.at.contains("/slots/") && m.at.contains("/state");
        if !(path == "/" || in_inner_node || related(path, &m.at) || related(&m.at, path)) {
            return Err(format!(
                "the error's path {path:?} is unrelated to the mutation at {:?}: {err}",
                m.at
            ));
        }
    }
    Ok(())
}

/// Errors while reading that mean a defect: a panic, or a bad-state error
/// (found late) whose path is not in the state that was loaded.
fn check_items(out: &Epochs, loaded: &Value) -> Result<(), String> {
    for item in out.iter().flatten() {
        let Err(e) = item else { continue };
        if e.contains("panicked") {
            return Err(format!("a node panicked after a load: {e}"));
        }
        if let Some(rest) = e.strip_prefix("bad state at ") {
            let path = rest.split(": ").next().unwrap_or(rest);
            if lookup(loaded, path).is_none() {
                return Err(format!(
                    "an error while reading names {path:?}, which is not in the loaded state: {e}"
                ));
            }
        }
    }
    Ok(())
}

#[derive(Clone, Debug)]
struct Case {
    spec: Spec,
    other: Spec,
    cut: f64,
    mutation: Mutation,
    before: Before,
}

fn real_state(spec: &Spec, cut: f64) -> Result<State, String> {
    let mut loader = Loader::new(build(spec));
    let len = loader.epoch().take(ITEM_LIMIT).count();
    let at = ((len as f64) * cut) as usize;
    let mut loader = Loader::new(build(spec));
    let mut epoch = loader.epoch();
    for item in epoch.by_ref().take(at) {
        item.map_err(|e| format!("reading to the cut: {e}"))?;
    }
    let state = epoch.state_dict().map_err(|e| format!("state_dict: {e}"))?;
    State::from_json(&state.to_json().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

/// Whether the pipeline is refused when it starts (the one composition that
/// may be, see `exactly_once.rs`): it has no state to mutate.
fn refused(spec: &Spec) -> bool {
    matches!(
        Loader::new(build(spec)).epoch().next(),
        Some(Err(Error::InvalidPipeline { .. }))
    )
}

fn run_case(case: &Case) -> Result<(), String> {
    if refused(&case.spec) || refused(&case.other) {
        return Ok(());
    }
    let real = real_state(&case.spec, case.cut)?;
    let other = real_state(&case.other, case.cut)?;
    let same_shape =
        real.get::<String>("fingerprint").ok() == other.get::<String>("fingerprint").ok();
    let Some(m) = mutate(&real, &other, same_shape, &case.mutation) else {
        return Ok(());
    };
    let original = real.clone().into_value();
    let level = case.spec.level().unwrap_or(Level::Exact);

    // Text that is not a JSON object fails before any loader sees it.
    let state = match State::from_json(&m.json) {
        Ok(state) => state,
        Err(err) => {
            if err.state_path() != Some("/") {
                return Err(format!("from_json: expected an error at /, got {err}"));
            }
            return Ok(());
        }
    };
    let offered = state.clone().into_value();

    let mut a = stand(&case.spec, case.before, &real, m.check_shape)?;
    let mut b = stand(&case.spec, case.before, &real, m.check_shape)?;
    let loaded = match &mut a {
        Twin::Loader(loader) => loader.load_state_dict(&state),
        Twin::Running(run, _) => match state.child("root") {
            Ok(root) => run.reset(Some(&root)),
            // Nothing to offer `Running::reset`.
            Err(_) => return Ok(()),
        },
    };

    let read = |t: &mut Twin| match t {
        Twin::Loader(l) => read_epochs(l),
        Twin::Running(r, prefix) => read_running(r, prefix),
    };
    match loaded {
        Err(err) => {
            let check = match &a {
                // `Running::reset` is given the root state (as `State::child`
                // of the whole, so paths still start at the top); a mutation
                // elsewhere does not reach it.
                Twin::Running(..) if !m.at.starts_with("/root/") => {
                    let m = Mutated {
                        verdict: Verdict::MayPass,
                        ..m
                    };
                    check_path(&err, &offered, &original, &m)
                }
                _ => check_path(&err, &offered, &original, &m),
            };
            check.map_err(|e| format!("{e}\n  offered state: {}", offered))?;
            let (out_a, out_b) = (read(&mut a), read(&mut b));
            check_items(&out_b, &original)?;
            // Twins that each read part of an epoch whose order varies
            // stand at different places in their sources (other items came
            // first), and nodes that count their passes (samplers under a
            // cycle, a round robin that ends at its first source) may then
            // start the next epoch differently: only the exact level
            // compares there.
            let comparable =
                level == Level::Exact || !matches!(case.before, Before::MidEpoch(n) if n > 0);
            if comparable && !same_output(&out_a, &out_b, level) {
                return Err(format!(
                    "after rejecting the state ({err}), the output differs from the twin's:\n  rejected {out_a:?}\n  twin     {out_b:?}"
                ));
            }
            Ok(())
        }
        Ok(()) => {
            let reaches = match &a {
                Twin::Running(..) => m.at.starts_with("/root/"),
                Twin::Loader(_) => true,
            };
            if reaches && m.verdict != Verdict::MayPass {
                return Err(format!(
                    "a {:?} mutation at {} was accepted:\n  {}",
                    m.verdict, m.at, m.json
                ));
            }
            // Whatever it yields, it must not panic or hang.
            check_items(&read(&mut a), &offered)
        }
    }
}

fn json_strategy() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "root",
        "num_yielded",
        "format",
        "fingerprint",
        "pipeline",
        "source",
        "snapshot",
        "steps_since_snapshot",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop::sample::select(vec!["", "a", "0", "null", "1a0b1f8d3c296650"]).prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..4).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

fn mutation_strategy() -> impl Strategy<Value = Mutation> {
    let num = prop::sample::select(vec![
        Num::Max,
        Num::MaxMinus1,
        Num::TwoPow64,
        Num::Minus1,
        Num::MinI64,
        Num::Half,
        Num::Huge,
        Num::PlusOne,
        Num::MinusOne,
    ]);
    prop_oneof![
        3 => any::<usize>().prop_map(Mutation::DeleteKey),
        2 => (any::<usize>(), json_strategy()).prop_map(|(n, v)| Mutation::UnknownKey(n, v)),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(n, t)| Mutation::WrongType(n, t)),
        4 => (any::<usize>(), num).prop_map(|(n, v)| Mutation::Number(n, v)),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(n, m)| Mutation::Swap(n, m)),
        2 => (any::<usize>(), json_strategy()).prop_map(|(n, v)| Mutation::RandomPart(n, v)),
        1 => json_strategy().prop_map(Mutation::RandomWhole),
        2 => any::<bool>().prop_map(|checked| Mutation::OtherShape { checked }),
        1 => (0.0f64..1.0).prop_map(Mutation::Truncate),
        1 => (0.0f64..1.0, prop::sample::select(b"{}[]\":,0-9x ".to_vec()))
            .prop_map(|(f, b)| Mutation::Byte(f, b)),
    ]
}

fn before_strategy() -> impl Strategy<Value = Before> {
    prop_oneof![
        Just(Before::Fresh),
        Just(Before::Loaded),
        (0usize..8).prop_map(Before::MidEpoch),
        Just(Before::EndOfEpoch),
        Just(Before::AfterStateDict),
        (0usize..8).prop_map(Before::Running),
    ]
}

/// Every shape, without bad records (an error would end the set-up) or
/// jitter (states are the point here).
fn grammar(depth: u32) -> Grammar {
    Grammar {
        failures: false,
        jitter: false,
        ..Grammar::every_shape(depth, 8, 2)
    }
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        spec_strategy(grammar(3)),
        spec_strategy(grammar(2)),
        0.0f64..1.0,
        mutation_strategy(),
        before_strategy(),
    )
        .prop_map(|(spec, other, cut, mutation, before)| Case {
            spec,
            other,
            cut,
            mutation,
            before,
        })
}

proptest! {
    #![proptest_config(config(2048, 0x5eed_0002))]

    #[test]
    fn mutated_states_are_rejected_with_a_path_and_the_loader_carries_on(case in case_strategy()) {
        let c = case.clone();
        let outcome = with_watchdog(Duration::from_secs(60), move || run_case(&c)).and_then(|r| r);
        if let Err(message) = outcome {
            return Err(TestCaseError::fail(message));
        }
    }
}

/// Regression: a state that fails halfway through a fresh loader's pipeline
/// (the left side of a zip restored, the right side rejected) used to leave
/// the left side at the state's epoch, so the first epoch was not the one a
/// fresh loader gives. The loader now puts a fresh root at its start before
/// applying a state, and rolls back to it.
#[test]
fn a_state_that_fails_halfway_leaves_a_fresh_loader_unchanged() {
    let build = || {
        SamplerWrapper::new(RandomSampler::new(6, 3))
            .zip(IterableWrapper::new(0..6u64))
            .map(|(i, x)| (i as u64, x))
    };
    // A real state from epoch 3 of the same pipeline ...
    let mut donor = Loader::new(build());
    for _ in 0..3 {
        assert_eq!(donor.epoch().count(), 6);
    }
    let mut epoch = donor.epoch();
    epoch.next().unwrap().unwrap();
    let real = epoch.state_dict().unwrap();
    // ... whose right side cannot be applied: skipping 99 items fails.
    let mut value = real.into_value();
    value["root"]["source"]["right"]["num_yielded"] = serde_json::json!(99);
    let bad = State::from_value(value).unwrap();

    let mut loader = Loader::new(build());
    let err = loader.load_state_dict(&bad).unwrap_err();
    assert_eq!(
        err.state_path(),
        Some("/root/source/right/num_yielded"),
        "{err}"
    );
    let first: Vec<(u64, u64)> = loader.epoch().collect::<Result<_>>().unwrap();
    let fresh: Vec<(u64, u64)> = Loader::new(build()).epoch().collect::<Result<_>>().unwrap();
    assert_eq!(first, fresh, "the failed load leaked into the first epoch");
}

/// Regression: a state from a pipeline of another shape was rejected with a
/// path built from the description tree under `/root`, which was not in the
/// state when a node nested its source's state under another key than its
/// description said (a `Prefetcher` uses `snapshot`). Description keys are
/// now the state keys, so the path leads to the differing node's state.
#[test]
fn a_state_of_another_shape_is_rejected_at_a_path_in_the_state() {
    let state = Loader::new(
        IterableWrapper::new(0..3u64)
            .map(|x| x + 1)
            .prefetch(2)
            .unwrap(),
    )
    .state_dict()
    .unwrap();
    let mut other = Loader::new(IterableWrapper::new(0..3u64).prefetch(2).unwrap());
    let err = other.load_state_dict(&state).unwrap_err();
    let path = err.state_path().expect("a bad-state error");
    assert_eq!(path, "/root/snapshot", "{err}");
    assert!(
        err.to_string()
            .contains("state is from Mapper, pipeline has IterableWrapper"),
        "{err}"
    );
    let value = state.into_value();
    // The path leads to the differing node's (the Mapper's) state.
    assert_eq!(
        value.pointer(path),
        Some(&json!({"source": {"num_yielded": 0}}))
    );
    assert!(err.to_string().contains("differs at /snapshot"), "{err}");
    // Not a change of world size: no reshard is suggested.
    assert!(err.to_string().contains("check_shape(false)"), "{err}");
    assert!(!err.to_string().contains("resharded"), "{err}");
}

/// Regression: counters restored from a state were incremented with `+= 1`,
/// so a state holding `u64::MAX` made the next item panic (overflow) in the
/// loader, `TryMapper`, `Sharder`, `Cycler` and `ParallelMapper` (whose
/// worker then died without reporting); a generator position near `u64::MAX`
/// (weighted sampler) or beyond it (shuffler) made a later `get_state` fail. Counts that only
/// count now saturate or wrap; positions that index a pass are rejected
/// beyond 2^63 - 1 with their path.
#[test]
fn huge_counters_never_panic() {
    fn check<N: Node>(what: &str, build: impl Fn() -> N, pointer: &str, rejected: bool)
    where
        N::Item: std::fmt::Debug,
    {
        let mut donor = Loader::new(build());
        let mut epoch = donor.epoch();
        epoch.next().unwrap().unwrap();
        let mut value = epoch.state_dict().unwrap().into_value();
        *value
            .pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{what}: no {pointer}")) = json!(u64::MAX);
        let bad = State::from_value(value).unwrap();
        // Edited by hand: the checksum written with the state is stale.
        let mut loader = Loader::new(build()).verify_checksum(false);
        match loader.load_state_dict(&bad) {
            Err(err) => {
                assert!(rejected, "{what}: rejected: {err}");
                assert_eq!(err.state_path(), Some(pointer), "{what}: {err}");
            }
            Ok(()) => assert!(!rejected, "{what}: accepted"),
        }
        for _ in 0..2 {
            for item in loader.epoch().take(50) {
                if let Err(err) = item {
                    assert!(!matches!(err, Error::Panicked { .. }), "{what}: {err}");
                }
            }
        }
    }
    let numbers = || IterableWrapper::new(0..6u64);
    // Where the root counts its items the loader's count must equal it; a
    // filter's root counts nothing, so the loader's own count saturates.
    check(
        "Loader",
        || numbers().filter(|_| true),
        "/num_yielded",
        false,
    );
    check("Loader over a counting root", numbers, "/num_yielded", true);
    check(
        "TryMapper",
        || numbers().try_map(Ok::<u64, std::io::Error>),
        "/root/num_seen",
        false,
    );
    check(
        "Sharder",
        || numbers().shard(1, 2).unwrap(),
        "/root/seen",
        false,
    );
    check(
        "Cycler",
        || numbers().cycle().header(20),
        "/root/source/num_cycles",
        false,
    );
    check(
        "ParallelMapper",
        || numbers().par_map(Ok, ParallelOptions::new(2)).unwrap(),
        "/root/snapshot_index",
        true,
    );
    check(
        "ParallelMapper",
        || {
            numbers()
                .par_map(Ok, ParallelOptions::new(2).snapshot_frequency(100))
                .unwrap()
        },
        "/root/steps_since_snapshot",
        true,
    );
    check(
        "Shuffler",
        || numbers().shuffle(3, 1).unwrap(),
        "/root/rng/word_pos",
        true,
    );
    check(
        "MultiNodeWeightedSampler",
        || {
            MultiNodeWeightedSampler::new([("a", numbers())], [("a", 1.0)])
                .unwrap()
                .seed(3)
        },
        "/root/rng/word_pos",
        true,
    );
}

// ---------------------------------------------------------------------------
// Deep states (issue 12, item 3): 126 or more nested nodes used to write a
// state that `State::from_json` refused ("recursion limit exceeded").

/// The depth of the deep pipeline: `.map` applied this many times.
const DEEP: usize = 10_000;

/// The stack the deep pipeline runs on. Running a pipeline recurses once per
/// nested node in `next`, `reset` and `get_state` (each node calls its
/// source's), about 0.4 KiB per level in the test profile: 10,000 nested
/// maps need about 4 MiB, more than the 2 MiB of a test thread (they
/// overflowed between 4,000 and 6,000 levels there). The states themselves do
/// not recurse to parse, walk, compare, show or drop (checked below on the
/// test thread's own stack); serialising them recurses less per level than
/// the nodes do. 64 MiB leaves room for unoptimised builds.
const DEEP_STACK: usize = 64 << 20;

/// `IterableWrapper(0..100)` under `depth` boxed `.map(|x| x + 1)`.
fn deep_pipeline(depth: usize) -> Box<dyn Node<Item = u64>> {
    let mut node = IterableWrapper::new(0..100u64).boxed();
    for _ in 0..depth {
        node = node.map(|x| x + 1).boxed();
    }
    node
}

/// Runs `body` on a thread with a `stack`-byte stack, passing its panic on.
fn on_stack<T: Send + 'static>(stack: usize, body: impl FnOnce() -> T + Send + 'static) -> T {
    let handle = std::thread::Builder::new()
        .name("deep-pipeline".to_owned())
        .stack_size(stack)
        .spawn(body)
        .expect("start the deep-pipeline thread");
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Any state the library writes, it reads: a pipeline of 10,000 nested maps
/// saves (`state_dict`), serialises (`to_json`), parses back (`from_json`)
/// and loads into a freshly built pipeline, which resumes exactly; a
/// pipeline one level shallower rejects it with a path, and carries on.
#[test]
fn a_state_10000_levels_deep_saves_parses_and_loads() {
    on_stack(DEEP_STACK, || {
        let mut loader = Loader::new(deep_pipeline(DEEP));
        let mut epoch = loader.epoch();
        let head: Vec<u64> = epoch.by_ref().take(5).collect::<Result<_>>().unwrap();
        assert_eq!(head, (0..5).map(|x| x + DEEP as u64).collect::<Vec<_>>());
        let state = epoch.state_dict().unwrap();
        let rest: Vec<u64> = epoch.collect::<Result<_>>().unwrap();
        assert_eq!(rest.len(), 95);

        let json = state.to_json().unwrap();
        let parsed = State::from_json(&json).expect("a state the library wrote parses back");
        assert_eq!(parsed, state);
        let mut source = parsed.child("root").unwrap();
        for _ in 0..DEEP {
            source = source.child("source").unwrap();
        }
        assert_eq!(source.get::<u64>("num_yielded").unwrap(), 5);
        assert_eq!(source.path().len(), "/root".len() + DEEP * "/source".len());

        let mut resumed = Loader::new(deep_pipeline(DEEP));
        resumed.load_state_dict(&parsed).unwrap();
        let resumed_rest: Vec<u64> = resumed.epoch().collect::<Result<_>>().unwrap();
        assert_eq!(resumed_rest, rest);

        let mut shallower = Loader::new(deep_pipeline(DEEP - 1)).check_shape(false);
        let err = shallower.load_state_dict(&parsed).unwrap_err();
        let path = err.state_path().expect("a bad-state error");
        assert!(
            path.ends_with("/source/source"),
            "…{}",
            &path[path.len().saturating_sub(40)..]
        );
        let all: Vec<u64> = shallower.epoch().collect::<Result<_>>().unwrap();
        assert_eq!(all.len(), 100);
    });
}

/// The JSON of a real loader state whose root state is nested `depth`
/// levels deep under `source` keys (what a pipeline that deep writes),
/// built as text without running such a pipeline.
fn deep_root_json(depth: usize) -> String {
    let real = Loader::new(IterableWrapper::new(0..10u64).map(|x| x + 1))
        .state_dict()
        .unwrap()
        .to_json()
        .unwrap();
    let mut root = "{\"source\":".repeat(depth);
    root.push_str("{\"num_yielded\":0}");
    root.push_str(&"}".repeat(depth));
    let at = real
        .find("{\"source\":{\"num_yielded\":0}}")
        .expect("the real root state");
    format!(
        "{}{root}{}",
        &real[..at],
        &real[at + "{\"source\":{\"num_yielded\":0}}".len()..]
    )
}

/// On the test thread's own (2 MiB) stack: a state 10,000 levels deep (and
/// one 100,000 deep) parses, compares, shows, walks and drops without
/// recursion, and offered to a shallow pipeline is an `Err` at the path
/// where the pipeline ends; the loader carries on.
#[test]
fn deep_states_are_parsed_and_refused_without_recursion() {
    for depth in [DEEP, 10 * DEEP] {
        let json = deep_root_json(depth);
        let state = State::from_json(&json).unwrap();
        assert_eq!(state, State::from_json(&json).unwrap());
        assert_eq!(state.to_string(), json);
        assert!(format!("{state:?}").starts_with("State({\"root\":{\"source\":{\"source\":"));
        let mut loader = Loader::new(IterableWrapper::new(0..10u64).map(|x| x + 1));
        let err = loader.load_state_dict(&state).unwrap_err();
        assert_eq!(err.state_path(), Some("/root/source/source"), "{err}");
        let all: Vec<u64> = loader.epoch().collect::<Result<_>>().unwrap();
        assert_eq!(all, (1..=10).collect::<Vec<_>>());
    }
}

/// Hostile input: nesting beyond `State::MAX_DEPTH` objects, or arrays
/// deeper than serde_json's 128 levels, is a `BadState` at `/`; no crash, no
/// hang, and no memory spent building what is refused.
#[test]
fn nesting_beyond_the_bounds_is_refused() {
    let depth = State::MAX_DEPTH + 1;
    let mut objects = "{\"a\":".repeat(depth - 1);
    objects.push_str("{}");
    objects.push_str(&"}".repeat(depth - 1));
    let err = State::from_json(&objects).unwrap_err();
    assert_eq!(err.state_path(), Some("/"), "{err}");
    assert!(
        err.to_string()
            .contains("nested deeper than 1000000 levels"),
        "{err}"
    );

    let arrays = format!("{{\"a\":{}1{}}}", "[".repeat(depth), "]".repeat(depth));
    let err = State::from_json(&arrays).unwrap_err();
    assert_eq!(err.state_path(), Some("/"), "{err}");
    assert!(
        err.to_string().contains("recursion limit exceeded"),
        "{err}"
    );
    let unclosed = format!("{{\"a\":{}", "[".repeat(depth));
    assert!(State::from_json(&unclosed).unwrap_err().is_bad_state());
    let unclosed = "{\"a\":".repeat(depth);
    assert!(State::from_json(&unclosed).unwrap_err().is_bad_state());
}
