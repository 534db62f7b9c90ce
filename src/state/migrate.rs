//! The state file's older formats, and the node tags it leaves out
//! (docs/design/state-and-locks.md, "State that stays small").
//!
//! Format 2 does not store the ownership tags gpuplan sets on every node it creates
//! (`gpuplan:managed`, `gpuplan:lineage`, `gpuplan:address`, `gpuplan:provider`) when they
//! hold the values the state implies: [`pack`] drops them as the file is written, and
//! [`expand`] puts them back as it is read. A node that lacks one of them in the cloud
//! says so in [`LACKS`], so the round trip gives back exactly the tags it had. Format 1
//! stored every tag and no summaries: it reads as it is ([`upgrade`]).

use std::borrow::Cow;

use super::model::{FORMAT_VERSION, ResourceState, State};
use crate::model::node::{TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, TAG_PROVIDER};
use crate::model::{Node, Tags};

/// The stored-only tag listing the derived tags a node really lacks, comma-separated.
/// `gpuplan:` keys are gpuplan's own, so no cloud tag can take this one.
pub const LACKS: &str = "gpuplan:lacks";

/// The oldest format this gpuplan reads.
pub const OLDEST: u32 = 1;

/// Whether this gpuplan reads (and migrates) a state of `version`.
pub fn readable(version: u32) -> bool {
    (OLDEST..=FORMAT_VERSION).contains(&version)
}

/// A state just parsed, in the form the rest of gpuplan uses: the current format with
/// every tag. The caller has checked [`readable`].
pub fn upgrade(mut state: State) -> State {
    // Nodes in a reservation, recorded as on-demand before `reserved` existed.
    for node in state.resources.values_mut().flat_map(|r| &mut r.nodes) {
        node.read_reserved();
    }
    if state.format_version >= 2 {
        let lineage = state.lineage.clone();
        for resource in state.resources.values_mut() {
            let provider = resource.provider.clone();
            // A pool's nodes mostly store the same tags, pool and provider block: a node
            // like the one before it takes that node's expanded tags (one copy), not a
            // merge of its own (its address written out, the tags encoded again).
            let mut last: Option<(Tags, Tags)> = None;
            let mut before: Option<&Node> = None;
            for node in &mut resource.nodes {
                let same = before.is_some_and(|b| b.pool == node.pool && b.provider == node.provider);
                match &last {
                    Some((stored, expanded)) if same && *stored == node.tags => node.tags = expanded.clone(),
                    _ => {
                        let stored = node.tags.clone();
                        expand_node(node, &lineage, provider.as_deref());
                        last = Some((stored, node.tags.clone()));
                    }
                }
                before = Some(node);
            }
        }
    }
    // Format 1 differs only by what format 2 leaves out or adds: its tags are all there.
    state.format_version = FORMAT_VERSION;
    state
}

/// `resource` as format 2 stores it: its nodes without the tags [`expand`] rebuilds.
pub fn pack<'a>(resource: &'a ResourceState, lineage: &str) -> Cow<'a, ResourceState> {
    let provider = resource.provider.as_deref();
    if resource.nodes.is_empty() {
        return Cow::Borrowed(resource);
    }
    let mut packed = resource.clone();
    for node in &mut packed.nodes {
        pack_node(node, lineage, provider);
    }
    Cow::Owned(packed)
}

/// The ownership tags `node` would carry, by key: `None` where the state cannot say (a
/// node with no provider block recorded anywhere).
fn derived(node: &Node, lineage: &str, pool_provider: Option<&str>) -> [(&'static str, Option<String>); 4] {
    [
        (TAG_ADDRESS, Some(node.pool.to_string())),
        (TAG_LINEAGE, Some(lineage.to_string())),
        (TAG_MANAGED, Some("true".to_string())),
        (TAG_PROVIDER, node.provider.as_deref().or(pool_provider).map(str::to_string)),
    ]
}

fn pack_node(node: &mut Node, lineage: &str, pool_provider: Option<&str>) {
    let derived = derived(node, lineage, pool_provider);
    let same = |key: &str, value: &str| derived.iter().any(|(k, v)| *k == key && v.as_deref() == Some(value));
    let lacks: Vec<&str> =
        derived.iter().filter(|(k, v)| v.is_some() && !node.tags.contains_key(k)).map(|(k, _)| *k).collect();
    if lacks.is_empty() && !node.tags.iter().any(|(k, v)| same(k, v)) {
        return;
    }
    let joined = lacks.join(",");
    let kept = node.tags.iter().filter(|(k, v)| !same(k, v));
    let lacking = (!lacks.is_empty()).then_some((LACKS, joined.as_str()));
    node.tags = kept.chain(lacking).collect();
}

fn expand_node(node: &mut Node, lineage: &str, pool_provider: Option<&str>) {
    let lacks = node.tags.get(LACKS).unwrap_or_default();
    // What `derived` gives, borrowed: this runs for every node of every state read.
    let address = node.pool.to_string();
    let derived = [
        (TAG_ADDRESS, Some(address.as_str())),
        (TAG_LINEAGE, Some(lineage)),
        (TAG_MANAGED, Some("true")),
        (TAG_PROVIDER, node.provider.as_deref().or(pool_provider)),
    ];
    let missing = derived
        .into_iter()
        .filter(|(k, _)| !node.tags.contains_key(k) && !lacks.split(',').any(|l| l == *k))
        .filter_map(|(k, v)| Some((k, v?)));
    let mut missing = missing.peekable();
    if missing.peek().is_none() && lacks.is_empty() {
        return;
    }
    // Both in key order (`derived` is) and without a key in common: merged, the tags
    // come in order and are encoded without a sort.
    let mut tags: Vec<(&str, &str)> = Vec::with_capacity(node.tags.len() + 4);
    for (k, v) in node.tags.iter().filter(|(k, _)| *k != LACKS) {
        while let Some(m) = missing.next_if(|(mk, _)| *mk < k) {
            tags.push(m);
        }
        tags.push((k, v));
    }
    tags.extend(missing);
    node.tags = tags.into_iter().collect();
}

#[cfg(test)]
mod reserved_tests {
    use super::*;
    use crate::model::Capacity;
    use crate::model::node::TAG_RESERVATION;

    /// States written before `reserved` existed recorded nodes in a reservation as
    /// on-demand with the reservation's tag: they read as reserved, the others as before.
    #[test]
    fn on_demand_nodes_tagged_with_a_reservation_read_as_reserved() {
        let node = |id: &str, capacity: &str, tag: bool| {
            let tags = if tag { format!(r#", "tags": {{"{TAG_RESERVATION}": "cr-0block"}}"#) } else { String::new() };
            format!(
                r#"{{"id": "{id}", "pool": "gpu_pool.train", "instance_type": "p5.48xlarge", "region": "us-east-1",
                "zone": "us-east-1a", "capacity": "{capacity}", "state": "running"{tags}}}"#
            )
        };
        let text = format!(
            r#"{{"format_version": 1, "serial": 1, "lineage": "l", "resources": {{"gpu_pool.train": {{"kind": "gpu_pool",
            "nodes": [{}, {}, {}]}}}}}}"#,
            node("i-1", "on-demand", true),
            node("i-2", "on-demand", false),
            node("i-3", "spot", true)
        );
        let state = upgrade(serde_json::from_str(&text).expect("a format 1 state"));
        let caps: Vec<Capacity> = state.resources["gpu_pool.train"].nodes.iter().map(|n| n.capacity).collect();
        assert_eq!(caps, [Capacity::Reserved, Capacity::OnDemand, Capacity::Spot]);
    }
}

#[cfg(test)]
mod round_trip_tests {
    use proptest::prelude::*;

    use super::*;
    use crate::model::node::NodeState;
    use crate::model::{Capacity, Tags};

    /// Keys before, between and after the derived ones, derived keys with the state's
    /// values and with others: packed then expanded, a node has exactly the tags it had
    /// (the derived ones merged back into key order).
    #[test]
    fn packed_then_expanded_tags_are_the_tags_written() {
        let keys = [TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, TAG_PROVIDER, "a", "gpuplan:job", "gpuplan:m", "team", "zz"];
        let values = ["gpu_pool.a", "lin", "true", "sim", "other"];
        proptest!(|(picked in proptest::collection::vec((0..keys.len(), 0..values.len()), 0..12), own in any::<bool>())| {
            let tags: Tags = picked.iter().map(|(k, v)| (keys[*k], values[*v])).collect();
            let mut node = Node {
                id: "i-1".into(),
                pool: "gpu_pool.a".parse().unwrap(),
                instance_type: "g6.xlarge".into(),
                region: "us-east-1".into(),
                zone: "us-east-1a".into(),
                capacity: Capacity::Spot,
                state: NodeState::Running,
                image: None,
                tags: tags.clone(),
                provider: own.then(|| "sim".to_string()),
            };
            pack_node(&mut node, "lin", Some("sim"));
            expand_node(&mut node, "lin", Some("sim"));
            prop_assert_eq!(node.tags.iter().collect::<Vec<_>>(), tags.iter().collect::<Vec<_>>());
        });
    }

    /// A pool's nodes in runs alike and not (tags, pool, provider block drawn from a few):
    /// packed then upgraded, each node has exactly the tags it had, whether it took the
    /// node before it's expanded tags or was expanded on its own.
    #[test]
    fn upgrading_a_pool_gives_each_node_its_tags() {
        let tag_sets: [&[(&str, &str)]; 4] = [
            &[(TAG_ADDRESS, "gpu_pool.a"), (TAG_LINEAGE, "lin"), (TAG_MANAGED, "true"), (TAG_PROVIDER, "sim")],
            &[(TAG_ADDRESS, "gpu_pool.a"), (TAG_LINEAGE, "lin"), (TAG_MANAGED, "true"), ("team", "x")],
            &[(TAG_ADDRESS, "gpu_pool.b"), (TAG_LINEAGE, "lin"), (TAG_MANAGED, "true"), (TAG_PROVIDER, "sim")],
            &[("team", "y")],
        ];
        let picks = proptest::collection::vec((0..4usize, any::<bool>(), any::<bool>()), 0..10);
        proptest!(|(picked in picks)| {
            let mut state = State::new("lin".into());
            let mut resource = ResourceState {
                kind: "gpu_pool".into(),
                provider: Some("sim".into()),
                provider_kind: Some("sim".into()),
                region: Some("us-east-1".into()),
                config: Default::default(),
                sensitive: Vec::new(),
                dependencies: Vec::new(),
                nodes: Vec::new(),
                job: None,
                fallback: None,
                placement: None,
                reservation: None,
            };
            for (i, (tags, other_pool, own_provider)) in picked.iter().enumerate() {
                resource.nodes.push(Node {
                    id: format!("i-{i}"),
                    pool: if *other_pool { "gpu_pool.b" } else { "gpu_pool.a" }.parse().unwrap(),
                    instance_type: "g6.xlarge".into(),
                    region: "us-east-1".into(),
                    zone: "us-east-1a".into(),
                    capacity: Capacity::Spot,
                    state: NodeState::Running,
                    image: None,
                    tags: tag_sets[*tags].iter().copied().collect(),
                    provider: own_provider.then(|| "other".to_string()),
                });
            }
            let written = resource.nodes.clone();
            state.resources.insert("gpu_pool.a".into(), pack(&resource, "lin").into_owned());
            state.format_version = 2;
            let read = upgrade(state);
            prop_assert_eq!(&read.resources["gpu_pool.a"].nodes, &written);
        });
    }
}
