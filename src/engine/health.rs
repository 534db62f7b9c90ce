//! The GPU health reads of a plan (docs/design/gpu-health.md): every live node of a spec
//! pool whose provider has a [`HealthPort`](crate::providers::health::HealthPort) is read,
//! one call per provider block and region; a pool in a Kubernetes cluster is also read
//! from its cluster's Nodes (conditions, allocatable, cordon), one call per cluster. What
//! the reads mean is the plan's to decide.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::apply::ProviderSet;
use crate::model::health::NodeHealth;
use crate::providers::{Node, kube};
use crate::spec::Spec;

/// The health of `nodes` by node id, and a warning per read that failed. A failed read
/// leaves its nodes out (never reported healthy) and does not stop the plan: the fleet
/// is still planned, and the next read tries again. A node read twice (its agent and its
/// cluster) has the findings of both.
pub async fn read(spec: &Spec, nodes: &[Node], providers: &ProviderSet) -> (BTreeMap<String, NodeHealth>, Vec<String>) {
    // Keyed by borrowed names where they can be: one ask per node, 4,000 at 2,000 pools.
    let mut asks: BTreeMap<(Cow<str>, Cow<str>), Vec<String>> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.is_live()) {
        let Some(pool) = spec.gpu_pools.get(&n.pool) else { continue };
        let name = n.provider_or(&pool.provider.value);
        asks.entry((Cow::Borrowed(name), Cow::Borrowed(&n.region))).or_default().push(n.id.clone());
        if let Some(k) = &pool.kubernetes {
            let region = crate::spec::validate::pool_region(spec, pool).map_or(n.region.as_str(), |r| r.value.as_str());
            let cluster = kube::pool_locator(k, region);
            let key = (Cow::Owned(kube::name(&pool.provider.value)), Cow::Owned(cluster));
            asks.entry(key).or_default().push(n.id.clone());
        }
    }
    let mut reads: Vec<NodeHealth> = Vec::new();
    let mut warnings = Vec::new();
    for ((name, region), ids) in asks {
        let Some(port) = providers.get(name.as_ref()).and_then(|p| p.health()) else { continue };
        match port.read_health(&region, &ids).await {
            Ok(r) => reads.extend(r),
            Err(e) => {
                let place = if name.starts_with(kube::PREFIX) { kube::describe(&region) } else { region.to_string() };
                warnings.push(format!(
                    "warning: the GPU health of {} {} in {name} ({place}) could not be read: {e}",
                    ids.len(),
                    if ids.len() == 1 { "node" } else { "nodes" }
                ));
            }
        }
    }
    (by_node(reads), warnings)
}

/// The reads by node id, a node read twice merged in the order read ([`merge`]). Sorted
/// first (stably) and built at once: inserting 4,000 reads one by one was a tree search
/// and a copy of the id each.
fn by_node(mut reads: Vec<NodeHealth>) -> BTreeMap<String, NodeHealth> {
    reads.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    let mut merged: Vec<NodeHealth> = Vec::with_capacity(reads.len());
    for h in reads {
        match merged.last_mut() {
            Some(seen) if seen.node_id == h.node_id => merge(seen, h),
            _ => merged.push(h),
        }
    }
    merged.into_iter().map(|h| (h.node_id.clone(), h)).collect()
}

/// `h` into `seen`, a read of the same node before it: a second read adds its findings;
/// the fewer GPUs seen and what a cluster says of its cordon stand.
fn merge(seen: &mut NodeHealth, h: NodeHealth) {
    seen.findings.extend(h.findings);
    seen.gpus_seen = match (seen.gpus_seen, h.gpus_seen) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    seen.cordoned = match (seen.cordoned, h.cordoned) {
        (Some(a), Some(b)) => Some(a || b),
        (a, b) => a.or(b),
    };
}
