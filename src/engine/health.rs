//! The GPU health reads of a plan (docs/design/gpu-health.md): every live node of a spec
//! pool whose provider has a [`HealthPort`](crate::providers::health::HealthPort) is read,
//! one call per provider block and region. What the reads mean is the plan's to decide.

use std::collections::BTreeMap;

use crate::apply::ProviderSet;
use crate::model::health::NodeHealth;
use crate::providers::Node;
use crate::spec::Spec;

/// The health of `nodes` by node id, and a warning per read that failed. A failed read
/// leaves its nodes out (never reported healthy) and does not stop the plan: the fleet
/// is still planned, and the next read tries again.
pub async fn read(spec: &Spec, nodes: &[Node], providers: &ProviderSet) -> (BTreeMap<String, NodeHealth>, Vec<String>) {
    let mut asks: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.is_live()) {
        let Some(pool) = spec.gpu_pools.get(&n.pool) else { continue };
        let name = n.provider_or(&pool.provider.value).to_string();
        asks.entry((name, n.region.clone())).or_default().push(n.id.clone());
    }
    let mut out = BTreeMap::new();
    let mut warnings = Vec::new();
    for ((name, region), ids) in asks {
        let Some(port) = providers.get(&name).and_then(|p| p.health()) else { continue };
        match port.read_health(&region, &ids).await {
            Ok(reads) => out.extend(reads.into_iter().map(|h| (h.node_id.clone(), h))),
            Err(e) => warnings.push(format!(
                "warning: the GPU health of {} node(s) in {name} ({region}) could not be read: {e}",
                ids.len()
            )),
        }
    }
    (out, warnings)
}
