//! The room jobs can use, counted for placement: each pool's nodes as this plan leaves
//! them (GPUs free per node, warm nodes whose agent is online, boot slots `nodes.max`
//! allows) and each quota's headroom, with what running replicas already hold taken
//! out. Pure.

use std::collections::BTreeMap;

use super::admit::{NodeRoom, PoolRoom, QuotaRoom};
use super::demand::{PlaceInput, record};
use super::model::{JobRun, ReplicaLaunch};
use crate::addr::Address;
use crate::plan::shape::PoolShape;
use crate::providers::{AgentState, Capacity, NodeState};
use crate::spec::Spec;
use crate::spec::model::{Job, ProviderKind};

/// Each quota's room before any job is counted.
pub(super) fn quota_rooms(spec: &Spec) -> BTreeMap<Address, QuotaRoom> {
    spec.quotas
        .iter()
        .map(|(a, q)| {
            let room = QuotaRoom {
                max_gpus: q.max_gpus.as_ref().map(|m| m.value as u64),
                allowed_gpus: q.allowed_gpus.iter().map(|g| g.value.clone()).collect(),
                hourly_usd: q.budget.as_ref().and_then(|b| b.hourly_usd.as_ref()).map(|v| v.value),
                monthly_usd: q.budget.as_ref().and_then(|b| b.monthly_usd.as_ref()).map(|v| v.value),
                used_gpus: 0,
                used_hourly_usd: 0.0,
                weight: q.weight.as_ref().map(|w| w.value),
            };
            (a.clone(), room)
        })
        .collect()
}

/// Running replicas keep their GPUs: take them out of the pool's room and the quota's.
pub(super) fn hold(
    job: &Job,
    runs: &[JobRun],
    pools: &mut BTreeMap<Address, PoolRoom>,
    quotas: &mut BTreeMap<Address, QuotaRoom>,
) {
    for run in runs.iter().filter(|r| r.is_active()) {
        // A run on a node of its own is not on the pool's room (counted as busy there).
        if let Some(room) = pools.get_mut(&job.pool.value).filter(|_| !run.has_own_node()) {
            take(room, &run.node_id, run.capacity, run.gpus);
        }
        if let Some(q) = job.quota.as_ref().and_then(|q| quotas.get_mut(&q.value)) {
            q.used_gpus += run.gpus as u64;
            let price = pools.get(&job.pool.value).map(|r| match run.capacity {
                Capacity::OnDemand | Capacity::Reserved => r.usd_per_gpu_hour_on_demand,
                Capacity::Spot => r.usd_per_gpu_hour_spot,
            });
            q.used_hourly_usd += price.flatten().unwrap_or(0.0) * run.gpus as f64;
        }
    }
}

/// Take a running replica's `gpus` off its node, or when that node is not among the
/// pool's nodes after this plan (replaced, not yet refreshed), off the fullest node of its
/// capacity with room.
fn take(room: &mut PoolRoom, node_id: &str, capacity: Capacity, gpus: u32) {
    let i = room.nodes.iter().position(|n| n.id.as_deref() == Some(node_id)).or_else(|| {
        room.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.capacity.market() == capacity.market() && n.free >= gpus)
            .min_by_key(|(_, n)| n.free)
            .map(|(i, _)| i)
    });
    if let Some(i) = i {
        room.nodes[i].free = room.nodes[i].free.saturating_sub(gpus);
    }
}

/// Is this pool on a cloud without a cluster: its jobs boot nodes of their own, or run on
/// its warm nodes through the cloud's run-command API?
fn cloud_vm_pool(input: &PlaceInput<'_>, addr: &Address, shape: &PoolShape) -> bool {
    shape.provider_kind != ProviderKind::Sim && input.spec.gpu_pools.get(addr).is_some_and(|p| p.kubernetes.is_none())
}

/// The warm nodes of each cloud VM pool (nodes with an id in its room: the agent is
/// online) with what running jobs leave free on them.
pub(super) fn warm_nodes(
    input: &PlaceInput<'_>,
    shapes: &BTreeMap<&Address, PoolShape>,
    pools: &BTreeMap<Address, PoolRoom>,
) -> BTreeMap<Address, Vec<NodeRoom>> {
    pools
        .iter()
        .filter(|(a, _)| shapes.get(a).is_some_and(|s| cloud_vm_pool(input, a, s)))
        .map(|(a, r)| (a.clone(), r.nodes.iter().filter(|n| n.id.is_some()).cloned().collect()))
        .collect()
}

/// Run a launch admission placed on a cloud VM pool on one of its warm nodes when one of
/// the placed capacity has room (best fit, as admission counts it): the plan names the
/// node, apply runs the job there through the cloud's run-command API, and the node
/// stays in the pool afterwards. Otherwise the launch boots a node of its own.
pub(super) fn onto_warm(l: &mut ReplicaLaunch, warm: Option<&mut Vec<NodeRoom>>) {
    let (Some(warm), Some(shape)) = (warm, l.request.shape.as_ref()) else { return };
    let gpus = l.request.gpus;
    let best = warm
        .iter_mut()
        .enumerate()
        .filter(|(_, n)| n.capacity.market() == l.capacity.market() && n.free >= gpus)
        .min_by_key(|(i, n)| (n.free, *i))
        .map(|(_, n)| n);
    let Some(node) = best else { return };
    node.free -= gpus;
    l.request.node_id = node.id.clone().unwrap_or_default();
    l.request.region = shape.region.clone();
    l.request.shape = None;
    l.request.keep_node = true;
    // The node is there: no other capacity to fall back to.
    l.fallback = None;
}

/// Warm nodes of cloud VM pools whose agent is offline, per pool (`i-0abc: SSM agent
/// ConnectionLost`): the plan says why they take no jobs.
pub(super) type Offline = BTreeMap<Address, Vec<String>>;

/// Each pool's nodes once this plan is applied: live nodes it keeps, nodes it adopts and
/// nodes it creates, all with `gpus_per_node` free. On a cloud VM pool: its warm nodes
/// whose agent is online, then a boot slot for each node `nodes.max` still allows.
pub(super) fn pool_rooms(
    input: &PlaceInput<'_>,
    shapes: &BTreeMap<&Address, PoolShape>,
) -> (BTreeMap<Address, PoolRoom>, Offline) {
    let report = input.plan.cost.as_ref();
    let mut rooms = BTreeMap::new();
    let mut offline = Offline::new();
    let changes: BTreeMap<&Address, &crate::plan::model::PoolChange> = input
        .plan
        .changes
        .iter()
        .filter(|c| shapes.contains_key(&c.address))
        .filter_map(|c| c.pool.as_ref().map(|p| (&c.address, p)))
        .collect();
    let costs: BTreeMap<&Address, &crate::plan::report::PoolCost> = report
        .as_ref()
        .map(|r| r.pools.iter().filter(|p| shapes.contains_key(&p.address)).map(|p| (&p.address, p)).collect())
        .unwrap_or_default();
    let vm_pools = shapes.iter().any(|(a, s)| {
        s.provider_kind != ProviderKind::Sim && input.spec.gpu_pools.get(*a).is_some_and(|p| p.kubernetes.is_none())
    });
    let busy = if vm_pools { job_nodes_running(input) } else { BTreeMap::new() };
    for (addr, shape) in shapes {
        let Some(pool) = input.spec.gpu_pools.get(*addr) else { continue };
        // What jobs' `gpus` count on this pool, per node: GPUs, or MIG slices.
        let gpn = shape.gpus_per_node * pool.slices_per_gpu();
        let change = changes.get(*addr).copied();
        let mut nodes: Vec<NodeRoom> = Vec::new();
        match change {
            Some(pc) => {
                // An unhealthy node takes no job, whatever its fate (docs/design/gpu-health.md).
                let gone: Vec<&str> = pc
                    .deletes
                    .iter()
                    .map(|d| d.id.as_str())
                    .chain(pc.forget.iter().map(String::as_str))
                    .chain(unhealthy(input, addr))
                    .collect();
                let state_nodes =
                    input.state.resources.get(&addr.to_string()).map(|r| r.nodes.as_slice()).unwrap_or(&[]);
                for n in state_nodes.iter().chain(pc.adopt.iter()) {
                    if n.state != NodeState::Reclaimed && n.is_live() && !gone.contains(&n.id.as_str()) {
                        nodes.push(NodeRoom { capacity: n.capacity, free: gpn, id: Some(n.id.clone()) });
                    }
                }
                for c in &pc.creates {
                    let new = NodeRoom { capacity: c.capacity, free: gpn, id: None };
                    nodes.extend(std::iter::repeat_n(new, c.count as usize));
                }
            }
            None => {
                if let Some(r) = input.state.resources.get(&addr.to_string()) {
                    let sick: Vec<&str> = unhealthy(input, addr).collect();
                    let fit = |n: &&crate::providers::Node| n.is_live() && !sick.contains(&n.id.as_str());
                    nodes.extend(r.nodes.iter().filter(fit).map(|n| NodeRoom {
                        capacity: n.capacity,
                        free: gpn,
                        id: Some(n.id.clone()),
                    }));
                }
            }
        }
        // A VM pool on a cloud runs a replica on a warm node whose run-command agent is
        // online, else on a node of its own (booted with the job's user data): the room
        // is those warm nodes plus what `nodes.max` leaves beside the warm nodes and the
        // job nodes already running.
        if shape.provider_kind != ProviderKind::Sim && pool.kubernetes.is_none() {
            let busy = busy.get(*addr).copied().unwrap_or(0);
            let room = (pool.nodes.max.value as usize).saturating_sub(nodes.len() + busy);
            // Spot job nodes on an all-spot pool; on-demand otherwise.
            let all_spot = pool.mix.spot_percent.value == 100 && pool.mix.on_demand_base.value == 0;
            let capacity = if all_spot { Capacity::Spot } else { Capacity::OnDemand };
            let (warm, notes) = online(input.agents, nodes);
            if !notes.is_empty() {
                offline.insert((*addr).clone(), notes);
            }
            nodes = warm;
            nodes.extend(vec![NodeRoom { capacity, free: gpn, id: None }; room]);
        }
        let cost = costs.get(*addr).copied();
        let per_gpu = |p: Option<&crate::cost::Price>| p.map(|p| p.usd_per_hour / gpn.max(1) as f64);
        rooms.insert(
            (*addr).clone(),
            PoolRoom {
                gpu: shape.gpu.clone(),
                gpus_per_node: gpn,
                fallback: pool.mix.fallback.value,
                nodes,
                usd_per_gpu_hour_on_demand: per_gpu(cost.and_then(|c| c.on_demand_price.as_ref())),
                usd_per_gpu_hour_spot: per_gpu(cost.and_then(|c| c.spot_price.as_ref())),
            },
        );
    }
    (rooms, offline)
}

/// The nodes among `nodes` (a cloud VM pool's live nodes) whose agent refresh saw
/// online, and a note for each one it saw offline. Nodes it did not ask about (a cloud
/// without run-command, a plan without refresh) are not warm for jobs.
fn online(agents: Option<&BTreeMap<String, AgentState>>, nodes: Vec<NodeRoom>) -> (Vec<NodeRoom>, Vec<String>) {
    let Some(agents) = agents else { return (Vec::new(), Vec::new()) };
    // Nodes offline for the same reason share one note (`i-1, i-2: SSM agent ConnectionLost`).
    let mut offline: Vec<(&str, Vec<String>)> = Vec::new();
    let mut warm = Vec::new();
    for n in &nodes {
        let Some(id) = n.id.as_deref() else { continue };
        match agents.get(id) {
            Some(AgentState::Online) => warm.push(n.clone()),
            Some(AgentState::Offline(why)) => match offline.iter_mut().find(|(w, _)| *w == why.as_str()) {
                Some((_, ids)) => ids.push(id.to_string()),
                None => offline.push((why.as_str(), vec![id.to_string()])),
            },
            None => {}
        }
    }
    (warm, offline.into_iter().map(|(why, ids)| format!("{}: {why}", ids.join(", "))).collect())
}

/// Active runs on nodes made for them (from state), per pool of their job: counted in
/// one pass over the jobs, not once per pool.
fn job_nodes_running<'s>(input: &PlaceInput<'s>) -> BTreeMap<&'s Address, usize> {
    let mut out: BTreeMap<&Address, usize> = BTreeMap::new();
    for (a, j) in &input.spec.jobs {
        let Some(rec) = record(input.state, a) else { continue };
        let n = rec.runs.iter().filter(|r| r.is_active() && r.has_own_node()).count();
        if n > 0 {
            *out.entry(&j.pool.value).or_default() += n;
        }
    }
    out
}

/// The pool's nodes the plan found unhealthy: they take no job.
fn unhealthy<'p>(input: &'p PlaceInput<'_>, addr: &'p Address) -> impl Iterator<Item = &'p str> {
    input.plan.health.iter().filter(move |h| &h.address == addr).map(|h| h.node.as_str())
}
