//! [`State`]'s accessors, paths and parsing, and its non-recursive walks
//! over deep and wide states.

use nodes_std::{Error, Result, State};
use serde_json::{Map, Value};

/// Children name their paths at every depth, after their parents are
/// gone, and after the parent's entries changed.
#[test]
fn paths_read_by_position_name_the_keys() {
    let json = r#"{"m": {"a/b": {"x": {"y": 1}}, "c": {"z": 2}, "wide": {"k0": {}, "k1": {}}}}"#;
    let root = State::from_json(json).unwrap();
    let m = root.child("m").unwrap();
    let ab = m.child("a/b").unwrap();
    assert_eq!(ab.path(), "/m/a~1b");
    let x = ab.child("x").unwrap();
    assert_eq!(x.path(), "/m/a~1b/x");
    assert_eq!(x.child("y").unwrap_err().state_path(), Some("/m/a~1b/x/y"));
    assert_eq!(m.child("c").unwrap().path_of("z"), "/m/c/z");
    let wide = m.child("wide").unwrap();
    let k1 = wide.child("k1").unwrap();
    let k0 = wide.child("k0").unwrap();
    drop((root, m, wide));
    assert_eq!((k0.path(), k1.path()), ("/m/wide/k0", "/m/wide/k1"));
    // The same path, other entries: its children still name their keys.
    let mut changed = State::from_json(json).unwrap().child("m").unwrap();
    let before = changed.child("c").unwrap();
    changed.insert("new", 1).unwrap();
    changed.insert_child("d", State::new());
    assert_eq!(changed.child("d").unwrap().path(), "/m/d");
    assert_eq!(changed.child("c").unwrap().path(), "/m/c");
    assert_eq!(before.path(), "/m/c");
}

#[test]
fn paths_are_json_pointers_with_escaped_keys() {
    let state = State::from_json(r#"{"a/b": {"c~d": {"e": 1}}}"#).unwrap();
    let inner = state.child("a/b").unwrap().child("c~d").unwrap();
    assert_eq!(inner.path(), "/a~1b/c~0d");
    let err = inner.get::<String>("e").unwrap_err();
    assert_eq!(err.state_path(), Some("/a~1b/c~0d/e"));
    let value = state.to_value();
    assert_eq!(value.pointer("/a~1b/c~0d/e"), Some(&serde_json::json!(1)));
    assert_eq!(state.path_of("x/y"), "/x~1y");
}

#[test]
fn wrong_type_names_path_and_types() {
    let mut inner = State::new();
    inner.insert("n", "seven").unwrap();
    let mut outer = State::new();
    outer.insert_child("source", inner);
    let err = outer.child("source").unwrap().get::<u64>("n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad state at /source/n: expected u64, found string \"seven\""
    );
}

#[test]
fn missing_key_and_non_object_child() {
    let s = State::new().with("x", 1).unwrap();
    assert_eq!(s.get::<u64>("y").unwrap_err().state_path(), Some("/y"));
    let err = s.child("x").unwrap_err();
    assert_eq!(err.state_path(), Some("/x"));
    assert!(err.to_string().contains("found number 1"), "{err}");
}

#[test]
fn serialises_as_bare_object() {
    let s = State::new()
        .with("a", 1)
        .unwrap()
        .with("b", [1, 2])
        .unwrap();
    assert_eq!(s.to_json().unwrap(), r#"{"a":1,"b":[1,2]}"#);
    assert_eq!(State::from_json(r#"{"a":1,"b":[1,2]}"#).unwrap(), s);
    assert!(State::from_json("[1]").unwrap_err().is_bad_state());
    assert!(State::from_json("{").unwrap_err().is_bad_state());
}

/// Through serde_json, for comparison (shallow documents only).
fn via_serde(json: &str) -> Result<State> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| Error::bad_state("/", format!("not valid JSON: {e}")))?;
    State::from_value(value)
}

#[test]
fn parses_like_serde_json() {
    for json in [
        "{}",
        " { } ",
        r#"{"a":1,"b":[1,2,{"c":null}],"d":{"e":"x\"}\u00e9\ud83d\ude00","f":{}}}"#,
        "{\"n\":-1.5e3,\"t\":true,\"f\":false,\"z\":null,\"big\":18446744073709551615}",
        "{\n  \"a\" : { \"b\" :\t[ ] } ,\r\n \"c\":\"}{][,:\" }\n",
        r#"{"dup":1,"other":2,"dup":{"x":3}}"#,
        r#"{"k\u0041":"v","":{"":{}}}"#,
    ] {
        let ours = State::from_json(json).unwrap();
        let theirs = via_serde(json).unwrap();
        assert_eq!(ours, theirs, "{json}");
        assert_eq!(ours.to_json().unwrap(), theirs.to_json().unwrap(), "{json}");
        assert_eq!(ours.to_value(), theirs.to_value(), "{json}");
    }
    let dup = State::from_json(r#"{"dup":1,"other":2,"dup":{"x":3}}"#).unwrap();
    assert_eq!(dup.keys().collect::<Vec<_>>(), ["dup", "other"]);
    assert_eq!(dup.child("dup").unwrap().get::<u64>("x").unwrap(), 3);
}

#[test]
fn rejects_what_serde_json_rejects() {
    for json in [
        "",
        "{",
        "}",
        "{,}",
        r#"{"a"}"#,
        r#"{"a":}"#,
        r#"{"a":1,}"#,
        r#"{"a":1 "b":2}"#,
        r#"{"a":1}}"#,
        r#"{"a":1} x"#,
        r#"{a:1}"#,
        r#"{"a":tru}"#,
        r#"{"a":01}"#,
        r#"{"a":1.}"#,
        r#"{"a":[1,]}"#,
        r#"{"a":[1}"#,
        r#"{"a":"x}"#,
        r#"{"a":"\q"}"#,
        "{\"a\":\"tab\there\"}",
        r#"{"a":"\ud800"}"#,
        r#"{"a":{"b":1}"#,
        r#"{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"#,
        "[1]",
        "3",
        "\"{}\"",
    ] {
        assert!(via_serde(json).is_err(), "serde_json accepts {json}");
        let err = State::from_json(json).unwrap_err();
        assert!(err.is_bad_state(), "{json}: {err}");
        assert_eq!(err.state_path(), Some("/"), "{json}");
    }
    let err = State::from_json("{\n  \"a\": 1,\n  \"b\": tru\n}").unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad state at /: not valid JSON: invalid value at line 3 column 11"
    );
    let err = State::from_json("{\"a\": 1 2}").unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad state at /: not valid JSON: expected `,` or `}` at line 1 column 9"
    );
}

/// `{"k":{"k":...{"leaf":1}...}}`, `depth` objects in all.
fn nested_json(depth: usize) -> String {
    let mut json = "{\"k\":".repeat(depth - 1);
    json.push_str("{\"leaf\":1}");
    json.push_str(&"}".repeat(depth - 1));
    json
}

/// Runs on the test thread's own stack (2 MiB under `cargo test`): deep
/// states parse, compare, walk and drop without recursion.
#[test]
fn deep_states_need_no_stack() {
    let depth = 200_000;
    let json = nested_json(depth);
    let state = State::from_json(&json).unwrap();
    assert_eq!(state, State::from_json(&json).unwrap());
    let mut other =
        State::from_json(&nested_json(depth).replace("\"leaf\":1", "\"leaf\":2")).unwrap();
    assert_ne!(state, other);
    // Walk to the bottom, each level a cheap step, paths still exact.
    let mut at = state.child("k").unwrap();
    for _ in 2..depth {
        at = at.child("k").unwrap();
    }
    assert_eq!(at.get::<u64>("leaf").unwrap(), 1);
    assert_eq!(at.path().len(), 2 * (depth - 1));
    assert_eq!(
        at.path_of("leaf"),
        format!("{}/leaf", "/k".repeat(depth - 1))
    );
    // Shown, measured, and read as a plain value, without recursion
    // (decoding a non-recursive type from it fails at once).
    let shown = format!("{state}");
    assert_eq!(shown, json);
    assert_eq!(format!("{state:?}"), format!("State({json})"));
    assert_eq!(state.depth(), depth);
    assert_eq!(at.depth(), 1);
    let err = state.get::<u64>("k").unwrap_err();
    assert_eq!(err.state_path(), Some("/k"));
    assert!(err.to_string().contains("found an object"), "{err}");
    // An in-memory state holding a deep plain value drops it without
    // recursion too.
    let deep_array = (0..depth).fold(serde_json::json!(1), |v, _| Value::Array(vec![v]));
    let mut holder = Map::new();
    holder.insert("v".to_owned(), deep_array);
    drop(State::from_value(Value::Object(holder)).unwrap());
    let shallow = State::from_json(&nested_json(100)).unwrap();
    assert_eq!(
        shallow.value("k").unwrap(),
        serde_json::from_str::<Value>(&nested_json(99)).unwrap()
    );
    drop(state);
    assert_eq!(at.get::<u64>("leaf").unwrap(), 1);
    // A state built by inserting children drops without recursion too.
    for _ in 0..depth {
        let mut parent = State::new();
        parent.insert_child("k", other);
        other = parent;
    }
    drop(other);
    drop(at);
}

#[test]
fn depth_is_bounded() {
    let err = State::from_json(&nested_json(State::MAX_DEPTH + 1)).unwrap_err();
    assert!(err.is_bad_state(), "{err}");
    assert!(
        err.to_string()
            .contains("nested deeper than 1000000 levels"),
        "{err}"
    );
}

#[test]
fn wide_states_find_keys_and_keep_order() {
    let n = 10_000;
    let mut json = String::from("{");
    for i in 0..n {
        json.push_str(&format!("\"key{i}\":{{\"i\":{i}}},"));
    }
    json.push_str("\"key7\":{\"i\":-7}}");
    let state = State::from_json(&json).unwrap();
    assert_eq!(state.len(), n);
    assert_eq!(state.keys().nth(7), Some("key7"));
    assert_eq!(state.child("key7").unwrap().get::<i64>("i").unwrap(), -7);
    for i in (0..n).step_by(97) {
        assert_eq!(
            state.child(&format!("key{i}")).unwrap().path(),
            format!("/key{i}")
        );
    }
    assert!(!state.contains("key10000"));
    let names: Vec<String> = (0..n).map(|i| format!("key{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    state.expect_keys("N", &names).unwrap();
    assert_eq!(
        state
            .expect_keys("N", &names[1..])
            .unwrap_err()
            .state_path(),
        Some("/key0")
    );
    // Built by inserts, looked up and replaced through the index.
    let mut built = State::new();
    for i in (0..n).rev() {
        built.insert(format!("key{i}"), i).unwrap();
    }
    built.insert("key7", -7).unwrap();
    assert_eq!(built.len(), n);
    assert_eq!(built.get::<i64>("key7").unwrap(), -7);
    assert_eq!(built.clone().get::<i64>("key9").unwrap(), 9);
    // Equality ignores key order, as JSON objects do.
    let mut reversed = State::new();
    for i in 0..n {
        let value = if i == 7 { -7 } else { i as i64 };
        reversed.insert(format!("key{i}"), value).unwrap();
    }
    assert_eq!(built, reversed);
}

#[test]
fn versions_and_keys() {
    let mut s = State::new().with("a", 1).unwrap();
    s.set_version(2).unwrap();
    s.expect_version("N", 2).unwrap();
    let err = s.expect_version("N", 3).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad state at /version: N expects state version 3, found 2"
    );
    assert!(s.expect_keys("N", &["a", "version"]).is_ok());
    let err = s.expect_keys("N", &["b"]).unwrap_err();
    assert_eq!(err.state_path(), Some("/a"));
}
