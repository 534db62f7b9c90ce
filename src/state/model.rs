//! The state file's data model (`state/<workspace>.json`).
//!
//! `{format_version, serial, lineage, resources: {ADDR: {...}}, history: [...]}`.
//! Every write bumps `serial`; `lineage` is a UUID fixed when the state is created.
//! Resources hold what gpuplan last applied (`config`) and what it observed (`nodes`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::addr::{Address, AddressError};
use crate::json_text::JsonText;
use crate::model::Node;

/// 2: node records leave out the ownership tags gpuplan derives, `history_summary` counts
/// the history entries dropped, and `spend_months` holds the ledger of closed months
/// folded into totals ([`super::compact`], docs/design/state-and-locks.md). 3: a pool's
/// nodes are written as the fields most of them share and what each differs by, the
/// ledger as groups of lines alike ([`super::stored`]). Files of formats 1 and 2 are
/// migrated on read ([`super::migrate`]).
pub const FORMAT_VERSION: u32 = 3;

/// How many [`HistoryEntry`]s a state keeps (the newest); older ones are counted in
/// [`State::history_summary`].
pub const HISTORY_LIMIT: usize = 100;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct State {
    pub format_version: u32,
    pub serial: u64,
    pub lineage: String,
    #[serde(default, deserialize_with = "crate::model::exact::map")]
    pub resources: BTreeMap<String, ResourceState>,
    /// Notable events: applies, policy overrides. Newest last, capped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
    /// The history entries older than the newest [`HISTORY_LIMIT`], counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_summary: Option<HistorySummary>,
    /// The last autoscaler action per pool address (its cooldown starts there). The count
    /// the autoscaler chose lives in the pool's `config.nodes.desired`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub autoscale: BTreeMap<String, ScaleRecord>,
    /// The spend ledger: every node gpuplan launched or adopted, by node id, from launch to
    /// termination at the price in force. Closed entries stay (a month's total needs them);
    /// see [`crate::state::spend`].
    /// Format 3 writes it as a list of groups of lines alike ([`super::stored`]); both
    /// forms read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "super::stored::ledger")]
    #[schemars(with = "super::stored::LedgerSchema")]
    pub spend: BTreeMap<String, SpendEntry>,
    /// Ledger lines of closed months folded into totals, by month (`2026-03`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spend_months: BTreeMap<String, MonthSpend>,
    /// Budget alerts delivered, per quota address and month (`2026-03`): the thresholds
    /// (percent of `monthly_usd`) already posted, so none is posted twice.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub alerts: BTreeMap<String, BTreeMap<String, Vec<u32>>>,
    /// The spec's `output` values as the last successful apply left them, by name
    /// (`gpuplan output` reads them; plans show how they change).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, OutputState>,
    /// Standing policy violations `reconcile` has reported, by verdict (`policy` or
    /// `policy[key]`): each is reported once while it stands, and forgotten once it passes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub standing: BTreeMap<String, StandingRecord>,
    /// Nodes replaced for their GPU health, by pool address: when (ms, the provider's
    /// clock), within the last hour, so `health.max_repairs` bounds an hour's repairs
    /// (docs/design/gpu-health.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub repairs: BTreeMap<String, Vec<u64>>,
    /// The GPU faults last read on each live node, by node id, each with when it was first
    /// seen (kept across plans, so `health.grace` counts from there on clouds whose reads
    /// carry no time of their own; docs/design/gpu-health.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub health: BTreeMap<String, Vec<crate::model::health::Finding>>,
}

/// How far back `health.max_repairs` counts repairs: an hour.
pub const REPAIR_WINDOW_MS: u64 = 3_600_000;

/// One output value in state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutputState {
    /// `sensitive = true`: every view prints `(sensitive)`; `gpuplan output NAME` and
    /// `output --json` still print the value, as Terraform does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    #[schemars(with = "serde_json::Value")]
    pub value: serde_json::Value,
}

/// A standing violation reported by `reconcile`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StandingRecord {
    /// The policy's message when it was reported.
    pub message: String,
    /// When it was first reported (RFC 3339).
    pub since: String,
}

/// One node's line in the spend ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpendEntry {
    /// The pool address the node belonged to.
    pub pool: String,
    /// The provider block's local name (its clock is the one the hours are counted by).
    pub provider: String,
    /// The job address, for a node made for one job (its `gpuplan:job` tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    pub instance_type: String,
    pub capacity: crate::model::Capacity,
    /// USD per node-hour in force when it launched.
    pub usd_per_hour: f64,
    /// Where that price came from: `catalog (as of 2026-01-15)`, or a live source.
    pub price_source: String,
    /// Launch, by the provider's clock (ms since the epoch).
    pub start_ms: u64,
    /// Termination (or when gpuplan saw it gone), by the provider's clock; open while `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
}

impl State {
    pub fn new(lineage: String) -> Self {
        State {
            format_version: FORMAT_VERSION,
            serial: 0,
            lineage,
            resources: BTreeMap::new(),
            history: Vec::new(),
            history_summary: None,
            autoscale: BTreeMap::new(),
            spend: BTreeMap::new(),
            spend_months: BTreeMap::new(),
            alerts: BTreeMap::new(),
            outputs: BTreeMap::new(),
            standing: BTreeMap::new(),
            repairs: BTreeMap::new(),
            health: BTreeMap::new(),
        }
    }

    /// The repairs of `pool` within the hour before `now_ms`.
    pub fn recent_repairs(&self, pool: &str, now_ms: u64) -> usize {
        self.repairs
            .get(pool)
            .map_or(0, |t| t.iter().filter(|&&at| now_ms.saturating_sub(at) < REPAIR_WINDOW_MS).count())
    }

    /// The first key of `resources` or `autoscale` that is not a resource address. Files
    /// are checked when they are read, so the planner only ever sees addresses: it could
    /// not say what an unparsable key is, and dropping it would forget nodes that cost money.
    pub fn bad_address(&self) -> Option<AddressError> {
        self.resources.keys().chain(self.autoscale.keys()).find_map(|k| k.parse::<Address>().err())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResourceState {
    /// `gpu_pool`, `quota`, `job_template`, `job`, `autoscaler`.
    pub kind: String,
    /// The provider block's local name, for resources that live in a cloud.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Provider kind (`sim`, `aws`, ...), so refresh and destroy work without the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The configuration last applied (the spec's attributes as JSON).
    #[serde(default)]
    #[schemars(with = "serde_json::Value")]
    pub config: JsonText,
    /// Paths of `config` derived from a sensitive variable when applied: every view
    /// prints `(sensitive)` at and under them (the value stays, as Terraform's state
    /// keeps it; `encryption {}` seals the file).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::model::exact::vec")]
    pub sensitive: Vec<String>,
    /// Addresses this resource depended on when applied: destroy runs in reverse.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::model::exact::vec")]
    pub dependencies: Vec<String>,
    /// Nodes gpuplan created for a pool, as last observed.
    /// Format 3 writes them as `{common, each}` ([`super::stored`]); both forms read.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "super::stored::nodes")]
    #[schemars(with = "super::stored::NodesSchema")]
    pub nodes: Vec<Node>,
    /// For jobs: age, queue time and the runs launched (see `jobs::model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Box<crate::model::JobRecord>>,
    /// For pools: some nodes run in their fallback placement (another zone, or on-demand
    /// instead of spot) because the preferred one had no capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<FallbackRecord>,
    /// For floating pools: where the pool lives, since when, and the candidates found
    /// short of capacity (docs/design/floating-pools.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementRecord>,
    /// For reservations: what the cloud sold (id, window, price), as bought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Box<crate::model::reservation::Reserved>>,
}

/// Where a floating pool lives and what gpuplan learned about its candidates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlacementRecord {
    /// The provider block's name of the candidate the pool lives in.
    pub provider: String,
    pub region: String,
    /// When the pool was placed there, by the provider's clock (ms since the epoch):
    /// `min_stay` counts from here.
    pub since_ms: u64,
    /// Candidates that could not hold the pool when it last tried them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short: Vec<ShortRecord>,
}

/// A candidate found without capacity for the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShortRecord {
    pub provider: String,
    pub region: String,
    /// When it was found short (ms since the epoch).
    pub since_ms: u64,
    /// The cloud's answer, e.g. `insufficient spot capacity in zone us-west-2a`.
    pub reason: String,
}

/// A pool that could not get its preferred placement (its zone, or spot) and placed nodes
/// by `mix.fallback` instead (docs/design/convergence.md). Plans leave those
/// nodes where they are until [`FallbackRecord::retry_at`], then try the preferred
/// placement again as an explicit change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FallbackRecord {
    /// When the pool first fell back, by its provider's clock (ms since the epoch).
    pub since_ms: u64,
    /// When the preferred placement was last tried and found short (ms since the epoch).
    pub tried_ms: u64,
    /// Tries of the preferred placement that failed since `since_ms`: the wait before the
    /// next one doubles after each.
    #[serde(default)]
    pub failed_retries: u32,
    /// What happened, e.g. `us-east-1a had no capacity for 2 on-demand nodes; placed in us-east-1b`.
    pub reason: String,
}

/// The longest wait between tries of a preferred placement.
pub const MAX_RETRY_WAIT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl FallbackRecord {
    /// When the preferred placement is tried next: `base` after the last try, doubled for
    /// each failed retry, at most [`MAX_RETRY_WAIT`].
    pub fn retry_at(&self, base: std::time::Duration) -> u64 {
        let factor = 1u128 << self.failed_retries.min(20);
        let wait = (base.as_millis().saturating_mul(factor)).min(MAX_RETRY_WAIT.as_millis());
        self.tried_ms.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryEntry {
    /// RFC 3339 time.
    pub at: String,
    /// `apply`, `destroy`, `policy_override`, `state_rm`, ...
    pub event: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// The history entries a state no longer lists: how many of each event, and when the
/// first and the last of them happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistorySummary {
    /// RFC 3339 time of the oldest entry counted.
    pub from: String,
    /// RFC 3339 time of the newest entry counted.
    pub to: String,
    /// Entries counted, by event (`apply`: 312).
    pub events: BTreeMap<String, u64>,
}

/// One closed month of the spend ledger, folded: what its lines accrued within the month.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MonthSpend {
    pub usd: f64,
    /// By pool address (a quota's figure is the sum over its pools).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_pool: BTreeMap<String, f64>,
    /// By job address, for nodes made for one job.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_job: BTreeMap<String, f64>,
    /// Ledger lines folded.
    pub lines: u64,
}

/// One autoscaler action, as the state keeps it for cooldowns and reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScaleRecord {
    /// RFC 3339 time of the decision.
    pub at: String,
    pub from: u32,
    pub to: u32,
    /// Why, e.g. `3 jobs waited > 5m`.
    pub reason: String,
}
