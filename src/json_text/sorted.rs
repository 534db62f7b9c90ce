//! Serializing straight to canonical text ([`to_sorted`]): what serializing to text and
//! canonicalizing that text gives (object keys sorted, the last of repeated keys kept,
//! each scalar printed by `serde_json`), in one pass. Each object's members are written
//! in the order they come, and rearranged only when they did not come sorted.
//!
//! Why: a plan makes each pool's configuration text to compare it with the recorded one;
//! serializing and then parsing again was a third of a no-op plan's diff at 2,000 pools.
//!
//! It covers what configurations use; anything else (a key that is not text, or one that
//! JSON escapes; an `f32`, a 128-bit integer, bytes) is refused with an error, and
//! [`JsonText::to_json`](super::JsonText::to_json) then takes the two-pass way.

use std::ops::Range;

use serde::ser::{self, Error as _, Impossible, Serialize};
use serde_json::Error;

/// The canonical text of `v`, or an error for what this serializer leaves to the two-pass way.
pub(super) fn to_sorted<T: Serialize + ?Sized>(v: &T) -> Result<String, Error> {
    let mut out = Vec::with_capacity(256);
    write_sorted(v, &mut out)?;
    String::from_utf8(out).map_err(Error::custom)
}

/// [`to_sorted`]'s text, written at the end of `out` (UTF-8, as `to_sorted` checks).
pub(super) fn write_sorted<T: Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) -> Result<(), Error> {
    v.serialize(Sorted(out))
}

fn unsupported(what: &str) -> Error {
    Error::custom(format!("{what} is left to the two-pass way"))
}

/// Writes one value's canonical text at the end of its buffer.
struct Sorted<'a>(&'a mut Vec<u8>);

impl<'a> Sorted<'a> {
    fn scalar<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        serde_json::to_writer(self.0, v)
    }

    /// An array or object opened with `open`, inside `{"variant":` when `variant` names one.
    fn compound(self, open: u8, variant: Option<&str>) -> Result<Compound<'a>, Error> {
        let out = self.0;
        if let Some(variant) = variant {
            out.push(b'{');
            serde_json::to_writer(&mut *out, variant)?;
            out.push(b':');
        }
        out.push(open);
        let body = out.len();
        Ok(Compound { out, body, members: Vec::new(), in_order: true, key: None, variant: variant.is_some() })
    }
}

/// An array or object being written: for an object, each member's key text (between its
/// quotes) and where its `"key":value` text lies.
struct Compound<'a> {
    out: &'a mut Vec<u8>,
    body: usize,
    members: Vec<(Range<usize>, Range<usize>)>,
    in_order: bool,
    /// The member whose key is written and whose value is next: its key and start.
    key: Option<(Range<usize>, usize)>,
    variant: bool,
}

impl Compound<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        if self.out.len() > self.body {
            self.out.push(b',');
        }
        v.serialize(Sorted(&mut *self.out))
    }

    fn key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        if !self.members.is_empty() {
            self.out.push(b',');
        }
        let start = self.out.len();
        key.serialize(KeyText(&mut *self.out))?;
        let text = start + 1..self.out.len() - 1;
        if self.out[text.clone()].contains(&b'\\') {
            return Err(unsupported("a key JSON escapes"));
        }
        self.out.push(b':');
        self.key = Some((text, start));
        Ok(())
    }

    fn value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        let (key, start) = self.key.take().ok_or_else(|| Error::custom("a value without its key"))?;
        v.serialize(Sorted(&mut *self.out))?;
        if let Some((last, _)) = self.members.last() {
            self.in_order &= self.out[last.clone()] < self.out[key.clone()];
        }
        self.members.push((key, start..self.out.len()));
        Ok(())
    }

    fn end(self, close: u8) -> Result<(), Error> {
        let out = self.out;
        if !self.in_order {
            sort(out, self.body, self.members);
        }
        out.push(close);
        if self.variant {
            out.push(b'}');
        }
        Ok(())
    }
}

/// Rewrite an object's members (written from `body` on, in the order they came) sorted by
/// key, keeping only the last member of each key, as a `Value`'s map would.
fn sort(out: &mut Vec<u8>, body: usize, mut members: Vec<(Range<usize>, Range<usize>)>) {
    let written = out.split_off(body);
    let key = |r: &Range<usize>| &written[r.start - body..r.end - body];
    // Stable: of equal keys the last one written is last, and it is the one kept.
    members.sort_by(|a, b| key(&a.0).cmp(key(&b.0)));
    let mut first = true;
    for (i, (k, member)) in members.iter().enumerate() {
        if members.get(i + 1).is_some_and(|next| key(&next.0) == key(k)) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(&written[member.start - body..member.end - body]);
    }
}

impl<'a> ser::Serializer for Sorted<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_f32(self, _: f32) -> Result<(), Error> {
        // Printed as an `f32` but read back as an `f64`: not always the same digits.
        Err(unsupported("an f32"))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        // As the two-pass way gives it: a float reads back exactly (`float_roundtrip`),
        // so printing it once is printing it as a `Value`; a non-finite float is `null`.
        if v.is_finite() { self.scalar(&v) } else { self.serialize_unit() }
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
        Err(unsupported("bytes"))
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), Error> {
        self.scalar(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        let out = self.0;
        out.push(b'{');
        serde_json::to_writer(&mut *out, variant)?;
        out.push(b':');
        v.serialize(Sorted(&mut *out))?;
        out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, Error> {
        self.compound(b'[', None)
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound<'a>, Error> {
        self.compound(b'[', None)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, Error> {
        self.compound(b'[', None)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Error> {
        self.compound(b'[', Some(variant))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>, Error> {
        self.compound(b'{', None)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, Error> {
        self.compound(b'{', None)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Error> {
        self.compound(b'{', Some(variant))
    }
    fn serialize_i128(self, _: i128) -> Result<(), Error> {
        Err(unsupported("a 128-bit integer"))
    }
    fn serialize_u128(self, _: u128) -> Result<(), Error> {
        Err(unsupported("a 128-bit integer"))
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.element(v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self, b']')
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.element(v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self, b']')
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.element(v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self, b']')
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.element(v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self, b']')
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.value(v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self, b'}')
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Error> {
        self.key(key)?;
        self.value(v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self, b'}')
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> Result<(), Error> {
        self.key(key)?;
        self.value(v)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self, b'}')
    }
}

/// Writes an object key: text (a string, a char, a unit variant's name, a newtype around
/// one) as `serde_json` writes it; any other key is refused.
struct KeyText<'a>(&'a mut Vec<u8>);

macro_rules! refuse {
    ($($f:ident($t:ty)),* $(,)?) => {
        $(fn $f(self, _: $t) -> Result<(), Error> {
            Err(unsupported("a key that is not text"))
        })*
    };
}

impl ser::Serializer for KeyText<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        serde_json::to_writer(self.0, v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        serde_json::to_writer(self.0, &v)
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), Error> {
        serde_json::to_writer(self.0, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    refuse!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );
    fn serialize_none(self) -> Result<(), Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(unsupported("a key that is not text"))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(unsupported("a key that is not text"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde_json::Value;

    use super::to_sorted;
    use crate::json_text::JsonText;

    /// The two-pass way: serialize, then canonicalize the text.
    fn two_pass<T: Serialize>(v: &T) -> String {
        JsonText::parse(&serde_json::to_string(v).unwrap()).unwrap().as_str().to_string()
    }

    proptest::proptest! {
        #[test]
        fn any_value_serializes_to_the_text_it_prints(text in crate::json_text::tests::any_json_text()) {
            let value: Value = serde_json::from_str(&text).unwrap();
            let sorted = to_sorted(&value);
            // Keys with escapes are left to the two-pass way; everything else is done here.
            let escaped_key = text.contains("\\\"") || text.contains("\\u0062");
            match sorted {
                Ok(sorted) => proptest::prop_assert_eq!(sorted, two_pass(&value)),
                Err(e) => proptest::prop_assert!(escaped_key, "{e}"),
            }
            let text = JsonText::to_json(&value).unwrap();
            proptest::prop_assert_eq!(text.as_str(), two_pass(&value));
        }
    }

    proptest::proptest! {
        /// `is_text_of` is true exactly where `to_json` makes the same text: of the value
        /// itself (unless the one-pass way leaves it out) and of no other value, whatever
        /// the scratch buffer held before.
        #[test]
        fn a_text_is_the_text_of_its_value_and_of_no_other(
            a in crate::json_text::tests::any_json_text(),
            b in crate::json_text::tests::any_json_text(),
        ) {
            let (a, b): (Value, Value) = (serde_json::from_str(&a).unwrap(), serde_json::from_str(&b).unwrap());
            let text = JsonText::to_json(&a).unwrap();
            let mut scratch = b"left over".to_vec();
            proptest::prop_assert_eq!(text.is_text_of(&a, &mut scratch), to_sorted(&a).is_ok());
            let same = JsonText::to_json(&b).unwrap().as_str() == text.as_str();
            proptest::prop_assert_eq!(text.is_text_of(&b, &mut scratch), same && to_sorted(&b).is_ok());
        }
    }

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Unit,
        Newtype(u32),
        Tuple(u8, &'static str),
        Struct { z: bool, a: Option<f64> },
    }

    #[derive(Serialize)]
    struct Inner {
        zeta: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        beta: Option<String>,
        alpha: Vec<Shape>,
    }

    #[derive(Serialize)]
    struct Outer {
        region: &'static str,
        gpu: &'static str,
        shape: Shape,
        labels: BTreeMap<String, String>,
        #[serde(flatten)]
        inner: Inner,
        float: f64,
        long: f64,
        nan: f64,
        neg: i64,
        unit: (),
        ch: char,
    }

    fn outer(beta: Option<&str>) -> Outer {
        Outer {
            region: "us-east-1",
            gpu: "L4 \"quoted\" é\n",
            shape: Shape::Struct { z: true, a: Some(2.0) },
            labels: BTreeMap::from([("b".into(), "2".into()), ("a".into(), "1".into())]),
            inner: Inner {
                zeta: 3,
                beta: beta.map(str::to_string),
                alpha: vec![Shape::Unit, Shape::Newtype(7), Shape::Tuple(1, "x"), Shape::Struct { z: false, a: None }],
            },
            float: 1e-7,
            long: 10.0 / 3.0,
            nan: f64::NAN,
            neg: i64::MIN,
            unit: (),
            ch: 'c',
        }
    }

    /// Structs out of key order, flattened members, every kind of enum variant, skipped
    /// and absent options, escapes in values, non-finite floats: the two-pass text.
    #[test]
    fn structs_and_enums_serialize_to_the_two_pass_text() {
        for beta in [None, Some("b")] {
            let v = outer(beta);
            assert_eq!(to_sorted(&v).unwrap(), two_pass(&v));
        }
        // A map whose members come out of order and repeat: sorted, the last kept.
        struct Repeats;
        impl Serialize for Repeats {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(None)?;
                for (k, v) in [("b", 1), ("a", 2), ("b", 3), ("", 4)] {
                    m.serialize_entry(k, &v)?;
                }
                m.end()
            }
        }
        assert_eq!(to_sorted(&Repeats).unwrap(), r#"{"":4,"a":2,"b":3}"#);
        assert_eq!(to_sorted(&Repeats).unwrap(), two_pass(&Repeats));
    }

    /// What this pass leaves out is refused, and `to_json` still gives the two-pass text.
    #[test]
    fn what_it_leaves_out_goes_the_two_pass_way() {
        let int_keys = BTreeMap::from([(2u32, "b"), (10, "a")]);
        let escaped_key = BTreeMap::from([("q\"".to_string(), 1), ("a".to_string(), 2)]);
        let f32s = vec![0.1f32, 16_777_217.0];
        assert!(to_sorted(&int_keys).is_err());
        assert!(to_sorted(&escaped_key).is_err());
        assert!(to_sorted(&f32s).is_err());
        assert_eq!(JsonText::to_json(&int_keys).unwrap().as_str(), two_pass(&int_keys));
        assert_eq!(JsonText::to_json(&int_keys).unwrap().as_str(), r#"{"10":"a","2":"b"}"#);
        assert_eq!(JsonText::to_json(&escaped_key).unwrap().as_str(), two_pass(&escaped_key));
        assert_eq!(JsonText::to_json(&f32s).unwrap().as_str(), two_pass(&f32s));
    }
}
