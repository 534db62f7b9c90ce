//! Quotas at plan time: `max_gpus`, `allowed_gpus` and `budget` of each quota against
//! what the plan would run. Exceeding one is a hard failure naming the quota, the
//! limit and the planned value; reaching `warn_percent` (default 80 %) is a warning.

use crate::cost::CostReport;
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
        warning,
    }
}

fn limit_check(quota: &str, what: &str, planned: f64, limit: f64, warn: u32, unit: &str) -> PolicyResult {
    let name = format!("{quota}.{what}");
    let passed = planned <= limit + 1e-9;
    let warning = passed && limit > 0.0 && planned >= limit * warn as f64 / 100.0;
    let msg = if !passed {
        format!("{quota} {what}: the plan needs {planned}{unit}, above the limit of {limit}{unit}")
    } else if warning {
        format!(
            "{quota} {what}: the plan uses {planned}{unit}, {:.0}% of the limit {limit}{unit}",
            planned * 100.0 / limit
        )
    } else {
        format!("{quota} {what}: {planned}{unit} of {limit}{unit}")
    };
    result(name, passed, warning, msg, quota)
}

/// `month_to_date`: spend so far this month per quota address (from the ledger); a quota
/// with a `monthly_usd` budget and a ledger line is also checked against it: once the
/// month's spend reached the budget, a plan that adds cost to the quota's pools fails
/// (the stop at 100 %), while one that keeps or lowers it passes.
pub fn check(
    spec: &Spec,
    cost: &CostReport,
    month_to_date: &std::collections::BTreeMap<String, f64>,
) -> Vec<PolicyResult> {
    let mut out = Vec::new();
    for qc in &cost.quotas {
        let Some(q) = spec.quotas.get(&qc.address) else { continue };
        let name = qc.address.to_string();
        let warn = q.warn_percent.as_ref().map(|w| w.value).unwrap_or(DEFAULT_WARN_PERCENT);
        if let Some(max) = &q.max_gpus {
            out.push(limit_check(&name, "max_gpus", qc.gpus_after as f64, max.value as f64, warn, " GPUs"));
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
                format!("{name} allowed_gpus: every pool uses {}", allowed.join(", "))
            } else {
                format!("{name} allowed_gpus: {} (allowed: {})", bad.join("; "), allowed.join(", "))
            };
            out.push(result(format!("{name}.allowed_gpus"), bad.is_empty(), false, msg, &name));
        }
        if let Some(b) = &q.budget {
            let round = |x: f64| (x * 100.0).round() / 100.0;
            if let Some(h) = &b.hourly_usd {
                out.push(limit_check(&name, "budget.hourly_usd", round(qc.hourly_after), h.value, warn, " USD/h"));
            }
            if let Some(m) = &b.monthly_usd {
                out.push(limit_check(
                    &name,
                    "budget.monthly_usd",
                    round(qc.monthly_after),
                    m.value,
                    warn,
                    " USD/month",
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
                    let msg = if !passed {
                        format!(
                            "{name} budget.month_to_date: {spent:.2} USD spent this month, the whole {} USD budget; the plan adds {delta:.2} USD/h to its pools",
                            m.value
                        )
                    } else {
                        format!("{name} budget.month_to_date: {spent:.2} of {} USD spent this month", m.value)
                    };
                    out.push(result(format!("{name}.budget.month_to_date"), passed, warning, msg, &name));
                }
            }
        }
    }
    out
}
