//! The value most of a list share: what the state's format 3 (a pool's nodes) and the sim
//! snapshot's format 2 (a group's nodes) write once, each node then giving only what it
//! differs by.

/// The most common value among `values` (the first seen of those tied). Only the first
/// [`DISTINCT`] different values are counted, which keeps a list of all-different values
/// linear; the fields this is for take a handful of values.
pub fn most_common<'a, T: PartialEq + ?Sized>(values: impl Iterator<Item = &'a T>) -> Option<&'a T> {
    let mut seen: Vec<(&T, usize)> = Vec::new();
    for value in values {
        if let Some(i) = seen.iter().position(|(v, _)| *v == value) {
            seen[i].1 += 1;
        } else if seen.len() < DISTINCT {
            seen.push((value, 1));
        }
    }
    let best = seen.iter().map(|(_, c)| *c).max()?;
    seen.into_iter().find(|(_, c)| *c == best).map(|(v, _)| v)
}

const DISTINCT: usize = 8;

/// A field that is there, `null` included, is `Some` (with `#[serde(default)]`, an absent
/// one is `None`): an optional field a record differs by as `null`.
pub fn present<'de, D: serde::Deserializer<'de>, T: serde::Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    <Option<T> as serde::Deserialize>::deserialize(d).map(Some)
}
