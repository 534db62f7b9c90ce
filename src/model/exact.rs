//! Deserializing without spare capacity, for lists and maps kept once per pool or node.
//!
//! `serde_json` does not know a list's length before reading it, so a `Vec` grows as it
//! goes: a one-element list gets room for four (a plan's single create batch per pool
//! takes about 1.5 KB instead of 400 bytes), a long one up to twice its length. A
//! `BTreeMap` filled one insert at a time keeps its nodes about half full. For a
//! 100,000-pool plan or state that is hundreds of MB held for the whole run. These
//! helpers (`#[serde(deserialize_with = "...")]`) return the same values packed: the
//! spare room is given back as each list is read, not after the whole file.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

/// A `Vec` whose capacity is its length.
pub fn vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut items = Vec::<T>::deserialize(d)?;
    items.shrink_to_fit();
    Ok(items)
}

/// A `BTreeMap` built at once from its entries, so its nodes are full. The entries are
/// gathered in a `Vec` and handed to `BTreeMap::from_iter`, which sorts them (one pass
/// when they come sorted, as gpuplan writes them) and builds the tree bottom up. A key
/// given twice keeps its last value, as `BTreeMap`'s own `Deserialize` (one insert per
/// entry) does. Inserting one by one, then rebuilding, cost a 2,000-pool plan 15 million
/// instructions on the thread that reads the state and the sim snapshot.
pub fn map<'de, D, K, V>(d: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
{
    struct Entries<K, V>(std::marker::PhantomData<(K, V)>);

    impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> serde::de::Visitor<'de> for Entries<K, V> {
        type Value = BTreeMap<K, V>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<BTreeMap<K, V>, A::Error> {
            // In pieces of about 16 KiB, copied once into a vector of the exact length: a
            // vector grown by doubling leaves its earlier buffers behind, too large for
            // the small pieces the tree's nodes are, while freed pieces are reused by them.
            let piece = (16 << 10) / std::mem::size_of::<(K, V)>().max(1) + 1;
            let mut full: Vec<Vec<(K, V)>> = Vec::new();
            let mut last = Vec::new();
            while let Some(entry) = map.next_entry()? {
                if last.len() == piece {
                    full.push(std::mem::replace(&mut last, Vec::with_capacity(piece)));
                }
                last.push(entry);
            }
            let mut entries = Vec::with_capacity(full.len() * piece + last.len());
            for p in full {
                entries.extend(p);
            }
            entries.extend(last);
            // `from_iter` sorts stably, then keeps the last of equal keys.
            Ok(entries.into_iter().collect())
        }
    }

    d.deserialize_map(Entries(std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Lists {
        #[serde(deserialize_with = "super::vec")]
        one: Vec<String>,
        #[serde(default, deserialize_with = "super::vec")]
        absent: Vec<String>,
        #[serde(deserialize_with = "super::map")]
        map: BTreeMap<String, u32>,
    }

    #[test]
    fn lists_read_from_json_have_no_spare_room() {
        let read: Lists = serde_json::from_str(r#"{"one": ["a"], "map": {"b": 2, "a": 1}}"#).expect("valid JSON");
        assert_eq!(read.one, ["a"]);
        assert_eq!(read.one.capacity(), 1);
        assert!(read.absent.is_empty());
        assert_eq!(read.map.into_iter().collect::<Vec<_>>(), [("a".to_string(), 1), ("b".to_string(), 2)]);
    }

    /// The map reads as `BTreeMap`'s own `Deserialize` reads it: sorted whatever the
    /// order in the text, a key given twice keeps its last value, and the same error for
    /// a value of the wrong type (at the same line and column) or for a value that is not
    /// a map.
    #[test]
    fn maps_read_as_serde_reads_them() {
        #[derive(Deserialize, Debug, PartialEq)]
        struct Exact {
            #[serde(deserialize_with = "super::map")]
            map: BTreeMap<String, u32>,
        }
        #[derive(Deserialize, Debug, PartialEq)]
        struct Serde {
            map: BTreeMap<String, u32>,
        }
        for text in [
            r#"{"map": {}}"#,
            r#"{"map": {"c": 3, "a": 1, "b": 2}}"#,
            r#"{"map": {"a": 1, "b": 2, "a": 3, "c": 4, "b": 5}}"#,
            r#"{"map": {"a": 1, "b": "two"}}"#,
            r#"{"map": [1, 2]}"#,
            r#"{"map": {"a": 1,}}"#,
        ] {
            let exact = serde_json::from_str::<Exact>(text).map(|e| e.map).map_err(|e| e.to_string());
            let serde = serde_json::from_str::<Serde>(text).map(|s| s.map).map_err(|e| e.to_string());
            assert_eq!(exact, serde, "{text}");
        }
        let many: String = (0..5_000).rev().map(|i| format!("\"k{i:05}\": {i}")).collect::<Vec<_>>().join(", ");
        let text = format!("{{\"map\": {{{many}}}}}");
        let exact = serde_json::from_str::<Exact>(&text).unwrap().map;
        assert_eq!(exact, serde_json::from_str::<Serde>(&text).unwrap().map);
        assert_eq!(exact.len(), 5_000);
    }
}
