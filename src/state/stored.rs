//! How format 3 writes the state's two long lists, a pool's node records and the spend
//! ledger, so that a big state stays light (docs/design/state-and-locks.md, "State that
//! stays small"). Nothing is dropped: reading gives back exactly the values written.
//!
//! - A pool's `nodes`: `{"common": {...}, "each": [...]}`. `common` holds every field but
//!   the id, each with the value most of the pool's nodes have; `each` lists the nodes in
//!   order, a node whose fields all equal `common` as its id alone, any other as `{"id",
//!   and the fields that differ}` (a field `common` has and the node lacks as `null`, tags
//!   as the node's whole map).
//! - The `spend` ledger: a list of groups, one per pool, provider, job, instance type,
//!   capacity, price and price source (in that order), each with its `lines` by node id: a
//!   line still open as its launch time (ms), a closed one as `{"start_ms", "end_ms"}`.
//!
//! Both are read in either form: formats 1 and 2 wrote a plain list of nodes and a map of
//! ledger lines, and a state `serde_json` writes from the in-memory types (`state pull`,
//! `errored.json`) has them too. Only [`super::pretty`] writes these forms.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::model::{ResourceState, SpendEntry};
use crate::addr::Address;
use crate::model::common::most_common;
use crate::model::node::NodeState;
use crate::model::{Capacity, Node, Tags};

/// Every field of a [`Node`] but its id.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(bound(
    serialize = "P: Serialize, S: Serialize, T: Serialize + std::borrow::Borrow<Tags>",
    deserialize = "P: Deserialize<'de>, S: Deserialize<'de>, T: Deserialize<'de> + Default"
))]
struct Common<P, S, T> {
    pool: P,
    instance_type: S,
    region: S,
    zone: S,
    capacity: Capacity,
    state: NodeState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    image: Option<S>,
    #[serde(default, skip_serializing_if = "is_empty")]
    tags: T,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provider: Option<S>,
}

fn is_empty<T: std::borrow::Borrow<Tags>>(tags: &T) -> bool {
    tags.borrow().is_empty()
}

/// A node in `each`, as far as it differs from `common`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(bound(
    serialize = "P: Serialize, S: Serialize, T: Serialize",
    deserialize = "P: Deserialize<'de>, S: Deserialize<'de>, T: Deserialize<'de>"
))]
struct Differs<P, S, T> {
    id: S,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pool: Option<P>,
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
    /// `Some(None)`: the node has no image where `common` has one (`"image": null`).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::model::common::present")]
    image: Option<Option<S>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tags: Option<T>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::model::common::present")]
    provider: Option<Option<S>>,
}

/// `Some(value)` where it differs from `common`'s.
fn differs<'a, T: PartialEq + ?Sized>(value: &'a T, common: &T) -> Option<&'a T> {
    (value != common).then_some(value)
}

/// A pool's nodes as format 3 writes them.
pub(super) struct NodesOut<'a>(pub &'a [Node]);

impl Serialize for NodesOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let nodes = self.0;
        let (Some(first), true) = (nodes.first(), nodes.len() > 1) else {
            return nodes.serialize(s);
        };
        let pick = |f: fn(&Node) -> &str| most_common(nodes.iter().map(f)).unwrap_or(f(first));
        let common = Common {
            pool: most_common(nodes.iter().map(|n| &n.pool)).unwrap_or(&first.pool),
            instance_type: pick(|n| &n.instance_type),
            region: pick(|n| &n.region),
            zone: pick(|n| &n.zone),
            capacity: *most_common(nodes.iter().map(|n| &n.capacity)).unwrap_or(&first.capacity),
            state: *most_common(nodes.iter().map(|n| &n.state)).unwrap_or(&first.state),
            image: most_common(nodes.iter().map(|n| &n.image)).unwrap_or(&first.image).as_deref(),
            tags: most_common(nodes.iter().map(|n| &n.tags)).unwrap_or(&first.tags),
            provider: most_common(nodes.iter().map(|n| &n.provider)).unwrap_or(&first.provider).as_deref(),
        };
        let each: Vec<Each> = nodes.iter().map(|n| Each::of(n, &common)).collect();
        #[derive(Serialize)]
        struct Packed<'a> {
            common: &'a Common<&'a Address, &'a str, &'a Tags>,
            each: Vec<Each<'a>>,
        }
        Packed { common: &common, each }.serialize(s)
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum Each<'a> {
    Id(&'a str),
    Differs(Box<Differs<&'a Address, &'a str, &'a Tags>>),
}

impl<'a> Each<'a> {
    fn of(n: &'a Node, c: &Common<&Address, &str, &Tags>) -> Self {
        let optional =
            |value: &'a Option<String>, common: Option<&str>| (value.as_deref() != common).then_some(value.as_deref());
        let d = Differs {
            id: n.id.as_str(),
            pool: differs(&n.pool, c.pool),
            instance_type: differs(n.instance_type.as_str(), c.instance_type),
            region: differs(n.region.as_str(), c.region),
            zone: differs(n.zone.as_str(), c.zone),
            capacity: differs(&n.capacity, &c.capacity).copied(),
            state: differs(&n.state, &c.state).copied(),
            image: optional(&n.image, c.image),
            tags: differs(&n.tags, c.tags),
            provider: optional(&n.provider, c.provider),
        };
        let same = d.pool.is_none()
            && d.instance_type.is_none()
            && d.region.is_none()
            && d.zone.is_none()
            && d.capacity.is_none()
            && d.state.is_none()
            && d.image.is_none()
            && d.tags.is_none()
            && d.provider.is_none();
        if same { Each::Id(d.id) } else { Each::Differs(Box::new(d)) }
    }
}

/// `ResourceState::nodes` read in either form (the list, or `common` and `each`).
pub(super) fn nodes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Node>, D::Error> {
    struct Nodes;
    impl<'de> Visitor<'de> for Nodes {
        type Value = Vec<Node>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of nodes, or an object of `common` and `each`")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Vec<Node>, A::Error> {
            crate::model::exact::vec(SeqAccessDeserializer::new(seq))
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Vec<Node>, A::Error> {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Packed {
                common: Common<Address, String, Tags>,
                each: Vec<EachIn>,
            }
            let Packed { common: c, each } = Packed::deserialize(MapAccessDeserializer::new(map))?;
            Ok(each.into_iter().map(|e| e.node(&c)).collect())
        }
    }
    d.deserialize_any(Nodes)
}

/// A node of `each` as read: its id alone, or what differs.
enum EachIn {
    Id(String),
    Differs(Box<Differs<Address, String, Tags>>),
}

impl EachIn {
    fn node(self, c: &Common<Address, String, Tags>) -> Node {
        match self {
            EachIn::Id(id) => Differs::same(id),
            EachIn::Differs(d) => *d,
        }
        .into_node(c)
    }
}

impl Differs<Address, String, Tags> {
    fn same(id: String) -> Self {
        Differs {
            id,
            pool: None,
            instance_type: None,
            region: None,
            zone: None,
            capacity: None,
            state: None,
            image: None,
            tags: None,
            provider: None,
        }
    }

    fn into_node(self, c: &Common<Address, String, Tags>) -> Node {
        Node {
            id: self.id,
            pool: self.pool.unwrap_or_else(|| c.pool.clone()),
            instance_type: self.instance_type.unwrap_or_else(|| c.instance_type.clone()),
            region: self.region.unwrap_or_else(|| c.region.clone()),
            zone: self.zone.unwrap_or_else(|| c.zone.clone()),
            capacity: self.capacity.unwrap_or(c.capacity),
            state: self.state.unwrap_or(c.state),
            image: self.image.unwrap_or_else(|| c.image.clone()),
            tags: self.tags.unwrap_or_else(|| c.tags.clone()),
            provider: self.provider.unwrap_or_else(|| c.provider.clone()),
        }
    }
}

impl<'de> Deserialize<'de> for EachIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct One;
        impl<'de> Visitor<'de> for One {
            type Value = EachIn;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a node's id, or an object of its id and the fields that differ from `common`")
            }

            fn visit_str<E: de::Error>(self, id: &str) -> Result<EachIn, E> {
                Ok(EachIn::Id(id.to_string()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<EachIn, A::Error> {
                Differs::deserialize(MapAccessDeserializer::new(map)).map(|d| EachIn::Differs(Box::new(d)))
            }
        }
        d.deserialize_any(One)
    }
}

/// A resource as format 3 writes it: the derived form, its nodes as [`NodesOut`].
pub(super) struct ResourceOut<'a>(pub &'a ResourceState);

impl Serialize for ResourceOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // Every field by name, in the derive's order and with its `skip_serializing_if`:
        // a field added to `ResourceState` fails to compile here until it is written.
        let ResourceState {
            kind,
            provider,
            provider_kind,
            region,
            config,
            sensitive,
            dependencies,
            nodes,
            job,
            fallback,
            placement,
            reservation,
        } = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("kind", kind)?;
        if let Some(v) = provider {
            m.serialize_entry("provider", v)?;
        }
        if let Some(v) = provider_kind {
            m.serialize_entry("provider_kind", v)?;
        }
        if let Some(v) = region {
            m.serialize_entry("region", v)?;
        }
        m.serialize_entry("config", config)?;
        if !sensitive.is_empty() {
            m.serialize_entry("sensitive", sensitive)?;
        }
        if !dependencies.is_empty() {
            m.serialize_entry("dependencies", dependencies)?;
        }
        if !nodes.is_empty() {
            m.serialize_entry("nodes", &NodesOut(nodes))?;
        }
        if let Some(v) = job {
            m.serialize_entry("job", v)?;
        }
        if let Some(v) = fallback {
            m.serialize_entry("fallback", v)?;
        }
        if let Some(v) = placement {
            m.serialize_entry("placement", v)?;
        }
        if let Some(v) = reservation {
            m.serialize_entry("reservation", v)?;
        }
        m.end()
    }
}

/// What the lines of one ledger group share.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LedgerGroup<S, L> {
    pub pool: S,
    pub provider: S,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<S>,
    pub instance_type: S,
    pub capacity: Capacity,
    pub usd_per_hour: f64,
    pub price_source: S,
    /// By node id: its launch (ms) while the line is open, else `{start_ms, end_ms}`.
    pub lines: L,
}

/// When a ledger line's node ran.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Span {
    Open(u64),
    Closed {
        start_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end_ms: Option<u64>,
    },
}

/// Read as its JSON type says, with no buffer: an untagged enum copies each value aside to
/// try the variants in turn, which was most of the cost of a ledger line.
impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SpanVisitor;
        impl<'de> Visitor<'de> for SpanVisitor {
            type Value = Span;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a launch time (ms), or an object of `start_ms` and `end_ms`")
            }

            fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Span, E> {
                Ok(Span::Open(ms))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Span, A::Error> {
                #[derive(Deserialize)]
                struct Closed {
                    start_ms: u64,
                    #[serde(default)]
                    end_ms: Option<u64>,
                }
                let Closed { start_ms, end_ms } = Closed::deserialize(MapAccessDeserializer::new(map))?;
                Ok(Span::Closed { start_ms, end_ms })
            }
        }
        d.deserialize_any(SpanVisitor)
    }
}

impl Span {
    fn of(e: &SpendEntry) -> Self {
        match e.end_ms {
            None => Span::Open(e.start_ms),
            end_ms => Span::Closed { start_ms: e.start_ms, end_ms },
        }
    }

    fn times(&self) -> (u64, Option<u64>) {
        match *self {
            Span::Open(start) => (start, None),
            Span::Closed { start_ms, end_ms } => (start_ms, end_ms),
        }
    }
}

/// The spend ledger as format 3 writes it: its groups.
pub(super) struct LedgerOut<'a>(pub &'a BTreeMap<String, SpendEntry>);

type GroupKey<'a> = (&'a str, &'a str, Option<&'a str>, &'a str, Capacity, u64, &'a str);

impl Serialize for LedgerOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut groups: BTreeMap<GroupKey, Vec<(&String, &SpendEntry)>> = BTreeMap::new();
        for (id, e) in self.0 {
            let key = (
                e.pool.as_str(),
                e.provider.as_str(),
                e.job.as_deref(),
                e.instance_type.as_str(),
                e.capacity,
                e.usd_per_hour.to_bits(),
                e.price_source.as_str(),
            );
            groups.entry(key).or_default().push((id, e));
        }
        let out = groups.into_iter().map(|((pool, provider, job, instance_type, capacity, usd, source), lines)| {
            LedgerGroup {
                pool,
                provider,
                job,
                instance_type,
                capacity,
                usd_per_hour: f64::from_bits(usd),
                price_source: source,
                lines: lines.into_iter().map(|(id, e)| (id, Span::of(e))).collect::<BTreeMap<_, _>>(),
            }
        });
        s.collect_seq(out)
    }
}

/// `State::spend` read in either form (the map of lines, or the list of groups). A node id
/// in two groups is an error: the file was edited or broken.
pub(super) fn ledger<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, SpendEntry>, D::Error> {
    struct Ledger;
    impl<'de> Visitor<'de> for Ledger {
        type Value = BTreeMap<String, SpendEntry>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of ledger lines by node id, or a list of ledger groups")
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            crate::model::exact::map(MapAccessDeserializer::new(map))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut lines: Vec<(String, SpendEntry)> = Vec::new();
            while let Some(g) = seq.next_element::<LedgerGroup<String, BTreeMap<String, Span>>>()? {
                lines.extend(group_lines(g));
            }
            // The lines' order by id, found over their indices: sorting the lines
            // themselves moved 3,000 entries of 150 bytes about (7 M instructions).
            let mut order: Vec<usize> = (0..lines.len()).collect();
            order.sort_by(|&a, &b| lines[a].0.cmp(&lines[b].0));
            if let Some(w) = order.windows(2).find(|w| lines[w[0]].0 == lines[w[1]].0) {
                return Err(de::Error::custom(format!("ledger line `{}` is in two groups", lines[w[0]].0)));
            }
            let mut slots: Vec<Option<(String, SpendEntry)>> = lines.into_iter().map(Some).collect();
            Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
        }
    }
    d.deserialize_any(Ledger)
}

/// A group's lines, whole: each takes a copy of what the group's lines share, and the last
/// one (most groups have one line) takes the group's own strings.
fn group_lines(g: LedgerGroup<String, BTreeMap<String, Span>>) -> impl Iterator<Item = (String, SpendEntry)> {
    let LedgerGroup { pool, provider, job, instance_type, capacity, usd_per_hour, price_source, lines } = g;
    let mut shared = Some((pool, provider, job, instance_type, price_source));
    let count = lines.len();
    lines.into_iter().enumerate().filter_map(move |(i, (id, span))| {
        let (pool, provider, job, instance_type, price_source) =
            if i + 1 == count { shared.take()? } else { shared.clone()? };
        let (start_ms, end_ms) = span.times();
        let entry =
            SpendEntry { pool, provider, job, instance_type, capacity, usd_per_hour, price_source, start_ms, end_ms };
        Some((id, entry))
    })
}

/// The schema of `State::spend`: either form.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum LedgerSchema {
    Groups(Vec<LedgerGroup<String, BTreeMap<String, Span>>>),
    Lines(BTreeMap<String, SpendEntry>),
}

/// The schema of `ResourceState::nodes`: either form (each node as JSON).
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum NodesSchema {
    List(Vec<serde_json::Value>),
    Packed { common: serde_json::Value, each: Vec<serde_json::Value> },
}
