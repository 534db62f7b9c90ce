//! The spend ledger read back: month-to-date spend per pool, quota and job (docs/design/spend.md).
//! Pure: the caller passes each provider's clock and the pool → quota mapping.
//!
//! Each ledger line accrues from its start to its end (or the provider's clock, while
//! open) at its price; the month is the calendar month (UTC) of the report's clock, so a
//! month boundary starts the total again while closed nodes keep counting in their months.

use std::collections::{BTreeMap, HashMap};

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
    accrue(state, clock, quotas_of).report(state, observed)
}

/// The ledger's lines summed to the month's date, before the job runs' shares of shared
/// nodes are added and the sums rounded to cents: what [`month_to_date`] computes once
/// per state and clocks, so a plan that learns of newer job runs after it first summed
/// the ledger adds only their shares ([`Accrued::report`]) instead of summing it again.
#[derive(Debug, Clone)]
pub struct Accrued {
    /// Unrounded, without the runs' shares.
    sums: SpendReport,
    /// Each ledger provider's clock, by local name.
    clocks: BTreeMap<String, u64>,
    now: u64,
    month_start: u64,
}

/// A report of `month` as of `now` with nothing summed yet.
fn empty_report(month: String, now: u64) -> SpendReport {
    SpendReport {
        month,
        as_of: rfc3339(now),
        month_to_date_usd: 0.0,
        by_pool: BTreeMap::new(),
        by_quota: BTreeMap::new(),
        by_job: BTreeMap::new(),
        open_nodes: 0,
    }
}

/// The ledger of `state` summed as [`month_to_date`] sums it (`clock` and `quotas_of` as
/// there).
pub fn accrue(state: &State, clock: impl Fn(&str) -> u64, quotas_of: impl Fn(&str) -> Vec<String>) -> Accrued {
    let mut clocks: BTreeMap<&str, u64> = BTreeMap::new();
    for e in state.spend.values() {
        clocks.entry(e.provider.as_str()).or_insert_with(|| clock(&e.provider));
    }
    let now = clocks.values().copied().max().unwrap_or_else(|| clock(""));
    let (month, month_start) = month_of(now);
    let mut sums = empty_report(month, now);
    let mut totals = Totals::default();
    for e in state.spend.values() {
        let until = e.end_ms.unwrap_or_else(|| clocks.get(e.provider.as_str()).copied().unwrap_or(now)).min(now);
        if e.end_ms.is_none() {
            sums.open_nodes += 1;
        }
        let from = e.start_ms.max(month_start);
        if until <= from {
            continue;
        }
        let usd = (until - from) as f64 / HOUR_MS * e.usd_per_hour;
        sums.month_to_date_usd += usd;
        totals.add(e, usd, &quotas_of);
    }
    totals.into_report(&mut sums);
    let clocks = clocks.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    Accrued { sums, clocks, now, month_start }
}

impl Accrued {
    /// The month-to-date report: these sums with the shares of the job runs on shared
    /// pool nodes (`observed`'s runs for the jobs it names, the state's record for the
    /// others), rounded to cents. `state` is the one summed.
    pub fn report(&self, state: &State, observed: Option<&BTreeMap<String, Vec<crate::model::JobRun>>>) -> SpendReport {
        let mut report = self.sums.clone();
        self.add_run_shares(&mut report, state, observed);
        let cents = |v: &mut f64| *v = (*v * 100.0).round() / 100.0;
        cents(&mut report.month_to_date_usd);
        report.by_pool.values_mut().for_each(cents);
        report.by_quota.values_mut().for_each(cents);
        report.by_job.values_mut().for_each(cents);
        report
    }

    /// Jobs on shared pool nodes: their share of the node's line over the month.
    fn add_run_shares(
        &self,
        report: &mut SpendReport,
        state: &State,
        observed: Option<&BTreeMap<String, Vec<crate::model::JobRun>>>,
    ) {
        for (address, r) in &state.resources {
            let Some(rec) = &r.job else { continue };
            let runs = observed.and_then(|o| o.get(address)).unwrap_or(&rec.runs);
            for run in runs {
                let Some(line) = state.spend.get(&run.node_id).filter(|l| l.job.is_none()) else { continue };
                let clock_now = self.clocks.get(line.provider.as_str()).copied().unwrap_or(self.now).min(self.now);
                if let Some(usd) = run_share_usd(run, line, self.month_start, clock_now) {
                    *report.by_job.entry(address.clone()).or_default() += usd;
                }
            }
        }
    }
}

/// The ledger loop's sums per pool, quota and job, kept by index: one map lookup per
/// line and the pool's quotas asked once per pool, not a `BTreeMap` entry (with a copy of
/// its key) per line and quota (4,000 lines: 257,000 string compares). Each sum adds its
/// lines in ledger order, as the maps did, so every total is the same to the bit.
#[derive(Default)]
struct Totals<'s> {
    /// Pool → its index in `pools`.
    pool_at: HashMap<&'s str, usize>,
    /// Each pool's name, sum and quotas (indexes in `quotas`).
    pools: Vec<(&'s str, f64, Vec<usize>)>,
    quota_at: HashMap<String, usize>,
    quotas: Vec<(String, f64)>,
    job_at: HashMap<&'s str, usize>,
    jobs: Vec<(&'s str, f64)>,
}

impl<'s> Totals<'s> {
    fn add(&mut self, e: &'s SpendEntry, usd: f64, quotas_of: &impl Fn(&str) -> Vec<String>) {
        let at = match self.pool_at.get(e.pool.as_str()) {
            Some(at) => *at,
            None => {
                let quotas = quotas_of(&e.pool).into_iter().map(|q| self.quota(q)).collect();
                self.pools.push((&e.pool, 0.0, quotas));
                self.pool_at.insert(&e.pool, self.pools.len() - 1);
                self.pools.len() - 1
            }
        };
        let (_, sum, quotas) = &mut self.pools[at];
        *sum += usd;
        for q in quotas.iter() {
            self.quotas[*q].1 += usd;
        }
        if let Some(job) = &e.job {
            let at = *self.job_at.entry(job).or_insert_with(|| {
                self.jobs.push((job, 0.0));
                self.jobs.len() - 1
            });
            self.jobs[at].1 += usd;
        }
    }

    fn quota(&mut self, name: String) -> usize {
        if let Some(at) = self.quota_at.get(&name) {
            return *at;
        }
        self.quotas.push((name.clone(), 0.0));
        self.quota_at.insert(name, self.quotas.len() - 1);
        self.quotas.len() - 1
    }

    fn into_report(self, report: &mut SpendReport) {
        report.by_pool.extend(self.pools.into_iter().map(|(pool, usd, _)| (pool.to_string(), usd)));
        report.by_quota.extend(self.quotas);
        report.by_job.extend(self.jobs.into_iter().map(|(job, usd)| (job.to_string(), usd)));
    }
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

    /// The ledger loop as it was, a `BTreeMap` entry per line and quota: the reference
    /// the totals by index must equal to the bit.
    fn by_maps(s: &State, now: u64, quotas_of: impl Fn(&str) -> Vec<String>) -> SpendReport {
        let (month, month_start) = month_of(now);
        let mut r = empty_report(month, now);
        for e in s.spend.values() {
            let until = e.end_ms.unwrap_or(now).min(now);
            r.open_nodes += usize::from(e.end_ms.is_none());
            let from = e.start_ms.max(month_start);
            if until <= from {
                continue;
            }
            let usd = (until - from) as f64 / HOUR_MS * e.usd_per_hour;
            r.month_to_date_usd += usd;
            *r.by_pool.entry(e.pool.clone()).or_default() += usd;
            for q in quotas_of(&e.pool) {
                *r.by_quota.entry(q).or_default() += usd;
            }
            if let Some(job) = &e.job {
                *r.by_job.entry(job.clone()).or_default() += usd;
            }
        }
        let cents = |v: &mut f64| *v = (*v * 100.0).round() / 100.0;
        cents(&mut r.month_to_date_usd);
        r.by_pool.values_mut().for_each(cents);
        r.by_quota.values_mut().for_each(cents);
        r.by_job.values_mut().for_each(cents);
        r
    }

    proptest::proptest! {
        #[test]
        fn totals_by_index_equal_the_maps_to_the_bit(
            lines in proptest::collection::vec(
                (0u8..6, proptest::option::of(0u8..3), 0.01f64..99.0, 0u64..90 * 24, proptest::option::of(0u64..90 * 24)),
                0..60,
            ),
        ) {
            let base = at("2026-02-01T00:00:00Z");
            let hour = 3_600_000;
            let mut s = State::new("l".into());
            for (i, (pool, job, usd, start, end)) in lines.into_iter().enumerate() {
                let mut l = line(&format!("gpu_pool.p{pool}"), None, usd, "2026-02-01T00:00:00Z", None);
                l.job = job.map(|j| format!("job.j{j}"));
                l.start_ms = base + start * hour;
                l.end_ms = end.map(|e| base + (start + e) * hour);
                s.spend.insert(format!("i-{i:03}"), l);
            }
            // Pools in one, two or no quotas, one quota covering pools another does too.
            let quotas = |p: &str| match p.as_bytes().last() {
                Some(b'0' | b'1') => vec!["quota.a".to_string(), "quota.b".to_string()],
                Some(b'2') => vec!["quota.b".to_string()],
                _ => vec![],
            };
            let now = at("2026-03-20T07:00:00Z");
            proptest::prop_assert_eq!(month_to_date(&s, |_| now, quotas, None), by_maps(&s, now, quotas));
        }
    }

    /// The ledger summed once ([`accrue`]) and each view's job runs added to it: the same
    /// report to the bit as summing the ledger again with those runs, for the state's
    /// record of a run and for a newer observation of it (ended since).
    #[test]
    fn sums_kept_and_runs_added_equal_summing_again() {
        let mut s = State::new("l".into());
        let mut shared = line("gpu_pool.a", None, 8.0, "2026-03-10T00:00:00Z", None);
        shared.instance_type = "p4d.24xlarge".into();
        s.spend.insert("i-1".into(), shared);
        s.spend.insert("i-2".into(), line("gpu_pool.b", Some("job.own"), 1.5, "2026-03-10T00:00:00Z", None));
        let run = |finished: Option<&str>| {
            serde_json::json!({"replica": 0, "attempt": 0, "id": "r-1", "provider": "sim", "region": "us-east-1",
                "node_id": "i-1", "capacity": "on-demand", "gpus": 2, "status": "running",
                "launched_at": "2026-03-10T02:00:00Z", "finished_at": finished})
        };
        let job = serde_json::json!({"kind": "job", "job": {"runs": [run(None)]}});
        s.resources.insert("job.shared".into(), serde_json::from_value(job).unwrap());
        let ended: Vec<crate::model::JobRun> = vec![serde_json::from_value(run(Some("2026-03-10T04:00:00Z"))).unwrap()];
        let observed = BTreeMap::from([("job.shared".to_string(), ended)]);
        let now = at("2026-03-10T10:00:00Z");
        let quotas = |p: &str| if p == "gpu_pool.a" { vec!["quota.q".to_string()] } else { vec![] };
        let sums = accrue(&s, |_| now, quotas);
        for observed in [None, Some(&observed)] {
            assert_eq!(sums.report(&s, observed), month_to_date(&s, |_| now, quotas, observed));
        }
        // 2 of 8 GPUs of an 8 USD node: 8 h as recorded, 2 h as observed; plus job.own's line.
        assert_eq!(sums.report(&s, None).by_job["job.shared"], 16.0);
        assert_eq!(sums.report(&s, Some(&observed)).by_job["job.shared"], 4.0);
        assert_eq!(sums.report(&s, None).by_job["job.own"], 15.0);
    }

    #[test]
    fn month_starts_are_calendar_months_in_utc() {
        assert_eq!(month_of(at("2026-12-31T23:59:59Z")), ("2026-12".to_string(), at("2026-12-01T00:00:00Z")));
        assert_eq!(month_of(at("2027-01-01T00:00:00Z")).0, "2027-01");
    }
}
