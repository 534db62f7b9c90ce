//! What an apply's jobs phase did, counted in the words of the plan's summary
//! (docs/design/cli.md, "The daily loop"): jobs launched and requeued, nodes launched and
//! terminated for jobs.

use crate::plan::Plan;

/// What the jobs phase did, in the words of the plan's summary (`Jobs: 1 launched, 1
/// requeued`, and the nodes it launched and terminated for jobs).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Jobs that launched a replica without a run stopped first.
    pub launched: usize,
    /// Jobs whose runs gpuplan stopped (a node removed, a preemption) to run again.
    pub requeued: usize,
    /// Nodes booted for job replicas (cloud VM pools).
    pub nodes_launched: usize,
    /// Nodes of ended runs and job nodes no run owns, terminated.
    pub nodes_terminated: usize,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.launched += o.launched;
        self.requeued += o.requeued;
        self.nodes_launched += o.nodes_launched;
        self.nodes_terminated += o.nodes_terminated;
    }
}

/// Jobs with a run gpuplan stopped in this apply (`stopped`: the run ids stopped without
/// error), because its node goes or for a higher-priority job: they go back to the queue.
pub fn requeued(plan: &Plan, stopped: impl Fn(&str) -> bool) -> usize {
    plan.jobs
        .iter()
        .filter(|j| j.interrupted.iter().any(|i| stopped(&i.run)) || j.preempt.iter().any(|r| stopped(r)))
        .count()
}
