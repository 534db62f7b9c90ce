//! Scheduled reconciliation: one [`pass`] is refresh → drift → autoscale → plan → policies
//! → apply what policy allows, then a [`Pass`] report. `gpuplan reconcile` runs one pass
//! (`--once`) or a loop of them (`--interval`); `metrics/` exposes the last one.
//!
//! A pass holds the state lock (and the embedded cloud) only while it acts and releases
//! both before returning, so two reconcilers never act at once and other commands run
//! between passes. Every step is idempotent: a pass that fails half way is finished by the
//! next one. The time comes from a [`Clock`] over tokio's clock, so tests drive passes
//! on a paused clock.
//!
//! It plans through the engine's one pipeline (`engine::gather`, then `engine::compose`),
//! applies with `engine::run::apply`, and uses the pure autoscaler (`autoscale::decide`);
//! its own logic is gathering signals ([`signals`]) and deciding what a pass may apply.
//! The loop around passes (triggers, jitter, election, what to do after an error) is
//! [`runner`].

pub mod alerts;
pub mod leader;
pub mod report;
pub mod runner;
pub mod signals;
pub mod standing;
pub mod triggers;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use crate::addr::Address;
use crate::apply::{ApplyOptions, ApplyReport, Status};
use crate::autoscale::Waiting;
use crate::engine::providers::ProviderSetupError;
use crate::engine::run::{self, RunError};
use crate::engine::{self, Hints, PlanRequest, Workspace};
use crate::plan::Plan;
use crate::providers::Node;
use crate::spec::Spec;
use crate::state::{State, StateError};

pub use signals::PoolDecision;

/// Wall-clock time that follows tokio's clock: real time in production, and time that
/// only moves with `tokio::time::advance` under `tokio::time::pause` in tests.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    wall: SystemTime,
    base: tokio::time::Instant,
}

impl Clock {
    /// Must be called inside a tokio runtime.
    pub fn start() -> Clock {
        Clock { wall: SystemTime::now(), base: tokio::time::Instant::now() }
    }
    pub fn now(&self) -> SystemTime {
        self.wall + self.base.elapsed()
    }
}

/// Demand queued outside the spec's jobs (the spec's own waiting jobs are always counted,
/// see [`jobs_waiting`]); tests inject demand through it.
pub trait Queue: Send + Sync {
    /// Replicas waiting for GPUs now, with the pool each targets.
    fn waiting(&self, spec: &Spec, state: &State, now: SystemTime) -> Vec<Waiting>;
}

/// No demand beyond the spec's jobs.
pub struct NoQueue;

impl Queue for NoQueue {
    fn waiting(&self, _: &Spec, _: &State, _: SystemTime) -> Vec<Waiting> {
        Vec::new()
    }
}

impl<F: Fn(&Spec, &State, SystemTime) -> Vec<Waiting> + Send + Sync> Queue for F {
    fn waiting(&self, spec: &Spec, state: &State, now: SystemTime) -> Vec<Waiting> {
        self(spec, state, now)
    }
}

pub struct Options {
    /// Policies, overrides, targets and environment; refresh is always on.
    pub plan: PlanRequest,
    /// Plan and report, apply nothing.
    pub dry_run: bool,
    /// Refuse to apply a plan that terminates more than this many nodes.
    pub max_destroy: Option<u32>,
    pub apply: ApplyOptions,
}

/// How a pass ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The fleet matches the spec and the autoscaler: nothing to do.
    NoChanges,
    /// Changes were applied, all of them.
    Applied,
    /// `--dry-run`: changes were planned, not applied.
    DryRun,
    /// A policy (hard, or soft without override) denied the plan, which had changes;
    /// nothing applied. A pass without changes is never denied (standing violations).
    Denied,
    /// The plan would terminate `nodes` nodes, more than `--max-destroy`; nothing applied.
    MaxDestroy { nodes: u32, limit: u32 },
    /// The plan has errors (e.g. `prevent_destroy`); nothing applied.
    PlanErrors,
    /// Some changes failed or were skipped.
    ApplyFailed,
    /// Ctrl-C / SIGTERM during apply: in-flight work finished and was saved.
    Interrupted,
}

impl Outcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::NoChanges => "no-changes",
            Outcome::Applied => "applied",
            Outcome::DryRun => "dry-run",
            Outcome::Denied => "policy-denied",
            Outcome::MaxDestroy { .. } => "max-destroy",
            Outcome::PlanErrors => "plan-errors",
            Outcome::ApplyFailed => "apply-failed",
            Outcome::Interrupted => "interrupted",
        }
    }
    /// Whether the pass did what it should (the "last success" of the metrics).
    pub fn succeeded(&self) -> bool {
        matches!(self, Outcome::NoChanges | Outcome::Applied | Outcome::DryRun)
    }
}

/// What one pass saw, decided and did.
pub struct Pass {
    pub at: SystemTime,
    pub outcome: Outcome,
    /// The plan the pass acted on (or would have), shared with the apply rather than copied.
    pub plan: Arc<Plan>,
    /// The nodes the plan terminates ([`nodes_destroyed`], job nodes included).
    pub nodes_destroyed: u32,
    pub decisions: Vec<PoolDecision>,
    pub apply: Option<ApplyReport>,
    /// The fleet after the pass, for metrics: what refresh saw, or after an apply the live
    /// nodes the state recorded plus the reclaimed ones refresh saw.
    pub observed: Vec<Node>,
    /// Queued replicas per pool.
    pub queued: BTreeMap<Address, usize>,
    /// Node utilization per autoscaled pool, where known.
    pub utilization: BTreeMap<Address, f64>,
    /// Budget thresholds crossed in this pass and what their hooks said.
    pub alerts: Vec<alerts::Alert>,
    /// Standing policy violations reported for the first time in this pass.
    pub standing: Vec<standing::StandingAlert>,
    /// Month-to-date spend from the ledger after the pass.
    pub spend: crate::state::spend::SpendReport,
    /// The lock this pass took over: an expired remote lock, or a dead process's file lock.
    pub lock_taken_over: Option<crate::state::LockInfo>,
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ReconcileError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Providers(#[from] ProviderSetupError),
}

impl ReconcileError {
    /// Another run holds the state lock: the pass did not start (the loop skips a round).
    pub fn is_locked(&self) -> bool {
        matches!(self, ReconcileError::Run(RunError::State(StateError::Locked { .. })))
    }

    /// Who holds the lock, when [`is_locked`](Self::is_locked) and the holder is known.
    pub fn lock_holder(&self) -> Option<&crate::state::lock::LockInfo> {
        match self {
            ReconcileError::Run(RunError::State(StateError::Locked { holder, .. })) => holder.as_ref(),
            _ => None,
        }
    }
}

impl From<StateError> for ReconcileError {
    fn from(e: StateError) -> Self {
        ReconcileError::Run(RunError::State(e))
    }
}

/// Nodes a plan terminates: surplus, replaced, removed pools, orphans, orphan job nodes,
/// and the nodes made for the active runs of the jobs it removes (`state` records
/// those). The nodes of runs that already ended are not counted: releasing them is
/// routine cleanup, not a destruction of work.
pub fn nodes_destroyed(plan: &Plan, state: &crate::state::State) -> u32 {
    let pools: usize = plan.changes.iter().filter_map(|c| c.pool.as_ref()).map(|p| p.deletes.len()).sum();
    let removed_jobs = plan
        .changes
        .iter()
        .filter(|c| c.action == crate::plan::Action::Delete && c.address.kind == crate::addr::Kind::Job)
        .filter_map(|c| crate::jobs::place::record(state, &c.address))
        .flat_map(|r| &r.runs)
        .filter(|r| r.is_active() && r.has_own_node() && !r.provider.starts_with(crate::providers::kube::PREFIX))
        .count();
    let n = pools + plan.orphan_job_nodes.len() + removed_jobs;
    n.min(u32::MAX as usize) as u32
}

/// The replicas a plan's admission left waiting for capacity or priority (more nodes
/// would help; quota waits would not), one [`Waiting`] per replica, since when the state
/// recorded the wait (or `now` when this plan is the first to see it).
pub fn jobs_waiting(plan: &Plan, now: SystemTime) -> Vec<Waiting> {
    let mut out = Vec::new();
    for (pool, jobs) in crate::jobs::queue::waiting(plan) {
        for w in jobs.into_iter().filter(|w| w.reason != Some(crate::model::WaitCode::Quota)) {
            let since = w.since.as_deref().and_then(|s| humantime::parse_rfc3339_weak(s).ok()).unwrap_or(now);
            for _ in 0..w.replicas {
                out.push(Waiting { job: w.job.clone(), pool: pool.clone(), gpus: w.gpus_per_replica, since });
            }
        }
    }
    out
}

/// One reconciliation pass. Holds the state lock from the start to the end of the pass.
/// It plans as every command does, through one [`engine::gather`] and [`engine::compose`]
/// (twice: the plan the autoscaler reads, then with its steps).
pub async fn pass(
    ws: &Workspace,
    spec: &Spec,
    opts: &Options,
    queue: &dyn Queue,
    clock: &Clock,
) -> Result<Pass, ReconcileError> {
    let mut session = engine::open_session(ws, "reconcile")?;
    let (providers, sim) = engine::providers::build_with_sim(ws, spec, &session.state, None)?;
    let req = PlanRequest { refresh: true, destroy: false, ..opts.plan.clone() };
    // Floating pools move by price: the clouds' current prices, the sim's trace; a pass
    // prices nothing else live.
    let hints = Hints { floating_prices_only: true, ..Hints::default() };
    let mut obs = engine::gather(spec, &session.state, &providers, &req, &hints).await?;
    let now = clock.now();
    let baseline = engine::compose(spec, &session.state, &obs, &req)?;
    let mut waiting = jobs_waiting(&baseline, now);
    waiting.extend(queue.waiting(spec, &session.state, now));
    let usage = sim.as_ref().map(|c| c.usage(signals::unix_ms(now)));
    let ctx = signals::Context {
        spec,
        state: &session.state,
        baseline: &baseline,
        observed: obs.nodes.as_deref().unwrap_or_default(),
        usage: usage.as_deref(),
        waiting: &waiting,
        now,
    };
    let (actions, mut decisions, utilization) = signals::autoscale(&ctx);
    let queued = signals::queued_per_pool(spec, &waiting);
    let mut plan = baseline;
    if !actions.is_empty() {
        let scaled = engine::compose(spec, &session.state, &obs, &PlanRequest { autoscale: actions, ..req })?;
        if (run::denied(&scaled) || !scaled.errors.is_empty()) && !run::denied(&plan) && plan.errors.is_empty() {
            // Apply what policy allows: the fleet's own drift fixes go ahead without the step.
            for d in decisions.iter_mut().filter(|d| d.action != crate::autoscale::Direction::Hold) {
                d.hold(format!("{}, but the plan with this step is denied by policy", d.reason));
            }
        } else {
            plan = scaled;
        }
    }
    run::digest(&mut plan, spec);
    let destroying = nodes_destroyed(&plan, &session.state);
    let plan = Arc::new(plan);
    let (outcome, report) = act(&mut session, &plan, &providers, opts, destroying).await?;
    mark_applied(&mut decisions, &outcome, report.as_ref());
    let observed = fleet_after(obs.nodes.take().unwrap_or_default(), &session.state, report.is_some());
    let (spend, alerts, standing) = notify(spec, &mut session, &providers, &plan, opts.dry_run, now).await?;
    let lock_taken_over = session.lock.stale.clone();
    // The lock and the embedded cloud are released here, before the caller sleeps.
    drop(session);
    drop(providers);
    drop(sim);
    Ok(Pass {
        at: now,
        outcome,
        plan,
        nodes_destroyed: destroying,
        decisions,
        apply: report,
        observed,
        queued,
        utilization,
        alerts,
        standing,
        spend,
        lock_taken_over,
    })
}

/// What a pass does with its plan: nothing when it has errors, is denied, destroys more
/// than `--max-destroy` allows, has no work or is a dry run; otherwise apply it.
async fn act(
    session: &mut engine::Session,
    plan: &Arc<Plan>,
    providers: &crate::apply::ProviderSet,
    opts: &Options,
    destroying: u32,
) -> Result<(Outcome, Option<ApplyReport>), RunError> {
    let outcome = if !plan.errors.is_empty() {
        Outcome::PlanErrors
    } else if run::denied(plan) {
        Outcome::Denied
    } else if let Some(limit) = opts.max_destroy.filter(|m| destroying > *m) {
        Outcome::MaxDestroy { nodes: destroying, limit }
    } else if !plan.has_work() {
        Outcome::NoChanges
    } else if opts.dry_run {
        Outcome::DryRun
    } else {
        let r = run::apply(session, plan.clone(), providers, &opts.apply).await?;
        let outcome = if r.succeeded() {
            Outcome::Applied
        } else if r.cancelled {
            Outcome::Interrupted
        } else {
            Outcome::ApplyFailed
        };
        return Ok((outcome, Some(r)));
    };
    Ok((outcome, None))
}

/// An autoscaler decision counts as applied once its pool's change went through.
fn mark_applied(decisions: &mut [PoolDecision], outcome: &Outcome, report: Option<&ApplyReport>) {
    if !matches!(outcome, Outcome::Applied | Outcome::NoChanges) {
        for d in decisions.iter_mut().filter(|d| d.action != crate::autoscale::Direction::Hold) {
            d.applied = false;
        }
    } else if let Some(r) = report {
        for d in decisions.iter_mut() {
            d.applied &=
                r.outcomes.iter().any(|o| o.address == d.pool && matches!(o.status, Status::Done | Status::Partial(_)));
        }
    }
}

/// The fleet after the pass: after an apply the state holds the live nodes; reclaimed
/// ones stay as refresh saw them.
fn fleet_after(observed: Vec<Node>, state: &State, applied: bool) -> Vec<Node> {
    if !applied {
        return observed;
    }
    let mut fleet: Vec<Node> = observed.into_iter().filter(|n| !n.is_live()).collect();
    fleet.extend(state.resources.values().flat_map(|r| r.nodes.iter().filter(|n| n.is_live()).cloned()));
    fleet
}

/// Budget alerts, from the ledger the apply just updated, and the plan's standing policy
/// violations ([`standing`]); not on a dry run (no side effects). What was delivered is
/// recorded in the state so that nothing is posted twice.
async fn notify(
    spec: &Spec,
    session: &mut engine::Session,
    providers: &crate::apply::ProviderSet,
    plan: &Plan,
    dry_run: bool,
    now: SystemTime,
) -> Result<(crate::state::spend::SpendReport, Vec<alerts::Alert>, Vec<standing::StandingAlert>), RunError> {
    let spend = alerts::spend_report(spec, &session.state, providers);
    if dry_run {
        return Ok((spend, Vec::new(), Vec::new()));
    }
    let sent = alerts::deliver(spec, &mut session.state, &spend).await;
    let (standing, changed) = standing::report(spec, &mut session.state, plan, now).await;
    if changed || sent.iter().any(|a| a.delivered > 0) {
        session.backend.write(&session.lock, &mut session.state)?;
    }
    Ok((spend, sent, standing))
}
