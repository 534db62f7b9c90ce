//! A hasher for the spec's own names (resource kinds and names, local names), for the
//! maps the load looks every reference up in (`order.rs`, `graph::build`): foldhash's
//! fast hasher (already in the build, under `hashbrown`), a few instructions a word,
//! where the standard SipHash is built to resist chosen keys. The keys here are what the
//! spec's author wrote, read by the author's own process: nothing an attacker picks to
//! slow a service down. A fixed seed: the maps are never iterated, so nothing printed
//! depends on it.

/// Builds the hashers of a [`NamesMap`].
pub type BuildNamesHasher = foldhash::fast::FixedState;

/// A `HashMap` keyed by spec names, hashed with foldhash.
pub type NamesMap<K, V> = std::collections::HashMap<K, V, BuildNamesHasher>;

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
