//! The jobs phase of apply. Before the node changes, [`cancel_removed`] stops the runs of
//! jobs removed from the spec; after them, [`run`] launches the replicas the plan admitted
//! and records every job's runs, age and queue time in the state journal.
//!
//! On `sim` a replica runs on a live node of its pool
//! with room: the planned capacity type first, then the fallback the plan allows (spot →
//! on-demand when `mix.fallback = "on_demand"`). For clouds the plan already carries the
//! node shape and the provider creates a node for the job. Pools with a `kubernetes {}`
//! block submit their Job to the cluster (`providers/kube`), which places the replicas. Launch tokens come from the
//! plan, so a retried apply never launches a replica attempt twice.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::apply::{ApplyOptions, Outcome, ProviderSet, Recorder, Status};
use crate::model::{JobPlacement, JobRecord, JobRun, Placement};
use crate::plan::{Action, Plan};
use crate::providers::{Capacity, JobState, ListFilter, Node};
use crate::state::{JournalEntry, State};

/// A live node and the GPUs jobs use on it.
struct Slot {
    node: Node,
    used: u32,
}

/// Launch, cancel and record. Returns one outcome per job that could not do what the
/// plan said (failed launches as failures, replicas without room as partial).
pub async fn run(
    plan: &Plan,
    prior: &State,
    providers: &ProviderSet,
    recorder: &Recorder,
    opts: &ApplyOptions,
) -> Vec<Outcome> {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut outcomes = Vec::new();
    // Job nodes no run owns (found by refresh): terminated.
    for o in &plan.orphan_job_nodes {
        let result = match providers.get(&o.provider) {
            Some(p) => p.release_job_node(&o.region, &o.node_id).await.map_err(|e| e.to_string()),
            None => Err(format!("provider `{}` is not configured", o.provider)),
        };
        let address: Address = o.job.parse().unwrap_or_else(|_| Address::new(crate::addr::Kind::Job, "unknown"));
        match result {
            Ok(()) => opts.progress.event(&o.job, &format!("orphan job node {} terminated", o.node_id)),
            Err(e) => outcomes.push(Outcome {
                address,
                action: Action::NoOp,
                status: Status::Failed(format!("could not terminate orphan job node {}: {e}", o.node_id)),
                created: 0,
                deleted: 0,
            }),
        }
    }
    // Preemptions first: the runs stopped for a higher-priority job free their GPUs
    // before anything launches.
    let mut stopped: BTreeMap<String, Result<crate::providers::JobStatus, String>> = BTreeMap::new();
    for j in plan.jobs.iter().filter(|j| j.placement == Placement::Preempt) {
        for run in j.runs.iter().filter(|r| j.preempt.contains(&r.id)) {
            let result = match providers.get(&run.provider) {
                Some(p) => p.cancel_job(&run.region, &run.id).await.map_err(|e| e.to_string()),
                None => Err(format!("provider `{}` is not configured", run.provider)),
            };
            let for_job = j.preempted_for.as_ref().map_or_else(String::new, ToString::to_string);
            let msg = match &result {
                Ok(_) => format!("run {} preempted for {for_job}", run.id),
                Err(e) => format!("could not preempt run {} for {for_job}: {e}", run.id),
            };
            opts.progress.event(&j.address.to_string(), &msg);
            stopped.insert(run.id.clone(), result);
        }
    }
    // Live nodes per pool, listed once per (provider, region) that has launches on nodes.
    let mut slots: BTreeMap<Address, Vec<Slot>> = BTreeMap::new();
    let mut listed: Vec<(String, String)> = Vec::new();
    // Kubernetes launches need no node: the cluster places them on the pool's nodes.
    let on_node = |l: &&crate::model::ReplicaLaunch| l.request.shape.is_none() && l.request.kube.is_none();
    for l in plan.jobs.iter().flat_map(|j| &j.launches).filter(on_node) {
        let key = (l.provider.clone(), l.region.clone());
        if listed.contains(&key) {
            continue;
        }
        listed.push(key);
        let Some(p) = providers.get(&l.provider) else { continue };
        let filter = ListFilter { region: l.region.clone(), lineage: Some(plan.lineage.clone()) };
        match p.list_nodes(&filter).await {
            Ok(nodes) => {
                for n in nodes.into_iter().filter(Node::is_live) {
                    slots.entry(n.pool.clone()).or_default().push(Slot { node: n, used: 0 });
                }
            }
            Err(e) => opts.progress.event(&l.request.pool.to_string(), &format!("could not list nodes: {e}")),
        }
    }
    for j in &plan.jobs {
        // A preempted run's GPUs are free again (when it did stop).
        for run in j.runs.iter().filter(|r| r.is_active() && !stopped.get(&r.id).is_some_and(Result::is_ok)) {
            if let Some(s) = slots.get_mut(&j.pool).and_then(|s| s.iter_mut().find(|s| s.node.id == run.node_id)) {
                s.used += run.gpus;
            }
        }
    }

    let mut entries = Vec::new();
    for j in &plan.jobs {
        let mut rec = JobRecord {
            first_seen: j.first_seen.clone().or_else(|| Some(now.clone())),
            waiting_since: None,
            cancelled: prior_record(prior, &j.address).is_some_and(|r| r.cancelled),
            runs: j.runs.clone(),
        };
        // Preempted runs: requeued from their checkpoint, without spending `retries`.
        for run in rec.runs.iter_mut() {
            match stopped.get(&run.id) {
                Some(Ok(_)) => {
                    let for_job = j.preempted_for.as_ref().map(ToString::to_string);
                    run.status = crate::providers::JobState::Preempted;
                    run.message =
                        Some(format!("preempted for {}", for_job.as_deref().unwrap_or("a higher-priority job")));
                    run.preempted_for = for_job;
                }
                Some(Err(e)) => {
                    outcomes.push(outcome(j, Status::Failed(format!("could not preempt run {}: {e}", run.id))));
                }
                None => {}
            }
        }
        let mut short = Vec::new();
        let mut failed = Vec::new();
        for l in &j.launches {
            let Some(provider) = providers.get(&l.provider) else {
                failed.push(format!("provider `{}` is not configured", l.provider));
                continue;
            };
            let mut req = l.request.clone();
            let mut capacity = l.capacity;
            if req.shape.is_none() && req.kube.is_none() {
                let pool = slots.get_mut(&j.pool).map(Vec::as_mut_slice).unwrap_or_default();
                let per_node = l.gpus_per_node;
                let pick = pick(pool, l.capacity, req.gpus, per_node)
                    .map(|i| (i, l.capacity))
                    .or_else(|| l.fallback.and_then(|f| pick(pool, f, req.gpus, per_node).map(|i| (i, f))));
                let Some((i, cap)) = pick else {
                    short.push(format!(
                        "replica {} found no {} node with {} free GPUs",
                        l.replica, l.capacity, req.gpus
                    ));
                    continue;
                };
                pool[i].used += req.gpus;
                req.node_id = pool[i].node.id.clone();
                capacity = cap;
            }
            let mut result = provider.launch_job(&req).await;
            // A node made for the job: no spot capacity left (a reclaimed spot job coming
            // back, say) moves to the pool's fallback capacity, as pool nodes do.
            if let (Err(e), Some(fallback), Some(shape)) = (&result, l.fallback, req.shape.as_mut())
                && e.class == crate::providers::ErrorClass::OutOfCapacity
            {
                opts.progress.event(
                    &j.address.to_string(),
                    &format!("replica {}: no {} capacity ({e}); falling back to {fallback}", l.replica, shape.capacity),
                );
                shape.capacity = fallback;
                shape.max_spot_price = None;
                shape.token = format!("{}-f", shape.token);
                req.token = format!("{}-f", req.token);
                capacity = fallback;
                result = provider.launch_job(&req).await;
            }
            match result {
                Ok(status) => {
                    opts.progress.event(
                        &j.address.to_string(),
                        &format!(
                            "replica {} attempt {} launched as {} on {} ({capacity})",
                            l.replica,
                            l.attempt(),
                            status.id,
                            status.node_id
                        ),
                    );
                    rec.runs.push(JobRun {
                        replica: l.replica,
                        attempt: req.attempt,
                        id: status.id,
                        provider: l.provider.clone(),
                        region: l.region.clone(),
                        node_id: status.node_id,
                        capacity,
                        gpus: req.gpus,
                        status: status.state,
                        message: status.message,
                        launched_at: Some(status.started_ms.map_or_else(|| now.clone(), crate::model::job::rfc3339_ms)),
                        finished_at: status.finished_ms.map(crate::model::job::rfc3339_ms),
                        own_node: req.shape.is_some(),
                        node_released: false,
                        preempted_for: None,
                    });
                }
                Err(e) => failed.push(format!("replica {} attempt {}: {e}", l.replica, req.attempt)),
            }
        }
        // Ended runs on nodes made for them: terminate those nodes (a leak otherwise).
        let mut unreleased = Vec::new();
        for run in rec.runs.iter_mut().filter(|r| r.node_to_release()) {
            let Some(provider) = providers.get(&run.provider) else {
                unreleased.push(format!("node {}: provider `{}` is not configured", run.node_id, run.provider));
                continue;
            };
            match provider.release_job_node(&run.region, &run.id).await {
                Ok(()) => {
                    run.node_released = true;
                    opts.progress
                        .event(&j.address.to_string(), &format!("node {} terminated (its run ended)", run.node_id));
                }
                // Already gone (the reason the run ended): nothing left to terminate.
                Err(e) if e.code == "JobNotFound" => run.node_released = true,
                Err(e) => unreleased.push(format!("node {}: {e}", run.node_id)),
            }
        }
        if !unreleased.is_empty() {
            let what = format!("could not terminate the node(s) of ended runs: {}", unreleased.join("; "));
            outcomes.push(outcome(j, Status::Failed(what)));
        }
        let waits = j.placement == Placement::Waiting || !short.is_empty() || !failed.is_empty();
        if waits {
            rec.waiting_since = j.waiting_since.clone().or_else(|| Some(now.clone()));
        }
        let status = if !failed.is_empty() {
            Status::Failed(format!("job launch failed: {}", failed.join("; ")))
        } else if !short.is_empty() {
            Status::Partial(format!("stays queued: {}", short.join("; ")))
        } else {
            Status::Done
        };
        if j.needs_launch() {
            // The job's progress line, held back by the executor until its launches ended.
            opts.progress.finished(&j.address.to_string(), &crate::apply::progress_message(&status));
        }
        if status != Status::Done {
            outcomes.push(outcome(j, status));
        }
        let resource = match plan.changes.iter().find(|c| c.address == j.address) {
            Some(c) if c.action != Action::Delete => crate::apply::resource_state(c, None),
            _ => match prior.resources.get(&j.address.to_string()) {
                Some(r) => r.clone(),
                None => continue,
            },
        };
        if prior_record(prior, &j.address) != Some(&rec) {
            let resource = crate::state::ResourceState { job: Some(Box::new(rec)), ..resource };
            entries.push(JournalEntry::PutResource { address: j.address.to_string(), resource });
        }
    }
    if !entries.is_empty()
        && let Err(e) = recorder.record(entries).await
    {
        opts.progress.event("jobs", &format!("could not record job runs: {e}"));
    }
    outcomes
}

impl crate::jobs::model::ReplicaLaunch {
    pub fn attempt(&self) -> u32 {
        self.request.attempt
    }
}

fn prior_record<'s>(state: &'s State, addr: &Address) -> Option<&'s JobRecord> {
    crate::jobs::place::record(state, addr)
}

fn outcome(j: &JobPlacement, status: Status) -> Outcome {
    Outcome { address: j.address.clone(), action: Action::NoOp, status, created: 0, deleted: 0 }
}

/// The fullest node of `capacity` that still has `gpus` free of its `per_node` (best fit).
fn pick(slots: &[Slot], capacity: Capacity, gpus: u32, per_node: u32) -> Option<usize> {
    slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.node.capacity == capacity && per_node.saturating_sub(s.used) >= gpus)
        .min_by_key(|(i, s)| (per_node - s.used, *i))
        .map(|(i, _)| i)
}

/// Jobs removed from the spec (or destroyed): stop their active runs. Runs before the
/// node changes, so a job is cancelled rather than killed with its node.
pub async fn cancel_removed(plan: &Plan, prior: &State, providers: &ProviderSet, opts: &ApplyOptions) {
    for c in plan.changes.iter().filter(|c| c.action == Action::Delete && c.address.kind == crate::addr::Kind::Job) {
        let Some(rec) = prior_record(prior, &c.address) else { continue };
        // Nodes of ended runs go with the job.
        for run in rec.runs.iter().filter(|r| r.node_to_release()) {
            let Some(p) = providers.get(&run.provider) else { continue };
            let msg = match p.release_job_node(&run.region, &run.id).await {
                Ok(()) => format!("node {} of ended run {} terminated", run.node_id, run.id),
                Err(e) => format!("could not terminate node {} of ended run {}: {e}", run.node_id, run.id),
            };
            opts.progress.event(&c.address.to_string(), &msg);
        }
        for run in rec.runs.iter().filter(|r| r.is_active()) {
            let Some(p) = providers.get(&run.provider) else { continue };
            let msg = match p.cancel_job(&run.region, &run.id).await {
                Ok(s) if s.state == JobState::Cancelled => format!("run {} cancelled", run.id),
                Ok(s) => format!("run {} already {}", run.id, crate::jobs::model::state_str(s.state)),
                Err(e) => format!("could not cancel run {}: {e}", run.id),
            };
            opts.progress.event(&c.address.to_string(), &msg);
        }
    }
}
