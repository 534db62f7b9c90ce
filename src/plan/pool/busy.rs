//! Pool nodes that run a job now, for the changes that remove nodes (docs/design/jobs.md, "Jobs
//! under removed nodes"): they are kept before idle ones, and the node of a job that is
//! not preemptible is not removed at all while the job runs: its removal is deferred,
//! and a later plan finishes it once the job has ended.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::plan::model::{DeferredDelete, NodeDelete};
use crate::providers::JobStatus;
use crate::spec::Spec;
use crate::state::State;

/// The job running on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobOnNode {
    pub job: Address,
    pub preemptible: bool,
}

/// Node id → the job that runs there (one per node is enough to decide).
#[derive(Debug, Default)]
pub(crate) struct JobNodes {
    by_node: BTreeMap<String, JobOnNode>,
}

impl JobNodes {
    /// The active runs of the spec's jobs: as refresh saw them where it did
    /// (`statuses`), else as the state recorded them. A non-preemptible job wins a node
    /// it shares with a preemptible one: that node must stay.
    pub(crate) fn new(spec: &Spec, state: &State, statuses: Option<&BTreeMap<String, JobStatus>>) -> Self {
        let mut by_node: BTreeMap<String, JobOnNode> = BTreeMap::new();
        for (addr, job) in &spec.jobs {
            let Some(rec) = state.resources.get(&addr.to_string()).and_then(|r| r.job.as_deref()) else { continue };
            let preemptible = spec.job_templates.get(&job.template.value).is_some_and(|t| t.preemptible.value);
            for run in &rec.runs {
                let seen = statuses.and_then(|s| s.get(&run.id));
                let status = seen.map_or(run.status, |s| s.state);
                let active = matches!(status, crate::providers::JobState::Queued | crate::providers::JobState::Running);
                // Where refresh saw it run: a Kubernetes replica learns its node (the
                // cloud instance id of its Node) once scheduled, after apply recorded it.
                let node = seen.map(|s| s.node_id.as_str()).filter(|n| !n.is_empty()).unwrap_or(&run.node_id);
                if !active || node.is_empty() {
                    continue;
                }
                let here = JobOnNode { job: addr.clone(), preemptible };
                by_node
                    .entry(node.to_string())
                    .and_modify(|j| {
                        if !here.preemptible {
                            j.clone_from(&here);
                        }
                    })
                    .or_insert(here);
            }
        }
        JobNodes { by_node }
    }

    /// Which nodes a pool keeps first: 0 runs a job that is not preemptible, 1 runs a
    /// preemptible job, 2 is idle (goes first).
    pub(crate) fn keep_rank(&self, node_id: &str) -> u8 {
        match self.by_node.get(node_id) {
            Some(j) if !j.preemptible => 0,
            Some(_) => 1,
            None => 2,
        }
    }
}

/// Split `deletes` into the ones apply performs and the ones deferred because their node
/// runs a job that is not preemptible. A node in `must_go` (its reservation's window
/// closes: the cloud takes it back whatever runs there) is never deferred.
pub(crate) fn defer(
    deletes: Vec<NodeDelete>,
    jobs: &JobNodes,
    must_go: &std::collections::BTreeSet<&str>,
) -> (Vec<NodeDelete>, Vec<DeferredDelete>) {
    let mut now = Vec::with_capacity(deletes.len());
    let mut deferred = Vec::new();
    for d in deletes {
        match jobs.by_node.get(&d.id).filter(|j| !j.preemptible && !must_go.contains(d.id.as_str())) {
            Some(j) => deferred.push(DeferredDelete {
                id: d.id,
                zone: d.zone,
                capacity: d.capacity,
                reason: d.reason,
                job: j.job.clone(),
            }),
            None => now.push(d),
        }
    }
    (now, deferred)
}

/// The plan's note on deferred removals: which node, why it would go, and which job keeps it.
pub(crate) fn deferred_message(deferred: &[DeferredDelete]) -> String {
    let nodes: Vec<String> = deferred
        .iter()
        .map(|d| {
            format!("removal of node {} ({}) deferred: it runs {}, which is not preemptible", d.id, d.reason, d.job)
        })
        .collect();
    format!("{}; a later apply or reconcile removes it once the job has ended", nodes.join("; "))
}
