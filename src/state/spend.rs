//! The spend ledger read back: month-to-date spend per pool, quota and job (docs/design/spend.md).
//! Pure: the caller passes each provider's clock and the pool → quota mapping.
//!
//! Each ledger line accrues from its start to its end (or the provider's clock, while
//! open) at its price; the month is the calendar month (UTC) of the report's clock, so a
//! month boundary starts the total again while closed nodes keep counting in their months.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::{SpendEntry, State};

const HOUR_MS: f64 = 3_600_000.0;

/// `spend` in `gpuplan cost --json` and in a plan. Fields in key order (the plan's JSON is
/// streamed and must read like a sorted tree).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SpendReport {
    /// The clock the month-to-date is counted to (RFC 3339).
    pub as_of: String,
    pub by_job: BTreeMap<String, f64>,
    pub by_pool: BTreeMap<String, f64>,
    pub by_quota: BTreeMap<String, f64>,
    /// `2026-03`.
    pub month: String,
    pub month_to_date_usd: f64,
    /// Ledger lines still open (nodes running).
    pub open_nodes: usize,
}

/// Month-to-date spend. `clock` gives a provider's time (by its local name); the report's
/// own clock, which picks the month, is the latest of them. `quotas_of` maps a pool to the
/// quotas covering it. `observed` holds job runs as refresh saw them (by job address),
/// newer than the state's record (a run that ended since the last apply).
pub fn month_to_date(
    state: &State,
    clock: impl Fn(&str) -> u64,
    quotas_of: impl Fn(&str) -> Vec<String>,
    observed: Option<&BTreeMap<String, Vec<crate::model::JobRun>>>,
) -> SpendReport {
    let mut clocks: BTreeMap<&str, u64> = BTreeMap::new();
    for e in state.spend.values() {
        clocks.entry(e.provider.as_str()).or_insert_with(|| clock(&e.provider));
    }
    let now = clocks.values().copied().max().unwrap_or_else(|| clock(""));
    let (month, month_start) = month_of(now);
    let mut report = SpendReport {
        month,
        as_of: rfc3339(now),
        month_to_date_usd: 0.0,
        by_pool: BTreeMap::new(),
        by_quota: BTreeMap::new(),
        by_job: BTreeMap::new(),
        open_nodes: 0,
    };
    for e in state.spend.values() {
        let until = e.end_ms.unwrap_or_else(|| clocks.get(e.provider.as_str()).copied().unwrap_or(now)).min(now);
        if e.end_ms.is_none() {
            report.open_nodes += 1;
        }
        let from = e.start_ms.max(month_start);
        if until <= from {
            continue;
        }
        let usd = (until - from) as f64 / HOUR_MS * e.usd_per_hour;
        report.month_to_date_usd += usd;
        *report.by_pool.entry(e.pool.clone()).or_default() += usd;
        for q in quotas_of(&e.pool) {
            *report.by_quota.entry(q).or_default() += usd;
        }
        if let Some(job) = &e.job {
            *report.by_job.entry(job.clone()).or_default() += usd;
        }
    }
    // Jobs on shared pool nodes: their share of the node's line over the month.
    for (address, r) in &state.resources {
        let Some(rec) = &r.job else { continue };
        let runs = observed.and_then(|o| o.get(address)).unwrap_or(&rec.runs);
        for run in runs {
            let Some(line) = state.spend.get(&run.node_id).filter(|l| l.job.is_none()) else { continue };
            let clock_now = clocks.get(line.provider.as_str()).copied().unwrap_or(now).min(now);
            if let Some(usd) = run_share_usd(run, line, month_start, clock_now) {
                *report.by_job.entry(address.clone()).or_default() += usd;
            }
        }
    }
    let cents = |v: &mut f64| *v = (*v * 100.0).round() / 100.0;
    cents(&mut report.month_to_date_usd);
    report.by_pool.values_mut().for_each(cents);
    report.by_quota.values_mut().for_each(cents);
    report.by_job.values_mut().for_each(cents);
    report
}

/// What one job run cost between `from_ms` and `to_ms` (the end of a window, and the
/// clock for a run still going): its share of its node's ledger price (the GPUs it uses of
/// the node's, or the whole node when the node was made for the job) over the part of the
/// window it ran. `None` when its times or its node's GPU count are unknown.
pub fn run_share_usd(run: &crate::model::JobRun, line: &SpendEntry, from_ms: u64, to_ms: u64) -> Option<f64> {
    let node_gpus = crate::model::ProviderKind::ALL
        .iter()
        .find_map(|k| crate::catalog::catalog().instance_type(*k, &line.instance_type))
        .map(|t| t.gpus)?;
    // gpuplan writes these times itself; one that does not parse (a hand-edited state)
    // makes the cost unknown (`None`, shown as "—"), never a made-up number.
    let ms = |t: &str| {
        humantime::parse_rfc3339(t)
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    };
    let start = ms(run.launched_at.as_deref()?)?.max(from_ms);
    let end = match &run.finished_at {
        Some(f) => ms(f)?.min(to_ms),
        None => to_ms,
    };
    let hours = end.saturating_sub(start) as f64 / HOUR_MS;
    let share = if line.job.is_some() { 1.0 } else { f64::from(run.gpus) / f64::from(node_gpus.max(1)) };
    Some(line.usd_per_hour * share * hours)
}

fn rfc3339(ms: u64) -> String {
    crate::model::time::rfc3339_ms(ms)
}

/// The calendar month (UTC) holding `ms`: `("2026-03", start of 2026-03-01 in ms)`.
pub fn month_of(ms: u64) -> (String, u64) {
    let text = rfc3339(ms);
    let month = text[..7].to_string();
    let start = humantime::parse_rfc3339(&format!("{month}-01T00:00:00Z"))
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    (month, start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Capacity;
    use crate::state::model::SpendEntry;

    fn at(s: &str) -> u64 {
        humantime::parse_rfc3339(s).unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
    }

    fn line(pool: &str, job: Option<&str>, usd: f64, start: &str, end: Option<&str>) -> SpendEntry {
        SpendEntry {
            pool: pool.into(),
            provider: "sim".into(),
            job: job.map(str::to_string),
            instance_type: "g6.xlarge".into(),
            capacity: Capacity::OnDemand,
            usd_per_hour: usd,
            price_source: "catalog".into(),
            start_ms: at(start),
            end_ms: end.map(at),
        }
    }

    #[test]
    fn hours_times_price_within_the_month_per_pool_quota_and_job() {
        let mut s = State::new("l".into());
        s.spend.insert("i-1".into(), line("gpu_pool.a", None, 2.0, "2026-03-10T00:00:00Z", None));
        s.spend.insert(
            "i-2".into(),
            line("gpu_pool.b", Some("job.t"), 1.5, "2026-03-10T00:00:00Z", Some("2026-03-10T04:00:00Z")),
        );
        // Ended before this month: counts in February, not here.
        s.spend
            .insert("i-3".into(), line("gpu_pool.a", None, 9.0, "2026-02-01T00:00:00Z", Some("2026-02-28T00:00:00Z")));
        // Started last month, still running: only March's hours.
        s.spend.insert("i-4".into(), line("gpu_pool.b", None, 1.0, "2026-02-28T00:00:00Z", None));
        let now = at("2026-03-10T10:00:00Z");
        let r = month_to_date(&s, |_| now, |p| if p == "gpu_pool.a" { vec!["quota.ml".into()] } else { vec![] }, None);
        assert_eq!(r.month, "2026-03");
        assert_eq!(r.by_pool["gpu_pool.a"], 20.0, "10 h × 2 USD");
        assert_eq!(r.by_pool["gpu_pool.b"], 6.0 + 226.0, "4 h × 1.5 + (9 days + 10 h) × 1");
        assert_eq!(r.by_quota["quota.ml"], 20.0);
        assert_eq!(r.by_job["job.t"], 6.0);
        assert_eq!(r.month_to_date_usd, 252.0);
        assert_eq!(r.open_nodes, 2);
        // A month later the total starts again: only April's hours of the open nodes.
        let april = at("2026-04-01T05:00:00Z");
        let r = month_to_date(&s, |_| april, |_| vec![], None);
        assert_eq!((r.month.as_str(), r.month_to_date_usd), ("2026-04", 5.0 * 2.0 + 5.0 * 1.0));
    }

    #[test]
    fn month_starts_are_calendar_months_in_utc() {
        assert_eq!(month_of(at("2026-12-31T23:59:59Z")), ("2026-12".to_string(), at("2026-12-01T00:00:00Z")));
        assert_eq!(month_of(at("2027-01-01T00:00:00Z")).0, "2027-01");
    }
}
