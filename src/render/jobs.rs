//! The jobs section of a plan: admission order, where each job goes or why it waits.
//! Read from `plan.jobs` only (filled by `jobs::place`); decides nothing.

use serde_json::{Value as Json, json};

use crate::jobs::model::{JobPlacement, Placement, priority_str};
use crate::plan::Plan;
use crate::providers::{Capacity, kube};

/// `2 × 8 GPUs` and `spot` / `on-demand` / `1 spot + 1 on-demand`.
fn capacity(c: &[Capacity]) -> String {
    let spot = c.iter().filter(|c| **c == Capacity::Spot).count();
    let od = c.len() - spot;
    match (spot, od) {
        (0, 0) => String::new(),
        (_, 0) => "spot".into(),
        (0, _) => "on-demand".into(),
        (s, o) => format!("{s} spot + {o} on-demand"),
    }
}

/// One line per job: `(symbol, address, text)`.
pub(crate) fn lines(plan: &Plan) -> Vec<(&'static str, String, String)> {
    plan.jobs.iter().map(|j| (symbol(j), j.address.to_string(), describe(j))).collect()
}

fn symbol(j: &JobPlacement) -> &'static str {
    match j.placement {
        Placement::Launch => "+",
        Placement::Waiting => "…",
        Placement::Preempt => "!",
        _ => " ",
    }
}

fn describe(j: &JobPlacement) -> String {
    let mut text = placement_text(j);
    if !j.alternatives.is_empty() {
        text += &format!("; pools considered: {}", j.alternatives.join("; "));
    }
    let nodes: Vec<&str> = j.nodes_to_release().map(|r| r.node_id.as_str()).collect();
    if nodes.is_empty() { text } else { format!("{text}; terminate its ended node(s) {}", nodes.join(", ")) }
}

fn placement_text(j: &JobPlacement) -> String {
    let size = format!("{} × {} GPUs", j.replicas, j.gpus_per_replica);
    let prio = priority_str(j.priority);
    match j.placement {
        Placement::Launch => {
            let n = j.launches.len();
            let caps: Vec<Capacity> = j.launches.iter().map(|l| l.capacity).collect();
            let retry =
                if j.attempt > 1 { format!(", attempt {} of {}", j.attempt, j.retries + 1) } else { String::new() };
            let which = if n as u32 == j.replicas { size } else { format!("{n} of {size}") };
            let cluster = j
                .launches
                .iter()
                .find_map(|l| l.request.kube.as_ref())
                .map(|k| format!(" as Kubernetes Job {}/{} in {}", k.namespace, k.name, kube::describe(&k.cluster)))
                .unwrap_or_default();
            format!("launch {which} on {} ({}){retry}{cluster}, {prio} priority", j.pool, capacity(&caps))
        }
        Placement::Waiting => {
            let why = j.reason.as_ref().map(|r| format!("{}: {}", r.code, r.message)).unwrap_or_default();
            format!("waits ({size} on {}, {prio} priority): {why}", j.pool)
        }
        Placement::Running => {
            format!("running on {} ({}), attempt {}", j.pool, capacity(&j.capacity), j.attempt)
        }
        Placement::Succeeded => "succeeded".into(),
        Placement::Failed => format!("failed after {} attempt(s)", j.attempt),
        Placement::Cancelled => "cancelled".into(),
        Placement::Preempt => format!(
            "preempt {} for {} (higher priority): stops run {}; it requeues from its checkpoint as attempt {}, retries not spent",
            j.address,
            j.preempted_for.as_ref().map_or_else(|| "?".to_string(), ToString::to_string),
            j.preempt.join(", "),
            j.attempt + 1
        ),
    }
}

/// `1 to launch, 2 waiting`.
pub(crate) fn summary(plan: &Plan) -> String {
    let launch = plan.jobs.iter().filter(|j| j.needs_launch()).count();
    let waiting = plan.jobs.iter().filter(|j| j.placement == Placement::Waiting).count();
    let preempt = plan.jobs.iter().filter(|j| j.placement == Placement::Preempt).count();
    if preempt > 0 {
        return format!("{launch} to launch, {preempt} to preempt, {waiting} waiting");
    }
    format!("{launch} to launch, {waiting} waiting")
}

/// The `jobs` array of `plan --json`.
pub(crate) fn json(plan: &Plan) -> Json {
    plan.jobs
        .iter()
        .map(|j| {
            let mut doc = json!({
                "address": j.address.to_string(),
                "pool": j.pool.to_string(),
                "quota": j.quota.as_ref().map(ToString::to_string),
                "priority": priority_str(j.priority),
                "preemptible": j.preemptible,
                "replicas": j.replicas,
                "gpus_per_replica": j.gpus_per_replica,
                "gpus": j.gpus(),
                "placement": j.placement.as_str(),
                "capacity": j.capacity,
                "attempt": j.attempt,
                "retries": j.retries,
                "reason": j.reason.as_ref().map(|r| json!({"code": r.code, "message": r.message})),
                "first_seen": j.first_seen,
                "waiting_since": j.waiting_since,
                "launches": j.launches.iter().map(|l| {
                    let mut launch = json!({
                    "replica": l.replica,
                    "attempt": l.request.attempt,
                    "capacity": l.capacity,
                    "fallback": l.fallback,
                    "gpus": l.request.gpus,
                    "node_shape": l.request.shape.is_some(),
                    "env": l.request.env,
                    "token": l.request.token,
                    });
                    // Only launches submitted to a cluster say which.
                    if let Some(k) = &l.request.kube {
                        launch["kubernetes"] = json!({"cluster": k.cluster, "namespace": k.namespace, "job": k.name});
                    }
                    launch
                }).collect::<Vec<_>>(),
            });
            // Only jobs that name a GPU model list the pools they could have run on.
            if !j.alternatives.is_empty() {
                doc["alternatives"] = json!(j.alternatives);
            }
            // Only jobs preempted by this plan say which runs stop, and for whom.
            if !j.preempt.is_empty() {
                doc["preempt"] = json!(j.preempt);
                doc["preempted_for"] = json!(j.preempted_for.as_ref().map(ToString::to_string));
            }
            // Only jobs with ended runs on nodes of their own say which nodes go.
            let release: Vec<&str> = j.nodes_to_release().map(|r| r.node_id.as_str()).collect();
            if !release.is_empty() {
                doc["release_nodes"] = json!(release);
            }
            doc
        })
        .collect()
}
