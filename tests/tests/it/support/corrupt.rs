//! Every single-byte change of a saved checkpoint: the walk the integrity
//! and replay-bound suites share.

use nodes_std::State;
use serde_json::Value;

/// How the single-byte changes of a checkpoint fell out.
#[derive(Debug, Default)]
pub(crate) struct ByteChanges {
    /// Not UTF-8: no text to parse.
    pub(crate) not_utf8: usize,
    /// Not JSON (and refused by `State::from_json`).
    pub(crate) not_json: usize,
    /// JSON with the same content (an escape spelt another way).
    pub(crate) same_content: usize,
    /// JSON with other content: what a damaged checkpoint looks like.
    pub(crate) altered: usize,
}

/// Changes each byte of `json` to each other byte value and calls `offer`
/// with every change that parses as a `State` with content other than the
/// original's: the text, the state, and whether a digit became another
/// digit (a change that keeps the JSON's shape). A change that is JSON but
/// not a `State` must be refused as a bad state.
pub(crate) fn every_byte_change(
    json: &str,
    mut offer: impl FnMut(&str, &State, bool),
) -> ByteChanges {
    let original: Value = serde_json::from_str(json).expect("the original is JSON");
    let bytes = json.as_bytes();
    let mut counts = ByteChanges::default();
    for at in 0..bytes.len() {
        for byte in 0..=u8::MAX {
            if byte == bytes[at] {
                continue;
            }
            let mut text = bytes.to_vec();
            text[at] = byte;
            let Ok(text) = String::from_utf8(text) else {
                counts.not_utf8 += 1;
                continue;
            };
            let Ok(value) = serde_json::from_str::<Value>(&text) else {
                assert!(State::from_json(&text).is_err(), "{text}");
                counts.not_json += 1;
                continue;
            };
            if value == original {
                counts.same_content += 1;
                continue;
            }
            counts.altered += 1;
            match State::from_json(&text) {
                Ok(state) => {
                    offer(
                        &text,
                        &state,
                        bytes[at].is_ascii_digit() && byte.is_ascii_digit(),
                    );
                }
                Err(err) => assert!(err.is_bad_state(), "{err}"),
            }
        }
    }
    counts
}
