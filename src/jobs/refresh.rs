//! Refresh for jobs: ask the providers for the status of every run state records as
//! queued or running. One call per active run (clouds have no batched job status); runs
//! already finished are never asked about again.
//!
//! A job VM has a deadline: its run's `max_runtime` (the template's, else
//! [`DEFAULT_MAX_RUNTIME_SECS`]) plus [`BOOT_ALLOWANCE_SECS`] from its launch. The node
//! enforces `max_runtime` itself (the job script runs under `timeout`); the deadline is
//! the backstop for a node whose script never ran or never reported: a run still queued
//! or running past it has failed (its node is then terminated, and the job retried while
//! it has retries), instead of billing forever.
//!
//! A job VM that stopped without an exit line the provider could read is `stopped`: its
//! exit code is awaited for [`exit_code_grace`] from the stop (clouds post console output
//! late), then the run has failed ("its node stopped and never posted an exit code"): it
//! spends a retry and its node is terminated like any ended run's.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::providers::ProviderSet;
use crate::providers::{JobState, JobStatus, ProviderError};
use crate::state::State;

/// Run id → status, for every active run in state. A run the provider no longer knows is
/// left out (the state's record stands) rather than failing the whole refresh.
/// `grace`: how long a stopped job VM's exit code is awaited ([`exit_code_grace`]).
pub async fn statuses(
    providers: &ProviderSet,
    state: &State,
    grace: Duration,
) -> Result<BTreeMap<String, JobStatus>, (String, ProviderError)> {
    let mut out = BTreeMap::new();
    for r in state.resources.values() {
        let Some(rec) = &r.job else { continue };
        for run in rec.runs.iter().filter(|r| r.is_active()) {
            let Some(p) = providers.get(&run.provider) else { continue };
            match async { crate::providers::ports::jobs_of(&**p)?.job_status(&run.region, &run.id).await }.await {
                Ok(mut s) => {
                    if s.state == JobState::Stopped {
                        await_exit_code(&mut s, run, p.clock_ms(), grace);
                    } else if matches!(s.state, JobState::Queued | JobState::Running)
                        && let Some(why) = past_deadline(run, p.clock_ms())
                    {
                        s.state = JobState::Failed;
                        s.message = Some(why);
                    }
                    out.insert(run.id.clone(), s);
                }
                // A job VM the cloud no longer has: the run ended with its node (a spot
                // node reclaimed and gone, or terminated outside gpuplan). Without this the
                // run would count as running forever.
                Err(e) if e.code == "JobNotFound" && run.has_own_node() => {
                    let (state, why) = match run.capacity {
                        crate::providers::Capacity::Spot => (JobState::Preempted, "its spot node is gone"),
                        crate::providers::Capacity::OnDemand | crate::providers::Capacity::Reserved => {
                            (JobState::Failed, "its node is gone")
                        }
                    };
                    out.insert(
                        run.id.clone(),
                        JobStatus {
                            id: run.id.clone(),
                            job: crate::addr::Address::new(crate::addr::Kind::Job, &run.id),
                            node_id: run.node_id.clone(),
                            state,
                            attempt: run.attempt,
                            message: Some(format!(
                                "{why}: {} no longer exists (terminated outside gpuplan?)",
                                run.node_id
                            )),
                            started_ms: None,
                            finished_ms: None,
                            address: None,
                        },
                    );
                }
                // Anything else the provider cannot answer about: the state's record stands.
                Err(e) if e.class == crate::providers::ErrorClass::Invalid => {}
                Err(e) => return Err((run.provider.clone(), e)),
            }
        }
    }
    Ok(out)
}

/// How long a stopped job VM's exit code is awaited, unless `GPUPLAN_EXIT_CODE_GRACE`
/// says otherwise: EC2 and ECS post console output minutes after a stop.
pub const EXIT_CODE_GRACE: Duration = Duration::from_secs(10 * 60);

/// The grace for a stopped job VM's exit code: `GPUPLAN_EXIT_CODE_GRACE` from `env`
/// (e.g. `0s`, for tests), else [`EXIT_CODE_GRACE`].
pub fn exit_code_grace(env: &BTreeMap<String, String>) -> Result<Duration, String> {
    let Some(v) = env.get("GPUPLAN_EXIT_CODE_GRACE").map(|v| v.trim()).filter(|v| !v.is_empty()) else {
        return Ok(EXIT_CODE_GRACE);
    };
    crate::model::time::duration(v)
        .map_err(|e| format!("`GPUPLAN_EXIT_CODE_GRACE={v}` is not a duration such as `10m` or `0s`: {e}"))
}

/// A run whose node stopped with no readable exit line (`s` is `Stopped`): its exit code
/// is awaited until `grace` has passed since the stop, then the run has failed. The stop
/// is when the cloud says it stopped (`s.finished_ms`), else when an earlier refresh saw
/// it stopped (the run's `finished_at`), else now; it is kept in `s.finished_ms`, which
/// the run's record keeps as its `finished_at`.
fn await_exit_code(s: &mut JobStatus, run: &crate::model::JobRun, now_ms: u64, grace: Duration) {
    let seen_before = || {
        let at = run.finished_at.as_deref().filter(|_| run.status == JobState::Stopped)?;
        let at = humantime::parse_rfc3339_weak(at).ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
        u64::try_from(at.as_millis()).ok()
    };
    let stopped = s.finished_ms.or_else(seen_before).unwrap_or(now_ms).min(now_ms);
    s.finished_ms = Some(stopped);
    let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
    let until = stopped.saturating_add(grace_ms);
    let at = crate::model::time::rfc3339_ms;
    let why = s.message.take().unwrap_or_else(|| "no reason given".into());
    if now_ms >= until {
        s.state = JobState::Failed;
        s.message = Some(format!(
            "its node stopped and never posted an exit code ({why}; stopped at {}, waited {}): its node {} is terminated",
            at(stopped),
            humantime::format_duration(grace),
            run.node_id
        ));
    } else {
        s.message = Some(format!(
            "its node stopped ({why}); exit code awaited until {} (then the node is terminated and the run fails)",
            at(until)
        ));
    }
}

/// How long a job VM may run without a `max_runtime` of its own.
pub const DEFAULT_MAX_RUNTIME_SECS: u64 = 24 * 3600;
/// Time allowed beyond `max_runtime` for the node to boot, pull the image and report.
pub const BOOT_ALLOWANCE_SECS: u64 = crate::providers::userdata::BOOT_DEADLINE_SECS;

/// Why a run on a job VM is past its deadline at `now_ms` (its provider's clock), if it is.
/// Runs on pool nodes or in a cluster have none here (their own limits apply).
pub fn past_deadline(run: &crate::model::JobRun, now_ms: u64) -> Option<String> {
    if !run.has_own_node() || run.provider.starts_with(crate::providers::kube::PREFIX) {
        return None;
    }
    // `launched_at` is written by gpuplan at launch; a run without a parsable one (a state
    // edited by hand, or written before launch times were kept) has no deadline to compute
    // and is deliberately left to its provider status and the orphan sweep rather than
    // failed on a guess.
    let launched = humantime::parse_rfc3339_weak(run.launched_at.as_deref()?).ok()?;
    let launched_ms = u64::try_from(launched.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()?;
    let max = run.max_runtime_secs.unwrap_or(DEFAULT_MAX_RUNTIME_SECS);
    let deadline = launched_ms.saturating_add(max.saturating_add(BOOT_ALLOWANCE_SECS).saturating_mul(1000));
    (now_ms > deadline).then(|| {
        let limit = humantime::format_duration(std::time::Duration::from_secs(max));
        let what = if run.max_runtime_secs.is_some() { "its max_runtime" } else { "the default max_runtime" };
        format!(
            "still {} past {what} of {limit} (+{}m to boot) since its launch at {}: its node {} is terminated",
            if run.is_active() { "running" } else { "unfinished" },
            BOOT_ALLOWANCE_SECS / 60,
            run.launched_at.as_deref().unwrap_or("?"),
            run.node_id
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Capacity, JobRun};

    fn run(max: Option<u64>) -> JobRun {
        JobRun {
            replica: 0,
            attempt: 1,
            id: "i-1".into(),
            provider: "aws".into(),
            region: "us-east-1".into(),
            node_id: "i-1".into(),
            capacity: Capacity::OnDemand,
            gpus: 1,
            status: JobState::Running,
            message: None,
            launched_at: Some("2026-01-01T00:00:00Z".into()),
            finished_at: None,
            own_node: true,
            node_released: false,
            preempted_for: None,
            max_runtime_secs: max,
            address: None,
        }
    }

    const LAUNCH_MS: u64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    fn stopped_status(cloud_stop_ms: Option<u64>) -> JobStatus {
        JobStatus {
            id: "i-1".into(),
            job: "job.a".parse().unwrap(),
            node_id: "i-1".into(),
            state: JobState::Stopped,
            attempt: 1,
            message: Some("Client.UserInitiatedShutdown".into()),
            started_ms: None,
            finished_ms: cloud_stop_ms,
            address: None,
        }
    }

    #[test]
    fn a_stopped_node_s_exit_code_is_awaited_for_the_grace_from_the_stop_then_the_run_fails() {
        let grace = EXIT_CODE_GRACE;
        let at = |mins: u64| LAUNCH_MS + mins * 60_000;
        // The cloud says when it stopped: the grace counts from there.
        let mut s = stopped_status(Some(at(30)));
        await_exit_code(&mut s, &run(None), at(39), grace);
        assert_eq!(s.state, JobState::Stopped);
        let msg = s.message.clone().unwrap();
        assert!(msg.contains("(Client.UserInitiatedShutdown); exit code awaited until 2026-01-01T00:40:00Z"), "{msg}");
        assert_eq!(s.finished_ms, Some(at(30)));
        let mut s = stopped_status(Some(at(30)));
        await_exit_code(&mut s, &run(None), at(40), grace);
        assert_eq!(s.state, JobState::Failed);
        let msg = s.message.unwrap();
        assert!(msg.starts_with("its node stopped and never posted an exit code"), "{msg}");
        assert!(
            msg.contains("stopped at 2026-01-01T00:30:00Z, waited 10m") && msg.contains("i-1 is terminated"),
            "{msg}"
        );
        // No stop time from the cloud: from when a refresh first saw it stopped (the
        // run's record), else now.
        let mut s = stopped_status(None);
        await_exit_code(&mut s, &run(None), at(50), grace);
        assert_eq!((s.state, s.finished_ms), (JobState::Stopped, Some(at(50))));
        let seen = JobRun { status: JobState::Stopped, finished_at: Some("2026-01-01T00:30:00Z".into()), ..run(None) };
        let mut s = stopped_status(None);
        await_exit_code(&mut s, &seen, at(50), grace);
        assert_eq!(s.state, JobState::Failed);
        // A zero grace (tests): failed at first sight.
        let mut s = stopped_status(None);
        await_exit_code(&mut s, &run(None), at(50), Duration::ZERO);
        assert_eq!(s.state, JobState::Failed);
    }

    #[test]
    fn the_grace_comes_from_the_environment() {
        let env = |v: &str| BTreeMap::from([("GPUPLAN_EXIT_CODE_GRACE".to_string(), v.to_string())]);
        assert_eq!(exit_code_grace(&BTreeMap::new()), Ok(EXIT_CODE_GRACE));
        assert_eq!(exit_code_grace(&env("0s")), Ok(Duration::ZERO));
        assert_eq!(exit_code_grace(&env(" 2m ")), Ok(Duration::from_secs(120)));
        let e = exit_code_grace(&env("soon")).unwrap_err();
        assert!(e.contains("`GPUPLAN_EXIT_CODE_GRACE=soon` is not a duration"), "{e}");
    }

    #[test]
    fn a_job_vm_ends_at_its_max_runtime_plus_boot_time_else_after_24_hours() {
        let two_hours = run(Some(7200));
        let at = |secs: u64| LAUNCH_MS + secs * 1000;
        assert_eq!(past_deadline(&two_hours, at(7200 + 15 * 60)), None, "on the deadline: not yet");
        let why = past_deadline(&two_hours, at(7200 + 15 * 60 + 1)).expect("past it");
        assert!(why.contains("max_runtime of 2h") && why.contains("i-1 is terminated"), "{why}");
        let unset = run(None);
        assert_eq!(past_deadline(&unset, at(23 * 3600)), None);
        let why = past_deadline(&unset, at(25 * 3600)).expect("24 h by default");
        assert!(why.contains("default max_runtime of 1day"), "{why}");
        // Runs on pool nodes and in clusters keep their own limits.
        let on_pool = JobRun { own_node: false, node_id: "n-1".into(), ..run(None) };
        assert_eq!(past_deadline(&on_pool, at(48 * 3600)), None);
    }
}
