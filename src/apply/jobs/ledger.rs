//! Spend-ledger lines of the nodes made for job runs (cloud job VMs): opened when the node
//! launches, at the price the plan priced its pool's nodes at, and charged to the job, its
//! pool and through the pool to its quotas; closed when the run ends, or its job goes.
//! Pool nodes get their lines in `apply/pool.rs`; a run on a pool node costs its share of
//! that node's line instead (`state/spend.rs`).

use std::collections::{BTreeMap, BTreeSet};

use crate::addr::Kind;
use crate::apply::ProviderSet;
use crate::model::{JobPlacement, JobRun};
use crate::plan::{Action, Plan};
use crate::providers::Capacity;
use crate::state::model::SpendEntry;
use crate::state::{JournalEntry, State};

/// The line of a node made for a run of `j`, launched at `start_ms` by its provider's
/// clock. Its type is the shape's first, the one the plan priced (a provider that falls
/// back to a later type of the list does not say so, and that node is priced as the
/// first); without one (an adopted node) the type the plan priced the pool's nodes at.
pub(super) fn open_for_pool(
    plan: &Plan,
    j: &JobPlacement,
    provider: &str,
    instance_type: Option<&String>,
    capacity: Capacity,
    start_ms: u64,
) -> SpendEntry {
    let pool_type =
        || plan.cost.iter().flat_map(|c| &c.pools).find(|p| p.address == j.pool).map(|p| p.instance_type.clone());
    let instance_type = instance_type.cloned().or_else(pool_type).unwrap_or_default();
    let planned = plan
        .cost
        .iter()
        .flat_map(|c| &c.pools)
        .find(|p| p.address == j.pool && p.instance_type == instance_type)
        .and_then(|p| match capacity {
            Capacity::OnDemand | Capacity::Reserved => p.on_demand_price.clone(),
            Capacity::Spot => p.spot_price.clone(),
        });
    let (usd_per_hour, price_source) = match planned {
        Some(p) if p.source == "live" => (p.usd_per_hour, format!("live (quoted {})", p.as_of)),
        Some(p) => (p.usd_per_hour, format!("catalog (as of {})", p.as_of)),
        None => catalog_price(&instance_type, capacity),
    };
    SpendEntry {
        pool: j.pool.to_string(),
        provider: provider.to_string(),
        job: Some(j.address.to_string()),
        instance_type,
        capacity,
        usd_per_hour,
        price_source,
        start_ms,
        end_ms: None,
    }
}

/// The catalog's price of a type the plan did not price, at the default exchange rate.
fn catalog_price(instance_type: &str, capacity: Capacity) -> (f64, String) {
    let cat = crate::catalog::catalog();
    let found = crate::model::ProviderKind::ALL.iter().find_map(|k| cat.instance_type(*k, instance_type));
    match found {
        Some(t) => {
            let rate = crate::catalog::DEFAULT_CNY_PER_USD;
            let usd = if capacity == Capacity::Spot { t.spot_price_usd(rate) } else { t.price_usd(rate) };
            (usd, format!("catalog (as of {})", t.as_of))
        }
        // Recorded at 0 and says so, as pool nodes of an unknown type are.
        None => (0.0, "unknown: the catalog has no price for this instance type".to_string()),
    }
}

/// The runs this apply writes on nodes that have an open job line in the prior state:
/// all [`close_ended`] needs of the job records, gathered as they are written instead of
/// keeping every record (100,000 jobs) until the end.
pub(super) struct Written<'s> {
    open: BTreeSet<&'s str>,
    runs: BTreeMap<String, JobRun>,
}

impl<'s> Written<'s> {
    pub(super) fn new(prior: &'s State) -> Self {
        let open = prior.spend.iter().filter(|(_, l)| l.end_ms.is_none() && l.job.is_some());
        Written { open: open.map(|(id, _)| id.as_str()).collect(), runs: BTreeMap::new() }
    }

    /// Note the runs of the job records among `entries` (later records win).
    pub(super) fn note(&mut self, entries: &[JournalEntry]) {
        for e in entries {
            if let JournalEntry::PutResource { resource, .. } = e
                && let Some(rec) = &resource.job
            {
                let kept = rec.runs.iter().filter(|r| self.open.contains(r.node_id.as_str()));
                self.runs.extend(kept.map(|r| (r.node_id.clone(), r.clone())));
            }
        }
    }
}

/// Close the open job lines whose run has ended (at its end, where the provider said when)
/// or whose job this plan removes (now). `written` holds the runs of the job records this
/// apply writes; runs it does not touch are as the state has them.
pub(super) fn close_ended(
    plan: &Plan,
    prior: &State,
    providers: &ProviderSet,
    written: &Written<'_>,
    kept: &super::Kept,
) -> Vec<JournalEntry> {
    let mut runs: BTreeMap<&str, &JobRun> = BTreeMap::new();
    for rec in prior.resources.values().filter_map(|r| r.job.as_deref()) {
        runs.extend(rec.runs.iter().map(|r| (r.node_id.as_str(), r)));
    }
    runs.extend(written.runs.iter().map(|(id, r)| (id.as_str(), r)));
    let removed: BTreeSet<String> = plan
        .changes
        .iter()
        .filter(|c| c.action == Action::Delete && c.address.kind == Kind::Job)
        // A job whose runs could not be cancelled keeps its record, and its nodes bill on.
        .filter(|c| !kept.0.contains_key(&c.address))
        .map(|c| c.address.to_string())
        .collect();
    let mut out = Vec::new();
    for (id, line) in prior.spend.iter().filter(|(_, l)| l.end_ms.is_none()) {
        let Some(job) = &line.job else { continue };
        let run = runs.get(id.as_str());
        if !removed.contains(job) && run.is_some_and(|r| r.is_active()) {
            continue;
        }
        let now = providers.get(&line.provider).map_or_else(wall_clock_ms, |p| p.clock_ms());
        let ended = run.and_then(|r| r.finished_at.as_deref()).and_then(ms).filter(|t| *t <= now);
        out.push(JournalEntry::SpendClose { ids: vec![id.clone()], at_ms: ended.unwrap_or(now) });
    }
    out
}

/// An RFC 3339 time gpuplan wrote, in ms since the epoch; `None` if it does not parse
/// (a hand-edited state) or lies before 1970: deliberately not an error, since the line
/// still closes, at the provider's clock (the caller's fallback), and no money is lost.
fn ms(t: &str) -> Option<u64> {
    let at = humantime::parse_rfc3339(t).ok()?;
    let d = at.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(d.as_millis()).ok()
}

fn wall_clock_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}
