//! Prometheus metrics of `gpuplan reconcile`: a registry the loop updates after every
//! pass, rendered in the text exposition format 0.0.4, and a small HTTP/1.1 responder for
//! `GET /metrics` ([`server`]).
//!
//! Series (all prefixed `gpuplan_`): `pools`, `gpus{pool,state,capacity}`,
//! `pool_nodes_desired{pool}`, `pool_utilization_percent{pool}`, `queued_jobs{pool}`,
//! `hourly_cost_usd`, `pool_hourly_cost_usd{pool}`, `drift_items`, `pending_changes`,
//! `last_run_timestamp_seconds`, `last_success_timestamp_seconds`,
//! `reconcile_runs_total`, `reconcile_failures_total`, `reconcile_skipped_total`,
//! `autoscale_actions_total{pool,direction}`, `leader`, `lock_takeovers_total`,
//! `lock_renew_failures_total`, `spend_month_to_date_usd{pool}`,
//! `quota_spend_month_to_date_usd{quota}`, `policy_standing{policy}`,
//! `node_unhealthy{pool,signal}` and `repairs_total{pool}`. Only this module knows their
//! names.

pub mod server;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::addr::Address;
use crate::providers::{Capacity, NodeState};
use crate::reconcile::{Outcome, Pass};
use crate::spec::Spec;

/// The remote state lock's counters in this process: (series, help, value).
fn lock_counters() -> [(&'static str, &'static str, f64); 2] {
    use crate::state::lock::{renew_failures, takeovers};
    [
        ("lock_takeovers_total", "Expired remote state locks this process took over.", takeovers() as f64),
        (
            "lock_renew_failures_total",
            "Failed renewals of a remote state lock this process held.",
            renew_failures() as f64,
        ),
    ]
}

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    runs: u64,
    failures: u64,
    skipped: u64,
    /// Rounds skipped since the last one that ran.
    skipped_in_a_row: u64,
    last_run: Option<f64>,
    last_success: Option<f64>,
    scale_actions: BTreeMap<(String, &'static str), u64>,
    /// Nodes replaced for their GPU health by applied passes, by pool.
    repairs: BTreeMap<String, u64>,
    fleet: Option<Fleet>,
    /// Whether this replica may act: leads the election, or runs without one.
    leader: bool,
    /// `/readyz`: set once the replica can do its part (the election got its first
    /// answer, or there is no election).
    ready: bool,
}

/// What the last completed pass saw.
#[derive(Default)]
struct Fleet {
    pools: usize,
    /// (pool, state, capacity) → GPUs.
    gpus: BTreeMap<(String, &'static str, &'static str), u64>,
    desired: BTreeMap<String, u32>,
    utilization: BTreeMap<String, f64>,
    queued: BTreeMap<String, usize>,
    hourly: f64,
    pool_hourly: BTreeMap<String, f64>,
    drift: usize,
    pending: usize,
    /// Month-to-date spend from the ledger, by pool and by quota.
    spend_pool: BTreeMap<String, f64>,
    spend_quota: BTreeMap<String, f64>,
    /// Standing violations by policy (0 for a policy that passes on the fleet as it stands).
    standing: BTreeMap<String, usize>,
    /// Unhealthy nodes by (pool, signal), from the last pass's plan.
    unhealthy: BTreeMap<(String, String), usize>,
}

fn seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}

impl Metrics {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic while rendering cannot leave a half-updated registry worth refusing.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pass that ran (whatever its outcome).
    pub fn record_pass(&self, spec: &Spec, pass: &Pass) {
        let fleet = fleet(spec, pass);
        let mut r = self.registry();
        r.runs += 1;
        r.skipped_in_a_row = 0;
        r.last_run = Some(seconds(pass.at));
        if pass.outcome.succeeded() {
            r.last_success = Some(seconds(pass.at));
        } else {
            r.failures += 1;
        }
        for d in pass.decisions.iter().filter(|d| d.applied && d.action != crate::autoscale::Direction::Hold) {
            *r.scale_actions.entry((d.pool.to_string(), d.action.as_str())).or_default() += 1;
        }
        if matches!(pass.outcome, Outcome::Applied) {
            for h in pass.plan.health.iter().filter(|h| h.action == "replace" && h.held_by.is_none()) {
                *r.repairs.entry(h.address.to_string()).or_default() += 1;
            }
        }
        r.fleet = Some(fleet);
    }

    /// A pass that failed before it could report (bad spec, provider or state error).
    pub fn record_failure(&self, at: SystemTime) {
        let mut r = self.registry();
        r.runs += 1;
        r.skipped_in_a_row = 0;
        r.failures += 1;
        r.last_run = Some(seconds(at));
    }

    /// A round skipped because another run held the state lock.
    pub fn record_skip(&self) {
        let mut r = self.registry();
        r.skipped += 1;
        r.skipped_in_a_row += 1;
    }

    /// Leader of the election (or running without one): `gpuplan_leader 1`.
    pub fn set_leader(&self, leader: bool) {
        self.registry().leader = leader;
    }

    /// Ready to serve its part: `/readyz` answers 200 from now on.
    pub fn set_ready(&self, ready: bool) {
        self.registry().ready = ready;
    }

    pub fn ready(&self) -> bool {
        self.registry().ready
    }

    /// Rounds skipped for the lock since the last round that ran.
    pub fn skipped_in_a_row(&self) -> u64 {
        self.registry().skipped_in_a_row
    }

    /// The text exposition format 0.0.4.
    pub fn render(&self) -> String {
        let r = self.registry();
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| {
            family(&mut out, name, kind, help, samples)
        };
        family("reconcile_runs_total", "counter", "Reconcile passes run.", vec![(String::new(), r.runs as f64)]);
        family(
            "reconcile_failures_total",
            "counter",
            "Reconcile passes that failed, were refused or were denied.",
            vec![(String::new(), r.failures as f64)],
        );
        family(
            "reconcile_skipped_total",
            "counter",
            "Rounds skipped because another run held the state lock.",
            vec![(String::new(), r.skipped as f64)],
        );
        if let Some(t) = r.last_run {
            family(
                "last_run_timestamp_seconds",
                "gauge",
                "When the last pass ran (Unix time).",
                vec![(String::new(), t)],
            );
        }
        if let Some(t) = r.last_success {
            family(
                "last_success_timestamp_seconds",
                "gauge",
                "When the last successful pass ran (Unix time).",
                vec![(String::new(), t)],
            );
        }
        family(
            "leader",
            "gauge",
            "1 on the replica that may plan and apply (the lease holder, or the only reconciler), 0 on followers.",
            vec![(String::new(), if r.leader { 1.0 } else { 0.0 })],
        );
        for (name, help, n) in lock_counters() {
            family(name, "counter", help, vec![(String::new(), n)]);
        }
        family(
            "autoscale_actions_total",
            "counter",
            "Autoscaler steps carried out, by pool and direction.",
            r.scale_actions
                .iter()
                .map(|((pool, dir), n)| (labels(&[("pool", pool), ("direction", dir)]), *n as f64))
                .collect(),
        );
        family(
            "repairs_total",
            "counter",
            "Nodes replaced for their GPU health, by pool.",
            r.repairs.iter().map(|(pool, n)| (labels(&[("pool", pool)]), *n as f64)).collect(),
        );
        if let Some(f) = &r.fleet {
            fleet_families(&mut out, f);
        }
        out
    }
}

/// One metric family: its `HELP` and `TYPE` lines and its samples. Writing to a `String`
/// cannot fail.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>) {
    let _ = writeln!(out, "# HELP gpuplan_{name} {help}");
    let _ = writeln!(out, "# TYPE gpuplan_{name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(out, "gpuplan_{name}{labels} {}", number(v));
    }
}

/// The families of what the last completed pass saw.
fn fleet_families(out: &mut String, f: &Fleet) {
    let mut family =
        |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| family(out, name, kind, help, samples);
    family("pools", "gauge", "GPU pools in the spec.", vec![(String::new(), f.pools as f64)]);
    family(
        "gpus",
        "gauge",
        "GPUs of gpuplan's nodes by pool, node state and capacity type.",
        f.gpus
            .iter()
            .map(|((pool, state, cap), n)| (labels(&[("pool", pool), ("state", state), ("capacity", cap)]), *n as f64))
            .collect(),
    );
    family(
        "pool_nodes_desired",
        "gauge",
        "Nodes each pool converges to (the autoscaler's count for autoscaled pools).",
        f.desired.iter().map(|(p, n)| (labels(&[("pool", p)]), *n as f64)).collect(),
    );
    family(
        "pool_utilization_percent",
        "gauge",
        "Busy nodes as a percentage of live nodes, for autoscaled pools whose usage is known.",
        f.utilization.iter().map(|(p, u)| (labels(&[("pool", p)]), *u)).collect(),
    );
    family(
        "queued_jobs",
        "gauge",
        "Job replicas waiting for GPUs, by pool.",
        f.queued.iter().map(|(p, n)| (labels(&[("pool", p)]), *n as f64)).collect(),
    );
    family("hourly_cost_usd", "gauge", "Hourly cost of the fleet in USD.", vec![(String::new(), f.hourly)]);
    family(
        "pool_hourly_cost_usd",
        "gauge",
        "Hourly cost of each pool in USD.",
        f.pool_hourly.iter().map(|(p, c)| (labels(&[("pool", p)]), *c)).collect(),
    );
    family("drift_items", "gauge", "Drift found by the last pass.", vec![(String::new(), f.drift as f64)]);
    family(
        "pending_changes",
        "gauge",
        "Changes the last pass planned but did not apply (dry run, denial, refusal, failure).",
        vec![(String::new(), f.pending as f64)],
    );
    family(
        "spend_month_to_date_usd",
        "gauge",
        "Spend this calendar month (UTC) in USD from the ledger in state, by pool.",
        f.spend_pool.iter().map(|(p, c)| (labels(&[("pool", p)]), *c)).collect(),
    );
    family(
        "quota_spend_month_to_date_usd",
        "gauge",
        "Spend this calendar month (UTC) in USD from the ledger in state, by quota.",
        f.spend_quota.iter().map(|(q, c)| (labels(&[("quota", q)]), *c)).collect(),
    );
    family(
        "policy_standing",
        "gauge",
        "Soft and hard policy verdicts failing on the fleet as it stands (standing violations), by policy.",
        f.standing.iter().map(|(p, n)| (labels(&[("policy", p)]), *n as f64)).collect(),
    );
    family(
        "node_unhealthy",
        "gauge",
        "Nodes with a GPU fault their pool counts, by pool and signal.",
        f.unhealthy.iter().map(|((p, sig), n)| (labels(&[("pool", p), ("signal", sig)]), *n as f64)).collect(),
    );
}

fn fleet(spec: &Spec, pass: &Pass) -> Fleet {
    let mut f = Fleet {
        pools: spec.gpu_pools.len(),
        spend_pool: pass.spend.by_pool.clone(),
        spend_quota: pass.spend.by_quota.clone(),
        ..Fleet::default()
    };
    let gpus_per_node = |pool: &Address| spec.gpu_pools.get(pool).map_or(0, |p| p.gpus_per_node.value as u64);
    let pools: Vec<&Address> = spec.gpu_pools.keys().collect();
    for p in &pools {
        for state in ["pending", "running", "reclaimed"] {
            for cap in [Capacity::OnDemand, Capacity::Spot] {
                f.gpus.insert((p.to_string(), state, cap.as_str()), 0);
            }
        }
    }
    for n in &pass.observed {
        let state = match n.state {
            NodeState::Pending => "pending",
            NodeState::Running => "running",
            NodeState::Reclaimed => "reclaimed",
            NodeState::Stopped => "stopped",
            NodeState::Terminated => continue,
        };
        let mut g = gpus_per_node(&n.pool);
        if g == 0 {
            g = pass
                .plan
                .changes
                .iter()
                .find(|c| c.address == n.pool)
                .and_then(|c| c.pool.as_ref())
                .map_or(0, |p| p.before.gpus_per_node as u64);
        }
        *f.gpus.entry((n.pool.to_string(), state, n.capacity.as_str())).or_default() += g;
    }
    for c in &pass.plan.changes {
        if let Some(pc) = &c.pool
            && spec.gpu_pools.contains_key(&c.address)
        {
            f.desired.insert(c.address.to_string(), pc.after.nodes());
        }
    }
    f.utilization = pass.utilization.iter().map(|(p, u)| (p.to_string(), *u)).collect();
    f.queued = pass.queued.iter().map(|(p, n)| (p.to_string(), *n)).collect();
    let done = matches!(pass.outcome, Outcome::Applied | Outcome::NoChanges);
    if let Some(cost) = &pass.plan.cost {
        f.hourly = if done { cost.hourly_after } else { cost.hourly_before };
        for p in &cost.pools {
            f.pool_hourly.insert(p.address.to_string(), if done { p.hourly_after } else { p.hourly_before });
        }
    }
    for r in &pass.plan.policies {
        let n = f.standing.entry(r.name.clone()).or_default();
        *n += usize::from(crate::reconcile::standing::counts(r));
    }
    for h in &pass.plan.health {
        *f.unhealthy.entry((h.address.to_string(), h.signal.to_string())).or_default() += 1;
    }
    f.drift = pass.plan.drift.len();
    f.pending =
        if done { 0 } else { pass.plan.changes.iter().filter(|c| c.action != crate::plan::Action::NoOp).count() };
    f
}

/// `{a="x",b="y"}` with values escaped as the format asks (backslash, quote, newline).
fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Integers without a fraction, others as Rust prints them (always valid Go floats).
fn number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_numbers_plain() {
        assert_eq!(labels(&[("pool", "a\"b\\c\nd")]), r#"{pool="a\"b\\c\nd"}"#);
        assert_eq!(number(3.0), "3");
        assert_eq!(number(12.5), "12.5");
    }

    #[test]
    fn an_empty_registry_renders_counters_with_help_and_type() {
        let m = Metrics::default();
        m.record_skip();
        let text = m.render();
        assert!(text.contains("# HELP gpuplan_reconcile_runs_total Reconcile passes run.\n"), "{text}");
        assert!(
            text.contains("# TYPE gpuplan_reconcile_runs_total counter\ngpuplan_reconcile_runs_total 0\n"),
            "{text}"
        );
        assert!(text.contains("gpuplan_reconcile_skipped_total 1\n"), "{text}");
        assert!(!text.contains("gpuplan_pools"), "no fleet series before the first pass: {text}");
    }
}
