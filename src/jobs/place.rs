//! The jobs section of a plan: spec + state + plan + observed run statuses →
//! [`JobPlacement`]s. Pure: no I/O, no clock.
//!
//! Each replica's latest run decides what it needs: none yet → launch attempt 1; queued
//! or running → keeps its GPUs; succeeded or cancelled → done; failed or preempted →
//! launch the next attempt while `retries` allow (so a reclaimed spot node's job comes
//! back with `GPUPLAN_ATTEMPT=2` and its checkpoint URI). Only the job's own failures
//! spend retries: a spot reclaim or a stop gpuplan caused does not. Replicas that need a launch go
//! through [`admit`](super::admit) against the pool's nodes as this plan leaves them.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::admit::{self, Demand, NodeRoom, PoolRoom, QuotaRoom};
use super::model::{Interruption, JobPlacement, JobRecord, JobRun, Placement, ReplicaLaunch, WaitCode, WaitReason};
use crate::addr::Address;
use crate::catalog;
use crate::plan::Plan;
use crate::plan::shape::{self, PoolShape};
use crate::providers::{
    AgentState, Capacity, CreateNodes, JobState, JobStatus, KubeLaunch, LaunchJob, NodeState, TAG_ADDRESS, TAG_ATTEMPT,
    TAG_JOB, TAG_LINEAGE, TAG_MANAGED, TAG_PROVIDER, TAG_REPLICA, Tags, kube,
};
use crate::spec::Spec;
use crate::spec::model::{Fallback, Job, JobTemplate, ProviderKind};
use crate::state::State;

/// Environment variables every launch carries.
pub const ENV_CHECKPOINT: &str = "GPUPLAN_CHECKPOINT_URI";
pub const ENV_ATTEMPT: &str = "GPUPLAN_ATTEMPT";
pub const ENV_JOB: &str = "GPUPLAN_JOB";
pub const ENV_REPLICA: &str = "GPUPLAN_REPLICA";
pub const ENV_REPLICAS: &str = "GPUPLAN_REPLICAS";

pub struct PlaceInput<'a> {
    pub spec: &'a Spec,
    pub state: &'a State,
    /// The plan so far (pool changes and cost): the nodes jobs can use.
    pub plan: &'a Plan,
    /// Run id → status from refresh; `None` when not refreshed (state is the truth).
    pub observed: Option<&'a BTreeMap<String, JobStatus>>,
    /// Pool node id → its run-command agent, from refresh (cloud VM pools whose cloud
    /// has one): only nodes listed online here take jobs as warm nodes.
    pub agents: Option<&'a BTreeMap<String, AgentState>>,
}

/// One job's replicas, read from state and refresh.
struct Progress {
    runs: Vec<JobRun>,
    /// (replica, attempt) to launch.
    pending: Vec<(u32, u32)>,
    running: bool,
    failed: bool,
    cancelled: bool,
    /// The most retries any replica's own failures spent.
    retries_spent: u32,
    /// Runs stopped because this plan removes their node.
    interrupted: Vec<Interruption>,
    /// Runs refresh found stopped (exit code awaited) that the state records otherwise.
    stopped: Vec<String>,
}

/// The job record in state for `addr`, if any.
pub fn record<'s>(state: &'s State, addr: &Address) -> Option<&'s JobRecord> {
    state.resources.get(&addr.to_string()).and_then(|r| r.job.as_deref())
}

/// Runs with their statuses updated from refresh.
pub fn observed_runs(rec: Option<&JobRecord>, observed: Option<&BTreeMap<String, JobStatus>>) -> Vec<JobRun> {
    let mut runs: Vec<JobRun> = rec.map(|r| r.runs.clone()).unwrap_or_default();
    if let Some(seen) = observed {
        for run in runs.iter_mut().filter(|r| r.is_active()) {
            if let Some(s) = seen.get(&run.id) {
                run.status = s.state;
                run.message = s.message.clone();
                // A Kubernetes replica learns its node once the scheduler binds it.
                if !s.node_id.is_empty() {
                    run.node_id = s.node_id.clone();
                }
                if let Some(ms) = s.finished_ms {
                    run.finished_at = Some(crate::model::job::rfc3339_ms(ms));
                }
            }
        }
    }
    runs
}

/// Pool nodes this plan removes (node id → its node delete, as an interruption of the
/// run on it would read).
type RemovedNodes = BTreeMap<String, Interruption>;

/// Every node a pool change of `plan` deletes, with why.
fn removed_nodes(plan: &Plan) -> RemovedNodes {
    let mut out = RemovedNodes::new();
    for c in &plan.changes {
        let Some(pc) = &c.pool else { continue };
        let reasons: Vec<&str> = c.reasons.iter().map(|r| r.message.as_str()).collect();
        for d in &pc.deletes {
            let why =
                if reasons.is_empty() { d.reason.clone() } else { format!("{}: {}", d.reason, reasons.join("; ")) };
            let gone = Interruption {
                run: String::new(),
                replica: 0,
                node_id: d.id.clone(),
                capacity: d.capacity,
                zone: d.zone.clone(),
                why,
                node_reason: d.reason.clone(),
            };
            out.insert(d.id.clone(), gone);
        }
    }
    out
}

/// Active runs on nodes this plan removes: they end as preempted (apply stops them
/// before the node goes), so their replicas requeue (from the checkpoint, where the
/// template names one) as the next attempt without spending a retry. Returns what was
/// interrupted.
fn interrupt(runs: &mut [JobRun], removed: &RemovedNodes, checkpoints: bool) -> Vec<Interruption> {
    let mut out = Vec::new();
    let from = if checkpoints { " from its checkpoint" } else { "" };
    for run in runs.iter_mut().filter(|r| r.is_active()) {
        let Some(gone) = removed.get(&run.node_id) else { continue };
        run.status = JobState::Preempted;
        run.message =
            Some(format!("stopped by gpuplan: its node {} was removed ({}); requeued{from}", run.node_id, gone.why));
        out.push(Interruption { run: run.id.clone(), replica: run.replica, ..gone.clone() });
    }
    out
}

/// Active replicas in a cluster whose node this plan removes: apply evicts their pods
/// before the node goes (the Eviction API, as for a preemption), and the Job runs them
/// again on another node without spending a retry, so the run stays queued under the same
/// Job. Returns what was interrupted, for the plan's list of interrupted jobs.
fn evict(runs: &mut [JobRun], removed: &RemovedNodes) -> Vec<Interruption> {
    let mut out = Vec::new();
    for run in runs.iter_mut().filter(|r| r.is_active()) {
        let Some(gone) = removed.get(&run.node_id) else { continue };
        run.status = JobState::Queued;
        run.message = Some(format!(
            "its pod is evicted by gpuplan: its node {} is removed ({}); the cluster runs it again on another node",
            run.node_id, gone.why
        ));
        out.push(Interruption { run: run.id.clone(), replica: run.replica, ..gone.clone() });
    }
    out
}

/// `in_cluster`: the job's pool runs jobs in a Kubernetes cluster, which retries failed
/// pods itself (`backoffLimit` = `retries`, reclaims ignored by the pod failure policy):
/// a failed Job has spent its retries, and gpuplan does not submit it again. The pods of
/// a node that goes are evicted and run again by the cluster ([`evict`]).
fn progress(
    job: &Job,
    t: &JobTemplate,
    rec: Option<&JobRecord>,
    observed: Option<&BTreeMap<String, JobStatus>>,
    in_cluster: bool,
    removed: &RemovedNodes,
) -> Progress {
    let mut runs = observed_runs(rec, observed);
    let interrupted =
        if in_cluster { evict(&mut runs, removed) } else { interrupt(&mut runs, removed, t.checkpoint_uri.is_some()) };
    let mut p = Progress {
        runs: Vec::new(),
        pending: Vec::new(),
        running: false,
        failed: false,
        cancelled: false,
        retries_spent: 0,
        interrupted,
        stopped: newly_stopped(rec, &runs),
    };
    p.cancelled = rec.is_some_and(|r| r.cancelled);
    for replica in 0..job.replicas.value {
        // A send to a warm node that may have run: only a refresh, which asks the cloud,
        // settles it (a refreshed plan has none left), so it is not sent again meanwhile.
        if rec.is_some_and(|r| r.sending.iter().any(|s| s.replica == replica)) {
            p.running = true;
            continue;
        }
        let latest = runs.iter().filter(|r| r.replica == replica).max_by_key(|r| r.attempt);
        match latest.map(|r| (r.status, r.attempt)) {
            None if !p.cancelled => p.pending.push((replica, 1)),
            None => {}
            // A stopped run's exit code is awaited: not relaunched until it fails.
            Some((JobState::Queued | JobState::Running | JobState::Stopped, _)) => p.running = true,
            Some((JobState::Succeeded, _)) => {}
            Some((JobState::Cancelled, _)) => p.cancelled = true,
            Some((JobState::Failed | JobState::Preempted, _)) if in_cluster => p.failed = true,
            Some((JobState::Failed | JobState::Preempted, attempt)) => {
                // Only the job's own failures spend retries (see `JobRun::spends_retry`).
                let spent = runs.iter().filter(|r| r.replica == replica && r.spends_retry()).count() as u32;
                p.retries_spent = p.retries_spent.max(spent);
                if spent <= t.retries.value && !p.cancelled {
                    p.pending.push((replica, attempt + 1));
                } else {
                    p.failed = true;
                }
            }
        }
    }
    if p.cancelled {
        p.pending.clear();
    }
    p.runs = runs;
    p
}

impl Progress {
    /// Where the job stands before admission: waiting for launches, running (or stopped,
    /// its exit code awaited), cancelled, failed for good, or succeeded.
    fn placement(&self) -> Placement {
        if !self.pending.is_empty() {
            Placement::Waiting
        } else if self.running {
            Placement::Running
        } else if self.cancelled {
            Placement::Cancelled
        } else if self.failed {
            Placement::Failed
        } else {
            Placement::Succeeded
        }
    }
}

/// Runs now stopped with their exit code awaited that `rec` (the state) records as
/// something else: the plan records the stop (see `JobPlacement::stopped`).
fn newly_stopped(rec: Option<&JobRecord>, runs: &[JobRun]) -> Vec<String> {
    let recorded = |id: &str| rec.and_then(|r| r.runs.iter().find(|r| r.id == id)).map(|r| r.status);
    runs.iter()
        .filter(|r| r.status == JobState::Stopped && recorded(&r.id) != Some(JobState::Stopped))
        .map(|r| r.id.clone())
        .collect()
}

/// The plan's jobs, in admission order (priority, then age).
pub fn place(input: &PlaceInput<'_>) -> Vec<JobPlacement> {
    let spec = input.spec;
    if input.plan.destroy || spec.jobs.is_empty() {
        return Vec::new();
    }
    let cat = catalog::catalog();
    // Only the pools jobs run on: a fleet of 100,000 pools with a few jobs stays linear.
    let used: std::collections::BTreeSet<&Address> =
        spec.jobs.values().flat_map(|j| std::iter::once(&j.pool.value).chain(&j.pool_choices)).collect();
    let shapes: BTreeMap<&Address, PoolShape> = spec
        .gpu_pools
        .iter()
        .filter(|(a, _)| used.contains(a))
        .filter_map(|(a, p)| shape::shape(spec, p, cat).map(|s| (a, s)))
        .collect();
    let (mut pools, offline) = pool_rooms(input, &shapes);
    let mut quotas: BTreeMap<Address, QuotaRoom> = spec
        .quotas
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
        .collect();

    let removed = removed_nodes(input.plan);
    let mut out: BTreeMap<Address, JobPlacement> = BTreeMap::new();
    let mut demands = Vec::new();
    for (addr, job) in &spec.jobs {
        let Some(t) = spec.job_templates.get(&job.template.value) else { continue };
        // A job that names a GPU model: the pool it runs on, or the cheapest with room.
        let rec = record(input.state, addr);
        let mut alternatives = Vec::new();
        let chosen;
        let job = if job.pool_choices.len() > 1 {
            let (pool, alts) = choose_pool(input, job, t, rec, &pools);
            alternatives = alts;
            let mut j = job.clone();
            j.pool.value = pool;
            chosen = j;
            &chosen
        } else {
            job
        };
        // A pool the spec lacks: validation explains.
        let Some(pool_spec) = spec.gpu_pools.get(&job.pool.value) else { continue };
        let in_cluster = pool_spec.kubernetes.is_some();
        let p = progress(job, t, rec, input.observed, in_cluster, &removed);
        // Running replicas keep their GPUs: take them out of the room and the quota.
        for run in p.runs.iter().filter(|r| r.is_active()) {
            // A run on a node of its own is not on the pool's room (counted as busy there).
            if let Some(room) = pools.get_mut(&job.pool.value).filter(|_| !run.has_own_node()) {
                take(room, &run.node_id, run.capacity, run.gpus);
            }
            if let Some(q) = job.quota.as_ref().and_then(|q| quotas.get_mut(&q.value)) {
                q.used_gpus += run.gpus as u64;
                let price = pools.get(&job.pool.value).map(|r| match run.capacity {
                    Capacity::OnDemand => r.usd_per_gpu_hour_on_demand,
                    Capacity::Spot => r.usd_per_gpu_hour_spot,
                });
                q.used_hourly_usd += price.flatten().unwrap_or(0.0) * run.gpus as f64;
            }
        }
        let placement = p.placement();
        let attempt = p.pending.iter().map(|(_, a)| *a).chain(p.runs.iter().map(|r| r.attempt)).max().unwrap_or(1);
        let mut capacity: Vec<Capacity> = p.runs.iter().filter(|r| r.is_active()).map(|r| r.capacity).collect();
        capacity.sort();
        out.insert(
            addr.clone(),
            JobPlacement {
                address: addr.clone(),
                pool: job.pool.value.clone(),
                quota: job.quota.as_ref().map(|q| q.value.clone()),
                priority: t.priority.value,
                preemptible: t.preemptible.value,
                replicas: job.replicas.value,
                gpus_per_replica: t.gpus.value,
                placement,
                capacity,
                attempt,
                retries: t.retries.value,
                retries_spent: p.retries_spent,
                reason: None,
                first_seen: rec.and_then(|r| r.first_seen.clone()),
                waiting_since: rec.and_then(|r| r.waiting_since.clone()),
                launches: Vec::new(),
                runs: p.runs.clone(),
                preempt: Vec::new(),
                preempted_for: None,
                alternatives,
                interrupted: p.interrupted.clone(),
                adopted: Vec::new(),
                stopped: p.stopped.clone(),
                incarnation: Some(incarnation(input.state, rec)),
                warm_skipped: Vec::new(),
                checkpoints: t.checkpoint_uri.is_some(),
            },
        );
        if !p.pending.is_empty() {
            demands.push((
                Demand {
                    address: addr.clone(),
                    pool: job.pool.value.clone(),
                    quota: job.quota.as_ref().map(|q| q.value.clone()),
                    priority: t.priority.value,
                    age: rec.and_then(|r| r.first_seen.clone()),
                    preemptible: t.preemptible.value,
                    replicas: p.pending.len() as u32,
                    gpus_per_replica: t.gpus.value,
                },
                p.pending,
            ));
        }
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
    let pending: BTreeMap<Address, Vec<(u32, u32)>> =
        demands.iter().map(|(d, p)| (d.address.clone(), p.clone())).collect();
    // The warm nodes of cloud VM pools with room once running jobs took theirs.
    let mut warm = warm_nodes(input, &shapes, &pools);
    let decisions = admit::admit(demands.into_iter().map(|(d, _)| d).collect(), &pools, &quotas);
    let mut order: Vec<Address> = decisions.iter().map(|d| d.address.clone()).collect();
    for d in decisions {
        let Some(jp) = out.get_mut(&d.address) else { continue };
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
                for ((replica, attempt), cap) in pending[&d.address].iter().zip(&caps) {
                    if let Some(shape) = shape {
                        let mut l = launch(input, &d.address, job, t, shape, *replica, *attempt, *cap, fallback);
                        onto_warm(&mut l, warm.get_mut(&job.pool.value));
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
    preempt(input, &shapes, &order, &pending, &mut out);
    // Admission order first, then the jobs that needed nothing, by address.
    let admitted: std::collections::BTreeSet<&Address> = order.iter().collect();
    let rest: Vec<Address> = out.keys().filter(|a| !admitted.contains(a)).cloned().collect();
    order.extend(rest);
    let mut all: Vec<JobPlacement> = order.into_iter().filter_map(|a| out.remove(&a)).collect();
    let rank = |j: &JobPlacement| {
        u8::from(!matches!(j.placement, Placement::Launch | Placement::Waiting | Placement::Preempt))
    };
    all.sort_by_key(rank); // stable: keeps admission order within each group
    // `--target`: only jobs named, or running on a pool named, are launched.
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
            room.nodes.iter().filter(|n| n.capacity == **c).map(|n| (n.free / need.max(1)) as usize).sum::<usize>()
                >= replicas
        });
        let cap = fit.copied().unwrap_or(prefs[0]);
        let price = match cap {
            Capacity::Spot => room.usd_per_gpu_hour_spot,
            Capacity::OnDemand => room.usd_per_gpu_hour_on_demand,
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

/// A running replica another job may preempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Victim {
    pub job: Address,
    pub priority: crate::spec::model::Priority,
    /// When the job was first seen (RFC 3339); `None`: new, the youngest.
    pub first_seen: Option<String>,
    pub run_id: String,
    pub node: String,
    pub gpus: u32,
    pub capacity: Capacity,
}

/// The runs to stop so that `replicas` replicas of `need` GPUs each fit on the nodes they
/// free: lowest priority first, then the youngest job, then by run id. Only victims on
/// the nodes the replicas get are kept. Returns them and each replica's capacity, or
/// `None` when stopping every candidate would not make room. Pure.
pub fn choose_victims(mut candidates: Vec<Victim>, need: u32, replicas: usize) -> Option<(Vec<Victim>, Vec<Capacity>)> {
    if need == 0 || replicas == 0 {
        return None;
    }
    candidates.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| match (&a.first_seen, &b.first_seen) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (Some(x), Some(y)) => y.cmp(x),
            })
            .then_with(|| a.run_id.cmp(&b.run_id))
    });
    let mut freed: Vec<(String, u32, Capacity)> = Vec::new();
    let mut chosen: Vec<Victim> = Vec::new();
    for c in candidates {
        match freed.iter_mut().find(|(n, _, _)| *n == c.node) {
            Some(slot) => slot.1 += c.gpus,
            None => freed.push((c.node.clone(), c.gpus, c.capacity)),
        }
        chosen.push(c);
        let slots: Vec<(&str, Capacity)> = freed
            .iter()
            .flat_map(|(n, g, cap)| std::iter::repeat_n((n.as_str(), *cap), (*g / need) as usize))
            .take(replicas)
            .collect();
        if slots.len() == replicas {
            let nodes: Vec<&str> = slots.iter().map(|(n, _)| *n).collect();
            let caps = slots.iter().map(|(_, c)| *c).collect();
            let kept = chosen.iter().filter(|v| nodes.contains(&v.node.as_str())).cloned().collect();
            return Some((kept, caps));
        }
    }
    None
}

/// Preemption: a job that waits for capacity or priority takes the GPUs of running
/// preemptible jobs of strictly lower priority on its pool ([`choose_victims`]); the
/// victims' placement becomes `Preempt` (apply stops those runs first) and the job is
/// launched on the capacity they free.
fn preempt(
    input: &PlaceInput<'_>,
    shapes: &BTreeMap<&Address, PoolShape>,
    order: &[Address],
    pending: &BTreeMap<Address, Vec<(u32, u32)>>,
    out: &mut BTreeMap<Address, JobPlacement>,
) {
    let spec = input.spec;
    // The running preemptible jobs of each pool, once: a waiting job looks only at its
    // pool's, so many waiting jobs on a large fleet stay linear.
    let mut preemptible: BTreeMap<Address, Vec<Address>> = BTreeMap::new();
    for v in out.values().filter(|v| v.preemptible && v.placement == Placement::Running) {
        preemptible.entry(v.pool.clone()).or_default().push(v.address.clone());
    }
    for addr in order {
        let Some(w) = out.get(addr) else { continue };
        let waits_for_room = w.placement == Placement::Waiting
            && matches!(w.reason.as_ref().map(|r| r.code), Some(WaitCode::Capacity | WaitCode::Priority));
        let Some(want) = pending.get(addr).filter(|_| waits_for_room) else { continue };
        let (pool, priority, need) = (w.pool.clone(), w.priority, w.gpus_per_replica);
        let Some(on_pool) = preemptible.get(&pool) else { continue };
        let candidates: Vec<Victim> = on_pool
            .iter()
            .filter_map(|a| out.get(a))
            .filter(|v| v.priority > priority)
            .filter(|v| matches!(v.placement, Placement::Running | Placement::Preempt))
            .flat_map(|v| {
                v.runs.iter().filter(|r| r.is_active() && !v.preempt.contains(&r.id)).map(move |r| Victim {
                    job: v.address.clone(),
                    priority: v.priority,
                    first_seen: v.first_seen.clone(),
                    run_id: r.id.clone(),
                    node: r.node_id.clone(),
                    gpus: r.gpus,
                    capacity: r.capacity,
                })
            })
            .collect();
        let Some((victims, caps)) = choose_victims(candidates, need, want.len()) else { continue };
        let (Some(job), Some(shape)) = (spec.jobs.get(addr), shapes.get(&pool)) else { continue };
        let mut job = job.clone();
        job.pool.value = pool.clone();
        let job = &job;
        let Some(t) = spec.job_templates.get(&job.template.value) else { continue };
        let fallback = spec.gpu_pools.get(&pool).map(|p| p.mix.fallback.value);
        for v in &victims {
            if let Some(vj) = out.get_mut(&v.job) {
                vj.placement = Placement::Preempt;
                vj.preempt.push(v.run_id.clone());
                vj.preempted_for = Some(addr.clone());
            }
        }
        let Some(jp) = out.get_mut(addr) else { continue };
        jp.placement = Placement::Launch;
        jp.reason = None;
        for ((replica, attempt), cap) in want.iter().zip(&caps) {
            jp.launches.push(launch(input, addr, job, t, shape, *replica, *attempt, *cap, fallback));
        }
        jp.capacity.extend(caps);
        jp.capacity.sort();
    }
}

/// Why `job` may not start yet: the first job it `depends_on` (every instance of it, for
/// `count`/`for_each` jobs) that has not succeeded. `None`: all succeeded (or none named).
fn unmet_dependency(spec: &Spec, job: &Address, out: &BTreeMap<Address, JobPlacement>) -> Option<WaitReason> {
    let deps = &spec.jobs.get(job)?.meta.depends_on;
    for dep in deps.iter().filter(|d| d.value.kind == crate::addr::Kind::Job) {
        let instances = instances(out, &dep.value);
        if instances.is_empty() {
            continue; // validation explains a dangling reference
        }
        if let Some(bad) = instances.iter().find(|j| matches!(j.placement, Placement::Failed | Placement::Cancelled)) {
            return Some(WaitReason {
                code: WaitCode::Dependency,
                message: format!(
                    "{} {}, so this job will not start (fix it and `gpuplan state rm {}` to run the pipeline again)",
                    bad.address,
                    bad.placement.as_str(),
                    bad.address
                ),
            });
        }
        if let Some(open) = instances.iter().find(|j| j.placement != Placement::Succeeded) {
            return Some(WaitReason {
                code: WaitCode::Dependency,
                message: format!(
                    "waits for {} to succeed ({})",
                    open.address,
                    match open.placement {
                        Placement::Running => "it is running",
                        _ => "it has not run yet",
                    }
                ),
            });
        }
    }
    None
}

/// The jobs `target` names (every instance when it has no key), in address order: a
/// range of the map, since instances sort together, so a long pipeline stays n log n.
fn instances<'o>(out: &'o BTreeMap<Address, JobPlacement>, target: &Address) -> Vec<&'o JobPlacement> {
    if target.key.is_some() {
        return out.get(target).into_iter().collect();
    }
    let first = Address { key: None, ..target.clone() };
    out.range(first..).map(|(_, j)| j).take_while(|j| j.address.matches_target(target)).collect()
}

/// Take a running replica's `gpus` off its node, or when that node is not among the
/// pool's nodes after this plan (replaced, not yet refreshed), off the fullest node of its
/// capacity with room.
fn take(room: &mut PoolRoom, node_id: &str, capacity: Capacity, gpus: u32) {
    let i = room.nodes.iter().position(|n| n.id.as_deref() == Some(node_id)).or_else(|| {
        room.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.capacity == capacity && n.free >= gpus)
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
fn warm_nodes(
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
fn onto_warm(l: &mut ReplicaLaunch, warm: Option<&mut Vec<NodeRoom>>) {
    let (Some(warm), Some(shape)) = (warm, l.request.shape.as_ref()) else { return };
    let gpus = l.request.gpus;
    let best = warm
        .iter_mut()
        .enumerate()
        .filter(|(_, n)| n.capacity == l.capacity && n.free >= gpus)
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
type Offline = BTreeMap<Address, Vec<String>>;

/// Each pool's nodes once this plan is applied: live nodes it keeps, nodes it adopts and
/// nodes it creates, all with `gpus_per_node` free. On a cloud VM pool: its warm nodes
/// whose agent is online, then a boot slot for each node `nodes.max` still allows.
fn pool_rooms(
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
                let gone: Vec<&str> =
                    pc.deletes.iter().map(|d| d.id.as_str()).chain(pc.forget.iter().map(String::as_str)).collect();
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
                    nodes.extend(r.nodes.iter().filter(|n| n.is_live()).map(|n| NodeRoom {
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

/// Which life of `job`'s address `rec` is ([`JobRecord::incarnation`]): the recorded one
/// (records written before it existed: their `first_seen`), else a new one from the
/// state's serial, which apply records before the first launch.
pub fn incarnation(state: &State, rec: Option<&JobRecord>) -> String {
    rec.and_then(|r| r.incarnation.clone().or_else(|| r.first_seen.clone()))
        .unwrap_or_else(|| format!("s{}", state.serial))
}

/// The `gpuplan.dev/run` label of a job instance's Kubernetes Job: its life and attempt,
/// hashed to a valid label value.
pub fn run_label(lineage: &str, job: &Address, incarnation: &str, attempt: u32) -> String {
    let digest = Sha256::digest(format!("{lineage}|{job}|{incarnation}|{attempt}").as_bytes());
    let hex = crate::hex::hex(&digest[..12]);
    format!("r{attempt}-{hex}")
}

/// The idempotency token of one replica attempt: the same attempt never launches twice,
/// however often it is planned.
pub fn token(lineage: &str, job: &Address, incarnation: &str, replica: u32, attempt: u32) -> String {
    let seed = format!("{lineage}|{job}|{incarnation}|{replica}|{attempt}");
    let digest = Sha256::digest(seed.as_bytes());
    let hex = crate::hex::hex(&digest[..20]);
    format!("gj-{hex}")
}

/// The environment of one replica attempt: template env, job env, then gpuplan's own.
pub fn env(job_addr: &Address, job: &Job, t: &JobTemplate, replica: u32, attempt: u32) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = t.env.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect();
    env.extend(job.env.iter().map(|(k, v)| (k.clone(), v.value.clone())));
    if let Some(uri) = &t.checkpoint_uri {
        env.insert(ENV_CHECKPOINT.into(), uri.value.clone());
    }
    env.insert(ENV_ATTEMPT.into(), attempt.to_string());
    env.insert(ENV_JOB.into(), job_addr.to_string());
    env.insert(ENV_REPLICA.into(), replica.to_string());
    env.insert(ENV_REPLICAS.into(), job.replicas.value.to_string());
    env
}

#[allow(clippy::too_many_arguments)]
fn launch(
    input: &PlaceInput<'_>,
    addr: &Address,
    job: &Job,
    t: &JobTemplate,
    shape: &PoolShape,
    replica: u32,
    attempt: u32,
    capacity: Capacity,
    fallback: Option<Fallback>,
) -> ReplicaLaunch {
    let lineage = &input.state.lineage;
    let life = incarnation(input.state, record(input.state, addr));
    let token = token(lineage, addr, &life, replica, attempt);
    let mut command: Vec<String> = t.command.iter().map(|c| c.value.clone()).collect();
    command.extend(job.args.iter().map(|a| a.value.clone()));
    // Clouds make a node for the job from the pool's shape; sim runs it on a pool node.
    let node_shape = (shape.provider_kind != ProviderKind::Sim).then(|| {
        let tags: Tags = [
            (TAG_MANAGED, "true".to_string()),
            (TAG_LINEAGE, lineage.clone()),
            (TAG_ADDRESS, job.pool.value.to_string()),
            (TAG_PROVIDER, shape.provider.clone()),
            (TAG_JOB, addr.to_string()),
            (TAG_ATTEMPT, attempt.to_string()),
            (TAG_REPLICA, replica.to_string()),
        ]
        .into_iter()
        .collect();
        CreateNodes {
            pool: job.pool.value.clone(),
            region: shape.region.clone(),
            zone: shape.zones.get(replica as usize % shape.zones.len().max(1)).cloned().unwrap_or_default(),
            zones: vec![],
            instance_types: shape.instance_types.clone(),
            capacity,
            count: 1,
            image: shape.image.clone(),
            max_spot_price: if capacity == Capacity::Spot { shape.max_spot_price } else { None },
            token: token.clone(),
            tags,
            user_data: None,
            join: None,
        }
    });
    // A pool in a Kubernetes cluster: the cluster places the replica on one of the pool's
    // nodes; every replica carries the job instance's Job (the first creates it).
    let pool = input.spec.gpu_pools.get(&job.pool.value);
    let kube = pool.and_then(|p| p.kubernetes.as_ref()).map(|k| {
        let cluster = match (&k.kubeconfig, &k.cluster_id) {
            (Some(path), _) => kube::locator(&path.value, k.context.as_ref().map(|c| c.value.as_str())),
            (None, Some(id)) => kube::cluster_locator(&shape.region, &id.value),
            (None, None) => String::new(), // validation refuses this block
        };
        let manifest = super::k8s::manifest_for(input.spec, addr, job, attempt, Some(lineage.as_str()))
            .map(|mut m| {
                // The run's identity: an old Job of the same name is never taken for this one.
                let labels = m.metadata.labels.get_or_insert_with(Default::default);
                labels.insert(kube::LABEL_RUN.to_string(), run_label(lineage, addr, &life, attempt));
                m
            })
            .map(|m| serde_json::to_value(m).expect("a Job is plain data and always serializes"))
            // No manifest only without a template, which never reaches a launch; the
            // backend would refuse the null Job (`BadManifest`), never submit it.
            .unwrap_or_default();
        KubeLaunch {
            cluster,
            namespace: k.namespace.value.clone(),
            name: super::k8s::object_name(addr),
            replica,
            lineage: lineage.clone(),
            manifest,
        }
    });
    let node_shape = if kube.is_some() { None } else { node_shape };
    let request = LaunchJob {
        job: addr.clone(),
        pool: job.pool.value.clone(),
        node_id: String::new(),
        region: String::new(),
        image: t.image.value.clone(),
        command,
        env: env(addr, job, t, replica, attempt),
        gpus: t.gpus.value,
        attempt,
        token,
        shape: node_shape,
        max_runtime_secs: t.max_runtime.as_ref().map(|d| d.value.as_secs()),
        keep_node: false,
        kube: kube.clone(),
    };
    let fallback = (capacity == Capacity::Spot && fallback == Some(Fallback::OnDemand)).then_some(Capacity::OnDemand);
    let (provider, region) = match &kube {
        Some(k) => (kube::name(&shape.provider), k.cluster.clone()),
        None => (shape.provider.clone(), shape.region.clone()),
    };
    // Room on a node is counted in what jobs' `gpus` count there: GPUs, or MIG slices.
    let gpus_per_node = shape.gpus_per_node * pool.map_or(1, |p| p.slices_per_gpu());
    ReplicaLaunch { replica, capacity, fallback, provider, region, gpus_per_node, request }
}

#[cfg(test)]
mod tests;
