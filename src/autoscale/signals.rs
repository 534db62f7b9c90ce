//! What the autoscaler looks at: live nodes (busy, or idle since when) and queued demand.

use std::time::SystemTime;

use crate::addr::Address;
use crate::providers::Capacity;

/// One live node of the pool.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSignal {
    pub id: String,
    pub zone: String,
    pub capacity: Capacity,
    /// A job runs on it now. Busy nodes are never scaled down.
    pub busy: bool,
    /// Since when it has run nothing (its last job's end, else its launch); `None` when
    /// busy or unknown.
    pub idle_since: Option<SystemTime>,
}

/// GPUs some job has been waiting for since `since`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    pub gpus: u32,
    pub since: SystemTime,
}

/// Everything the autoscaler knows about one pool at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Signals {
    pub nodes: Vec<NodeSignal>,
    /// Whether the provider reports what runs on its nodes. Without it nodes are never
    /// considered idle (scaling down blind could stop running work) and utilization is
    /// unknown.
    pub usage_known: bool,
    pub queued: Vec<Demand>,
}

impl Signals {
    /// Busy nodes as a percentage of live nodes (node-level: a node running a job counts as
    /// fully used). `None` when usage is unknown or the pool has no nodes.
    pub fn utilization(&self) -> Option<f64> {
        if !self.usage_known || self.nodes.is_empty() {
            return None;
        }
        let busy = self.nodes.iter().filter(|n| n.busy).count();
        Some(busy as f64 * 100.0 / self.nodes.len() as f64)
    }
}

/// A job replica waiting for GPUs in a pool: one entry of the jobs queue.
///
/// This is the seam to the jobs engine (issue 5, jobs part): its admission queue lists the
/// replicas it could not place (quota, capacity or priority), each with the pool it targets,
/// the GPUs it needs and when it started waiting (first queued, or requeued after a
/// preemption). `reconcile` asks its [`crate::reconcile::Queue`] for these every pass and
/// turns them into each pool's demand with [`queued_demand`]. Until the jobs queue is wired
/// in, the default queue is empty and pools scale up on utilization only.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub job: Address,
    pub pool: Address,
    pub gpus: u32,
    pub since: SystemTime,
}

/// The demand queued for `pool`: one [`Demand`] per waiting replica, oldest first.
pub fn queued_demand(waiting: &[Waiting], pool: &Address) -> Vec<Demand> {
    let mut out: Vec<Demand> =
        waiting.iter().filter(|w| &w.pool == pool).map(|w| Demand { gpus: w.gpus, since: w.since }).collect();
    out.sort_by_key(|d| d.since);
    out
}
