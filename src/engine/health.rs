//! The GPU health reads of a plan (docs/design/gpu-health.md): every live node of a spec
//! pool whose provider has a [`HealthPort`](crate::providers::health::HealthPort) is read,
//! one call per provider block and region; a pool in a Kubernetes cluster is also read
//! from its cluster's Nodes (conditions, allocatable, cordon), one call per cluster. What
//! the reads mean is the plan's to decide.

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
    let mut asks: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.is_live()) {
        let Some(pool) = spec.gpu_pools.get(&n.pool) else { continue };
        let name = n.provider_or(&pool.provider.value).to_string();
        asks.entry((name, n.region.clone())).or_default().push(n.id.clone());
        if let Some(k) = &pool.kubernetes {
            let region = crate::spec::validate::pool_region(spec, pool).map_or(n.region.as_str(), |r| r.value.as_str());
            let cluster = kube::pool_locator(k, region);
            asks.entry((kube::name(&pool.provider.value), cluster)).or_default().push(n.id.clone());
        }
    }
    let mut out: BTreeMap<String, NodeHealth> = BTreeMap::new();
    let mut warnings = Vec::new();
    for ((name, region), ids) in asks {
        let Some(port) = providers.get(&name).and_then(|p| p.health()) else { continue };
        match port.read_health(&region, &ids).await {
            Ok(reads) => {
                for h in reads {
                    merge(&mut out, h);
                }
            }
            Err(e) => {
                let place = if name.starts_with(kube::PREFIX) { kube::describe(&region) } else { region.clone() };
                warnings.push(format!(
                    "warning: the GPU health of {} {} in {name} ({place}) could not be read: {e}",
                    ids.len(),
                    if ids.len() == 1 { "node" } else { "nodes" }
                ));
            }
        }
    }
    (out, warnings)
}

/// `h` into `out`: a second read of a node adds its findings; the fewer GPUs seen and what
/// a cluster says of its cordon stand.
fn merge(out: &mut BTreeMap<String, NodeHealth>, h: NodeHealth) {
    match out.get_mut(&h.node_id) {
        None => {
            out.insert(h.node_id.clone(), h);
        }
        Some(seen) => {
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
    }
}
