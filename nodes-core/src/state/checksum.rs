//! The integrity checksum of a loader state, `mx64`: a hash of the state's
//! parsed content as a tree.
//!
//! A loader state carries an [`Entry::Checksum`] slot under [`CHECKSUM_KEY`]:
//! taking a state costs nothing more, and the checksum is computed only when
//! the state is serialised, which writes it as `"mx64:<16 hex digits>"`. A
//! state read back holds it as a plain string, which the loader compares
//! with [`State::checksum`].
//!
//! What it covers is what a state parses to, without its own top-level
//! checksum key: each object a set of members (key, value), each array a
//! sequence, each scalar typed (`null`, a boolean, an unsigned, a negative
//! or a floating-point number, a string). Formatting, escapes and the order
//! of an object's keys are not content, so nothing is sorted, escaped or
//! printed: a member is hashed on its own and an object is the sum of its
//! members' hashes, eight bytes per step.
//!
//! Certainty for one changed member: every step below, for a fixed input
//! word, is a bijection of the hash state (an xor, a multiplication by an
//! odd constant, an xorshift), a member's hash goes through a bijective
//! avalanche, and a sum changes when one of its terms does. So changing
//! one scalar into another of its kind (a number into a number of the same
//! kind, a string or a key into one of the same length), however deep,
//! always changes the checksum; other changes collide with probability
//! about 2^-64. The walk keeps its stack on the heap.

use std::borrow::Cow;

use serde_json::Value;

use super::{Body, Entry, State};

/// The key under which a loader state's checksum is written.
pub(crate) const CHECKSUM_KEY: &str = "checksum";

const K: u64 = 0x9e37_79b9_7f4a_7c15;
const MEMBER_SEED: u64 = 0x243f_6a88_85a3_08d3;
const OBJECT_SEED: u64 = 0x1319_8a2e_0370_7344;
const ARRAY_SEED: u64 = 0xa409_3822_299f_31d0;

/// A value's type, mixed in before it.
mod tag {
    pub(super) const NULL: u64 = 1;
    pub(super) const FALSE: u64 = 2;
    pub(super) const TRUE: u64 = 3;
    pub(super) const UNSIGNED: u64 = 4;
    pub(super) const NEGATIVE: u64 = 5;
    pub(super) const FLOAT: u64 = 6;
    pub(super) const STRING: u64 = 7;
    pub(super) const OBJECT: u64 = 8;
    pub(super) const ARRAY: u64 = 9;
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

/// The `mx64` hash of a byte string, eight bytes a step: a file reader's
/// digest of the bytes before its offset (an FNV-1a over 4 KiB would take
/// a multiplication per byte, on the path of every state taken).
pub fn digest_bytes(bytes: &[u8]) -> u64 {
    avalanche(mix_bytes(MEMBER_SEED, bytes))
}

/// Mixes in `bytes` as little-endian words, then their length. A tail
/// shorter than a word is read as one word overlapping what came before
/// (or, for a string shorter than a word, as its first and last bytes):
/// given the length, the words still determine the bytes, so a changed byte
/// changes a word.
#[inline]
fn mix_bytes(mut state: u64, bytes: &[u8]) -> u64 {
    let len = bytes.len();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let half = |at: usize| u64::from(u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4")));
    if len >= 8 {
        for at in (0..len - 7).step_by(8) {
            state = mix(state, word(at));
        }
        if !len.is_multiple_of(8) {
            state = mix(state, word(len - 8));
        }
    } else if len >= 4 {
        state = mix(state, half(0) | (half(len - 4) << 32));
    } else if len > 0 {
        let byte = |at: usize| u64::from(bytes[at]);
        state = mix(
            state,
            byte(0) | (byte(len / 2) << 8) | (byte(len - 1) << 16),
        );
    }
    mix(state, len as u64)
}

/// A scalar value (not an object or an array).
fn mix_scalar(state: u64, value: &Value) -> u64 {
    match value {
        Value::Null => mix(state, tag::NULL),
        Value::Bool(b) => mix(state, if *b { tag::TRUE } else { tag::FALSE }),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => mix(mix(state, tag::UNSIGNED), u),
            (None, Some(i)) => mix(mix(state, tag::NEGATIVE), i as u64),
            // Neither: a finite float (serde_json has no other numbers).
            (None, None) => {
                let bits = n.as_f64().map_or(0, f64::to_bits);
                mix(mix(state, tag::FLOAT), bits)
            }
        },
        Value::String(text) => mix_bytes(mix(state, tag::STRING), text.as_bytes()),
        Value::Object(_) | Value::Array(_) => unreachable!("containers open a frame"),
    }
}

/// The members or items of a container still to hash.
enum Members<'a> {
    /// A state's entries; `true` at the top, whose checksum key is left out.
    Body(&'a Body, super::Iter<'a>, bool),
    Map(serde_json::map::Iter<'a>),
    Array(std::slice::Iter<'a, Value>),
}

/// A member's value (or an array's item) to the walk: a scalar hashed on
/// the spot, or a container to open.
enum Item<'a> {
    Hashed(u64),
    Open(Frame<'a>),
}

/// `value` as the member whose hash state is `state`.
fn item(state: u64, value: &Value) -> Item<'_> {
    match value {
        Value::Object(map) => Item::Open(Frame::new(Members::Map(map.iter()), state)),
        Value::Array(items) => Item::Open(Frame::new(Members::Array(items.iter()), state)),
        scalar => Item::Hashed(mix_scalar(state, scalar)),
    }
}

/// An open container: what is left of it, what it has summed (an object)
/// or chained (an array) so far, and the hash state of the member of its
/// parent that waits for its value.
struct Frame<'a> {
    members: Members<'a>,
    acc: u64,
    count: u64,
    resume: u64,
}

impl<'a> Frame<'a> {
    /// The container `members`, the value of the member whose hash state is
    /// `state`.
    fn new(members: Members<'a>, state: u64) -> Self {
        let (tag, acc) = match members {
            Members::Array(_) => (tag::ARRAY, ARRAY_SEED),
            _ => (tag::OBJECT, 0),
        };
        let resume = mix(state, tag);
        Frame {
            members,
            acc,
            count: 0,
            resume,
        }
    }

    /// The next member's item, or `None` when the container is done.
    fn next(&mut self) -> Option<Item<'a>> {
        let member = |key: &str| mix_bytes(MEMBER_SEED, key.as_bytes());
        match &mut self.members {
            Members::Body(owner, entries, top) => {
                let (key, entry) = entries.find(|(key, _)| !(*top && key == CHECKSUM_KEY))?;
                let state = member(key);
                let open = |members| Item::Open(Frame::new(members, state));
                Some(match entry {
                    Entry::Child(body) => open(Members::Body(body, body.iter(), false)),
                    leaf => match leaf.leaf(owner) {
                        Cow::Borrowed(value) => item(state, value),
                        // An inline `[]` hashes as the walk closes an empty array.
                        Cow::Owned(Value::Array(_)) => open(Members::Array([].iter())),
                        Cow::Owned(scalar) => Item::Hashed(mix_scalar(state, &scalar)),
                    },
                })
            }
            Members::Map(map) => map.next().map(|(key, value)| item(member(key), value)),
            Members::Array(items) => items.next().map(|value| item(self.acc, value)),
        }
    }

    /// The hash of the finished container.
    fn close(&self) -> u64 {
        match self.members {
            Members::Array(_) => mix(self.acc, self.count),
            _ => mix(mix(OBJECT_SEED, self.acc), self.count),
        }
    }

    /// Takes the hash of a finished member (or array item).
    fn add(&mut self, member: u64) {
        self.acc = match self.members {
            Members::Array(_) => member,
            _ => self.acc.wrapping_add(avalanche(member)),
        };
        self.count += 1;
    }
}

/// The `mx64` hash of `root`'s content, without its top-level checksum key.
fn digest(root: &Body) -> u64 {
    let mut steps = 0;
    let mut open = vec![Frame::new(Members::Body(root, root.iter(), true), 0)];
    loop {
        let frame = open.last_mut().expect("the root is popped last");
        match frame.next() {
            Some(Item::Hashed(member)) => frame.add(member),
            Some(Item::Open(child)) => open.push(child),
            None => {
                // A frame has counted each member it visited.
                let done = open.pop().expect("checked above");
                steps += done.count;
                let Some(parent) = open.last_mut() else {
                    root.count(steps as usize);
                    return avalanche(done.close());
                };
                parent.add(mix(done.resume, done.close()));
            }
        }
    }
}

/// The checksum of `body`'s content, as written: `"mx64:<16 hex digits>"`.
pub(super) fn checksum(body: &Body) -> String {
    format!("mx64:{:016x}", digest(body))
}

impl State {
    /// Marks this state (a loader's) to carry its checksum under
    /// [`CHECKSUM_KEY`]; nothing is computed until it is serialised.
    pub(crate) fn insert_checksum(&mut self) {
        self.body_mut().put(CHECKSUM_KEY.into(), Entry::Checksum);
    }

    /// Whether the checksum key holds the unserialised slot (the state was
    /// taken in this process and never went through JSON).
    pub(crate) fn has_checksum_slot(&self) -> bool {
        matches!(self.body.get(CHECKSUM_KEY), Some(Entry::Checksum))
    }

    /// The checksum of this state's content (everything but the checksum
    /// key itself), as written: `"mx64:<16 hex digits>"`.
    pub(crate) fn checksum(&self) -> String {
        checksum(&self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state built in memory with a JSON value, a child and a checksum
    /// slot: `{"a":[1,{"x":null,"y":"\n"}],"b":{"c":-2,"d":0.5}}` as content.
    fn sample_state() -> State {
        let mut built = State::new()
            .with("a", serde_json::json!([1, {"x": null, "y": "\n"}]))
            .unwrap();
        built.insert_checksum();
        built.insert_child(
            "b",
            State::new().with("c", -2).unwrap().with("d", 0.5).unwrap(),
        );
        built
    }

    fn sealed(json: &str) -> State {
        State::from_json(json).unwrap()
    }

    #[test]
    fn the_slot_is_filled_when_serialised_and_read_back_as_a_string() {
        let built = sample_state();
        assert!(built.has_checksum_slot());
        let expected = built.checksum();
        assert!(
            expected.starts_with("mx64:") && expected.len() == 21,
            "{expected}"
        );
        let back = State::from_json(&built.to_json().unwrap()).unwrap();
        assert!(!back.has_checksum_slot());
        assert_eq!(back.get::<String>(CHECKSUM_KEY).unwrap(), expected);
        assert_eq!(built.to_value()[CHECKSUM_KEY], expected.as_str());
        // The same content, reformatted and reordered, with the key itself
        // left out.
        let edited = sealed(
            r#"{ "b": {"d": 0.5, "c": -2}, "checksum": "anything",
                 "a": [1, {"y": "\u000a", "x": null}] }"#,
        );
        assert_eq!(back.checksum(), expected);
        assert_eq!(edited.checksum(), expected);
    }

    #[test]
    fn a_checksum_is_its_tag_and_sixteen_hex_digits() {
        let state = sealed(r#"{"a": {"n": 10}, "b": "x"}"#);
        let mx64 = state.checksum();
        let digits = &mx64[5..];
        assert_eq!(digits.len(), 16);
        assert!(digits.bytes().all(|b| b.is_ascii_hexdigit()), "{mx64}");
        // The same digits under another tag are another checksum.
        assert_ne!(format!("fnv1a64:{digits}"), mx64);
        for unknown in ["sha1:0123456789abcdef", "no tag", "", ":"] {
            assert_ne!(state.checksum(), unknown);
        }
    }

    #[test]
    fn a_changed_value_changes_the_checksum() {
        let base = sealed(r#"{"a":{"n":10},"b":"x"}"#);
        for other in [
            r#"{"a":{"n":11},"b":"x"}"#,
            r#"{"a":{"n":10.0},"b":"x"}"#,
            r#"{"a":{"n":"10"},"b":"x"}"#,
            r#"{"a":{"n":-10},"b":"x"}"#,
            r#"{"a":{"m":10},"b":"x"}"#,
            r#"{"a":{"n":10},"b":"y"}"#,
            r#"{"a":{"n":10},"b":["x"]}"#,
            r#"{"a":{"n":10},"b":{"x":null}}"#,
            r#"{"a":{"n":10},"b":"x","c":null}"#,
            r#"{"a":{"n":10}}"#,
            r#"{"a":{"n":10,"b":"x"}}"#,
            r#"{"a":[{"n":10}],"b":"x"}"#,
        ] {
            assert_ne!(sealed(other).checksum(), base.checksum(), "{other}");
        }
        // Only the top-level checksum key is left out.
        let nested = |n| sealed(&format!(r#"{{"a":{{"checksum":{n}}}}}"#));
        assert_ne!(nested(1).checksum(), nested(2).checksum());
    }

    /// Every golden checkpoint still verifies: the digest is the one the
    /// checkpoints were sealed with, read back or built anew.
    #[test]
    fn the_golden_checkpoints_verify() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/golden/checkpoints");
        let mut seen = 0;
        for file in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            let state = State::from_json(&text).unwrap();
            let saved = state.get::<String>(CHECKSUM_KEY).unwrap();
            assert_eq!(state.checksum(), saved);
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(State::from_value(value).unwrap().checksum(), saved);
            seen += 1;
        }
        assert!(seen >= 7, "{seen} checkpoints");
    }

    /// A deferred entry and an inline `[]` hash as the JSON they stand for.
    #[test]
    fn deferred_and_inline_entries_hash_as_their_json() {
        let json = r#"{"d":{"x":[1,[]],"y":"s"},"e":[],"n":-1}"#;
        let parsed = State::from_json(json).unwrap();
        let value: Value = serde_json::from_str(json).unwrap();
        let mut built = State::new();
        built.insert_deferred("d", std::sync::Arc::new(value["d"].clone()));
        built.insert("e", Vec::<u8>::new()).unwrap();
        built.insert("n", -1).unwrap();
        assert_eq!(built.checksum(), parsed.checksum());
        assert_ne!(
            built.checksum(),
            sealed(r#"{"d":{},"e":[],"n":-1}"#).checksum()
        );
    }

    fn digest_of(json: &str) -> u64 {
        digest(&State::from_json(json).unwrap().body)
    }

    #[test]
    fn formatting_key_order_and_escapes_are_not_content() {
        let base = digest_of(r#"{"a":[1,{"x":null,"y":"\n"}],"b":{"c":-2,"d":0.5}}"#);
        let same = r#"{ "b": {"d": 0.5, "c": -2}, "checksum": "anything",
                        "a": [1, {"y": "\u000a", "x": null}] }"#;
        assert_eq!(digest_of(same), base);
        // Built in memory, with a child, a deferred-free JSON value and a
        // slot: the same content.
        assert_eq!(digest(&sample_state().body), base);
    }

    /// Nested states hash as the same objects held as JSON values do.
    #[test]
    fn nested_states_hash_as_json_objects_do() {
        let json = r#"{"m":{"a":1,"b":true,"c":[],"d":null,"e":-2,"f":0.5},"n":{},"k":[]}"#;
        let parsed = State::from_json(json).unwrap();
        let mut as_values = State::new();
        let value: Value = serde_json::from_str(json).unwrap();
        for (key, value) in value.as_object().unwrap() {
            as_values.insert_deferred(key.clone(), std::sync::Arc::new(value.clone()));
        }
        assert!(matches!(as_values.body.entries[0].1, Entry::Deferred(_)));
        assert!(matches!(parsed.body.entries[0].1, Entry::Child(_)));
        assert_eq!(digest(&parsed.body), digest(&as_values.body));
        let changed = State::from_json(&json.replace("0.5", "0.25")).unwrap();
        assert_ne!(digest(&changed.body), digest(&parsed.body));
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
                        let digest = digest(&state.body);
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
