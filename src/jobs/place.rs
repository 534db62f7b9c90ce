//! Placement, the phases in order: [`demand`](super::demand) (what each job's replicas
//! need, from state and refresh) → [`admit`](super::admit) (which waiting jobs get GPUs,
//! against the [`room`](super::room) this plan leaves, after
//! [`depends`](super::depends) holds back pipelines) → place (each admitted replica's
//! [`launch`](super::launch) request, on a warm node where one has room) →
//! [`preempt`](super::preempt) (jobs still waiting take lower-priority GPUs). Spec +
//! state + plan + observed run statuses → the plan's [`JobPlacement`]s. Pure: no I/O, no
//! clock.
//!
//! Only the job's own failures spend retries: a spot reclaim or a stop gpuplan caused does
//! not (so a reclaimed spot node's job comes back with `GPUPLAN_ATTEMPT=2` and its
//! checkpoint URI).

use std::collections::{BTreeMap, BTreeSet};

use super::admit::{self, Admission, Demand, PoolRoom, QuotaRoom};
use super::demand::{self, RemovedNodes};
use super::depends::unmet_dependency;
use super::launch::launch;
use super::model::{JobPlacement, JobRecord, JobRun, Placement, WaitCode};
use super::preempt::preempt;
use super::room::{self, Offline};
use crate::addr::Address;
use crate::catalog;
use crate::plan::shape::{self, PoolShape};
use crate::providers::Capacity;
use crate::spec::Spec;
use crate::spec::model::{Job, JobTemplate};

// The names callers (engine, apply, the CLI) and tests know this phase by.
pub use super::demand::{PlaceInput, observed_runs, record};
pub use super::launch::token;
#[cfg(test)]
use super::preempt::{Victim, choose_victims};
#[cfg(test)]
use crate::providers::job_env::{ENV_ATTEMPT, ENV_CHECKPOINT};
#[cfg(test)]
use crate::providers::{AgentState, JobState, JobStatus, TAG_ATTEMPT, TAG_JOB, TAG_LINEAGE};
#[cfg(test)]
use crate::state::State;

/// A replica to launch: (replica, attempt).
type Pending = BTreeMap<Address, Vec<(u32, u32)>>;
/// What a job asks admission for, with the (replica, attempt) pairs pending.
type Wants = Option<(Demand, Vec<(u32, u32)>)>;

/// The plan's jobs, in admission order (priority, then age).
pub fn place(input: &PlaceInput<'_>) -> Vec<JobPlacement> {
    let spec = input.spec;
    if input.plan.destroy || spec.jobs.is_empty() {
        return Vec::new();
    }
    let shapes = used_shapes(spec);
    let (mut pools, offline) = room::pool_rooms(input, &shapes);
    let mut quotas = room::quota_rooms(spec);
    let removed = demand::removed_nodes(input.plan);
    let faulty = demand::faulty_nodes(input.plan);
    let mut out: BTreeMap<Address, JobPlacement> = BTreeMap::new();
    let mut demands = Vec::new();
    for (addr, job) in &spec.jobs {
        let Some((jp, wants)) = assess(input, addr, job, (&removed, &faulty), &mut pools, &mut quotas) else {
            continue;
        };
        out.insert(addr.clone(), jp);
        demands.extend(wants);
    }
    // Pipelines: a job whose `depends_on` jobs have not all succeeded is not admitted; it
    // waits for them, and says so (forever, with the reason, when one of them failed).
    demands.retain(|(d, _)| match unmet_dependency(spec, &d.address, &out) {
        Some(reason) => {
            if let Some(jp) = out.get_mut(&d.address) {
                jp.reason = Some(reason);
            }
            false
        }
        None => true,
    });
    let pending: Pending = demands.iter().map(|(d, p)| (d.address.clone(), p.clone())).collect();
    // The warm nodes of cloud VM pools with room once running jobs took theirs.
    let mut warm = room::warm_nodes(input, &shapes, &pools);
    let decisions = admit::admit(demands.into_iter().map(|(d, _)| d).collect(), &pools, &quotas);
    let order: Vec<Address> = decisions.iter().map(|d| d.address.clone()).collect();
    for d in decisions {
        let Some(jp) = out.get_mut(&d.address) else { continue };
        settle(input, &shapes, &offline, &pending[&d.address], &mut warm, d, jp);
    }
    preempt(input, &shapes, &order, &pending, &mut out);
    in_order(input, order, out)
}

/// The shapes of the pools jobs run on only: a fleet of 100,000 pools with a few jobs
/// stays linear.
fn used_shapes(spec: &Spec) -> BTreeMap<&Address, PoolShape> {
    let cat = catalog::catalog();
    let used: BTreeSet<&Address> =
        spec.jobs.values().flat_map(|j| std::iter::once(&j.pool.value).chain(&j.pool_choices)).collect();
    spec.gpu_pools
        .iter()
        .filter(|(a, _)| used.contains(a))
        .filter_map(|(a, p)| shape::shape(spec, p, cat).map(|s| (a, s)))
        .collect()
}

/// One job before admission: its plan entry, and what it asks admission for (with the
/// replicas pending). Running replicas keep their GPUs, taken out of the room and the
/// quota here. `None`: no template or no pool (validation explains).
fn assess(
    input: &PlaceInput<'_>,
    addr: &Address,
    job: &Job,
    (removed, faulty): (&RemovedNodes, &demand::FaultyNodes),
    pools: &mut BTreeMap<Address, PoolRoom>,
    quotas: &mut BTreeMap<Address, QuotaRoom>,
) -> Option<(JobPlacement, Wants)> {
    let spec = input.spec;
    let t = spec.job_templates.get(&job.template.value)?;
    // A job that names a GPU model: the pool it runs on, or the cheapest with room.
    let rec = record(input.state, addr);
    let mut alternatives = Vec::new();
    let chosen;
    let job = if job.pool_choices.len() > 1 {
        let (pool, alts) = choose_pool(input, job, t, rec, pools);
        alternatives = alts;
        let mut j = job.clone();
        j.pool.value = pool;
        chosen = j;
        &chosen
    } else {
        job
    };
    let pool = spec.gpu_pools.get(&job.pool.value)?;
    let p = demand::progress(job, t, rec, input.observed, pool.kubernetes.is_some(), removed, faulty);
    room::hold(job, &p.runs, pools, quotas);
    let jp = demand::placement(input, addr, job, t, rec, &p, alternatives);
    let wants = demand::demand(addr, job, t, rec, &p).map(|d| (d, p.pending));
    Some((jp, wants))
}

/// Apply one admission decision to its job: launches for the replicas placed (on the
/// pool placement chose; on a warm node where one has room), or the reason it waits.
fn settle(
    input: &PlaceInput<'_>,
    shapes: &BTreeMap<&Address, PoolShape>,
    offline: &Offline,
    pending: &[(u32, u32)],
    warm: &mut BTreeMap<Address, Vec<admit::NodeRoom>>,
    d: Admission,
    jp: &mut JobPlacement,
) {
    let spec = input.spec;
    match d.placed {
        Some(caps) => {
            // On the pool placement chose (a job that names a GPU model may move).
            let mut job = spec.jobs[&d.address].clone();
            job.pool.value = jp.pool.clone();
            let job = &job;
            let t = &spec.job_templates[&job.template.value];
            let shape = shapes.get(&job.pool.value);
            let fallback = spec.gpu_pools.get(&job.pool.value).map(|p| p.mix.fallback.value);
            jp.placement = Placement::Launch;
            // A multi-node job's replicas rendezvous on replica 0's node: its address when
            // it runs on (apply passes it on when replica 0 launches with the rest).
            let master = jp.runs.iter().find(|r| r.replica == 0 && r.is_active()).and_then(|r| r.address.as_deref());
            for ((replica, attempt), cap) in pending.iter().zip(&caps) {
                if let Some(shape) = shape {
                    let mut l = launch(input, &d.address, job, t, shape, *replica, *attempt, *cap, fallback);
                    if let Some(addr) = master {
                        crate::providers::job_env::with_master(&mut l.request.env, addr);
                    }
                    // Its replicas start together on nodes made for them in one zone (and
                    // placement group), never on warm nodes wherever those are.
                    if job.replicas.value == 1 {
                        room::onto_warm(&mut l, warm.get_mut(&job.pool.value));
                    }
                    jp.launches.push(l);
                }
            }
            if jp.launches.iter().any(|l| l.request.shape.is_some()) {
                jp.warm_skipped = offline.get(&job.pool.value).cloned().unwrap_or_default();
            }
            jp.capacity.extend(caps);
            jp.capacity.sort();
        }
        None if d.reason.as_ref().is_some_and(|r| r.code == WaitCode::Capacity) => {
            // Waiting for room beside warm nodes that could have taken it: say why not.
            jp.warm_skipped = offline.get(&jp.pool).cloned().unwrap_or_default();
            jp.reason = d.reason;
        }
        None => jp.reason = d.reason,
    }
}

/// The plan's jobs in admission order first, then the jobs that needed nothing (by
/// address); those launching, waiting or preempting before the rest. `--target`: only
/// jobs named, or running on a pool named, are launched.
fn in_order(
    input: &PlaceInput<'_>,
    mut order: Vec<Address>,
    mut out: BTreeMap<Address, JobPlacement>,
) -> Vec<JobPlacement> {
    let admitted: BTreeSet<&Address> = order.iter().collect();
    let rest: Vec<Address> = out.keys().filter(|a| !admitted.contains(a)).cloned().collect();
    order.extend(rest);
    let mut all: Vec<JobPlacement> = order.into_iter().filter_map(|a| out.remove(&a)).collect();
    let rank = |j: &JobPlacement| {
        u8::from(!matches!(j.placement, Placement::Launch | Placement::Waiting | Placement::Preempt))
    };
    all.sort_by_key(rank); // stable: keeps admission order within each group
    let targets = &input.plan.targets;
    if !targets.is_empty() {
        all.retain(|j| targets.iter().any(|t| j.address.matches_target(t) || j.pool.matches_target(t)));
    }
    all
}

/// The pool a job that names a GPU model runs on: where its active runs are, else the
/// cheapest of its choices with room for its pending replicas (per GPU-hour, on the
/// capacity it would use), else the cheapest. Also one line per choice for the plan.
fn choose_pool(
    input: &PlaceInput<'_>,
    job: &Job,
    t: &JobTemplate,
    rec: Option<&JobRecord>,
    pools: &BTreeMap<Address, PoolRoom>,
) -> (Address, Vec<String>) {
    // Already running somewhere: it stays there.
    let active: Vec<&JobRun> = rec.map(|r| r.runs.iter().filter(|r| r.is_active()).collect()).unwrap_or_default();
    for run in &active {
        if let Some(pool) = job.pool_choices.iter().find(|p| {
            input.state.resources.get(&p.to_string()).is_some_and(|r| r.nodes.iter().any(|n| n.id == run.node_id))
        }) {
            return (pool.clone(), vec![format!("{pool}: runs there")]);
        }
    }
    let replicas = job.replicas.value as usize;
    let need = t.gpus.value;
    let mut rows: Vec<(bool, f64, &Address, String)> = Vec::new();
    for p in &job.pool_choices {
        let Some(room) = pools.get(p) else {
            rows.push((false, f64::MAX, p, format!("{p}: not priced")));
            continue;
        };
        let d = admit::Demand {
            address: Address::new(crate::addr::Kind::Job, "x"),
            pool: p.clone(),
            quota: None,
            priority: t.priority.value,
            age: None,
            preemptible: t.preemptible.value,
            replicas: job.replicas.value,
            gpus_per_replica: need,
        };
        let prefs = admit::preferences(&d, room.fallback);
        // The first capacity it may use with room for every replica, and its price.
        let fit = prefs.iter().find(|c| {
            room.nodes
                .iter()
                .filter(|n| n.capacity.market() == **c)
                .map(|n| (n.free / need.max(1)) as usize)
                .sum::<usize>()
                >= replicas
        });
        let cap = fit.copied().unwrap_or(prefs[0]);
        let price = match cap {
            Capacity::Spot => room.usd_per_gpu_hour_spot,
            Capacity::OnDemand | Capacity::Reserved => room.usd_per_gpu_hour_on_demand,
        }
        .unwrap_or(f64::MAX);
        let room_text = if fit.is_some() { "room" } else { "no room" };
        let price_text = if price == f64::MAX {
            "not priced".to_string()
        } else {
            format!("{} USD/GPU-h", crate::model::money::usd(price))
        };
        rows.push((fit.is_some(), price, p, format!("{p}: {price_text} {cap}, {room_text}")));
    }
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.total_cmp(&b.1)).then_with(|| a.2.cmp(b.2)));
    let chosen = rows.first().map_or_else(|| job.pool.value.clone(), |r| r.2.clone());
    let lines = rows.iter().map(|r| if *r.2 == chosen { format!("{} (chosen)", r.3) } else { r.3.clone() }).collect();
    (chosen, lines)
}

#[cfg(test)]
mod tests;
