//! The jobs phase of apply: a job run's life in one place for every backend (sim nodes,
//! cloud job VMs, Kubernetes Jobs), each step a function of its own.
//!
//! 1. [`before_nodes`], before the node changes: [`cancel_removed`] stops the runs of
//!    jobs removed from the spec, and [`stop_interrupted`] the runs whose node the plan
//!    removes, so a job is stopped (and requeued) rather than killed with its node.
//! 2. [`run`], after them:
//!    - [`release_orphan_job_nodes`]: job nodes no run owns are terminated;
//!    - [`stop_preempted`]: runs preempted for a higher-priority job free their GPUs;
//!    - [`node_slots`]: the live nodes sim launches may use, with the GPUs in use;
//!    - per job, [`settle`]: record the stops ([`record_stops`]), launch the replicas the
//!      plan admitted ([`launch_replica`]), each launch journaled before the next step
//!      (a crash leaves no job node the state does not know, but one the provider
//!      created before answering, which the next plan adopts: `jobs::adopt`), terminate
//!      the nodes of ended runs ([`release_ended_nodes`]), and journal the job's runs
//!      (adopted ones included), age and queue time.
//!
//! On `sim` a replica runs on a live node of its pool with room: the planned capacity
//! type first, then the fallback the plan allows (spot → on-demand when
//! `mix.fallback = "on_demand"`). For clouds the plan already carries either the warm
//! node the job runs on (through the cloud's run-command API; the node stays in its pool
//! when the job ends) or the node shape, and the provider creates a node for the job. Pools with a `kubernetes {}` block submit
//! their Job to the cluster (`providers/kube`), which places the replicas. Launch tokens
//! come from the plan, so a retried apply never launches a replica attempt twice.
//! A run gpuplan stops (preemption, its node removed) never spends a retry.

mod ledger;

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::apply::{ApplyOptions, Outcome, ProviderSet, Recorder, Status};
use crate::model::{JobPlacement, JobRecord, JobRun, Placement, ReplicaLaunch};
use crate::plan::model::ResourceChange;
use crate::plan::{Action, Plan};
use crate::providers::{Capacity, JobState, JobStatus, ListFilter, Node};
use crate::state::model::SpendEntry;
use crate::state::{JournalEntry, State};

/// A live node and the GPUs jobs use on it.
struct Slot {
    node: Node,
    used: u32,
}

/// Runs gpuplan stopped during this apply, by run id: what the provider said, or why it
/// could not stop them.
#[derive(Debug, Default)]
pub struct Stopped(BTreeMap<String, Result<JobStatus, String>>, Kept);

/// Jobs removed by the plan whose runs could not all be cancelled (or whose ended runs'
/// nodes could not be terminated), with why: their records stay in state (the executor
/// fails their deletion), so the next apply, `destroy` or `jobs cancel` finds the nodes.
#[derive(Debug, Default, Clone)]
pub struct Kept(pub BTreeMap<Address, String>);

impl Stopped {
    /// The jobs whose deletion must fail, with why.
    pub fn kept(&self) -> &Kept {
        &self.1
    }
}

/// What one job's replica launches came to.
#[derive(Default)]
struct Launched {
    runs: Vec<JobRun>,
    /// Replicas without a node with room (sim): they stay queued.
    short: Vec<String>,
    failed: Vec<String>,
    /// Ledger lines of the nodes made for the launched runs, by node id.
    ledger: Vec<(String, SpendEntry)>,
}

/// Before the node changes: stop what the plan's node removals would otherwise kill.
pub async fn before_nodes(plan: &Plan, prior: &State, providers: &ProviderSet, opts: &ApplyOptions) -> Stopped {
    let kept = cancel_removed(plan, prior, providers, opts).await;
    let mut stopped = stop_interrupted(plan, providers, opts).await;
    stopped.1 = kept;
    stopped
}

/// After the node changes: launch, stop, release and record. Returns one outcome per job
/// that could not do what the plan said (failed launches as failures, replicas without
/// room as partial).
pub async fn run(
    plan: &Plan,
    prior: &State,
    providers: &ProviderSet,
    recorder: &Recorder,
    opts: &ApplyOptions,
    mut stopped: Stopped,
) -> Vec<Outcome> {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut outcomes = release_orphan_job_nodes(plan, providers, opts).await;
    stopped.0.extend(stop_preempted(plan, providers, opts).await.0);
    let mut slots = node_slots(plan, providers, opts, &stopped).await;
    let changes = plan.changes.iter().map(|c| (&c.address, c)).collect();
    let steps = Steps { plan, prior, providers, recorder, opts, changes };
    let mut entries = Vec::new();
    for j in &plan.jobs {
        let (written, out) = settle(&steps, j, &stopped, &mut slots, &now).await;
        entries.extend(written);
        outcomes.extend(out);
    }
    // Ledger lines of the runs that ended (or whose job goes), after their records.
    let closed = ledger::close_ended(plan, prior, providers, &entries, stopped.kept());
    if !closed.is_empty()
        && let Err(e) = recorder.record(closed).await
    {
        opts.progress.event("jobs", &format!("could not record job runs: {e}"));
    }
    outcomes
}

/// What every step of the jobs phase works with.
struct Steps<'a> {
    plan: &'a Plan,
    prior: &'a State,
    providers: &'a ProviderSet,
    recorder: &'a Recorder,
    opts: &'a ApplyOptions,
    /// The plan's changes by address, once: a job's record looks up its own change
    /// without scanning every change (100,000 jobs stay linear).
    changes: BTreeMap<&'a Address, &'a ResourceChange>,
}

impl Steps<'_> {
    /// Make the job's record durable now (when it differs from the prior state's), with
    /// `ledger` lines after it: a crash after this leaves the runs launched so far in
    /// state, never a node that the next plan would take for an orphan. Returns the
    /// record's entry as written.
    async fn record(
        &self,
        j: &JobPlacement,
        rec: &JobRecord,
        ledger: Vec<(String, SpendEntry)>,
    ) -> Result<Option<JournalEntry>, String> {
        let entry = journal_entry(self.changes.get(&j.address).copied(), self.prior, j, rec.clone());
        let mut entries: Vec<JournalEntry> = entry.iter().cloned().collect();
        if !ledger.is_empty() {
            // After the runs: a replayed journal never holds a line for a run it lacks.
            entries.push(JournalEntry::SpendOpen { entries: ledger });
        }
        if !entries.is_empty() {
            self.recorder.record(entries).await?;
        }
        Ok(entry)
    }
}

/// Job nodes no run owns (found by refresh): terminated.
async fn release_orphan_job_nodes(plan: &Plan, providers: &ProviderSet, opts: &ApplyOptions) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
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
                missing: 0,
            }),
        }
    }
    outcomes
}

/// Stop one run for gpuplan's own reasons (see `Provider::preempt_job`).
async fn stop(providers: &ProviderSet, run: &JobRun) -> Result<JobStatus, String> {
    match providers.get(&run.provider) {
        Some(p) => p.preempt_job(&run.region, &run.id).await.map_err(|e| e.to_string()),
        None => Err(format!("provider `{}` is not configured", run.provider)),
    }
}

/// Runs whose node the plan removes: stopped before the node goes, so the job can
/// checkpoint; the plan already records them as preempted and requeues them.
async fn stop_interrupted(plan: &Plan, providers: &ProviderSet, opts: &ApplyOptions) -> Stopped {
    let mut stopped = Stopped::default();
    for j in plan.jobs.iter().filter(|j| !j.interrupted.is_empty()) {
        for i in &j.interrupted {
            let Some(run) = j.runs.iter().find(|r| r.id == i.run) else { continue };
            let result = stop(providers, run).await;
            let msg = match &result {
                Ok(_) => format!("run {} stopped: its node {} is removed ({}); requeued", run.id, i.node_id, i.why),
                Err(e) => format!("could not stop run {} before its node {} goes: {e}", run.id, i.node_id),
            };
            opts.progress.event(&j.address.to_string(), &msg);
            stopped.0.insert(run.id.clone(), result);
        }
    }
    stopped
}

/// Preemptions first: the runs stopped for a higher-priority job free their GPUs before
/// anything launches.
async fn stop_preempted(plan: &Plan, providers: &ProviderSet, opts: &ApplyOptions) -> Stopped {
    let mut stopped = Stopped::default();
    for j in plan.jobs.iter().filter(|j| j.placement == Placement::Preempt) {
        for run in j.runs.iter().filter(|r| j.preempt.contains(&r.id)) {
            let result = stop(providers, run).await;
            let for_job = j.preempted_for.as_ref().map_or_else(String::new, ToString::to_string);
            let msg = match &result {
                Ok(s) => match &s.message {
                    Some(m) => format!("run {} preempted for {for_job}: {m}", run.id),
                    None => format!("run {} preempted for {for_job}", run.id),
                },
                Err(e) => format!("could not preempt run {} for {for_job}: {e}", run.id),
            };
            opts.progress.event(&j.address.to_string(), &msg);
            stopped.0.insert(run.id.clone(), result);
        }
    }
    stopped
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
fn on_pool_node(l: &ReplicaLaunch) -> bool {
    l.request.shape.is_none() && l.request.kube.is_none() && l.request.node_id.is_empty()
}

/// One job's part of the apply: its stops recorded, its replicas launched, the nodes of
/// its ended runs terminated, its record journaled after each launch and at the end;
/// returns the record's last entry (if it changed) and the outcomes of what did not go
/// as planned.
async fn settle(
    steps: &Steps<'_>,
    j: &JobPlacement,
    stopped: &Stopped,
    slots: &mut BTreeMap<Address, Vec<Slot>>,
    now: &str,
) -> (Vec<JournalEntry>, Vec<Outcome>) {
    let (plan, providers, opts) = (steps.plan, steps.providers, steps.opts);
    let mut outcomes = Vec::new();
    let mut rec = JobRecord {
        first_seen: j.first_seen.clone().or_else(|| Some(now.to_string())),
        waiting_since: None,
        cancelled: prior_record(steps.prior, &j.address).is_some_and(|r| r.cancelled),
        runs: j.runs.clone(),
        incarnation: j.incarnation.clone(),
    };
    // The job's life is durable before its first launch: launch tokens and the Kubernetes
    // Job's run label derive from it, so a crash after a launch finds the same ones.
    let recorded = prior_record(steps.prior, &j.address).and_then(|r| r.incarnation.as_ref());
    if j.needs_launch()
        && recorded != rec.incarnation.as_ref()
        && let Err(e) = steps.record(j, &rec, Vec::new()).await
    {
        let why = format!("could not record the job before launching it: {e}");
        return (Vec::new(), vec![outcome(j, Status::Failed(why))]);
    }
    outcomes.extend(record_stops(j, stopped, &mut rec.runs));
    let mut launched = Launched::default();
    adopt_runs(plan, providers, opts, j, &mut rec.runs, now, &mut launched.ledger);
    for l in &j.launches {
        let pool = slots.get_mut(&j.pool).map(Vec::as_mut_slice).unwrap_or_default();
        let before = launched.runs.len();
        launch_replica(plan, providers, opts, j, l, pool, now, &mut launched).await;
        if launched.runs.len() == before {
            continue;
        }
        // Durable before the next launch: the run and what the record held.
        rec.runs.append(&mut launched.runs);
        if let Err(e) = steps.record(j, &rec, std::mem::take(&mut launched.ledger)).await {
            launched.failed.push(format!("replica {} launched, but its run could not be recorded: {e}", l.replica));
            break;
        }
    }
    let unreleased = release_ended_nodes(providers, opts, j, &mut rec.runs).await;
    if !unreleased.is_empty() {
        let what = format!("could not terminate the node(s) of ended runs: {}", unreleased.join("; "));
        outcomes.push(outcome(j, Status::Failed(what)));
    }
    let waits = j.placement == Placement::Waiting || !launched.short.is_empty() || !launched.failed.is_empty();
    if waits {
        rec.waiting_since = j.waiting_since.clone().or_else(|| Some(now.to_string()));
    }
    let status = if !launched.failed.is_empty() {
        Status::Failed(format!("job launch failed: {}", launched.failed.join("; ")))
    } else if !launched.short.is_empty() {
        Status::Partial(format!("stays queued: {}", launched.short.join("; ")))
    } else {
        Status::Done
    };
    if j.needs_launch() {
        // The job's progress line, held back by the executor until its launches ended.
        opts.progress.finished(&j.address.to_string(), &crate::apply::progress_message(&status));
    }
    let written = match steps.record(j, &rec, std::mem::take(&mut launched.ledger)).await {
        Ok(entry) => entry.into_iter().collect(),
        Err(e) => {
            outcomes.push(outcome(j, Status::Failed(format!("could not record the job's runs: {e}"))));
            Vec::new()
        }
    };
    if status != Status::Done {
        outcomes.push(outcome(j, status));
    }
    (written, outcomes)
}

/// Adopted runs (job nodes an apply launched but died before recording): each gets the
/// launch time and deadline a recorded run has, and a live one its spend-ledger line, as
/// its launch would have opened; both count from now, the adoption, since the cloud's
/// node listing carries no launch time (the gap is the dead apply's last moments).
fn adopt_runs(
    plan: &Plan,
    providers: &ProviderSet,
    opts: &ApplyOptions,
    j: &JobPlacement,
    runs: &mut [JobRun],
    now: &str,
    ledger: &mut Vec<(String, crate::state::model::SpendEntry)>,
) {
    for run in runs.iter_mut().filter(|r| j.adopted.contains(&r.id)) {
        opts.progress
            .event(&j.address.to_string(), &format!("run {} adopted: its node was launched but not recorded", run.id));
        run.launched_at.get_or_insert_with(|| now.to_string());
        if !run.is_active() || !run.has_own_node() {
            continue;
        }
        let Some(provider) = providers.get(&run.provider) else { continue };
        let line = ledger::open_for_pool(plan, j, &run.provider, None, run.capacity, provider.clock_ms());
        ledger.push((run.node_id.clone(), line));
    }
}

/// The runs gpuplan stopped, as they ended: a preempted run is requeued from its
/// checkpoint without spending `retries`, or, where the provider keeps it going (an
/// evicted pod's replica, queued again by its Kubernetes Job), stays as the provider
/// says. A run stopped because its node goes is already recorded as preempted by the
/// plan. A stop that failed is an outcome.
fn record_stops(j: &JobPlacement, stopped: &Stopped, runs: &mut [JobRun]) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for run in runs.iter_mut() {
        match stopped.0.get(&run.id) {
            Some(Ok(s)) if j.preempt.contains(&run.id) => {
                let for_job = j.preempted_for.as_ref().map(ToString::to_string);
                let by = for_job.as_deref().unwrap_or("a higher-priority job");
                if matches!(s.state, JobState::Queued | JobState::Running) {
                    run.status = s.state;
                    run.message = Some(s.message.clone().unwrap_or_else(|| format!("preempted for {by}")));
                } else {
                    run.status = JobState::Preempted;
                    run.message = Some(format!("preempted for {by}"));
                }
                run.preempted_for = for_job;
            }
            Some(Err(e)) if j.preempt.contains(&run.id) => {
                outcomes.push(outcome(j, Status::Failed(format!("could not preempt run {}: {e}", run.id))));
            }
            _ => {}
        }
    }
    outcomes
}

/// Launch one replica the plan admitted, and record its run in `out` (or why not).
#[allow(clippy::too_many_arguments)]
async fn launch_replica(
    plan: &Plan,
    providers: &ProviderSet,
    opts: &ApplyOptions,
    j: &JobPlacement,
    l: &ReplicaLaunch,
    pool: &mut [Slot],
    now: &str,
    out: &mut Launched,
) {
    let Some(provider) = providers.get(&l.provider) else {
        out.failed.push(format!("provider `{}` is not configured", l.provider));
        return;
    };
    let mut req = l.request.clone();
    let mut capacity = l.capacity;
    if on_pool_node(l) {
        let per_node = l.gpus_per_node;
        let pick = pick(pool, l.capacity, req.gpus, per_node)
            .map(|i| (i, l.capacity))
            .or_else(|| l.fallback.and_then(|f| pick(pool, f, req.gpus, per_node).map(|i| (i, f))));
        let Some((i, cap)) = pick else {
            out.short.push(format!("replica {} found no {} node with {} free GPUs", l.replica, l.capacity, req.gpus));
            return;
        };
        pool[i].used += req.gpus;
        req.node_id = pool[i].node.id.clone();
        capacity = cap;
    }
    let mut result = provider.launch_job(&req).await;
    // A node made for the job: no spot capacity left (a reclaimed spot job coming back,
    // say) moves to the pool's fallback capacity, as pool nodes do.
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
            if let Some(shape) = &req.shape {
                let start = status.started_ms.unwrap_or_else(|| provider.clock_ms());
                let line = ledger::open_for_pool(plan, j, &l.provider, shape.instance_types.first(), capacity, start);
                out.ledger.push((status.node_id.clone(), line));
            }
            out.runs.push(new_run(l, &req, capacity, status, now));
        }
        Err(e) => out.failed.push(format!("replica {} attempt {}: {e}", l.replica, req.attempt)),
    }
}

/// The state's record of a launched replica attempt.
fn new_run(
    l: &ReplicaLaunch,
    req: &crate::providers::LaunchJob,
    capacity: Capacity,
    s: JobStatus,
    now: &str,
) -> JobRun {
    JobRun {
        replica: l.replica,
        attempt: req.attempt,
        id: s.id,
        provider: l.provider.clone(),
        region: l.region.clone(),
        node_id: s.node_id,
        capacity,
        gpus: req.gpus,
        status: s.state,
        message: s.message,
        launched_at: Some(s.started_ms.map_or_else(|| now.to_string(), crate::model::job::rfc3339_ms)),
        finished_at: s.finished_ms.map(crate::model::job::rfc3339_ms),
        own_node: req.shape.is_some(),
        node_released: false,
        preempted_for: None,
        max_runtime_secs: req.max_runtime_secs,
    }
}

/// Ended runs on nodes made for them: terminate those nodes (a leak otherwise). Returns
/// the nodes that could not be terminated, with why.
async fn release_ended_nodes(
    providers: &ProviderSet,
    opts: &ApplyOptions,
    j: &JobPlacement,
    runs: &mut [JobRun],
) -> Vec<String> {
    let mut unreleased = Vec::new();
    for run in runs.iter_mut().filter(|r| r.node_to_release()) {
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
    unreleased
}

/// The journal entry of a job whose record changed: its configuration as the plan
/// applies it, with the new record.
fn journal_entry(
    change: Option<&ResourceChange>,
    prior: &State,
    j: &JobPlacement,
    rec: JobRecord,
) -> Option<JournalEntry> {
    let resource = match (change, prior.resources.get(&j.address.to_string())) {
        (Some(c), _) if c.action != Action::Delete => crate::apply::resource_state(c, None),
        (_, Some(r)) => r.clone(),
        // A job launched under `--target` of its pool: its configuration is not part of
        // this apply, its runs are. The next plan records the configuration.
        (_, None) => crate::jobs::adopt::bare_job(),
    };
    if prior_record(prior, &j.address) == Some(&rec) {
        return None;
    }
    let resource = crate::state::ResourceState { job: Some(Box::new(rec)), ..resource };
    Some(JournalEntry::PutResource { address: j.address.to_string(), resource })
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
    Outcome { address: j.address.clone(), action: Action::NoOp, status, created: 0, deleted: 0, missing: 0 }
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

/// Jobs removed from the spec (or destroyed): stop their active runs and terminate the
/// nodes of their ended ones. Runs before the node changes, so a job is cancelled rather
/// than killed with its node. A job any of whose runs could not be stopped (or nodes
/// terminated) is kept, with why: deleting its record would lose the only pointer to a
/// node that still runs and bills.
pub async fn cancel_removed(plan: &Plan, prior: &State, providers: &ProviderSet, opts: &ApplyOptions) -> Kept {
    let mut kept = Kept::default();
    for c in plan.changes.iter().filter(|c| c.action == Action::Delete && c.address.kind == crate::addr::Kind::Job) {
        let Some(rec) = prior_record(prior, &c.address) else { continue };
        let mut failed = Vec::new();
        // Nodes of ended runs go with the job.
        for run in rec.runs.iter().filter(|r| r.node_to_release()) {
            let result = match providers.get(&run.provider) {
                Some(p) => match p.release_job_node(&run.region, &run.id).await {
                    // Already gone: nothing left to terminate.
                    Err(e) if e.code == "JobNotFound" => Ok(()),
                    r => r.map_err(|e| e.to_string()),
                },
                None => Err(format!("provider `{}` is not configured", run.provider)),
            };
            match result {
                Ok(()) => opts
                    .progress
                    .event(&c.address.to_string(), &format!("node {} of ended run {} terminated", run.node_id, run.id)),
                Err(e) => failed.push(format!("could not terminate node {} of ended run {}: {e}", run.node_id, run.id)),
            }
        }
        for run in rec.runs.iter().filter(|r| r.is_active()) {
            let result = match providers.get(&run.provider) {
                Some(p) => p.cancel_job(&run.region, &run.id).await.map_err(|e| e.to_string()),
                None => Err(format!("provider `{}` is not configured", run.provider)),
            };
            let msg = match result {
                Ok(s) if s.state == JobState::Cancelled => format!("run {} cancelled", run.id),
                Ok(s) => format!("run {} already {}", run.id, crate::jobs::model::state_str(s.state)),
                Err(e) => {
                    failed.push(format!("could not cancel run {}: {e}", run.id));
                    continue;
                }
            };
            opts.progress.event(&c.address.to_string(), &msg);
        }
        if !failed.is_empty() {
            let why = format!(
                "{}; its record is kept in state (run `gpuplan destroy` or apply again to retry)",
                failed.join("; ")
            );
            kept.0.insert(c.address.clone(), why);
        }
    }
    kept
}
