//! What a pool's GPU health reads mean for its nodes (docs/design/gpu-health.md): which
//! live nodes show a fault the pool counts (after `grace`, except fatal XIDs and a failed
//! readiness check, which count at once), and for each its fate: replaced, quarantined, or
//! held at `max_repairs` with one note naming the cause the held nodes share. Pure.

use std::collections::BTreeSet;

use super::PoolCtx;
use crate::model::health::{Finding, Signal};
use crate::plan::model::{Cordon, DriftItem, DriftKind, Evidence, HealthEntry, Plan, PlanNote};
use crate::providers::Node;
use crate::spec::model::{GpuPool, HealthAction, Readiness};

/// One unhealthy node and what happens to it.
pub(crate) struct Verdict<'a> {
    /// When it was judged (the provider's clock; 0 without one).
    pub at_ms: u64,
    pub node: &'a Node,
    /// The first fault counted, first seen when the state recorded it.
    pub finding: Finding,
    pub action: HealthAction,
    /// Past `max_repairs`: the node waits.
    pub held: bool,
    /// The other signals the pool counts on this node (the evidence names them).
    pub also: Vec<Signal>,
    /// A quarantine in a Kubernetes cluster whose Node is there and not cordoned yet: where to.
    pub cordon: Option<Cordon>,
}

impl Verdict<'_> {
    /// [`evidence`] of the first counted finding, naming the other signals counted.
    pub fn evidence(&self) -> String {
        let mut text = evidence(&self.finding);
        if !self.also.is_empty() {
            let names: Vec<&str> = self.also.iter().map(|s| s.as_str()).collect();
            text += &format!("; also {}", names.join(", "));
        }
        text
    }

    /// Is the node replaced by this plan?
    pub fn repaired(&self) -> bool {
        self.action == HealthAction::Replace && !self.held
    }
}

/// The pool's unhealthy live nodes, by id, with their fates; `now_ms` is the provider's clock,
/// `region` the pool's (a TKE or ACK cluster's locator names it).
pub(crate) fn judge<'a>(cx: &PoolCtx<'a, '_>, pool: &GpuPool, region: &str, now_ms: Option<u64>) -> Vec<Verdict<'a>> {
    let Some(reads) = cx.input.health else { return Vec::new() };
    let health = pool.health();
    let grace_ms = u64::try_from(health.grace().as_millis()).unwrap_or(u64::MAX);
    let counts = |f: &Finding| match f.signal {
        Signal::ReadinessFailed => health.readiness.value != Readiness::None,
        Signal::XidFatal => health.counts(f.signal),
        s => health.counts(s) && now_ms.is_some_and(|now| now.saturating_sub(f.seen_ms) >= grace_ms),
    };
    let mut live: Vec<&'a Node> = cx.live.clone();
    live.sort_by(|a, b| a.id.cmp(&b.id));
    // An hour's repairs, counting those applied before this plan.
    let done = now_ms.map_or(0, |now| cx.input.state.recent_repairs(&cx.addr.to_string(), now));
    let mut repairs = (health.max_repairs.value as usize).saturating_sub(done);
    let mut out = Vec::new();
    // A quarantine keeps jobs off the node; in a cluster, the cluster's scheduler too.
    let cluster =
        pool.kubernetes.as_ref().filter(|_| health.action.value == HealthAction::Quarantine).map(|k| Cordon {
            provider: crate::providers::kube::name(&pool.provider.value),
            cluster: crate::providers::kube::pool_locator(k, region),
        });
    for node in live {
        let read = reads.get(&node.id);
        // Each fault as first seen: the state remembers the reads before this one.
        let before = cx.input.state.health.get(&node.id).map_or(&[][..], Vec::as_slice);
        let counted: Vec<Finding> = read
            .map(|r| r.findings.iter().map(|f| f.first_seen_in(before)).filter(|f| counts(f)).collect())
            .unwrap_or_default();
        let Some((finding, rest)) = counted.split_first() else { continue };
        let finding = finding.clone();
        let mut also: Vec<Signal> = rest.iter().map(|f| f.signal).filter(|s| *s != finding.signal).collect();
        also.dedup();
        let held = health.action.value == HealthAction::Replace && repairs == 0;
        if health.action.value == HealthAction::Replace && !held {
            repairs -= 1;
        }
        // Only a Node the cluster has and has not cordoned yet.
        let cordon = cluster.clone().filter(|_| read.and_then(|r| r.cordoned) == Some(false));
        out.push(Verdict {
            at_ms: now_ms.unwrap_or(0),
            node,
            finding,
            action: health.action.value,
            held,
            also,
            cordon,
        });
    }
    out
}

/// What the state's `health` becomes: each live node read this time with its faults, each
/// first seen when the state first recorded it; a node read healthy, no longer live, or
/// that this plan removes (`going`) is forgotten. Empty when nothing was read (no refresh)
/// or the state already agrees.
pub(crate) fn record(
    input: &crate::plan::context::PlanInput<'_>,
    live: &std::collections::BTreeMap<crate::addr::Address, Vec<&Node>>,
    going: &BTreeSet<&str>,
) -> Evidence {
    let mut out = Evidence::default();
    let Some(reads) = input.health else { return out };
    let recorded = &input.state.health;
    // A node read healthy that the state does not record changes nothing: a fleet read
    // healthy with nothing recorded (thousands of nodes) builds no set of its live nodes.
    let mut changing =
        reads.iter().filter(|(id, read)| !read.findings.is_empty() || recorded.contains_key(*id)).peekable();
    if changing.peek().is_none() && recorded.is_empty() {
        return out;
    }
    let live: BTreeSet<&str> =
        live.values().flatten().map(|n| n.id.as_str()).filter(|id| !going.contains(id)).collect();
    for (id, read) in changing.filter(|(id, _)| live.contains(id.as_str())) {
        let before = recorded.get(id).map_or(&[][..], Vec::as_slice);
        let now: Vec<Finding> = read.findings.iter().map(|f| f.first_seen_in(before)).collect();
        if now.is_empty() {
            if recorded.contains_key(id) {
                out.remove.push(id.clone());
            }
        } else if recorded.get(id) != Some(&now) {
            out.set.insert(id.clone(), now);
        }
    }
    out.remove.extend(recorded.keys().filter(|id| !live.contains(id.as_str())).cloned());
    out
}

/// `XID 79 (GPU has fallen off the bus) on GPU 3, seen 12:04`.
pub(crate) fn evidence(f: &Finding) -> String {
    let what = match f.xid {
        Some(x) => format!("XID {x} ({})", f.detail),
        None => format!("{} ({})", f.signal, f.detail),
    };
    let on = match (f.gpu, &f.pci_bus) {
        (Some(g), _) => format!(" on GPU {g}"),
        (None, Some(bus)) => format!(" on GPU {bus}"),
        (None, None) => String::new(),
    };
    let time = crate::model::time::rfc3339_ms(f.seen_ms);
    let hhmm = time.get(11..16).unwrap_or(&time);
    format!("{what}{on}, seen {hhmm}")
}

/// Every verdict into the plan: its `health[]` entry, a drift item (kind `unhealthy`),
/// and, when some replacements wait at `max_repairs`, one note naming their common cause.
pub(crate) fn report(cx: &PoolCtx<'_, '_>, pool: &GpuPool, verdicts: &[Verdict<'_>], plan: &mut Plan) {
    for v in verdicts {
        let evidence = v.evidence();
        let fate = match (v.action, v.held) {
            (HealthAction::Replace, false) => "replaced by this plan".to_string(),
            (HealthAction::Replace, true) => "replacement waits (max_repairs)".to_string(),
            (HealthAction::Quarantine, _) if v.cordon.is_some() => {
                "quarantined: no new jobs; cordoned by this plan".to_string()
            }
            (HealthAction::Quarantine, _) => "quarantined: no new jobs".to_string(),
        };
        plan.drift.push(DriftItem {
            address: cx.addr.clone(),
            kind: DriftKind::Unhealthy,
            node_id: Some(v.node.id.clone()),
            // `; ` before the fate: a colon after `seen 11:15` would read as part of the time.
            message: format!("node {}: {evidence}; {fate}", v.node.id),
        });
        plan.health.push(HealthEntry {
            address: cx.addr.clone(),
            node: v.node.id.clone(),
            signal: v.finding.signal,
            gpu: v.finding.gpu,
            xid: v.finding.xid,
            seen: crate::model::time::rfc3339_ms(v.finding.seen_ms),
            action: v.action.as_str().to_string(),
            held_by: v.held.then(|| "max_repairs".to_string()),
            evidence,
            at_ms: v.at_ms,
            cordon: v.cordon.clone(),
        });
    }
    let held: Vec<&Verdict<'_>> = verdicts.iter().filter(|v| v.held).collect();
    if !held.is_empty() {
        plan.notes.push(PlanNote { address: cx.addr.clone(), message: storm_alert(pool, verdicts, &held) });
    }
}

/// The one alert of a repair storm: how many nodes are unhealthy, the bound, and what
/// they have in common (the same XID or signal, image, zone).
fn storm_alert(pool: &GpuPool, all: &[Verdict<'_>], held: &[&Verdict<'_>]) -> String {
    let bound = pool.health().max_repairs.value;
    let mut common = Vec::new();
    let one = |set: BTreeSet<String>| if set.len() == 1 { set.into_iter().next() } else { None };
    let cause =
        one(all.iter().map(|v| v.finding.xid.map_or(v.finding.signal.to_string(), |x| format!("XID {x}"))).collect());
    if let Some(c) = cause {
        common.push(format!("the same fault ({c})"));
    }
    if let Some(i) =
        one(all.iter().map(|v| v.node.image.clone().unwrap_or_default()).collect()).filter(|i| !i.is_empty())
    {
        common.push(format!("the same image ({i})"));
    }
    if let Some(z) = one(all.iter().map(|v| v.node.zone.clone()).collect()) {
        common.push(format!("the same zone ({z})"));
    }
    let shared = if common.is_empty() { "no common cause seen".to_string() } else { common.join(", ") };
    format!(
        "repair stopped at max_repairs = {bound} an hour: {} unhealthy nodes, {} waiting; they share {shared}. \
         Find the cause before raising `health.max_repairs`",
        all.len(),
        held.len()
    )
}

/// The verdicts into the pool's change and the plan: each repaired node's delete says its
/// evidence, the change says why it moves, and [`report`] records every verdict.
pub(crate) fn explain(
    cx: &PoolCtx<'_, '_>,
    pool: &GpuPool,
    verdicts: &[Verdict<'_>],
    deletes: &mut [crate::plan::model::NodeDelete],
    reasons: &mut Vec<crate::plan::model::Reason>,
    plan: &mut Plan,
) {
    let mut repaired = 0;
    for v in verdicts.iter().filter(|v| v.repaired()) {
        if let Some(d) = deletes.iter_mut().find(|d| d.id == v.node.id) {
            d.reason = format!("replaced: {}", v.evidence());
            repaired += 1;
        }
    }
    if repaired > 0 {
        let noun = if repaired == 1 { "node" } else { "nodes" };
        let message = format!("{repaired} unhealthy {noun} replaced (GPU health)");
        reasons.push(crate::plan::model::Reason::new(crate::plan::model::ReasonCode::Unhealthy, message));
    }
    report(cx, pool, verdicts, plan);
}
