//! The sim's node and launch-token records ([`SimNode`], [`TokenRecord`]), and how the
//! snapshot's format 2 writes the world's lists of them so that a plan reads fewer bytes
//! (docs/design/state-and-locks.md, "The sim world"). Nothing is dropped: reading gives
//! back exactly the world written.
//!
//! - `nodes`: a list of groups, one per set of tags its nodes share once the tag
//!   `gpuplan:address` is left out where it names the node's own pool (every node
//!   gpuplan creates carries it). A group is `{"common": {...}, "each": [...]}`: `common`
//!   holds those tags, `address_tag` (its nodes carry their pool as `gpuplan:address`),
//!   and the value most of its nodes have of every other field but the id, the pool and
//!   the launch and end times; `each` lists its nodes in id order as `{"id", "pool",
//!   "launched_ms", "ended_ms"}` and the fields they differ by (an optional field
//!   `common` has and the node lacks as `null`).
//! - `tokens`: by token, the ids its create placed: one id alone as a string, several as
//!   a list, and only a token that placed fewer nodes than it asked for as `{"ids",
//!   "requested"}` ([`TokenRecord`]'s reading takes all three).
//!
//! Format 1 wrote the nodes as a map by id, each node whole, and every token as `{"ids",
//! "requested"}`: both forms read. The event log keeps writing whole records.

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::addr::{Address, Kind};
use crate::model::common::{most_common, present};
use crate::model::hardware::Hardware;
use crate::model::node::{TAG_ADDRESS, TAG_MANAGED};
use crate::model::{Capacity, Node, NodeState, Tags};

/// One VM. `pool` is `None` for foreign VMs (see `SimCloud::insert_untagged`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimNode {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<Address>,
    pub instance_type: String,
    pub region: String,
    pub zone: String,
    pub capacity: Capacity,
    pub state: NodeState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub tags: Tags,
    /// Unix milliseconds.
    pub launched_ms: u64,
    /// When it was reclaimed or terminated, by the sim clock (ms): listed until an hour
    /// later, then forgotten at the next compaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// Its disks, fabric and placement group (`disk {}`, `network {}`), as launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<Box<crate::model::hardware::Hardware>>,
}

impl SimNode {
    /// Carries `gpuplan:managed=true`: the only nodes the API lets gpuplan see or delete.
    pub fn is_managed(&self) -> bool {
        self.tags.get(TAG_MANAGED).is_some_and(|v| v == "true")
    }

    pub fn is_live(&self) -> bool {
        matches!(self.state, NodeState::Pending | NodeState::Running)
    }

    pub fn to_node(&self) -> Node {
        Node {
            provider: None,
            id: self.id.clone(),
            // Foreign VMs belong to no pool; `Node` needs one, so they report a name no
            // gpuplan address can take (a leading `-` is not an identifier).
            pool: self.pool.clone().unwrap_or_else(|| Address::new(Kind::GpuPool, "-foreign")),
            instance_type: self.instance_type.clone(),
            region: self.region.clone(),
            zone: self.zone.clone(),
            capacity: self.capacity,
            state: self.state,
            image: self.image.clone(),
            tags: self.tags.clone(),
        }
    }
}

/// What an idempotency token produced, so a repeated call answers the same. Written whole;
/// read in the snapshot's shorter forms too ([`token_in`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenRecord {
    pub ids: Vec<String>,
    pub requested: u32,
}

impl<'de> Deserialize<'de> for TokenRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        token_in(d)
    }
}

/// What a group's nodes share: its tags, and the value most of them have of every field
/// a node may differ by.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(bound(
    serialize = "S: Serialize, T: Serialize + std::borrow::Borrow<Tags>, H: Serialize",
    deserialize = "S: Deserialize<'de>, T: Deserialize<'de> + Default, H: Deserialize<'de>"
))]
struct Common<S, T, H> {
    instance_type: S,
    region: S,
    zone: S,
    capacity: Capacity,
    state: NodeState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    image: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hardware: Option<H>,
    #[serde(default, skip_serializing_if = "is_empty")]
    tags: T,
    /// Each node also carries `gpuplan:address` = its pool.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    address_tag: bool,
}

fn is_empty<T: std::borrow::Borrow<Tags>>(tags: &T) -> bool {
    tags.borrow().is_empty()
}

/// A node of a group: what is its own, and what it differs from `common` by.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(bound(
    serialize = "S: Serialize, P: Serialize, H: Serialize",
    deserialize = "S: Deserialize<'de>, P: Deserialize<'de>, H: Deserialize<'de>"
))]
struct Each<S, P, H> {
    id: S,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pool: Option<P>,
    launched_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ended_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    instance_type: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    region: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zone: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    capacity: Option<Capacity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<NodeState>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    image: Option<Option<S>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    hardware: Option<Option<H>>,
}

/// Whether a node's field differs from `common`'s.
fn differs<T: PartialEq + ?Sized>(value: &T, common: &T) -> bool {
    value != common
}

/// A node's tags without the one derived from its pool, and whether it was there.
fn shared_tags(n: &SimNode) -> (Tags, bool) {
    let own = n.pool.as_ref().is_some_and(|p| n.tags.get(TAG_ADDRESS).is_some_and(|v| p.to_string() == v));
    let mut tags = n.tags.clone();
    if own {
        tags.remove(TAG_ADDRESS);
    }
    (tags, own)
}

/// `World::nodes` as format 2 writes it: its groups, each node in id order.
pub fn nodes_out<S: Serializer>(nodes: &BTreeMap<String, SimNode>, s: S) -> Result<S::Ok, S::Error> {
    let mut index: HashMap<(Tags, bool), usize> = HashMap::new();
    let mut groups: Vec<((Tags, bool), Vec<&SimNode>)> = Vec::new();
    for n in nodes.values() {
        let key = shared_tags(n);
        let i = *index.entry(key.clone()).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(n);
    }
    s.collect_seq(groups.iter().map(|((tags, own), members)| group(members, tags, *own)))
}

#[derive(Serialize)]
struct GroupOut<'a> {
    common: Common<&'a str, &'a Tags, &'a Hardware>,
    each: Vec<Each<&'a str, &'a Address, &'a Hardware>>,
}

fn group<'a>(nodes: &[&'a SimNode], tags: &'a Tags, address_tag: bool) -> GroupOut<'a> {
    let first = nodes[0];
    let pick = |f: fn(&SimNode) -> &str| most_common(nodes.iter().map(|n| f(n))).unwrap_or(f(first));
    let common = Common {
        instance_type: pick(|n| &n.instance_type),
        region: pick(|n| &n.region),
        zone: pick(|n| &n.zone),
        capacity: *most_common(nodes.iter().map(|n| &n.capacity)).unwrap_or(&first.capacity),
        state: *most_common(nodes.iter().map(|n| &n.state)).unwrap_or(&first.state),
        image: most_common(nodes.iter().map(|n| &n.image)).unwrap_or(&first.image).as_deref(),
        hardware: most_common(nodes.iter().map(|n| &n.hardware)).unwrap_or(&first.hardware).as_deref(),
        tags,
        address_tag,
    };
    let each = nodes.iter().map(|n| each(n, &common)).collect();
    GroupOut { common, each }
}

fn each<'a>(n: &'a SimNode, c: &Common<&str, &Tags, &Hardware>) -> Each<&'a str, &'a Address, &'a Hardware> {
    let text = |value: &'a str, common: &str| differs(value, common).then_some(value);
    Each {
        id: &n.id,
        pool: n.pool.as_ref(),
        launched_ms: n.launched_ms,
        ended_ms: n.ended_ms,
        instance_type: text(&n.instance_type, c.instance_type),
        region: text(&n.region, c.region),
        zone: text(&n.zone, c.zone),
        capacity: differs(&n.capacity, &c.capacity).then_some(n.capacity),
        state: differs(&n.state, &c.state).then_some(n.state),
        image: differs(&n.image.as_deref(), &c.image).then_some(n.image.as_deref()),
        hardware: differs(&n.hardware.as_deref(), &c.hardware).then_some(n.hardware.as_deref()),
    }
}

type CommonIn = Common<String, Tags, Box<Hardware>>;
type EachIn = Each<String, Address, Box<Hardware>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupIn {
    common: CommonIn,
    each: Vec<EachIn>,
}

/// `World::nodes` read in either form (format 1's map by id, or format 2's groups). An id
/// given twice keeps its last node, as the map does.
pub fn nodes_in<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, SimNode>, D::Error> {
    struct Nodes;
    impl<'de> Visitor<'de> for Nodes {
        type Value = BTreeMap<String, SimNode>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of nodes by id, or a list of groups of nodes")
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            crate::model::exact::map(MapAccessDeserializer::new(map))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut all: Vec<(String, SimNode)> = Vec::new();
            let mut address = String::new();
            while let Some(GroupIn { common, each }) = seq.next_element::<GroupIn>()? {
                all.reserve(each.len());
                for e in each {
                    let node = node(e, &common, &mut address).map_err(serde::de::Error::custom)?;
                    all.push((node.id.clone(), node));
                }
            }
            // Each group comes in id order: `from_iter`'s stable sort merges the runs, and
            // keeps the last of equal ids.
            Ok(all.into_iter().collect())
        }
    }
    d.deserialize_any(Nodes)
}

/// A node of a group, whole. `address` is a buffer kept between nodes.
fn node(e: EachIn, c: &CommonIn, address: &mut String) -> Result<SimNode, String> {
    let tags = match (&e.pool, c.address_tag) {
        (_, false) => c.tags.clone(),
        (Some(pool), true) => {
            address.clear();
            write!(address, "{pool}").map_err(|e| e.to_string())?;
            c.tags.with(TAG_ADDRESS, address)
        }
        (None, true) => return Err(format!("node `{}` carries its pool as a tag but has no pool", e.id)),
    };
    Ok(SimNode {
        id: e.id,
        pool: e.pool,
        instance_type: e.instance_type.unwrap_or_else(|| c.instance_type.clone()),
        region: e.region.unwrap_or_else(|| c.region.clone()),
        zone: e.zone.unwrap_or_else(|| c.zone.clone()),
        capacity: e.capacity.unwrap_or(c.capacity),
        state: e.state.unwrap_or(c.state),
        image: e.image.unwrap_or_else(|| c.image.clone()),
        tags,
        launched_ms: e.launched_ms,
        ended_ms: e.ended_ms,
        hardware: e.hardware.unwrap_or_else(|| c.hardware.clone()),
    })
}

/// `World::tokens` as format 2 writes them (see the module docs).
pub fn tokens_out<S: Serializer>(tokens: &BTreeMap<String, TokenRecord>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(tokens.iter().map(|(token, record)| (token, TokenOut(record))))
}

struct TokenOut<'a>(&'a TokenRecord);

impl Serialize for TokenOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        match &r.ids[..] {
            _ if r.ids.len() != r.requested as usize => r.serialize(s),
            [one] => s.serialize_str(one),
            ids => ids.serialize(s),
        }
    }
}

/// A [`TokenRecord`] in any of its forms: `{"ids", "requested"}`, or the ids alone (a list,
/// or one id as a string) when the create placed every node it asked for.
pub fn token_in<'de, D: Deserializer<'de>>(d: D) -> Result<TokenRecord, D::Error> {
    struct Token;
    impl<'de> Visitor<'de> for Token {
        type Value = TokenRecord;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a token's node ids (a string or a list), or an object of `ids` and `requested`")
        }

        fn visit_str<E: serde::de::Error>(self, id: &str) -> Result<TokenRecord, E> {
            Ok(TokenRecord { ids: vec![id.to_string()], requested: 1 })
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<TokenRecord, A::Error> {
            let ids: Vec<String> = crate::model::exact::vec(serde::de::value::SeqAccessDeserializer::new(seq))?;
            let requested = u32::try_from(ids.len()).map_err(serde::de::Error::custom)?;
            Ok(TokenRecord { ids, requested })
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TokenRecord, A::Error> {
            #[derive(Deserialize)]
            struct Whole {
                ids: Vec<String>,
                requested: u32,
            }
            let Whole { ids, requested } = Whole::deserialize(MapAccessDeserializer::new(map))?;
            Ok(TokenRecord { ids, requested })
        }
    }
    d.deserialize_any(Token)
}
