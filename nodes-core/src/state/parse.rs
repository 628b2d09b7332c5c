//! [`State::from_json`]: a JSON parser for states that does not recurse.
//!
//! `serde_json` parses recursively and stops at 128 levels, while a pipeline
//! of N nested nodes writes a state nested N levels deep. So the objects of
//! a state are parsed here, with an explicit stack, straight into nested
//! [`State`]s; every other value (a string, a number, an array) and every
//! key is handed to `serde_json`, so its grammar, number conversion and
//! string escapes are exactly `serde_json`'s.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Body, Entry, Key, Shared, State};
use crate::error::{Error, Result};

/// See [`State::MAX_DEPTH`].
pub(super) const MAX_DEPTH: usize = 1_000_000;

/// Parses `json`, which must hold an object.
pub(super) fn parse(json: &str) -> Result<Body> {
    let mut p = Parser { text: json, pos: 0 };
    p.skip_ws();
    if p.peek() != Some(b'{') {
        // Not an object: serde_json says what it is, or what is wrong with it.
        let value: Value = serde_json::from_str(json).map_err(|e| invalid(&e, (1, 1)))?;
        return State::from_value(value).map(|state| Shared::unwrap_or_clone(state.body));
    }
    p.pos += 1;
    // The objects around the current one, outermost first, each with the key
    // the current one will be stored under.
    let mut open: Vec<(Body, Key)> = Vec::new();
    let mut current = Body::default();
    // Whether a member was just read (so `,` or `}` comes next).
    let mut after_member = false;
    loop {
        p.skip_ws();
        match p.peek() {
            Some(b'}') => {
                p.pos += 1;
                let Some((parent, key)) = open.pop() else {
                    p.skip_ws();
                    if p.pos < json.len() {
                        return Err(p.error(p.pos, "trailing characters"));
                    }
                    return Ok(current);
                };
                let child = std::mem::replace(&mut current, parent);
                current.put(key, Entry::Child(Shared::new(child)));
                after_member = true;
                continue;
            }
            Some(b',') if after_member => {
                p.pos += 1;
                p.skip_ws();
                if p.peek() != Some(b'"') {
                    return Err(p.error(p.pos, "expected a key (a string)"));
                }
            }
            Some(b'"') if !after_member => {}
            None => return Err(p.error(p.pos, "EOF while parsing an object")),
            Some(_) if after_member => return Err(p.error(p.pos, "expected `,` or `}`")),
            Some(_) => return Err(p.error(p.pos, "expected a key (a string) or `}`")),
        }
        // A member: "key": value.
        let key = Key::Owned(p.leaf()?);
        p.skip_ws();
        if p.peek() != Some(b':') {
            return Err(p.error(p.pos, "expected `:`"));
        }
        p.pos += 1;
        p.skip_ws();
        after_member = p.peek() != Some(b'{');
        if after_member {
            current.put(key, Entry::of(p.leaf()?));
        } else if open.len() + 1 >= MAX_DEPTH {
            let why = format!("objects nested deeper than {MAX_DEPTH} levels");
            return Err(p.error(p.pos, why));
        } else {
            p.pos += 1;
            open.push((std::mem::take(&mut current), key));
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The key or value (not an object) at `pos`, parsed by serde_json;
    /// `pos` moves past it.
    fn leaf<T: DeserializeOwned>(&mut self) -> Result<T> {
        let (start, len) = (self.pos, self.text.len());
        // A number or a literal is parsed alone, up to the next delimiter.
        let end = match self.peek() {
            Some(b'"' | b'[') => len,
            _ => self.text.as_bytes()[start..]
                .iter()
                .position(|b| b" \t\n\r,:\"[]{}".contains(b))
                .map_or(len, |n| start + n),
        };
        let mut values = serde_json::Deserializer::from_str(&self.text[start..end]).into_iter();
        match values.next() {
            Some(Ok(value)) => {
                self.pos = start + values.byte_offset();
                Ok(value)
            }
            // The slice ended, not the document (`tru` before a newline).
            Some(Err(e)) if e.is_eof() && end < len => Err(self.error(end, "invalid value")),
            Some(Err(e)) => Err(invalid(&e, self.line_col(start))),
            None => Err(self.error(start, "expected a value")),
        }
    }

    /// `(line, column)` of byte `at`, both counted from 1 (as serde_json does).
    fn line_col(&self, at: usize) -> (usize, usize) {
        let before = &self.text.as_bytes()[..at.min(self.text.len())];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let column = 1 + before.iter().rev().take_while(|&&b| b != b'\n').count();
        (line, column)
    }

    fn error(&self, at: usize, what: impl std::fmt::Display) -> Error {
        not_json(what, self.line_col(at))
    }
}

/// A serde_json error on a slice that starts at `(line, column)` of the
/// document, reported at its position in the document.
fn invalid(error: &serde_json::Error, (line, column): (usize, usize)) -> Error {
    let text = error.to_string();
    let what = text.split(" at line ").next().unwrap_or(&text);
    let at = match error.line() {
        0 | 1 => (line, column + error.column().saturating_sub(1)),
        l => (line + l - 1, error.column()),
    };
    not_json(what, at)
}

/// The error for a document that is not valid JSON at `(line, column)`.
fn not_json(what: impl std::fmt::Display, (line, column): (usize, usize)) -> Error {
    let message = format!("not valid JSON: {what} at line {line} column {column}");
    Error::bad_state("/", message)
}
