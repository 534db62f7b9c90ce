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

/// A `BTreeMap` rebuilt from its sorted entries, so its nodes are full.
pub fn map<'de, D, K, V>(d: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
{
    // `into_iter` frees the loose nodes as it goes, so the two maps barely overlap.
    Ok(BTreeMap::<K, V>::deserialize(d)?.into_iter().collect())
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
}
