//! Refresh: ask every provider in use what it runs with this state's tags, one paged
//! list call per provider and region.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};

use crate::apply::ProviderSet;
use crate::catalog;
use crate::plan::shape;
use crate::providers::{ListFilter, Node, ProviderError};
use crate::spec::Spec;
use crate::state::State;

/// (provider name, region) pairs the spec and the state use.
pub fn regions(spec: &Spec, state: &State) -> BTreeSet<(String, String)> {
    let cat = catalog::catalog();
    let mut out = BTreeSet::new();
    for pool in spec.gpu_pools.values() {
        if let Some(s) = shape::shape(spec, pool, cat) {
            out.insert((s.provider, s.region));
        }
    }
    for r in state.resources.values() {
        if let (Some(p), Some(region)) = (&r.provider, &r.region) {
            out.insert((p.clone(), region.clone()));
            // A floating pool's nodes may still run in the candidate it is leaving.
            if r.placement.is_some() {
                for n in r.nodes.iter().filter(|n| &n.region != region) {
                    out.insert((p.clone(), n.region.clone()));
                }
            }
        }
    }
    out
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
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut done: BTreeSet<(usize, String)> = BTreeSet::new();
    for (name, region) in regions(spec, state) {
        let Some(p) = providers.get(&name) else { continue };
        // The same provider object under two names is listed once per region.
        let identity = std::sync::Arc::as_ptr(p) as *const () as usize;
        if !done.insert((identity, region.clone())) {
            continue;
        }
        let filter = ListFilter { region: region.clone(), lineage: Some(state.lineage.clone()) };
        let nodes = list_with_retry(p.as_ref(), &filter).await.map_err(|e| (name.clone(), e))?;
        out.reserve(nodes.len());
        for n in nodes {
            match at.entry(n.id.clone()) {
                Entry::Occupied(i) => out[*i.get()] = n,
                Entry::Vacant(v) => {
                    v.insert(out.len());
                    out.push(n);
                }
            }
        }
    }
    drop(at);
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// One paged list call, retried on throttling and transient faults as `apply::policy`
/// decides (a list is read-only, so retrying it is always safe).
async fn list_with_retry(p: &dyn crate::providers::Provider, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
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
