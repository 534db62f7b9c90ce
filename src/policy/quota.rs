//! Quotas at plan time: `max_gpus`, `allowed_gpus` and `budget` of each quota against
//! what the plan would run. Exceeding one is a hard failure naming the quota, the
//! limit and the planned value; reaching `warn_percent` (default 80 %) is a warning.

use crate::cost::CostReport;
use crate::model::money::usd;
use crate::policy::model::{Enforcement, PolicyResult};
use crate::spec::Spec;

pub const DEFAULT_WARN_PERCENT: u32 = 80;

fn result(name: String, passed: bool, warning: bool, message: String, source: &str) -> PolicyResult {
    PolicyResult {
        name,
        enforcement: Enforcement::Hard,
        passed,
        message,
        key: None,
        overridden: false,
        source: source.into(),
        standing: false,
        warning,
    }
}

/// What a limit counts, and how its values read in a message.
#[derive(Clone, Copy)]
enum Unit {
    Gpus,
    UsdPerHour,
    UsdPerMonth,
}

impl Unit {
    /// `24`, `80,967.89`: money as every view writes it.
    fn number(self, x: f64) -> String {
        match self {
            Unit::Gpus => format!("{x}"),
            Unit::UsdPerHour | Unit::UsdPerMonth => usd(x),
        }
    }

    /// `24 GPUs`, `80,967.89 USD/month`.
    fn show(self, x: f64) -> String {
        let unit = match self {
            Unit::Gpus => "GPUs",
            Unit::UsdPerHour => "USD/h",
            Unit::UsdPerMonth => "USD/month",
        };
        format!("{} {unit}", self.number(x))
    }
}

/// The verdict `QUOTA.WHAT`. Its message does not repeat that name: every view shows the
/// name beside it.
fn limit_check(quota: &str, what: &str, planned: f64, limit: f64, warn: u32, unit: Unit) -> PolicyResult {
    let name = format!("{quota}.{what}");
    let passed = planned <= limit + 1e-9;
    let warning = passed && limit > 0.0 && planned >= limit * warn as f64 / 100.0;
    let (planned_text, limit_text) = (unit.show(planned), unit.show(limit));
    let msg = if !passed {
        format!("the plan needs {planned_text}, above the limit of {limit_text}")
    } else if warning {
        format!("the plan uses {planned_text}, {:.0}% of the limit of {limit_text}", planned * 100.0 / limit)
    } else {
        format!("{} of {limit_text}", unit.number(planned))
    };
    result(name, passed, warning, msg, quota)
}

/// `month_to_date`: spend so far this month per quota address (from the ledger), and the
/// time it is counted to, which the verdict's message names (`… spent this month (to
/// 2026-12-07T18:28:06Z)`); a quota
/// with a `monthly_usd` budget and a ledger line is also checked against it: once the
/// month's spend reached the budget, a plan that adds cost to the quota's pools fails
/// (the stop at 100 %), while one that keeps or lowers it passes.
pub fn check(
    spec: &Spec,
    cost: &CostReport,
    (month_to_date, as_of): (&std::collections::BTreeMap<String, f64>, Option<&str>),
) -> Vec<PolicyResult> {
    let mut out = Vec::new();
    for qc in &cost.quotas {
        let Some(q) = spec.quotas.get(&qc.address) else { continue };
        let name = qc.address.to_string();
        let warn = q.warn_percent.as_ref().map(|w| w.value).unwrap_or(DEFAULT_WARN_PERCENT);
        if let Some(max) = &q.max_gpus {
            out.push(limit_check(&name, "max_gpus", qc.gpus_after as f64, max.value as f64, warn, Unit::Gpus));
        }
        if !q.allowed_gpus.is_empty() {
            let allowed: Vec<&str> = q.allowed_gpus.iter().map(|g| g.value.as_str()).collect();
            let bad: Vec<String> = qc
                .pools
                .iter()
                .filter_map(|a| spec.gpu_pools.get(a).map(|p| (a, p)))
                .filter(|(_, p)| !allowed.contains(&p.gpu.value.as_str()))
                .map(|(a, p)| format!("{a} uses {}", p.gpu.value))
                .collect();
            let msg = if bad.is_empty() {
                format!("every pool uses {}", allowed.join(", "))
            } else {
                format!("{} (allowed: {})", bad.join("; "), allowed.join(", "))
            };
            out.push(result(format!("{name}.allowed_gpus"), bad.is_empty(), false, msg, &name));
        }
        if let Some(b) = &q.budget {
            let round = |x: f64| (x * 100.0).round() / 100.0;
            if let Some(h) = &b.hourly_usd {
                out.push(limit_check(
                    &name,
                    "budget.hourly_usd",
                    round(qc.hourly_after),
                    h.value,
                    warn,
                    Unit::UsdPerHour,
                ));
            }
            if let Some(m) = &b.monthly_usd {
                out.push(limit_check(
                    &name,
                    "budget.monthly_usd",
                    round(qc.monthly_after),
                    m.value,
                    warn,
                    Unit::UsdPerMonth,
                ));
                if let Some(spent) = month_to_date.get(&name) {
                    let delta: f64 = cost
                        .pools
                        .iter()
                        .filter(|p| qc.pools.contains(&p.address))
                        .map(|p| p.hourly_after - p.hourly_before)
                        .sum();
                    let adds = delta > 0.005;
                    let over = *spent >= m.value - 1e-9;
                    let passed = !(over && adds);
                    let warning = passed && m.value > 0.0 && *spent >= m.value * warn as f64 / 100.0;
                    let to = as_of.map(|t| format!(" (to {t})")).unwrap_or_default();
                    let msg = if !passed {
                        format!(
                            "{} USD spent this month{to}, the whole {} USD budget; the plan adds {} USD/h to its pools",
                            usd(*spent),
                            usd(m.value),
                            usd(delta)
                        )
                    } else {
                        format!("{} of {} USD spent this month{to}", usd(*spent), usd(m.value))
                    };
                    out.push(result(format!("{name}.budget.month_to_date"), passed, warning, msg, &name));
                }
            }
        }
    }
    out
}
