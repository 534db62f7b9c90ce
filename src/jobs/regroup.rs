//! Multi-node jobs requeued whole. The replicas of a job on a VM pool rendezvous on
//! replica 0 (`GPUPLAN_MASTER_ADDR`) and none of them runs without the others; a replica
//! lost before every replica has started (its node reclaimed or gone, or it failed) leaves
//! the rest waiting at a rendezvous that cannot complete. So the others are stopped (apply
//! does it) and the whole job is queued again as its next attempt: nothing of theirs
//! spends a retry, nor does the lost replica's unless it failed on its own. Once all have
//! started, a replica's end is its own, as for any job; one that has spent its retries
//! fails the job, whose other replicas are not launched again (`demand::progress`). Pure.

use crate::model::job::{JobRun, Regroup};
use crate::providers::JobState;

/// Regroup `runs` (refresh's view of a job of `replicas` replicas) when one was lost
/// while another had yet to start: the others' active runs end as preempted (apply stops
/// them), so every replica is pending again.
pub(super) fn regroup(runs: &mut [JobRun], replicas: u32) -> Option<Regroup> {
    if replicas < 2 {
        return None;
    }
    let latest: Vec<usize> = (0..replicas)
        .filter_map(|r| {
            runs.iter().enumerate().filter(|(_, x)| x.replica == r).max_by_key(|(_, x)| x.attempt).map(|(i, _)| i)
        })
        .collect();
    let starting = latest.len() < replicas as usize || latest.iter().any(|&i| runs[i].status == JobState::Queued);
    let lost = latest.iter().copied().find(|&i| matches!(runs[i].status, JobState::Failed | JobState::Preempted))?;
    let others_active = latest.iter().any(|&i| matches!(runs[i].status, JobState::Queued | JobState::Running));
    if !starting || !others_active {
        return None;
    }
    let lost_replica = runs[lost].replica;
    let why = match runs[lost].status {
        JobState::Failed => format!("replica {lost_replica} failed before all replicas started"),
        _ => format!("replica {lost_replica} was lost before all replicas started"),
    };
    let mut stops = Vec::new();
    for &i in &latest {
        let run = &mut runs[i];
        if matches!(run.status, JobState::Queued | JobState::Running) {
            run.status = JobState::Preempted;
            run.message = Some(format!("stopped by gpuplan: {why}; the job requeues whole, no retry spent"));
            stops.push(run.id.clone());
        }
    }
    Some(Regroup { lost: lost_replica, why, stops })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Capacity;

    fn run(replica: u32, status: JobState) -> JobRun {
        JobRun {
            replica,
            attempt: 1,
            id: format!("j-{replica}"),
            provider: "aws".into(),
            region: "us-east-1".into(),
            node_id: format!("i-{replica}"),
            capacity: Capacity::Spot,
            gpus: 8,
            status,
            message: None,
            launched_at: None,
            finished_at: None,
            own_node: true,
            node_released: false,
            preempted_for: None,
            max_runtime_secs: None,
            address: None,
        }
    }

    #[test]
    fn a_replica_reclaimed_before_the_rest_started_stops_them_and_spends_nothing() {
        let mut runs = vec![run(0, JobState::Running), run(1, JobState::Preempted), run(2, JobState::Queued)];
        let r = regroup(&mut runs, 3).expect("regrouped");
        assert_eq!(r.lost, 1);
        assert_eq!(r.stops, ["j-0", "j-2"]);
        assert!(runs.iter().all(|r| r.status == JobState::Preempted && !r.spends_retry()), "{runs:?}");
        assert!(runs[0].message.as_deref().is_some_and(|m| m.contains("replica 1 was lost before all")), "{runs:?}");
    }

    #[test]
    fn once_all_started_or_for_one_replica_a_loss_is_its_own() {
        let mut all_started = vec![run(0, JobState::Running), run(1, JobState::Preempted), run(2, JobState::Running)];
        assert_eq!(regroup(&mut all_started, 3), None);
        assert_eq!(all_started[0].status, JobState::Running);
        let mut single = vec![run(0, JobState::Preempted)];
        assert_eq!(regroup(&mut single, 1), None);
        let mut nothing_lost = vec![run(0, JobState::Running), run(1, JobState::Queued)];
        assert_eq!(regroup(&mut nothing_lost, 2), None);
    }
}
