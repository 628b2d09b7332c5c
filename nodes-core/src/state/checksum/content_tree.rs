//! `mx64`: a hash of a state's parsed content as a tree, the checksum this
//! build writes (earlier builds wrote `fnv1a64`).
//!
//! What it covers is what a state parses to: each object a set of members
//! (key, value), each array a sequence, each scalar typed (`null`, a
//! boolean, an unsigned, a negative or a floating-point number, a string).
//! Formatting, escapes and the order of an object's keys are not content,
//! so nothing is sorted, escaped or printed: a member is hashed on its own
//! and an object is the sum of its members' hashes, eight bytes per step.
//!
//! Certainty for one changed member: every step below, for a fixed input
//! word, is a bijection of the hash state (an xor, a multiplication by an
//! odd constant, an xorshift), a member's hash goes through a bijective
//! avalanche, and a sum changes when one of its terms does. So changing
//! one scalar into another of its kind (a number into a number of the same
//! kind, a string or a key into one of the same length), however deep,
//! always changes the checksum; other changes collide with probability
//! about 2^-64.
//!
//! The walk is iterative (an explicit stack), so a deeply nested state
//! costs heap, not call stack.

use serde_json::{Number, Value};

use super::super::{Body, Entry, Key, Scalar};
use super::CHECKSUM_KEY;

const K: u64 = 0x9e37_79b9_7f4a_7c15;
const MEMBER_SEED: u64 = 0x243f_6a88_85a3_08d3;
const OBJECT_SEED: u64 = 0x1319_8a2e_0370_7344;
const ARRAY_SEED: u64 = 0xa409_3822_299f_31d0;

/// A value's type, mixed in before it.
#[derive(Clone, Copy)]
#[repr(u64)]
enum Tag {
    Null = 1,
    False,
    True,
    Unsigned,
    Negative,
    Float,
    String,
    Object,
    Array,
}

/// One step: for a given word, a bijection of the hash state.
#[inline]
fn mix(state: u64, word: u64) -> u64 {
    let h = (state ^ word).wrapping_mul(K);
    h ^ (h >> 32)
}

/// murmur3's 64-bit finaliser (every step a bijection): spreads a member's
/// hash over all bits before it is summed.
#[inline]
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Mixes in `bytes` as little-endian words, then their length. A tail
/// shorter than a word is read as one word overlapping what came before
/// (or, for a string shorter than a word, as its first and last bytes):
/// given the length, the words still determine the bytes, so a changed byte
/// changes a word.
#[inline]
fn mix_bytes(mut state: u64, bytes: &[u8]) -> u64 {
    let len = bytes.len();
    let word_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let half_at = |at: usize| {
        u64::from(u32::from_le_bytes(
            bytes[at..at + 4].try_into().expect("4 bytes"),
        ))
    };
    if len >= 8 {
        let whole = len / 8;
        for i in 0..whole {
            state = mix(state, word_at(i * 8));
        }
        if !len.is_multiple_of(8) {
            state = mix(state, word_at(len - 8));
        }
    } else if len >= 4 {
        state = mix(state, half_at(0) | (half_at(len - 4) << 32));
    } else if len > 0 {
        let (first, middle, last) = (bytes[0], bytes[len / 2], bytes[len - 1]);
        state = mix(
            state,
            u64::from(first) | (u64::from(middle) << 8) | (u64::from(last) << 16),
        );
    }
    mix(state, len as u64)
}

fn mix_number(state: u64, n: &Number) -> u64 {
    if let Some(u) = n.as_u64() {
        mix(mix(state, Tag::Unsigned as u64), u)
    } else if let Some(i) = n.as_i64() {
        mix(mix(state, Tag::Negative as u64), i as u64)
    } else {
        // Neither: a finite float (serde_json has no other numbers).
        let bits = n.as_f64().map_or(0, f64::to_bits);
        mix(mix(state, Tag::Float as u64), bits)
    }
}

fn mix_str(state: u64, text: &str) -> u64 {
    mix_bytes(mix(state, Tag::String as u64), text.as_bytes())
}

/// A scalar value (not an object or an array).
fn mix_scalar(state: u64, value: &Value) -> u64 {
    match value {
        Value::Null => mix(state, Tag::Null as u64),
        Value::Bool(false) => mix(state, Tag::False as u64),
        Value::Bool(true) => mix(state, Tag::True as u64),
        Value::Number(n) => mix_number(state, n),
        Value::String(text) => mix_str(state, text),
        Value::Object(_) | Value::Array(_) => unreachable!("containers open a frame"),
    }
}

/// An inline entry's value, hashed in place: as [`mix_scalar`] hashes the
/// same value, and `[]` as the walk hashes an empty array.
fn mix_inline(state: u64, scalar: &Scalar) -> u64 {
    match scalar {
        Scalar::Null => mix(state, Tag::Null as u64),
        Scalar::Bool(false) => mix(state, Tag::False as u64),
        Scalar::Bool(true) => mix(state, Tag::True as u64),
        Scalar::Number(n) => mix_number(state, n),
        Scalar::EmptyArray => mix(mix(state, Tag::Array as u64), mix(ARRAY_SEED, 0)),
    }
}

/// The value word of a nested state that holds no container (a source's
/// counters, a map of flags), as the walk would close its frame: hashed
/// in one loop, no frame. `None` when it holds one.
fn flat_body_word(body: &Body) -> Option<u64> {
    let mut acc = 0u64;
    for (key, entry) in &body.entries {
        let state = mix_bytes(MEMBER_SEED, key.as_bytes());
        let member = match entry {
            Entry::Scalar(scalar) => mix_inline(state, scalar),
            Entry::Shared(text) => mix_str(state, text),
            _ => return None,
        };
        acc = acc.wrapping_add(avalanche(member));
    }
    Some(mix(mix(OBJECT_SEED, acc), body.entries.len() as u64))
}

/// What an entry or a JSON value holds, for the walk: a scalar is hashed on
/// the spot, a container opens a frame.
enum Item<'a> {
    Value(&'a Value),
    /// An inline entry's value.
    Inline(&'a Scalar),
    Str(&'a str),
    /// A nested loader state's own checksum, computed for it.
    Owned(String),
    State(&'a Body),
}

fn entry_item<'a>(owner: &'a Body, entry: &'a Entry) -> Item<'a> {
    match entry {
        Entry::Scalar(scalar) => Item::Inline(scalar),
        Entry::Json(value) => Item::Value(value),
        Entry::Deferred(deferred) => Item::Value(deferred.json()),
        Entry::Child(child) => Item::State(child),
        Entry::Shared(text) => Item::Str(text),
        Entry::Checksum => Item::Owned(owner.content_checksum()),
    }
}

/// The members or items of a container still to hash.
enum Members<'a> {
    /// A state's entries; `top` leaves the checksum key out.
    Body {
        owner: &'a Body,
        entries: std::slice::Iter<'a, (Key, Entry)>,
        top: bool,
    },
    Map(serde_json::map::Iter<'a>),
    Array(std::slice::Iter<'a, Value>),
}

/// An open container: what is left of it, what it has summed (an object)
/// or chained (an array) so far, and the hash state of the member of its
/// parent that waits for its value.
struct Frame<'a> {
    members: Members<'a>,
    /// An object: the sum of its members' hashes; an array: the chain.
    acc: u64,
    count: u64,
    resume: u64,
}

impl<'a> Frame<'a> {
    fn new(members: Members<'a>, resume: u64) -> Self {
        let acc = match members {
            Members::Array(_) => ARRAY_SEED,
            _ => 0,
        };
        Frame {
            members,
            acc,
            count: 0,
            resume,
        }
    }

    fn of_body(owner: &'a Body, top: bool, resume: u64) -> Self {
        Frame::new(
            Members::Body {
                owner,
                entries: owner.entries.iter(),
                top,
            },
            resume,
        )
    }

    /// The next member: the hash state to hash its value into (its key
    /// mixed in, or the array's chain), and the value; `None` at the end.
    ///
    /// A state's inline values and nested states of scalars are hashed
    /// and added here, in one loop (`hashed` counts them): only the other
    /// members come back to the walk.
    fn next(&mut self, hashed: &mut usize) -> Option<(u64, Item<'a>)> {
        match &mut self.members {
            Members::Body {
                owner,
                entries,
                top,
            } => {
                for (key, entry) in entries.by_ref() {
                    if *top && key == CHECKSUM_KEY {
                        continue;
                    }
                    let state = mix_bytes(MEMBER_SEED, key.as_bytes());
                    let member = match entry {
                        Entry::Scalar(scalar) => mix_inline(state, scalar),
                        Entry::Shared(text) => mix_str(state, text),
                        Entry::Child(body) => match flat_body_word(body) {
                            Some(word) => {
                                *hashed += body.entries.len();
                                mix(mix(state, Tag::Object as u64), word)
                            }
                            None => return Some((state, Item::State(body))),
                        },
                        _ => return Some((state, entry_item(owner, entry))),
                    };
                    *hashed += 1;
                    self.acc = self.acc.wrapping_add(avalanche(member));
                    self.count += 1;
                }
                None
            }
            Members::Map(members) => {
                let (key, value) = members.next()?;
                Some((mix_bytes(MEMBER_SEED, key.as_bytes()), Item::Value(value)))
            }
            Members::Array(items) => items.next().map(|item| (self.acc, Item::Value(item))),
        }
    }

    /// Takes the hash of a finished member (or array item).
    fn add(&mut self, member: u64) {
        match self.members {
            Members::Array(_) => self.acc = member,
            _ => self.acc = self.acc.wrapping_add(avalanche(member)),
        }
        self.count += 1;
    }

    /// The container's value word, once every member is in.
    fn close(&self) -> u64 {
        match self.members {
            Members::Array(_) => mix(self.acc, self.count),
            _ => mix(mix(OBJECT_SEED, self.acc), self.count),
        }
    }
}

/// What a member's value asks of the walk.
enum Step<'a> {
    /// A scalar: the member's hash, complete.
    Done(u64),
    /// A container: its frame, to walk before the member completes.
    Open(Frame<'a>),
}

/// The `mx64` hash of `body`'s content, without its top-level checksum key.
pub(super) fn digest(body: &Body) -> u64 {
    let mut members = 0;
    let mut open = vec![Frame::of_body(body, true, 0)];
    let digest = loop {
        let frame = open.last_mut().expect("the root is popped only to return");
        let Some((state, item)) = frame.next(&mut members) else {
            let done = open.pop().expect("checked above");
            let word = done.close();
            match open.last_mut() {
                Some(parent) => parent.add(mix(done.resume, word)),
                None => break avalanche(word),
            }
            continue;
        };
        members += 1;
        let opened = |members, tag: Tag| Frame::new(members, mix(state, tag as u64));
        let step = match item {
            Item::Str(text) => Step::Done(mix_str(state, text)),
            Item::Owned(text) => Step::Done(mix_str(state, &text)),
            // Not flat (`Frame::next` hashes those).
            Item::State(body) => {
                Step::Open(Frame::of_body(body, false, mix(state, Tag::Object as u64)))
            }
            Item::Value(Value::Object(map)) => {
                Step::Open(opened(Members::Map(map.iter()), Tag::Object))
            }
            Item::Value(Value::Array(items)) => {
                Step::Open(opened(Members::Array(items.iter()), Tag::Array))
            }
            Item::Value(scalar) => Step::Done(mix_scalar(state, scalar)),
            Item::Inline(scalar) => Step::Done(mix_inline(state, scalar)),
        };
        match step {
            Step::Open(child) => open.push(child),
            Step::Done(member) => frame.add(member),
        }
    };
    super::super::count_work(members);
    digest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::State;

    fn digest_of(json: &str) -> u64 {
        digest(State::from_json(json).unwrap().body())
    }

    #[test]
    fn formatting_key_order_and_escapes_are_not_content() {
        let base = digest_of(r#"{"a":[1,{"x":null,"y":"\n"}],"b":{"c":-2,"d":0.5}}"#);
        let same = r#"{ "b": {"d": 0.5, "c": -2}, "checksum": "anything",
                        "a": [1, {"y": "\u000a", "x": null}] }"#;
        assert_eq!(digest_of(same), base);
        // Built in memory, with a child, a deferred-free JSON value and a
        // slot: the same content.
        assert_eq!(digest(super::super::sample_state().body()), base);
    }

    /// Nested states of scalars are hashed in one loop, inline values in
    /// place: the same digest as the same content walked as JSON values.
    #[test]
    fn flat_states_and_inline_values_hash_as_json_does() {
        let json = r#"{"m":{"a":1,"b":true,"c":[],"d":null,"e":-2,"f":0.5},"n":{},"k":[]}"#;
        let parsed = State::from_json(json).unwrap();
        let mut as_values = State::new();
        let value: Value = serde_json::from_str(json).unwrap();
        for (key, value) in value.as_object().unwrap() {
            as_values.insert(key.clone(), value).unwrap();
        }
        assert!(matches!(as_values.body().entries[0].1, Entry::Json(_)));
        assert!(matches!(parsed.body().entries[0].1, Entry::Child(_)));
        assert_eq!(digest(parsed.body()), digest(as_values.body()));
        let changed = State::from_json(&json.replace("0.5", "0.25")).unwrap();
        assert_ne!(digest(changed.body()), digest(parsed.body()));
    }

    #[test]
    fn order_within_arrays_types_and_pairings_are_content() {
        let pairs = [
            (r#"{"a":[1,2]}"#, r#"{"a":[2,1]}"#),
            (r#"{"a":1,"b":2}"#, r#"{"a":2,"b":1}"#),
            (r#"{"a":{"b":1}}"#, r#"{"b":{"a":1}}"#),
            (r#"{"a":[[1],[]]}"#, r#"{"a":[[],[1]]}"#),
            (r#"{"a":1}"#, r#"{"a":1.0}"#),
            (r#"{"a":1}"#, r#"{"a":"1"}"#),
            (r#"{"a":1}"#, r#"{"a":-1}"#),
            (r#"{"a":true}"#, r#"{"a":"true"}"#),
            (r#"{"a":null}"#, r#"{"a":{}}"#),
            (r#"{"a":{}}"#, r#"{"a":[]}"#),
            (r#"{"a":[]}"#, r#"{"a":[null]}"#),
            (r#"{"a":""}"#, r#"{"a":"\u0000"}"#),
            (r#"{"ab":"c"}"#, r#"{"a":"bc"}"#),
            (r#"{"a":{}}"#, r#"{}"#),
        ];
        for (a, b) in pairs {
            assert_ne!(digest_of(a), digest_of(b), "{a} vs {b}");
        }
    }

    #[test]
    fn one_changed_scalar_or_key_never_collides() {
        // Changes at three depths: each of 2,000 values gives its own
        // checksum (a bijection at every step makes a collision impossible).
        let mut seen = std::collections::HashSet::new();
        for n in 0..2_000u64 {
            for json in [
                format!(r#"{{"n":{n},"s":{{"k":1}}}}"#),
                format!(r#"{{"n":0,"s":{{"k":{n},"t":[1,{{"deep":"{n}"}}]}}}}"#),
                format!(r#"{{"n":0,"key{n}":[{}]}}"#, u64::MAX),
            ] {
                assert!(seen.insert(digest_of(&json)), "{json}");
            }
        }
    }

    #[test]
    fn every_byte_of_a_string_or_key_counts() {
        // Lengths around each way of reading a tail; one byte changed at a
        // time, at every position: each gives its own checksum.
        for len in 0..=26 {
            let text: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let mut seen = std::collections::HashSet::new();
            let json = |key: &str, value: &str| format!(r#"{{"{key}":"{value}"}}"#);
            assert!(seen.insert(digest_of(&json("k", &text))));
            for at in 0..len {
                let mut changed = text.clone().into_bytes();
                changed[at] = b'A' + (at % 26) as u8;
                let changed = String::from_utf8(changed).unwrap();
                assert!(
                    seen.insert(digest_of(&json("k", &changed))),
                    "value {changed}"
                );
                assert!(
                    seen.insert(digest_of(&json(&changed, &text))),
                    "key {changed}"
                );
            }
            assert!(seen.insert(digest_of(&json(&text, &text))));
            assert!(seen.insert(digest_of(&json("k", &format!("{text}a")))));
        }
    }

    #[test]
    fn deep_nesting_does_not_use_the_call_stack() {
        let depth = 100_000;
        let got = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                let digests: Vec<u64> = [1, 2]
                    .into_iter()
                    .map(|leaf| {
                        // Built bottom-up: serde_json's parser stops at 128.
                        let mut value = serde_json::json!(leaf);
                        for _ in 0..depth {
                            value = Value::Object([("s".to_owned(), value)].into_iter().collect());
                        }
                        let state = State::from_value(value).unwrap();
                        let digest = digest(state.body());
                        // Dropping a deep `Value` recurses: leak it instead.
                        std::mem::forget(state);
                        digest
                    })
                    .collect();
                digests
            })
            .unwrap()
            .join()
            .unwrap();
        assert_ne!(got[0], got[1]);
    }
}
