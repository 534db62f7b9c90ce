//! Refresh: ask every provider in use what it runs with this state's tags, one paged
//! list call per provider and region.

use std::collections::{BTreeSet, HashMap};

use crate::apply::ProviderSet;
use crate::catalog;
use crate::plan::shape;
use crate::providers::{ListFilter, Node, ProviderError};
use crate::spec::Spec;
use crate::spec::validate::pool_region;
use crate::state::State;

/// (provider name, region) pairs the spec and the state use.
pub fn regions(spec: &Spec, state: &State) -> BTreeSet<(String, String)> {
    let cat = catalog::catalog();
    let mut out = BTreeSet::new();
    // A pool's shape names its provider block and region; resolving it (types, zones) is
    // needed only for a pair not in the set yet: a fleet has thousands of pools and a few
    // regions.
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for pool in spec.gpu_pools.values() {
        let region = pool_region(spec, pool).map(|r| r.value.as_str());
        let pair = region.map(|r| (pool.provider.value.as_str(), r));
        if pair.is_some_and(|pair| pairs.contains(&pair)) {
            continue;
        }
        if let Some(s) = shape::shape(spec, pool, cat) {
            debug_assert_eq!(pair, Some((s.provider.as_str(), s.region.as_str())));
            pairs.extend(pair);
            out.insert((s.provider, s.region));
        }
    }
    // Thousands of resources in a few regions: a pair is copied only when it is new.
    let mut add = |p: &str, region: &str| {
        if !out.iter().any(|(a, b)| a == p && b == region) {
            out.insert((p.to_string(), region.to_string()));
        }
    };
    for r in state.resources.values() {
        if let (Some(p), Some(region)) = (&r.provider, &r.region) {
            add(p, region);
        }
        // A floating pool's nodes may still run in the candidate it is leaving, or already
        // in the one it is moving to (an apply killed mid-move): each where it lives.
        for n in r.nodes.iter().filter(|n| n.provider.is_some() || r.placement.is_some()) {
            let Some(p) = n.provider.as_ref().or(r.provider.as_ref()) else { continue };
            add(p, &n.region);
        }
    }
    out
}

/// Observed nodes keep the provider block the state recorded them in: clouds do not
/// report it, and a floating pool's nodes may live in two.
fn keep_recorded_providers(state: &State, observed: &mut [Node]) {
    let recorded: HashMap<&str, &str> = state
        .resources
        .values()
        .flat_map(|r| &r.nodes)
        .filter_map(|n| n.provider.as_deref().map(|p| (n.id.as_str(), p)))
        .collect();
    if recorded.is_empty() {
        return;
    }
    for n in observed.iter_mut() {
        if let Some(p) = recorded.get(n.id.as_str()) {
            n.provider = Some((*p).to_string());
        }
    }
}

/// Every node carrying this state's lineage, deduplicated by id (two provider names
/// may reach the same cloud; the last answer wins), sorted by id. Kept in one vector
/// indexed by id rather than a map of whole nodes: a fleet's worth of nodes is big.
pub async fn refresh(
    providers: &ProviderSet,
    spec: &Spec,
    state: &State,
) -> Result<Vec<Node>, (String, ProviderError)> {
    let mut out: Vec<Node> = Vec::new();
    let mut done: BTreeSet<(usize, String)> = BTreeSet::new();
    for (name, region) in regions(spec, state) {
        let Some(p) = providers.get(&name) else { continue };
        // The same provider object under two names is listed once per region.
        let identity = std::sync::Arc::as_ptr(p) as *const () as usize;
        if !done.insert((identity, region.clone())) {
            continue;
        }
        let filter = ListFilter { region: region.clone(), lineage: Some(state.lineage.clone()) };
        // A provider that makes no nodes (the Kubernetes job backend) has none to list.
        let Some(nodes) = p.nodes() else { continue };
        let nodes = list_with_retry(nodes, &filter).await.map_err(|e| (name.clone(), e))?;
        if out.is_empty() {
            out = nodes; // the first listing moved, not copied
        } else {
            out.extend(nodes);
        }
    }
    by_id(&mut out);
    keep_recorded_providers(state, &mut out);
    out.iter_mut().for_each(Node::read_reserved);
    Ok(out)
}

/// Nodes sorted by id, each id once: an id listed more than once (the pages of a list
/// that changed while it was read, or two names for one account) keeps its last listing.
/// The sort is stable, so that is the last of each run of equal ids.
fn by_id(nodes: &mut Vec<Node>) {
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    nodes.dedup_by(|later, kept| {
        let same = later.id == kept.id;
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
}

/// One paged list call, retried on throttling and transient faults as `apply::policy`
/// decides (a list is read-only, so retrying it is always safe).
async fn list_with_retry(p: &dyn crate::providers::NodePort, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
    use crate::apply::policy::{Decision, decide};
    let seed = filter.region.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let mut attempt = 0;
    loop {
        match p.list_nodes(filter).await {
            Ok(nodes) => return Ok(nodes),
            Err(e) => {
                attempt += 1;
                match decide(&e, attempt, seed) {
                    Decision::Retry(d) => tokio::time::sleep(d.min(std::time::Duration::from_secs(30))).await,
                    _ => return Err(e),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str =
        "  gpu = \"L4\"\n  gpus_per_node = 1\n  nodes {\n    min = 0\n    desired = 1\n    max = 1\n  }\n";

    /// Each (provider block, region) pair of the spec's pools once, whether a pool sets its
    /// region or takes its provider's, and however many pools share it; a pool whose
    /// shape cannot be resolved (no zone of its region sells its GPU) adds nothing.
    /// Listings end sorted by id with each id once, its last listing kept.
    #[test]
    fn nodes_listed_twice_keep_their_last_listing() {
        let node = |id: &str, zone: &str| Node {
            id: id.into(),
            pool: "gpu_pool.a".parse().unwrap(),
            instance_type: "g6.xlarge".into(),
            region: "us-east-1".into(),
            zone: zone.into(),
            capacity: crate::model::Capacity::OnDemand,
            state: crate::model::NodeState::Running,
            image: None,
            tags: Default::default(),
            provider: None,
        };
        let mut nodes = vec![
            node("i-3", "a"),
            node("i-1", "a"),
            node("i-3", "b"),
            node("i-2", "a"),
            node("i-1", "c"),
            node("i-3", "c"),
        ];
        by_id(&mut nodes);
        let got: Vec<(&str, &str)> = nodes.iter().map(|n| (n.id.as_str(), n.zone.as_str())).collect();
        assert_eq!(got, [("i-1", "c"), ("i-2", "a"), ("i-3", "c")]);
    }

    #[test]
    fn regions_name_each_provider_and_region_of_the_pools_once() {
        let mut hcl = String::from(
            "provider \"sim\" {\n  region = \"us-east-1\"\n}\nprovider \"sim\" {\n  alias = \"west\"\n  region = \"us-west-2\"\n}\n",
        );
        for i in 0..5 {
            hcl.push_str(&format!("gpu_pool \"e{i}\" {{\n  provider = \"sim\"\n{POOL}}}\n"));
        }
        hcl.push_str(&format!("gpu_pool \"w\" {{\n  provider = \"west\"\n{POOL}}}\n"));
        hcl.push_str(&format!("gpu_pool \"x\" {{\n  provider = \"sim\"\n  region = \"us-west-2\"\n{POOL}}}\n"));
        hcl.push_str(&format!("gpu_pool \"nowhere\" {{\n  provider = \"sim\"\n  region = \"eu-north-9\"\n{POOL}}}\n"));
        let mut sources = crate::diag::Sources::default();
        sources.add("main.hcl", hcl);
        let loaded = crate::spec::load_sources(sources, &Default::default());
        let spec = loaded.spec;
        assert_eq!(spec.gpu_pools.len(), 8, "{:?}", loaded.diags);
        let state = State::new("00000000-0000-4000-8000-000000000000".into());
        let pairs: Vec<(String, String)> = regions(&spec, &state).into_iter().collect();
        let expected: Vec<(String, String)> = [("sim", "us-east-1"), ("sim", "us-west-2"), ("west", "us-west-2")]
            .iter()
            .map(|(p, r)| (p.to_string(), r.to_string()))
            .collect();
        assert_eq!(pairs, expected);
    }
}
