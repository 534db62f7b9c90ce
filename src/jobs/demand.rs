//! Demand, the first phase of placing jobs: what each job's replicas need, read from the
//! state and refresh, before any room is counted. Each replica's latest run decides: none
//! yet → launch attempt 1; queued or running → keeps its GPUs; succeeded or cancelled →
//! done; failed or preempted → the next attempt while `retries` allow. Runs on nodes
//! this plan removes are interrupted (VM pools) or evicted (clusters) here. Pure.

use std::collections::BTreeMap;

use super::admit::Demand;
use super::model::{Interruption, JobPlacement, JobRecord, JobRun, Placement};
use crate::addr::Address;
use crate::plan::Plan;
use crate::providers::{AgentState, Capacity, JobState, JobStatus};
use crate::spec::Spec;
use crate::spec::model::{Job, JobTemplate};
use crate::state::State;

/// What every phase of placement reads.
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
pub(super) struct Progress {
    pub runs: Vec<JobRun>,
    /// (replica, attempt) to launch.
    pub pending: Vec<(u32, u32)>,
    running: bool,
    failed: bool,
    cancelled: bool,
    /// The most retries any replica's own failures spent.
    pub retries_spent: u32,
    /// Runs stopped because this plan removes their node.
    pub interrupted: Vec<Interruption>,
    /// Runs refresh found stopped (exit code awaited) that the state records otherwise.
    pub stopped: Vec<String>,
    /// A multi-node job requeued whole ([`super::regroup`]).
    pub regroup: Option<crate::model::job::Regroup>,
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
                // Clouds whose launch does not answer the node's address (a rendezvous
                // waits for it) tell it here.
                if s.address.is_some() {
                    run.address.clone_from(&s.address);
                }
            }
        }
    }
    runs
}

/// Pool nodes this plan removes (node id → its node delete, as an interruption of the
/// run on it would read).
pub(super) type RemovedNodes = BTreeMap<String, Interruption>;

/// Every node a pool change of `plan` deletes, with why.
pub(super) fn removed_nodes(plan: &Plan) -> RemovedNodes {
    let mut out = RemovedNodes::new();
    for c in &plan.changes {
        let Some(pc) = &c.pool else { continue };
        for d in &pc.deletes {
            // What the node's own reason already says (`--replace`'s) is said once.
            let reasons: Vec<&str> =
                c.reasons.iter().flat_map(|r| r.message.split("; ")).filter(|part| !d.reason.contains(part)).collect();
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

/// Nodes this plan found unhealthy, by id, with their evidence (docs/design/gpu-health.md).
pub(super) type FaultyNodes = BTreeMap<String, String>;

/// Every node of `plan.health`, whatever its fate (replaced, quarantined or waiting).
pub(super) fn faulty_nodes(plan: &Plan) -> FaultyNodes {
    plan.health.iter().map(|h| (h.node.clone(), h.evidence.clone())).collect()
}

/// A run that failed on a node found unhealthy failed with its GPU, not on its own: it
/// ends as preempted, so its retry is given back and the replica requeues as the next
/// attempt (away from the node, which takes no job: `room.rs`, `apply/jobs/assign.rs`).
/// So does a run whose node failed its readiness check before the job ran (the job
/// script's own exit, `providers::userdata::readiness`), even once its node is gone.
/// Apply records the run so, and a later plan reads it from the state.
fn give_back_retries(runs: &mut [JobRun], faulty: &FaultyNodes) {
    use crate::providers::userdata::readiness::is_node_failure;
    for run in runs.iter_mut().filter(|r| r.spends_retry()) {
        if let Some(why) = run.message.as_deref().filter(|m| is_node_failure(m)) {
            let why = why.to_string();
            run.status = JobState::Preempted;
            run.message = Some(format!("{why}; requeued without spending a retry"));
            continue;
        }
        let Some(evidence) = faulty.get(&run.node_id) else { continue };
        run.status = JobState::Preempted;
        run.message =
            Some(format!("failed with a GPU of node {} ({evidence}): requeued without spending a retry", run.node_id));
    }
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
pub(super) fn progress(
    job: &Job,
    t: &JobTemplate,
    rec: Option<&JobRecord>,
    observed: Option<&BTreeMap<String, JobStatus>>,
    in_cluster: bool,
    removed: &RemovedNodes,
    faulty: &FaultyNodes,
) -> Progress {
    let mut runs = observed_runs(rec, observed);
    give_back_retries(&mut runs, faulty);
    let interrupted =
        if in_cluster { evict(&mut runs, removed) } else { interrupt(&mut runs, removed, t.checkpoint_uri.is_some()) };
    // A cluster's Indexed Job regroups its own pods.
    let regroup = if in_cluster { None } else { super::regroup::regroup(&mut runs, job.replicas.value) };
    let mut p = Progress {
        runs: Vec::new(),
        pending: Vec::new(),
        running: false,
        failed: false,
        cancelled: false,
        retries_spent: 0,
        interrupted,
        stopped: newly_stopped(rec, &runs),
        regroup,
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
    // A multi-node job runs whole or not at all: with a replica failed for good, the
    // others are not launched again.
    if p.cancelled || (p.failed && !in_cluster && job.replicas.value > 1) {
        p.pending.clear();
    }
    p.runs = runs;
    p
}

impl Progress {
    /// Where the job stands before admission: waiting for launches, running (or stopped,
    /// its exit code awaited), cancelled, failed for good, or succeeded.
    pub(super) fn placement(&self) -> Placement {
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

/// Which life of `job`'s address `rec` is ([`JobRecord::incarnation`]): the recorded one
/// (records written before it existed: their `first_seen`), else a new one from the
/// state's serial, which apply records before the first launch.
pub fn incarnation(state: &State, rec: Option<&JobRecord>) -> String {
    rec.and_then(|r| r.incarnation.clone().or_else(|| r.first_seen.clone()))
        .unwrap_or_else(|| format!("s{}", state.serial))
}

/// The job's entry in the plan before admission: where it stands, its runs, and what
/// this plan interrupts or records of them. `alternatives`: the pools a job that names a
/// GPU model chose among.
pub(super) fn placement(
    input: &PlaceInput<'_>,
    addr: &Address,
    job: &Job,
    t: &JobTemplate,
    rec: Option<&JobRecord>,
    p: &Progress,
    alternatives: Vec<String>,
) -> JobPlacement {
    let attempt = p.pending.iter().map(|(_, a)| *a).chain(p.runs.iter().map(|r| r.attempt)).max().unwrap_or(1);
    let mut capacity: Vec<Capacity> = p.runs.iter().filter(|r| r.is_active()).map(|r| r.capacity).collect();
    capacity.sort();
    JobPlacement {
        address: addr.clone(),
        pool: job.pool.value.clone(),
        quota: job.quota.as_ref().map(|q| q.value.clone()),
        priority: t.priority.value,
        preemptible: t.preemptible.value,
        replicas: job.replicas.value,
        gpus_per_replica: t.gpus.value,
        placement: p.placement(),
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
        regroup: p.regroup.clone(),
    }
}

/// What the job asks admission for: its replicas that need a launch (`None`: none do).
pub(super) fn demand(
    addr: &Address,
    job: &Job,
    t: &JobTemplate,
    rec: Option<&JobRecord>,
    p: &Progress,
) -> Option<Demand> {
    (!p.pending.is_empty()).then(|| Demand {
        address: addr.clone(),
        pool: job.pool.value.clone(),
        quota: job.quota.as_ref().map(|q| q.value.clone()),
        priority: t.priority.value,
        age: rec.and_then(|r| r.first_seen.clone()),
        preemptible: t.preemptible.value,
        replicas: p.pending.len() as u32,
        gpus_per_replica: t.gpus.value,
    })
}
