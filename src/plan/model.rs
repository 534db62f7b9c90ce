//! The plan: what apply will do, and why. One model, many views (`render/`).
//!
//! Names follow OpenTofu: a [`Plan`] holds [`ResourceChange`]s, each with an [`Action`]
//! (symbol `+ ~ - -/+`) and reasons that explain it. Reasons never drive apply; the
//! node operations in [`PoolChange`] do, and apply executes exactly those.

use serde::{Deserialize, Serialize};

use crate::addr::Address;
use crate::json_text::JsonText;
pub use crate::plan::health::{Cordon, Evidence, HealthEntry};
use crate::plan::report::{CostReport, PolicyResult};
use crate::providers::{Capacity, CreateNodes, Node, Tags};
use crate::spec::model::Fallback;
use crate::state::ResourceState;

/// The version of `plan --json`'s document (docs/design/files.md).
pub const FORMAT_VERSION: u32 = 1;
/// The version of a saved plan file's document, [`Plan::format_version`]. 2: the plan
/// records what made it ([`Plan::inputs`]); a file of 1 is refused, not applied without.
pub const FILE_FORMAT_VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Create,
    Update,
    Replace,
    Delete,
    NoOp,
    Read,
}

impl Action {
    /// The symbol shown in the text view.
    pub fn symbol(self) -> &'static str {
        match self {
            Action::Create => "+",
            Action::Update => "~",
            Action::Replace => "-/+",
            Action::Delete => "-",
            Action::NoOp => " ",
            Action::Read => "<=",
        }
    }
    pub fn verb(self) -> &'static str {
        match self {
            Action::Create => "will be created",
            Action::Update => "will be updated in-place",
            Action::Replace => "must be replaced",
            Action::Delete => "will be destroyed",
            Action::NoOp => "has no changes",
            Action::Read => "will be read",
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Replace => "replace",
            Action::Delete => "delete",
            Action::NoOp => "no-op",
            Action::Read => "read",
        }
    }
}

/// Why a change is planned (explains; never drives apply).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub code: ReasonCode,
    pub message: String,
}

impl Reason {
    pub fn new(code: ReasonCode, message: impl Into<String>) -> Self {
        Reason { code, message: message.into() }
    }
}

/// The stable part of a [`Reason`], written as its code string (`new`,
/// `changed:mix.spot_percent`, ...) in plans and `--json`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReasonCode {
    /// The resource is new in the spec.
    New,
    /// The resource left the spec.
    RemovedFromSpec,
    /// `destroy` was requested.
    Destroy,
    /// Orphan nodes of a pool neither the spec nor the state knows.
    Orphan,
    /// An attribute that cannot change in place changed: the nodes are replaced.
    Immutable,
    /// This attribute path changed (`changed:<path>`).
    Changed(String),
    /// Nodes that no longer match the spec are replaced.
    OutdatedNodes,
    /// Nodes disappeared outside gpuplan.
    Drift,
    /// The node count moves.
    NodeCount,
    /// The on-demand/spot split moves.
    Mix,
    /// The owned node count is outside `nodes.min..max`.
    NodeBounds,
    /// An interrupted apply launched nodes but did not record the configuration.
    Unfinished,
    /// Orphan nodes tagged for this pool are taken into state.
    Adopt,
    /// An autoscaler decided the count.
    Autoscale,
    /// The preferred placement is tried again after a fallback.
    RetryPreferred,
    /// A job template changed while jobs run with it: they keep the old one until their
    /// next launch.
    RunningJobsKeepTemplate,
    /// A node removal waits for the job that is not preemptible running on it.
    Deferred,
    /// Nodes whose GPUs are unhealthy are replaced (docs/design/gpu-health.md).
    Unhealthy,
}

impl ReasonCode {
    const PLAIN: [(ReasonCode, &'static str); 17] = [
        (ReasonCode::New, "new"),
        (ReasonCode::RemovedFromSpec, "removed_from_spec"),
        (ReasonCode::Destroy, "destroy"),
        (ReasonCode::Orphan, "orphan"),
        (ReasonCode::Immutable, "immutable"),
        (ReasonCode::OutdatedNodes, "outdated_nodes"),
        (ReasonCode::Drift, "drift"),
        (ReasonCode::NodeCount, "node_count"),
        (ReasonCode::Mix, "mix"),
        (ReasonCode::NodeBounds, "node_bounds"),
        (ReasonCode::Unfinished, "unfinished"),
        (ReasonCode::Adopt, "adopt"),
        (ReasonCode::Autoscale, "autoscale"),
        (ReasonCode::RetryPreferred, "retry_preferred"),
        (ReasonCode::RunningJobsKeepTemplate, "running_jobs_keep_template"),
        (ReasonCode::Deferred, "deferred"),
        (ReasonCode::Unhealthy, "unhealthy"),
    ];
}

impl std::fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReasonCode::Changed(path) => write!(f, "changed:{path}"),
            other => {
                let (_, text) = Self::PLAIN.iter().find(|(c, _)| c == other).expect("every plain code is listed");
                f.write_str(text)
            }
        }
    }
}

impl std::str::FromStr for ReasonCode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("changed:") {
            return Ok(ReasonCode::Changed(path.to_string()));
        }
        Self::PLAIN
            .iter()
            .find(|(_, text)| *text == s)
            .map(|(c, _)| c.clone())
            .ok_or_else(|| format!("unknown reason code `{s}`"))
    }
}

impl PartialEq<&str> for ReasonCode {
    fn eq(&self, other: &&str) -> bool {
        match self {
            ReasonCode::Changed(path) => other.strip_prefix("changed:") == Some(path.as_str()),
            plain => Self::PLAIN.iter().any(|(c, text)| c == plain && text == other),
        }
    }
}

impl Serialize for ReasonCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ReasonCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// Nodes by capacity type, before or after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeCounts {
    pub on_demand: u32,
    pub spot: u32,
    pub gpus_per_node: u32,
}

impl NodeCounts {
    pub fn nodes(&self) -> u32 {
        self.on_demand + self.spot
    }
    pub fn gpus(&self) -> u64 {
        self.nodes() as u64 * self.gpus_per_node as u64
    }
}

/// How many live nodes of one instance type and capacity type a pool has.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TypeCount {
    pub instance_type: String,
    pub capacity: Capacity,
    pub count: u32,
    /// The reservation (cloud id) these nodes run in, from their `gpuplan:reservation` tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

/// One node to terminate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDelete {
    pub id: String,
    pub zone: String,
    pub instance_type: String,
    pub capacity: Capacity,
    /// Why this node goes (surplus, replaced, orphan, removed from spec).
    pub reason: String,
    /// The node's region, when it is not the pool's (a floating pool moving away).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The provider block the node lives in, when it is not the pool's (a floating pool
    /// moving to another provider block): apply terminates it through that one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The reservation (cloud id) the node runs in, from its `gpuplan:reservation` tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

/// A node the change would remove, kept while the job on it runs: that job is not
/// preemptible. A later plan removes the node once the job has ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeferredDelete {
    pub id: String,
    pub zone: String,
    pub capacity: Capacity,
    /// Why the node would go (surplus, rebalance, replaced: …).
    pub reason: String,
    /// The job that keeps it.
    pub job: Address,
}

/// The node-level work of one pool change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolChange {
    pub provider: String,
    pub provider_kind: String,
    pub region: String,
    pub gpu: String,
    pub before: NodeCounts,
    pub after: NodeCounts,
    /// The live nodes before the change by instance type and capacity (for pricing).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::model::exact::vec")]
    pub before_types: Vec<TypeCount>,
    /// Batches to create, each one provider call, each with its idempotency token.
    #[serde(deserialize_with = "crate::model::exact::vec")]
    pub creates: Vec<CreateNodes>,
    #[serde(deserialize_with = "crate::model::exact::vec")]
    pub deletes: Vec<NodeDelete>,
    /// Removals deferred until the job on the node ends; apply leaves these nodes alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<DeferredDelete>,
    /// Orphan nodes (tagged for this pool, unknown to state) taken into state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adopt: Vec<Node>,
    /// Nodes the state records but the cloud no longer runs (reclaimed, terminated outside
    /// gpuplan): apply drops them from state, so the drift is reported once, not forever.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::model::exact::vec")]
    pub forget: Vec<String>,
    /// The pool's zones, for falling back to another zone when one has no capacity (a
    /// batch over several zones has tried them all).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::model::exact::vec")]
    pub zones: Vec<String>,
    /// What to do when spot capacity is short: `on_demand`, `wait` or `fail`.
    #[serde(default)]
    pub fallback: Fallback,
    /// Create replacements before deleting (the default for pools).
    pub create_before_destroy: bool,
    /// The fallback record the state keeps for the pool when apply goes as planned: the
    /// prior one while nodes stay in their fallback placement (or this plan retries the
    /// preferred one), `None` once every node is where the pool prefers. Apply updates it
    /// when it falls back again or a retry finds the preferred placement still short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fell_back: Option<Box<crate::state::model::FallbackRecord>>,
    /// The creates try the preferred placement again after this recorded fallback: if they
    /// fall short, the nodes they were to replace stay and the wait before the next try
    /// doubles; if they succeed, the record is dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_preferred: Option<Box<crate::state::model::FallbackRecord>>,
    /// A floating pool: the placement apply records (where it lives and since when),
    /// from the plan's choice ([`PlacementDecision`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Box<crate::state::model::PlacementRecord>>,
    /// Where the floating pool lived before this plan: apply keeps it there when the
    /// target has no room for the nodes that were to move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_before: Option<Box<crate::state::model::PlacementRecord>>,
    /// A floating pool's other candidates of the same provider block, best first: where
    /// apply creates the nodes the chosen one has no room for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternates: Vec<Alternate>,
}

/// Another candidate of a floating pool, ready for apply to create nodes in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternate {
    pub region: String,
    pub zones: Vec<String>,
    /// The zones the candidate itself names (what the pool's configuration records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_zones: Vec<String>,
    pub instance_types: Vec<String>,
    /// Where the pool's nodes go there, as a plan would lay them out: (zone, capacity, count).
    pub layout: Vec<(String, crate::providers::Capacity, u32)>,
    /// The placement apply records when the pool's nodes go here (its provider block is
    /// the one apply creates them through).
    pub placement: crate::state::model::PlacementRecord,
    /// That provider block's kind (`sim`, `aws`, ...), for the spend ledger and the state.
    #[serde(default)]
    pub provider_kind: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceChange {
    pub address: Address,
    pub action: Action,
    /// Attributes before (from state) and after (from the spec), as JSON. Kept as text:
    /// the state records `after` as the resource's configuration, sharing the same copy.
    pub before: Option<JsonText>,
    pub after: Option<JsonText>,
    #[serde(deserialize_with = "crate::model::exact::vec")]
    pub reasons: Vec<Reason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolChange>,
    /// Addresses this change must wait for (dependencies for create/update; for deletes,
    /// the dependents that must go first).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::model::exact::vec")]
    pub after_changes: Vec<Address>,
    /// Paths of `before` and `after` derived from a sensitive variable (`labels`,
    /// `env.HF_TOKEN`): the spec's and those the state recorded. Every view prints
    /// `(sensitive)` at and under them. Boxed: most changes have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitive: Option<Box<Vec<String>>>,
}

/// What kind of drift a [`DriftItem`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DriftKind {
    /// A spot node the cloud took back.
    Reclaimed,
    /// A node terminated outside gpuplan.
    Removed,
    /// A node whose type, zone or capacity changed outside gpuplan.
    Changed,
    /// A node with this state's tags that the state does not know.
    Orphan,
    /// A node stopped outside gpuplan: not serving, possibly still billing; terminated.
    Stopped,
    /// A node whose GPUs show a fault the pool counts (docs/design/gpu-health.md).
    Unhealthy,
}

impl DriftKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::Reclaimed => "reclaimed",
            DriftKind::Removed => "removed",
            DriftKind::Changed => "changed",
            DriftKind::Orphan => "orphan",
            DriftKind::Stopped => "stopped",
            DriftKind::Unhealthy => "unhealthy",
        }
    }
}

impl std::fmt::Display for DriftKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something the clouds run that state or spec does not say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftItem {
    pub address: Address,
    pub kind: DriftKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Instances imported (`import {}`): counted apart, as Terraform does.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub import: usize,
    pub add: usize,
    pub change: usize,
    pub destroy: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Something the reader should know that is not a change: a pool running nodes in its
/// fallback placement, until the preferred one is tried again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanNote {
    pub address: Address,
    pub message: String,
}

/// What an [`Adoption`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdoptAction {
    /// Running instances become the pool's nodes: tagged and recorded, nothing launched.
    Import,
    /// A resource changes address: its instances' address tag is updated in place.
    Move,
    /// `removed { lifecycle { destroy = false } }`: gpuplan's tags come off, the state
    /// forgets it, the instances keep running.
    Forget,
}

impl AdoptAction {
    pub fn as_str(self) -> &'static str {
        match self {
            AdoptAction::Import => "import",
            AdoptAction::Move => "move",
            AdoptAction::Forget => "forget",
        }
    }
}

/// One resource imported, moved or forgotten, with its instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adoption {
    pub action: AdoptAction,
    /// Where the resource ends up (import, move), or the resource let go of (forget).
    pub address: Address,
    /// The address it moves from (move).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Address>,
    /// The provider block's local name and the region of the instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The instances, with their tags as they will be (import, move) or are (forget).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
    /// Tags set on every instance.
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub set_tags: Tags,
    /// Tag keys taken off every instance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_tags: Vec<String>,
    /// An import into a pool the state does not hold yet: its record, configuration
    /// from the spec, written before the instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceState>,
}

/// A refusal found while planning (e.g. `prevent_destroy`): the plan cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanError {
    pub address: Address,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// `file:line:col` of the spec block the error is about, when the spec has it. Planning
    /// knows spans, not files: the CLI, which holds the sources, fills it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The spec block or value the error is about, when it is not the address's own block
    /// (a `moved` or `import` block): `location` is made from it.
    #[serde(skip)]
    pub span: Option<crate::diag::Span>,
}

thread_local! {
    /// Set while this thread reads a plan whose changes other threads read
    /// ([`skipping_changes`]).
    static SKIP_CHANGES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f`, with plans deserialized on this thread leaving their change list empty (its JSON
/// is still read through, and must be well formed): a large plan file's reader parses
/// the changes on other threads meanwhile (`engine::planfile`).
pub fn skipping_changes<R>(f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            SKIP_CHANGES.set(false);
        }
    }
    SKIP_CHANGES.set(true);
    let _reset = Reset;
    f()
}

fn changes_or_skipped<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ResourceChange>, D::Error> {
    if SKIP_CHANGES.get() {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Vec::new())
    } else {
        crate::model::exact::vec(d)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// [`FILE_FORMAT_VERSION`] (a plan file's document; `plan --json` has its own).
    pub format_version: u32,
    /// The prior state this plan was made against; apply refuses if it moved.
    pub lineage: String,
    pub serial: u64,
    /// SHA-256 of the canonical spec; apply refuses if the spec changed.
    pub spec_digest: String,
    /// What made the plan besides the spec and the state (workspace, variable values,
    /// overrides, the spec's fingerprint), set when the plan is saved: `apply PLANFILE`
    /// uses them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<crate::plan::inputs::PlanInputs>,
    pub refreshed: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<Address>,
    /// `--replace` addresses: pools whose every node this plan replaces though nothing
    /// changed (Terraform's `-replace`). Not sticky: the next plan has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replace: Vec<Address>,
    /// `destroy` plans delete everything the state owns.
    #[serde(default)]
    pub destroy: bool,
    #[serde(deserialize_with = "changes_or_skipped")]
    pub changes: Vec<ResourceChange>,
    pub drift: Vec<DriftItem>,
    /// Notes that are not changes (see [`PlanNote`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<PlanNote>,
    pub summary: Summary,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<PlanError>,
    /// Filled by `cost/`: per pool, quota and fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostReport>,
    /// Filled by `policy/`: the verdict of every policy and quota.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<PolicyResult>,
    /// Job admission and launches, filled by `jobs::place` (admission order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<crate::model::JobPlacement>,
    /// Month-to-date spend from the ledger in state when the plan was made (refreshed
    /// plans with a ledger only), for the plan's readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<crate::state::spend::SpendReport>,
    /// Autoscaler decisions this plan carries out (from `reconcile`); apply records them
    /// in the state for the cooldown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub autoscale: Vec<ScaleAction>,
    /// Nodes made for jobs that no run in the state owns (the job was forgotten, or its
    /// record lost): apply terminates them. Each is also a drift item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphan_job_nodes: Vec<OrphanJobNode>,
    /// Unhealthy nodes of pools whose provider reads GPU health, with their evidence and
    /// what the plan does about them (docs/design/gpu-health.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<HealthEntry>,
    /// The faults read on live nodes, first seen, for the state to record (its `health`).
    #[serde(default, skip_serializing_if = "Evidence::is_empty")]
    pub evidence: Evidence,
    /// Imports, moves and forgets (`import`, `moved`, `removed` blocks): apply retags
    /// and records these first, launching and terminating nothing for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adoptions: Vec<Adoption>,
    /// Each floating pool's candidates, prices and choice (docs/design/floating-pools.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<PlacementDecision>,
    /// Every output of the spec or the state, by name, with what this plan does to its
    /// value in state (`plan::outputs`); `no-op` ones included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<OutputChange>,
    /// Every reservation of the spec or the state: what it commits and what apply does
    /// to it (`plan::reservations`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<crate::model::reservation::ReservationLine>,
}

/// What a plan does to one output value in state: `create`, `update`, `delete` or `no-op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputChange {
    pub name: String,
    pub action: Action,
    /// The value in state before the plan, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<crate::state::model::OutputState>,
    /// The value once the plan is applied; `None` when the output goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<crate::state::model::OutputState>,
}

impl OutputChange {
    /// Either side is sensitive: every view prints `(sensitive)` for both.
    pub fn sensitive(&self) -> bool {
        self.before.iter().chain(&self.after).any(|o| o.sensitive)
    }
}

/// What the plan decided for one floating pool, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlacementDecision {
    #[schemars(with = "String")]
    pub address: Address,
    /// `create` (a new pool), `stay` or `move`.
    pub action: PlacementAction,
    /// The candidate the pool lives in after this plan: `provider region`.
    pub chosen: String,
    /// Where it lives now, if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// One sentence, e.g. `stay: sim us-west-2 is 9 % cheaper, below min_saving 15 %`.
    pub reason: String,
    /// The quota that keeps the pool where it is: moving would break it while both sets
    /// of nodes run (the reason says how).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<String>,
    /// A move: nodes, GPUs and hourly cost while both sets run (from the plan's cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<crate::plan::report::Peak>,
    pub candidates: Vec<CandidateRow>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlacementAction {
    Create,
    Stay,
    Move,
}

impl PlacementAction {
    pub fn as_str(self) -> &'static str {
        match self {
            PlacementAction::Create => "create",
            PlacementAction::Stay => "stay",
            PlacementAction::Move => "move",
        }
    }
}

/// One candidate of a floating pool as the plan priced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CandidateRow {
    pub provider: String,
    pub region: String,
    /// The pool's hourly cost there at current prices (USD); `None`: not on offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hourly_usd: Option<f64>,
    /// Where the price comes from and its date: `live 2026-11-26T10:00:00Z`, `catalog 2025-06-01`.
    pub price: String,
    /// `ok`, or what is known to be short, e.g. `short since 2026-11-26T09:00:00Z: ...`.
    pub capacity: String,
    /// `current`, `chosen`, `held` (a move there waits for a quota), or empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
}

/// A node made for a job that no run in the state owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrphanJobNode {
    /// The provider block's local name and the region, to terminate it.
    pub provider: String,
    pub region: String,
    pub node_id: String,
    /// The job its `gpuplan:job` tag names.
    pub job: String,
}

/// An autoscaler's decision for one pool, made before planning: the plan converges the
/// pool to `to` nodes (instead of the count the state recorded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleAction {
    pub pool: Address,
    pub from: u32,
    pub to: u32,
    /// When scaling down: the idle nodes to remove first, by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Why, e.g. `3 jobs waited > 5m`.
    pub reason: String,
    /// RFC 3339 time of the decision.
    pub at: String,
}

impl Plan {
    /// Changes to the fleet (resources, nodes, jobs, adoptions, cordons). Output values alone are
    /// not: see [`Plan::has_output_changes`].
    pub fn has_changes(&self) -> bool {
        self.changes.iter().any(|c| c.action != Action::NoOp)
            || self
                .jobs
                .iter()
                .any(|j| j.needs_launch() || j.nodes_to_release().next().is_some() || !j.adopted.is_empty())
            || !self.orphan_job_nodes.is_empty()
            || !self.adoptions.is_empty()
            || self.cordons().next().is_some()
    }

    /// The quarantined nodes apply cordons (docs/design/gpu-health.md).
    pub fn cordons(&self) -> impl Iterator<Item = (&HealthEntry, &Cordon)> {
        self.health.iter().filter_map(|h| h.cordon.as_ref().map(|c| (h, c)))
    }

    /// Output values the plan sets or removes in state (applying it writes them, and
    /// touches no cloud).
    pub fn has_output_changes(&self) -> bool {
        self.outputs.iter().any(|o| o.action != Action::NoOp)
    }

    /// Job runs whose node stopped with no exit code yet, for the state to record (the
    /// grace for the exit code counts from the stop; applying it touches no cloud).
    pub fn records_stops(&self) -> bool {
        self.jobs.iter().any(|j| !j.stopped.is_empty())
    }

    /// Anything for `apply` to do: fleet changes, output values, stops or GPU faults to
    /// record.
    pub fn has_work(&self) -> bool {
        self.has_changes() || self.has_output_changes() || self.records_stops() || !self.evidence.is_empty()
    }

    /// Does the policy verdict forbid applying this plan? A plan that does not change the
    /// fleet is never denied: its failing policies fail on the fleet as it stands
    /// (standing violations, docs/design/cli.md, "The daily loop"), which no apply of it changes.
    pub fn denied(&self) -> bool {
        self.has_changes() && self.policies.iter().any(PolicyResult::denies)
    }

    pub fn summarize(&mut self) {
        let mut s = Summary::default();
        for c in &self.changes {
            match c.action {
                Action::Create => s.add += 1,
                Action::Update => s.change += 1,
                Action::Delete => s.destroy += 1,
                Action::Replace => {
                    s.add += 1;
                    s.destroy += 1;
                }
                Action::NoOp | Action::Read => {}
            }
        }
        s.import = self.adoptions.iter().filter(|a| a.action == AdoptAction::Import).map(|a| a.nodes.len()).sum();
        self.summary = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_codes_print_and_parse_as_plans_write_them() {
        for (code, text) in ReasonCode::PLAIN {
            assert_eq!(code.to_string(), text);
            assert_eq!(text.parse::<ReasonCode>(), Ok(code.clone()));
            assert_eq!(serde_json::to_string(&code).unwrap(), format!("\"{text}\""));
        }
        let changed = ReasonCode::Changed("mix.spot_percent".into());
        assert_eq!(changed.to_string(), "changed:mix.spot_percent");
        assert_eq!(serde_json::from_str::<ReasonCode>("\"changed:mix.spot_percent\"").unwrap(), changed);
        assert!(serde_json::from_str::<ReasonCode>("\"explode\"").is_err(), "an unknown code is refused");
    }
}
