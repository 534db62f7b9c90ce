//! The typed, validated spec: what the rest of gpuplan consumes.
//!
//! Produced by `decode.rs` from HCL and YAML alike. Every user-written value is a
//! [`Spanned`] so later phases (graph, plan, policy) can point at the line that caused a
//! problem. `Spanned` compares and serializes by value only, so the same fleet written
//! in HCL and in YAML yields equal `Spec`s and the same digest.
//!
//! The serde shape of these types is the YAML spelling; `schemas/spec.schema.json` is
//! generated from them (see `crate::schema`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::addr::{Address, InstanceKey};
use crate::diag::Span;
pub use crate::model::secret::EnvValue;
use crate::spec::eval::Value;

// Shared vocabulary, defined in `model/` (layer 0); the spec speaks it too.
pub use crate::model::{Priority, ProviderKind};
pub use crate::spec::spanned::{Duration, Spanned};

/// The whole fleet description after evaluation, keyed by address.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "gpuplan spec",
    description = "A gpuplan fleet spec in YAML. HCL files use the same attributes with block syntax."
)]
pub struct Spec {
    /// Keyed by provider name, or by alias when the block sets one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, Provider>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    // Boxed: a pool is about 700 bytes, and the map's nodes hold eleven entries each. Held
    // inline, every insert while decoding moved pools around and every node was 12 KB of
    // fresh memory; at 2,000 pools that was a third of `validate`'s page faults. (Comments,
    // not doc comments: those become the JSON Schema's descriptions.)
    #[schemars(with = "BTreeMap<String, GpuPool>")]
    pub gpu_pools: BTreeMap<Address, Box<GpuPool>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, Quota>")]
    pub quotas: BTreeMap<Address, Quota>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, JobTemplate>")]
    pub job_templates: BTreeMap<Address, JobTemplate>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, Job>")]
    pub jobs: BTreeMap<Address, Job>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, Autoscaler>")]
    pub autoscalers: BTreeMap<Address, Autoscaler>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, Reservation>")]
    pub reservations: BTreeMap<Address, Reservation>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, Variable>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub locals: BTreeMap<String, Spanned<Value>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, Output>,
    /// `gpuplan { backend "KIND" { ... } }`: where the state lives; `None` is local.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<crate::spec::backend::BackendConfig>,
    /// `gpuplan { encryption { ... } }`: how the state, journal and saved plans are sealed
    /// (docs/design/secrets.md). Not part of the plan's digest or the schema: it says how
    /// files are stored, not what the fleet is.
    #[serde(skip)]
    #[schemars(skip)]
    pub encryption: Option<crate::model::encryption::EncryptionConfig>,
    /// Paths into each resource's configuration derived from a sensitive variable, by
    /// `kind.name` (`spec::taint`); derived from the rest, so not part of the digest.
    #[serde(skip)]
    pub sensitive: BTreeMap<String, Vec<String>>,
    /// `moved {}` blocks: addresses renamed without replacing anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<crate::spec::adopt::Moved>,
    /// `removed {}` blocks: resources let go of, destroyed or (`destroy = false`) not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removals: Vec<crate::spec::adopt::Removed>,
    /// `import {}` blocks: running instances taken over by a pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<crate::spec::adopt::Import>,
}

/// `provider "aws" { region = "us-east-1" }`. Credentials are never stored here except
/// when written in the block, and are never serialized into plans or state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// The block label: `sim`, `aws`, `tencentcloud` or `alicloud`.
    #[serde(skip)]
    pub kind: Spanned<Option<ProviderKind>>,
    /// A second configuration of the same cloud; pools refer to it by this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<Spanned<String>>,
    /// Default region for pools of this provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<Spanned<String>>,
    /// API endpoint override (emulators, private endpoints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Spanned<String>>,
    /// Named credentials profile (AWS shared config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Spanned<String>>,
    /// Access key id; prefer the cloud's standard environment variables.
    #[serde(default, skip_serializing)]
    pub access_key: Option<Spanned<String>>,
    /// Secret key; prefer the cloud's standard environment variables. Never serialized.
    #[serde(default, skip_serializing)]
    pub secret_key: Option<Spanned<String>>,
    /// Subnet per zone (AWS, Tencent VPC subnets, Alibaba vSwitches).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subnets: BTreeMap<String, Spanned<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<Spanned<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_name: Option<Spanned<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iam_instance_profile: Option<Spanned<String>>,
    /// Default machine image for pools of this provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Spanned<String>>,
    /// Kubernetes cluster (TKE / ACK) for the Kubernetes job backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<Spanned<String>>,
    /// CNY per USD used to show CNY prices in USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cny_per_usd: Option<Spanned<f64>>,
    /// sim: seed for deterministic ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<Spanned<u64>>,
    /// sim: injected latency per API call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Spanned<Duration>>,
    /// sim: probability (0–1) that a call fails with a retryable error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<Spanned<f64>>,
    /// sim: nodes each zone can hold per instance type before it reports no capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_capacity: Option<Spanned<u32>>,
    /// sim: how long a launched job runs before it finishes (default 60s;
    /// `GPUPLAN_SIM_JOB_DURATION` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_duration: Option<Spanned<Duration>>,
}

impl Provider {
    /// The name pools use to refer to this provider: the alias, else the kind.
    pub fn local_name(&self) -> String {
        match (&self.alias, self.kind.value) {
            (Some(a), _) => a.value.clone(),
            (None, Some(k)) => k.to_string(),
            (None, None) => String::new(),
        }
    }
}

/// Meta-arguments shared by every resource block.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Meta {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Spanned<Address>>,
    /// Number of instances (`gpu_pool.x[0]`, `gpu_pool.x[1]`, ...); `count.index` inside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<Spanned<u64>>,
    /// A map or set of strings; one instance per key, `each.key`/`each.value` inside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<Spanned<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// Instance key after expansion (not written by users).
    #[serde(skip)]
    pub key: Option<InstanceKey>,
    /// The block's span (header through closing brace).
    #[serde(skip)]
    pub span: Span,
    /// Every resource this one refers to in an expression, with where.
    #[serde(skip)]
    pub references: Vec<Spanned<Address>>,
}

/// Equality is semantic: where a block sits and how its references were spelled
/// (`gpu_pool.train` or `"train"`) do not matter.
impl PartialEq for Meta {
    fn eq(&self, o: &Self) -> bool {
        self.depends_on == o.depends_on
            && self.count == o.count
            && self.for_each == o.for_each
            && self.lifecycle == o.lifecycle
            && self.key == o.key
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    /// Refuse any plan that would delete or replace this resource.
    #[serde(default, skip_serializing_if = "is_false")]
    pub prevent_destroy: Spanned<bool>,
    /// Replace by creating the new nodes first (the default for pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_before_destroy: Option<Spanned<bool>>,
    /// Attributes whose changes the plan ignores (e.g. `nodes.desired`, `labels`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_changes: Vec<Spanned<String>>,
}

fn is_false(b: &Spanned<bool>) -> bool {
    !b.value
}

/// `gpu_pool "NAME"`: nodes of one GPU shape on one provider.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuPool {
    /// The provider block's name or alias; empty for a floating pool (`placement`), whose
    /// provider and region the plan chooses from its candidates.
    #[serde(default, skip_serializing_if = "is_blank")]
    pub provider: Spanned<String>,
    /// Defaults to the provider's region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<Spanned<String>>,
    /// Zones to spread nodes over; default: every zone of the region offering the type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<Spanned<String>>,
    /// Canonical GPU model name from the catalog, e.g. `A100-80GB`.
    pub gpu: Spanned<String>,
    #[schemars(extend("minimum" = 1, "maximum" = 16))]
    pub gpus_per_node: Spanned<u32>,
    /// Allowed instance types; default: the cheapest catalog types that match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_types: Vec<Spanned<String>>,
    /// Machine image; defaults to the provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Spanned<String>>,
    pub nodes: Nodes,
    #[serde(default)]
    pub mix: Mix,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, Spanned<String>>,
    /// MIG: every GPU is cut into slices of this profile (`1g.10gb`); a job's `gpus` on
    /// this pool count slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<Spanned<String>>,
    // Boxed, as is `placement`: few pools have one, and inline they were a third of every
    // pool's size.
    /// Run the pool's jobs as Kubernetes Jobs in this cluster (docs/design/jobs.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<Box<Kubernetes>>,
    /// A floating pool: instead of `provider`/`region`, the places it may live in
    /// (docs/design/floating-pools.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Box<Placement>>,
    /// GPU health checks and repair (docs/design/gpu-health.md); absent: the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<Box<Health>>,
    /// `disk {}`: the nodes' root and data disks (docs/design/big-runs.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<Box<DiskBlock>>,
    /// `network {}`: a fast fabric and a cluster placement group (docs/design/big-runs.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Box<NetworkBlock>>,
    /// `capacity {}`: reserved capacity the nodes launch into first (docs/design/big-runs.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Box<crate::spec::capacity_use::CapacityUse>>,
    #[serde(flatten)]
    pub meta: Meta,
}

/// `disk {}`: the root disk (default 200 GB of the cloud's first disk type) and data disks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiskBlock {
    /// Root disk size in GB (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 20, "maximum" = 16384))]
    pub size_gb: Option<Spanned<u32>>,
    /// The cloud's disk type: aws `gp3` (default), `gp2`, `io2`; tencentcloud `CLOUD_BSSD`
    /// (default), `CLOUD_PREMIUM`, `CLOUD_SSD`, `CLOUD_HSSD`; alicloud `cloud_essd`
    /// (default), `cloud_auto`, `cloud_efficiency`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<Spanned<String>>,
    /// Data disks, each `{ size_gb, type }` (type defaults to the root disk's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<DataDisk>,
    #[serde(skip)]
    pub span: crate::diag::Span,
}

/// One data disk of `disk { data = [...] }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataDisk {
    #[schemars(extend("minimum" = 1, "maximum" = 65536))]
    pub size_gb: Spanned<u32>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<Spanned<String>>,
}

/// `network {}`: the pool's fabric and placement group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkBlock {
    /// `efa` (aws: as many EFA interfaces as the type takes; needs `security_groups`),
    /// `rdma` (tencentcloud: HCC types in an HPC cluster per pool and zone) or `erdma`
    /// (alicloud: an elastic RDMA interface per node); default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<Spanned<crate::model::hardware::Fabric>>,
    /// `cluster`: one placement group per pool and zone, made and removed by gpuplan (aws: a
    /// cluster placement group; alicloud: a `LowLatency` deployment set; none on tencentcloud,
    /// where `fabric = "rdma"` packs nodes in an HPC cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group: Option<Spanned<PlacementGroup>>,
    #[serde(skip)]
    pub span: crate::diag::Span,
}

/// `network { placement_group }`: nodes packed close together for low latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlacementGroup {
    Cluster,
}

fn is_blank(s: &Spanned<String>) -> bool {
    s.value.is_empty()
}

/// `placement {}`: the candidates a floating pool may live in and how it picks one.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    pub candidates: Vec<Candidate>,
    /// `cheapest` (default) or `ordered` (the first candidate with capacity).
    #[serde(default)]
    pub strategy: Spanned<Strategy>,
    /// Move only when another candidate is at least this many percent cheaper than the
    /// pool's current hourly cost (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_saving: Option<Spanned<f64>>,
    /// Keep a placement at least this long before a move for price (default 1h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub min_stay: Option<Spanned<Duration>>,
    /// The block's span, for messages about the whole placement.
    #[serde(skip)]
    pub span: Span,
}

impl Placement {
    /// `min_saving`, else 10 percent.
    pub fn min_saving(&self) -> f64 {
        self.min_saving.as_ref().map_or(10.0, |m| m.value)
    }
    /// `min_stay`, else one hour.
    pub fn min_stay(&self) -> std::time::Duration {
        self.min_stay.as_ref().map_or(std::time::Duration::from_secs(3600), |d| d.value.0)
    }
}

/// One place a floating pool may live: a provider block, its region, optional zones.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    pub provider: Spanned<String>,
    pub region: Spanned<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<Spanned<String>>,
}

impl Candidate {
    /// `provider region` as users read it.
    pub fn label(&self) -> String {
        format!("{} {}", self.provider.value, self.region.value)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// The cheapest candidate with capacity, moving only for `min_saving`.
    #[default]
    Cheapest,
    /// The first candidate (in the order written) with capacity.
    Ordered,
}

impl GpuPool {
    /// This pool placed in candidate `c`: the provider, region and zones the rest of
    /// gpuplan reads (the `placement` block stays, so the pool is still known as floating).
    pub fn placed_in(&self, c: &Candidate) -> GpuPool {
        let mut p = self.clone();
        p.provider = c.provider.clone();
        p.region = Some(c.region.clone());
        p.zones = c.zones.clone();
        p
    }
}

impl GpuPool {
    /// MIG slices per GPU on this pool (1 without MIG, or with a profile validation refuses).
    pub fn slices_per_gpu(&self) -> u32 {
        self.mig.as_ref().and_then(|m| crate::catalog::mig_slices(&self.gpu.value, &m.value)).unwrap_or(1)
    }

    /// What a job's `gpus` count on this pool, per node: GPUs, or MIG slices.
    pub fn job_units_per_node(&self) -> u32 {
        self.gpus_per_node.value * self.slices_per_gpu()
    }
}

/// A pool's `kubernetes {}` block: the cluster its nodes join and its jobs run in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Kubernetes {
    /// A TKE or ACK cluster id: its kubeconfig is fetched with the pool's provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<Spanned<String>>,
    /// A kubeconfig file (any cluster); relative paths are relative to the spec folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<Spanned<String>>,
    /// The kubeconfig context; default: its `current-context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Spanned<String>>,
    /// The namespace Jobs are created in.
    pub namespace: Spanned<String>,
    /// ACK: the ECS key pair ACK logs in with to attach the pool's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_pair: Option<Spanned<String>>,
    /// EKS (an aws pool with `kubeconfig`): the cluster's service CIDR, which nodeadm
    /// needs to join nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_cidr: Option<Spanned<String>>,
}

pub use crate::spec::pool_health::{Health, HealthAction, Readiness};

impl GpuPool {
    /// The pool's `health {}`, or the defaults when it has none.
    pub fn health(&self) -> std::borrow::Cow<'_, Health> {
        match &self.health {
            Some(h) => std::borrow::Cow::Borrowed(h),
            None => std::borrow::Cow::Owned(Health::default()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Nodes {
    #[serde(default)]
    pub min: Spanned<u32>,
    pub desired: Spanned<u32>,
    pub max: Spanned<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// When spot is short, launch the missing nodes on-demand.
    #[default]
    OnDemand,
    /// Leave the shortfall pending and retry on the next apply/reconcile.
    Wait,
    /// Fail the apply.
    Fail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[derive(Default)]
pub struct Mix {
    /// The first N nodes are on-demand.
    #[serde(default)]
    pub on_demand_base: Spanned<u32>,
    /// Percent (0–100) of the nodes above the base that run on spot.
    #[serde(default)]
    #[schemars(extend("maximum" = 100))]
    pub spot_percent: Spanned<u32>,
    #[serde(default)]
    pub fallback: Spanned<Fallback>,
    /// Highest spot price per node-hour in USD; default: up to the on-demand price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_spot_price: Option<Spanned<f64>>,
    /// After a fallback (another zone, on-demand for spot), how long until the preferred
    /// placement is tried again; doubles after each failed try, at most 24 h. Default 30m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub retry_preferred: Option<Spanned<Duration>>,
}

impl Mix {
    /// `retry_preferred`, else 30 minutes.
    pub fn retry_preferred(&self) -> std::time::Duration {
        self.retry_preferred.as_ref().map_or(std::time::Duration::from_secs(30 * 60), |d| d.value.0)
    }
}

/// `quota "NAME"`: a team's limits over pools.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Quota {
    /// Pools this quota covers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<Reference>")]
    pub pools: Vec<Spanned<Address>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gpus: Option<Spanned<u32>>,
    /// Allowed GPU models (catalog names); empty allows all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_gpus: Vec<Spanned<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Warn when a plan reaches this percent of a limit (default 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warn_percent: Option<Spanned<u32>>,
    /// Webhooks (Slack-compatible JSON) that `reconcile` tells when month-to-date spend
    /// crosses a `budget.alert_at` threshold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<Spanned<String>>,
    /// Fair share: when several quotas' jobs wait for room, GPUs go to the quota using
    /// the fewest per unit of weight first (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<Spanned<f64>>,
    #[serde(flatten)]
    pub meta: Meta,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hourly_usd: Option<Spanned<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly_usd: Option<Spanned<f64>>,
    /// Percentages of `monthly_usd` whose crossing (by month-to-date spend) `reconcile`
    /// posts to the quota's `notify` hooks, once per month each; empty means 80 and 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alert_at: Vec<Spanned<u32>>,
}

impl Budget {
    /// The alert thresholds in force, ascending: `alert_at`, else 80 and 100.
    pub fn thresholds(&self) -> Vec<u32> {
        let mut t: Vec<u32> = self.alert_at.iter().map(|a| a.value).collect();
        if t.is_empty() {
            t = vec![80, 100];
        }
        t.sort_unstable();
        t.dedup();
        t
    }
}

/// `job_template "NAME"`: what a job runs and needs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobTemplate {
    /// Container image.
    pub image: Spanned<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<Spanned<String>>,
    /// Environment variables: text, or `secret("SOURCE:NAME")` (YAML `{secret: "SOURCE:NAME"}`), a reference whose value never leaves its source ([secrets](../design/secrets.md)).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Spanned<EnvValue>>,
    /// The GPU model jobs without a `pool` run on: the cheapest pool of it with room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Spanned<String>>,
    /// GPUs per replica.
    pub gpus: Spanned<u32>,
    #[serde(default)]
    pub priority: Spanned<Priority>,
    /// May run on spot nodes (and be preempted).
    #[serde(default)]
    pub preemptible: Spanned<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runtime: Option<Spanned<Duration>>,
    #[serde(default)]
    pub retries: Spanned<u32>,
    /// Where the job writes checkpoints; passed as `GPUPLAN_CHECKPOINT_URI`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_uri: Option<Spanned<String>>,
    #[serde(flatten)]
    pub meta: Meta,
}

/// `job "NAME"`: a launch of a template on a pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Job {
    #[schemars(with = "Reference")]
    pub template: Spanned<Address>,
    /// Optional when the template names a `gpu` (placement picks the pool).
    #[serde(default = "no_pool")]
    #[schemars(with = "Reference")]
    pub pool: Spanned<Address>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Reference>")]
    pub quota: Option<Spanned<Address>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<Spanned<String>>,
    /// Environment variables: text, or `secret("SOURCE:NAME")` (YAML `{secret: "SOURCE:NAME"}`), a reference whose value never leaves its source ([secrets](../design/secrets.md)).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Spanned<EnvValue>>,
    #[serde(default = "one")]
    pub replicas: Spanned<u32>,
    /// A job without `pool` whose template names a `gpu`: every pool of that model it
    /// may use (within its quota), first the default `pool` above; placement picks the
    /// cheapest with room. Derived, never written.
    #[serde(skip)]
    pub pool_choices: Vec<Address>,
    #[serde(flatten)]
    pub meta: Meta,
}

/// A job without `pool` until `validate::resolve_job_pools` picks one.
fn no_pool() -> Spanned<Address> {
    Spanned::new(Address::new(crate::addr::Kind::GpuPool, ""), Default::default())
}

/// Schema only: how a spec refers to another resource: `gpu_pool.train`, just `train`
/// where the kind is implied, or an interpolation.
pub struct Reference;

impl JsonSchema for Reference {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Reference".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [
                {
                    "type": "string",
                    "description": "`gpu_pool.train`, or just `train` where the kind is implied",
                    "pattern": "^((gpu_pool|quota|job_template|job|autoscaler)\\.)?[A-Za-z_][A-Za-z0-9_-]*(\\[(\\d+|\"[^\"]*\")\\])?$"
                },
                { "$ref": "#/$defs/Interpolation" }
            ]
        })
    }
}

fn one() -> Spanned<u32> {
    Spanned::new(1, Span::default())
}

/// `autoscaler "NAME"`: scaling rules for one pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Autoscaler {
    #[schemars(with = "Reference")]
    pub pool: Spanned<Address>,
    /// Scale up when a job has waited longer than this (default 5m).
    #[serde(default)]
    pub queue_wait: Spanned<Duration>,
    /// Scale up when GPU utilization is above this percent (default 80).
    #[serde(default)]
    #[schemars(extend("minimum" = 1, "maximum" = 100))]
    pub utilization_above: Spanned<u32>,
    /// Scale down nodes idle longer than this (default 15m).
    #[serde(default)]
    pub idle_for: Spanned<Duration>,
    /// Nodes added or removed per step (default 1).
    #[serde(default)]
    pub step: Spanned<u32>,
    /// Minimum time between two scaling actions (default 5m).
    #[serde(default)]
    pub cooldown: Spanned<Duration>,
    #[serde(flatten)]
    pub meta: Meta,
}

/// `reservation "NAME"`: reserved capacity bought ahead (docs/design/big-runs.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reservation {
    /// The provider block it is bought from.
    pub provider: Spanned<String>,
    /// Default: the provider's region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<Spanned<String>>,
    pub zone: Spanned<String>,
    /// `on_demand` (cancellable, billed by the hour) or `capacity_block` (a fixed window,
    /// paid up front, not cancellable).
    #[schemars(with = "String")]
    pub kind: Spanned<crate::model::reservation::ReservationKind>,
    pub instance_type: Spanned<String>,
    /// Instances reserved (`count` is the meta-argument that makes several blocks).
    pub instance_count: Spanned<u32>,
    /// The earliest start (RFC 3339); a Capacity Block's offering starts at or after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Spanned<String>>,
    /// How long it holds: a Capacity Block's window (whole days); an On-Demand
    /// reservation's end, if set (else until cancelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Spanned<Duration>>,
    /// A Capacity Block's up-front price must not exceed this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_price_usd: Option<Spanned<f64>>,
    /// Required for a purchase that cannot be cancelled.
    #[serde(default, skip_serializing_if = "is_false")]
    pub commit: Spanned<bool>,
    #[serde(flatten)]
    pub meta: Meta,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VarType {
    #[default]
    Any,
    String,
    Number,
    Bool,
    List,
    Map,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Variable {
    #[serde(default, rename = "type")]
    pub ty: Spanned<VarType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Spanned<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<String>>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub sensitive: Spanned<bool>,
    /// The value in force: `--var`, `--var-file` and `*.auto.vars.hcl` (later wins), then
    /// `GPUPLAN_VAR_<name>`, then `default`.
    #[serde(skip)]
    pub value: Spanned<Value>,
    /// Where `value` came from.
    #[serde(skip)]
    pub from: VarSource,
}

/// Where a variable's value came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum VarSource {
    #[default]
    Default,
    /// `--var`.
    Flag,
    /// A var file, by its name as shown.
    File(String),
    /// Elsewhere: the environment, a saved plan (how it is shown).
    Given(String),
}

impl std::fmt::Display for VarSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VarSource::Default => f.write_str("default"),
            VarSource::Flag => f.write_str("--var"),
            VarSource::File(name) => write!(f, "`{name}`"),
            VarSource::Given(from) => f.write_str(from),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Output {
    pub value: Spanned<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<String>>,
    /// `sensitive = true`, or the value reads a sensitive variable (derived values are
    /// sensitive too).
    #[serde(default, skip_serializing_if = "is_false")]
    pub sensitive: Spanned<bool>,
    /// The resources the value reads, directly or through locals: a targeted plan takes
    /// the output only when it targets all of them.
    #[serde(skip)]
    pub reads: Vec<crate::addr::Address>,
}
