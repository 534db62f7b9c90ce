//! [`decide`]: one pool, one moment, one decision. Pure.

use crate::model::words::nodes;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::signals::{NodeSignal, Signals};
use crate::plan::shape;
use crate::providers::Capacity;
use crate::spec::model::Autoscaler;

/// An `autoscaler` block's rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    pub queue_wait: Duration,
    pub utilization_above: u32,
    pub idle_for: Duration,
    pub step: u32,
    pub cooldown: Duration,
}

impl From<&Autoscaler> for Rules {
    fn from(a: &Autoscaler) -> Self {
        Rules {
            queue_wait: a.queue_wait.value.0,
            utilization_above: a.utilization_above.value,
            idle_for: a.idle_for.value.0,
            step: a.step.value.max(1),
            cooldown: a.cooldown.value.0,
        }
    }
}

/// What bounds the pool's size.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Limits {
    /// The count the autoscaler owns now (what the plan converges to without a decision).
    pub current: u32,
    pub min: u32,
    pub max: u32,
    pub gpus_per_node: u32,
    /// GPUs the tightest `max_gpus` over this pool still allows beyond the plan (`None`: no limit).
    pub quota_gpus_left: Option<u64>,
    /// USD per hour the tightest budget over this pool still allows (`None`: no budget).
    pub budget_usd_left: Option<f64>,
    /// The mix and prices of one node, to price a step (`mix.on_demand_base`, `spot_percent`).
    pub on_demand_base: u32,
    pub spot_percent: u32,
    pub on_demand_usd: f64,
    pub spot_usd: f64,
}

impl Limits {
    /// The pool's hourly price at `n` nodes with its mix.
    pub fn hourly_at(&self, n: u32) -> f64 {
        let (od, spot) = shape::split(n, self.on_demand_base, self.spot_percent);
        od as f64 * self.on_demand_usd + spot as f64 * self.spot_usd
    }
}

/// Which way a decision moves a pool: what reports and metrics label it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
    Hold,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
            Direction::Hold => "hold",
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing to do, or something to do that a limit or the cooldown blocks: `why` says.
    Hold {
        why: String,
    },
    Up {
        to: u32,
        reason: String,
    },
    /// Remove these idle nodes (longest idle first).
    Down {
        to: u32,
        remove: Vec<String>,
        reason: String,
    },
}

impl Decision {
    pub fn target(&self) -> Option<u32> {
        match self {
            Decision::Hold { .. } => None,
            Decision::Up { to, .. } | Decision::Down { to, .. } => Some(*to),
        }
    }
}

fn hold(why: impl Into<String>) -> Decision {
    Decision::Hold { why: why.into() }
}

fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

fn age(now: SystemTime, since: SystemTime) -> Duration {
    now.duration_since(since).unwrap_or_default()
}

/// Decide for one pool at `now`.
///
/// - Up by `step` when a queued job has waited longer than `queue_wait` or utilization is
///   above `utilization_above`, capped by `max`, the quota's GPUs and the budget.
/// - Otherwise, with nothing queued, down by up to `step` nodes idle for `idle_for` or
///   longer, never below `min`, never a busy node. `layout(n)` is the planner's per-bucket
///   count for `n` nodes (`shape::layout`): a step is taken only when every bucket that
///   shrinks has enough idle nodes, so the plan removes exactly the idle ones.
/// - No action within `cooldown` of the last one (`last_action`).
pub fn decide(
    rules: &Rules,
    limits: &Limits,
    signals: &Signals,
    last_action: Option<SystemTime>,
    now: SystemTime,
    layout: &dyn Fn(u32) -> Vec<(String, Capacity, u32)>,
) -> Decision {
    let cooling = last_action
        .map(|t| t + rules.cooldown)
        .filter(|until| *until > now)
        .map(|until| human(until.duration_since(now).unwrap_or_default()));

    let waited = signals.queued.iter().filter(|d| age(now, d.since) > rules.queue_wait).count();
    let util = signals.utilization();
    let up_reason = if waited > 0 {
        Some(format!("{} waited > {}", count(waited, "job", "jobs"), human(rules.queue_wait)))
    } else {
        util.filter(|u| *u > rules.utilization_above as f64)
            .map(|u| format!("utilization {u:.0}% > {}%", rules.utilization_above))
    };
    if let Some(reason) = up_reason {
        return scale_up(rules, limits, reason, cooling);
    }
    if !signals.queued.is_empty() {
        return hold(format!(
            "{} queued, none for longer than {} yet",
            count(signals.queued.len(), "job", "jobs"),
            human(rules.queue_wait)
        ));
    }
    scale_down(rules, limits, signals, now, cooling, layout)
}

fn scale_up(rules: &Rules, limits: &Limits, reason: String, cooling: Option<String>) -> Decision {
    if let Some(left) = cooling {
        return hold(format!("{reason}, but in cooldown ({left} left)"));
    }
    let mut k = rules.step.min(limits.max.saturating_sub(limits.current));
    if k == 0 {
        return hold(format!("{reason}, but the pool is at its max ({})", nodes(limits.max as usize)));
    }
    let mut capped = None;
    if let Some(left) = limits.quota_gpus_left {
        let fit = (left / u64::from(limits.gpus_per_node.max(1))).min(u64::from(u32::MAX)) as u32;
        if fit < k {
            k = fit;
            capped = Some("quota");
        }
    }
    if let Some(budget) = limits.budget_usd_left {
        let base = limits.hourly_at(limits.current);
        while k > 0 && limits.hourly_at(limits.current + k) - base > budget + 1e-9 {
            k -= 1;
            capped = Some("budget");
        }
    }
    if k == 0 {
        let what = if capped == Some("budget") { "the budget" } else { "the quota" };
        return hold(format!("{reason}, but {what} allows no more nodes"));
    }
    let reason = match capped {
        Some(what) if k < rules.step => format!("{reason} (+{k}, limited by the {what})"),
        _ => reason,
    };
    Decision::Up { to: limits.current + k, reason }
}

fn scale_down(
    rules: &Rules,
    limits: &Limits,
    signals: &Signals,
    now: SystemTime,
    cooling: Option<String>,
    layout: &dyn Fn(u32) -> Vec<(String, Capacity, u32)>,
) -> Decision {
    if !signals.usage_known {
        return hold("node usage is unknown for this provider: not scaling down");
    }
    let mut idle: Vec<&NodeSignal> = signals
        .nodes
        .iter()
        .filter(|n| !n.busy && n.idle_since.is_some_and(|s| age(now, s) >= rules.idle_for))
        .collect();
    if idle.is_empty() {
        return hold("no change needed");
    }
    idle.sort_by(|a, b| a.idle_since.cmp(&b.idle_since).then_with(|| a.id.cmp(&b.id)));
    let room = limits.current.saturating_sub(limits.min);
    if room == 0 {
        return hold(format!(
            "{} idle, but the pool is at its min ({})",
            nodes(idle.len()),
            nodes(limits.min as usize)
        ));
    }
    if let Some(left) = cooling {
        return hold(format!("{} idle > {}, but in cooldown ({left} left)", nodes(idle.len()), human(rules.idle_for)));
    }
    let mut live: BTreeMap<(&str, Capacity), u32> = BTreeMap::new();
    for n in &signals.nodes {
        *live.entry((n.zone.as_str(), n.capacity)).or_default() += 1;
    }
    let most = rules.step.min(room).min(idle.len() as u32);
    for k in (1..=most).rev() {
        let to = limits.current - k;
        if let Some(remove) = pick_idle(&idle, &live, &layout(to)) {
            let reason = format!("{} idle > {}", nodes(remove.len()), human(rules.idle_for));
            return Decision::Down { to, remove, reason };
        }
    }
    hold(format!("{} idle, but not where the pool's mix would shrink", nodes(idle.len())))
}

/// The idle nodes to remove so that every bucket (zone, capacity) fits `want`; `None` if a
/// shrinking bucket has too few idle nodes (a busy one would have to go).
fn pick_idle(
    idle: &[&NodeSignal],
    live: &BTreeMap<(&str, Capacity), u32>,
    want: &[(String, Capacity, u32)],
) -> Option<Vec<String>> {
    let mut remove = Vec::new();
    for (&(zone, cap), &have) in live {
        let keep = want.iter().find(|(z, c, _)| z == zone && *c == cap).map_or(0, |w| w.2);
        let excess = have.saturating_sub(keep) as usize;
        let here: Vec<&&NodeSignal> = idle.iter().filter(|n| n.zone == zone && n.capacity == cap).collect();
        if here.len() < excess {
            return None;
        }
        remove.extend(here.iter().take(excess).map(|n| n.id.clone()));
    }
    (!remove.is_empty()).then_some(remove)
}

/// `1 job`, `3 jobs`: reasons are read in plans and reconcile logs, so the plural is right.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
