//! A serde serializer straight into [`Value`]: what a reference to a decoded resource
//! evaluates to, built without the `serde_json::Value` detour (serialize to JSON, convert
//! every node, drop the JSON), which was a tenth of a 2,000-pool spec's load.
//!
//! It gives what `Value::from_json(&serde_json::to_value(x)?)` gives, node for node:
//! numbers as f64 (a non-finite float is `null`), `None` and unit as `null`, an enum's
//! unit variant as its name and other variants as `{variant: ...}`, bytes as a list of
//! numbers, map keys as strings. Where serde_json would refuse the value (a key that is
//! not a string, a number or a bool, a 128-bit integer out of range) or treat it specially
//! (its raw JSON values), [`to_value`] falls back to serde_json itself, so the two never
//! disagree.

use std::collections::BTreeMap;
use std::fmt;

use serde::ser::{self, Serialize};

use crate::spec::value::Value;

/// `x` as a spec value; `Null` where serde_json cannot represent it either.
pub fn to_value<T: Serialize + ?Sized>(x: &T) -> Value {
    match x.serialize(ValueSer) {
        Ok(v) => v,
        Err(Unsupported) => serde_json::to_value(x).map(|j| Value::from_json(&j)).unwrap_or_default(),
    }
}

/// Something this serializer leaves to serde_json.
#[derive(Debug)]
pub struct Unsupported;

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not representable directly as a spec value")
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Unsupported
    }
}

type R = Result<Value, Unsupported>;

/// The one struct name serde_json serializes specially (`RawValue`, with `raw_value`).
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

fn float(n: f64) -> Value {
    if n.is_finite() { Value::Number(n) } else { Value::Null }
}

fn variant(name: &str, v: Value) -> Value {
    Value::Object(BTreeMap::from([(name.to_string(), v)]))
}

struct ValueSer;

impl ser::Serializer for ValueSer {
    type Ok = Value;
    type Error = Unsupported;
    type SerializeSeq = Seq;
    type SerializeTuple = Seq;
    type SerializeTupleStruct = Seq;
    type SerializeTupleVariant = Seq;
    type SerializeMap = Map;
    type SerializeStruct = Map;
    type SerializeStructVariant = Map;

    fn serialize_bool(self, v: bool) -> R {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> R {
        Ok(Value::Number(v.into()))
    }
    fn serialize_i16(self, v: i16) -> R {
        Ok(Value::Number(v.into()))
    }
    fn serialize_i32(self, v: i32) -> R {
        Ok(Value::Number(v.into()))
    }
    fn serialize_i64(self, v: i64) -> R {
        Ok(Value::Number(v as f64))
    }
    fn serialize_i128(self, v: i128) -> R {
        match (i64::try_from(v), u64::try_from(v)) {
            (Ok(i), _) => Ok(Value::Number(i as f64)),
            (_, Ok(u)) => Ok(Value::Number(u as f64)),
            _ => Err(Unsupported),
        }
    }
    fn serialize_u8(self, v: u8) -> R {
        Ok(Value::Number(v.into()))
    }
    fn serialize_u16(self, v: u16) -> R {
        Ok(Value::Number(v.into()))
    }
    fn serialize_u32(self, v: u32) -> R {
        Ok(Value::Number(v.into()))
    }
    fn serialize_u64(self, v: u64) -> R {
        Ok(Value::Number(v as f64))
    }
    fn serialize_u128(self, v: u128) -> R {
        u64::try_from(v).map(|u| Value::Number(u as f64)).map_err(|_| Unsupported)
    }
    fn serialize_f32(self, v: f32) -> R {
        Ok(float(v.into()))
    }
    fn serialize_f64(self, v: f64) -> R {
        Ok(float(v))
    }
    fn serialize_char(self, v: char) -> R {
        Ok(Value::String(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> R {
        Ok(Value::String(v.to_string()))
    }
    fn serialize_bytes(self, v: &[u8]) -> R {
        Ok(Value::List(v.iter().map(|b| Value::Number((*b).into())).collect()))
    }
    fn serialize_none(self) -> R {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> R {
        v.serialize(self)
    }
    fn serialize_unit(self) -> R {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _: &'static str) -> R {
        Ok(Value::Null)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, name: &'static str) -> R {
        Ok(Value::String(name.to_string()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> R {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(self, _: &'static str, _: u32, name: &'static str, v: &T) -> R {
        Ok(variant(name, v.serialize(self)?))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq, Unsupported> {
        Ok(Seq { items: Vec::with_capacity(len.unwrap_or(0)), variant: None })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq, Unsupported> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq, Unsupported> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        name: &'static str,
        len: usize,
    ) -> Result<Seq, Unsupported> {
        Ok(Seq { items: Vec::with_capacity(len), variant: Some(name) })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map, Unsupported> {
        Ok(Map { entries: BTreeMap::new(), key: None, variant: None })
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Map, Unsupported> {
        if name == RAW_VALUE_TOKEN {
            return Err(Unsupported);
        }
        self.serialize_map(None)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        name: &'static str,
        _: usize,
    ) -> Result<Map, Unsupported> {
        Ok(Map { entries: BTreeMap::new(), key: None, variant: Some(name) })
    }
}

struct Seq {
    items: Vec<Value>,
    variant: Option<&'static str>,
}

impl Seq {
    fn push<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Unsupported> {
        self.items.push(v.serialize(ValueSer)?);
        Ok(())
    }
    fn done(self) -> R {
        let list = Value::List(self.items);
        Ok(match self.variant {
            Some(name) => variant(name, list),
            None => list,
        })
    }
}

macro_rules! seq_impl {
    ($($tr:ident :: $m:ident),*) => {$(
        impl ser::$tr for Seq {
            type Ok = Value;
            type Error = Unsupported;
            fn $m<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Unsupported> {
                self.push(v)
            }
            fn end(self) -> R {
                self.done()
            }
        }
    )*};
}
seq_impl!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

struct Map {
    entries: BTreeMap<String, Value>,
    key: Option<String>,
    variant: Option<&'static str>,
}

impl Map {
    fn done(self) -> R {
        let object = Value::Object(self.entries);
        Ok(match self.variant {
            Some(name) => variant(name, object),
            None => object,
        })
    }
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Unsupported> {
        self.entries.insert(key.to_string(), v.serialize(ValueSer)?);
        Ok(())
    }
}

impl ser::SerializeMap for Map {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), Unsupported> {
        self.key = Some(map_key(k.serialize(ValueSer)?)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Unsupported> {
        let key = self.key.take().ok_or(Unsupported)?;
        self.entries.insert(key, v.serialize(ValueSer)?);
        Ok(())
    }
    fn end(self) -> R {
        self.done()
    }
}

impl ser::SerializeStruct for Map {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Unsupported> {
        self.field(key, v)
    }
    fn end(self) -> R {
        self.done()
    }
}

impl ser::SerializeStructVariant for Map {
    type Ok = Value;
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Unsupported> {
        self.field(key, v)
    }
    fn end(self) -> R {
        self.done()
    }
}

/// A map key as serde_json writes it: strings as they are; anything else (numbers, whose
/// text could differ from serde_json's, bools, structs) is left to serde_json.
fn map_key(k: Value) -> Result<String, Unsupported> {
    match k {
        Value::String(s) => Ok(s),
        _ => Err(Unsupported),
    }
}

#[cfg(test)]
mod tests;
