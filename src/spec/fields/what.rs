//! How a block being decoded is named in messages ([`What`]), and the bits that tell a
//! [`super::Fields`] which names it holds ([`name_bit`]).

use std::rc::Rc;

use crate::addr::{InstanceKey, Kind};

/// How messages name a block being decoded (`gpu_pool "train"`, `the `nodes` block of
/// gpu_pool "train"`): written out only when a message is, not for each of a fleet's
/// thousands of blocks that decode without one.
#[derive(Debug, Clone)]
pub enum What<'r> {
    /// Already written out.
    Text(String),
    /// `KIND "NAME"`, with the instance's key (`gpu_pool "a"["x"]`) when it has one.
    Resource(Kind, &'r str, Option<InstanceKey>),
    /// The block `NAME` inside another.
    Nested(&'static str, Rc<What<'r>>),
}

impl From<String> for What<'_> {
    fn from(s: String) -> Self {
        What::Text(s)
    }
}

impl std::fmt::Display for What<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            What::Text(s) => f.write_str(s),
            What::Resource(kind, name, None) => write!(f, "{kind} {name:?}"),
            What::Resource(kind, name, Some(key)) => write!(f, "{kind} {name:?}{key}"),
            What::Nested(name, parent) => write!(f, "the `{name}` block of {parent}"),
        }
    }
}

/// One of 64 bits for a name, from its length and its first and last bytes: equal names
/// have equal bits, so a name whose bit a block lacks is not in the block.
pub(super) fn name_bit(name: &str) -> u64 {
    let b = name.as_bytes();
    let (first, last) = (b.first().copied().unwrap_or(0), b.last().copied().unwrap_or(0));
    let h = b.len().wrapping_mul(7) ^ usize::from(first) ^ (usize::from(last) << 2);
    1 << (h % 64)
}

/// The [`name_bit`]s of all these names.
pub(super) fn name_bits<'n>(names: impl Iterator<Item = &'n str>) -> u64 {
    names.fold(0, |bits, n| bits | name_bit(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_named_as_the_message_once_wrote_it_out() {
        let pool = Rc::new(What::Resource(Kind::GpuPool, "train", None));
        assert_eq!(pool.to_string(), "gpu_pool \"train\"");
        let keyed = Rc::new(What::Resource(Kind::GpuPool, "train", Some(InstanceKey::Str("a".into()))));
        assert_eq!(keyed.to_string(), "gpu_pool \"train\"[\"a\"]");
        let nested = Rc::new(What::Nested("nodes", keyed));
        assert_eq!(
            What::Nested("mix", nested).to_string(),
            "the `mix` block of the `nodes` block of gpu_pool \"train\"[\"a\"]"
        );
        assert_eq!(What::from("element 1 of `x`".to_string()).to_string(), "element 1 of `x`");
    }

    #[test]
    fn a_name_is_among_names_whose_bits_hold_its_own() {
        let names = ["provider", "region", "zones", "gpu", "gpus_per_node", "nodes", "mix", "labels", "depends_on"];
        let bits = name_bits(names.iter().copied());
        assert!(names.iter().all(|n| bits & name_bit(n) != 0));
        // Most names a pool decoder asks for and a plain pool lacks miss at once.
        let absent = ["count", "for_each", "lifecycle", "placement", "kubernetes", "health", "disk", "network"];
        assert!(absent.iter().filter(|n| bits & name_bit(n) == 0).count() >= absent.len() / 2);
    }
}
