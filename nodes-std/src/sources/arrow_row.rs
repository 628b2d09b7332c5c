//! One row of an Arrow `RecordBatch` read as a serde type, straight from
//! the column arrays (no intermediate JSON): a row is a map from column
//! names to cells; a null cell is `None` (or a unit). A batch's top-level
//! columns are downcast once ([`Rows`]), not once per cell.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, PrimitiveArray, RecordBatch};
use arrow_array::{BooleanArray, LargeStringArray, StringArray};
use arrow_array::{Decimal128Array, TimestampMicrosecondArray, TimestampMillisecondArray};
use arrow_array::{TimestampNanosecondArray, TimestampSecondArray};
use serde::de::value::{Error as DeError, StrDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;

/// The columns of one batch, each downcast to its array type once, to
/// read its rows from.
pub(crate) struct Rows {
    names: arrow_schema::Fields,
    columns: Vec<Column>,
    /// For the struct the rows are read as, the column of each of its
    /// fields in order, when its fields are exactly the columns (then a
    /// row is read as a sequence, no name compared); else `None`.
    order: std::cell::OnceCell<Option<Vec<usize>>>,
}

/// A top-level column, and whether any of its cells is null (most have
/// none: their cells then skip the null check).
struct Column {
    has_nulls: bool,
    values: Values,
}

/// A top-level column's array: the common types by their array type,
/// others as they are (read cell by cell through [`Cell`]).
enum Values {
    Bool(BooleanArray),
    I8(PrimitiveArray<Int8Type>),
    I16(PrimitiveArray<Int16Type>),
    I32(PrimitiveArray<Int32Type>),
    I64(PrimitiveArray<Int64Type>),
    U8(PrimitiveArray<UInt8Type>),
    U16(PrimitiveArray<UInt16Type>),
    U32(PrimitiveArray<UInt32Type>),
    U64(PrimitiveArray<UInt64Type>),
    F32(PrimitiveArray<Float32Type>),
    F64(PrimitiveArray<Float64Type>),
    Str(StringArray),
    LargeStr(LargeStringArray),
    Other(ArrayRef),
}

impl Column {
    fn of(array: &ArrayRef) -> Column {
        use arrow_schema::DataType as D;
        let values = match array.data_type() {
            D::Boolean => Values::Bool(array.as_boolean().clone()),
            D::Int8 => Values::I8(array.as_primitive().clone()),
            D::Int16 => Values::I16(array.as_primitive().clone()),
            D::Int32 => Values::I32(array.as_primitive().clone()),
            D::Int64 => Values::I64(array.as_primitive().clone()),
            D::UInt8 => Values::U8(array.as_primitive().clone()),
            D::UInt16 => Values::U16(array.as_primitive().clone()),
            D::UInt32 => Values::U32(array.as_primitive().clone()),
            D::UInt64 => Values::U64(array.as_primitive().clone()),
            D::Float32 => Values::F32(array.as_primitive().clone()),
            D::Float64 => Values::F64(array.as_primitive().clone()),
            D::Utf8 => Values::Str(array.as_string().clone()),
            D::LargeUtf8 => Values::LargeStr(array.as_string().clone()),
            _ => Values::Other(array.clone()),
        };
        Column {
            has_nulls: array.null_count() > 0,
            values,
        }
    }
}

impl Rows {
    pub(crate) fn of(batch: &RecordBatch) -> Rows {
        Rows {
            names: batch.schema_ref().fields().clone(),
            columns: batch.columns().iter().map(Column::of).collect(),
            order: std::cell::OnceCell::new(),
        }
    }

    /// Row `row`, as a `T`.
    #[inline]
    pub(crate) fn row<T: de::DeserializeOwned>(&self, row: usize) -> Result<T, DeError> {
        T::deserialize(Row { rows: self, row })
    }

    fn fields(&self, row: usize) -> Fields<'_> {
        Fields {
            names: &self.names,
            columns: Columns::Typed(&self.columns),
            row,
        }
    }

    /// The column of each of `fields`, if they are exactly the columns.
    fn order_of(&self, fields: &[&str]) -> Option<Vec<usize>> {
        if fields.len() != self.names.len() {
            return None;
        }
        let column = |f: &&str| self.names.iter().position(|n| n.name() == f);
        fields.iter().map(column).collect()
    }
}

/// A row of a batch: a map of its cells by column name, or for a struct
/// whose fields are the columns, the cells in the struct's order.
struct Row<'a> {
    rows: &'a Rows,
    row: usize,
}

impl<'de> Deserializer<'de> for Row<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.rows.fields(self.row).deserialize_any(visitor)
    }

    #[inline]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let rows = self.rows;
        match rows.order.get_or_init(|| rows.order_of(fields)) {
            Some(order) => visitor.visit_seq(InOrder {
                rows,
                order,
                row: self.row,
                next: 0,
            }),
            None => rows.fields(self.row).deserialize_any(visitor),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// The cells of a row in a struct's field order.
struct InOrder<'a> {
    rows: &'a Rows,
    order: &'a [usize],
    row: usize,
    next: usize,
}

impl<'de> SeqAccess<'de> for InOrder<'_> {
    type Error = DeError;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some(&at) = self.order.get(self.next) else {
            return Ok(None);
        };
        self.next += 1;
        let cell = TypedCell {
            column: &self.rows.columns[at],
            row: self.row,
        };
        seed.deserialize(cell).map(Some).map_err(|e| {
            let name = self.rows.names[at].name();
            DeError::custom(format_args!("column `{name}`: {e}"))
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.order.len() - self.next)
    }
}

/// The columns a row's cells are in.
#[derive(Clone, Copy)]
enum Columns<'a> {
    Typed(&'a [Column]),
    Arrays(&'a [ArrayRef]),
}

impl Columns<'_> {
    /// Deserialises the cell of column `at`, row `row`.
    fn cell<'de, V: DeserializeSeed<'de>>(
        self,
        at: usize,
        row: usize,
        seed: V,
    ) -> Result<V::Value, DeError> {
        match self {
            Columns::Typed(columns) => seed.deserialize(TypedCell {
                column: &columns[at],
                row,
            }),
            Columns::Arrays(arrays) => seed.deserialize(Cell {
                array: arrays[at].as_ref(),
                row,
            }),
        }
    }
}

/// The cells of one row (of a batch or of a struct column), by name.
struct Fields<'a> {
    names: &'a arrow_schema::Fields,
    columns: Columns<'a>,
    row: usize,
}

impl<'de> Deserializer<'de> for Fields<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_map(FieldsAccess {
            fields: self,
            next: 0,
        })
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct FieldsAccess<'a> {
    fields: Fields<'a>,
    next: usize,
}

impl<'de> MapAccess<'de> for FieldsAccess<'_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(field) = self.fields.names.get(self.next) else {
            return Ok(None);
        };
        seed.deserialize(StrDeserializer::<DeError>::new(field.name()))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let at = self.next;
        self.next += 1;
        let fields = &self.fields;
        fields.columns.cell(at, fields.row, seed).map_err(|e| {
            let name = fields.names[at].name();
            DeError::custom(format_args!("column `{name}`: {e}"))
        })
    }
}

/// One cell of a column.
struct Cell<'a> {
    array: &'a dyn Array,
    row: usize,
}

impl<'de> Deserializer<'de> for Cell<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        use arrow_array::types::{BinaryType, LargeBinaryType};
        use arrow_schema::{DataType as D, TimeUnit};
        let (a, i) = (self.array, self.row);
        if a.is_null(i) {
            return visitor.visit_unit();
        }
        match a.data_type() {
            D::Null => visitor.visit_unit(),
            D::Boolean => visitor.visit_bool(a.as_boolean().value(i)),
            D::Int8 => visitor.visit_i64(a.as_primitive::<Int8Type>().value(i).into()),
            D::Int16 => visitor.visit_i64(a.as_primitive::<Int16Type>().value(i).into()),
            D::Int32 => visitor.visit_i64(a.as_primitive::<Int32Type>().value(i).into()),
            D::Int64 => visitor.visit_i64(a.as_primitive::<Int64Type>().value(i)),
            D::UInt8 => visitor.visit_u64(a.as_primitive::<UInt8Type>().value(i).into()),
            D::UInt16 => visitor.visit_u64(a.as_primitive::<UInt16Type>().value(i).into()),
            D::UInt32 => visitor.visit_u64(a.as_primitive::<UInt32Type>().value(i).into()),
            D::UInt64 => visitor.visit_u64(a.as_primitive::<UInt64Type>().value(i)),
            D::Float32 => visitor.visit_f64(a.as_primitive::<Float32Type>().value(i).into()),
            D::Float64 => visitor.visit_f64(a.as_primitive::<Float64Type>().value(i)),
            // Days and milliseconds since the epoch, as stored.
            D::Date32 => visitor.visit_i64(a.as_primitive::<Date32Type>().value(i).into()),
            D::Date64 => visitor.visit_i64(a.as_primitive::<Date64Type>().value(i)),
            D::Timestamp(unit, _) => visitor.visit_i64(match unit {
                TimeUnit::Second => downcast::<TimestampSecondArray>(a)?.value(i),
                TimeUnit::Millisecond => downcast::<TimestampMillisecondArray>(a)?.value(i),
                TimeUnit::Microsecond => downcast::<TimestampMicrosecondArray>(a)?.value(i),
                TimeUnit::Nanosecond => downcast::<TimestampNanosecondArray>(a)?.value(i),
            }),
            D::Decimal128(..) => visitor.visit_i128(downcast::<Decimal128Array>(a)?.value(i)),
            D::Utf8 => visitor.visit_str(a.as_string::<i32>().value(i)),
            D::LargeUtf8 => visitor.visit_str(a.as_string::<i64>().value(i)),
            D::Utf8View => visitor.visit_str(a.as_string_view().value(i)),
            D::Binary => visitor.visit_bytes(a.as_bytes::<BinaryType>().value(i)),
            D::LargeBinary => visitor.visit_bytes(a.as_bytes::<LargeBinaryType>().value(i)),
            D::BinaryView => visitor.visit_bytes(a.as_binary_view().value(i)),
            D::List(_) => visitor.visit_seq(Items::of(a.as_list::<i32>().value(i))),
            D::LargeList(_) => visitor.visit_seq(Items::of(a.as_list::<i64>().value(i))),
            D::FixedSizeList(..) => visitor.visit_seq(Items::of(a.as_fixed_size_list().value(i))),
            D::Struct(fields) => Fields {
                names: fields,
                columns: Columns::Arrays(a.as_struct().columns()),
                row: i,
            }
            .deserialize_any(visitor),
            other => Err(DeError::custom(format_args!(
                "Arrow type {other} is not read into serde types: read RecordBatches (`read_parquet_batches`)"
            ))),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.array.is_null(self.row) {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// One cell of a downcast column.
struct TypedCell<'a> {
    column: &'a Column,
    row: usize,
}

impl TypedCell<'_> {
    #[inline]
    fn is_null(&self) -> bool {
        self.column.has_nulls && self.null_in_column()
    }

    fn null_in_column(&self) -> bool {
        let i = self.row;
        match &self.column.values {
            Values::Bool(a) => a.is_null(i),
            Values::I8(a) => a.is_null(i),
            Values::I16(a) => a.is_null(i),
            Values::I32(a) => a.is_null(i),
            Values::I64(a) => a.is_null(i),
            Values::U8(a) => a.is_null(i),
            Values::U16(a) => a.is_null(i),
            Values::U32(a) => a.is_null(i),
            Values::U64(a) => a.is_null(i),
            Values::F32(a) => a.is_null(i),
            Values::F64(a) => a.is_null(i),
            Values::Str(a) => a.is_null(i),
            Values::LargeStr(a) => a.is_null(i),
            Values::Other(a) => a.is_null(i),
        }
    }
}

/// `deserialize_*` methods that read a column of the hinted type without
/// the general match (a null cell, or another type, takes it).
macro_rules! hinted {
    ($($method:ident: $variant:ident => $visit:ident),* $(,)?) => {
        $(
            #[inline]
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
                match &self.column.values {
                    Values::$variant(a) if !self.column.has_nulls => visitor.$visit(a.value(self.row)),
                    _ => self.deserialize_any(visitor),
                }
            }
        )*
    };
}

impl<'de> Deserializer<'de> for TypedCell<'_> {
    type Error = DeError;

    #[inline(never)]
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.is_null() {
            return visitor.visit_unit();
        }
        let i = self.row;
        match &self.column.values {
            Values::Bool(a) => visitor.visit_bool(a.value(i)),
            Values::I8(a) => visitor.visit_i64(a.value(i).into()),
            Values::I16(a) => visitor.visit_i64(a.value(i).into()),
            Values::I32(a) => visitor.visit_i64(a.value(i).into()),
            Values::I64(a) => visitor.visit_i64(a.value(i)),
            Values::U8(a) => visitor.visit_u64(a.value(i).into()),
            Values::U16(a) => visitor.visit_u64(a.value(i).into()),
            Values::U32(a) => visitor.visit_u64(a.value(i).into()),
            Values::U64(a) => visitor.visit_u64(a.value(i)),
            Values::F32(a) => visitor.visit_f64(a.value(i).into()),
            Values::F64(a) => visitor.visit_f64(a.value(i)),
            Values::Str(a) => visitor.visit_str(a.value(i)),
            Values::LargeStr(a) => visitor.visit_str(a.value(i)),
            Values::Other(a) => Cell {
                array: a.as_ref(),
                row: i,
            }
            .deserialize_any(visitor),
        }
    }

    #[inline]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    // The hinted type first: a row then inlines one arm per field.
    hinted! {
        deserialize_bool: Bool => visit_bool,
        deserialize_i64: I64 => visit_i64,
        deserialize_u64: U64 => visit_u64,
        deserialize_f64: F64 => visit_f64,
        deserialize_str: Str => visit_str,
        deserialize_string: Str => visit_str,
    }

    forward_to_deserialize_any! {
        i8 i16 i32 i128 u8 u16 u32 u128 f32 char
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

fn downcast<T: 'static>(a: &dyn Array) -> Result<&T, DeError> {
    a.as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| DeError::custom(format_args!("unexpected array for {}", a.data_type())))
}

/// The items of one list cell.
struct Items {
    values: ArrayRef,
    next: usize,
}

impl Items {
    fn of(values: ArrayRef) -> Items {
        Items { values, next: 0 }
    }
}

impl<'de> SeqAccess<'de> for Items {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        if self.next == self.values.len() {
            return Ok(None);
        }
        let row = self.next;
        self.next += 1;
        seed.deserialize(Cell {
            array: self.values.as_ref(),
            row,
        })
        .map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.values.len() - self.next)
    }
}
