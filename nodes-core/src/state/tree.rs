//! The walks over a state's tree that must not recurse, however deep it is:
//! building it from a JSON object, turning it back into JSON, comparing,
//! measuring and dropping it. Each keeps its own stack on the heap.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{Body, Entry, Key};

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
            None => match open.pop() {
                Some(mut parent) => {
                    let (key, child, _) = current;
                    parent.1.push(key, Entry::Child(Arc::new(child)));
                    current = parent;
                }
                None => return current.1,
            },
        }
    }
}

/// The body as a JSON value (nested states first, then the objects that
/// hold them).
pub(super) fn to_value(body: &Body) -> Value {
    type Open<'a> = (
        &'a Body,
        std::slice::Iter<'a, (Key, Entry)>,
        Map<String, Value>,
    );
    let mut stack: Vec<(Open<'_>, Option<&str>)> =
        vec![((body, body.entries.iter(), Map::new()), None)];
    loop {
        let ((owner, entries, members), _) = stack.last_mut().expect("the root is popped last");
        let owner: &Body = owner;
        match entries.next() {
            Some((key, Entry::Child(child))) => {
                stack.push(((child, child.entries.iter(), Map::new()), Some(key)));
            }
            Some((key, entry)) => {
                members.insert(key.to_string(), entry.leaf(owner).into_owned());
            }
            None => {
                let ((_, _, members), key) = stack.pop().expect("checked above");
                let value = Value::Object(members);
                match (stack.last_mut(), key) {
                    (Some(((_, _, parent), _)), Some(key)) => {
                        parent.insert(key.to_owned(), value);
                    }
                    _ => return value,
                }
            }
        }
    }
}

/// Writes the body as compact JSON.
pub(super) fn write_json(body: &Body, out: &mut impl fmt::Write) -> fmt::Result {
    fn json(out: &mut impl fmt::Write, value: &(impl Serialize + ?Sized)) -> fmt::Result {
        out.write_str(&serde_json::to_string(value).map_err(|_| fmt::Error)?)
    }
    let mut stack = vec![(body, body.entries.iter())];
    out.write_char('{')?;
    let mut first = true;
    while let Some((owner, top)) = stack.last_mut() {
        let owner: &Body = owner;
        let Some((key, entry)) = top.next() else {
            stack.pop();
            out.write_char('}')?;
            first = false;
            continue;
        };
        if !first {
            out.write_char(',')?;
        }
        json(out, key.as_ref())?;
        out.write_char(':')?;
        first = false;
        match entry {
            Entry::Child(child) => {
                out.write_char('{')?;
                stack.push((child, child.entries.iter()));
                first = true;
            }
            entry => json(out, &entry.leaf(owner))?,
        }
    }
    Ok(())
}

/// Whether two bodies hold the same content, whatever the order of keys.
pub(super) fn eq(a: &Arc<Body>, b: &Arc<Body>) -> bool {
    let mut pending = vec![(Arc::clone(a), Arc::clone(b))];
    while let Some((a, b)) = pending.pop() {
        if Arc::ptr_eq(&a, &b) {
            continue;
        }
        if a.entries.len() != b.entries.len() {
            return false;
        }
        for (i, (key, x)) in a.entries.iter().enumerate() {
            let y = match b.entries.get(i) {
                Some((k, y)) if k == key => y,
                _ => match b.get(key) {
                    Some(y) => y,
                    None => return false,
                },
            };
            let (x, y) = (plain(x), plain(y));
            let equal = match (&*x, &*y) {
                (Entry::Child(x), Entry::Child(y)) => {
                    pending.push((Arc::clone(x), Arc::clone(y)));
                    true
                }
                (Entry::Child(_), _) | (_, Entry::Child(_)) => false,
                // Equal contents have equal checksums.
                (Entry::Checksum, Entry::Checksum) => true,
                (x, y) => x.leaf(&a) == y.leaf(&b),
            };
            if !equal {
                return false;
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
pub(super) fn depth(body: &Arc<Body>) -> usize {
    let mut depth = 0;
    let mut level = vec![Arc::clone(body)];
    while !level.is_empty() {
        depth += 1;
        let below = level.iter().flat_map(|b| b.entries.iter());
        level = below
            .filter_map(|(_, e)| match &*plain(e) {
                Entry::Child(c) => Some(Arc::clone(c)),
                _ => None,
            })
            .collect();
    }
    depth
}

/// Drops a JSON value without recursion (serde_json's own drop recurses
/// once per level of nesting).
pub(super) fn dismantle(value: Value) {
    let nested = |v: &Value| matches!(v, Value::Array(_) | Value::Object(_));
    let shallow = match &value {
        Value::Array(items) => !items.iter().any(nested),
        Value::Object(map) => !map.values().any(nested),
        _ => true,
    };
    if shallow {
        return;
    }
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items.into_iter().filter(nested)),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v).filter(nested)),
            _ => {}
        }
    }
}

/// How many levels an entry nests below the state that holds it, as
/// [`Body::height`] counts them.
#[inline]
pub(super) fn height_of(entry: &Entry) -> u32 {
    let nested = |v: &Value| matches!(v, Value::Array(_) | Value::Object(_));
    match entry {
        Entry::Child(child) => child.height.saturating_add(1),
        Entry::Array(v) if v.as_array().is_some_and(|items| items.iter().any(nested)) => u32::MAX,
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
        let mut entries = std::mem::take(&mut self.entries);
        let mut pending = Vec::new();
        loop {
            for (_, entry) in entries.drain(..) {
                match entry {
                    Entry::Child(child) => {
                        if let Some(mut child) = Arc::into_inner(child) {
                            pending.push(std::mem::take(&mut child.entries));
                        }
                    }
                    Entry::Array(value) => dismantle(*value),
                    _ => {}
                }
            }
            match pending.pop() {
                Some(next) => entries = next,
                None => return,
            }
        }
    }
}
