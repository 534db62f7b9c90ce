//! Nodes, offers, job runs and provider errors: what the provider seam, the plan, the
//! state and the executor all speak of. Plain data: no I/O, no SDK types.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::addr::Address;
use crate::model::{ProviderKind, Tags};

/// Tag keys every object gpuplan creates carries (see DESIGN "Cloud ownership").
pub const TAG_MANAGED: &str = "gpuplan:managed";
pub const TAG_LINEAGE: &str = "gpuplan:lineage";
pub const TAG_ADDRESS: &str = "gpuplan:address";
/// The provider block's local name, so orphans of a pool nobody remembers can be deleted.
pub const TAG_PROVIDER: &str = "gpuplan:provider";
/// On a node made for one job: the job's address, its replica and attempt numbers.
pub const TAG_JOB: &str = "gpuplan:job";
pub const TAG_ATTEMPT: &str = "gpuplan:attempt";
pub const TAG_REPLICA: &str = "gpuplan:replica";
/// On a node launched into reserved capacity: the reservation's cloud id (`cr-…`).
pub const TAG_RESERVATION: &str = "gpuplan:reservation";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Capacity {
    OnDemand,
    Spot,
    /// Launched into a reservation (`capacity { reservation }`, docs/design/big-runs.md):
    /// an On-Demand Capacity Reservation or a Capacity Block. Planned and priced as
    /// on-demand capacity ([`Capacity::market`]) at the reservation's price, never as
    /// spot; shown as `reserved`.
    Reserved,
}

impl Capacity {
    pub fn as_str(self) -> &'static str {
        match self {
            Capacity::OnDemand => "on-demand",
            Capacity::Spot => "spot",
            Capacity::Reserved => "reserved",
        }
    }

    /// The market a node is planned and priced under: reserved capacity is on-demand
    /// capacity paid for ahead (its price comes from the reservation), never spot.
    pub fn market(self) -> Capacity {
        match self {
            Capacity::Reserved => Capacity::OnDemand,
            c => c,
        }
    }
}

impl fmt::Display for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    Pending,
    Running,
    /// Terminating or terminated by gpuplan.
    Terminated,
    /// Reclaimed by the cloud (spot interruption).
    Reclaimed,
    /// Stopped (or stopping) outside gpuplan: not serving, but not gone either: a stopped
    /// instance may still bill (its disks always, the instance itself unless the cloud's
    /// stop-charging mode applies). Plans report it and terminate it.
    Stopped,
}

/// One GPU node as a cloud reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: String,
    /// The pool it belongs to (from the `gpuplan:address` tag).
    pub pool: Address,
    pub instance_type: String,
    pub region: String,
    pub zone: String,
    pub capacity: Capacity,
    pub state: NodeState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// All tags, including gpuplan's ownership tags.
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub tags: Tags,
    /// The provider block the node was launched through, as the state records it for the
    /// nodes of floating pools (a pool moving across provider blocks has nodes in two).
    /// Clouds never report it; `None` means the pool's own provider block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

impl Node {
    /// A node launched into a reservation (tagged `gpuplan:reservation`) as gpuplan shows and
    /// records it: `reserved`. Clouds list such nodes as on-demand, and states written
    /// before `reserved` existed recorded them so; both read as reserved.
    pub fn read_reserved(&mut self) {
        if self.capacity == Capacity::OnDemand && self.tags.contains_key(TAG_RESERVATION) {
            self.capacity = Capacity::Reserved;
        }
    }

    /// The provider block the node lives in: its own record, else its pool's `pool_provider`.
    pub fn provider_or<'a>(&'a self, pool_provider: &'a str) -> &'a str {
        self.provider.as_deref().unwrap_or(pool_provider)
    }

    pub fn is_live(&self) -> bool {
        matches!(self.state, NodeState::Pending | NodeState::Running)
    }
}

/// Create `count` nodes of one shape in one zone (or, with `zones`, in any of several):
/// one provider call per batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateNodes {
    pub pool: Address,
    pub region: String,
    pub zone: String,
    /// Every zone the provider may place this batch in, in the one call, when it chooses
    /// zones itself (EC2 fleets: `PoolShape::provider_places_zones`); `zone` is the first.
    /// Empty: `zone` alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::model::exact::vec")]
    pub zones: Vec<String>,
    /// Allowed instance types, preferred first; the provider may fall back within them.
    #[serde(deserialize_with = "crate::model::exact::vec")]
    pub instance_types: Vec<String>,
    pub capacity: Capacity,
    pub count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Highest spot price per node-hour in USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_spot_price: Option<f64>,
    /// Idempotency token derived from the plan: the same token never launches twice.
    pub token: String,
    /// Tags to set, including the ownership tags.
    pub tags: Tags,
    /// Cloud-init user data (job launches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// Join the nodes to a managed Kubernetes cluster once they exist (TKE, ACK).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<ClusterJoin>,
    /// Disks, fabric and placement group (`disk {}`, `network {}`); `None`: the cloud's
    /// defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<Box<crate::model::hardware::Hardware>>,
    /// Launch into this reservation (`capacity { reservation }`); `None`: the open market.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Box<crate::model::reservation::ReservationTarget>>,
}

/// A pool the spec has and the state holds no record of, as its first create will need
/// it: a provider may ask what that create asks before launching (on AWS the type check,
/// the subnet look-up and the launch template's look-up) while refresh lists the fleet,
/// instead of in a round trip of its own after the plan ([`Provider::read_ahead`]).
///
/// [`Provider::read_ahead`]: crate::providers::Provider::read_ahead
#[derive(Debug, Clone, PartialEq)]
pub struct NewPool {
    pub pool: Address,
    pub region: String,
    /// Every zone the pool may use.
    pub zones: Vec<String>,
    /// Allowed instance types, preferred first.
    pub instance_types: Vec<String>,
    /// The lineage of the state its nodes will carry.
    pub lineage: String,
}

/// A pool's nodes join its `kubernetes { cluster_id }` cluster with gpuplan's labels
/// (`gpuplan.dev/pool`, `gpuplan.dev/capacity`) and, on spot nodes, its taint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterJoin {
    pub cluster_id: String,
    /// The managed service the cluster runs on, for the plan: `TKE`, `ACK` or `EKS`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service: String,
    pub labels: Vec<(String, String)>,
    /// `(key, value, effect)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<(String, String, String)>,
    /// The ECS key pair ACK logs in with to attach a node (`kubernetes.key_pair`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_pair: Option<String>,
    /// EKS: the cluster's service CIDR; `cluster_id` is then the kubeconfig locator
    /// (`kubeconfig:<path>#<context>`) the cluster's name, endpoint and CA are read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_cidr: Option<String>,
}

/// The node label Kubernetes Jobs select capacity by; spot nodes are also tainted with
/// it (`gpuplan.dev/capacity=spot:NoSchedule`, docs/design/jobs.md, "Where jobs run").
pub const CAPACITY_LABEL: &str = "gpuplan.dev/capacity";

impl ClusterJoin {
    /// Make the join fit nodes of `cap`: the capacity label follows, and only spot nodes
    /// carry the spot taint (a spot batch that falls back to on-demand joins untainted).
    pub fn set_capacity(&mut self, cap: Capacity) {
        self.labels.retain(|(k, _)| k != CAPACITY_LABEL);
        self.labels.push((CAPACITY_LABEL.to_string(), cap.as_str().to_string()));
        self.taints = match cap {
            Capacity::Spot => vec![(CAPACITY_LABEL.to_string(), "spot".to_string(), "NoSchedule".to_string())],
            Capacity::OnDemand | Capacity::Reserved => vec![],
        };
    }

    /// How the plan says it: `joins TKE cls-8xk2p4 as spot, tainted`. EKS clusters are
    /// named by their kubeconfig, which the plan does not repeat.
    pub fn describe(&self, capacity: Capacity) -> String {
        let cluster = match self.service.as_str() {
            "" => "the cluster".to_string(),
            "EKS" => "EKS".to_string(),
            service => format!("{service} {}", self.cluster_id),
        };
        let tainted = if self.taints.is_empty() { "" } else { ", tainted" };
        format!("joins {cluster} as {capacity}{tainted}")
    }
}

impl CreateNodes {
    /// The zones this batch may go to: `zones`, else `zone` alone.
    pub fn placement_zones(&self) -> Vec<&str> {
        if self.zones.is_empty() { vec![self.zone.as_str()] } else { self.zones.iter().map(String::as_str).collect() }
    }

    /// Where the batch goes, for messages: `us-east-1a` or `us-east-1a, us-east-1b`.
    pub fn placement(&self) -> String {
        self.placement_zones().join(", ")
    }
}

/// What a create call achieved: it may be partial (`errors` say why the rest failed).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateResult {
    pub nodes: Vec<Node>,
    pub errors: Vec<ProviderError>,
}

/// How the executor should treat a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// A transient fault; retry with backoff.
    Retryable,
    /// Rate limited; back off longer, then retry.
    Throttled,
    /// No capacity for this shape in this zone; try the pool's fallback.
    OutOfCapacity,
    /// An account limit; retrying will not help until the limit is raised.
    Quota,
    /// The request is wrong (bad parameter, price too low); do not retry.
    Invalid,
    /// Credentials missing, wrong or not allowed.
    Auth,
    /// Anything else; stop.
    Fatal,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ProviderError {
    pub class: ErrorClass,
    /// The cloud's own error code, e.g. `InsufficientInstanceCapacity`.
    pub code: String,
    pub message: String,
    /// Seconds to wait before retrying, when the cloud says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<f64>,
}

impl ProviderError {
    pub fn new(class: ErrorClass, code: impl Into<String>, message: impl Into<String>) -> Self {
        ProviderError { class, code: code.into(), message: message.into(), retry_after_secs: None }
    }
}

/// Which nodes a list call returns: those tagged with this lineage (or every gpuplan
/// node when `lineage` is `None`, to find orphans of other states).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListFilter {
    pub region: String,
    pub lineage: Option<String>,
}

/// A pool node's run-command agent (AWS Systems Manager, Tencent TAT, Alibaba Cloud
/// Assistant), as refresh saw it: only a node whose agent is online takes jobs as a warm
/// node; the others stay idle and jobs boot nodes of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentState {
    Online,
    /// Why not (`SSM agent ConnectionLost`, `not registered with Systems Manager`, or why
    /// the agents could not be read).
    Offline(String),
}

/// One priced way to get GPUs from a provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    pub provider: ProviderKind,
    pub instance_type: String,
    pub gpu: String,
    pub gpus: u32,
    pub region: String,
    pub zones: Vec<String>,
    pub capacity: Capacity,
    /// Per node-hour, in USD.
    pub price_usd: f64,
    /// True when the price is live from the provider, false when from the catalog.
    pub live_price: bool,
    /// When the price was quoted (RFC 3339, live prices) or the catalog's date.
    #[serde(default)]
    pub as_of: String,
}

/// One account quota a cloud reports (`gpuplan check`): how much of `unit` is used of
/// `limit`, in a zone or the whole region.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaLine {
    /// `pay-as-you-go instances`, `spot vCPUs`.
    pub what: String,
    pub zone: Option<String>,
    pub used: u64,
    pub limit: u64,
}

/// Live prices outside these fractions of the catalog's on-demand price are broken
/// answers (moto's spot price is 0.00001 USD), not bargains: the catalog price stands.
pub const ABSURD_BELOW: f64 = 0.02;
pub const ABSURD_ABOVE: f64 = 3.0;

/// Is a live quote believable next to the catalog's on-demand price of the same type?
pub fn sane_quote(quote_usd: f64, on_demand_usd: f64) -> bool {
    quote_usd.is_finite() && quote_usd >= on_demand_usd * ABSURD_BELOW && quote_usd <= on_demand_usd * ABSURD_ABOVE
}

/// Cheapest per GPU-hour first; ties by instance type, region, then capacity type.
pub fn sort_offers(offers: &mut [Offer]) {
    offers.sort_by(|a, b| {
        (a.price_usd / f64::from(a.gpus.max(1)))
            .total_cmp(&(b.price_usd / f64::from(b.gpus.max(1))))
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.region.cmp(&b.region))
            .then(a.capacity.cmp(&b.capacity))
    });
}

/// A job launch request (see `jobs/`).
///
/// Two ways to run: on an existing node (`node_id`, the sim cloud and the Kubernetes
/// backend), or, for clouds, on a node made for the job: `shape` says what to create
/// (count 1) and the provider boots it with [`userdata::job_script`], which runs the
/// container with the NVIDIA runtime, prints `gpuplan-job-exit=N` on the console and
/// powers the node off unless `keep_node`. `env` already carries
/// `GPUPLAN_CHECKPOINT_URI` and `GPUPLAN_ATTEMPT` when the job has them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchJob {
    pub job: Address,
    pub pool: Address,
    /// The node to run on; empty when `shape` asks the provider to create one.
    #[serde(default)]
    pub node_id: String,
    /// The region of `node_id` when the plan chose a warm node of a cloud pool (its job
    /// runs through the cloud's run-command API there); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub region: String,
    pub image: String,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Variables whose values are secrets: references only (`docs/design/secrets.md`);
    /// the node, the cluster or the send reads the value, and nothing records it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, crate::model::secret::SecretRef>,
    pub gpus: u32,
    pub attempt: u32,
    pub token: String,
    /// Create a node of this shape for the job (user-data launch on clouds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<CreateNodes>,
    /// Kill the container after this many seconds (`max_runtime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runtime_secs: Option<u64>,
    /// Keep the node when the job ends (the pool keeps it); otherwise it powers off.
    #[serde(default)]
    pub keep_node: bool,
    /// Submit to a Kubernetes cluster instead (pools with a `kubernetes {}` block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube: Option<KubeLaunch>,
    /// The check the job script runs before the job (`health { readiness }`).
    #[serde(default, skip_serializing_if = "crate::model::health::Readiness::is_default")]
    pub readiness: crate::model::health::Readiness,
}

/// One job instance submitted to a Kubernetes cluster as a `batch/v1` Job: every replica
/// of the job carries the same Job (an Indexed Job runs them all; the first submission
/// creates it, the others find it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubeLaunch {
    /// Which cluster: `kubeconfig:<absolute path>#<context>` (an empty context means the
    /// kubeconfig's current one).
    pub cluster: String,
    pub namespace: String,
    /// The Job's name (a DNS-1123 label).
    pub name: String,
    /// The replica (completion index) this launch stands for.
    pub replica: u32,
    /// The state lineage the Job is labelled with: gpuplan touches only its own Jobs.
    pub lineage: String,
    /// The Job object, as `gpuplan jobs render` prints it.
    pub manifest: serde_json::Value,
    /// A multi-node job's headless Service (its replicas find replica 0's pod by name
    /// under it), created with the Job and owned by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Queued,
    Running,
    /// Its node (a job VM) stopped without an exit line gpuplan could read: the exit code
    /// is awaited for a grace from the stop (`jobs::refresh`), then the run fails. Not
    /// running, not yet ended.
    Stopped,
    Succeeded,
    Failed,
    Preempted,
    Cancelled,
}

impl JobState {
    /// Not ended yet: queued, running, or stopped with its exit code awaited. Refresh asks
    /// about such runs again; their node is kept.
    pub fn is_active(self) -> bool {
        matches!(self, JobState::Queued | JobState::Running | JobState::Stopped)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStatus {
    pub id: String,
    pub job: Address,
    pub node_id: String,
    pub state: JobState,
    pub attempt: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it started and ended by the provider's clock (ms since the epoch), where
    /// the provider knows: the job's cost runs between them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
    /// The private address of the node the run is on, where the provider's answer has it
    /// (a multi-node job's replica 0 is the others' rendezvous point).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}
