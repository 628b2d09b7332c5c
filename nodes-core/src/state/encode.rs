//! A field's value turned into an [`Entry`]: scalars, strings and empty
//! lists directly (what most nodes write in every state they take), the
//! rest through `serde_json::Value`.

use serde::Serialize;
use serde::ser::{self, Impossible, Serializer};

use super::Entry;

/// The entry holding `value`.
#[inline]
pub(super) fn entry_of<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Entry> {
    match value.serialize(Direct) {
        Ok(entry) => Ok(entry),
        Err(Indirect) => serde_json::to_value(value).map(Entry::of),
    }
}

/// A value [`Direct`] does not make: it goes through `serde_json::Value`.
#[derive(Debug, thiserror::Error)]
#[error("made through serde_json::Value")]
struct Indirect;

impl ser::Error for Indirect {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Indirect
    }
}

/// Makes the entries of values JSON holds without a container, and of an
/// empty list.
struct Direct;

type Made = Result<Entry, Indirect>;

/// An empty sequence: `[]`; a non-empty one was refused before its items.
struct EmptySeq;

impl ser::SerializeSeq for EmptySeq {
    type Ok = Entry;
    type Error = Indirect;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, _: &T) -> Result<(), Indirect> {
        Err(Indirect)
    }
    fn end(self) -> Made {
        Ok(Entry::EmptyArray)
    }
}

/// Serializer methods for what goes through `serde_json::Value`.
macro_rules! indirect {
    ($($method:ident($($arg:ty),*) -> $made:ty;)*) => {$(
        fn $method(self, $(_: $arg),*) -> Result<$made, Indirect> {
            Err(Indirect)
        }
    )*};
}

impl Serializer for Direct {
    type Ok = Entry;
    type Error = Indirect;
    type SerializeSeq = EmptySeq;
    type SerializeTuple = Impossible<Entry, Indirect>;
    type SerializeTupleStruct = Impossible<Entry, Indirect>;
    type SerializeTupleVariant = Impossible<Entry, Indirect>;
    type SerializeMap = Impossible<Entry, Indirect>;
    type SerializeStruct = Impossible<Entry, Indirect>;
    type SerializeStructVariant = Impossible<Entry, Indirect>;

    // Narrow integers, floats (a non-finite one is null), characters,
    // bytes, newtypes, variants and containers as serde_json makes them.
    indirect! {
        serialize_i8(i8) -> Entry; serialize_i16(i16) -> Entry; serialize_i32(i32) -> Entry;
        serialize_u8(u8) -> Entry; serialize_u16(u16) -> Entry; serialize_u32(u32) -> Entry;
        serialize_f32(f32) -> Entry; serialize_f64(f64) -> Entry; serialize_char(char) -> Entry;
        serialize_bytes(&[u8]) -> Entry; serialize_unit_struct(&'static str) -> Entry;
        serialize_unit_variant(&'static str, u32, &'static str) -> Entry;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct(&'static str, usize) -> Self::SerializeStruct;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }

    fn serialize_i64(self, v: i64) -> Made {
        Ok(Entry::Number(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Made {
        Ok(Entry::Number(v.into()))
    }
    fn serialize_bool(self, v: bool) -> Made {
        Ok(Entry::Bool(v))
    }
    fn serialize_str(self, v: &str) -> Made {
        Ok(Entry::Str(v.into()))
    }
    fn serialize_none(self) -> Made {
        Ok(Entry::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Made {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Made {
        Ok(Entry::Null)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Made {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Made {
        Err(Indirect)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<EmptySeq, Indirect> {
        match len {
            Some(0) => Ok(EmptySeq),
            _ => Err(Indirect),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::ser::SerializeSeq;
    use serde::{Serialize, Serializer};
    use serde_json::{Value, json};

    use crate::State;

    #[derive(Serialize)]
    struct Unit;
    #[derive(Serialize)]
    struct Wrapped(u32);
    #[derive(Serialize)]
    struct Pair {
        a: i8,
        b: Option<String>,
    }
    #[derive(Serialize)]
    enum Kind {
        Plain,
        Boxed(u8),
        Tuple(u8, u8),
        Named { x: i16 },
    }

    /// Says it has no items, then writes one.
    struct Lying;
    impl Serialize for Lying {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(0))?;
            seq.serialize_element(&7)?;
            seq.end()
        }
    }

    /// A value that cannot be serialised at all.
    struct Broken;
    impl Serialize for Broken {
        fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("broken on purpose"))
        }
    }

    /// Stores `value` both ways a state stores a field and checks each
    /// reads back as `serde_json::to_value` makes it, and writes the same
    /// JSON text.
    fn same<T: Serialize>(value: T) {
        let expected = serde_json::to_value(&value).unwrap();
        let mut state = State::new();
        state.insert("k", &value).unwrap();
        let built = crate::state::Fields::build(0, |f| f.field("k", &value)).unwrap();
        for state in [state, built] {
            assert_eq!(state.to_value(), json!({ "k": expected.clone() }));
            let text = state.to_json().unwrap();
            assert_eq!(
                text,
                serde_json::to_string(&json!({ "k": expected })).unwrap()
            );
        }
    }

    #[test]
    fn every_kind_of_value_is_stored_as_serde_json_makes_it() {
        same(true);
        same(-5i8);
        same(-300i16);
        same(-70_000i32);
        same(i64::MIN);
        same(7u8);
        same(300u16);
        same(70_000u32);
        same(u64::MAX);
        same(5u128);
        same(-1i128);
        same(1.5f32);
        same(-2.25f64);
        same(f64::NAN);
        same(f64::INFINITY);
        same('x');
        same("text");
        same(String::from("owned"));
        same(None::<u8>);
        same(Some(3u8));
        same(Some(Some("in")));
        same(());
        same(Unit);
        same(Wrapped(9));
        same(Kind::Plain);
        same(Kind::Boxed(1));
        same(Kind::Tuple(1, 2));
        same(Kind::Named { x: -1 });
        same(Vec::<u8>::new());
        same(vec![1u8, 2]);
        same([0u8; 0]);
        same((1, "a"));
        same(BTreeMap::<String, u8>::new());
        same(BTreeMap::from([("a".to_owned(), 1u8)]));
        same(Pair { a: 1, b: None });
        same(Lying);
        same(&b"bytes"[..]);
        same(Value::Null);
        same(json!({ "nested": [1, { "x": null }] }));
    }

    #[test]
    fn a_value_that_cannot_be_serialised_is_refused_at_its_key() {
        let error = State::new().insert("k", Broken).unwrap_err();
        assert_eq!(
            error.to_string(),
            "bad state at /k: cannot serialise: broken on purpose"
        );
        let error = State::new().insert("k", u128::MAX).unwrap_err();
        assert_eq!(
            error.to_string(),
            "bad state at /k: cannot serialise: number out of range"
        );
    }
}
