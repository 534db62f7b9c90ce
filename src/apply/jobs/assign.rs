//! Which live node each sim launch goes on, decided for every admitted replica in one
//! deterministic pass before anything launches (plan order, best fit), so the launches
//! themselves can run concurrently and share the journal's fsyncs. Pure once the nodes
//! are listed: the same plan and fleet always give the same nodes.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::apply::{ApplyOptions, ProviderSet};
use crate::model::ReplicaLaunch;
use crate::plan::Plan;
use crate::providers::{Capacity, ListFilter, Node};

use super::Stopped;

/// A live node and the GPUs jobs use on it.
struct Slot {
    node: Node,
    used: u32,
}

/// Where one admitted replica goes.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Pick {
    /// Not a launch onto a pool node (a node made for the job, a warm node the plan
    /// chose, a cluster's): the request goes as the plan wrote it.
    AsPlanned,
    /// This node, on this capacity (the planned one, or the fallback the plan allows).
    Node { node_id: String, capacity: Capacity },
    /// No live node of the pool has room: the replica stays queued.
    NoRoom,
}

/// The picks of every job's launches, in plan order (`picks[job][launch]`).
pub(super) async fn assign(
    plan: &Plan,
    providers: &ProviderSet,
    opts: &ApplyOptions,
    stopped: &Stopped,
) -> Vec<Vec<Pick>> {
    let mut slots = node_slots(plan, providers, opts, stopped).await;
    plan.jobs
        .iter()
        .map(|j| {
            let pool = slots.get_mut(&j.pool).map(Vec::as_mut_slice).unwrap_or_default();
            if is_multi_node(&j.launches) {
                together(providers, &j.launches, pool)
            } else {
                j.launches.iter().map(|l| place(providers, l, pool, None)).collect()
            }
        })
        .collect()
}

/// Launches of a multi-node job's replicas onto pool nodes (`GPUPLAN_NNODES`): they go
/// together or not at all.
fn is_multi_node(launches: &[ReplicaLaunch]) -> bool {
    launches.len() > 1
        && launches.iter().all(|l| on_pool_node(l) && crate::providers::job_env::node_rank(&l.request.env).is_some())
}

/// A multi-node job's replicas, all on nodes of one zone (the pool's placement group
/// there): the first zone, by name, with room for every one; else none is placed and the
/// job stays queued whole.
fn together(providers: &ProviderSet, launches: &[ReplicaLaunch], pool: &mut [Slot]) -> Vec<Pick> {
    let mut zones: Vec<String> = pool.iter().map(|s| s.node.zone.clone()).collect();
    zones.sort();
    zones.dedup();
    for zone in &zones {
        let before: Vec<u32> = pool.iter().map(|s| s.used).collect();
        let picks: Vec<Pick> = launches.iter().map(|l| place(providers, l, pool, Some(zone))).collect();
        if picks.iter().all(|p| *p != Pick::NoRoom) {
            return picks;
        }
        for (s, used) in pool.iter_mut().zip(before) {
            s.used = used;
        }
    }
    launches.iter().map(|l| if providers.contains_key(&l.provider) { Pick::NoRoom } else { Pick::AsPlanned }).collect()
}

/// One replica's node (in `zone` when given): the fullest with room of the planned
/// capacity, else of the fallback; its GPUs are taken at once, as the launch will take
/// them. A launch whose provider is not configured takes nothing (it fails without
/// launching).
fn place(providers: &ProviderSet, l: &ReplicaLaunch, pool: &mut [Slot], zone: Option<&str>) -> Pick {
    if !on_pool_node(l) || !providers.contains_key(&l.provider) {
        return Pick::AsPlanned;
    }
    let (gpus, per_node) = (l.request.gpus, l.gpus_per_node);
    let found = pick(pool, l.capacity, gpus, per_node, zone)
        .map(|i| (i, l.capacity))
        .or_else(|| l.fallback.and_then(|f| pick(pool, f, gpus, per_node, zone).map(|i| (i, f))));
    let Some((i, capacity)) = found else { return Pick::NoRoom };
    pool[i].used += gpus;
    Pick::Node { node_id: pool[i].node.id.clone(), capacity }
}

/// Live nodes per pool, listed once per (provider, region) that has launches on nodes,
/// with the GPUs the runs that go on running use there.
async fn node_slots(
    plan: &Plan,
    providers: &ProviderSet,
    opts: &ApplyOptions,
    stopped: &Stopped,
) -> BTreeMap<Address, Vec<Slot>> {
    let mut slots: BTreeMap<Address, Vec<Slot>> = BTreeMap::new();
    let mut listed: Vec<(String, String)> = Vec::new();
    for l in plan.jobs.iter().flat_map(|j| &j.launches).filter(|l| on_pool_node(l)) {
        let key = (l.provider.clone(), l.region.clone());
        if listed.contains(&key) {
            continue;
        }
        listed.push(key);
        // A provider that makes no nodes has none to run on.
        let Some(p) = providers.get(&l.provider).and_then(|p| p.nodes()) else { continue };
        let filter = ListFilter { region: l.region.clone(), lineage: Some(plan.lineage.clone()) };
        match p.list_nodes(&filter).await {
            Ok(nodes) => {
                // An unhealthy node takes no job, whatever its fate (docs/design/gpu-health.md).
                let sick = |n: &Node| plan.health.iter().any(|h| h.node == n.id);
                for n in nodes.into_iter().filter(|n| n.is_live() && !sick(n)) {
                    slots.entry(n.pool.clone()).or_default().push(Slot { node: n, used: 0 });
                }
            }
            Err(e) => opts.progress.event(&l.request.pool.to_string(), &format!("could not list nodes: {e}")),
        }
    }
    for j in &plan.jobs {
        // A stopped run's GPUs are free again (when it did stop).
        let busy = j.runs.iter().filter(|r| r.is_active() && !stopped.0.get(&r.id).is_some_and(Result::is_ok));
        for run in busy {
            if let Some(s) = slots.get_mut(&j.pool).and_then(|s| s.iter_mut().find(|s| s.node.id == run.node_id)) {
                s.used += run.gpus;
            }
        }
    }
    slots
}

/// A launch onto a live node of the pool that apply picks (sim): neither a node made for
/// the job (clouds), nor a warm node the plan already chose (clouds' run-command), nor a
/// cluster's (Kubernetes places those itself).
pub(super) fn on_pool_node(l: &ReplicaLaunch) -> bool {
    l.request.shape.is_none() && l.request.kube.is_none() && l.request.node_id.is_empty()
}

/// The fullest node of `capacity` (in `zone` when given) that still has `gpus` free of its
/// `per_node` (best fit).
fn pick(slots: &[Slot], capacity: Capacity, gpus: u32, per_node: u32, zone: Option<&str>) -> Option<usize> {
    slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.node.capacity.market() == capacity.market() && per_node.saturating_sub(s.used) >= gpus)
        .filter(|(_, s)| zone.is_none_or(|z| s.node.zone == z))
        .min_by_key(|(i, s)| (per_node - s.used, *i))
        .map(|(i, _)| i)
}
