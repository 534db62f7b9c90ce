//! A hasher for the spec's own names (resource kinds and names, local names), for the
//! maps the load looks every reference up in (`order.rs`, `graph::build`): the
//! multiply-rotate hash rustc uses for its symbol tables (FxHash), a few instructions a
//! word, where the standard SipHash is built to resist chosen keys. The keys here are
//! what the spec's author wrote, read by the author's own process: nothing an attacker
//! picks to slow a service down.

use std::hash::{BuildHasherDefault, Hasher};

/// Builds [`NamesHasher`]s: the `S` of a `HashMap` keyed by spec names.
pub type BuildNamesHasher = BuildHasherDefault<NamesHasher>;

/// A `HashMap` keyed by spec names, hashed with [`NamesHasher`].
pub type NamesMap<K, V> = std::collections::HashMap<K, V, BuildNamesHasher>;

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// FxHash: each word rotated into the state and multiplied.
#[derive(Debug, Default, Clone, Copy)]
pub struct NamesHasher {
    hash: u64,
}

impl NamesHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for NamesHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
        }
        let rest = chunks.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        // The length goes in with the last word, so "a" and "a\0" differ.
        self.add(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 56));
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hash};

    use super::*;

    fn hash<T: Hash>(t: &T) -> u64 {
        BuildNamesHasher::default().hash_one(t)
    }

    #[test]
    fn names_of_a_fleet_hash_apart_and_maps_find_them() {
        // Names alike but for a digit or their length, as a generated fleet's are.
        let names: Vec<String> =
            (0..20_000).map(|i| format!("p{i:06}")).chain((0..64).map(|n| "a".repeat(n))).collect();
        let hashes: HashSet<u64> = names.iter().map(|n| hash(&("gpu_pool", n.as_str()))).collect();
        assert_eq!(hashes.len(), names.len());
        assert_ne!(hash(&"a"), hash(&"a\0"));
        let map: NamesMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(map.get(n.as_str()), Some(&i));
        }
        assert_eq!(map.get("p020000"), None);
    }
}
