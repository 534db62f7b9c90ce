//! The jobs phase of apply: a job run's life in one place for every backend (sim nodes,
//! cloud job VMs, Kubernetes Jobs), each step a function of its own.
//!
//! 1. [`before_nodes`], before the node changes: [`cancel_removed`] stops the runs of
//!    jobs removed from the spec, and [`stop_interrupted`] the runs whose node the plan
//!    removes, so a job is stopped (and requeued) rather than killed with its node.
//! 2. [`run`], after them:
//!    - [`orphans::release_orphan_job_nodes`]: job nodes no run owns are terminated;
//!    - [`stop_preempted`]: runs preempted for a higher-priority job free their GPUs;
//!    - [`assign::assign`]: the node of every sim launch, in one deterministic pass;
//!    - [`record_lives`]: the life (incarnation) of every job about to launch is made
//!      durable, in a few batched writes, before any launch (tokens derive from it);
//!    - per job, [`settle`], many jobs at once: record the stops ([`record_stops`]),
//!      launch the replicas the plan admitted ([`launch_replica`]), each launch journaled
//!      before that job's next step (a crash leaves no job node the state does not know,
//!      but the few the providers created before answering, which the next plan adopts:
//!      `jobs::adopt`; a sim launch retried under its token finds its job again),
//!      terminate the nodes of ended runs ([`release_ended_nodes`]); the job's final
//!      record (runs, age, queue time) is written with other jobs' in one batch.
//!
//! Jobs settle concurrently, as the executor runs changes: provider calls are bounded by
//! `--parallelism`, and the launch records of jobs in flight share the journal's fsyncs
//! (group commit), so 100,000 queued jobs cost a few thousand fsyncs, not 100,000.
//!
//! On `sim` a replica runs on a live node of its pool with room: the planned capacity
//! type first, then the fallback the plan allows (spot → on-demand when
//! `mix.fallback = "on_demand"`). For clouds the plan already carries either the warm
//! node the job runs on (through the cloud's run-command API; the node stays in its pool
//! when the job ends) or the node shape, and the provider creates a node for the job. Pools with a `kubernetes {}` block submit
//! their Job to the cluster (`providers/kube`), which places the replicas. Launch tokens
//! come from the plan, so a retried apply never launches a replica attempt twice.
//! A run gpuplan stops (preemption, its node removed) never spends a retry.
//!
//! Cancellation ([`crate::apply::Cancel`]): every step checks the token right before it
//! starts a provider call (a stop, a launch or run-command send, a node release), after
//! waiting for its `--parallelism` permit. Once it is set nothing new starts; what is in
//! flight finishes and is recorded as usual, and each job says which of its replicas did
//! not launch (its outcome is skipped, so the apply exits non-zero and names them).

mod assign;
mod calls;
mod ledger;
mod orphans;
mod rendezvous;

use std::collections::BTreeMap;

use futures::StreamExt;
use tokio::sync::Semaphore;

use crate::addr::Address;
use crate::apply::tally::Tally;
use crate::apply::{ApplyOptions, Outcome, ProviderSet, Recorder, Status};
use crate::model::{JobPlacement, JobRecord, JobRun, Placement, ReplicaLaunch};
use crate::plan::model::ResourceChange;
use crate::plan::{Action, Plan};
use crate::providers::{Capacity, JobState, JobStatus};
use crate::state::model::SpendEntry;
use crate::state::{JournalEntry, State};

use assign::Pick;
use calls::{cancel, launch, release, stop};

/// Records written together in one journal append (one fsync) when nothing waits on them:
/// the lives recorded before the launches, and the jobs' final records. Large enough that
/// 100,000 jobs take a few dozen appends, small enough that a batch stays a few MB.
const BATCH: usize = 2_048;

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
    /// Replicas not launched because the apply was cancelled before their launch began.
    skipped: Vec<u32>,
    /// Tokens of sends to warm nodes that failed in a way that may have reached the node
    /// (a lost answer): their intent stays in the record for the next plan to look up.
    unsure: Vec<String>,
    /// Ledger lines of the nodes made for the launched runs, by node id.
    ledger: Vec<(String, SpendEntry)>,
}

/// What settling one job left to write: its final record (and ledger lines), written in
/// a batch with other jobs', and the outcomes of what did not go as planned.
struct Settled {
    entries: Vec<JournalEntry>,
    outcomes: Vec<Outcome>,
    tally: Tally,
}

/// Before the node changes: stop what the plan's node removals would otherwise kill.
pub async fn before_nodes(plan: &Plan, prior: &State, providers: &ProviderSet, opts: &ApplyOptions) -> Stopped {
    let kept = cancel_removed(plan, prior, providers, opts).await;
    let mut stopped = stop_interrupted(plan, providers, opts).await;
    rendezvous::stop_regrouped(&plan.jobs, providers, opts, &mut stopped).await;
    stopped.1 = kept;
    stopped
}

/// After the node changes: launch, stop, release and record. Returns one outcome per job
/// that could not do what the plan said (failed launches as failures, replicas without
/// room as partial), and what was done.
pub async fn run(
    plan: &Plan,
    prior: &State,
    providers: &ProviderSet,
    recorder: &Recorder,
    opts: &ApplyOptions,
    mut stopped: Stopped,
) -> (Vec<Outcome>, Tally) {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut outcomes = orphans::release_orphan_job_nodes(plan, providers, opts).await;
    let mut tally =
        Tally { nodes_terminated: plan.orphan_job_nodes.len().saturating_sub(outcomes.len()), ..Tally::default() };
    stopped.0.extend(stop_preempted(plan, providers, opts).await.0);
    tally.requeued = super::tally::requeued(plan, |run| matches!(stopped.0.get(run), Some(Ok(_))));
    let picks = assign::assign(plan, providers, opts, &stopped).await;
    let changes = plan.changes.iter().map(|c| (&c.address, c)).collect();
    let permits = Semaphore::new(opts.parallelism.max(1));
    let steps = Steps { plan, prior, providers, recorder, opts, changes, permits };
    let unrecorded = record_lives(&steps, &now).await;
    // Jobs in flight at once: enough to keep every provider permit busy and let their
    // launch records share fsyncs, as the executor's tasks do.
    let width = (opts.parallelism.max(1) * 8).max(256);
    let mut settled = futures::stream::iter(plan.jobs.iter().zip(picks))
        .map(|(j, picks)| settle(&steps, j, &stopped, picks, &now, unrecorded.get(&j.address)))
        .buffered(width);
    let mut written = ledger::Written::new(prior);
    let mut batch = Batch::default();
    while let Some((j, s)) = settled.next().await {
        outcomes.extend(s.outcomes);
        tally += s.tally;
        written.note(&s.entries);
        batch.push(j, s.entries);
        if batch.entries.len() >= BATCH {
            outcomes.extend(batch.write(recorder).await);
        }
    }
    outcomes.extend(batch.write(recorder).await);
    // Ledger lines of the runs that ended (or whose job goes), after their records.
    let closed = ledger::close_ended(plan, prior, providers, &written, stopped.kept());
    if !closed.is_empty()
        && let Err(e) = recorder.record(closed).await
    {
        opts.progress.event("jobs", &format!("could not record job runs: {e}"));
    }
    (outcomes, tally)
}

/// Final job records waiting for one journal append, with their jobs (for the outcome of
/// a failed write).
#[derive(Default)]
struct Batch<'p> {
    entries: Vec<JournalEntry>,
    jobs: Vec<&'p JobPlacement>,
}

impl<'p> Batch<'p> {
    fn push(&mut self, j: &'p JobPlacement, entries: Vec<JournalEntry>) {
        if !entries.is_empty() {
            self.entries.extend(entries);
            self.jobs.push(j);
        }
    }

    /// Append what is waiting; a failed write fails every job in it.
    async fn write(&mut self, recorder: &Recorder) -> Vec<Outcome> {
        let jobs = std::mem::take(&mut self.jobs);
        let entries = std::mem::take(&mut self.entries);
        if entries.is_empty() {
            return Vec::new();
        }
        match recorder.record(entries).await {
            Ok(()) => Vec::new(),
            Err(e) => {
                let why = format!("could not record the job's runs: {e}");
                jobs.into_iter().map(|j| outcome(j, Status::Failed(why.clone()))).collect()
            }
        }
    }
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
    /// Provider calls in flight across the jobs settling at once (`--parallelism`).
    permits: Semaphore,
}

impl Steps<'_> {
    /// The job's record entry as it stands (`None` when the prior state has it already).
    fn entry(&self, j: &JobPlacement, rec: &JobRecord) -> Option<JournalEntry> {
        journal_entry(self.changes.get(&j.address).copied(), self.prior, j, rec.clone())
    }

    /// The job's entries: its record as it stands, with `ledger` lines after it.
    fn entries(&self, j: &JobPlacement, rec: &JobRecord, ledger: Vec<(String, SpendEntry)>) -> Vec<JournalEntry> {
        let mut entries: Vec<JournalEntry> = self.entry(j, rec).into_iter().collect();
        if !ledger.is_empty() {
            // After the runs: a replayed journal never holds a line for a run it lacks.
            entries.push(JournalEntry::SpendOpen { entries: ledger });
        }
        entries
    }

    /// Make the job's record durable now (when it differs from the prior state's), with
    /// `ledger` lines after it: a crash after this leaves the runs launched so far in
    /// state, never a node that the next plan would take for an orphan.
    async fn record(&self, j: &JobPlacement, rec: &JobRecord, ledger: Vec<(String, SpendEntry)>) -> Result<(), String> {
        let entries = self.entries(j, rec, ledger);
        if entries.is_empty() {
            return Ok(());
        }
        self.recorder.record(entries).await
    }

    /// The job's record before this apply touches its runs.
    fn first_record(&self, j: &JobPlacement, now: &str) -> JobRecord {
        JobRecord {
            first_seen: j.first_seen.clone().or_else(|| Some(now.to_string())),
            waiting_since: None,
            cancelled: prior_record(self.prior, &j.address).is_some_and(|r| r.cancelled),
            runs: j.runs.clone(),
            incarnation: j.incarnation.clone(),
            // A refreshed plan asked the clouds about every send in flight (what ran is
            // among the runs, the rest launch again); without a refresh they stay.
            sending: match (self.plan.refreshed, prior_record(self.prior, &j.address)) {
                (false, Some(r)) => r.sending.clone(),
                _ => Vec::new(),
            },
        }
    }
}

/// The life of every job about to launch whose incarnation the state lacks, made durable
/// before any launch (launch tokens and the Kubernetes Job's run label derive from it, so
/// a crash after a launch finds the same ones), in batches. Returns the jobs whose life
/// could not be recorded, with why: they launch nothing.
async fn record_lives(steps: &Steps<'_>, now: &str) -> BTreeMap<Address, String> {
    let mut failed = BTreeMap::new();
    let new_life = steps.plan.jobs.iter().filter(|j| {
        let recorded = prior_record(steps.prior, &j.address).and_then(|r| r.incarnation.as_ref());
        j.needs_launch() && recorded != j.incarnation.as_ref()
    });
    let lives: Vec<&JobPlacement> = new_life.collect();
    for chunk in lives.chunks(BATCH) {
        let entries: Vec<JournalEntry> =
            chunk.iter().filter_map(|j| steps.entry(j, &steps.first_record(j, now))).collect();
        if entries.is_empty() {
            continue;
        }
        if let Err(e) = steps.recorder.record(entries).await {
            let why = format!("could not record the job before launching it: {e}");
            failed.extend(chunk.iter().map(|j| (j.address.clone(), why.clone())));
        }
    }
    failed
}

/// Runs whose node the plan removes: stopped before the node goes, so the job can
/// checkpoint; the plan already records them as preempted and requeues them.
async fn stop_interrupted(plan: &Plan, providers: &ProviderSet, opts: &ApplyOptions) -> Stopped {
    let mut stopped = Stopped::default();
    for j in plan.jobs.iter().filter(|j| !j.interrupted.is_empty()) {
        for i in &j.interrupted {
            let Some(run) = j.runs.iter().find(|r| r.id == i.run) else { continue };
            if opts.cancel.is_cancelled() {
                // Not stopped: `settle` records the run as it was (it keeps running).
                continue;
            }
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
            if opts.cancel.is_cancelled() {
                // Not preempted: the job it made room for launches nothing either.
                continue;
            }
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

/// One job's part of the apply: its stops recorded, its replicas launched on the nodes
/// `picks` gives them (one per launch), the nodes of its ended runs terminated, its
/// record journaled after each launch; returns its final record's entries (if it
/// changed), for the caller to write in a batch, and the outcomes of what did not go as
/// planned. `unrecorded`: why the job's life could not be recorded, so it launches nothing.
async fn settle<'j>(
    steps: &Steps<'_>,
    j: &'j JobPlacement,
    stopped: &Stopped,
    picks: Vec<Pick>,
    now: &str,
    unrecorded: Option<&String>,
) -> (&'j JobPlacement, Settled) {
    if let Some(why) = unrecorded {
        let outcomes = vec![outcome(j, Status::Failed(why.clone()))];
        return (j, Settled { entries: Vec::new(), outcomes, tally: Tally::default() });
    }
    let (plan, providers, opts) = (steps.plan, steps.providers, steps.opts);
    let mut rec = steps.first_record(j, now);
    restore_unstopped(j, steps.prior, stopped, &mut rec.runs);
    let mut outcomes = record_stops(j, stopped, &mut rec.runs);
    let mut launched = Launched::default();
    let mut tally = Tally::default();
    adopt_runs(plan, providers, opts, j, &mut rec.runs, now, &mut launched.ledger);
    for (l, pick) in j.launches.iter().zip(picks) {
        if opts.cancel.is_cancelled() {
            launched.skipped.push(l.replica);
            continue;
        }
        let master = match rendezvous::master(j, l, &rec.runs) {
            Ok(m) => m,
            Err(why) => {
                launched.short.push(why);
                continue;
            }
        };
        let before = launched.runs.len();
        if is_send(l) {
            // Durable before the send: a crash after it leaves the intent, which the next
            // plan looks up on the cloud instead of sending the job twice.
            rec.sending.push(sending(l));
            if let Err(e) = steps.record(j, &rec, Vec::new()).await {
                rec.sending.pop();
                launched.failed.push(format!("replica {}: not sent, its intent could not be recorded: {e}", l.replica));
                break;
            }
        }
        launch_replica(steps, j, l, pick, master.as_deref(), now, &mut launched).await;
        if is_send(l) && !launched.unsure.contains(&l.request.token) {
            rec.sending.retain(|s| s.token != l.request.token);
        }
        if launched.runs.len() == before {
            continue;
        }
        tally.launched = 1;
        tally.nodes_launched += usize::from(l.request.shape.is_some());
        // Durable before the job's next launch: the run and what the record held.
        rec.runs.append(&mut launched.runs);
        if let Err(e) = steps.record(j, &rec, std::mem::take(&mut launched.ledger)).await {
            launched.failed.push(format!("replica {} launched, but its run could not be recorded: {e}", l.replica));
            break;
        }
    }
    let (unreleased, unstarted, released) = release_ended_nodes(steps, j, &mut rec.runs).await;
    tally.nodes_terminated += released;
    // A requeued job is counted as requeued (`tally::requeued`), not as launched again.
    if !j.interrupted.is_empty() || !j.preempt.is_empty() {
        tally.launched = 0;
    }
    if !unreleased.is_empty() {
        let what = format!("could not terminate the nodes of ended runs: {}", unreleased.join("; "));
        outcomes.push(outcome(j, Status::Failed(what)));
    }
    if !unstarted.is_empty() {
        let what = format!("nodes of ended runs not terminated: {}: {}", unstarted.join(", "), opts.cancel.reason());
        outcomes.push(outcome(j, Status::Skipped(what)));
    }
    let waits = j.placement == Placement::Waiting
        || !launched.short.is_empty()
        || !launched.failed.is_empty()
        || !launched.skipped.is_empty();
    if waits {
        rec.waiting_since = j.waiting_since.clone().or_else(|| Some(now.to_string()));
    }
    let status = if !launched.failed.is_empty() {
        Status::Failed(format!("job launch failed: {}", launched.failed.join("; ")))
    } else if !launched.skipped.is_empty() {
        Status::Skipped(format!("{} not launched: {}", replicas(&launched.skipped), opts.cancel.reason()))
    } else if !launched.short.is_empty() {
        Status::Partial(format!("stays queued: {}", launched.short.join("; ")))
    } else {
        Status::Done
    };
    if j.needs_launch() {
        // The job's progress line, held back by the executor until its launches ended.
        opts.progress.finished(&j.address.to_string(), &crate::apply::progress_message(&status));
    }
    // Nothing waits on the final record: what it adds (queue time, released nodes, stops)
    // is found again by the next refresh if a crash loses it, so it joins a batch.
    let entries = steps.entries(j, &rec, std::mem::take(&mut launched.ledger));
    if status != Status::Done {
        outcomes.push(outcome(j, status));
    }
    (j, Settled { entries, outcomes, tally })
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

/// Runs whose node the plan removes but that were not stopped (the apply was cancelled
/// first): the plan already wrote them as preempted, but they still run on a node that
/// stays, so they are recorded as the state had them. Recording them as preempted would
/// launch their replica again next time, beside the run that never stopped.
fn restore_unstopped(j: &JobPlacement, prior: &State, stopped: &Stopped, runs: &mut [JobRun]) {
    let Some(before) = prior_record(prior, &j.address) else { return };
    for i in j.interrupted.iter().filter(|i| !stopped.0.contains_key(&i.run)) {
        let (Some(run), Some(was)) =
            (runs.iter_mut().find(|r| r.id == i.run), before.runs.iter().find(|r| r.id == i.run))
        else {
            continue;
        };
        run.clone_from(was);
    }
}

/// `replica 3` or `replicas 3, 4, 7`.
fn replicas(list: &[u32]) -> String {
    let ids: Vec<String> = list.iter().map(u32::to_string).collect();
    if ids.len() == 1 { format!("replica {}", ids[0]) } else { format!("replicas {}", ids.join(", ")) }
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

/// Launch one replica the plan admitted, on the node `pick` chose for it, and record its
/// run in `out` (or why not).
async fn launch_replica(
    steps: &Steps<'_>,
    j: &JobPlacement,
    l: &ReplicaLaunch,
    pick: Pick,
    master: Option<&str>,
    now: &str,
    out: &mut Launched,
) {
    let (plan, opts) = (steps.plan, steps.opts);
    let Some(provider) = steps.providers.get(&l.provider) else {
        out.failed.push(format!("provider `{}` is not configured", l.provider));
        return;
    };
    let mut req = l.request.clone();
    if let Some(addr) = master {
        crate::providers::job_env::with_master(&mut req.env, addr);
    }
    let mut capacity = l.capacity;
    match pick {
        Pick::AsPlanned => {}
        Pick::Node { node_id, capacity: cap } => {
            req.node_id = node_id;
            capacity = cap;
        }
        Pick::NoRoom => {
            out.short.push(format!("replica {} found no {} node with {} free GPUs", l.replica, l.capacity, req.gpus));
            return;
        }
    }
    // Held for the call only; the semaphore is never closed, so `acquire` cannot fail.
    let _permit = steps.permits.acquire().await;
    // Checked again once the permit is held: the apply may have been cancelled while
    // this launch waited for one.
    if opts.cancel.is_cancelled() {
        out.skipped.push(l.replica);
        return;
    }
    let mut result = launch(provider.as_ref(), &req).await;
    // A node made for the job: no spot capacity left (a reclaimed spot job coming back,
    // say) moves to the pool's fallback capacity, as pool nodes do.
    if let (Err(e), Some(fallback), Some(shape)) = (&result, l.fallback, req.shape.as_mut())
        && e.class == crate::providers::ErrorClass::OutOfCapacity
        && !opts.cancel.is_cancelled()
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
        result = launch(provider.as_ref(), &req).await;
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
        Err(e) => {
            // A network error or a lost answer may come after the cloud ran the send.
            if is_send(l) && e.class == crate::providers::ErrorClass::Retryable {
                out.unsure.push(l.request.token.clone());
            }
            out.failed.push(format!("replica {} attempt {}: {e}", l.replica, req.attempt))
        }
    }
}

/// A launch that sends the job to a warm node of a cloud VM pool through its run-command
/// API (the plan chose the node), as opposed to a node made for it, a cluster's pod, or a
/// sim node picked at apply.
fn is_send(l: &ReplicaLaunch) -> bool {
    l.request.shape.is_none() && l.request.kube.is_none() && !l.request.node_id.is_empty()
}

/// The intent to send `l`, recorded before the send.
fn sending(l: &ReplicaLaunch) -> crate::model::Sending {
    crate::model::Sending {
        replica: l.replica,
        attempt: l.request.attempt,
        token: l.request.token.clone(),
        provider: l.provider.clone(),
        region: l.region.clone(),
        node_id: l.request.node_id.clone(),
        capacity: l.capacity,
        gpus: l.request.gpus,
        max_runtime_secs: l.request.max_runtime_secs,
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
        address: s.address,
    }
}

/// Ended runs on nodes made for them: terminate those nodes (a leak otherwise). Returns
/// the nodes that could not be terminated, with why, those not tried because the apply
/// was cancelled (the next apply terminates them), and how many were terminated.
async fn release_ended_nodes(
    steps: &Steps<'_>,
    j: &JobPlacement,
    runs: &mut [JobRun],
) -> (Vec<String>, Vec<String>, usize) {
    let (providers, opts) = (steps.providers, steps.opts);
    let mut unreleased = Vec::new();
    let mut unstarted = Vec::new();
    let mut terminated = 0;
    for run in runs.iter_mut().filter(|r| r.node_to_release()) {
        if opts.cancel.is_cancelled() {
            unstarted.push(run.node_id.clone());
            continue;
        }
        let Some(provider) = providers.get(&run.provider) else {
            unreleased.push(format!("node {}: provider `{}` is not configured", run.node_id, run.provider));
            continue;
        };
        let released = {
            let _permit = steps.permits.acquire().await;
            if opts.cancel.is_cancelled() {
                unstarted.push(run.node_id.clone());
                continue;
            }
            release(provider.as_ref(), &run.region, &run.id).await
        };
        match released {
            Ok(()) => {
                run.node_released = true;
                terminated += 1;
                opts.progress
                    .event(&j.address.to_string(), &format!("node {} terminated (its run ended)", run.node_id));
            }
            // Already gone (the reason the run ended): nothing left to terminate.
            Err(e) if e.code == "JobNotFound" => run.node_released = true,
            Err(e) => unreleased.push(format!("node {}: {e}", run.node_id)),
        }
    }
    (unreleased, unstarted, terminated)
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
    noop(j.address.clone(), status)
}

fn noop(address: Address, status: Status) -> Outcome {
    Outcome { address, action: Action::NoOp, status, created: 0, deleted: 0, missing: 0 }
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
        if opts.cancel.is_cancelled() {
            // Its runs were not stopped, so its record stays (the executor skips it too).
            kept.0.insert(c.address.clone(), opts.cancel.reason());
            continue;
        }
        let mut failed = Vec::new();
        // Nodes of ended runs go with the job.
        for run in rec.runs.iter().filter(|r| r.node_to_release()) {
            let result = match providers.get(&run.provider) {
                Some(p) => match release(p.as_ref(), &run.region, &run.id).await {
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
                Some(p) => cancel(p.as_ref(), &run.region, &run.id).await.map_err(|e| e.to_string()),
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
