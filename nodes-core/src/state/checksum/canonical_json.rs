//! `fnv1a64`: 64-bit FNV-1a over the canonical JSON of a state, the state
//! without its own checksum key written as compact JSON with the keys of
//! every object in byte order (serde_json's number and string forms).
//!
//! The checksum of format 3 states written before `mx64`: verified, no
//! longer written. One multiply per byte, and since each step is a
//! bijection of the hash state, two contents of the same length that differ
//! in one byte never collide.
//!
//! The walk over the content is iterative (an explicit stack), so a deeply
//! nested state costs heap, not call stack.

use std::io;

use serde_json::Value;

use super::super::{Body, EMPTY_ARRAY, Entry, Key, Scalar};
use super::CHECKSUM_KEY;

/// 64-bit FNV-1a over everything written to it.
struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(Self::PRIME);
        }
    }

    /// Writes a JSON string in serde_json's compact form. Most strings need
    /// no escape: they are hashed in the same pass that looks for one, and
    /// only a string that needs one is hashed again, escaped, from the
    /// state before it.
    fn string(&mut self, text: &str) {
        let before = self.0;
        let mut hash = (before ^ u64::from(b'"')).wrapping_mul(Self::PRIME);
        for &b in text.as_bytes() {
            if b < 0x20 || b == b'"' || b == b'\\' {
                self.0 = before;
                self.scalar(text);
                return;
            }
            hash = (hash ^ u64::from(b)).wrapping_mul(Self::PRIME);
        }
        self.0 = (hash ^ u64::from(b'"')).wrapping_mul(Self::PRIME);
    }

    /// Writes a JSON scalar in serde_json's compact form: integers, booleans
    /// and null directly, floats and escaped strings through serde_json.
    fn value_scalar(&mut self, value: &Value) {
        match value {
            Value::Null => self.bytes(b"null"),
            Value::Bool(true) => self.bytes(b"true"),
            Value::Bool(false) => self.bytes(b"false"),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    self.integer(u, false);
                } else if let Some(i) = n.as_i64() {
                    self.integer(i.unsigned_abs(), true);
                } else {
                    self.scalar(n);
                }
            }
            other => self.scalar(other),
        }
    }

    /// Writes an integer's decimal digits (as serde_json writes them).
    fn integer(&mut self, magnitude: u64, negative: bool) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = magnitude;
        loop {
            at -= 1;
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        if negative {
            self.bytes(b"-");
        }
        self.bytes(&digits[at..]);
    }

    /// Writes a JSON scalar (or string) in serde_json's compact form.
    fn scalar<T: serde::Serialize + ?Sized>(&mut self, value: &T) {
        // Writing into the hash cannot fail, and a `Value` scalar or a string
        // always serialises (JSON numbers are finite).
        let written = serde_json::to_writer(&mut *self, value);
        debug_assert!(written.is_ok(), "canonical JSON: {written:?}");
    }
}

impl io::Write for Fnv1a {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// States with at most this many keys are put in byte order on the stack.
const SMALL: usize = 8;

/// A value to write into the canonical content.
enum Item<'a> {
    Str(&'a str),
    /// A nested loader state's own checksum.
    Owned(String),
    Value(&'a Value),
    /// An inline entry's value.
    Scalar(Value),
    State(&'a Body),
}

/// An object or array being written: what is left of its members. Scalar
/// members are hashed as they are reached; only a nested object or array
/// adds a frame, so the walk costs one step per member.
enum Frame<'a> {
    /// A state whose keys are in byte order (written as they are stored);
    /// `top` leaves its checksum key out.
    Body {
        owner: &'a Body,
        entries: std::slice::Iter<'a, (Key, Entry)>,
        top: bool,
        first: bool,
    },
    /// A small state whose keys are out of byte order (a pipeline
    /// description's `name`, `params`, `children`): its entries visited
    /// through their positions, sorted on the stack.
    Permuted {
        owner: &'a Body,
        order: [u8; SMALL],
        len: u8,
        at: u8,
        first: bool,
    },
    /// Members sorted into byte order.
    Sorted {
        members: std::vec::IntoIter<(&'a str, Item<'a>)>,
        first: bool,
    },
    Array {
        items: std::slice::Iter<'a, Value>,
        first: bool,
    },
}

impl<'a> Frame<'a> {
    /// The next member: whether it is the first, its key (none in an
    /// array), and its value; `None` at the end.
    fn next(&mut self) -> Option<(bool, Option<&'a str>, Item<'a>)> {
        match self {
            Frame::Body {
                owner,
                entries,
                top,
                first,
            } => {
                let (key, entry) = entries.find(|(key, _)| !(*top && key == CHECKSUM_KEY))?;
                Some((
                    std::mem::take(first),
                    Some(key.as_ref()),
                    entry_item(owner, entry),
                ))
            }
            Frame::Permuted {
                owner,
                order,
                len,
                at,
                first,
            } => {
                if *at == *len {
                    return None;
                }
                let (key, entry) = &owner.entries[usize::from(order[usize::from(*at)])];
                *at += 1;
                Some((
                    std::mem::take(first),
                    Some(key.as_ref()),
                    entry_item(owner, entry),
                ))
            }
            Frame::Sorted { members, first } => {
                let (key, item) = members.next()?;
                Some((std::mem::take(first), Some(key), item))
            }
            Frame::Array { items, first } => {
                let item = items.next()?;
                Some((std::mem::take(first), None, Item::Value(item)))
            }
        }
    }

    /// The frame for a state: its entries as they are when their keys are
    /// already in byte order (a wide sampler's sources), else sorted.
    fn of_body(owner: &'a Body, top: bool) -> Self {
        let counted = |key: &str| !(top && key == CHECKSUM_KEY);
        let mut keys = owner
            .entries
            .iter()
            .map(|(k, _)| k.as_ref())
            .filter(|k| counted(k));
        let sorted = keys.next().is_none_or(|first| {
            keys.try_fold(first, |previous, key| (previous < key).then_some(key))
                .is_some()
        });
        if sorted {
            return Frame::Body {
                owner,
                entries: owner.entries.iter(),
                top,
                first: true,
            };
        }
        if owner.entries.len() <= SMALL {
            let mut order = [0u8; SMALL];
            let mut len = 0;
            for (i, (key, _)) in owner.entries.iter().enumerate() {
                if !counted(key) {
                    continue;
                }
                // Insertion sort: a handful of keys.
                let mut at = len;
                while at > 0 && owner.entries[usize::from(order[at - 1])].0.as_ref() > key.as_ref()
                {
                    order[at] = order[at - 1];
                    at -= 1;
                }
                order[at] = i as u8;
                len += 1;
            }
            return Frame::Permuted {
                owner,
                order,
                len: len as u8,
                at: 0,
                first: true,
            };
        }
        let members = owner
            .entries
            .iter()
            .filter(|(key, _)| counted(key))
            .map(|(key, entry)| (key.as_ref(), entry_item(owner, entry)))
            .collect();
        Frame::sorted(members)
    }

    fn sorted(mut members: Vec<(&'a str, Item<'a>)>) -> Self {
        members.sort_unstable_by(|a, b| a.0.cmp(b.0));
        Frame::Sorted {
            members: members.into_iter(),
            first: true,
        }
    }

    /// The byte that closes this frame.
    fn close(&self) -> &'static [u8] {
        match self {
            Frame::Array { .. } => b"]",
            _ => b"}",
        }
    }
}

/// What to write for `entry`, an entry of `owner`.
fn entry_item<'a>(owner: &'a Body, entry: &'a Entry) -> Item<'a> {
    match entry {
        // Containers open a frame, even an empty one.
        Entry::Scalar(Scalar::EmptyArray) => Item::Value(&EMPTY_ARRAY),
        Entry::Scalar(scalar) => Item::Scalar(scalar.to_value()),
        Entry::Json(value) => Item::Value(value),
        // Hashed as the JSON it stands for (converted once, then kept).
        Entry::Deferred(deferred) => Item::Value(deferred.json()),
        Entry::Child(child) => Item::State(child),
        Entry::Shared(text) => Item::Str(text),
        Entry::Checksum => Item::Owned(owner.content_checksum()),
    }
}

/// The 64-bit FNV-1a hash of `body`'s canonical JSON (without its
/// top-level checksum key).
pub(super) fn digest(body: &Body) -> u64 {
    let mut hash = Fnv1a(Fnv1a::OFFSET_BASIS);
    hash.bytes(b"{");
    let mut open = vec![Frame::of_body(body, true)];
    while let Some(frame) = open.last_mut() {
        let Some((first, key, item)) = frame.next() else {
            hash.bytes(frame.close());
            open.pop();
            continue;
        };
        super::super::count_work(1);
        if !first {
            hash.bytes(b",");
        }
        if let Some(key) = key {
            hash.string(key);
            hash.bytes(b":");
        }
        match item {
            Item::Str(text) => hash.string(text),
            Item::Owned(text) => hash.string(&text),
            Item::Value(Value::String(text)) => hash.string(text),
            Item::Value(Value::Object(map)) => {
                hash.bytes(b"{");
                let members = map.iter().map(|(k, v)| (k.as_str(), Item::Value(v)));
                open.push(Frame::sorted(members.collect()));
            }
            Item::Value(Value::Array(items)) => {
                hash.bytes(b"[");
                open.push(Frame::Array {
                    items: items.iter(),
                    first: true,
                });
            }
            Item::Value(scalar) => hash.value_scalar(scalar),
            Item::Scalar(scalar) => hash.value_scalar(&scalar),
            Item::State(body) => {
                hash.bytes(b"{");
                open.push(Frame::of_body(body, false));
            }
        }
    }
    hash.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::State;

    fn checksum_of(json: &str) -> u64 {
        digest(State::from_json(json).unwrap().body())
    }

    fn reference(bytes: &[u8]) -> u64 {
        let mut h = Fnv1a(Fnv1a::OFFSET_BASIS);
        h.bytes(bytes);
        h.0
    }

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(reference(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(reference(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(reference(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_canonical_content_is_compact_json_with_sorted_keys() {
        let expected = reference(br#"{"a":[1,{"x":null,"y":"\n"}],"b":{"c":-2,"d":0.5}}"#);
        // Key order, whitespace, and the checksum key itself do not count.
        let json = r#"{ "b": {"d": 0.5, "c": -2}, "checksum": "anything",
                        "a": [1, {"y": "\u000a", "x": null}] }"#;
        assert_eq!(checksum_of(json), expected);
        // A state built in memory, with a child and a slot, gives the same.
        assert_eq!(digest(super::super::sample_state().body()), expected);
    }

    #[test]
    fn small_and_large_states_out_of_order_hash_as_sorted_json() {
        let reference = |json: &str| reference(json.as_bytes());
        // Sizes on both sides of `SMALL`, keys written in reverse order,
        // with integers at the edges of u64 and i64 and an escaped string.
        for n in [2, SMALL, SMALL + 1, 40] {
            let keys: Vec<String> = (0..n).map(|i| format!("k{i:03}")).collect();
            let value = |i: usize| match i % 4 {
                0 => serde_json::json!(u64::MAX),
                1 => serde_json::json!(i64::MIN),
                2 => serde_json::json!("tab\there"),
                _ => serde_json::json!(-0.25),
            };
            let mut state = State::new();
            for (i, key) in keys.iter().enumerate().rev() {
                state.insert(key.clone(), value(i)).unwrap();
            }
            let sorted: Vec<String> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| format!("\"{k}\":{}", value(i)))
                .collect();
            let expected = reference(&format!("{{{}}}", sorted.join(",")));
            assert_eq!(digest(state.body()), expected, "{n} keys");
            let nested = State::new().with("x", 1).unwrap();
            let mut outer = State::new();
            outer.insert_child("z", state.clone());
            outer.insert_child("a", nested);
            let expected = reference(&format!(
                "{{\"a\":{{\"x\":1}},\"z\":{{{}}}}}",
                sorted.join(",")
            ));
            assert_eq!(digest(outer.body()), expected, "{n} keys, nested");
        }
    }

    #[test]
    fn a_changed_value_changes_the_checksum() {
        let base = checksum_of(r#"{"a":{"n":10},"b":"x"}"#);
        for other in [
            r#"{"a":{"n":11},"b":"x"}"#,
            r#"{"a":{"n":10.0},"b":"x"}"#,
            r#"{"a":{"m":10},"b":"x"}"#,
            r#"{"a":{"n":10},"b":"y"}"#,
            r#"{"a":{"n":10},"b":["x"]}"#,
            r#"{"a":{"n":10}}"#,
        ] {
            assert_ne!(checksum_of(other), base, "{other}");
        }
        // Only the top-level checksum key is left out.
        assert_ne!(
            checksum_of(r#"{"a":{"checksum":1}}"#),
            checksum_of(r#"{"a":{"checksum":2}}"#)
        );
    }

    #[test]
    fn deep_nesting_does_not_use_the_call_stack() {
        let depth = 100_000;
        let mut json = r#"{"s":"#.repeat(depth);
        json.push('1');
        json.push_str(&"}".repeat(depth));
        let expected = reference(json.as_bytes());
        // Run on a small stack, where a recursive walk would overflow.
        let got = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                // Built bottom-up: serde_json's parser stops at depth 128.
                let mut value = serde_json::json!(1);
                for _ in 0..depth {
                    value = Value::Object([("s".to_owned(), value)].into_iter().collect());
                }
                let state = State::from_value(value).unwrap();
                let checksum = digest(state.body());
                // Dropping a deep `Value` recurses: leak it instead.
                std::mem::forget(state);
                checksum
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(got, expected);
    }
}
