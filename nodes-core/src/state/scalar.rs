//! Reading a field that serialises as a JSON scalar without building JSON.
//!
//! Most fields a node saves are counters and flags. Writing one through
//! `serde_json::to_value` walks serde's value serializer and builds a
//! `Value` only for the record to take it apart again; that was a few
//! hundred instructions per field, and a pipeline's state writes a dozen
//! per capture. [`probe`] asks the field to serialise itself into a
//! serializer that accepts scalars only and answers with the record's
//! inline step, exactly as the `to_value` route would have stored it;
//! anything else (strings, sequences, maps, structs) is declined, and the
//! caller takes the `to_value` route.

use std::fmt;

use serde::Serialize;
use serde::ser::{self, Impossible};

use super::flat::Inline;

/// The field's inline step, if it serialises as a number, a bool or null
/// (`None`, `()`, a non-finite float, as `to_value` writes them); `None`
/// for anything else.
pub(super) fn probe<T: Serialize + ?Sized>(value: &T) -> Option<Inline> {
    value.serialize(ScalarProbe).ok()
}

/// The field is not a scalar (the only error the probe gives).
#[derive(Debug)]
pub(super) struct NotScalar;

impl fmt::Display for NotScalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a scalar")
    }
}

impl std::error::Error for NotScalar {}

impl ser::Error for NotScalar {
    fn custom<M: fmt::Display>(_message: M) -> Self {
        NotScalar
    }
}

struct ScalarProbe;

/// A signed integer as `to_value` stores it: non-negative ones as unsigned.
fn signed(i: i64) -> Inline {
    u64::try_from(i).map_or(Inline::NegInt(i), Inline::PosInt)
}

/// A float as `to_value` stores it: a non-finite one as null.
fn float(f: f64) -> Inline {
    if f.is_finite() {
        Inline::Float(f)
    } else {
        Inline::Null
    }
}

impl ser::Serializer for ScalarProbe {
    type Ok = Inline;
    type Error = NotScalar;
    type SerializeSeq = Impossible<Inline, NotScalar>;
    type SerializeTuple = Impossible<Inline, NotScalar>;
    type SerializeTupleStruct = Impossible<Inline, NotScalar>;
    type SerializeTupleVariant = Impossible<Inline, NotScalar>;
    type SerializeMap = Impossible<Inline, NotScalar>;
    type SerializeStruct = Impossible<Inline, NotScalar>;
    type SerializeStructVariant = Impossible<Inline, NotScalar>;

    fn serialize_bool(self, v: bool) -> Result<Inline, NotScalar> {
        Ok(Inline::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Inline, NotScalar> {
        Ok(signed(v.into()))
    }
    fn serialize_i16(self, v: i16) -> Result<Inline, NotScalar> {
        Ok(signed(v.into()))
    }
    fn serialize_i32(self, v: i32) -> Result<Inline, NotScalar> {
        Ok(signed(v.into()))
    }
    fn serialize_i64(self, v: i64) -> Result<Inline, NotScalar> {
        Ok(signed(v))
    }
    fn serialize_u8(self, v: u8) -> Result<Inline, NotScalar> {
        Ok(Inline::PosInt(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<Inline, NotScalar> {
        Ok(Inline::PosInt(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<Inline, NotScalar> {
        Ok(Inline::PosInt(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<Inline, NotScalar> {
        Ok(Inline::PosInt(v))
    }
    fn serialize_f32(self, v: f32) -> Result<Inline, NotScalar> {
        Ok(float(v.into()))
    }
    fn serialize_f64(self, v: f64) -> Result<Inline, NotScalar> {
        Ok(float(v))
    }
    fn serialize_none(self) -> Result<Inline, NotScalar> {
        Ok(Inline::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Inline, NotScalar> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Inline, NotScalar> {
        Ok(Inline::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Inline, NotScalar> {
        Ok(Inline::Null)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Inline, NotScalar> {
        value.serialize(self)
    }

    // Everything else is declined: the caller takes the `to_value` route.
    fn serialize_i128(self, _v: i128) -> Result<Inline, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_u128(self, _v: u128) -> Result<Inline, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_char(self, _v: char) -> Result<Inline, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_str(self, _v: &str) -> Result<Inline, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<Inline, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<Inline, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<Inline, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, NotScalar> {
        Err(NotScalar)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, NotScalar> {
        Err(NotScalar)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::State;

    /// What the `to_value` route stores for `value`, as a state's JSON.
    fn through_json<T: Serialize>(value: &T) -> serde_json::Value {
        let mut state = State::new();
        state
            .insert("v", serde_json::to_value(value).unwrap())
            .unwrap();
        state.into_value()
    }

    /// What a state written field by field stores (the probe's route for
    /// a scalar), as JSON.
    fn through_writer<T: Serialize>(value: &T) -> serde_json::Value {
        let mut out = crate::StateWriter::new();
        out.put_field("v", value).unwrap();
        out.finish().into_value()
    }

    #[derive(Debug, Serialize)]
    struct Meters(u32);

    #[derive(Serialize)]
    struct Unit;

    #[test]
    fn scalars_are_stored_as_the_json_route_stores_them() {
        fn same<T: Serialize + fmt::Debug>(value: T) {
            assert!(probe(&value).is_some(), "{value:?} is a scalar");
            assert_eq!(through_writer(&value), through_json(&value), "{value:?}");
        }
        same(0u64);
        same(u64::MAX);
        same(7u8);
        same(-1i64);
        same(i64::MIN);
        same(5i32);
        same(true);
        same(1.5f64);
        same(0.1f32);
        same(f64::NAN);
        same(f64::INFINITY);
        same(Option::<u64>::None);
        same(Some(3u64));
        same(());
        same(Meters(4));
        same(Some(Some(false)));
    }

    #[test]
    fn anything_else_is_declined() {
        assert!(probe("text").is_none());
        assert!(probe(&'c').is_none());
        assert!(probe(&vec![1u64]).is_none());
        assert!(probe(&Vec::<u64>::new()).is_none());
        assert!(probe(&BTreeMap::from([("a", 1)])).is_none());
        assert!(probe(&json!({"a": 1})).is_none());
        assert!(probe(&1u128).is_none());
        assert!(probe(&Unit).is_some());
        assert!(probe(&Some("x")).is_none());
        // Declined fields still go through, as JSON.
        assert_eq!(through_writer(&vec![1u64]), json!({"v": [1]}));
        assert_eq!(through_writer(&Vec::<u64>::new()), json!({"v": []}));
        assert_eq!(through_writer(&"text"), json!({"v": "text"}));
    }
}
