//! What runs on the cloud's nodes, for the autoscaler: per live gpuplan node, whether a job
//! runs on it at a given time and since when it has been idle. Read-only.

use super::cloud::SimCloud;
use crate::addr::Address;

/// One live gpuplan node and its jobs as seen at `now_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsage {
    pub id: String,
    pub pool: Address,
    /// A job runs on it at `now_ms`.
    pub busy: bool,
    /// Unix ms since which it has been idle: the end of its last job, else its launch.
    /// `None` while busy.
    pub idle_since_ms: Option<u64>,
}

impl SimCloud {
    /// Usage of every live gpuplan node at `now_ms` (the caller's clock: tests run it ahead,
    /// and a job started a moment "after" it by the cloud's clock still counts as running).
    pub fn usage(&self, now_ms: u64) -> Vec<NodeUsage> {
        let inner = self.lock();
        let world = &inner.world;
        let mut last_end: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
        let mut busy: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for j in world.jobs.values() {
            if j.is_running(now_ms) {
                busy.insert(j.node_id.as_str());
            } else {
                let end = j.ended.as_ref().map_or(j.ends_ms, |e| e.at_ms).min(now_ms);
                let slot = last_end.entry(j.node_id.as_str()).or_default();
                *slot = (*slot).max(end);
            }
        }
        world
            .nodes
            .values()
            .filter(|n| n.is_live() && n.is_managed())
            .filter_map(|n| {
                let pool = n.pool.clone()?;
                let is_busy = busy.contains(n.id.as_str());
                let idle_since = last_end.get(n.id.as_str()).copied().unwrap_or(n.launched_ms).max(n.launched_ms);
                Some(NodeUsage {
                    id: n.id.clone(),
                    pool,
                    busy: is_busy,
                    idle_since_ms: (!is_busy).then_some(idle_since),
                })
            })
            .collect()
    }
}
