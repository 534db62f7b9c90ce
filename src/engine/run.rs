//! The operations commands run: [`plan`] (one [`gather`] then one [`compose`], the
//! pipeline every command and `reconcile` share) and [`apply`] (execute + compact).

use std::sync::Arc;

use crate::apply::{self, ApplyOptions, ApplyReport, ProviderSet, Recorder, Status};
use crate::engine::compose::{self, compose};
use crate::engine::gather::gather;
use crate::engine::{Session, history};
use crate::plan::Plan;
use crate::plan::diff;
use crate::plan::model::Evidence;
use crate::policy;
use crate::spec::Spec;
use crate::state::{JournalEntry, ScaleRecord};

// Where commands have always found them.
pub use crate::engine::error::RunError;
pub use crate::engine::intent::{Hints, PlanRequest};

/// Gather, then compose, as `req` asks; nothing is written. With the month's spend (runs
/// this plan observed included) and the spec's digest, for a plan to show or save.
pub async fn plan(
    spec: &Spec,
    session: &Session,
    providers: &ProviderSet,
    req: &PlanRequest,
) -> Result<Plan, RunError> {
    plan_with(spec, session, providers, req, &Hints::default()).await
}

/// [`plan`], with what the caller does with the plan ([`Hints`]).
pub async fn plan_with(
    spec: &Spec,
    session: &Session,
    providers: &ProviderSet,
    req: &PlanRequest,
    hints: &Hints,
) -> Result<Plan, RunError> {
    let mut obs = gather(spec, &session.state, providers, req, hints).await?;
    let mut plan = compose(spec, &session.state, &obs, req)?;
    if req.refresh && !req.destroy && !session.state.spend.is_empty() {
        // Again with the runs this plan observed: jobs that ended since the last apply.
        plan.spend = match obs.spend.take() {
            Some(spent) if plan.jobs.is_empty() => Some(spent),
            _ => Some(compose::spend(spec, &session.state, &obs, &plan.jobs)),
        };
    }
    if !hints.shown_only {
        digest(&mut plan, spec);
    }
    Ok(plan)
}

/// The spec's digest into a plan that is kept (saved, printed as JSON or applied later):
/// what applying a saved plan compares ([`check_fresh`]).
pub fn digest(plan: &mut Plan, spec: &Spec) {
    plan.spec_digest = diff::spec_digest(spec);
}

/// The policy results stored in a plan.
pub fn policy_results(plan: &Plan) -> &[policy::PolicyResult] {
    &plan.policies
}

/// Does a plan's policy verdict forbid applying it? Never for a plan without changes
/// ([`Plan::denied`]).
pub fn denied(plan: &Plan) -> bool {
    plan.denied()
}

/// A plan saved before there was any state (serial 0) was made against an empty state of
/// its own new lineage, which its tags and tokens carry. Applied where there is still no
/// state, the state begins with that lineage; anywhere else it stays stale.
pub fn begin_state_of(session: &mut Session, plan: &Plan) {
    if session.is_new() && plan.serial == 0 {
        session.state.lineage = plan.lineage.clone();
    }
}

/// Refuse a saved plan whose state or spec moved on since it was made.
pub fn check_fresh(plan: &Plan, session: &Session, spec: Option<&Spec>) -> Result<(), RunError> {
    check_fresh_digest(plan, session, || spec.map(diff::spec_digest), &[])
}

/// [`check_fresh`] against the spec's digest (`diff::spec_digest`), asked of `digest`
/// only once the state is found unchanged; `None`: the spec is not checked. `changed`
/// names what differs from the sources the plan was made from, for the error.
pub fn check_fresh_digest(
    plan: &Plan,
    session: &Session,
    digest: impl FnOnce() -> Option<String>,
    changed: &[String],
) -> Result<(), RunError> {
    if plan.lineage != session.state.lineage || plan.serial != session.state.serial {
        return Err(RunError::StalePlan {
            plan_lineage: plan.lineage.clone(),
            plan_serial: plan.serial,
            lineage: session.state.lineage.clone(),
            serial: session.state.serial,
        });
    }
    if let Some(current) = digest()
        && !plan.destroy
        && current != plan.spec_digest
    {
        let changed = if changed.is_empty() {
            format!("its digest is {}, the spec's is {}", short(&plan.spec_digest), short(&current))
        } else {
            changed.join("; ")
        };
        return Err(RunError::SpecChanged { changed });
    }
    Ok(())
}

fn short(d: &str) -> String {
    d.chars().take(12).collect()
}

/// Execute a plan: journal every finished operation, then fold the journal into the
/// state file once. The state in `session` is updated to what was written. The plan is
/// released before that fold, so pass the only reference when memory matters.
pub async fn apply(
    session: &mut Session,
    plan: Arc<Plan>,
    providers: &ProviderSet,
    opts: &ApplyOptions,
) -> Result<ApplyReport, RunError> {
    check_fresh(&plan, session, None)?;
    // The run acts under the state lock (and under what its caller's cancel is fenced by,
    // a reconcile replica's Lease): once one no longer holds, it starts nothing new, every
    // mutating cloud call is refused, and the run fails (`RunError::LockLost`).
    let cancel = apply::Cancel::fenced(opts.cancel.clone(), session.lock.fence());
    let opts = &ApplyOptions { parallelism: opts.parallelism, progress: opts.progress.clone(), cancel };
    let guarded = apply::fence::guard(providers, &opts.cancel);
    let providers = &guarded;
    // Read before the journal opens: an unreadable verdict stops the apply before it starts.
    let overridden: Vec<policy::PolicyResult> = plan.policies.iter().filter(|r| r.overridden).cloned().collect();
    let journal = session.backend.open_journal(&session.lock, &session.state)?;
    let (recorder, handle) = Recorder::start(journal);
    // Imports, moves and forgets first: the changes were planned against their outcome.
    let (adopted, counts) = apply::adopt::run(&plan.adoptions, providers, &recorder, &opts.cancel).await;
    if adopted.iter().any(|o| !matches!(o.status, Status::Done)) {
        opts.progress.done();
        let report = ApplyReport {
            outcomes: adopted,
            cancelled: opts.cancel.is_cancelled(),
            adopted: counts,
            ..ApplyReport::default()
        };
        return finish_apply(session, plan, report, (recorder, handle), &overridden, &opts.cancel).await;
    }
    // Quarantined nodes in a cluster are cordoned before anything can land on them.
    let cordons = apply::cordon::run(&plan, providers, opts).await;
    let stopped = apply::jobs::before_nodes(&plan, &session.state, providers, opts).await;
    let kept = stopped.kept().clone();
    let mut report = apply::execute_keeping(plan.clone(), providers, recorder.clone(), opts, &kept).await;
    report.adopted = counts;
    report.outcomes.splice(0..0, adopted.into_iter().chain(cordons));
    // Run even when cancelled: each step checks the cancel token before it starts an
    // operation, and records what finished (stops made before the node changes, runs
    // adopted or refreshed) instead of dropping it.
    let (outcomes, jobs) = apply::jobs::run(&plan, &session.state, providers, &recorder, opts, stopped).await;
    report.outcomes.extend(outcomes);
    report.jobs = jobs;
    // A cancel during the jobs phase interrupts the apply too.
    report.cancelled = opts.cancel.is_cancelled();
    opts.progress.done();
    finish_apply(session, plan, report, (recorder, handle), &overridden, &opts.cancel).await
}

/// Journal the apply's history (and autoscaler actions), then fold the journal into the
/// state. A run whose lock or Lease was lost on the way fails, after saving what it can.
async fn finish_apply(
    session: &mut Session,
    plan: Arc<Plan>,
    report: ApplyReport,
    (recorder, handle): (Recorder, apply::recorder::RecorderHandle),
    overridden: &[policy::PolicyResult],
    cancel: &apply::Cancel,
) -> Result<ApplyReport, RunError> {
    let done = report.count(|s| matches!(s, Status::Done | Status::Partial(_)));
    let event = if plan.destroy { "destroy" } else { "apply" };
    let detail = format!(
        "{done} of {} change(s) completed{}",
        report.outcomes.len(),
        if report.cancelled { ", interrupted" } else { "" }
    );
    let mut lines = vec![JournalEntry::History { entry: history(event, detail) }];
    for r in overridden {
        lines.push(JournalEntry::History { entry: history("policy_override", format!("{}: {}", r.name, r.message)) });
    }
    let mut entries = Vec::new();
    // An autoscaler action counts (for its cooldown) once its pool change went through.
    for a in &plan.autoscale {
        let applied = report
            .outcomes
            .iter()
            .any(|o| o.address == a.pool && matches!(o.status, Status::Done | Status::Partial(_)));
        if applied {
            let record = ScaleRecord { at: a.at.clone(), from: a.from, to: a.to, reason: a.reason.clone() };
            entries.push(JournalEntry::Autoscale { pool: a.pool.to_string(), record });
        }
    }
    entries.extend(repairs(&plan, &report));
    // What the plan read of the nodes' GPUs (each fault's first sighting), whatever the
    // apply did: it is an observation, and `grace` counts from it.
    if !plan.evidence.is_empty() {
        let Evidence { set, remove } = plan.evidence.clone();
        entries.push(JournalEntry::Health { set, remove });
    }
    // The outputs are the applied fleet's only once all of it was applied; otherwise the
    // state keeps the old values and the next plan shows the change again.
    if report.succeeded() {
        entries.extend(crate::plan::outputs::journal_entry(&plan.outputs));
    }
    // Records that later plans read (cooldowns, outputs) are journaled and synced like any other.
    if !entries.is_empty() {
        // Not dropped: the writer keeps its first error and `handle.finish()` below returns
        // it (`journal_error`), and a writer that stopped fails `finish()` itself.
        let _ = recorder.record(entries).await;
    }
    drop(recorder);
    // Nothing below needs the plan; when the caller handed over its only reference, its
    // changes and cost report (hundreds of MB at 100,000 pools) go before the state is built.
    drop(plan);
    let (mut journal, journal_error) = handle.finish().map_err(RunError::Journal)?;
    // The history lines go into the state with the compaction below instead of a synced
    // append of their own (one fdatasync less after the last cloud call): a crash before
    // it loses only these lines, and the apply had not reported finishing
    // (`Journal::fold_unwritten`).
    journal.fold_unwritten(lines);
    let compacted = session.backend.compact(&session.lock, journal, &mut session.state);
    if let Some(first) = cancel.lost() {
        // What the lock's fence knows now (the new holder, once the store answered
        // again) says more than what stopped the run.
        let now = session.lock.fence().check().err().filter(|b| b.taken_by.is_some());
        return Err(crate::engine::error::lock_lost(now.as_ref().unwrap_or(first), &report, compacted.err()));
    }
    compacted?;
    if let Some(e) = journal_error {
        return Err(RunError::Journal(e));
    }
    Ok(report)
}

/// The GPU-health replacements of pools whose change went through, for `max_repairs`'
/// hour (docs/design/gpu-health.md).
fn repairs(plan: &Plan, report: &ApplyReport) -> Vec<JournalEntry> {
    let mut by_pool: std::collections::BTreeMap<&crate::addr::Address, Vec<u64>> = Default::default();
    for h in plan.health.iter().filter(|h| h.action == "replace" && h.held_by.is_none()) {
        let applied = report
            .outcomes
            .iter()
            .any(|o| o.address == h.address && matches!(o.status, Status::Done | Status::Partial(_)));
        if applied {
            by_pool.entry(&h.address).or_default().push(h.at_ms);
        }
    }
    by_pool.into_iter().map(|(pool, at_ms)| JournalEntry::Repairs { pool: pool.to_string(), at_ms }).collect()
}
