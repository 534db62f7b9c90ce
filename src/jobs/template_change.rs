//! A job template change takes effect at each job's next launch: a run already going keeps
//! the template it started with (its image, command, environment). The plan says so on
//! the template's change, naming those jobs, so every view (text, JSON, markdown) shows
//! that "updated in-place" does not reach them. Pure; reads the placements `place.rs` made.

use std::collections::BTreeMap;

use crate::addr::{Address, Kind};
use crate::jobs::model::JobPlacement;
use crate::plan::model::{Action, Plan, Reason, ReasonCode};
use crate::spec::Spec;

/// Jobs named in the reason before `and N more`.
const MAX_NAMED: usize = 10;

/// Add a [`ReasonCode::RunningJobsKeepTemplate`] reason to each updated `job_template`
/// that a running job uses.
pub fn note_running_jobs(plan: &mut Plan, spec: &Spec) {
    let Plan { changes, jobs, .. } = plan;
    let mut updated: Vec<_> =
        changes.iter_mut().filter(|c| c.action == Action::Update && c.address.kind == Kind::JobTemplate).collect();
    if updated.is_empty() {
        return;
    }
    let mut running: BTreeMap<&Address, Vec<&Address>> = BTreeMap::new();
    for j in jobs.iter().filter(|j| keeps_running(j)) {
        if let Some(job) = spec.jobs.get(&j.address) {
            running.entry(&job.template.value).or_default().push(&j.address);
        }
    }
    for c in updated.iter_mut() {
        // Placed again (reconcile places jobs into each plan it weighs): one note, fresh.
        c.reasons.retain(|r| r.code != ReasonCode::RunningJobsKeepTemplate);
        if let Some(names) = running.get(&c.address) {
            c.reasons.push(Reason::new(ReasonCode::RunningJobsKeepTemplate, message(names)));
        }
    }
}

/// The job has a run going that this plan does not stop (a preempted run relaunches, so
/// it takes the new template).
fn keeps_running(j: &JobPlacement) -> bool {
    j.runs.iter().any(|r| r.is_active() && !j.preempt.contains(&r.id))
}

/// "`job.a` keeps running with the old template until its next launch".
fn message(jobs: &[&Address]) -> String {
    let mut names: Vec<String> = jobs.iter().take(MAX_NAMED).map(|a| format!("`{a}`")).collect();
    if jobs.len() > MAX_NAMED {
        names.push(format!("{} more", jobs.len() - MAX_NAMED));
    }
    let list = match names.as_slice() {
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        [] => String::new(),
    };
    if jobs.len() == 1 {
        format!("{list} keeps running with the old template until its next launch")
    } else {
        format!("{list} keep running with the old template until their next launch")
    }
}
