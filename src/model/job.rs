//! What jobs look like in a plan ([`JobPlacement`]) and in state ([`JobRecord`]).
//!
//! Both are additive to their formats: a plan without jobs and a state written before
//! jobs existed read and write exactly as before.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::addr::Address;
use crate::model::{Capacity, JobState, LaunchJob};

/// A job's priority: admission order, and who may preempt whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Critical,
    High,
    #[default]
    Medium,
    Low,
}

/// Where one job stands after admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Admitted: apply launches the replicas listed in `launches`.
    Launch,
    /// Already running (all replicas that still need to run are running).
    Running,
    /// Not admitted: `reason` says why (quota, capacity or priority).
    Waiting,
    /// Finished: every replica succeeded.
    Succeeded,
    /// Failed with no retries left.
    Failed,
    /// Cancelled with `gpuplan jobs cancel`.
    Cancelled,
    /// Running, but apply stops the runs in `preempt` so that `preempted_for`, of higher
    /// priority, gets their GPUs; they requeue from their checkpoint as the next attempt
    /// without spending `retries`.
    Preempt,
}

impl Placement {
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Launch => "launch",
            Placement::Running => "running",
            Placement::Waiting => "waiting",
            Placement::Succeeded => "succeeded",
            Placement::Failed => "failed",
            Placement::Cancelled => "cancelled",
            Placement::Preempt => "preempt",
        }
    }
}

/// Why a job waits: its code is stable (`quota`, `capacity`, `priority`), its message is
/// for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitReason {
    pub code: WaitCode,
    pub message: String,
}

/// The stable part of a [`WaitReason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitCode {
    /// The job's quota has no GPUs (or budget) left for it; more nodes would not help.
    Quota,
    /// Its pool has no node with room for a replica.
    Capacity,
    /// Higher-priority jobs took the room there was.
    Priority,
    /// A job it `depends_on` has not succeeded (yet, or ever: it failed).
    Dependency,
}

impl WaitCode {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitCode::Quota => "quota",
            WaitCode::Capacity => "capacity",
            WaitCode::Priority => "priority",
            WaitCode::Dependency => "dependency",
        }
    }
}

impl std::fmt::Display for WaitCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One job in the plan: its admission and, when admitted, exactly what apply launches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobPlacement {
    pub address: Address,
    pub pool: Address,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Address>,
    pub priority: Priority,
    pub preemptible: bool,
    pub replicas: u32,
    pub gpus_per_replica: u32,
    pub placement: Placement,
    /// Replicas placed by capacity type, in this plan (launches) or already running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity: Vec<Capacity>,
    /// The attempt the launches carry (1 for a first launch).
    pub attempt: u32,
    pub retries: u32,
    /// Retries the job's own failures spent (the most of any replica): interruptions
    /// gpuplan caused and spot reclaims spend none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries_spent: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<WaitReason>,
    /// When the job was first seen (RFC 3339, from state); `None` for a new job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<String>,
    /// When it started waiting (RFC 3339, from state), if it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<String>,
    /// The replica launches apply performs (node chosen at apply on `sim`; on clouds a
    /// warm node of the pool chosen here, else a node shape to boot).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launches: Vec<ReplicaLaunch>,
    /// The runs as refresh observed them; apply records them in state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<JobRun>,
    /// `Preempt`: the run ids apply stops, and the job they make room for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preempt: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_for: Option<Address>,
    /// A job that names a GPU model: the pools considered, one line each (price, room,
    /// which was chosen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<String>,
    /// Runs whose node this plan removes: apply stops them before the node goes, and
    /// the replicas are requeued from their checkpoint without spending `retries`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupted: Vec<Interruption>,
    /// Run ids (their nodes' ids) this plan adopts: job nodes an apply launched but died
    /// before recording, found by their tags (see `jobs::adopt`); apply records them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adopted: Vec<String>,
    /// Run ids whose node refresh found stopped with no exit code yet, where the state
    /// still records them otherwise: apply records the stop, from which the grace for
    /// their exit code counts (`jobs::refresh`; some clouds give no stop time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stopped: Vec<String>,
    /// Which life of this job address the runs belong to (see [`JobRecord::incarnation`]);
    /// apply records it before the first launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// Warm nodes of its cloud VM pool that could not take its replicas, each with why
    /// (`i-0abc: SSM agent ConnectionLost`): the plan says why it boots a node instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warm_skipped: Vec<String>,
    /// Its template names a `checkpoint_uri`: a run stopped by gpuplan resumes from a
    /// checkpoint. Without one, the views never claim it does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checkpoints: bool,
    /// A multi-node job one of whose replicas was lost before all had started: apply stops
    /// the others, and the whole job requeues (`jobs::regroup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regroup: Option<Regroup>,
}

/// A multi-node job requeued whole: a replica was lost before all had started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Regroup {
    /// The replica lost, and why (`its node was reclaimed`).
    pub lost: u32,
    pub why: String,
    /// The runs of the other replicas, which apply stops.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stops: Vec<String>,
}

/// A run stopped because a change of this plan removes its node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interruption {
    /// The run's id.
    pub run: String,
    pub replica: u32,
    pub node_id: String,
    pub capacity: Capacity,
    pub zone: String,
    /// Why the node goes: the node's reason and its pool change's (`rebalance: on-demand/spot 2/1 → 3/0`).
    pub why: String,
    /// The node's own reason alone (`rebalance`, `surplus`); empty in plans saved before
    /// it was recorded, which say [`Interruption::why`] only.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_reason: String,
}

impl JobPlacement {
    pub fn gpus(&self) -> u64 {
        self.replicas as u64 * self.gpus_per_replica as u64
    }
    /// Does applying this plan do something for the job?
    pub fn needs_launch(&self) -> bool {
        !self.launches.is_empty()
    }
    /// Nodes of ended runs that applying this plan terminates.
    pub fn nodes_to_release(&self) -> impl Iterator<Item = &JobRun> {
        self.runs.iter().filter(|r| r.node_to_release())
    }

    /// Its runs that are not over are all stopped, their exit codes awaited.
    pub fn all_stopped(&self) -> bool {
        let mut active = self.runs.iter().filter(|r| r.is_active()).peekable();
        active.peek().is_some() && active.all(|r| r.status == JobState::Stopped)
    }
}

/// One replica to launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaLaunch {
    pub replica: u32,
    /// The capacity type admission placed it on.
    pub capacity: Capacity,
    /// Other capacity apply may use when the planned one has no room (the pool's
    /// `fallback = "on_demand"` for preemptible jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Capacity>,
    pub provider: String,
    pub region: String,
    /// The pool's GPUs per node (room on a node = this minus what runs there).
    pub gpus_per_node: u32,
    pub request: LaunchJob,
}

/// A job's record in state (`resources["job.x"].job`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobRecord {
    /// When gpuplan first recorded the job (RFC 3339): its age for admission order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<String>,
    /// Since when it waits for admission (RFC 3339); cleared on launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<String>,
    /// Set by `gpuplan jobs cancel`: the job is not launched again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// Every run, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<JobRun>,
    /// Which life of this job address the record is (`s<serial>`: the state serial the
    /// plan that first launched it was made at). A job removed and added again, or
    /// forgotten with `state rm`, is a new life: its launch tokens and its Kubernetes Job's
    /// `gpuplan.dev/run` label differ from the old one's, so nothing of the old job is
    /// ever taken for the new one's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// Run-command sends to warm nodes begun and not yet recorded as runs. Made durable
    /// before the send (SSM `SendCommand` and TAT `RunCommand` take no idempotency token)
    /// and cleared with the run's record: one left here means the apply stopped between
    /// sending and recording, and the next plan asks the cloud whether that send happened
    /// (its token is in the command's comment) before anything is sent again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sending: Vec<Sending>,
}

/// A send to a warm node that may have happened ([`JobRecord::sending`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sending {
    pub replica: u32,
    pub attempt: u32,
    /// The launch's token, which the send carries in its comment or description.
    pub token: String,
    /// The provider block's name, the region and the warm node sent to.
    pub provider: String,
    pub region: String,
    pub node_id: String,
    #[schemars(with = "String")]
    pub capacity: Capacity,
    pub gpus: u32,
    /// The template's `max_runtime` (seconds), as the run would record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runtime_secs: Option<u64>,
}

/// One replica attempt launched through a provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobRun {
    pub replica: u32,
    pub attempt: u32,
    /// The provider's job id.
    pub id: String,
    /// The provider block's local name and the region, to ask for status later.
    pub provider: String,
    pub region: String,
    pub node_id: String,
    #[schemars(with = "String")]
    pub capacity: Capacity,
    pub gpus: u32,
    #[schemars(with = "String")]
    pub status: JobState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// RFC 3339, by the provider's clock when it reports the start (the sim cloud's
    /// own clock), else the time of the launch call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_at: Option<String>,
    /// When it ended (RFC 3339, the provider's clock), once the provider reports it; for
    /// a run `stopped` with its exit code awaited, when its node stopped (the grace for
    /// the exit code counts from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// The provider made a node for this run (a job VM on a cloud): it is terminated
    /// once the run ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_node: bool,
    /// Its own node has been terminated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub node_released: bool,
    /// Stopped by gpuplan to make room for this higher-priority job: the attempt does not
    /// count against `retries`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_for: Option<String>,
    /// The template's `max_runtime` when the run was launched (seconds): a job VM still
    /// running past it (plus time to boot) is ended by gpuplan (`jobs::refresh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runtime_secs: Option<u64>,
    /// The private address of the node it runs on, where the provider said (a multi-node
    /// job's replica 0: the others' `GPUPLAN_MASTER_ADDR`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// Milliseconds since the epoch as RFC 3339 (seconds).
pub fn rfc3339_ms(ms: u64) -> String {
    crate::model::time::rfc3339_ms(ms)
}

impl JobRun {
    /// Runs on a node the provider made for it (a job VM).
    pub fn has_own_node(&self) -> bool {
        // Runs recorded before `own_node` existed: a job VM's run id is its instance id.
        self.own_node || (!self.id.is_empty() && self.id == self.node_id)
    }

    /// Ended, on a node made for it that is still there.
    pub fn node_to_release(&self) -> bool {
        self.has_own_node() && !self.is_active() && !self.node_released
    }

    pub fn is_active(&self) -> bool {
        self.status.is_active()
    }

    /// Did this attempt spend one of the template's `retries`? Only the job's own
    /// failure does: a run gpuplan stopped (preemption, its node removed) or whose spot
    /// node the cloud reclaimed (`Preempted`) did not fail, as Kubernetes does not count
    /// a pod with a `DisruptionTarget` condition.
    pub fn spends_retry(&self) -> bool {
        self.status == JobState::Failed && self.preempted_for.is_none()
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub fn state_str(s: JobState) -> &'static str {
    match s {
        JobState::Queued => "queued",
        JobState::Running => "running",
        JobState::Stopped => "stopped",
        JobState::Succeeded => "succeeded",
        JobState::Failed => "failed",
        JobState::Preempted => "preempted",
        JobState::Cancelled => "cancelled",
    }
}

pub fn priority_str(p: Priority) -> &'static str {
    match p {
        Priority::Critical => "critical",
        Priority::High => "high",
        Priority::Medium => "medium",
        Priority::Low => "low",
    }
}
