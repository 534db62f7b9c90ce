//! The operations commands run: plan (refresh + diff) and apply (execute + compact).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::addr::Address;
use crate::apply::{self, ApplyOptions, ApplyReport, ProviderSet, Recorder, Status};
use crate::cost;
use crate::engine::{Session, history, refresh};
use crate::jobs;
use crate::plan::Plan;
use crate::plan::adopt;
use crate::plan::diff::{self, PlanInput};
use crate::plan::model::ScaleAction;
use crate::policy;
use crate::providers::{JobStatus, Node, ProviderError};
use crate::spec::Spec;
use crate::state::{JournalEntry, ScaleRecord, State, StateError};

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RunError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    State(#[from] StateError),
    #[error("refresh failed: provider `{provider}` answered {error}")]
    #[diagnostic(
        code(gpuplan::refresh),
        help("check the provider's credentials and endpoint, or plan with --refresh=false")
    )]
    Refresh { provider: String, error: ProviderError },
    #[error(
        "the saved plan is stale: it was made against state {plan_lineage} serial {plan_serial}, but the state is now {lineage} serial {serial}"
    )]
    #[diagnostic(code(gpuplan::plan::stale), help("run `gpuplan plan --out FILE` again and apply the new plan"))]
    StalePlan { plan_lineage: String, plan_serial: u64, lineage: String, serial: u64 },
    #[error("the saved plan was made from a different spec: {changed}")]
    #[diagnostic(
        code(gpuplan::plan::spec_changed),
        help("plan again (`gpuplan plan --out FILE`) and apply the new plan, or put back what changed")
    )]
    SpecChanged { changed: String },
    #[error(transparent)]
    #[diagnostic(transparent)]
    StateKey(#[from] diff::BadStateKey),
    #[error("the state journal failed: {0}")]
    #[diagnostic(code(gpuplan::state::journal))]
    Journal(String),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Cost(#[from] cost::CostError),
    /// A `GPUPLAN_*` setting from the environment that cannot be used.
    #[error("{0}")]
    #[diagnostic(code(gpuplan::env), help("fix or unset the variable"))]
    Setting(String),
    /// The state lock or the Lease the apply ran under stopped holding: it started nothing
    /// after that (docs/design/state-and-locks.md, "Expiry and fencing").
    #[error("{broken}; {}", not_started_text(not_started))]
    #[diagnostic(code(gpuplan::state::lock_lost), help("{}", lock_lost_help(saved)))]
    LockLost {
        broken: crate::state::fence::Broken,
        /// The changes it did not start (or not finish: a pool's later batches).
        not_started: Vec<String>,
        /// Why the final state write failed, when it did.
        saved: Option<Box<StateError>>,
    },
}

/// The run's failure once its lock or Lease no longer held: `report`'s changes it did not
/// start, and `unsaved`, the final write's error if it failed.
fn lock_lost(broken: &crate::state::fence::Broken, report: &ApplyReport, unsaved: Option<StateError>) -> RunError {
    let not_started = report
        .outcomes
        .iter()
        .filter(|o| match &o.status {
            Status::Skipped(_) => true,
            Status::Failed(m) => apply::fence::refused(m),
            _ => false,
        })
        .map(|o| o.address.to_string())
        .collect();
    RunError::LockLost { broken: broken.clone(), not_started, saved: unsaved.map(Box::new) }
}

fn not_started_text(not_started: &[String]) -> String {
    const SHOWN: usize = 10;
    if not_started.is_empty() {
        return "every operation it had started finished".to_string();
    }
    let mut text = format!(
        "{} operation(s) not started: {}",
        not_started.len(),
        not_started[..not_started.len().min(SHOWN)].join(", ")
    );
    if not_started.len() > SHOWN {
        text += &format!(" and {} more", not_started.len() - SHOWN);
    }
    text
}

fn lock_lost_help(unsaved: &Option<Box<StateError>>) -> String {
    let next = "let the run that holds it now finish, then run `gpuplan plan` to see what is left; nodes \
                launched but not recorded carry gpuplan's tags, and the next plan adopts them rather than \
                launching them again";
    match unsaved.as_deref() {
        None => format!("what this run finished is saved in the state; {next}"),
        Some(StateError::Errored { saved, .. }) => format!(
            "the state could not be written under the lost lock; a copy of this run's state is in `{}` for the \
             record (do not push it over the newer state); {next}",
            crate::spec::display_path(saved)
        ),
        Some(e) => format!("the state could not be written under the lost lock ({e}); {next}"),
    }
}

#[derive(Debug, Clone, Default)]
pub struct PlanRequest {
    pub refresh: bool,
    pub targets: Vec<Address>,
    /// `--replace`: pools whose every node the plan replaces though nothing changed.
    pub replace: Vec<Address>,
    pub destroy: bool,
    /// The environment (exchange-rate overrides such as `GPUPLAN_CNY_PER_USD`).
    pub env: std::collections::BTreeMap<String, String>,
    /// Policies to check the plan against (quotas are always checked).
    pub policies: Vec<policy::Policy>,
    /// Soft policies accepted with `--override-policy`.
    pub overrides: Vec<String>,
    /// Live prices the providers reported during refresh (AWS spot prices), used over the
    /// catalog's; filled by [`plan`].
    pub live_prices: Vec<crate::model::Offer>,
    /// Month-to-date spend per quota address from the ledger ([`month_to_date`]); quotas
    /// with a `monthly_usd` budget are checked against it. Empty: not checked.
    pub month_to_date: BTreeMap<String, f64>,
    /// Each provider's clock by provider block name ([`clocks`]), read when the plan
    /// refreshes: when pools that fell back try their preferred placement again.
    pub clocks: BTreeMap<String, u64>,
    /// The run-command agents of the warm nodes of cloud VM pools that jobs use, by node
    /// id ([`agents`]), read when the plan refreshes: only online ones take jobs.
    pub agents: BTreeMap<String, crate::providers::AgentState>,
    /// The plan is executed by this process right after (`apply` without a plan file):
    /// the providers may ask the reads of new pools' first creates while refresh lists
    /// the fleet ([`read_ahead`]).
    pub read_ahead: bool,
    /// The plan is only shown as text, never saved or printed as JSON: it does not need
    /// the spec's digest (`Plan::spec_digest`, which applying a saved plan checks), which
    /// takes a serialization of the whole spec (about 1.5 ms at 2,000 pools). Left empty.
    pub shown_only: bool,
}

/// Refresh (unless asked not to) and diff. Nothing is written.
pub async fn plan(
    spec: &Spec,
    session: &Session,
    providers: &ProviderSet,
    req: &PlanRequest,
) -> Result<Plan, RunError> {
    // Live prices do not depend on what refresh finds: they are asked while the clouds
    // list the fleet, so a plan waits for the slower of the two reads, not their sum.
    let (observed, live) = match (req.refresh, req.destroy) {
        (false, _) => (None, Vec::new()),
        (true, true) => (Some(observe(spec, session, providers).await?), Vec::new()),
        (true, false) => {
            let (observed, (live, warnings), ()) = tokio::join!(
                observe(spec, session, providers),
                live_prices_quiet(spec, providers),
                read_ahead(spec, &session.state, providers, req)
            );
            let observed = observed?;
            for w in warnings {
                eprintln!("{w}");
            }
            (Some(observed), live)
        }
    };
    if req.refresh && !req.destroy {
        let job_nodes = scan_job_nodes(spec, &session.state, providers, false).await?;
        // Planned as if the adopted runs were recorded: apply records them.
        let adopted = jobs::adopt::with_adopted(&session.state, &job_nodes.adopted);
        let state = adopted.as_ref().unwrap_or(&session.state);
        let statuses = job_statuses(state, providers, req).await?;
        let mut with_prices = req.clone();
        with_prices.live_prices = live;
        let spend = month_to_date(spec, &session.state, providers);
        with_prices.month_to_date = spend.by_quota.clone();
        with_prices.clocks = clocks(providers);
        with_prices.agents = agents(spec, state, providers).await;
        let mut plan = plan_refreshed(spec, state, observed, statuses.as_ref(), &with_prices, &[])?;
        add_job_nodes(&mut plan, &job_nodes);
        if !session.state.spend.is_empty() {
            // Again with the runs this plan observed: jobs that ended since the last apply.
            let spend = if plan.jobs.is_empty() {
                spend
            } else {
                month_to_date_observed(spec, &session.state, providers, &plan.jobs)
            };
            plan.spend = Some(spend);
        }
        return Ok(plan);
    }
    let statuses = job_statuses(&session.state, providers, req).await?;
    let mut plan = plan_refreshed(spec, &session.state, observed, statuses.as_ref(), req, &[])?;
    if req.refresh {
        // A destroy leaves no job node behind: those no run owns are swept too.
        let job_nodes = scan_job_nodes(spec, &session.state, providers, true).await?;
        add_job_nodes(&mut plan, &job_nodes);
    }
    Ok(plan)
}

/// Let the providers ask, while refresh lists the fleet, what the first creates of the
/// spec's new pools will ask ([`Provider::read_ahead`](crate::providers::Provider::read_ahead)):
/// only when this process executes the plan ([`PlanRequest::read_ahead`]), and only for
/// pools the state has no record of, so an apply that leaves its pools as they are makes
/// no extra call. A pool that turns out to create nothing (a quota holds it back) costs
/// those reads and nothing else.
async fn read_ahead(spec: &Spec, state: &State, providers: &ProviderSet, req: &PlanRequest) {
    if !req.read_ahead {
        return;
    }
    let asks = new_pools(spec, state, &req.targets);
    futures::future::join_all(asks.iter().filter_map(|(name, pools)| {
        let p = providers.get(name)?;
        Some(async move { p.read_ahead(pools).await })
    }))
    .await;
}

/// The spec's pools with nodes to create and no record in the state, by provider block
/// (within `targets` when some are given). Floating pools are left out: where their
/// nodes go is the plan's choice.
pub fn new_pools(spec: &Spec, state: &State, targets: &[Address]) -> BTreeMap<String, Vec<crate::providers::NewPool>> {
    let cat = crate::catalog::catalog();
    let mut out: BTreeMap<String, Vec<crate::providers::NewPool>> = BTreeMap::new();
    for (addr, pool) in &spec.gpu_pools {
        if pool.placement.is_some() || pool.nodes.desired.value == 0 {
            continue;
        }
        if !targets.is_empty() && !targets.contains(addr) {
            continue;
        }
        if state.resources.contains_key(&addr.to_string()) {
            continue;
        }
        let Some(shape) = crate::plan::shape::shape(spec, pool, cat) else { continue };
        out.entry(shape.provider).or_default().push(crate::providers::NewPool {
            pool: addr.clone(),
            region: shape.region,
            zones: shape.zones,
            instance_types: shape.instance_types,
            lineage: state.lineage.clone(),
        });
    }
    out
}

/// Job nodes on the clouds (tagged with this state's lineage and `gpuplan:job`) that no
/// run in the state owns, sorted into runs to adopt and orphans ([`jobs::adopt`]). Asked
/// in every (provider, region) of a cloud VM pool or of a recorded run.
pub async fn scan_job_nodes(
    spec: &Spec,
    state: &State,
    providers: &ProviderSet,
    destroy: bool,
) -> Result<jobs::adopt::Sorted, RunError> {
    let mut asks: std::collections::BTreeSet<(String, String)> = std::collections::BTreeSet::new();
    for pool in spec.gpu_pools.values().filter(|p| p.kubernetes.is_none()) {
        let Some(kind) = spec.providers.get(&pool.provider.value).and_then(|b| b.kind.value) else { continue };
        if kind == crate::model::ProviderKind::Sim {
            continue;
        }
        if let Some(r) = crate::spec::validate::pool_region(spec, pool) {
            asks.insert((pool.provider.value.clone(), r.value.clone()));
        }
    }
    let runs = state.resources.values().filter_map(|r| r.job.as_ref()).flat_map(|j| &j.runs);
    for r in runs.filter(|r| r.has_own_node() && !r.provider.starts_with(crate::providers::kube::PREFIX)) {
        asks.insert((r.provider.clone(), r.region.clone()));
    }
    let mut listed = Vec::new();
    for (name, region) in asks {
        let Some(p) = providers.get(&name) else { continue };
        let filter = crate::providers::ListFilter { region: region.clone(), lineage: Some(state.lineage.clone()) };
        let nodes =
            p.list_job_nodes(&filter).await.map_err(|error| RunError::Refresh { provider: name.clone(), error })?;
        listed.extend(nodes.into_iter().map(|node| jobs::adopt::Listed {
            provider: name.clone(),
            region: region.clone(),
            node,
        }));
    }
    let mut sorted = jobs::adopt::sort(spec, state, listed, destroy);
    if !destroy {
        for (job, run) in find_sends(state, providers).await? {
            sorted.adopted.entry(job).or_default().push(run);
        }
    }
    Ok(sorted)
}

/// The sends to warm nodes that an apply began and never recorded (`JobRecord::sending`),
/// asked of their clouds: each one the cloud ran, as the run to adopt. The others were
/// never sent, and the plan launches them again (under the same token).
async fn find_sends(state: &State, providers: &ProviderSet) -> Result<Vec<(Address, jobs::JobRun)>, RunError> {
    let mut out = Vec::new();
    for (key, r) in &state.resources {
        let Some(rec) = r.job.as_deref().filter(|rec| !rec.sending.is_empty()) else { continue };
        let Ok(job) = key.parse::<Address>() else { continue };
        for s in &rec.sending {
            // A provider block gone from the spec: its warm node cannot be asked, nor sent to.
            let Some(p) = providers.get(&s.provider) else { continue };
            let found = p
                .find_sent(&s.region, &s.node_id, &s.token)
                .await
                .map_err(|error| RunError::Refresh { provider: s.provider.clone(), error })?;
            if let Some(status) = found {
                out.push((job.clone(), jobs::adopt::sent_run(s, status)));
            }
        }
    }
    Ok(out)
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

/// Each provider's clock (ms since the epoch) by provider block name: the sim cloud's own,
/// the wall clock for real clouds.
pub fn clocks(providers: &ProviderSet) -> BTreeMap<String, u64> {
    providers.iter().map(|(name, p)| (name.clone(), p.clock_ms())).collect()
}

/// Month-to-date spend from the ledger in `state`, each line by its provider's clock
/// (the sim cloud's own, the wall clock for real clouds), per pool, quota and job.
pub fn month_to_date(spec: &Spec, state: &State, providers: &ProviderSet) -> crate::state::spend::SpendReport {
    month_to_date_observed(spec, state, providers, &[])
}

/// [`month_to_date`] with the job runs a plan observed (`plan.jobs`), which may have ended
/// since the state recorded them.
pub fn month_to_date_observed(
    spec: &Spec,
    state: &State,
    providers: &ProviderSet,
    jobs: &[jobs::JobPlacement],
) -> crate::state::spend::SpendReport {
    let observed: BTreeMap<String, Vec<crate::model::JobRun>> =
        jobs.iter().filter(|j| !j.runs.is_empty()).map(|j| (j.address.to_string(), j.runs.clone())).collect();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let quotas: Vec<(String, Vec<String>)> = cost::all_quota_pools(spec)
        .into_iter()
        .map(|(q, pools)| (q.to_string(), pools.iter().map(ToString::to_string).collect()))
        .collect();
    crate::state::spend::month_to_date(
        state,
        |name| providers.get(name).map_or(wall, |p| p.clock_ms()),
        |pool| quotas.iter().filter(|(_, pools)| pools.iter().any(|p| p == pool)).map(|(q, _)| q.clone()).collect(),
        Some(&observed),
    )
}

/// Live prices for the pools' GPU models and regions, from the clouds: AWS spot
/// (`DescribeSpotPriceHistory`; on-demand stays the catalog's), Tencent
/// (`InquiryPriceRunInstances`) and Alibaba (`DescribePrice`), both capacities. A
/// provider that cannot answer is a warning, and the catalog's price stands: prices
/// never block a plan, and the plan's cost says which prices are live.
pub async fn live_prices(spec: &Spec, providers: &ProviderSet) -> Vec<crate::model::Offer> {
    let (offers, warnings) = live_prices_quiet(spec, providers).await;
    for w in warnings {
        eprintln!("{w}");
    }
    offers
}

/// [`live_prices`] with its warnings returned rather than printed: a plan asks for
/// prices while refresh runs, and says nothing about prices when refresh fails.
async fn live_prices_quiet(spec: &Spec, providers: &ProviderSet) -> (Vec<crate::model::Offer>, Vec<String>) {
    let mut asks: std::collections::BTreeSet<(String, String, String)> = std::collections::BTreeSet::new();
    for pool in spec.gpu_pools.values() {
        // A floating pool's candidates are priced live too, the sim's from its trace.
        for c in pool.placement.iter().flat_map(|p| &p.candidates) {
            if providers.contains_key(&c.provider.value) {
                asks.insert((c.provider.value.clone(), pool.gpu.value.clone(), c.region.value.clone()));
            }
        }
        let name = &pool.provider.value;
        let Some(p) = providers.get(name) else { continue };
        if p.kind() == crate::model::ProviderKind::Sim {
            continue;
        }
        let region = pool
            .region
            .as_ref()
            .map(|r| r.value.clone())
            .or_else(|| spec.providers.get(name).and_then(|b| b.region.as_ref()).map(|r| r.value.clone()));
        if let Some(region) = region {
            asks.insert((name.clone(), pool.gpu.value.clone(), region));
        }
    }
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for (name, gpu, region) in asks {
        let Some(p) = providers.get(&name) else { continue };
        match p.offers(&gpu, Some(&region)).await {
            Ok(offers) => out.extend(offers.into_iter().filter(|o| o.live_price)),
            Err(e) => warnings.push(format!(
                "warning: provider \"{name}\" gave no live prices for {gpu} in {region}: {e}; using catalog prices"
            )),
        }
    }
    (out, warnings)
}

/// Everything `plan` does once the clouds have been read, and nothing else: diff, cost,
/// policies, job admission. Pure. `gpuplan plan` and the plan-case snapshots
/// (`tests/plan_cases/`) both go through it, so the snapshots show what users see.
pub fn plan_refreshed(
    spec: &Spec,
    state: &State,
    observed: Option<Vec<Node>>,
    statuses: Option<&BTreeMap<String, JobStatus>>,
    req: &PlanRequest,
    autoscale: &[ScaleAction],
) -> Result<Plan, RunError> {
    let adopted = adopt::resolve(spec, state, observed.as_deref(), req.destroy);
    let state = adopted.state.as_ref().unwrap_or(state);
    let mut observed = adopted.observed.or(observed);
    let digest = if req.shown_only { String::new() } else { diff::spec_digest(spec) };
    let running = jobs::running::by_pool(state, statuses);
    // Floating pools may be planned again (a move held for a quota) from the same fleet.
    let floating = spec.gpu_pools.values().any(|p| p.placement.is_some());
    let (mut plan, placed) = placed_plan(spec, |holds| {
        let placed = place_floating(spec, state, req, holds);
        let spec = placed.as_ref().map_or(spec, |r| &r.spec);
        let mut plan = diff_observed(spec, &digest, state, observed.as_deref(), statuses, req, autoscale)?;
        if !floating {
            observed = None; // the observed fleet is freed before costing (memory at 100,000 pools)
        }
        add_adoptions(&mut plan, adopted.adoptions.clone(), adopted.errors.clone());
        note_placements(&mut plan, placed.as_ref());
        Ok((assess(plan, spec, req, &running)?, placed))
    })?;
    let spec = placed.as_ref().map_or(spec, |r| &r.spec);
    if !req.destroy {
        let agents = req.refresh.then_some(&req.agents);
        plan.jobs =
            jobs::place::place(&jobs::place::PlaceInput { spec, state, plan: &plan, observed: statuses, agents });
        jobs::template_change::note_running_jobs(&mut plan, spec);
        // Nodes made for jobs (cloud VM pools) cost like the pool's own.
        if let Some(c) = plan.cost.as_mut() {
            cost::add_job_nodes(c, &plan.jobs, spec);
        }
    }
    Ok(plan)
}

/// The run-command agents of the live nodes of every cloud VM pool a job runs on, asked
/// once per (provider, region). A cloud without run-command answers nothing (its jobs
/// boot nodes); agents that cannot be read are offline for this plan, with why, and a
/// warning: the jobs boot nodes rather than wait.
pub async fn agents(
    spec: &Spec,
    state: &State,
    providers: &ProviderSet,
) -> BTreeMap<String, crate::providers::AgentState> {
    let used: std::collections::BTreeSet<&Address> =
        spec.jobs.values().flat_map(|j| std::iter::once(&j.pool.value).chain(&j.pool_choices)).collect();
    let mut asks: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for addr in used {
        let Some(pool) = spec.gpu_pools.get(addr).filter(|p| p.kubernetes.is_none()) else { continue };
        let kind = spec.providers.get(&pool.provider.value).and_then(|b| b.kind.value);
        if kind.is_none_or(|k| k == crate::model::ProviderKind::Sim) {
            continue;
        }
        let Some(region) = crate::spec::validate::pool_region(spec, pool) else { continue };
        let Some(r) = state.resources.get(&addr.to_string()) else { continue };
        let ids = r.nodes.iter().filter(|n| n.is_live()).map(|n| n.id.clone());
        asks.entry((pool.provider.value.clone(), region.value.clone())).or_default().extend(ids);
    }
    let mut out = BTreeMap::new();
    for ((name, region), ids) in asks.into_iter().filter(|(_, ids)| !ids.is_empty()) {
        let Some(p) = providers.get(&name) else { continue };
        match p.agents(&region, &ids).await {
            Ok(Some(found)) => out.extend(found),
            Ok(None) => {}
            Err(e) => {
                eprintln!(
                    "warning: provider \"{name}\" could not say which warm nodes in {region} can take jobs: {e}; jobs boot nodes of their own"
                );
                let why = format!("its agent could not be read ({e})");
                out.extend(ids.into_iter().map(|id| (id, crate::providers::AgentState::Offline(why.clone()))));
            }
        }
    }
    out
}

/// Refresh: the nodes the clouds run with this state's tags.
/// Instances named by `import` blocks are described too (see [`describe_imports`]).
pub async fn observe(spec: &Spec, session: &Session, providers: &ProviderSet) -> Result<Vec<Node>, RunError> {
    let mut nodes = refresh::refresh(providers, spec, &session.state)
        .await
        .map_err(|(provider, error)| RunError::Refresh { provider, error })?;
    describe_imports(spec, providers, &mut nodes).await?;
    Ok(nodes)
}

/// Diff, cost and policies over nodes and job runs already observed (`None`: the state's
/// record), with the autoscaler's decisions (`reconcile`; empty for `plan`). Pure.
pub fn plan_observed(
    spec: &Spec,
    state: &State,
    observed: Option<&[Node]>,
    statuses: Option<&BTreeMap<String, JobStatus>>,
    req: &PlanRequest,
    autoscale: &[ScaleAction],
) -> Result<Plan, RunError> {
    let adopted = adopt::resolve(spec, state, observed, req.destroy);
    let state = adopted.state.as_ref().unwrap_or(state);
    let observed = adopted.observed.as_deref().or(observed);
    let running = jobs::running::by_pool(state, statuses);
    let digest = if req.shown_only { String::new() } else { diff::spec_digest(spec) };
    let (plan, _) = placed_plan(spec, |holds| {
        let placed = place_floating(spec, state, req, holds);
        let spec = placed.as_ref().map_or(spec, |r| &r.spec);
        let mut plan = diff_observed(spec, &digest, state, observed, statuses, req, autoscale)?;
        add_adoptions(&mut plan, adopted.adoptions.clone(), adopted.errors.clone());
        note_placements(&mut plan, placed.as_ref());
        Ok((assess(plan, spec, req, &running)?, placed))
    })?;
    Ok(plan)
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
    let adoptions: Vec<adopt::Adoption> = adoptions
        .into_iter()
        .filter(|a| targeted(&a.address) || a.from.as_ref().is_some_and(|f| targeted(f)))
        .collect();
    let errors: Vec<crate::plan::model::PlanError> = errors.into_iter().filter(|e| targeted(&e.address)).collect();
    plan.adoptions = adoptions;
    plan.errors.extend(errors);
    plan.summarize();
}

/// Instances the spec's `import` blocks name that refresh did not list (they carry no
/// tag of this state yet), described by id in each pool's provider and region. They join
/// the observed nodes; [`adopt::resolve`] checks and takes them.
pub async fn describe_imports(spec: &Spec, providers: &ProviderSet, observed: &mut Vec<Node>) -> Result<(), RunError> {
    if spec.imports.is_empty() {
        return Ok(());
    }
    let cat = crate::catalog::catalog();
    let listed: std::collections::HashSet<String> = observed.iter().map(|n| n.id.clone()).collect();
    let mut asks: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for block in &spec.imports {
        let Some(pool) = spec.gpu_pools.get(&block.to.value) else { continue };
        let Some(shape) = crate::plan::shape::shape(spec, pool, cat) else { continue };
        let ids = asks.entry((shape.provider, shape.region)).or_default();
        for id in block.ids.iter().map(|i| &i.value) {
            if !listed.contains(id) && !ids.contains(id) {
                ids.push(id.clone());
            }
        }
    }
    for ((name, region), ids) in asks {
        let Some(p) = providers.get(&name) else { continue };
        if ids.is_empty() {
            continue;
        }
        let found = p
            .describe_nodes(&region, &ids)
            .await
            .map_err(|error| RunError::Refresh { provider: name.clone(), error })?;
        observed.extend(found.into_iter().filter(|n| !listed.contains(&n.id)));
    }
    Ok(())
}

/// The spec with its floating pools placed where the plan chooses, at the request's
/// prices and clocks; `None` without floating pools (docs/design/floating-pools.md).
pub fn place_floating(
    spec: &Spec,
    state: &State,
    req: &PlanRequest,
    holds: &Holds,
) -> Option<cost::placement::Resolved> {
    if req.destroy {
        return None;
    }
    let prices = cost::PriceBook::new(spec, &req.env).with_live(&req.live_prices);
    cost::placement::resolve(spec, state, &prices, &req.clocks, holds)
}

/// The moves a plan holds in place. Only where the pools live is used (to place jobs
/// as the plan placed the pools), so the reason's detail is not rebuilt.
fn holds_of(plan: &Plan) -> Holds {
    plan.placements
        .iter()
        .filter_map(|d| {
            let quota = d.held_by.clone()?;
            Some((d.address.clone(), cost::placement::Hold { quota, detail: String::new() }))
        })
        .collect()
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
    digest: &str,
    state: &State,
    observed: Option<&[Node]>,
    statuses: Option<&BTreeMap<String, JobStatus>>,
    req: &PlanRequest,
    autoscale: &[ScaleAction],
) -> Result<Plan, diff::BadStateKey> {
    let input = PlanInput {
        spec,
        state,
        observed,
        targets: &req.targets,
        replace: &req.replace,
        destroy: req.destroy,
        spec_digest: digest.to_string(),
        autoscale,
        clocks: &req.clocks,
        job_statuses: statuses,
        stop_busy: req.destroy && overrides_busy_policy(req),
    };
    diff::plan(&input)
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
    req: &PlanRequest,
    running: &jobs::running::RunningJobs,
) -> Result<Plan, RunError> {
    let prices = cost::PriceBook::new(spec, &req.env).with_live(&req.live_prices);
    let report = cost::cost(&plan, spec, &prices)?;
    plan.errors.extend(cost::errors(&plan, &report));
    note_peaks(&mut plan, &report);
    let facts =
        policy::Facts { plan: &plan, cost: &report, spec, running_jobs: running, month_to_date: &req.month_to_date };
    let mut results = policy::evaluate(&req.policies, &facts, &req.overrides);
    policy::standing::mark(&mut results, &req.policies, &facts, &req.overrides, &prices)?;
    plan.policies = results;
    plan.cost = Some(report);
    Ok(plan)
}

/// Each move's peak from the cost into its placement decision, for every view.
fn note_peaks(plan: &mut Plan, report: &cost::CostReport) {
    for d in plan.placements.iter_mut().filter(|d| d.action == crate::plan::model::PlacementAction::Move) {
        d.peak = report.pools.iter().find(|p| p.address == d.address).and_then(|p| p.peak);
    }
}

/// The status of every run the state records as active (`None` unless refreshing). A
/// destroy asks too: policies look at the jobs that still run.
pub async fn job_statuses(
    state: &State,
    providers: &ProviderSet,
    req: &PlanRequest,
) -> Result<Option<BTreeMap<String, JobStatus>>, RunError> {
    if !req.refresh {
        return Ok(None);
    }
    let grace = jobs::refresh::exit_code_grace(&req.env).map_err(RunError::Setting)?;
    jobs::refresh::statuses(providers, state, grace)
        .await
        .map(Some)
        .map_err(|(provider, error)| RunError::Refresh { provider, error })
}

/// The plan's jobs section from the runs' refreshed `statuses`, with the nodes made for
/// jobs in its cost.
pub fn place_jobs_into(
    spec: &Spec,
    state: &State,
    statuses: Option<&BTreeMap<String, JobStatus>>,
    req: &PlanRequest,
    plan: &mut Plan,
) {
    if req.destroy {
        plan.jobs = Vec::new();
        return;
    }
    let placed = place_floating(spec, state, req, &holds_of(plan));
    let spec = placed.as_ref().map_or(spec, |r| &r.spec);
    let agents = req.refresh.then_some(&req.agents);
    let input = jobs::place::PlaceInput { spec, state, plan, observed: statuses, agents };
    plan.jobs = jobs::place::place(&input);
    jobs::template_change::note_running_jobs(plan, spec);
    if let Some(c) = plan.cost.as_mut() {
        cost::add_job_nodes(c, &plan.jobs, spec);
    }
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
        let report = ApplyReport { outcomes: adopted, cancelled: opts.cancel.is_cancelled(), adopted: counts };
        return finish_apply(session, plan, report, (recorder, handle), &overridden, &opts.cancel).await;
    }
    let stopped = apply::jobs::before_nodes(&plan, &session.state, providers, opts).await;
    let kept = stopped.kept().clone();
    let mut report = apply::execute_keeping(plan.clone(), providers, recorder.clone(), opts, &kept).await;
    report.adopted = counts;
    report.outcomes.splice(0..0, adopted);
    // Run even when cancelled: each step checks the cancel token before it starts an
    // operation, and records what finished (stops made before the node changes, runs
    // adopted or refreshed) instead of dropping it.
    report.outcomes.extend(apply::jobs::run(&plan, &session.state, providers, &recorder, opts, stopped).await);
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
        return Err(lock_lost(now.as_ref().unwrap_or(first), &report, compacted.err()));
    }
    compacted?;
    if let Some(e) = journal_error {
        return Err(RunError::Journal(e));
    }
    Ok(report)
}
