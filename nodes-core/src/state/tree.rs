//! The walks over a state's tree that must not recurse, however deep it is:
//! building it from a JSON object, turning it back into JSON, comparing,
//! measuring and dropping it. Each keeps its own stack on the heap.

use std::borrow::Cow;
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{Body, Entry, Key, Shared};

/// The entries of a JSON object, nested objects becoming nested states.
pub(super) fn body_of_map(map: Map<String, Value>) -> Body {
    // The objects being converted, innermost last, each with its key in its
    // parent and the members still to convert.
    let mut open: Vec<(Key, Body, serde_json::map::IntoIter)> = Vec::new();
    let mut current = (Key::Borrowed(""), Body::default(), map.into_iter());
    loop {
        match current.2.next() {
            Some((key, Value::Object(inner))) => {
                open.push(current);
                current = (Key::Owned(key), Body::default(), inner.into_iter());
            }
            // The keys of a JSON object are distinct: no lookup needed.
            Some((key, value)) => current.1.push(Key::Owned(key), Entry::of(value)),
            None => {
                let Some(parent) = open.pop() else {
                    return current.1;
                };
                let (key, child, _) = std::mem::replace(&mut current, parent);
                current.1.push(key, Entry::Child(Shared::new(child)));
            }
        }
    }
}

/// The body as a JSON value (nested states first, then the objects that
/// hold them).
pub(super) fn to_value(body: &Body) -> Value {
    // The objects being built, innermost last, each with its key in its parent.
    let mut stack = vec![(body, body.iter(), Map::new(), "")];
    loop {
        let (owner, entries, members, _) = stack.last_mut().expect("the root is popped last");
        match entries.next() {
            Some((key, Entry::Child(child))) => stack.push((child, child.iter(), Map::new(), key)),
            Some((key, entry)) => {
                members.insert(key.to_string(), entry.leaf(owner).into_owned());
            }
            None => {
                let (_, _, members, key) = stack.pop().expect("checked above");
                let Some((.., parent, _)) = stack.last_mut() else {
                    return Value::Object(members);
                };
                parent.insert(key.to_owned(), Value::Object(members));
            }
        }
    }
}

/// Writes the body as compact JSON.
pub(super) fn write_json(body: &Body, out: &mut impl fmt::Write) -> fmt::Result {
    fn json(value: &(impl Serialize + ?Sized)) -> Result<String, fmt::Error> {
        serde_json::to_string(value).map_err(|_| fmt::Error)
    }
    out.write_char('{')?;
    let mut stack = vec![(body, body.iter())];
    // Whether the next member is the first of its object.
    let mut first = true;
    while let Some((owner, entries)) = stack.last_mut() {
        let owner: &Body = owner;
        let Some((key, entry)) = entries.next() else {
            stack.pop();
            first = false;
            out.write_char('}')?;
            continue;
        };
        write!(out, "{}{}:", if first { "" } else { "," }, json(&**key)?)?;
        first = matches!(entry, Entry::Child(_));
        match entry {
            Entry::Child(child) => {
                out.write_char('{')?;
                stack.push((child, child.iter()));
            }
            entry => out.write_str(&json(&entry.leaf(owner))?)?,
        }
    }
    Ok(())
}

/// Whether two bodies hold the same content, whatever the order of keys.
pub(super) fn eq(a: &Shared<Body>, b: &Shared<Body>) -> bool {
    let mut pending = vec![(Shared::clone(a), Shared::clone(b))];
    while let Some((a, b)) = pending.pop() {
        if Shared::ptr_eq(&a, &b) {
            continue;
        } else if a.len() != b.len() {
            return false;
        }
        for (i, (key, x)) in a.iter().enumerate() {
            let same_place = b.at(i).filter(|(k, _)| k == key);
            let Some(y) = same_place.map(|(_, y)| y).or_else(|| b.get(key)) else {
                return false;
            };
            let (x, y) = (plain(x), plain(y));
            match (&*x, &*y) {
                (Entry::Child(x), Entry::Child(y)) => {
                    pending.push((Shared::clone(x), Shared::clone(y)))
                }
                // Equal contents have equal checksums.
                (Entry::Checksum, Entry::Checksum) => {}
                (Entry::Child(_), _) | (_, Entry::Child(_)) => return false,
                (x, y) if x.leaf(&a) != y.leaf(&b) => return false,
                _ => {}
            }
        }
    }
    true
}

/// A deferred entry as the JSON it stands for (to compare it).
fn plain(entry: &Entry) -> Cow<'_, Entry> {
    match entry {
        Entry::Deferred(d) => Cow::Owned(Entry::of(d.json().clone())),
        e => Cow::Borrowed(e),
    }
}

/// How many levels of objects the body holds (1 for a flat one); a
/// deferred entry counts as the JSON it stands for.
pub(super) fn depth(body: &Shared<Body>) -> usize {
    let mut depth = 0;
    let mut level = vec![Shared::clone(body)];
    while !level.is_empty() {
        depth += 1;
        let below = level.iter().flat_map(|b| b.iter());
        level = below
            .filter_map(|(_, e)| match &*plain(e) {
                Entry::Child(c) => Some(Shared::clone(c)),
                _ => None,
            })
            .collect();
    }
    depth
}

/// Drops a JSON value without recursion (serde_json's own drop recurses
/// once per level of nesting).
pub(super) fn dismantle(value: Value) {
    let mut stack: Vec<Value> = std::iter::once(value).filter(nests).collect();
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items.into_iter().filter(nests)),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v).filter(nests)),
            _ => {}
        }
    }
}

/// Whether a JSON value holds others.
fn nests(value: &Value) -> bool {
    matches!(value, Value::Array(_) | Value::Object(_))
}

/// How many levels an entry nests below the state that holds it, as
/// [`Body::height`] counts them.
#[inline]
pub(super) fn height_of(entry: &Entry) -> u32 {
    match entry {
        Entry::Child(child) => child.height.saturating_add(1),
        Entry::Array(v) if v.as_array().is_some_and(|items| items.iter().any(nests)) => u32::MAX,
        _ => 0,
    }
}

/// States nested at most this many levels are dropped by plain recursion.
const SHALLOW: u32 = 64;

/// Drops a deep state's nested states nobody else holds, and its nested
/// values, through a stack of their entries; a shallow one (every
/// pipeline's) the usual way.
impl Drop for Body {
    fn drop(&mut self) {
        if self.height < SHALLOW {
            return;
        }
        let mut pending = vec![std::mem::take(&mut self.entries)];
        while let Some(entries) = pending.pop() {
            for (_, entry) in entries {
                match entry {
                    Entry::Child(child) => pending.extend(
                        Shared::try_unwrap(child)
                            .ok()
                            .map(|mut child| std::mem::take(&mut child.entries)),
                    ),
                    Entry::Array(value) => dismantle(*value),
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use serde_json::{Value, json};

    use super::super::{CHECKSUM_KEY, Entry, Fields, Shared, State};

    /// The state of a node with a counter, a flag, a child and a version,
    /// built by inserts.
    fn inserted() -> State {
        let mut state = State::new().with("n", 3u64).unwrap();
        state.insert("on", true).unwrap();
        state.insert_child("source", State::new().with("k", -1).unwrap());
        state.set_version(2).unwrap();
        state
    }

    #[test]
    fn fields_build_the_state_inserts_build() {
        let child = Fields::build(0, |child| child.field("k", &-1)).unwrap();
        let built = Fields::build(2, |fields| {
            fields.field("n", &3u64)?;
            fields.field("on", &true)?;
            fields.child("source", child);
            Ok(())
        })
        .unwrap();
        assert_eq!(built, inserted());
        assert_eq!(built.to_json().unwrap(), inserted().to_json().unwrap());
        assert_eq!(
            built.to_json().unwrap(),
            r#"{"n":3,"on":true,"source":{"k":-1},"version":2}"#
        );
        assert_eq!(built.child("source").unwrap().get::<i64>("k").unwrap(), -1);
    }

    #[test]
    fn a_field_that_cannot_be_serialised_is_an_error_at_its_key() {
        let bad = std::collections::BTreeMap::from([((1u8, 2u8), 3u8)]);
        let err = Fields::build(0, |fields| fields.field("bad", &bad)).unwrap_err();
        assert_eq!(err.state_path(), Some("/bad"), "{err}");
        assert!(err.to_string().contains("cannot serialise"), "{err}");
    }

    #[test]
    fn every_kind_of_value_reads_back_as_the_json_it_was_inserted_as() {
        let values = [
            json!(null),
            json!(false),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-0.0),
            json!(1.5),
            json!(""),
            json!("text"),
            json!([]),
            json!([1, [2, [3]], {"a": null}]),
            json!({}),
            json!({"a": {"b": [1]}}),
        ];
        for value in values {
            let state = State::new().with("v", &value).unwrap();
            assert_eq!(state.value("v").unwrap(), value, "{value}");
            assert_eq!(state.get::<Value>("v").unwrap(), value, "{value}");
            assert_eq!(state.to_value(), json!({ "v": value }), "{value}");
            let back = State::from_json(&state.to_json().unwrap()).unwrap();
            assert_eq!(back, state, "{value}");
            assert_eq!(format!("{state}"), state.to_json().unwrap(), "{value}");
        }
        // A non-finite float is written as null, as serde_json writes it.
        let nan = State::new().with("v", f64::NAN).unwrap();
        assert_eq!(nan.value("v").unwrap(), Value::Null);
    }

    #[test]
    fn objects_are_nested_states_and_other_values_are_not() {
        let state = State::new()
            .with("o", json!({}))
            .unwrap()
            .with("a", json!([]))
            .unwrap();
        assert!(matches!(state.body.entries[0].1, Entry::Child(_)));
        assert!(state.child("o").unwrap().is_empty());
        let err = state.child("a").unwrap_err();
        assert!(
            err.to_string().contains("found an array of 0 values"),
            "{err}"
        );
        assert_eq!(state.depth(), 2);
    }

    #[test]
    fn height_counts_nested_states_and_values_that_nest() {
        let leaf = State::new().with("n", 1).unwrap();
        let mut middle = State::new();
        middle.insert_child("leaf", leaf);
        let mut top = State::new();
        top.insert_child("middle", middle);
        assert_eq!(top.body.height, 2);
        let flat = State::new().with("list", [1, 2]).unwrap();
        assert_eq!(flat.body.height, 0);
        let nesting = State::new().with("list", json!([[1]])).unwrap();
        assert_eq!(nesting.body.height, u32::MAX);
    }

    /// Built by `Fields` (as nodes build theirs), a chain deeper than any
    /// stack drops on a small one.
    #[test]
    fn a_deep_state_built_in_place_drops_without_recursion() {
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let mut state = Fields::build(0, |_| Ok(())).unwrap();
                for _ in 0..200_000 {
                    let child = state;
                    state = Fields::build(0, |parent| {
                        parent.child("source", child);
                        Ok(())
                    })
                    .unwrap();
                }
                assert_eq!(state.body.height, 200_000);
                drop(state);
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn a_wide_state_keeps_its_index_through_inserts_and_replacements() {
        let mut state = State::new();
        for i in 0..100 {
            state.insert(format!("k{i}"), i).unwrap();
        }
        assert_eq!(state.get::<u64>("k40").unwrap(), 40);
        assert!(state.body.index.get().is_some(), "built by the lookup");
        for i in 100..200 {
            state.insert(format!("k{i}"), i).unwrap();
        }
        state.insert("k7", 700).unwrap();
        assert_eq!(state.len(), 200);
        assert_eq!(state.keys().nth(7), Some("k7"));
        for i in (0..200).step_by(13) {
            let expected = if i == 7 { 700 } else { i };
            assert_eq!(state.get::<u64>(&format!("k{i}")).unwrap(), expected);
        }
        assert!(!state.contains("k200"));
    }

    #[test]
    fn work_counts_lookups_copies_and_opened_states() {
        let state = inserted();
        let work = |s: &State| s.body.work.load(Ordering::Relaxed);
        let before = work(&state);
        state.get::<u64>("n").unwrap();
        // A scan of the four keys.
        assert_eq!(work(&state), before + 4);
        state.child("source").unwrap();
        assert_eq!(work(&state), before + 4 + 4 + 1);
        // A copy on the first write counts the keys it copies, in the copy.
        let mut copy = state.clone();
        copy.insert("n", 4u64).unwrap();
        assert_eq!(work(&copy), 4 + 4);
        assert_eq!(work(&state), before + 9);
        assert!(state.work() > work(&state), "the nested state counts too");
    }

    #[test]
    fn a_checksum_slot_reads_as_the_checksum_it_stands_for() {
        let mut state = inserted();
        state.insert_checksum();
        let checksum = state.checksum();
        assert_eq!(state.get::<String>(CHECKSUM_KEY).unwrap(), checksum);
        assert_eq!(state.to_value()[CHECKSUM_KEY], json!(checksum));
        let err = state.child(CHECKSUM_KEY).unwrap_err();
        assert!(err.to_string().contains("found string"), "{err}");
        let back = State::from_json(&state.to_json().unwrap()).unwrap();
        assert_eq!(back, state);
        assert!(Shared::ptr_eq(&state.body, &state.clone().body));
    }
}
