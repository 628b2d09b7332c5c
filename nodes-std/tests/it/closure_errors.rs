//! The one error convention for user functions (see `NodeExt`, "Errors from
//! user functions"): every fallible entry point takes the closures people
//! write without type annotations, takes any error convertible into
//! `BoxError` (directly or through `boxed_err`), and hands the user's error
//! value to the consumer unchanged, as the source of `Error::User`.
//!
//! Most of these are compile-pass checks: if a signature stops inferring,
//! this module stops compiling.

use std::fmt;
use std::io::Read;

use nodes_std::prelude::*;
use nodes_std::{BoxError, boxed_err};

/// An error type of the user's own.
#[derive(Debug, PartialEq)]
struct Odd(u32);

impl fmt::Display for Odd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is odd", self.0)
    }
}

impl std::error::Error for Odd {}

fn even(x: u32) -> std::result::Result<u32, Odd> {
    if x.is_multiple_of(2) {
        Ok(x)
    } else {
        Err(Odd(x))
    }
}

fn read_io(bytes: &[u8]) -> std::io::Result<String> {
    let mut text = String::new();
    // `&[u8]` is a reader; bytes that are not UTF-8 are an io::Error.
    let mut reader = bytes;
    reader.read_to_string(&mut text)?;
    Ok(text)
}

/// The items of a pass, `Err`s as the user's error rendered.
fn outcomes<N: Node>(node: N) -> Vec<std::result::Result<N::Item, String>> {
    node.start()
        .unwrap()
        .map(|item| {
            item.map_err(|e| match e {
                Error::User { source, .. } => source.to_string(),
                other => panic!("not a user error: {other}"),
            })
        })
        .collect()
}

fn options() -> ParallelOptions {
    ParallelOptions::new(2)
}

// par_map: `Result<U, BoxError>`, so the error type never needs naming.

#[test]
// The closure shapes people write are what is checked here.
#[allow(clippy::redundant_closure)]
fn par_map_infers_ok_closures_and_the_ok_function() {
    let node = IterableWrapper::new(0..3u32)
        .par_map(|x| Ok(x), options())
        .unwrap();
    assert_eq!(outcomes(node), [Ok(0), Ok(1), Ok(2)]);
    let node = IterableWrapper::new(0..3u32)
        .par_map(|x| Ok(x * 2), options())
        .unwrap();
    assert_eq!(outcomes(node), [Ok(0), Ok(2), Ok(4)]);
    let node = IterableWrapper::new(0..3u32)
        .par_map(Ok, options())
        .unwrap();
    assert_eq!(outcomes(node), [Ok(0), Ok(1), Ok(2)]);
}

#[test]
fn par_map_closures_use_question_mark_on_io_serde_and_both() {
    let texts = || IterableWrapper::new(vec![&b"7"[..], &[0xff][..]]);
    let io = texts().par_map(|b| Ok(read_io(b)?), options()).unwrap();
    let io = outcomes(io);
    assert_eq!(io[0], Ok("7".to_owned()));
    assert!(io[1].as_ref().unwrap_err().contains("UTF-8"), "{io:?}");

    let json = IterableWrapper::new(vec!["[1]", "oops"])
        .par_map(|s| Ok(serde_json::from_str::<Vec<u8>>(s)?), options())
        .unwrap();
    let json = outcomes(json);
    assert_eq!(json[0], Ok(vec![1]));
    assert!(
        json[1].as_ref().unwrap_err().contains("expected"),
        "{json:?}"
    );

    let both = texts()
        .par_map(
            |b| {
                let text = read_io(b)?;
                Ok(serde_json::from_str::<u8>(&text)?)
            },
            options(),
        )
        .unwrap();
    let both = outcomes(both);
    assert_eq!(both[0], Ok(7));
    assert!(both[1].is_err());
}

#[test]
fn par_map_takes_a_function_with_its_own_error_type_through_boxed_err() {
    let node = IterableWrapper::new(0..4u32)
        .par_map(boxed_err(even), options())
        .unwrap();
    assert_eq!(
        outcomes(node),
        [
            Ok(0),
            Err("1 is odd".to_owned()),
            Ok(2),
            Err("3 is odd".to_owned())
        ]
    );
    // The source is the user's value, not a copy of its message.
    let node = IterableWrapper::new(1..2u32)
        .par_map(boxed_err(even), options())
        .unwrap();
    let mut running = node.start().unwrap();
    let Some(Err(Error::User { source, .. })) = running.next() else {
        panic!("an error expected");
    };
    assert_eq!(source.downcast_ref::<Odd>(), Some(&Odd(1)));

    // A closure with a typed error, and a std error function.
    let node = IterableWrapper::new(vec!["1", "x"])
        .par_map(boxed_err(|s: &str| s.parse::<u8>()), options())
        .unwrap();
    let parsed = outcomes(node);
    assert_eq!(parsed[0], Ok(1));
    assert!(parsed[1].is_err());
    let node = IterableWrapper::new(vec![&b"ok"[..]])
        .par_map(boxed_err(read_io), options())
        .unwrap();
    assert_eq!(outcomes(node), [Ok("ok".to_owned())]);
}

#[test]
fn par_map_still_takes_a_function_returning_box_error() {
    fn decode(x: u32) -> std::result::Result<u32, BoxError> {
        if x == 1 { Err("one".into()) } else { Ok(x) }
    }
    let node = IterableWrapper::new(0..3u32)
        .par_map(decode, options())
        .unwrap();
    assert_eq!(outcomes(node), [Ok(0), Err("one".to_owned()), Ok(2)]);
    // `boxed_err` over a BoxError function is harmless.
    let node = IterableWrapper::new(0..3u32)
        .par_map(boxed_err(decode), options())
        .unwrap();
    assert_eq!(outcomes(node), [Ok(0), Err("one".to_owned()), Ok(2)]);
}

// try_map: any `E: Into<BoxError>` as is.

#[test]
// The closure shapes people write are what is checked here.
#[allow(clippy::redundant_closure)]
fn try_map_takes_std_serde_custom_and_message_errors_as_they_are() {
    let node = IterableWrapper::new(vec!["1", "x"]).try_map(|s| s.parse::<u8>());
    let parsed = outcomes(node);
    assert_eq!(parsed[0], Ok(1));
    assert!(parsed[1].is_err());

    let node = IterableWrapper::new(0..2u32).try_map(even);
    assert_eq!(outcomes(node), [Ok(0), Err("1 is odd".to_owned())]);
    let node = IterableWrapper::new(0..2u32).try_map(|x| even(x));
    let mut running = node.start().unwrap();
    running.next();
    let Some(Err(Error::User { source, .. })) = running.next() else {
        panic!("an error expected");
    };
    assert_eq!(source.downcast_ref::<Odd>(), Some(&Odd(1)));

    let node = IterableWrapper::new(vec!["[1]", "oops"]).try_map(serde_json::from_str::<Vec<u8>>);
    assert!(outcomes(node)[1].is_err());

    let node = IterableWrapper::new(vec![&b"a"[..]]).try_map(read_io);
    assert_eq!(outcomes(node), [Ok("a".to_owned())]);

    let node = IterableWrapper::new(0..2u32).try_map(|x| if x == 0 { Ok(x) } else { Err("bad") });
    assert_eq!(outcomes(node), [Ok(0), Err("bad".to_owned())]);
}

#[test]
fn try_map_closures_name_an_error_type_only_when_nothing_else_does() {
    // `?` on one error type: named once, in the `Ok`.
    let node = IterableWrapper::new(vec![&b"1"[..]])
        .try_map(|b| Ok::<_, std::io::Error>(read_io(b)?.len()));
    assert_eq!(outcomes(node), [Ok(1)]);
    // `?` on several: the closure returns BoxError, as par_map's do.
    let node =
        IterableWrapper::new(vec![&b"1"[..]]).try_map(|b| -> std::result::Result<u8, BoxError> {
            Ok(serde_json::from_str(&read_io(b)?)?)
        });
    assert_eq!(outcomes(node), [Ok(1)]);
    // Or through `boxed_err`, like par_map.
    let node = IterableWrapper::new(0..2u32).try_map(boxed_err(even));
    assert_eq!(outcomes(node), [Ok(0), Err("1 is odd".to_owned())]);
}

// Map-style datasets: `get_item` returns BoxError, so `?` converts any error.

#[test]
fn a_dataset_uses_question_mark_on_io_and_serde_errors() {
    struct Rows(Vec<&'static [u8]>);
    impl Dataset for Rows {
        type Item = u8;
        fn len(&self) -> usize {
            self.0.len()
        }
        fn get_item(&self, index: usize) -> std::result::Result<u8, BoxError> {
            let text = read_io(self.0[index])?;
            Ok(serde_json::from_str(&text)?)
        }
    }
    let node = MapStyleWrapper::sequential(Rows(vec![b"4", &[0xff], b"x"]));
    let rows = outcomes(node);
    assert_eq!(rows[0], Ok(4));
    assert!(rows[1].as_ref().unwrap_err().contains("UTF-8"), "{rows:?}");
    assert!(rows[2].is_err());
}
