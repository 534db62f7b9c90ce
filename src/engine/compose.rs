//! The pure half of the pipeline (docs/design/pipeline.md): [`compose`] plans from the
//! spec, the state and what [`gather`](super::gather::gather) observed, as the user asked
//! ([`PlanRequest`]): imports and moves, floating placements, the diff, cost, policies,
//! job admission and placement, the job nodes to adopt or terminate. No I/O and no clock
//! (the observation carries the clocks), so the plan-case snapshots
//! (`tests/plan_cases/`) call it as `gpuplan plan` does.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::cost;
use crate::engine::error::RunError;
use crate::engine::gather::Observation;
use crate::engine::intent::PlanRequest;
use crate::jobs;
use crate::plan::Plan;
use crate::plan::adopt;
use crate::plan::diff::{self, PlanInput};
use crate::policy;
use crate::providers::Node;
use crate::spec::Spec;
use crate::state::State;

/// The plan for `req` over `state` as `obs` saw the clouds. The spec's digest is left
/// empty: the caller that keeps the plan fills it ([`run::digest`](super::run::digest)).
pub fn compose(spec: &Spec, state: &State, obs: &Observation, req: &PlanRequest) -> Result<Plan, RunError> {
    // Job nodes an interrupted apply launched but never recorded: planned as if the runs
    // were recorded (apply records them). A destroy sweeps them all as orphans.
    let adopted = match (&obs.job_nodes, req.destroy) {
        (Some(found), false) => jobs::adopt::with_adopted(state, &found.adopted),
        _ => None,
    };
    let mut plan = plan_fleet(spec, adopted.as_ref().unwrap_or(state), obs, req)?;
    if let Some(found) = &obs.job_nodes {
        add_job_nodes(&mut plan, found);
    }
    Ok(plan)
}

/// Diff, cost, policies and job placement over the fleet observed (`None`: the state's
/// record), with the autoscaler's steps in `req`.
fn plan_fleet(spec: &Spec, state: &State, obs: &Observation, req: &PlanRequest) -> Result<Plan, RunError> {
    let adopted = adopt::resolve(spec, state, obs.nodes.as_deref(), req.destroy);
    let state = adopted.state.as_ref().unwrap_or(state);
    let observed = adopted.observed.as_deref().or(obs.nodes.as_deref());
    let statuses = obs.job_statuses.as_ref();
    let running = jobs::running::by_pool(state, statuses);
    let (mut plan, placed) = placed_plan(spec, |holds| {
        let placed = place_floating(spec, state, obs, req, holds);
        let spec = placed.as_ref().map_or(spec, |r| &r.spec);
        let mut plan = diff_observed(spec, state, observed, obs, req)?;
        add_reservations(&mut plan, spec, state, obs, req);
        add_adoptions(&mut plan, adopted.adoptions.clone(), adopted.errors.clone());
        note_placements(&mut plan, placed.as_ref());
        Ok((assess(plan, spec, obs, req, &running)?, placed))
    })?;
    let spec = placed.as_ref().map_or(spec, |r| &r.spec);
    if !req.destroy {
        let agents = req.refresh.then_some(&obs.agents);
        plan.jobs =
            jobs::place::place(&jobs::place::PlaceInput { spec, state, plan: &plan, observed: statuses, agents });
        jobs::template_change::note_running_jobs(&mut plan, spec);
        let missing = super::secrets::errors(&plan, &obs.missing_secrets);
        plan.errors.extend(missing);
        // Nodes made for jobs (cloud VM pools) cost like the pool's own.
        if let Some(c) = plan.cost.as_mut() {
            cost::add_job_nodes(c, &plan.jobs, spec);
        }
    }
    Ok(plan)
}

/// Month-to-date spend as the observation's clocks tell it, with the job runs a plan
/// placed (`plan.jobs`), which may have ended since the state recorded them. The ledger's
/// sums are gather's ([`Observation::accrued`], same state, clocks and spec) where it
/// made them: only the runs' shares are added again.
pub fn spend(
    spec: &Spec,
    state: &State,
    obs: &Observation,
    jobs: &[jobs::JobPlacement],
) -> crate::state::spend::SpendReport {
    match &obs.accrued {
        Some(accrued) => accrued.report(state, Some(&super::spend::observed_runs(jobs))),
        None => super::spend::spend_by(spec, state, |name| obs.clocks.get(name).copied().unwrap_or(obs.wall_ms), jobs),
    }
}

/// A plan made by `pass` (place floating pools, diff, assess), made again with the moves
/// held in place that a quota cannot take while both sets of nodes run and that can wait
/// (docs/design/floating-pools.md); the moves that cannot wait are plan errors. Each pass
/// holds more moves, so this ends.
fn placed_plan(
    spec: &Spec,
    mut pass: impl FnMut(&Holds) -> Result<(Plan, Option<cost::placement::Resolved>), RunError>,
) -> Result<(Plan, Option<cost::placement::Resolved>), RunError> {
    let mut holds = Holds::new();
    loop {
        let (mut plan, placed) = pass(&holds)?;
        let breaches = plan.cost.as_ref().map(|c| policy::overlap::breaches(spec, c)).unwrap_or_default();
        let more = placed.as_ref().map(|r| policy::overlap::holds(&breaches, r)).unwrap_or_default();
        if more.is_empty() {
            plan.errors.extend(policy::overlap::errors(&breaches));
            return Ok((plan, placed));
        }
        holds.extend(more);
    }
}

/// Moves held in place, by pool (see [`placed_plan`]).
type Holds = BTreeMap<Address, cost::placement::Hold>;

/// The imports, moves and forgets [`adopt::resolve`] planned, under `--target` only
/// those of targeted addresses, with their errors.
fn add_adoptions(plan: &mut Plan, adoptions: Vec<adopt::Adoption>, errors: Vec<crate::plan::model::PlanError>) {
    let targeted = |a: &Address| plan.targets.is_empty() || plan.targets.iter().any(|t| a.matches_target(t));
    let adoptions: Vec<adopt::Adoption> =
        adoptions.into_iter().filter(|a| targeted(&a.address) || a.from.as_ref().is_some_and(&targeted)).collect();
    let errors: Vec<crate::plan::model::PlanError> = errors.into_iter().filter(|e| targeted(&e.address)).collect();
    plan.adoptions = adoptions;
    plan.errors.extend(errors);
    plan.summarize();
}

/// The spec with its floating pools placed where the plan chooses, at the observed
/// prices and clocks; `None` without floating pools (docs/design/floating-pools.md).
fn place_floating(
    spec: &Spec,
    state: &State,
    obs: &Observation,
    req: &PlanRequest,
    holds: &Holds,
) -> Option<cost::placement::Resolved> {
    if req.destroy {
        return None;
    }
    let prices = cost::PriceBook::new(spec, &req.env).with_live(&obs.live_prices);
    cost::placement::resolve(spec, state, &prices, &obs.clocks, holds)
}

/// Each floating pool's choice into the plan: the table every view shows, the record apply
/// keeps, and the reason on the pool's change when it moves.
fn note_placements(plan: &mut Plan, placed: Option<&cost::placement::Resolved>) {
    let Some(r) = placed else { return };
    for c in plan.changes.iter_mut() {
        let Some(ch) = r.chosen.get(&c.address) else { continue };
        if let Some(pc) = c.pool.as_mut() {
            pc.placement = Some(Box::new(ch.record.clone()));
            pc.placement_before = ch.before.clone().map(Box::new);
            let size = (pc.after.on_demand + pc.after.spot).saturating_sub(pc.deferred.len() as u32);
            pc.alternates = alternates(&r.spec, &c.address, ch, size);
        }
        if ch.decision.action == crate::plan::model::PlacementAction::Move {
            let code = crate::plan::model::ReasonCode::Changed("placement".into());
            c.reasons.insert(0, crate::plan::model::Reason::new(code, ch.decision.reason.clone()));
        }
    }
    plan.placements = r.chosen.values().map(|c| c.decision.clone()).collect();
}

/// Where apply may create a floating pool's nodes when its chosen candidate has no room:
/// each alternate candidate's region, zones and instance types, best first.
fn alternates(
    spec: &Spec,
    addr: &Address,
    ch: &cost::placement::Chosen,
    size: u32,
) -> Vec<crate::plan::model::Alternate> {
    let Some(pool) = spec.gpu_pools.get(addr) else { return vec![] };
    let Some(placement) = &pool.placement else { return vec![] };
    let mut out = Vec::new();
    for i in &ch.alternates {
        let Some(c) = placement.candidates.get(*i) else { continue };
        let Some(shape) = crate::plan::shape::shape(spec, &pool.placed_in(c), crate::catalog::catalog()) else {
            continue;
        };
        let record = crate::state::model::PlacementRecord {
            provider: c.provider.value.clone(),
            region: c.region.value.clone(),
            since_ms: ch.record.since_ms,
            short: ch.record.short.clone(),
        };
        let layout =
            crate::plan::shape::layout(&shape, size, pool.mix.on_demand_base.value, pool.mix.spot_percent.value);
        out.push(crate::plan::model::Alternate {
            region: shape.region,
            zones: shape.zones,
            candidate_zones: c.zones.iter().map(|z| z.value.clone()).collect(),
            instance_types: shape.instance_types,
            layout,
            placement: record,
            provider_kind: shape.provider_kind.to_string(),
        });
    }
    out
}

/// The diff alone (no cost, no policies).
fn diff_observed(
    spec: &Spec,
    state: &State,
    observed: Option<&[Node]>,
    obs: &Observation,
    req: &PlanRequest,
) -> Result<Plan, diff::BadStateKey> {
    let input = PlanInput {
        spec,
        state,
        observed,
        targets: &req.targets,
        replace: &req.replace,
        health: obs.health.as_ref(),
        destroy: req.destroy,
        spec_digest: String::new(),
        autoscale: &req.autoscale,
        clocks: &obs.clocks,
        job_statuses: obs.job_statuses.as_ref(),
        stop_busy: req.destroy && overrides_busy_policy(req),
    };
    diff::plan_knowing(&input, obs.as_recorded.as_ref())
}

/// `--override-policy no_destroy_pool_with_jobs` for a spec that has that policy: the user
/// accepts stopping the jobs on the nodes a destroy removes (an override of a policy the
/// spec lacks overrides nothing, and `plan` warns that it had no effect).
fn overrides_busy_policy(req: &PlanRequest) -> bool {
    let named = |name: &str| name == diff::BUSY_POLICY;
    req.overrides.iter().any(|o| named(o)) && req.policies.iter().any(|p| named(&p.name))
}

/// Cost and policy verdicts for a diffed plan; `running` are the jobs running per pool.
fn assess(
    mut plan: Plan,
    spec: &Spec,
    obs: &Observation,
    req: &PlanRequest,
    running: &jobs::running::RunningJobs,
) -> Result<Plan, RunError> {
    let prices = cost::PriceBook::new(spec, &req.env).with_live(&obs.live_prices).with_reservations(&plan.reservations);
    let report = cost::cost(&plan, spec, &prices)?;
    plan.errors.extend(cost::errors(&plan, &report));
    note_peaks(&mut plan, &report);
    let facts = policy::Facts {
        plan: &plan,
        cost: &report,
        spec,
        running_jobs: running,
        month_to_date: &obs.month_to_date,
        month_to_date_as_of: obs.spend.as_ref().map(|s| s.as_of.as_str()),
    };
    let mut results = policy::evaluate(&req.policies, &facts, &req.overrides);
    policy::standing::mark(&mut results, &req.policies, &facts, &req.overrides, &prices)?;
    plan.policies = results;
    plan.cost = Some(report);
    Ok(plan)
}

/// Every reservation's line into the plan (only those of the changes `--target` kept),
/// with the errors and notes of choosing and removing them, and an update for each that
/// refresh found ended.
fn add_reservations(plan: &mut Plan, spec: &Spec, state: &State, obs: &Observation, req: &PlanRequest) {
    let now = |name: &str| obs.clocks.get(name).copied().unwrap_or(obs.wall_ms);
    let read =
        crate::plan::reservations::Read { offers: obs.reservation_offers.as_ref(), held: obs.reservations.as_ref() };
    let found = crate::plan::reservations::plan(spec, state, read, req.destroy, &now);
    // A reservation that ended since the state recorded it: apply records what happened.
    for c in plan.changes.iter_mut().filter(|c| c.action == crate::plan::Action::NoOp) {
        if let Some(line) = found.lines.iter().find(|l| l.address == c.address && found.refreshed.contains(&l.address))
        {
            let what = line.reserved.as_ref().and_then(|r| r.ended()).unwrap_or_default();
            c.action = crate::plan::Action::Update;
            c.reasons.push(crate::plan::model::Reason::new(
                crate::plan::model::ReasonCode::Drift,
                format!("`{}` {what}: apply records it", c.address),
            ));
        }
    }
    let kept: std::collections::BTreeSet<&Address> = plan.changes.iter().map(|c| &c.address).collect();
    plan.reservations = found.lines.into_iter().filter(|l| kept.contains(&l.address)).collect();
    if !plan.reservations.is_empty() {
        let live: Vec<&Node> = match &obs.nodes {
            Some(nodes) => nodes.iter().collect(),
            None => state.resources.values().flat_map(|r| &r.nodes).collect(),
        };
        crate::plan::reservations::count_used(&mut plan.reservations, &plan.changes, live.into_iter());
    }
    plan.errors.extend(found.errors.into_iter().filter(|e| kept.contains(&e.address)));
    plan.notes.extend(found.notes.into_iter().filter(|n| kept.contains(&n.address)));
}

/// Each move's peak from the cost into its placement decision, for every view.
fn note_peaks(plan: &mut Plan, report: &cost::CostReport) {
    for d in plan.placements.iter_mut().filter(|d| d.action == crate::plan::model::PlacementAction::Move) {
        d.peak = report.pools.iter().find(|p| p.address == d.address).and_then(|p| p.peak);
    }
}

/// What [`scan_job_nodes`] found, in the plan: each orphan a drift item and an
/// `orphan_job_nodes` entry for apply to terminate; each adopted run marked on its job
/// (which records it) with a note.
///
/// Under `--target`, only the orphans of a targeted job or pool.
pub fn add_job_nodes(plan: &mut Plan, found: &jobs::adopt::Sorted) {
    for o in &found.orphans {
        let n = &o.node;
        let job = n.tags.get(crate::providers::TAG_JOB).unwrap_or("?").to_string();
        let address: crate::addr::Address = job.parse().unwrap_or_else(|_| n.pool.clone());
        let targeted = |a: &crate::addr::Address| plan.targets.iter().any(|t| a.matches_target(t));
        if !plan.targets.is_empty() && !targeted(&address) && !targeted(&n.pool) {
            continue;
        }
        plan.drift.push(crate::plan::model::DriftItem {
            address,
            kind: crate::plan::model::DriftKind::Orphan,
            node_id: Some(n.id.clone()),
            message: format!(
                "job node {} in {} runs {job}, which the state does not run: apply terminates it",
                n.id, n.zone
            ),
        });
        plan.orphan_job_nodes.push(crate::plan::model::OrphanJobNode {
            provider: o.provider.clone(),
            region: o.region.clone(),
            node_id: n.id.clone(),
            job,
        });
    }
    for (job, runs) in &found.adopted {
        let Some(j) = plan.jobs.iter_mut().find(|j| &j.address == job) else { continue };
        for run in runs.iter().filter(|r| j.runs.iter().any(|x| x.id == r.id)) {
            j.adopted.push(run.id.clone());
            let message = format!(
                "replica {} attempt {}: {}",
                run.replica,
                run.attempt,
                run.message.as_deref().unwrap_or("adopted")
            );
            plan.notes.push(crate::plan::model::PlanNote { address: job.clone(), message });
        }
    }
}
