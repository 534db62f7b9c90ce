//! Job nodes found on the clouds that no run in the state owns: adopted or orphaned.
//!
//! An apply records each launch as soon as the provider answers; a crash (kill -9, a lost
//! runner) between the cloud creating the node and that record leaves a node the state
//! does not know. Its tags say whose it is (`gpuplan:job`, `gpuplan:replica`,
//! `gpuplan:attempt`): when that job is still in the spec, not cancelled, and the state
//! has no run for that replica attempt, the node *is* that run, and the plan adopts it
//! (terminating it would cancel the job's work, and relaunching the attempt would reuse
//! its launch token). Every other job node no run owns is an orphan that apply
//! terminates. Likewise a send to a warm node that an apply made but never recorded, found
//! by the token in its comment ([`sent_run`]). Pure: the nodes and sends come from the
//! caller's refresh.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::model::{JobRecord, JobRun, Sending};
use crate::providers::{JobState, JobStatus, Node, TAG_ATTEMPT, TAG_JOB, TAG_REPLICA};
use crate::spec::Spec;
use crate::state::{ResourceState, State};

/// A job node listed in one provider block's region.
#[derive(Debug, Clone)]
pub struct Listed {
    pub provider: String,
    pub region: String,
    pub node: Node,
}

/// What became of the live job nodes no run in the state owns.
#[derive(Debug, Default)]
pub struct Sorted {
    /// Runs to add to each job's record, one per adopted node.
    pub adopted: BTreeMap<Address, Vec<JobRun>>,
    /// Nodes of no job the spec runs (or of an attempt the state has already): terminated.
    pub orphans: Vec<Listed>,
}

/// Sort `listed` (live or not) against the runs `state` records: nodes a run owns are
/// left alone, the rest adopted or (live ones) orphaned. A node already gone is adopted
/// too, as an ended run (preempted: its loss is not the job's failure), so that the
/// replica's next launch is the next attempt, under a token of its own: relaunching the
/// same attempt would send the gone node's token again, and the cloud would answer with
/// the gone node.
///
/// `destroy`: nothing is adopted, every live node no run owns is an orphan (a destroy
/// leaves no job node behind).
pub fn sort(spec: &Spec, state: &State, listed: Vec<Listed>, destroy: bool) -> Sorted {
    let mut out = Sorted::default();
    let owned: std::collections::BTreeSet<&str> = state
        .resources
        .values()
        .filter_map(|r| r.job.as_ref())
        .flat_map(|j| &j.runs)
        .filter(|r| r.has_own_node())
        .map(|r| r.node_id.as_str())
        .collect();
    for l in listed.into_iter().filter(|l| !owned.contains(l.node.id.as_str())) {
        let adopt = if destroy { None } else { adoptable(spec, state, &l, &out.adopted) };
        match adopt {
            Some((job, run)) => out.adopted.entry(job).or_default().push(run),
            None if l.node.is_live() => out.orphans.push(l),
            None => {}
        }
    }
    out
}

/// The run a job node is, when its job may adopt it.
fn adoptable(
    spec: &Spec,
    state: &State,
    l: &Listed,
    already: &BTreeMap<Address, Vec<JobRun>>,
) -> Option<(Address, JobRun)> {
    let tags = &l.node.tags;
    // Tags that do not name a job, replica and attempt are deliberately not an error: such a
    // node cannot be a run of any job, so it is not adopted; the caller then treats it as an
    // orphan, which the plan shows as drift and apply terminates. Nothing is left billing.
    let job: Address = tags.get(TAG_JOB)?.parse().ok()?;
    let replica: u32 = tags.get(TAG_REPLICA)?.parse().ok()?;
    let attempt: u32 = tags.get(TAG_ATTEMPT)?.parse().ok()?;
    let declared = spec.jobs.get(&job)?;
    if replica >= declared.replicas.value {
        return None;
    }
    let rec = super::demand::record(state, &job);
    if rec.is_some_and(|r| r.cancelled) {
        return None;
    }
    // The state has that attempt already (on another node): this one is a duplicate.
    let taken = |r: &JobRun| r.replica == replica && r.attempt >= attempt;
    if rec.is_some_and(|r| r.runs.iter().any(taken)) || already.get(&job).is_some_and(|v| v.iter().any(taken)) {
        return None;
    }
    let template = spec.job_templates.get(&declared.template.value);
    let gpus = template.map_or(0, |t| t.gpus.value);
    let run = JobRun {
        replica,
        attempt,
        // A job VM's run id is its instance id (aws, tencentcloud, alicloud).
        id: l.node.id.clone(),
        provider: l.provider.clone(),
        region: l.region.clone(),
        node_id: l.node.id.clone(),
        capacity: l.node.capacity,
        gpus,
        status: if l.node.is_live() { JobState::Queued } else { JobState::Preempted },
        message: Some(adopted_message(&l.node)),
        launched_at: None,
        finished_at: None,
        own_node: true,
        node_released: false,
        preempted_for: None,
        // The node's deadline is its template's, as for a run apply recorded itself; its
        // `launched_at` is set when apply records the adoption (the node's real launch
        // was moments before the apply that made it died).
        max_runtime_secs: template.and_then(|t| t.max_runtime.as_ref()).map(|d| d.value.as_secs()),
        address: None,
    };
    Some((job, run))
}

/// What the plan and the run's record say about an adopted node.
pub fn adopted_message(node: &Node) -> String {
    let what = format!("node {} in {} was launched by an apply that ended before recording it", node.id, node.zone);
    if node.is_live() { format!("adopted: {what}") } else { format!("adopted as ended: {what}, and is gone") }
}

/// The run a send to a warm node is, once its cloud said it ran it ([`Sending`]: an apply
/// stopped between the send and its record).
pub fn sent_run(s: &Sending, status: JobStatus) -> JobRun {
    JobRun {
        replica: s.replica,
        attempt: s.attempt,
        id: status.id,
        provider: s.provider.clone(),
        region: s.region.clone(),
        node_id: s.node_id.clone(),
        capacity: s.capacity,
        gpus: s.gpus,
        status: status.state,
        message: Some(format!("adopted: sent to warm node {} by an apply that ended before recording it", s.node_id)),
        launched_at: None,
        finished_at: None,
        own_node: false,
        node_released: false,
        preempted_for: None,
        max_runtime_secs: s.max_runtime_secs,
        address: None,
    }
}

/// `state` with the adopted runs in their jobs' records (a job the state does not know
/// yet gets a bare record), and no send left in flight (`JobRecord::sending`): the
/// refresh that found the adopted runs asked the clouds about every such send, so those
/// that ran are among them and the others are launched again. For planning; `None` when
/// there is nothing to change.
pub fn with_adopted(state: &State, adopted: &BTreeMap<Address, Vec<JobRun>>) -> Option<State> {
    let sending = state.resources.values().any(|r| r.job.as_ref().is_some_and(|j| !j.sending.is_empty()));
    if adopted.is_empty() && !sending {
        return None;
    }
    let mut s = state.clone();
    for rec in s.resources.values_mut().filter_map(|r| r.job.as_mut()) {
        rec.sending.clear();
    }
    for (job, runs) in adopted {
        let r = s.resources.entry(job.to_string()).or_insert_with(bare_job);
        let rec = r.job.get_or_insert_with(|| Box::new(JobRecord::default()));
        rec.runs.extend(runs.iter().cloned());
    }
    Some(s)
}

/// The state record of a job whose configuration has not been recorded yet.
pub fn bare_job() -> ResourceState {
    ResourceState {
        kind: crate::addr::Kind::Job.to_string(),
        provider: None,
        provider_kind: None,
        region: None,
        config: Default::default(),
        sensitive: Vec::new(),
        dependencies: vec![],
        nodes: vec![],
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    }
}

#[cfg(test)]
mod tests;
