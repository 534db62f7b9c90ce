//! The jobs section of a plan: admission order, where each job goes or why it waits.
//! Read from `plan.jobs` only (filled by `jobs::place`); decides nothing.
//!
//! By default one short line per job the plan does something to (`job.hello[0] requeued:
//! node i-… removed (rebalance); attempt 2, no retry spent`); with `--verbose` every job
//! with the details (runs, pools considered, clusters, warm nodes), as `plan --json` has
//! them. Both say only what the template makes true: no checkpoint without a
//! `checkpoint_uri`, retries only where a failure spent one.

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use crate::addr::Address;
use crate::jobs::model::{JobPlacement, Placement, priority_str};
use crate::plan::Plan;
use crate::plan::model::DeferredDelete;
use crate::providers::{Capacity, kube};
use crate::render::facts;

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

/// One line per job: `(symbol, address, text)`. Without `verbose`, only the jobs the
/// plan does something to (launch, requeue, wait, keep a node, record a stop, release a
/// node), each in one short sentence; with it, every job and all it knows. Reasons keep
/// the `→` they were written with: the text view writes its own arrow.
pub(crate) fn lines(plan: &Plan, verbose: bool) -> Vec<(&'static str, String, String)> {
    let deferred = deferred(plan);
    plan.jobs
        .iter()
        .filter_map(|j| {
            let text = if verbose { Some(describe(&deferred, j)) } else { brief(&deferred, j) };
            text.map(|t| (symbol(j), j.address.to_string(), t))
        })
        .collect()
}

fn symbol(j: &JobPlacement) -> &'static str {
    match j.placement {
        _ if !j.interrupted.is_empty() => "!",
        Placement::Launch => "+",
        Placement::Waiting => "…",
        Placement::Preempt => "!",
        _ => " ",
    }
}

/// The node removals of `plan` deferred because a job runs on those nodes, per job:
/// gathered once, so rendering many jobs does not re-scan every change for each.
type Deferred<'p> = BTreeMap<&'p Address, Vec<&'p DeferredDelete>>;

fn deferred(plan: &Plan) -> Deferred<'_> {
    let mut out = Deferred::new();
    for d in plan.changes.iter().filter_map(|c| c.pool.as_ref()).flat_map(|p| &p.deferred) {
        out.entry(&d.job).or_default().push(d);
    }
    out
}

/// The removals deferred because `j` runs on those nodes.
fn held<'d, 'p>(deferred: &'d Deferred<'p>, j: &JobPlacement) -> &'d [&'p DeferredDelete] {
    deferred.get(&j.address).map(Vec::as_slice).unwrap_or_default()
}

/// ` from its checkpoint` when the template names one, else nothing.
fn from_checkpoint(j: &JobPlacement) -> &'static str {
    if j.checkpoints { " from its checkpoint" } else { "" }
}

/// `1 × 8 GPUs`, `1 × 1 GPU`.
fn size(j: &JobPlacement) -> String {
    let unit = if j.gpus_per_replica == 1 { "GPU" } else { "GPUs" };
    format!("{} × {} {unit}", j.replicas, j.gpus_per_replica)
}

/// `its node i-1 (spot in us-east-1a) is removed (rebalance: …)`, for each interrupted run.
fn interrupted_text(j: &JobPlacement) -> String {
    let nodes: Vec<String> = j
        .interrupted
        .iter()
        .map(|i| format!("its node {} ({} in {}) is removed ({})", i.node_id, i.capacity, i.zone, i.why))
        .collect();
    let runs: Vec<&str> = j.interrupted.iter().map(|i| i.run.as_str()).collect();
    format!(
        "{}: run {} stops and is requeued{} as attempt {}, no retry spent",
        nodes.join("; "),
        runs.join(", "),
        from_checkpoint(j),
        j.attempt
    )
}

/// `requeued whole: replica 1 was lost before all replicas started; runs i-0, i-2 stop, no
/// retry spent` (a multi-node job, `jobs::regroup`).
fn regroup_text(j: &JobPlacement, g: &crate::model::job::Regroup) -> String {
    let stops = if g.stops.is_empty() { String::new() } else { format!("; runs {} stop", g.stops.join(", ")) };
    format!("requeued whole{}: {}{stops}, no retry spent", from_checkpoint(j), g.why)
}

/// `node i-1 removed (rebalance)`, `nodes i-1, i-2 removed (surplus)`: the removed nodes
/// under the job by the node's own reason, in the order the plan lists them.
fn removed_nodes_text(j: &JobPlacement) -> String {
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for i in &j.interrupted {
        let why = if i.node_reason.is_empty() { i.why.as_str() } else { i.node_reason.as_str() };
        match by_reason.iter_mut().find(|(w, _)| *w == why) {
            Some((_, ids)) => ids.push(&i.node_id),
            None => by_reason.push((why, vec![&i.node_id])),
        }
    }
    let parts: Vec<String> = by_reason
        .iter()
        .map(|(why, ids)| {
            let noun = if ids.len() == 1 { "node" } else { "nodes" };
            format!("{noun} {} removed ({why})", ids.join(", "))
        })
        .collect();
    parts.join(", ")
}

/// The default view's sentence for a job, or `None` when the plan does nothing to it.
fn brief(deferred: &Deferred<'_>, j: &JobPlacement) -> Option<String> {
    let held = held(deferred, j);
    let waits = |j: &JobPlacement| {
        j.reason.as_ref().map(|r| format!("waits ({}): {}", r.code, r.message)).unwrap_or_else(|| "waits".into())
    };
    let mut text = if !j.interrupted.is_empty() {
        let then = if j.placement == Placement::Waiting { format!("; then {}", waits(j)) } else { String::new() };
        format!(
            "requeued: {}; attempt {}{}, no retry spent{then}",
            removed_nodes_text(j),
            j.attempt,
            from_checkpoint(j)
        )
    } else {
        match j.placement {
            Placement::Launch => launch_brief(j),
            Placement::Waiting => waits(j),
            Placement::Preempt => format!(
                "preempted for {} (higher priority): attempt {}{}, no retry spent",
                j.preempted_for.as_ref().map_or_else(|| "?".to_string(), ToString::to_string),
                j.attempt + 1,
                from_checkpoint(j)
            ),
            _ => String::new(),
        }
    };
    let mut extra = Vec::new();
    if let Some(g) = &j.regroup {
        extra.insert(0, regroup_text(j, g));
    }
    if !held.is_empty() {
        let nodes: Vec<String> = held.iter().map(|d| format!("node {} ({})", d.id, d.reason)).collect();
        extra.push(format!("keeps its node: removal of {} deferred until it ends (not preemptible)", nodes.join(", ")));
    }
    if !j.stopped.is_empty() {
        extra.push("its node stopped: exit code awaited".to_string());
    }
    let release: Vec<&str> = j.nodes_to_release().map(|r| r.node_id.as_str()).collect();
    if !release.is_empty() {
        let noun = if release.len() == 1 { "node" } else { "nodes" };
        let verb = if release.len() == 1 { "is" } else { "are" };
        extra.push(format!("its ended {noun} {} {verb} terminated", release.join(", ")));
    }
    for e in extra {
        text += &if text.is_empty() { e } else { format!("; {e}") };
    }
    (!text.is_empty()).then_some(text)
}

/// `launches on gpu_pool.train (1 × 8 GPUs, on-demand)`; a relaunch after the job's own
/// failure says the attempt and the retries left, as a failure spent one.
fn launch_brief(j: &JobPlacement) -> String {
    let caps: Vec<Capacity> = j.launches.iter().map(|l| l.capacity).collect();
    let n = j.launches.len();
    let which = if n as u32 == j.replicas { String::new() } else { format!(" {n} of {} replicas", j.replicas) };
    let verb = if j.attempt > 1 { "relaunches" } else { "launches" };
    let retry = if j.retries_spent > 0 {
        format!(": {}", attempt_text(j))
    } else if j.attempt > 1 {
        format!(": attempt {}", j.attempt)
    } else {
        String::new()
    };
    // Whether a node boots for it (money) or it takes a warm one, as `--verbose` says.
    let nodes = where_text(j);
    let retry = if nodes.is_empty() { retry } else { retry.replacen(": ", "; ", 1) };
    format!("{verb}{which} on {} ({}, {}){nodes}{retry}", j.pool, size(j), capacity(&caps))
}

/// `removal of node i-1 (surplus) deferred until this job ends: it is not preemptible`.
fn deferred_text(held: &[&DeferredDelete]) -> String {
    let nodes: Vec<String> = held.iter().map(|d| format!("removal of node {} ({})", d.id, d.reason)).collect();
    format!("keeps its node: {} deferred until it ends, as it is not preemptible", nodes.join(", "))
}

fn describe(deferred: &Deferred<'_>, j: &JobPlacement) -> String {
    let mut text = placement_text(j) + &warm_skipped_text(j);
    if !j.interrupted.is_empty() {
        text = format!("{}; then {text}", interrupted_text(j));
    }
    if let Some(g) = &j.regroup {
        text = format!("{}; then {text}", regroup_text(j, g));
    }
    let held = held(deferred, j);
    if !held.is_empty() {
        text += &format!("; {}", deferred_text(held));
    }
    if !j.alternatives.is_empty() {
        text += &format!("; pools considered: {}", j.alternatives.join("; "));
    }
    if !j.stopped.is_empty() {
        text += &format!(
            "; record that run {} stopped with no exit code yet: it is awaited, then the node is terminated and the run fails",
            j.stopped.join(", ")
        );
    }
    let nodes: Vec<&str> = j.nodes_to_release().map(|r| r.node_id.as_str()).collect();
    let noun = if nodes.len() == 1 { "node" } else { "nodes" };
    if nodes.is_empty() { text } else { format!("{text}; terminate its ended {noun} {}", nodes.join(", ")) }
}

fn placement_text(j: &JobPlacement) -> String {
    let size = size(j);
    let prio = priority_str(j.priority);
    match j.placement {
        Placement::Launch => {
            let n = j.launches.len();
            let caps: Vec<Capacity> = j.launches.iter().map(|l| l.capacity).collect();
            // Retries only where a failure spent one; an interrupted run says its attempt.
            let retry = if !j.interrupted.is_empty() {
                String::new()
            } else if j.retries_spent > 0 {
                format!(", {}", attempt_text(j))
            } else if j.attempt > 1 {
                format!(", attempt {}", j.attempt)
            } else {
                String::new()
            };
            let which = if n as u32 == j.replicas { size } else { format!("{n} of {size}") };
            let cluster = j
                .launches
                .iter()
                .find_map(|l| l.request.kube.as_ref())
                .map(|k| format!(" as Kubernetes Job {}/{} in {}", k.namespace, k.name, kube::describe(&k.cluster)))
                .unwrap_or_default();
            let nodes = where_text(j);
            format!("launch {which} on {} ({}){retry}{cluster}{nodes}, {prio} priority", j.pool, capacity(&caps))
        }
        Placement::Waiting => {
            let why = j.reason.as_ref().map(|r| format!("{}: {}", r.code, r.message)).unwrap_or_default();
            format!("waits ({size} on {}, {prio} priority): {why}", j.pool)
        }
        Placement::Running if j.all_stopped() => {
            format!("stopped on {} ({}), exit code awaited, attempt {}", j.pool, capacity(&j.capacity), j.attempt)
        }
        Placement::Running => {
            format!("running on {} ({}), attempt {}", j.pool, capacity(&j.capacity), j.attempt)
        }
        Placement::Succeeded => "succeeded".into(),
        Placement::Failed => format!("failed after {} attempt{}", j.attempt, if j.attempt == 1 { "" } else { "s" }),
        Placement::Cancelled => "cancelled".into(),
        Placement::Preempt => format!(
            "preempt {} for {} (higher priority): stops run {}; it requeues{} as attempt {}, no retry spent",
            j.address,
            j.preempted_for.as_ref().map_or_else(|| "?".to_string(), ToString::to_string),
            j.preempt.join(", "),
            from_checkpoint(j),
            j.attempt + 1
        ),
    }
}

/// Where a cloud VM pool's launches run: `: on warm node i-0abc`, `: boots a node`, one
/// per replica when they differ, and why warm nodes were passed over. Empty for sim
/// (apply picks the node) and clusters (the scheduler does).
fn where_text(j: &JobPlacement) -> String {
    let one = |l: &crate::model::ReplicaLaunch| {
        if l.request.shape.is_some() {
            Some("boots a node".to_string())
        } else if l.request.kube.is_none() && !l.request.node_id.is_empty() {
            Some(format!("on warm node {}", l.request.node_id))
        } else {
            None
        }
    };
    let each: Vec<(u32, String)> = j.launches.iter().filter_map(|l| one(l).map(|w| (l.replica, w))).collect();
    let Some((_, first)) = each.first() else { return String::new() };

    if each.iter().all(|(_, w)| w == first) && !first.starts_with("on warm") {
        format!(": {first}{}", if each.len() > 1 { " each" } else { "" })
    } else if each.len() == 1 {
        format!(": {first}")
    } else {
        let parts: Vec<String> = each.iter().map(|(r, w)| format!("replica {r} {w}")).collect();
        format!(": {}", parts.join(", "))
    }
}

/// Why the warm nodes of the job's pool took none of its replicas (their agents).
fn warm_skipped_text(j: &JobPlacement) -> String {
    if j.warm_skipped.is_empty() {
        return String::new();
    }
    format!("; warm nodes that take no jobs: {}", j.warm_skipped.join("; "))
}

/// `attempt 3 (1 of 2 retries left)`: only the job's own failures spend retries, so the
/// attempt number alone does not say how many are left.
fn attempt_text(j: &JobPlacement) -> String {
    let left = j.retries.saturating_sub(j.retries_spent);
    let noun = if j.retries == 1 { "retry" } else { "retries" };
    format!("attempt {} ({left} of {} {noun} left)", j.attempt, j.retries)
}

/// What the job is before the plan, as its runs say: `new`, `pending`, `running`,
/// `stopped` (its exit code awaited), `succeeded`, `failed` or `cancelled`.
fn before(j: &JobPlacement) -> &'static str {
    match j.placement {
        _ if !j.interrupted.is_empty() => "running",
        Placement::Running if j.all_stopped() => "stopped",
        Placement::Running | Placement::Preempt => "running",
        Placement::Launch | Placement::Waiting if j.first_seen.is_none() && j.runs.is_empty() => "new",
        Placement::Launch | Placement::Waiting => "pending",
        Placement::Succeeded => "succeeded",
        Placement::Failed => "failed",
        Placement::Cancelled => "cancelled",
    }
}

/// What the job is once the plan is applied: `requeued` (stopped with its node and
/// launched again), `running`, `stopped` (its exit code awaited),
/// `pending` (waits, or requeued to wait), `succeeded`, `failed` or `cancelled`. Never
/// `running` on a node the plan removes.
fn after(j: &JobPlacement) -> &'static str {
    match j.placement {
        // Stopped with its node and launched again, or (in a cluster) its pod evicted and
        // run again by the Job.
        Placement::Launch | Placement::Running if !j.interrupted.is_empty() => "requeued",
        Placement::Running if j.all_stopped() => "stopped",
        Placement::Launch | Placement::Running => "running",
        Placement::Waiting | Placement::Preempt => "pending",
        Placement::Succeeded => "succeeded",
        Placement::Failed => "failed",
        Placement::Cancelled => "cancelled",
    }
}

/// Why the job changes: its node goes (`node_removed`), its node's removal waits for it
/// (`removal_deferred`), or why it waits (`quota`, `capacity`, `priority`, `dependency`).
fn reason(deferred: &Deferred<'_>, j: &JobPlacement) -> Json {
    let wait = j.reason.as_ref().map(|r| format!("; then it waits: {}: {}", r.code, r.message)).unwrap_or_default();
    if !j.interrupted.is_empty() {
        return json!({"code": "node_removed", "message": format!("{}{wait}", interrupted_text(j))});
    }
    let held = held(deferred, j);
    if !held.is_empty() {
        return json!({"code": "removal_deferred", "message": deferred_text(held)});
    }
    j.reason.as_ref().map_or(Json::Null, |r| json!({"code": r.code, "message": r.message}))
}

/// The `jobs` array of `plan --json`.
pub(crate) fn json(plan: &Plan) -> Json {
    let deferred = deferred(plan);
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
                "retries_spent": j.retries_spent,
                "before": before(j),
                "after": after(j),
                "reason": reason(&deferred, j),
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
                    "env": shown_env(plan, &l.request),
                    "token": l.request.token,
                    });
                    // Only launches onto a warm node of a cloud pool name it.
                    if l.request.shape.is_none() && l.request.kube.is_none() && !l.request.node_id.is_empty() {
                        launch["warm_node"] = json!(l.request.node_id);
                    }
                    // Only launches submitted to a cluster say which.
                    if let Some(k) = &l.request.kube {
                        launch["kubernetes"] = json!({"cluster": k.cluster, "namespace": k.namespace, "job": k.name});
                    }
                    launch
                }).collect::<Vec<_>>(),
            });
            // Only jobs that boot nodes beside warm nodes that cannot take jobs say why.
            if !j.warm_skipped.is_empty() {
                doc["warm_skipped"] = json!(j.warm_skipped);
            }
            // Only jobs that name a GPU model list the pools they could have run on.
            if !j.alternatives.is_empty() {
                doc["alternatives"] = json!(j.alternatives);
            }
            // Only jobs preempted by this plan say which runs stop, and for whom.
            if !j.preempt.is_empty() {
                doc["preempt"] = json!(j.preempt);
                doc["preempted_for"] = json!(j.preempted_for.as_ref().map(ToString::to_string));
            }
            // Only jobs whose node this plan removes say which runs stop.
            if !j.interrupted.is_empty() {
                doc["interrupted"] = json!(
                    j.interrupted
                        .iter()
                        .map(|i| json!({
                            "run": i.run, "replica": i.replica, "node": i.node_id, "why": i.why,
                        }))
                        .collect::<Vec<_>>()
                );
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

/// A launch's environment as every view shows it: values, `(sensitive)` for a value
/// the job's or its template's `env` derives from a sensitive variable, and
/// `(secret: …)` for each variable whose value is a secret (never read here).
fn shown_env(plan: &Plan, req: &crate::model::LaunchJob) -> std::collections::BTreeMap<String, String> {
    let mut env = req.env.clone();
    let job = plan.changes.iter().find(|c| c.address == req.job);
    let template = job.and_then(|c| c.after.as_ref()?.get("template")).and_then(|t| t.as_str().map(String::from));
    let template = template.and_then(|t| plan.changes.iter().find(|c| c.address.to_string() == t));
    for c in job.into_iter().chain(template).filter(|c| c.sensitive.is_some()) {
        let set = c.after.as_ref().and_then(|a| a.get("env")).unwrap_or_default();
        let names = set.as_object().into_iter().flat_map(|m| m.keys());
        for name in names.filter(|n| facts::sensitive_at(facts::sensitive_of(c), &format!("env.{n}"))) {
            if let Some(v) = env.get_mut(name) {
                *v = facts::SENSITIVE.to_string();
            }
        }
    }
    env.extend(req.secrets.iter().map(|(k, r)| (k.clone(), r.shown())));
    env
}
