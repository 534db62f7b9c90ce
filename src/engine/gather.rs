//! The I/O half of the pipeline (docs/design/pipeline.md): [`gather`] reads everything a
//! plan depends on that the spec and the state do not say — the fleet (refresh and the
//! instances `import` blocks name), job nodes no run owns, the runs' status, live prices,
//! each provider's clock, month-to-date spend, the warm nodes' agents — into an
//! [`Observation`]. [`compose`](super::compose::compose) plans from it without I/O.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::apply::ProviderSet;
use crate::engine::error::RunError;
use crate::engine::intent::{Hints, PlanRequest};
use crate::engine::{refresh, spend};
use crate::jobs;
use crate::providers::{JobStatus, Node, ports};
use crate::spec::Spec;
use crate::state::State;

/// What the clouds said, read once per plan (or reconcile pass). Empty when the plan
/// does not refresh; a destroy reads the fleet, the runs and the job nodes only.
#[derive(Debug, Default)]
pub struct Observation {
    /// The nodes the clouds run with this state's tags, and the instances `import`
    /// blocks name; `None`: not refreshed, the state's record stands.
    pub nodes: Option<Vec<Node>>,
    /// Job nodes no run in the state owns, sorted into runs to adopt and orphans
    /// ([`scan_job_nodes`]); `None` unless refreshed.
    pub job_nodes: Option<jobs::adopt::Sorted>,
    /// The status of every run the state records as active, by run id ([`job_statuses`]).
    pub job_statuses: Option<BTreeMap<String, JobStatus>>,
    /// Live prices the providers reported (AWS spot prices), used over the catalog's.
    pub live_prices: Vec<crate::model::Offer>,
    /// Month-to-date spend per quota address from the ledger; quotas with a
    /// `monthly_usd` budget are checked against it. Empty: not checked.
    pub month_to_date: BTreeMap<String, f64>,
    /// The whole month-to-date report those figures come from (per pool, quota and job),
    /// which a plan shows as is when it observed no job run.
    pub spend: Option<crate::state::spend::SpendReport>,
    /// The ledger summed to the month's date by these clocks, before job runs' shares:
    /// a plan whose jobs observed newer runs adds their shares to it
    /// ([`super::compose::spend`]) rather than summing the ledger again.
    pub accrued: Option<crate::state::spend::Accrued>,
    /// Each provider's clock by provider block name ([`clocks`]): when pools that fell
    /// back try their preferred placement again.
    pub clocks: BTreeMap<String, u64>,
    /// The wall clock when the clocks were read (ms since the epoch), for a provider
    /// block without a provider.
    pub wall_ms: u64,
    /// The run-command agents of the warm nodes of cloud VM pools that jobs use, by node
    /// id ([`agents`]): only online ones take jobs.
    pub agents: BTreeMap<String, crate::providers::AgentState>,
    /// The GPU health read of each live node whose provider reads it, by node id
    /// ([`super::health::read`]); `None` unless refreshed.
    pub health: Option<BTreeMap<String, crate::model::health::NodeHealth>>,
    /// The Capacity Block offerings of the spec's new reservations
    /// ([`super::reserved::offers`]); `None` unless refreshed.
    pub reservation_offers: Option<crate::plan::reservations::Offers>,
    /// The reservations the state holds, as their clouds hold them now
    /// ([`super::reserved::read_held`]); `None` unless refreshed.
    pub reservations: Option<crate::plan::reservations::Observed>,
    /// The job secrets their clouds say do not exist ([`super::secrets::missing`]).
    pub missing_secrets: Vec<super::secrets::MissingSecret>,
    /// Which pools' recorded configuration is the spec's own text, found while the clouds
    /// were read (of the spec and state gathered with); `None`: the diff asks it itself.
    pub as_recorded: Option<crate::plan::AsRecorded>,
}

/// Read what `req` needs from the clouds, with `state` as recorded. A destroy reads the
/// fleet, the runs and every job node (it leaves none behind); a plan also reads prices,
/// clocks, spend and agents, and runs are asked of the state with the job nodes an
/// interrupted apply never recorded adopted (the plan adopts them too).
pub async fn gather(
    spec: &Spec,
    state: &State,
    providers: &ProviderSet,
    req: &PlanRequest,
    hints: &Hints,
) -> Result<Observation, RunError> {
    let mut obs = Observation::default();
    if !req.refresh {
        return Ok(obs);
    }
    if req.destroy {
        obs.nodes = Some(observe(spec, state, providers).await?);
        obs.job_statuses = job_statuses(state, providers, req).await?;
        obs.job_nodes = Some(scan_job_nodes(spec, state, providers, true).await?);
        obs.reservations = Some(super::reserved::read_held(state, providers).await?);
        return Ok(obs);
    }
    // The clocks are read first, so the ledger is summed by them on a thread of its own
    // while the clouds are read (the sim cloud's listing runs on this one): the sums wait
    // on nothing the reads return. So does the diff's question whether each pool's
    // recorded configuration is the spec's (a text written per pool): that thread asks it
    // of as many pools as it can until the reads are done, and the diff of the others.
    obs.clocks = clocks(providers);
    obs.wall_ms = wall_ms();
    let (clocks, wall) = (&obs.clocks, obs.wall_ms);
    let read_done = std::sync::atomic::AtomicBool::new(false);
    let aside = || {
        let accrued = spend::accrue(spec, state, |n| clocks.get(n).copied().unwrap_or(wall));
        (accrued, crate::plan::AsRecorded::until(spec, state, &read_done))
    };
    let reads = async {
        let read = read_clouds(spec, state, providers, req, hints, clocks).await;
        read_done.store(true, std::sync::atomic::Ordering::Relaxed);
        read
    };
    let (read, (accrued, as_recorded)) = spend::beside(reads, aside).await;
    obs.as_recorded = Some(as_recorded);
    let Read { nodes, health, live, job_nodes, adopted, job_statuses, offers, held } = read?;
    obs.health = Some(health);
    obs.nodes = Some(nodes);
    obs.live_prices = live;
    obs.job_statuses = job_statuses;
    obs.reservation_offers = Some(offers);
    obs.reservations = Some(held);
    let spent = accrued.report(state, Some(&BTreeMap::new()));
    obs.month_to_date = spent.by_quota.clone();
    obs.spend = Some(spent);
    obs.accrued = Some(accrued);
    let planned = adopted.as_ref().unwrap_or(state);
    obs.agents = agents(spec, planned, providers).await;
    obs.missing_secrets = super::secrets::missing(spec, providers).await;
    obs.job_nodes = Some(job_nodes);
    Ok(obs)
}

/// What a plan reads from the clouds besides the clocks, the agents and the secrets
/// ([`read_clouds`]).
struct Read {
    nodes: Vec<Node>,
    health: BTreeMap<String, crate::model::health::NodeHealth>,
    live: Vec<crate::model::Offer>,
    job_nodes: jobs::adopt::Sorted,
    /// The state with the runs to adopt recorded; `None`: as recorded.
    adopted: Option<State>,
    job_statuses: Option<BTreeMap<String, JobStatus>>,
    offers: crate::plan::reservations::Offers,
    held: crate::plan::reservations::Observed,
}

/// Refresh (with live prices and the providers' read-ahead beside it), the live nodes'
/// GPU health, the job nodes no run owns, the runs' status (the adopted runs' too), the
/// Capacity Block offerings at `clocks`, and the reservations held. Warnings are printed.
async fn read_clouds(
    spec: &Spec,
    state: &State,
    providers: &ProviderSet,
    req: &PlanRequest,
    hints: &Hints,
    clocks: &BTreeMap<String, u64>,
) -> Result<Read, RunError> {
    // Live prices do not depend on what refresh finds: they are asked while the clouds
    // list the fleet, so a plan waits for the slower of the two reads, not their sum.
    let (nodes, (live, warnings), ()) = tokio::join!(
        observe(spec, state, providers),
        live_prices_quiet(spec, providers, hints),
        read_ahead(spec, state, providers, req, hints)
    );
    let nodes = nodes?;
    let (health, unread) = super::health::read(spec, &nodes, providers).await;
    for w in warnings.into_iter().chain(unread) {
        eprintln!("{w}");
    }
    let job_nodes = scan_job_nodes(spec, state, providers, false).await?;
    let adopted = jobs::adopt::with_adopted(state, &job_nodes.adopted);
    let job_statuses = job_statuses(adopted.as_ref().unwrap_or(state), providers, req).await?;
    let offers = super::reserved::offers(spec, state, providers, clocks).await;
    let held = super::reserved::read_held(state, providers).await?;
    Ok(Read { nodes, health, live, job_nodes, adopted, job_statuses, offers, held })
}

/// Refresh: the nodes the clouds run with this state's tags.
/// Instances named by `import` blocks are described too (see [`describe_imports`]).
pub async fn observe(spec: &Spec, state: &State, providers: &ProviderSet) -> Result<Vec<Node>, RunError> {
    let mut nodes = refresh::refresh(providers, spec, state)
        .await
        .map_err(|(provider, error)| RunError::Refresh { provider, error })?;
    describe_imports(spec, providers, &mut nodes).await?;
    Ok(nodes)
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
        let found = async { ports::adoption_of(&**p, ports::DESCRIBE)?.describe_nodes(&region, &ids).await }
            .await
            .map_err(|error| RunError::Refresh { provider: name.clone(), error })?;
        observed.extend(found.into_iter().filter(|n| !listed.contains(&n.id)));
    }
    Ok(())
}

/// Let the providers ask, while refresh lists the fleet, what the first creates of the
/// spec's new pools will ask ([`NodePort::read_ahead`](crate::providers::NodePort::read_ahead)):
/// only when this process executes the plan ([`Hints::read_ahead`]), and only for
/// pools the state has no record of, so an apply that leaves its pools as they are makes
/// no extra call. A pool that turns out to create nothing (a quota holds it back) costs
/// those reads and nothing else.
async fn read_ahead(spec: &Spec, state: &State, providers: &ProviderSet, req: &PlanRequest, hints: &Hints) {
    if !hints.read_ahead {
        return;
    }
    let asks = new_pools(spec, state, &req.targets);
    futures::future::join_all(asks.iter().filter_map(|(name, pools)| {
        let nodes = providers.get(name)?.nodes()?;
        Some(async move { nodes.read_ahead(pools).await })
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
        // A provider without jobs has no job nodes.
        let Some(jobs) = providers.get(&name).and_then(|p| p.jobs()) else { continue };
        let filter = crate::providers::ListFilter { region: region.clone(), lineage: Some(state.lineage.clone()) };
        let nodes =
            jobs.list_job_nodes(&filter).await.map_err(|error| RunError::Refresh { provider: name.clone(), error })?;
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
            // A provider without jobs sent nothing.
            let Some(jobs) = providers.get(&s.provider).and_then(|p| p.jobs()) else { continue };
            let found = jobs
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

/// Each provider's clock (ms since the epoch) by provider block name: the sim cloud's own,
/// the wall clock for real clouds.
pub fn clocks(providers: &ProviderSet) -> BTreeMap<String, u64> {
    providers.iter().map(|(name, p)| (name.clone(), p.clock_ms())).collect()
}

/// Month-to-date spend from the ledger in `state`, each line by its provider's clock
/// (the sim cloud's own, the wall clock for real clouds), per pool, quota and job.
pub fn month_to_date(spec: &Spec, state: &State, providers: &ProviderSet) -> crate::state::spend::SpendReport {
    let wall = wall_ms();
    spend::spend_by(spec, state, |name| providers.get(name).map_or(wall, |p| p.clock_ms()), &[])
}

/// The wall clock, in ms since the epoch.
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Live prices for the pools' GPU models and regions, from the clouds: AWS spot
/// (`DescribeSpotPriceHistory`; on-demand stays the catalog's), Tencent
/// (`InquiryPriceRunInstances`) and Alibaba (`DescribePrice`), both capacities. A
/// provider that cannot answer is a warning, and the catalog's price stands: prices
/// never block a plan, and the plan's cost says which prices are live. The warnings are
/// returned: a plan asks for prices while refresh runs, and says nothing about prices
/// when refresh fails.
async fn live_prices_quiet(
    spec: &Spec,
    providers: &ProviderSet,
    hints: &Hints,
) -> (Vec<crate::model::Offer>, Vec<String>) {
    if hints.floating_prices_only && !spec.gpu_pools.values().any(|p| p.placement.is_some()) {
        return (Vec::new(), Vec::new());
    }
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
        // A provider that sells nothing (the Kubernetes job backend) has no live prices.
        let Some(prices) = providers.get(&name).and_then(|p| p.prices()) else { continue };
        match prices.offers(&gpu, Some(&region)).await {
            Ok(offers) => out.extend(offers.into_iter().filter(|o| o.live_price)),
            Err(e) => warnings.push(format!(
                "warning: provider \"{name}\" gave no live prices for {gpu} in {region}: {e}; using catalog prices"
            )),
        }
    }
    (out, warnings)
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
        // A cloud without run-command runs jobs on nodes of their own.
        let Some(agents) = providers.get(&name).and_then(|p| p.run_command()) else { continue };
        match agents.agents(&region, &ids).await {
            Ok(found) => out.extend(found),
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
