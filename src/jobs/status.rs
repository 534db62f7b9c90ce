//! What `gpuplan jobs list|status|logs` show: a job's state summarised from its runs, and
//! its run history as log lines. Pure: statuses from providers come in as a map.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::addr::Address;
use crate::jobs::model::{JobRecord, JobRun, state_str};
use crate::providers::{JobState, JobStatus};
use crate::state::model::SpendEntry;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSummary {
    pub address: Address,
    /// `not launched`, `running`, `stopped, exit code awaited`, `succeeded`, `failed`,
    /// `preempted`, `cancelled`, `queued`.
    pub state: String,
    pub replicas: u32,
    pub running: u32,
    pub attempt: u32,
    pub runs: Vec<JobRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<String>,
    /// What its runs cost so far (USD), from the spend ledger's node prices; `None`
    /// when no run's node is in the ledger (a Kubernetes pod's node, a run on a node of
    /// another state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Each run's cost so far, in the order of `runs`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub run_costs_usd: Vec<Option<f64>>,
}

/// A run's cost so far: its share of its node's ledger price (the GPUs it uses of the
/// node's, or the whole node when the node was made for the job) from launch to its end,
/// or to `now_ms` (the run's provider's clock) while it runs.
pub fn run_cost(run: &JobRun, ledger: &BTreeMap<String, SpendEntry>, now_ms: u64) -> Option<f64> {
    crate::state::spend::run_share_usd(run, ledger.get(&run.node_id)?, 0, now_ms)
}

/// Summarise one job. `replicas` comes from the spec when the job is still there.
pub fn summarize(
    address: &Address,
    rec: Option<&JobRecord>,
    replicas: Option<u32>,
    observed: &BTreeMap<String, JobStatus>,
    ledger: &BTreeMap<String, SpendEntry>,
    clock_ms: &dyn Fn(&str) -> u64,
) -> JobSummary {
    let runs = crate::jobs::demand::observed_runs(rec, Some(observed));
    let replicas = replicas.unwrap_or_else(|| runs.iter().map(|r| r.replica + 1).max().unwrap_or(0));
    let latest: Vec<&JobRun> =
        (0..replicas).filter_map(|i| runs.iter().filter(|r| r.replica == i).max_by_key(|r| r.attempt)).collect();
    let count = |s: JobState| latest.iter().filter(|r| r.status == s).count() as u32;
    let running = count(JobState::Running) + count(JobState::Queued);
    let state = if rec.is_some_and(|r| r.cancelled) || count(JobState::Cancelled) > 0 {
        "cancelled"
    } else if latest.is_empty() {
        if rec.and_then(|r| r.waiting_since.as_ref()).is_some() { "queued" } else { "not launched" }
    } else if running > 0 {
        "running"
    } else if count(JobState::Stopped) > 0 {
        "stopped, exit code awaited"
    } else if count(JobState::Succeeded) as usize == latest.len() && latest.len() as u32 == replicas {
        "succeeded"
    } else if count(JobState::Preempted) > 0 {
        "preempted"
    } else if count(JobState::Failed) > 0 {
        "failed"
    } else {
        "queued"
    };
    let run_costs_usd: Vec<Option<f64>> = runs.iter().map(|r| run_cost(r, ledger, clock_ms(&r.provider))).collect();
    let known: Vec<f64> = run_costs_usd.iter().flatten().copied().collect();
    JobSummary {
        address: address.clone(),
        state: state.into(),
        replicas,
        running,
        attempt: runs.iter().map(|r| r.attempt).max().unwrap_or(0),
        cost_usd: (!known.is_empty()).then(|| known.iter().sum()),
        run_costs_usd: if known.is_empty() { Vec::new() } else { run_costs_usd },
        runs,
        first_seen: rec.and_then(|r| r.first_seen.clone()),
        waiting_since: rec.and_then(|r| r.waiting_since.clone()),
    }
}

/// The run history as log lines, oldest first: one line per launch and one per end.
pub fn log_lines(s: &JobSummary) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(t) = &s.first_seen {
        lines.push(format!("{t} {} first seen", s.address));
    }
    for r in &s.runs {
        let at = r.launched_at.as_deref().unwrap_or("-");
        lines.push(format!(
            "{at} replica {} attempt {}: launched as {} on node {} ({}, {} GPUs) via {} in {}",
            r.replica, r.attempt, r.id, r.node_id, r.capacity, r.gpus, r.provider, r.region
        ));
        if !r.is_active() || matches!(r.status, JobState::Running | JobState::Stopped) {
            let msg = r.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
            lines.push(format!("{at} replica {} attempt {}: {}{msg}", r.replica, r.attempt, state_str(r.status)));
        }
    }
    if let Some(t) = &s.waiting_since {
        lines.push(format!("{t} {} waiting for admission", s.address));
    }
    lines
}
