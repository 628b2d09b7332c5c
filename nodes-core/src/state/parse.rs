//! [`State::from_json`]: a JSON parser for states that does not recurse.
//!
//! `serde_json` parses recursively and stops at 128 levels, while a pipeline
//! of N nested nodes writes a state nested N levels deep. So the objects of
//! a state are parsed here, with an explicit stack, straight into nested
//! [`State`]s; every other value (a string, a number, an array) is found by
//! a scan and handed to `serde_json` as one slice, so its grammar, number
//! conversion and string escapes are exactly `serde_json`'s.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Body, Entry, Key, State};
use crate::error::{Error, Result};

/// See [`State::MAX_DEPTH`].
pub(super) const MAX_DEPTH: usize = 1_000_000;

/// Parses `json`, which must hold an object.
pub(super) fn parse(json: &str) -> Result<Body> {
    let mut p = Parser {
        text: json,
        bytes: json.as_bytes(),
        pos: 0,
    };
    p.skip_ws();
    if p.peek() != Some(b'{') {
        // Not an object: serde_json says what it is, or what is wrong with it.
        let value: Value = serde_json::from_str(json).map_err(|e| invalid(&e, (1, 1)))?;
        return State::from_value(value).map(|state| Arc::unwrap_or_clone(state.body));
    }
    p.pos += 1;
    // The objects around the current one, outermost first, each with the key
    // the current one will be stored under.
    let mut open: Vec<(Body, Key)> = Vec::new();
    let mut current = Body::default();
    // Whether the next token may close the object (right after `{` or a member).
    let mut after_member = false;
    loop {
        p.skip_ws();
        match p.peek() {
            Some(b'}') => {
                p.pos += 1;
                match open.pop() {
                    Some((mut parent, key)) => {
                        parent.put(key, Entry::Child(Arc::new(current)));
                        current = parent;
                        after_member = true;
                        continue;
                    }
                    None => {
                        p.skip_ws();
                        if p.pos < p.bytes.len() {
                            return Err(p.error(p.pos, "trailing characters"));
                        }
                        return Ok(current);
                    }
                }
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
        let start = p.pos;
        let end = p.scan_string(start)?;
        let key = p.key(start, end)?;
        p.pos = end;
        p.skip_ws();
        if p.peek() != Some(b':') {
            return Err(p.error(p.pos, "expected `:`"));
        }
        p.pos += 1;
        p.skip_ws();
        if p.peek() == Some(b'{') {
            if open.len() + 1 >= MAX_DEPTH {
                let why = format!("objects nested deeper than {MAX_DEPTH} levels");
                return Err(p.error(p.pos, why));
            }
            p.pos += 1;
            open.push((std::mem::take(&mut current), Key::Owned(key)));
            after_member = false;
            continue;
        }
        let start = p.pos;
        let end = p.scan_value(start)?;
        let value: Value = p.leaf(start, end)?;
        current.put(Key::Owned(key), Entry::of(value));
        p.pos = end;
        after_member = true;
    }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The end (exclusive) of the string starting at `start` (a `"`).
    fn scan_string(&self, start: usize) -> Result<usize> {
        let mut i = start + 1;
        loop {
            match self.bytes.get(i) {
                None => return Err(self.error(self.bytes.len(), "EOF while parsing a string")),
                Some(b'"') => return Ok(i + 1),
                Some(b'\\') => i += 2,
                Some(_) => i += 1,
            }
        }
    }

    /// The end (exclusive) of the value (not an object) starting at `start`.
    fn scan_value(&self, start: usize) -> Result<usize> {
        match self.bytes.get(start) {
            Some(b'"') => self.scan_string(start),
            Some(b'[') => {
                // Find the matching bracket; serde_json checks what is inside
                // (and rejects nesting deeper than 128).
                let mut depth = 0usize;
                let mut i = start;
                loop {
                    match self.bytes.get(i) {
                        None => {
                            return Err(self.error(self.bytes.len(), "EOF while parsing a list"));
                        }
                        Some(b'"') => {
                            i = self.scan_string(i)?;
                            continue;
                        }
                        Some(b'[' | b'{') => depth += 1,
                        Some(b']' | b'}') => {
                            depth -= 1;
                            if depth == 0 {
                                return Ok(i + 1);
                            }
                        }
                        Some(_) => {}
                    }
                    i += 1;
                }
            }
            _ => {
                // A number or a literal: up to the next delimiter.
                let end = self.bytes[start..]
                    .iter()
                    .position(|b| b" \t\n\r,:\"[]{}".contains(b))
                    .map_or(self.bytes.len(), |n| start + n);
                if end == start {
                    return Err(self.error(start, "expected a value"));
                }
                Ok(end)
            }
        }
    }

    /// The key in `start..end` (a string, quotes included).
    fn key(&self, start: usize, end: usize) -> Result<String> {
        let inner = &self.bytes[start + 1..end - 1];
        // No escapes and no control characters: the bytes are the key.
        if inner.iter().all(|&b| b != b'\\' && b >= 0x20) {
            return Ok(self.text[start + 1..end - 1].to_owned());
        }
        self.leaf(start, end)
    }

    /// The value in `start..end`, parsed by serde_json.
    fn leaf<T: DeserializeOwned>(&self, start: usize, end: usize) -> Result<T> {
        serde_json::from_str(&self.text[start..end]).map_err(|e| {
            if e.is_eof() && end < self.bytes.len() {
                // The slice ended, not the document (`tru` before a newline).
                self.error(end, "invalid value")
            } else {
                invalid(&e, self.line_col(start))
            }
        })
    }

    /// `(line, column)` of byte `at`, both counted from 1 (as serde_json does).
    fn line_col(&self, at: usize) -> (usize, usize) {
        let before = &self.bytes[..at.min(self.bytes.len())];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let column = 1 + before.iter().rev().take_while(|&&b| b != b'\n').count();
        (line, column)
    }

    fn error(&self, at: usize, what: impl std::fmt::Display) -> Error {
        let (line, column) = self.line_col(at);
        Error::bad_state(
            "/",
            format!("not valid JSON: {what} at line {line} column {column}"),
        )
    }
}

/// A serde_json error on a slice that starts at `(line, column)` of the
/// document, reported at its position in the document.
fn invalid(error: &serde_json::Error, (line, column): (usize, usize)) -> Error {
    let text = error.to_string();
    let what = text.split(" at line ").next().unwrap_or(&text);
    let (l, c) = (error.line(), error.column());
    let (line, column) = if l <= 1 {
        (line, column + c.saturating_sub(1))
    } else {
        (line + l - 1, c)
    };
    Error::bad_state(
        "/",
        format!("not valid JSON: {what} at line {line} column {column}"),
    )
}
