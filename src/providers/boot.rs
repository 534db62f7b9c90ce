//! The boot deadline of a job node: a node made for a job that is still running
//! [`BOOT_DEADLINE_SECS`] after its launch, whose run-command agent answers, but which has
//! no job log, never ran its user data (the script's first step creates the log). Its run
//! fails then, instead of billing until `max_runtime` + 15 minutes.
//!
//! The clouds read the log differently (Tencent's TAT tails it; AWS Systems Manager and
//! Alibaba Cloud Assistant run [`probe_script`]); what the answer means is decided here,
//! once. Nothing here guesses: no creation time, no agent, or an answer without the
//! probe's line leaves the run to its `max_runtime` deadline.

use std::future::Future;
use std::time::Duration;

pub use crate::providers::userdata::{BOOT_DEADLINE_SECS, JOB_LOG};
use crate::providers::{JobState, JobStatus, ProviderError};

/// Reads of a check's command before it counts as unanswered (an online agent answers in
/// about a second; this bounds a refresh's wait per node to a few seconds).
const POLLS: usize = 20;
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// The line [`probe_script`] prints: `gpuplan-job-log=present` or `=missing`.
const PROBE_MARKER: &str = "gpuplan-job-log=";

/// A shell command that says whether the job's log exists on the node.
pub fn probe_script() -> String {
    format!("if [ -e {JOB_LOG} ]; then echo {PROBE_MARKER}present; else echo {PROBE_MARKER}missing; fi")
}

/// What a probe's output says: `Some(true)` the log exists, `Some(false)` it does not,
/// `None` the output has no probe line (an agent that ran nothing, or an emulator that
/// answers every command with empty output): not an answer, so not a failure.
pub fn log_exists(output: &str) -> Option<bool> {
    output.lines().rev().find_map(|l| match l.trim().strip_prefix(PROBE_MARKER)? {
        "present" => Some(true),
        "missing" => Some(false),
        _ => None,
    })
}

/// Seconds since a node's launch when it is past the boot deadline, else `None`.
pub fn past_deadline(created_ms: u64, now_ms: u64) -> Option<u64> {
    let age_secs = now_ms.saturating_sub(created_ms) / 1000;
    (age_secs > BOOT_DEADLINE_SECS).then_some(age_secs)
}

/// The failed run's message: its node is `age_secs` old and `agent` answered without a log.
pub fn never_started(age_secs: u64, agent: &str) -> String {
    format!(
        "its job never started: {}m after launch the node has no job log ({agent} answered), so its user data did not run; its node is terminated",
        age_secs / 60
    )
}

/// Where a check's command is, as the cloud's run-command API reports it.
pub enum Check {
    /// Not run yet, or running (or not registered yet: SSM lists an invocation a moment
    /// after `SendCommand`).
    Pending,
    /// Ran: its output.
    Output(String),
    /// Ended without running to completion (timed out, cancelled, failed): no answer.
    Ended,
}

/// Whether the job's log exists, from a check command's state as `read` reports it,
/// read until it ends or [`POLLS`] times. `Ok(None)`: no answer.
pub async fn wait_answer<F, Fut>(mut read: F) -> Result<Option<bool>, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Check, ProviderError>>,
{
    for _ in 0..POLLS {
        match read().await? {
            Check::Output(out) => return Ok(log_exists(&out)),
            Check::Ended => return Ok(None),
            Check::Pending => tokio::time::sleep(POLL_INTERVAL).await,
        }
    }
    Ok(None)
}

/// A running job node's run, `age_secs` after its launch (past the boot deadline), given
/// what `agent` answered about its job log.
pub fn verdict(
    running: JobStatus,
    age_secs: u64,
    agent: &str,
    check: Result<Option<bool>, ProviderError>,
) -> JobStatus {
    match check {
        Ok(Some(false)) => {
            JobStatus { state: JobState::Failed, message: Some(never_started(age_secs, agent)), ..running }
        }
        // The log exists (the job started), or the agent is offline or gave no answer:
        // nothing is known, so the run keeps its `max_runtime` + 15 minutes deadline.
        Ok(_) => running,
        // A check that failed is no verdict either way: the same deadline, and why.
        Err(e) => JobStatus {
            message: Some(format!(
                "its boot check through {agent} failed ({e}); the run keeps its max_runtime deadline"
            )),
            ..running
        },
    }
}

/// A creation time as the clouds write it, in ms since the epoch: RFC 3339 (Tencent's
/// `CreatedTime`), or to the minute (Alibaba's `CreationTime`, `2026-11-26T15:16Z`).
/// `None` for a time it cannot read: that node gets no boot check (never a guess).
pub fn created_ms(text: &str) -> Option<u64> {
    let full = match text.strip_suffix('Z') {
        Some(t) if t.len() == 16 => format!("{t}:00Z"),
        _ => text.to_string(),
    };
    // Unreadable: no boot check for that node, which keeps the `max_runtime` deadline.
    let at = humantime::parse_rfc3339_weak(&full).ok()?;
    u64::try_from(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_answers_present_missing_or_nothing() {
        assert!(probe_script().contains("/var/log/gpuplan-job.log"), "{}", probe_script());
        assert_eq!(log_exists("gpuplan-job-log=missing\n"), Some(false));
        assert_eq!(log_exists("noise\ngpuplan-job-log=present\r\n"), Some(true));
        assert_eq!(log_exists(""), None, "an empty answer is no answer");
        assert_eq!(log_exists("gpuplan-job-log=\n"), None);
    }

    #[test]
    fn the_deadline_counts_from_launch_and_reads_both_time_formats() {
        let t = created_ms("2026-11-26T15:16:00Z").unwrap();
        assert_eq!(created_ms("2026-11-26T15:16Z"), Some(t));
        assert_eq!(created_ms("yesterday"), None);
        assert_eq!(past_deadline(t, t + 10 * 60_000), None);
        assert_eq!(past_deadline(t, t + 16 * 60_000), Some(960));
        assert!(never_started(960, "TAT").contains("never started: 16m after launch"));
    }
}
