//! [`JsonText`]: a JSON value kept as its compact text, for data that is stored and
//! compared far more often than it is looked into (resource configurations in plans and
//! state, a plan's cost report).
//!
//! Why not `serde_json::Value`: a pool configuration as a `Value` tree is about 2 KB of
//! small allocations; as text it is about 200 bytes, and an `Arc` lets a plan and the
//! state share one copy. A 100,000-pool fleet holds several such copies per pool.
//!
//! The text is compact and, except from [`JsonText::to_json_unsorted`], canonical (object
//! keys sorted, numbers as `serde_json` prints them: exactly what
//! `serde_json::to_string(&Value)` gives), so equal values have equal text and comparing
//! is mostly a string comparison. Serializing walks the text one level at a time and
//! writes what serializing the `Value` would write (pretty or compact, keys sorted),
//! without ever building the tree; deserializing accepts any JSON and canonicalizes it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeSeed, Error as _};
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

mod compact;
mod sorted;

/// `serde_json::from_slice`, with the bytes checked as UTF-8 once, in bulk, and then read
/// as text. Read from bytes, serde_json checks each string on its own as it meets it:
/// 3 % of a 2,000-pool no-op plan's CPU, on the path of every state, sim cloud and plan
/// file read. Bytes that are not UTF-8 are read as bytes, so the error (message, line,
/// column) is serde_json's own, as before.
pub fn from_json_bytes<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// `Arc<Box<str>>` rather than `Arc<str>`: a finished `String` moves in without being
/// copied, which matters for a report of tens of MB.
#[derive(Clone)]
pub struct JsonText(Arc<Box<str>>);

impl JsonText {
    fn new(text: String) -> Self {
        JsonText(Arc::new(text.into_boxed_str()))
    }

    /// `null`.
    pub fn null() -> Self {
        JsonText::new("null".into())
    }

    /// The canonical text of a `Value` (a `Value` already prints canonically).
    pub fn from_value(v: &Value) -> Self {
        JsonText::new(v.to_string())
    }

    /// Serialize `v` straight to canonical text, without an intermediate `Value` tree: in
    /// one pass (`sorted.rs`), or, for what that pass leaves out (a key that is not text or
    /// that JSON escapes, an `f32`, bytes), by serializing and canonicalizing the text.
    pub fn to_json<T: Serialize + ?Sized>(v: &T) -> serde_json::Result<Self> {
        match sorted::to_sorted(v) {
            Ok(text) => Ok(JsonText::new(text)),
            // Not an error to hide: the two-pass way gives the same text, or the error of
            // `v`'s own serialization, which it meets again.
            Err(_) => Self::parse(&serde_json::to_string(v)?),
        }
    }

    /// Is this the text [`JsonText::to_json`] makes of `v`? Written into `scratch` (a
    /// buffer the caller keeps between calls) and compared, without a text of its own: a
    /// plan asks each pool whether the spec's configuration is the one recorded, and most
    /// are. `false` also where the one-pass way leaves `v` out (the caller then makes the
    /// text, which may still be equal).
    pub fn is_text_of<T: Serialize + ?Sized>(&self, v: &T, scratch: &mut Vec<u8>) -> bool {
        scratch.clear();
        sorted::write_sorted(v, scratch).is_ok() && scratch.as_slice() == self.as_str().as_bytes()
    }

    /// Serialize `v` in its own key order, into a buffer of exactly the right size (one
    /// pass counts, one writes): for large documents that are only stored and written
    /// out, never compared often. Writing it out still sorts keys; equality still holds
    /// by value.
    pub fn to_json_unsorted<T: Serialize + ?Sized>(v: &T) -> serde_json::Result<Self> {
        struct Count(usize);
        impl std::io::Write for Count {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        serde_json::to_writer(&mut count, v)?;
        let mut bytes = Vec::with_capacity(count.0);
        serde_json::to_writer(&mut bytes, v)?;
        let text = String::from_utf8(bytes).map_err(serde::ser::Error::custom)?;
        Ok(JsonText::new(text))
    }

    /// Canonicalize JSON text.
    pub fn parse(text: &str) -> serde_json::Result<Self> {
        let mut out = Vec::with_capacity(text.len());
        let mut de = serde_json::Deserializer::from_str(text);
        CanonicalInto(&mut out).deserialize(&mut de)?;
        de.end()?;
        String::from_utf8(out).map(JsonText::new).map_err(serde::de::Error::custom)
    }

    /// The value as a tree (for looking into it; keep such trees short-lived).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.as_str()).unwrap_or(Value::Null)
    }

    /// Decode the value into a typed structure.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(self.as_str())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_null(&self) -> bool {
        self.as_str() == "null"
    }

    /// The member `key` of an object (`None` for other values and missing keys).
    pub fn get(&self, key: &str) -> Option<Value> {
        if !self.as_str().starts_with('{') {
            return None;
        }
        // One pass over the members, reading only the one asked for: a plan asks each
        // pool's recorded configuration for a member or two. The text is JSON by
        // construction (every constructor writes or checks it), so an error here cannot
        // happen; should it, the member is absent, as it was before this reader.
        let mut de = serde_json::Deserializer::from_str(self.as_str());
        Member(key).deserialize(&mut de).ok().flatten()
    }

    /// The value at a JSON pointer (`/lifecycle/prevent_destroy`).
    pub fn pointer(&self, pointer: &str) -> Option<Value> {
        self.to_value().pointer(pointer).cloned()
    }
}

/// [`sorted::to_sorted`], for tests that hold it against the two-pass way on real data.
#[cfg(test)]
pub(crate) fn one_pass<T: Serialize + ?Sized>(v: &T) -> serde_json::Result<String> {
    sorted::to_sorted(v)
}

/// Equal values: equal text (the canonical case) or, failing that, equal parsed values.
impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.as_str() == other.as_str() || self.to_value() == other.to_value()
    }
}

impl Default for JsonText {
    fn default() -> Self {
        JsonText::null()
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Value> for JsonText {
    fn from(v: Value) -> Self {
        JsonText::from_value(&v)
    }
}

impl From<&Value> for JsonText {
    fn from(v: &Value) -> Self {
        JsonText::from_value(v)
    }
}

impl PartialEq<Value> for JsonText {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if VERBATIM.get() && compact::is_canonical(self.as_str()) {
            // What a `RawValue` does: `serde_json`'s writer prints the field as it is.
            let mut raw = s.serialize_struct(RAW_TOKEN, 1)?;
            serde::ser::SerializeStruct::serialize_field(&mut raw, RAW_TOKEN, self.as_str())?;
            return serde::ser::SerializeStruct::end(raw);
        }
        let raw: &RawValue = serde_json::from_str(self.as_str()).map_err(S::Error::custom)?;
        Canonical(raw).serialize(s)
    }
}

/// The name `serde_json`'s writer knows a `RawValue` by: it prints a struct of this name's
/// one field as it is.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

thread_local! {
    /// Set while [`verbatim`] runs on this thread.
    static VERBATIM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `write`, which serializes with `serde_json`'s compact writer (and no other
/// serializer), each [`JsonText`] whose text is canonical written as that text: the
/// bytes the writer prints for it anyway, without walking it member by member (a saved
/// 2,000-pool plan's configurations: 61 M instructions).
pub fn verbatim<R>(write: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            VERBATIM.set(self.0);
        }
    }
    let _restore = Restore(VERBATIM.replace(true));
    write()
}

/// Straight to canonical text, one level at a time, never through a `Value` tree: a saved
/// plan's cost report is tens of MB of text, and its tree would be ten times that. Not
/// through a `RawValue` either: that cannot be read from the buffered content serde uses
/// for internally tagged enums (journal entries), nor from an `io::Read` stream.
impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        CanonicalInto(&mut out).deserialize(d)?;
        String::from_utf8(out).map(JsonText::new).map_err(D::Error::custom)
    }
}

/// Appends the canonical text of any value to its buffer: what `serde_json::to_string(&Value)`
/// prints for the `Value` the same input would give (keys sorted, the last of duplicate
/// keys kept, each scalar printed by `serde_json`). Everything is written into the one
/// buffer as it is read: an object whose keys already come sorted (the text gpuplan itself
/// writes) is never rearranged, so reading a state's configurations allocates little more
/// than their text.
struct CanonicalInto<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for CanonicalInto<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl CanonicalInto<'_> {
    fn scalar<T: Serialize + ?Sized, E: serde::de::Error>(self, v: &T) -> Result<(), E> {
        serde_json::to_writer(self.0, v).map_err(E::custom)
    }
}

impl<'de> serde::de::Visitor<'de> for CanonicalInto<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        self.scalar(&v)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.scalar(&v)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.scalar(&v)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        // As `Value` keeps it: a non-finite float becomes `null`.
        self.scalar(&Value::from(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.scalar(v)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let out = self.0;
        out.push(b'[');
        let mut first = true;
        loop {
            // The comma goes in before the element is known to exist; the end takes it back.
            let mark = out.len();
            if !first {
                out.push(b',');
            }
            if seq.next_element_seed(CanonicalInto(&mut *out))?.is_none() {
                out.truncate(mark);
                break;
            }
            first = false;
        }
        out.push(b']');
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let out = self.0;
        out.push(b'{');
        let body = out.len();
        // Each member's key and where its `"key":value` text lies in `out`.
        let mut members: Vec<(Cow<'de, str>, std::ops::Range<usize>)> = Vec::new();
        let mut in_order = true;
        while let Some(Key(key)) = map.next_key()? {
            if !members.is_empty() {
                out.push(b',');
            }
            let start = out.len();
            serde_json::to_writer(&mut *out, key.as_ref()).map_err(A::Error::custom)?;
            out.push(b':');
            map.next_value_seed(CanonicalInto(&mut *out))?;
            in_order &= members.last().is_none_or(|(last, _)| *last < key);
            members.push((key, start..out.len()));
        }
        if !in_order {
            sort_members(out, body, members);
        }
        out.push(b'}');
        Ok(())
    }
}

/// Rewrite an object's members (written from `body` on, in the order read) sorted by key,
/// keeping only the last member of each key, as a `Value`'s map would.
fn sort_members(out: &mut Vec<u8>, body: usize, mut members: Vec<(Cow<'_, str>, std::ops::Range<usize>)>) {
    let written = out.split_off(body);
    // Stable: of equal keys the last one read is last, and it is the one kept.
    members.sort_by(|a, b| a.0.cmp(&b.0));
    let mut first = true;
    for (i, (key, range)) in members.iter().enumerate() {
        if members.get(i + 1).is_some_and(|next| next.0 == *key) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(&written[range.start - body..range.end - body]);
    }
}

/// The member `.0` of an object (the last one, should the key repeat), the others skipped.
struct Member<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for Member<'_> {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Member<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        let mut found = None;
        while let Some(Key(k)) = map.next_key()? {
            if k == self.0 {
                found = Some(map.next_value::<Value>()?);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// A string (an object key, a tag), borrowed from the input when the deserializer can
/// lend it (`serde`'s own `Cow<str>` always copies).
pub struct Key<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> serde::de::Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Serializes JSON text as its `Value` would serialize (object keys sorted), one level at a
/// time: objects and arrays are split into borrowed members, scalars parsed on their own.
struct Canonical<'a>(&'a RawValue);

impl Serialize for Canonical<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.0.get().trim_start();
        match text.as_bytes().first() {
            Some(b'{') => {
                let members: BTreeMap<String, &RawValue> = serde_json::from_str(text).map_err(S::Error::custom)?;
                let mut map = s.serialize_map(Some(members.len()))?;
                for (k, v) in &members {
                    map.serialize_entry(k, &Canonical(v))?;
                }
                map.end()
            }
            Some(b'[') => {
                let items: Vec<&RawValue> = serde_json::from_str(text).map_err(S::Error::custom)?;
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in &items {
                    seq.serialize_element(&Canonical(v))?;
                }
                seq.end()
            }
            _ => serde_json::from_str::<Value>(text).map_err(S::Error::custom)?.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sample() -> Value {
        json!({
            "zeta": [1, 2.5, {"b": null, "a": "x\"y"}],
            "alpha": {"nested": {"deep": [true, false, -3]}, "empty": {}, "list": []},
            "num": 18446744073709551615u64,
            "neg": -9223372036854775808i64,
            "float": 1e-7,
            "unicode": "é ✓ \u{1}",
        })
    }

    /// Read as text after one UTF-8 check, or as bytes when they are not UTF-8: the same
    /// value, and the same error with the same place, as `serde_json::from_slice`.
    #[test]
    fn json_bytes_read_as_serde_json_reads_them() {
        #[derive(Debug, Deserialize)]
        struct Doc {
            name: String,
            config: JsonText,
            raw: Box<RawValue>,
        }
        let good = "{\"name\": \"p\\u00e9 ✓\", \"config\": {\"b\": [1, 2.5], \"a\": \"x\\\"y\"},\n \"raw\": [true]}";
        let fast: Doc = from_json_bytes(good.as_bytes()).unwrap();
        let slow: Doc = serde_json::from_slice(good.as_bytes()).unwrap();
        assert_eq!((&fast.name, &fast.config, fast.raw.get()), (&slow.name, &slow.config, slow.raw.get()));
        assert_eq!(fast.name, "pé ✓");
        assert_eq!(fast.config.as_str(), r#"{"a":"x\"y","b":[1,2.5]}"#);
        let same_error = |bytes: &[u8]| {
            let fast = from_json_bytes::<Doc>(bytes).unwrap_err();
            let slow = serde_json::from_slice::<Doc>(bytes).unwrap_err();
            assert_eq!((fast.to_string(), fast.line(), fast.column()), (slow.to_string(), slow.line(), slow.column()));
            fast.to_string()
        };
        // Bad JSON in valid UTF-8, a missing field, and bytes that are not UTF-8 at all.
        assert!(same_error(b"{\"name\": \"p\",\n \"config\": [1,}").contains("line 2"));
        assert!(same_error(b"{\"name\": \"p\", \"raw\": 1}").contains("missing field `config`"));
        let mut not_utf8 = b"{\"name\": \"p".to_vec();
        not_utf8.extend_from_slice(&[0xff, 0xfe]);
        not_utf8.extend_from_slice(b"\", \"config\": {}, \"raw\": 1}");
        assert!(same_error(&not_utf8).contains("invalid unicode"), "{}", same_error(&not_utf8));
    }

    #[test]
    fn text_is_what_the_value_prints() {
        let v = sample();
        let t = JsonText::from_value(&v);
        assert_eq!(t.as_str(), v.to_string());
        assert_eq!(t.to_value(), v);
    }

    #[test]
    fn parse_canonicalizes_order_and_whitespace() {
        let v = sample();
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        let unsorted = r#"{"b": 1, "a": {"y": [ 1 , 2 ], "x": null}}"#;
        assert_eq!(JsonText::parse(&pretty).unwrap(), JsonText::from_value(&v));
        assert_eq!(JsonText::parse(unsorted).unwrap().as_str(), r#"{"a":{"x":null,"y":[1,2]},"b":1}"#);
    }

    #[test]
    fn serializes_exactly_like_the_value() {
        let v = sample();
        let t = JsonText::from_value(&v);
        assert_eq!(serde_json::to_string(&t).unwrap(), serde_json::to_string(&v).unwrap());
        assert_eq!(serde_json::to_string_pretty(&t).unwrap(), serde_json::to_string_pretty(&v).unwrap());
        assert_eq!(serde_json::to_value(&t).unwrap(), v);
        for scalar in [json!(null), json!(true), json!(7), json!(-1.5), json!("s")] {
            let t = JsonText::from_value(&scalar);
            assert_eq!(serde_json::to_string_pretty(&t).unwrap(), serde_json::to_string_pretty(&scalar).unwrap());
        }
    }

    #[test]
    fn round_trips_through_serde() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Holder {
            config: JsonText,
        }
        let h = Holder { config: JsonText::from_value(&sample()) };
        let pretty = serde_json::to_string_pretty(&h).unwrap();
        assert_eq!(serde_json::from_str::<Holder>(&pretty).unwrap(), h);
        let as_value = serde_json::to_value(&h).unwrap();
        assert_eq!(serde_json::from_value::<Holder>(as_value).unwrap(), h);
    }

    #[test]
    fn reads_to_the_text_its_value_prints() {
        let inputs = [
            serde_json::to_string_pretty(&sample()).unwrap(),
            r#"{"b": 1, "a": {"y": [ 1 , 2.0, -0.0, 1e300 ], "x": null}, "b": "last wins", "": []}"#.to_string(),
            r#"[{"k": "\u00e9\n\"q\""}, 12345678901234567890123, -5, true, false]"#.to_string(),
            "\"just a string\"".to_string(),
            "{}".to_string(),
        ];
        for text in inputs {
            let value: Value = serde_json::from_str(&text).unwrap();
            let from_str: JsonText = serde_json::from_str(&text).unwrap();
            let from_reader: JsonText = serde_json::from_reader(text.as_bytes()).unwrap();
            assert_eq!(from_str.as_str(), value.to_string(), "{text}");
            assert_eq!(from_reader.as_str(), value.to_string(), "{text}");
        }
    }

    /// JSON text with keys in any order, repeated keys, escapes and whitespace.
    pub(super) fn any_json_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("a".to_string()),
            Just("b".to_string()),
            Just("nodes".to_string()),
            Just("é".to_string()),
            Just("q\\\"".to_string()),
            Just("\\u0062".to_string()),
            "[a-z]{0,3}",
        ];
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            Just("-0".to_string()),
            Just("1.50".to_string()),
            Just("-2.5e-3".to_string()),
            Just("1E300".to_string()),
            Just("123456789012345678901234".to_string()),
            "[a-z ]{0,4}".prop_map(|s| format!("\"{s}\"")),
            Just("\"tab\\there\\u00e9\\n\"".to_string()),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            let ws = prop_oneof![Just(""), Just(" "), Just("\n  ")];
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..5), ws.clone())
                    .prop_map(|(items, ws)| format!("[{ws}{}{ws}]", items.join(&format!(",{ws}")))),
                (prop::collection::vec((key.clone(), inner), 0..6), ws).prop_map(|(members, ws)| {
                    let members: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\"{ws}:{ws}{v}")).collect();
                    format!("{{{ws}{}{ws}}}", members.join(&format!(",{ws}")))
                }),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn any_input_reads_to_the_text_its_value_prints(text in any_json_text()) {
            let value: Value = serde_json::from_str(&text).unwrap();
            let printed = value.to_string();
            let parsed = JsonText::parse(&text).unwrap();
            proptest::prop_assert_eq!(parsed.as_str(), printed.as_str());
            let from_str: JsonText = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(from_str.as_str(), printed.as_str());
            let from_reader: JsonText = serde_json::from_reader(text.as_bytes()).unwrap();
            proptest::prop_assert_eq!(from_reader.as_str(), printed.as_str());
            let from_value: JsonText = serde_json::from_value(value.clone()).unwrap();
            proptest::prop_assert_eq!(from_value.as_str(), printed.as_str());
        }
    }

    /// What the one scan ([`compact::canonical`]) answers: text that is canonical but for
    /// its whitespace. What it leaves to the full way: anything a `Value` would print
    /// otherwise.
    #[test]
    fn text_canonical_but_for_whitespace_is_kept_in_one_scan() {
        let config = json!({"gpu": "A100 é", "labels": {"team": "t0"}, "nodes": {"desired": 2, "max": -4, "min": 0},
            "zones": ["us-east-1a", "us-east-1b"], "spot": true, "image": null, "big": 18446744073709551615u64,
            "empty": {}, "none": []});
        let pretty = serde_json::to_string_pretty(&config).unwrap();
        assert_eq!(compact::canonical(&pretty).as_deref(), Some(config.to_string().as_str()));
        for text in [
            r#"{"b": 1, "a": 2}"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": "q\"uote"}"#,
            r#"{"a": 1.5}"#,
            r#"{"a": 1e3}"#,
            r#"{"a": -0}"#,
            r#"[123456789012345678901234]"#,
            r#"[-9223372036854775809]"#,
            r#"{"\u0061": 1}"#,
        ] {
            assert_eq!(compact::canonical(text), None, "{text}");
            let read: JsonText = serde_json::from_str(text).unwrap();
            assert_eq!(read.as_str(), serde_json::from_str::<Value>(text).unwrap().to_string(), "{text}");
        }
    }

    /// Written verbatim, canonical texts are copied and others (unsorted text) walked:
    /// the same bytes as without, and the flag ends with the write.
    #[test]
    fn verbatim_writes_the_bytes_the_writer_prints_anyway() {
        #[derive(Serialize)]
        struct Holder {
            canonical: JsonText,
            unsorted: JsonText,
            list: Vec<JsonText>,
        }
        #[derive(Serialize)]
        struct Unsorted {
            b: u32,
            a: Vec<u32>,
        }
        let unsorted = JsonText::to_json_unsorted(&Unsorted { b: 1, a: vec![2, 3] }).unwrap();
        let h = Holder {
            canonical: JsonText::from_value(&json!({"gpu": "A100 é", "nodes": {"desired": 2}, "zones": ["a", "b"]})),
            unsorted,
            list: vec![JsonText::null(), JsonText::from_value(&json!({"x": 1.5})), JsonText::from_value(&sample())],
        };
        let walked = serde_json::to_string(&h).unwrap();
        assert_eq!(verbatim(|| serde_json::to_string(&h).unwrap()), walked);
        assert!(compact::is_canonical(h.canonical.as_str()));
        assert!(!compact::is_canonical(h.unsorted.as_str()));
        assert!(!VERBATIM.get(), "the flag ends with the write");
    }

    proptest::proptest! {
        /// Any JSON pretty-printed from its `Value` (keys in order, so the one scan answers
        /// for most of it) reads to the text the `Value` prints, and the one scan, wherever
        /// it answers, gives that text.
        #[test]
        fn pretty_canonical_text_reads_to_the_text_its_value_prints(text in any_json_text()) {
            let value: Value = serde_json::from_str(&text).unwrap();
            let printed = value.to_string();
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            if let Some(compact) = compact::canonical(&pretty) {
                proptest::prop_assert_eq!(&compact, &printed);
            }
            let from_str: JsonText = serde_json::from_str(&pretty).unwrap();
            proptest::prop_assert_eq!(from_str.as_str(), printed.as_str());
            let from_reader: JsonText = serde_json::from_reader(pretty.as_bytes()).unwrap();
            proptest::prop_assert_eq!(from_reader.as_str(), printed.as_str());
        }
    }

    proptest::proptest! {
        /// Prices, rates and spend are `f64`s written to state, ledgers and plans and read
        /// back: each must read back to the very same number, or sums drift and a price
        /// printed twice differs in its last digit (serde_json's `float_roundtrip`; without
        /// it about one price in sixteen read back one unit in the last place off).
        #[test]
        fn every_float_reads_back_to_the_same_bits(price in 0.0f64..1.0e6, any in proptest::num::f64::NORMAL) {
            for v in [price, any] {
                let text = serde_json::to_string(&v).unwrap();
                let read: f64 = from_json_bytes(text.as_bytes()).unwrap();
                proptest::prop_assert_eq!(read.to_bits(), v.to_bits(), "{} read back as {}", text, read);
                let in_value: Value = serde_json::from_str(&text).unwrap();
                proptest::prop_assert_eq!(in_value.as_f64().map(f64::to_bits), Some(v.to_bits()));
            }
        }
    }

    #[test]
    fn bad_text_is_refused_as_serde_json_refuses_it() {
        for text in ["{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{} x", "", "[", "[1E400]", "{\"a\":tru}", "\"\\x\""] {
            assert!(JsonText::parse(text).is_err(), "{text}");
            assert!(serde_json::from_str::<JsonText>(text).is_err(), "{text}");
        }
    }

    #[test]
    fn reads_inside_internally_tagged_enums() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        #[serde(tag = "op", rename_all = "snake_case")]
        enum Entry {
            Put { config: JsonText },
        }
        let e = Entry::Put { config: JsonText::from_value(&sample()) };
        let line = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<Entry>(&line).unwrap(), e);
    }

    #[test]
    fn structs_serialize_to_sorted_text() {
        #[derive(Serialize)]
        struct Pool {
            region: &'static str,
            gpu: &'static str,
            nodes: BTreeMap<&'static str, u32>,
        }
        let p = Pool { region: "us-east-1", gpu: "L4", nodes: BTreeMap::from([("min", 0), ("desired", 1)]) };
        let t = JsonText::to_json(&p).unwrap();
        assert_eq!(t.as_str(), serde_json::to_value(&p).unwrap().to_string());
        assert_eq!(t.get("gpu"), Some(json!("L4")));
        assert_eq!(t.get("missing"), None);
        assert_eq!(t.get("nodes"), Some(json!({"desired": 1, "min": 0})));
        assert_eq!(JsonText::from_value(&sample()).get("zeta"), Some(sample()["zeta"].clone()));
        assert_eq!(JsonText::from_value(&json!([1, 2])).get("0"), None);
        assert_eq!(t.pointer("/nodes/desired"), Some(json!(1)));
        assert!(JsonText::default().is_null());
        let unsorted = JsonText::to_json_unsorted(&p).unwrap();
        assert_eq!(unsorted.as_str(), serde_json::to_string(&p).unwrap());
        assert_eq!(unsorted, t);
        assert_eq!(serde_json::to_string_pretty(&unsorted).unwrap(), serde_json::to_string_pretty(&t).unwrap());
        assert_eq!(JsonText::null().get("gpu"), None);
    }
}
