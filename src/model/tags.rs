//! [`Tags`]: a node's cloud tags, kept as one small allocation.
//!
//! Every node gpuplan knows carries its tags in several places at once (the state, the
//! plan's create requests, the refreshed fleet, the sim cloud). As a `BTreeMap<String,
//! String>` four ownership tags cost about 800 bytes (a full B-tree leaf plus eight
//! strings); here they cost one buffer of about 150. At 100,000 nodes that difference is
//! hundreds of MB. Maps of cloud tags are small (a few to a few dozen entries), so lookups
//! scan.
//!
//! Semantics are those of the map it replaces: keys are unique, iteration and
//! serialization are in key order, a later insert of a key replaces its value. It
//! serializes as a JSON object, so files are unchanged.

use std::fmt;

use serde::de::{MapAccess, Visitor};

use crate::json_text::Key;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Tags in key order, encoded as `[key length][value length][key][value]` entries in one
/// text buffer, each length four ASCII bytes of seven bits (little end first). The header
/// bytes being ASCII keeps the whole buffer a `str`, so reading an entry is a slice at
/// known char boundaries, with no UTF-8 check: iterating tags was 3 % of a 2,000-pool
/// no-op plan while each key and value was checked again on the way out.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Tags {
    buf: Box<str>,
}

impl Tags {
    pub fn new() -> Self {
        Tags::default()
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { rest: &self.buf }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Set `key` to `value`, replacing any value it had.
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        let mut entries: Vec<(&str, &str)> = self.iter().filter(|(k, _)| *k != key).collect();
        let at = entries.partition_point(|(k, _)| *k < key);
        entries.insert(at, (key, value));
        self.buf = encode(&entries);
    }

    /// These tags with `key` set to `value`, in one allocation (no list of entries made):
    /// a snapshot's node rebuilds its derived tag this way.
    pub fn with(&self, key: &str, value: &str) -> Tags {
        let mut buf = String::with_capacity(self.buf.len() + 2 * LEN_BYTES + key.len() + value.len());
        let mut placed = false;
        for (k, v) in self.iter().filter(|(k, _)| *k != key) {
            if !placed && k > key {
                push_entry(&mut buf, key, value);
                placed = true;
            }
            push_entry(&mut buf, k, v);
        }
        if !placed {
            push_entry(&mut buf, key, value);
        }
        Tags { buf: buf.into_boxed_str() }
    }

    /// Remove `key`, returning whether it was there.
    pub fn remove(&mut self, key: &str) -> bool {
        if !self.contains_key(key) {
            return false;
        }
        let entries: Vec<(&str, &str)> = self.iter().filter(|(k, _)| *k != key).collect();
        self.buf = encode(&entries);
        true
    }
}

/// Encode entries already sorted by key with no key repeated.
fn encode<K: AsRef<str>, V: AsRef<str>>(entries: &[(K, V)]) -> Box<str> {
    let size = entries.iter().map(|(k, v)| 2 * LEN_BYTES + k.as_ref().len() + v.as_ref().len()).sum();
    let mut buf = String::with_capacity(size);
    for (k, v) in entries {
        push_entry(&mut buf, k.as_ref(), v.as_ref());
    }
    buf.into_boxed_str()
}

fn push_entry(buf: &mut String, k: &str, v: &str) {
    push_len(buf, k);
    push_len(buf, v);
    buf.push_str(k);
    buf.push_str(v);
}

/// Bytes in one length's header.
const LEN_BYTES: usize = 4;

/// `s.len()` as [`LEN_BYTES`] ASCII bytes of seven bits each, low bits first.
fn push_len(buf: &mut String, s: &str) {
    // Cloud tags are at most a few hundred bytes; 256 MiB would not fit any API request.
    assert!(s.len() < 1 << (7 * LEN_BYTES), "a tag shorter than 256 MiB");
    for i in 0..LEN_BYTES {
        buf.push(char::from(((s.len() >> (7 * i)) & 0x7f) as u8));
    }
}

fn read_len(head: &[u8]) -> usize {
    head.iter().rev().fold(0, |n, b| (n << 7) | usize::from(*b))
}

/// The entries of a [`Tags`], in key order.
pub struct Iter<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let head = self.rest.as_bytes().get(..2 * LEN_BYTES)?;
        let klen = read_len(&head[..LEN_BYTES]);
        let vlen = read_len(&head[LEN_BYTES..]);
        // Every split falls after an ASCII header byte or at the end of a key or value
        // pushed as a whole `str`: a char boundary, so slicing cannot panic.
        let (k, tail) = self.rest[2 * LEN_BYTES..].split_at(klen);
        let (v, tail) = tail.split_at(vlen);
        self.rest = tail;
        Some((k, v))
    }
}

impl<'a> IntoIterator for &'a Tags {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Tags {
    /// As a map collects: sorted by key, the last value of a repeated key wins.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut owned: Vec<(K, V)> = iter.into_iter().collect();
        // Entries that come in key order, none repeated (what gpuplan's own merges give),
        // are encoded as they are.
        if owned.windows(2).all(|w| w[0].0.as_ref() < w[1].0.as_ref()) {
            return Tags { buf: encode(&owned) };
        }
        // Stable sort keeps repeated keys in input order; keep the last of each run.
        owned.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut entries: Vec<(&str, &str)> = Vec::with_capacity(owned.len());
        for (k, v) in &owned {
            match entries.last_mut() {
                Some(last) if last.0 == k.as_ref() => last.1 = v.as_ref(),
                _ => entries.push((k.as_ref(), v.as_ref())),
            }
        }
        Tags { buf: encode(&entries) }
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Extend<(K, V)> for Tags {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        let added: Vec<(K, V)> = iter.into_iter().collect();
        let mut all: Vec<(&str, &str)> = self.iter().collect();
        all.extend(added.iter().map(|(k, v)| (k.as_ref(), v.as_ref())));
        *self = all.into_iter().collect();
    }
}

impl fmt::Debug for Tags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Tags {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TagsVisitor;
        impl<'de> Visitor<'de> for TagsVisitor {
            type Value = Tags;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of tag keys to string values")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tags, A::Error> {
                // Borrowed from the input where the deserializer lends them (JSON text
                // without escapes): a node's four tags were eight allocations, freed at once,
                // for every node in the state and the sim cloud.
                let mut entries: Vec<(Key<'de>, Key<'de>)> = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<Key<'de>, Key<'de>>()? {
                    entries.push(entry);
                }
                Ok(entries.iter().map(|(k, v)| (&*k.0, &*v.0)).collect())
            }
        }
        deserializer.deserialize_map(TagsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::Tags;

    #[test]
    fn behaves_as_a_sorted_map() {
        let mut t = Tags::new();
        assert!(t.is_empty());
        t.insert("b", "2");
        t.insert("a", "1");
        t.insert("c", "");
        t.insert("b", "two");
        assert_eq!(t.iter().collect::<Vec<_>>(), [("a", "1"), ("b", "two"), ("c", "")]);
        assert_eq!(t.get("b"), Some("two"));
        assert_eq!(t.get("c"), Some(""));
        assert_eq!(t.get("d"), None);
        assert_eq!(t.len(), 3);
        assert!(t.remove("a"));
        assert!(!t.remove("a"));
        assert_eq!(t.iter().collect::<Vec<_>>(), [("b", "two"), ("c", "")]);
    }

    #[test]
    fn serializes_as_the_json_object_a_map_gives() {
        let t: Tags = [("z", "1"), ("gpuplan:managed", "true"), ("z", "last")].into_iter().collect();
        assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"gpuplan:managed":"true","z":"last"}"#);
        let back: Tags = serde_json::from_str(r#"{"b":"x","a":"y"}"#).unwrap();
        assert_eq!(back.iter().collect::<Vec<_>>(), [("a", "y"), ("b", "x")]);
        assert!(serde_json::from_str::<Tags>(r#"{"a":1}"#).is_err());
        // Escaped keys and values are decoded (copied); plain ones are borrowed: the same tags.
        let escaped: Tags = serde_json::from_str(r#"{"k\"":"v\n","plain":"x","k\u00e9":"\u00e9"}"#).unwrap();
        assert_eq!(escaped.iter().collect::<Vec<_>>(), [("k\"", "v\n"), ("ké", "é"), ("plain", "x")]);
        let from_bytes: Tags = serde_json::from_slice(br#"{"k\"":"v\n","plain":"x","k\u00e9":"\u00e9"}"#).unwrap();
        assert_eq!(from_bytes, escaped);
        assert_eq!(format!("{back:?}"), r#"{"a": "y", "b": "x"}"#);
    }

    #[test]
    fn is_several_times_smaller_than_a_btreemap() {
        let t: Tags = [
            ("gpuplan:address", "gpu_pool.p000005"),
            ("gpuplan:lineage", "839365c5-c2c5-4bb0-985a-b77e76014166"),
            ("gpuplan:managed", "true"),
            ("gpuplan:provider", "sim"),
        ]
        .into_iter()
        .collect();
        // One heap buffer: entry headers plus the text itself.
        assert_eq!(t.buf.len(), 4 * 8 + 15 + 16 + 15 + 36 + 15 + 4 + 16 + 3);
        // Lengths past seven bits use the header's higher bytes.
        let long: Tags = [("k".repeat(300), "é".repeat(9000))].into_iter().collect();
        assert_eq!(long.iter().collect::<Vec<_>>(), [("k".repeat(300).as_str(), "é".repeat(9000).as_str())]);
        assert_eq!(std::mem::size_of::<Tags>(), 16);
    }

    proptest! {
        #[test]
        fn agrees_with_btreemap(ops in proptest::collection::vec((0u8..3, "[a-c]{0,2}", "\\PC{0,4}"), 0..24)) {
            let (mut tags, mut map) = (Tags::new(), BTreeMap::new());
            for (op, k, v) in &ops {
                match op {
                    0 | 1 => {
                        tags.insert(k, v);
                        map.insert(k.clone(), v.clone());
                    }
                    _ => {
                        prop_assert_eq!(tags.remove(k), map.remove(k).is_some());
                    }
                }
                let expected: Vec<(&str, &str)> = map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                prop_assert_eq!(tags.iter().collect::<Vec<_>>(), expected);
                let mut inserted = tags.clone();
                inserted.insert(k, "w");
                prop_assert_eq!(tags.with(k, "w"), inserted);
                prop_assert_eq!(tags.len(), map.len());
            }
            let collected: Tags = ops.iter().map(|(_, k, v)| (k.as_str(), v.as_str())).collect();
            let reference: BTreeMap<&str, &str> = ops.iter().map(|(_, k, v)| (k.as_str(), v.as_str())).collect();
            prop_assert_eq!(collected.iter().collect::<BTreeMap<_, _>>(), reference);
            let json = serde_json::to_string(&collected).unwrap();
            prop_assert_eq!(&json, &serde_json::to_string(&collected.iter().collect::<BTreeMap<_, _>>()).unwrap());
            prop_assert_eq!(serde_json::from_str::<Tags>(&json).unwrap(), collected);
        }
    }
}
