//! The integrity checksum of a loader state.
//!
//! A loader state carries an [`Entry::Checksum`] slot under [`CHECKSUM_KEY`]:
//! taking a state costs nothing more, and the checksum is computed only when
//! the state is serialised (`to_json`, `to_value`, serde), which writes it as
//! `"mx64:<16 hex digits>"`. A state read back holds it as a plain string,
//! which the loader checks with [`State::checksum_matches`] by whichever
//! algorithm the string names: states that earlier builds sealed with
//! `fnv1a64` keep loading.
//!
//! Both algorithms cover the state's content without its own checksum key,
//! and neither depends on formatting or on the order of an object's keys:
//! re-indenting a checkpoint or reordering its keys keeps it valid, while
//! any change to what it parses to does not.

mod canonical_json;
mod content_tree;

use super::{Body, Entry, State};

/// The key under which a loader state's checksum is written.
pub(crate) const CHECKSUM_KEY: &str = "checksum";

/// A checksum algorithm, named by the tag written in front of its hex digits
/// (`"<tag>:<16 hex digits>"`).
///
/// States are written with [`Algorithm::CURRENT`]; every algorithm a build
/// ever wrote stays readable, so an older checkpoint keeps loading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Algorithm {
    /// 64-bit FNV-1a over the canonical JSON (see [`canonical_json`]):
    /// written by earlier builds, still read.
    Fnv1a64,
    /// A hash of the content as a tree (see [`content_tree`]).
    Mx64,
}

impl Algorithm {
    /// The algorithm new states are written with.
    pub(crate) const CURRENT: Algorithm = Algorithm::Mx64;

    /// Every algorithm this build reads, newest first.
    pub(crate) const ALL: [Algorithm; 2] = [Algorithm::Mx64, Algorithm::Fnv1a64];

    /// The tag in front of the hex digits.
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Algorithm::Fnv1a64 => "fnv1a64",
            Algorithm::Mx64 => "mx64",
        }
    }

    /// The algorithm a written checksum names, if this build knows it.
    pub(crate) fn of(checksum: &str) -> Option<Algorithm> {
        let (tag, _) = checksum.split_once(':')?;
        Algorithm::ALL.into_iter().find(|a| a.tag() == tag)
    }
}

impl State {
    /// Marks this state (a loader's) to carry its checksum under
    /// [`CHECKSUM_KEY`]; nothing is computed until it is serialised.
    pub(crate) fn insert_checksum(&mut self) {
        self.put(CHECKSUM_KEY.into(), Entry::Checksum);
    }

    /// Whether the checksum key holds the unserialised slot (the state was
    /// taken in this process and never went through JSON).
    pub(crate) fn has_checksum_slot(&self) -> bool {
        matches!(self.entry(CHECKSUM_KEY), Some(Entry::Checksum))
    }

    /// The checksum of this state's canonical content (everything but the
    /// checksum key itself), as written: `"<tag>:<16 hex digits>"`, with
    /// [`Algorithm::CURRENT`].
    #[cfg(test)]
    pub(crate) fn content_checksum(&self) -> String {
        self.body().content_checksum()
    }

    /// Whether `saved` is this state's checksum, by the algorithm it names.
    pub(crate) fn checksum_matches(&self, saved: &str) -> bool {
        self.body().checksum_matches(saved)
    }

    /// The checksum of this state's canonical content by `algorithm`.
    pub(crate) fn checksum_with(&self, algorithm: Algorithm) -> String {
        self.body().checksum_with(algorithm)
    }
}

impl Body {
    /// See [`State::content_checksum`].
    pub(super) fn content_checksum(&self) -> String {
        self.checksum_with(Algorithm::CURRENT)
    }

    /// See [`State::checksum_matches`].
    pub(super) fn checksum_matches(&self, saved: &str) -> bool {
        Algorithm::of(saved).is_some_and(|algorithm| self.checksum_with(algorithm) == saved)
    }

    /// The checksum of the content by `algorithm`, as written.
    pub(crate) fn checksum_with(&self, algorithm: Algorithm) -> String {
        let digest = match algorithm {
            Algorithm::Fnv1a64 => canonical_json::digest(self),
            Algorithm::Mx64 => content_tree::digest(self),
        };
        format!("{}:{digest:016x}", algorithm.tag())
    }
}

/// A state built in memory with a JSON value, a child and a checksum slot:
/// `{"a":[1,{"x":null,"y":"\n"}],"b":{"c":-2,"d":0.5}}` as content. The
/// algorithms' tests hash it against that text.
#[cfg(test)]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(json: &str) -> State {
        State::from_json(json).unwrap()
    }

    #[test]
    fn the_slot_is_filled_when_serialised_and_read_back_as_a_string() {
        let built = sample_state();
        assert!(built.has_checksum_slot());
        let expected = built.content_checksum();
        assert!(
            expected.starts_with("mx64:") && expected.len() == 21,
            "{expected}"
        );
        let back = State::from_json(&built.to_json().unwrap()).unwrap();
        assert!(!back.has_checksum_slot());
        assert_eq!(back.get::<String>(CHECKSUM_KEY).unwrap(), expected);
        assert_eq!(built.to_value()[CHECKSUM_KEY], expected.as_str());
        // The same content, reformatted and reordered, with the key itself
        // left out, by every algorithm.
        let edited = sealed(
            r#"{ "b": {"d": 0.5, "c": -2}, "checksum": "anything",
                 "a": [1, {"y": "\u000a", "x": null}] }"#,
        );
        for algorithm in Algorithm::ALL {
            let checksum = built.checksum_with(algorithm);
            assert_eq!(Algorithm::of(&checksum), Some(algorithm));
            assert!(built.checksum_matches(&checksum), "{checksum}");
            assert!(back.checksum_matches(&checksum), "{checksum}");
            assert!(edited.checksum_matches(&checksum), "{checksum}");
        }
    }

    #[test]
    fn a_checksum_is_checked_by_the_algorithm_it_names() {
        let state = sealed(r#"{"a": {"n": 10}, "b": "x"}"#);
        let mx64 = state.checksum_with(Algorithm::Mx64);
        let fnv = state.checksum_with(Algorithm::Fnv1a64);
        assert!(fnv.starts_with("fnv1a64:"));
        assert_ne!(mx64[5..], fnv[8..]);
        // The digits of one under the tag of the other do not match.
        assert!(!state.checksum_matches(&format!("fnv1a64:{}", &mx64[5..])));
        assert!(!state.checksum_matches(&format!("mx64:{}", &fnv[8..])));
        for unknown in ["sha1:0123456789abcdef", "no tag", "", ":"] {
            assert_eq!(Algorithm::of(unknown), None);
            assert!(!state.checksum_matches(unknown));
        }
    }

    #[test]
    fn a_changed_value_changes_the_checksum_by_every_algorithm() {
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
            for algorithm in Algorithm::ALL {
                assert!(
                    !sealed(other).checksum_matches(&base.checksum_with(algorithm)),
                    "{other} by {algorithm:?}"
                );
            }
        }
        // Only the top-level checksum key is left out.
        let nested = |n| sealed(&format!(r#"{{"a":{{"checksum":{n}}}}}"#));
        for algorithm in Algorithm::ALL {
            assert_ne!(
                nested(1).checksum_with(algorithm),
                nested(2).checksum_with(algorithm)
            );
        }
    }
}
