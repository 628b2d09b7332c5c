//! Writing a field that serialises as JSON scalars without building JSON.
//!
//! Most fields a node saves are counters and flags, or small structs of
//! them (a generator's seed, stream and position). Writing one through
//! `serde_json::to_value` walks serde's value serializer and builds a
//! `Value` (for a struct, a map with its keys as strings) only for the
//! record to take it apart again, and a pipeline's state writes a dozen
//! such fields per capture: the realistic pipeline's state took 6,207
//! instructions with that route and 4,509 with this one (callgrind). [`write_steps`] asks the
//! field to serialise itself into the record's steps directly: a scalar as
//! one inline step, a struct of scalars (and of such structs) as a nested
//! state of inline steps, exactly as the `to_value` route would have stored
//! them. Anything else (strings, sequences, maps, enums) is declined, the
//! steps written so far are taken back, and the caller takes the `to_value`
//! route.

use std::fmt;

use serde::Serialize;
use serde::ser::{self, Impossible};

use super::flat::{Inline, Step};

/// Appends `value` under `key` to `steps` if it serialises as scalars and
/// structs of them (`None`, `()` and a non-finite float as null, as
/// `to_value` writes them); `false` (with `steps` as it was) otherwise.
pub(super) fn write_steps<T: Serialize + ?Sized>(
    value: &T,
    key: &'static str,
    steps: &mut Vec<Step>,
) -> bool {
    let mark = steps.len();
    let written = value.serialize(Steps { steps, key }).is_ok();
    if !written {
        steps.truncate(mark);
    }
    written
}

/// The field is not made of scalars (the only error here).
#[derive(Debug)]
struct Declined;

impl fmt::Display for Declined {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not made of scalars")
    }
}

impl std::error::Error for Declined {}

impl ser::Error for Declined {
    fn custom<M: fmt::Display>(_message: M) -> Self {
        Declined
    }
}

/// Writes one value under `key`.
struct Steps<'a> {
    steps: &'a mut Vec<Step>,
    key: &'static str,
}

impl Steps<'_> {
    fn inline(self, inline: Inline) -> Result<(), Declined> {
        self.steps.push(Step::Inline(self.key, inline));
        Ok(())
    }

    /// A signed integer as `to_value` stores it: a non-negative one as
    /// unsigned.
    fn signed(self, i: i64) -> Result<(), Declined> {
        self.inline(u64::try_from(i).map_or(Inline::NegInt(i), Inline::PosInt))
    }

    /// A float as `to_value` stores it: a non-finite one as null.
    fn float(self, f: f64) -> Result<(), Declined> {
        self.inline(if f.is_finite() {
            Inline::Float(f)
        } else {
            Inline::Null
        })
    }
}

/// The fields of a struct, each written under its name.
struct Fields<'a> {
    steps: &'a mut Vec<Step>,
}

impl ser::SerializeStruct for Fields<'_> {
    type Ok = ();
    type Error = Declined;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Declined> {
        value.serialize(Steps {
            steps: self.steps,
            key,
        })
    }

    fn end(self) -> Result<(), Declined> {
        self.steps.push(Step::Close);
        Ok(())
    }
}

impl<'a> ser::Serializer for Steps<'a> {
    type Ok = ();
    type Error = Declined;
    type SerializeSeq = Impossible<(), Declined>;
    type SerializeTuple = Impossible<(), Declined>;
    type SerializeTupleStruct = Impossible<(), Declined>;
    type SerializeTupleVariant = Impossible<(), Declined>;
    type SerializeMap = Impossible<(), Declined>;
    type SerializeStruct = Fields<'a>;
    type SerializeStructVariant = Impossible<(), Declined>;

    fn serialize_bool(self, v: bool) -> Result<(), Declined> {
        self.inline(Inline::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<(), Declined> {
        self.signed(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Declined> {
        self.signed(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Declined> {
        self.signed(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Declined> {
        self.signed(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Declined> {
        self.inline(Inline::PosInt(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Declined> {
        self.inline(Inline::PosInt(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Declined> {
        self.inline(Inline::PosInt(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<(), Declined> {
        self.inline(Inline::PosInt(v))
    }
    fn serialize_f32(self, v: f32) -> Result<(), Declined> {
        self.float(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Declined> {
        self.float(v)
    }
    fn serialize_none(self) -> Result<(), Declined> {
        self.inline(Inline::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Declined> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Declined> {
        self.inline(Inline::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Declined> {
        self.inline(Inline::Null)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Declined> {
        value.serialize(self)
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Fields<'a>, Declined> {
        self.steps.push(Step::Open(self.key));
        Ok(Fields { steps: self.steps })
    }

    // Everything else is declined: the caller takes the `to_value` route.
    fn serialize_i128(self, _v: i128) -> Result<(), Declined> {
        Err(Declined)
    }
    fn serialize_u128(self, _v: u128) -> Result<(), Declined> {
        Err(Declined)
    }
    fn serialize_char(self, _v: char) -> Result<(), Declined> {
        Err(Declined)
    }
    fn serialize_str(self, _v: &str) -> Result<(), Declined> {
        Err(Declined)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Declined> {
        Err(Declined)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<(), Declined> {
        Err(Declined)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Declined> {
        Err(Declined)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Declined> {
        Err(Declined)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Declined> {
        Err(Declined)
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Declined> {
        Err(Declined)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Declined> {
        Err(Declined)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Declined> {
        Err(Declined)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Declined> {
        Err(Declined)
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

    /// What a state written field by field stores, as JSON.
    fn through_writer<T: Serialize>(value: &T) -> serde_json::Value {
        let mut out = crate::StateWriter::new();
        out.put_field("v", value).unwrap();
        out.finish().into_value()
    }

    /// Whether `value` takes the step route.
    fn as_steps<T: Serialize + ?Sized>(value: &T) -> bool {
        let mut steps = Vec::new();
        let written = write_steps(value, "v", &mut steps);
        assert!(written || steps.is_empty(), "declined steps are taken back");
        written
    }

    #[derive(Debug, Serialize)]
    struct Meters(u32);

    #[derive(Debug, Serialize)]
    struct Unit;

    #[derive(Debug, Serialize)]
    struct Position {
        seed: u64,
        word_pos: u64,
        skipped: Option<u64>,
        inner: Flags,
    }

    #[derive(Debug, Serialize)]
    struct Flags {
        ended: bool,
        rate: f64,
    }

    #[derive(Debug, Serialize)]
    struct Named {
        count: u64,
        name: String,
    }

    #[derive(Debug, Serialize)]
    struct Empty {}

    fn position() -> Position {
        Position {
            seed: 7,
            word_pos: 1 << 40,
            skipped: None,
            inner: Flags {
                ended: true,
                rate: 0.25,
            },
        }
    }

    #[test]
    fn scalars_and_structs_of_them_are_stored_as_the_json_route_stores_them() {
        fn same<T: Serialize + fmt::Debug>(value: T) {
            assert!(as_steps(&value), "{value:?} is made of scalars");
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
        same(Unit);
        same(Meters(4));
        same(Some(Some(false)));
        same(position());
        same(Some(position()));
        same(Empty {});
    }

    #[test]
    fn anything_else_is_declined_and_stored_as_json() {
        fn declined<T: Serialize + fmt::Debug>(value: T) {
            assert!(!as_steps(&value), "{value:?} is declined");
            assert_eq!(through_writer(&value), through_json(&value), "{value:?}");
        }
        declined("text");
        declined('c');
        declined(vec![1u64]);
        declined(Vec::<u64>::new());
        declined(BTreeMap::from([("a", 1)]));
        declined(json!({"a": 1}));
        declined(1u128);
        declined(Some("x"));
        // A struct with one field that is not a scalar, after some that are.
        declined(Named {
            count: 3,
            name: "n".into(),
        });
    }
}
