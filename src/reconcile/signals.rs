//! From what a pass sees to the autoscaler's inputs, and its decisions to plan input:
//! live nodes and their usage (the sim cloud's job runs), queued demand (the [`Queue`]),
//! headroom in quotas and budgets (the baseline plan's cost), the last action (state).
//!
//! [`Queue`]: super::Queue

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::addr::Address;
use crate::autoscale::{self, Decision, Direction, Limits, NodeSignal, Rules, Signals, Waiting};
use crate::catalog;
use crate::cost::{self, CostReport};
use crate::plan::model::ScaleAction;
use crate::plan::{Action, Plan, keep, shape};
use crate::providers::Node;
use crate::providers::sim::NodeUsage;
use crate::spec::Spec;
use crate::state::State;

/// One autoscaler's verdict in a pass, for reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolDecision {
    pub autoscaler: Address,
    pub pool: Address,
    pub action: Direction,
    pub from: u32,
    pub to: u32,
    pub reason: String,
    /// Whether the pass carried the step out (false for holds, dry runs and refusals).
    pub applied: bool,
}

impl PoolDecision {
    pub fn hold(&mut self, why: String) {
        self.action = Direction::Hold;
        self.to = self.from;
        self.reason = why;
        self.applied = false;
    }
}

pub struct Context<'a> {
    pub spec: &'a Spec,
    pub state: &'a State,
    /// The plan without autoscaling: what the pool converges to now, and its cost.
    pub baseline: &'a Plan,
    pub observed: &'a [Node],
    /// Usage of the sim cloud's nodes; `None` without a sim cloud.
    pub usage: Option<&'a [NodeUsage]>,
    pub waiting: &'a [Waiting],
    pub now: SystemTime,
}

pub fn unix_ms(t: SystemTime) -> u64 {
    u64::try_from(t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis()).unwrap_or(u64::MAX)
}

fn from_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

pub fn queued_per_pool(spec: &Spec, waiting: &[Waiting]) -> BTreeMap<Address, usize> {
    let mut out: BTreeMap<Address, usize> = spec.gpu_pools.keys().map(|p| (p.clone(), 0)).collect();
    for w in waiting {
        *out.entry(w.pool.clone()).or_default() += 1;
    }
    out
}

/// Decide for every autoscaler: the actions to plan with, every verdict, and utilization.
pub fn autoscale(cx: &Context<'_>) -> (Vec<ScaleAction>, Vec<PoolDecision>, BTreeMap<Address, f64>) {
    let cost: Option<&CostReport> = cx.baseline.cost.as_ref();
    let at = humantime::format_rfc3339_seconds(cx.now).to_string();
    let mut actions = Vec::new();
    let mut decisions = Vec::new();
    let mut utilization = BTreeMap::new();
    for (name, a) in &cx.spec.autoscalers {
        let pool_addr = &a.pool.value;
        let Some(pool) = cx.spec.gpu_pools.get(pool_addr) else { continue };
        let Some(change) = cx.baseline.changes.iter().find(|c| &c.address == pool_addr) else { continue };
        let Some(pc) = &change.pool else { continue };
        let current = pc.after.nodes();
        let mut verdict = PoolDecision {
            autoscaler: name.clone(),
            pool: pool_addr.clone(),
            action: Direction::Hold,
            from: current,
            to: current,
            reason: String::new(),
            applied: false,
        };
        let Some(shape) = shape::shape(cx.spec, pool, catalog::catalog()) else { continue };
        if change.action == Action::Create {
            verdict.reason = "the pool is created by this plan first".into();
            decisions.push(verdict);
            continue;
        }
        let mut signals = signals_for(cx, pool_addr, &pc.provider_kind);
        // Nodes count in the planner's buckets (all allowed zones are one for EC2 fleets).
        for n in &mut signals.nodes {
            n.zone = shape::bucket(&shape, &n.zone).to_string();
        }
        if let Some(u) = signals.utilization() {
            utilization.insert(pool_addr.clone(), u);
        }
        let limits = limits_for(cx, pool_addr, pool, current, cost);
        let last = cx.state.autoscale.get(&pool_addr.to_string()).and_then(|r| humantime::parse_rfc3339(&r.at).ok());
        let (base, pct) = (pool.mix.on_demand_base.value, pool.mix.spot_percent.value);
        let fell_back = cx.state.resources.get(&pool_addr.to_string()).is_some_and(|r| r.fallback.is_some());
        let idle = (Rules::from(a).idle_for, cx.now);
        let layout = planner_layout(&shape, (base, pct), &signals, idle, fell_back);
        match autoscale::decide(&Rules::from(a), &limits, &signals, last, cx.now, &layout) {
            Decision::Hold { why } => verdict.reason = why,
            Decision::Up { to, reason } => {
                (verdict.action, verdict.to, verdict.reason, verdict.applied) =
                    (Direction::Up, to, reason.clone(), true);
                actions.push(ScaleAction {
                    pool: pool_addr.clone(),
                    from: current,
                    to,
                    remove: vec![],
                    reason,
                    at: at.clone(),
                });
            }
            Decision::Down { to, remove, reason } => {
                (verdict.action, verdict.to, verdict.reason, verdict.applied) =
                    (Direction::Down, to, reason.clone(), true);
                actions.push(ScaleAction {
                    pool: pool_addr.clone(),
                    from: current,
                    to,
                    remove,
                    reason,
                    at: at.clone(),
                });
            }
        }
        decisions.push(verdict);
    }
    (actions, decisions, utilization)
}

/// The planner's layout for `n` nodes of the pool ([`keep::layout`]): of the even layouts,
/// the one that keeps the most of its live nodes, idle ones last, so that the idle nodes
/// chosen here are the ones the plan removes. A pool that `fell_back` keeps the usual
/// layout, as the planner does (its fallback record is about that one).
pub(super) fn planner_layout<'a>(
    shape: &'a shape::PoolShape,
    (base, pct): (u32, u32),
    signals: &'a Signals,
    (idle_for, now): (Duration, SystemTime),
    fell_back: bool,
) -> impl Fn(u32) -> keep::Layout + 'a {
    let mut have: keep::Have<'a> = BTreeMap::new();
    for n in signals.nodes.iter().filter(|_| !fell_back) {
        let idle = !n.busy && n.idle_since.is_some_and(|s| age_at(now, s) >= idle_for);
        have.entry((n.zone.as_str(), n.capacity)).or_default().push([1, u32::from(!idle), 0, u32::from(n.busy)]);
    }
    move |n| keep::layout(shape, n, base, pct, &have)
}

fn age_at(now: SystemTime, since: SystemTime) -> Duration {
    now.duration_since(since).unwrap_or_default()
}

/// Live nodes of the pool with their usage. The sim cloud reports usage. On a VM pool of
/// a cloud gpuplan knows it too: a warm node is busy while a job runs on it (through the
/// cloud's run-command API), or when this pass launches one there, and idle since it
/// joined the pool (its ledger line's start, by the provider's clock; a node without one
/// is never counted idle) or since its last job ended, whichever is later. Kubernetes
/// pools (the cluster places pods) give `usage_known: false`: no scale-down, no utilization.
fn signals_for(cx: &Context<'_>, pool: &Address, provider_kind: &str) -> Signals {
    let vm_pool = provider_kind != "sim" && cx.spec.gpu_pools.get(pool).is_some_and(|p| p.kubernetes.is_none());
    if vm_pool {
        let jobs = || cx.baseline.jobs.iter().filter(|j| &j.pool == pool);
        // Runs on the pool's own nodes (warm nodes), not on nodes made for them.
        let warm_runs: Vec<&crate::model::JobRun> =
            jobs().flat_map(|j| &j.runs).filter(|r| !r.has_own_node()).collect();
        let on_warm = |id: &str| warm_runs.clone().into_iter().filter(|r| r.node_id == id).collect::<Vec<_>>();
        let nodes = cx
            .observed
            .iter()
            .filter(|n| n.is_live() && &n.pool == pool)
            .map(|n| {
                let launching = jobs().flat_map(|j| &j.launches).any(|l| l.request.node_id == n.id);
                let last_end = on_warm(&n.id)
                    .into_iter()
                    .filter_map(|r| r.finished_at.as_deref())
                    // A hand-edited end time that does not parse leaves the node idle
                    // since it joined (below): never busier than it is.
                    .filter_map(|t| humantime::parse_rfc3339_weak(t).ok())
                    .max();
                let joined = cx.state.spend.get(&n.id).map(|l| from_ms(l.start_ms));
                NodeSignal {
                    id: n.id.clone(),
                    zone: n.zone.clone(),
                    capacity: n.capacity,
                    busy: launching || on_warm(&n.id).iter().any(|r| r.is_active()),
                    idle_since: joined.map(|j| last_end.map_or(j, |e| e.max(j))),
                }
            })
            .collect();
        return Signals { nodes, usage_known: true, queued: autoscale::queued_demand(cx.waiting, pool) };
    }
    let usage: Option<BTreeMap<&str, &NodeUsage>> =
        cx.usage.filter(|_| provider_kind == "sim").map(|u| u.iter().map(|n| (n.id.as_str(), n)).collect());
    let nodes = cx
        .observed
        .iter()
        .filter(|n| n.is_live() && &n.pool == pool)
        .map(|n| {
            let u = usage.as_ref().and_then(|m| m.get(n.id.as_str()));
            NodeSignal {
                id: n.id.clone(),
                zone: n.zone.clone(),
                capacity: n.capacity,
                busy: u.is_some_and(|u| u.busy),
                idle_since: u.and_then(|u| u.idle_since_ms).map(from_ms),
            }
        })
        .collect();
    Signals { nodes, usage_known: usage.is_some(), queued: autoscale::queued_demand(cx.waiting, pool) }
}

/// min..max, the tightest quota and budget over the pool (from the baseline plan's cost),
/// and the pool's node prices.
fn limits_for(
    cx: &Context<'_>,
    addr: &Address,
    pool: &crate::spec::model::GpuPool,
    current: u32,
    cost: Option<&CostReport>,
) -> Limits {
    let mut limits = Limits {
        current,
        min: pool.nodes.min.value,
        max: pool.nodes.max.value,
        gpus_per_node: pool.gpus_per_node.value,
        on_demand_base: pool.mix.on_demand_base.value,
        spot_percent: pool.mix.spot_percent.value,
        ..Limits::default()
    };
    let Some(cost) = cost else { return limits };
    if let Some(p) = cost.pools.iter().find(|p| &p.address == addr) {
        limits.on_demand_usd = p.on_demand_price.as_ref().map_or(0.0, |x| x.usd_per_hour);
        limits.spot_usd = p.spot_price.as_ref().map_or(limits.on_demand_usd, |x| x.usd_per_hour);
    }
    for qc in &cost.quotas {
        if !cost::quota_pools(cx.spec, &qc.address).contains(addr) {
            continue;
        }
        let Some(q) = cx.spec.quotas.get(&qc.address) else { continue };
        if let Some(max) = &q.max_gpus {
            let left = (max.value as u64).saturating_sub(qc.gpus_after);
            limits.quota_gpus_left = Some(limits.quota_gpus_left.map_or(left, |l| l.min(left)));
        }
        if let Some(b) = &q.budget {
            let mut tightest = limits.budget_usd_left;
            if let Some(h) = &b.hourly_usd {
                let left = (h.value - qc.hourly_after).max(0.0);
                tightest = Some(tightest.map_or(left, |l| l.min(left)));
            }
            if let Some(m) = &b.monthly_usd {
                let left = ((m.value - qc.monthly_after) / cost::HOURS_PER_MONTH).max(0.0);
                tightest = Some(tightest.map_or(left, |l| l.min(left)));
            }
            limits.budget_usd_left = tightest;
        }
    }
    limits
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::autoscale::{Decision, Limits, Rules};
    use crate::providers::{Capacity, NodeState};
    use crate::state::model::SpendEntry;

    const SPEC: &str = r#"
provider "aws" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider       = "aws"
  zones          = ["us-east-1a"]
  gpu            = "A10G"
  gpus_per_node  = 1
  instance_types = ["g5.xlarge"]
  nodes {
    min     = 0
    desired = 2
    max     = 4
  }
}
"#;

    fn node(id: &str) -> Node {
        Node {
            provider: None,
            id: id.into(),
            pool: "gpu_pool.train".parse().unwrap(),
            instance_type: "g5.xlarge".into(),
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            capacity: Capacity::OnDemand,
            state: NodeState::Running,
            image: None,
            tags: Default::default(),
        }
    }

    fn line(start: SystemTime) -> SpendEntry {
        SpendEntry {
            pool: "gpu_pool.train".into(),
            provider: "aws".into(),
            job: None,
            instance_type: "g5.xlarge".into(),
            capacity: Capacity::OnDemand,
            usd_per_hour: 1.0,
            price_source: "catalog".into(),
            start_ms: unix_ms(start),
            end_ms: None,
        }
    }

    /// A cloud VM pool's warm nodes that ran no job are idle since they joined, and the autoscaler scales the pool down by the one idle longer than
    /// `idle_for`; a node gpuplan has no ledger line for is never counted idle.
    #[test]
    fn warm_nodes_of_a_cloud_vm_pool_are_idle_since_they_joined() {
        let mut sources = crate::diag::Sources::default();
        sources.add("main.hcl", SPEC);
        let spec = crate::spec::load_sources(sources, &Default::default()).spec;
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut state = State::new("l".into());
        state.spend.insert("i-old".into(), line(t0));
        state.spend.insert("i-new".into(), line(t0 + Duration::from_secs(20 * 60)));
        let observed = vec![node("i-old"), node("i-new"), node("i-unknown")];
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "format_version": 1, "lineage": "l", "serial": 0, "spec_digest": "", "refreshed": true,
            "changes": [], "drift": [], "summary": {"add": 0, "change": 0, "destroy": 0}
        }))
        .expect("an empty plan");
        let now = t0 + Duration::from_secs(30 * 60);
        let cx = Context {
            spec: &spec,
            state: &state,
            baseline: &plan,
            observed: &observed,
            usage: None,
            waiting: &[],
            now,
        };
        let pool: Address = "gpu_pool.train".parse().unwrap();
        let s = signals_for(&cx, &pool, "aws");
        assert!(s.usage_known);
        let idle: Vec<(&str, Option<SystemTime>)> = s.nodes.iter().map(|n| (n.id.as_str(), n.idle_since)).collect();
        assert_eq!(
            idle,
            [("i-old", Some(t0)), ("i-new", Some(t0 + Duration::from_secs(20 * 60))), ("i-unknown", None)]
        );
        let rules = Rules {
            queue_wait: Duration::from_secs(300),
            utilization_above: 80,
            idle_for: Duration::from_secs(15 * 60),
            step: 1,
            cooldown: Duration::from_secs(300),
        };
        let limits = Limits { current: 3, min: 0, max: 4, gpus_per_node: 1, ..Limits::default() };
        let layout = |n: u32| vec![("us-east-1a".to_string(), Capacity::OnDemand, n)];
        match crate::autoscale::decide(&rules, &limits, &s, None, now, &layout) {
            Decision::Down { to, remove, .. } => {
                assert_eq!(to, 2);
                assert_eq!(remove, ["i-old"]);
            }
            other => panic!("expected a scale-down of the node idle for 30 minutes, got {other:?}"),
        }
        // The same nodes in a Kubernetes pool: the cluster places pods, usage is unknown.
        let k8s = SPEC.replace("instance_types = [\"g5.xlarge\"]", "instance_types = [\"g5.xlarge\"]\n  kubernetes {\n    kubeconfig   = \"k\"\n    service_cidr = \"10.100.0.0/16\"\n  }");
        let mut sources = crate::diag::Sources::default();
        sources.add("main.hcl", &k8s);
        let spec = crate::spec::load_sources(sources, &Default::default()).spec;
        let cx = Context { spec: &spec, ..cx };
        assert!(!signals_for(&cx, &pool, "aws").usage_known);
    }

    /// A warm node running a job (through run-command) is busy; one whose job ended is
    /// idle since it ended, not since it joined.
    #[test]
    fn warm_nodes_running_jobs_are_busy_and_idle_since_their_last_job() {
        let mut sources = crate::diag::Sources::default();
        sources.add("main.hcl", SPEC);
        let spec = crate::spec::load_sources(sources, &Default::default()).spec;
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut state = State::new("l".into());
        state.spend.insert("i-busy".into(), line(t0));
        state.spend.insert("i-done".into(), line(t0));
        let observed = vec![node("i-busy"), node("i-done")];
        let ended = humantime::format_rfc3339_seconds(t0 + Duration::from_secs(20 * 60)).to_string();
        let run = |id: &str, node: &str, status: &str, end: Option<&str>| {
            serde_json::json!({"replica": 0, "attempt": 1, "id": id, "provider": "aws", "region": "us-east-1",
                "node_id": node, "capacity": "on-demand", "gpus": 1, "status": status, "finished_at": end})
        };
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "format_version": 1, "lineage": "l", "serial": 0, "spec_digest": "", "refreshed": true,
            "changes": [], "drift": [], "summary": {"add": 0, "change": 0, "destroy": 0},
            "jobs": [{"address": "job.a", "pool": "gpu_pool.train", "priority": "medium", "preemptible": false,
                "replicas": 1, "gpus_per_replica": 1, "placement": "running", "attempt": 1, "retries": 0,
                "runs": [run("i-busy/c1", "i-busy", "running", None), run("i-done/c0", "i-done", "succeeded", Some(&ended))]}]
        }))
        .expect("a plan with a job on warm nodes");
        let cx = Context {
            spec: &spec,
            state: &state,
            baseline: &plan,
            observed: &observed,
            usage: None,
            waiting: &[],
            now: t0 + Duration::from_secs(30 * 60),
        };
        let s = signals_for(&cx, &"gpu_pool.train".parse().unwrap(), "aws");
        let seen: Vec<(&str, bool, Option<SystemTime>)> =
            s.nodes.iter().map(|n| (n.id.as_str(), n.busy, n.idle_since)).collect();
        assert_eq!(seen, [("i-busy", true, Some(t0)), ("i-done", false, Some(t0 + Duration::from_secs(20 * 60)))]);
    }
}
