//! Budget alerts (docs/design/spend.md): after each pass, every quota with a
//! `budget.monthly_usd` and `notify` hooks is compared with its month-to-date spend from
//! the ledger; each `alert_at` threshold crossed this month is posted once, lowest first,
//! as Slack-compatible JSON (`text` plus attachment `fields`).
//!
//! A post is retried (three attempts, short backoff) with a bounded timeout, so a slow or
//! dead hook delays a pass by seconds at most and never fails it. A threshold counts as
//! delivered when at least one hook accepted it; it is then recorded in state
//! (`alerts[quota][month]`) and never posted again that month. An undelivered one is tried
//! again on the next pass.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::providers::ProviderSet;
use crate::spec::Spec;
use crate::state::State;
use crate::state::spend::SpendReport;

/// Per attempt; three attempts at most.
const POST_TIMEOUT: Duration = Duration::from_secs(5);
const ATTEMPTS: u32 = 3;

/// One threshold crossed in this pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    pub quota: String,
    pub month: String,
    pub threshold: u32,
    pub spent_usd: f64,
    pub budget_usd: f64,
    /// Hooks that accepted it; empty when none did (it is tried again next pass).
    pub delivered: usize,
    /// Why hooks refused or failed, one line per hook.
    pub errors: Vec<String>,
}

/// The spend report for `state`, each ledger line by its provider's clock.
pub fn spend_report(spec: &Spec, state: &State, providers: &ProviderSet) -> SpendReport {
    crate::engine::gather::month_to_date(spec, state, providers)
}

/// Thresholds crossed and not yet delivered this month: (quota, threshold, spent, budget).
pub fn due(spec: &Spec, state: &State, spend: &SpendReport) -> Vec<(String, u32, f64, f64)> {
    let mut out = Vec::new();
    for (addr, quota) in &spec.quotas {
        let Some(budget) = &quota.budget else { continue };
        let Some(monthly) = budget.monthly_usd.as_ref().map(|m| m.value).filter(|m| *m > 0.0) else { continue };
        if quota.notify.is_empty() {
            continue;
        }
        let key = addr.to_string();
        let spent = spend.by_quota.get(&key).copied().unwrap_or(0.0);
        let sent = state.alerts.get(&key).and_then(|m| m.get(&spend.month));
        for t in budget.thresholds() {
            if spent >= monthly * f64::from(t) / 100.0 && !sent.is_some_and(|s| s.contains(&t)) {
                out.push((key.clone(), t, spent, monthly));
            }
        }
    }
    out
}

/// Post every due alert (lowest threshold first per quota) and record the delivered ones
/// in `state`. Returns what happened, for the pass report.
pub async fn deliver(spec: &Spec, state: &mut State, spend: &SpendReport) -> Vec<Alert> {
    let due = due(spec, state, spend);
    if due.is_empty() {
        return Vec::new();
    }
    let client = match crate::providers::http::client() {
        Ok(c) => c,
        Err(e) => {
            return due
                .into_iter()
                .map(|(quota, threshold, spent_usd, budget_usd)| Alert {
                    quota,
                    month: spend.month.clone(),
                    threshold,
                    spent_usd,
                    budget_usd,
                    delivered: 0,
                    errors: vec![e.to_string()],
                })
                .collect();
        }
    };
    let mut out = Vec::new();
    for (quota, threshold, spent_usd, budget_usd) in due {
        let Some(q) = spec.quotas.iter().find(|(a, _)| a.to_string() == quota).map(|(_, q)| q) else { continue };
        let body = payload(&quota, threshold, spent_usd, budget_usd, &spend.month);
        let mut delivered = 0;
        let mut errors = Vec::new();
        for url in &q.notify {
            match post(&client, &url.value, &body).await {
                Ok(()) => delivered += 1,
                Err(e) => errors.push(format!("{}: {e}", redact(&url.value))),
            }
        }
        if delivered > 0 {
            let months: &mut BTreeMap<String, Vec<u32>> = state.alerts.entry(quota.clone()).or_default();
            // Only this month and the last are kept: older months can never be posted again.
            let keep = spend.month.clone();
            months.retain(|m, _| *m >= previous_month(&keep));
            months.entry(keep).or_default().push(threshold);
        }
        out.push(Alert { quota, month: spend.month.clone(), threshold, spent_usd, budget_usd, delivered, errors });
    }
    out
}

fn previous_month(month: &str) -> String {
    let (y, m) = month.split_once('-').unwrap_or(("0", "1"));
    let (y, m): (i32, u32) = (y.parse().unwrap_or(0), m.parse().unwrap_or(1));
    if m == 1 { format!("{:04}-12", y - 1) } else { format!("{y:04}-{:02}", m - 1) }
}

/// Slack-compatible: `text` for any receiver, legacy attachment `fields` for detail.
fn payload(quota: &str, threshold: u32, spent: f64, budget: f64, month: &str) -> serde_json::Value {
    let money = crate::model::money::usd;
    let pct = if budget > 0.0 { spent / budget * 100.0 } else { 0.0 };
    serde_json::json!({
        "text": format!(
            "gpuplan: `{quota}` has spent {} USD in {month}, {pct:.0}% of its {} USD monthly budget (alert at {threshold}%)",
            money(spent),
            money(budget)
        ),
        "attachments": [{
            "fields": [
                {"title": "quota", "value": quota, "short": true},
                {"title": "month", "value": month, "short": true},
                {"title": "threshold", "value": format!("{threshold}%"), "short": true},
                {"title": "month to date", "value": format!("{} USD", money(spent)), "short": true},
                {"title": "monthly budget", "value": format!("{} USD", money(budget)), "short": true},
            ]
        }]
    })
}

pub(super) async fn post(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> Result<(), String> {
    let bytes = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(300 * u64::from(attempt))).await;
        }
        let sent = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(bytes.clone())
            .timeout(POST_TIMEOUT)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => last = format!("HTTP {}", r.status()),
            Err(e) if e.is_timeout() => last = format!("no answer within {} s", POST_TIMEOUT.as_secs()),
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!("{last} (after {ATTEMPTS} attempts)"))
}

/// A webhook URL carries its secret in the path: show only scheme and host.
pub(super) fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{host}/…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_and_redaction() {
        assert_eq!(previous_month("2026-01"), "2025-12");
        assert_eq!(previous_month("2026-10"), "2026-09");
        assert_eq!(redact("https://hooks.slack.com/services/T0/B0/secret"), "https://hooks.slack.com/…");
    }
}
