use super::*;
use crate::model::{Capacity, JobRecord, JobState, Node, NodeState, Tags};
use crate::state::ResourceState;

fn addr(s: &str) -> Address {
    s.parse().unwrap()
}

fn run(id: &str, node: &str, status: JobState) -> JobRun {
    JobRun {
        replica: 0,
        attempt: 1,
        id: id.into(),
        provider: "sim".into(),
        region: "us-east-1".into(),
        node_id: node.into(),
        capacity: Capacity::OnDemand,
        gpus: 1,
        status,
        message: None,
        launched_at: None,
        finished_at: None,
        own_node: false,
        node_released: false,
        preempted_for: None,
        max_runtime_secs: None,
        address: None,
    }
}

fn resource(kind: &str, config: serde_json::Value) -> ResourceState {
    ResourceState {
        kind: kind.into(),
        provider: None,
        provider_kind: None,
        region: None,
        config: config.into(),
        sensitive: Vec::new(),
        dependencies: vec![],
        nodes: vec![],
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    }
}

/// Pool `train` with node `i-1`; jobs on it as `runs` say, applied with `pool = train`.
fn state(jobs: &[(&str, JobRecord)]) -> State {
    let mut state = State::new("l-1".into());
    let node = Node {
        provider: None,
        id: "i-1".into(),
        pool: addr("gpu_pool.train"),
        instance_type: "g6.xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::OnDemand,
        state: NodeState::Running,
        image: None,
        tags: Tags::new(),
    };
    state.resources.insert(
        "gpu_pool.train".into(),
        ResourceState { nodes: vec![node], ..resource("gpu_pool", serde_json::json!({})) },
    );
    for (name, rec) in jobs {
        let config = serde_json::json!({"pool": "gpu_pool.other", "template": "job_template.t"});
        state.resources.insert(
            format!("job.{name}"),
            ResourceState { job: Some(Box::new(rec.clone())), ..resource("job", config) },
        );
    }
    state
}

fn rec(runs: Vec<JobRun>) -> JobRecord {
    JobRecord { runs, ..JobRecord::default() }
}

#[test]
fn only_queued_and_running_runs_of_jobs_not_cancelled_count() {
    let cancelled = JobRecord { cancelled: true, ..rec(vec![run("r-c", "i-1", JobState::Running)]) };
    let s = state(&[
        ("a", rec(vec![run("r-a", "i-1", JobState::Running)])),
        ("b", rec(vec![run("r-b", "i-1", JobState::Succeeded)])),
        ("c", cancelled),
        ("d", rec(vec![run("r-d1", "i-1", JobState::Failed), run("r-d2", "i-1", JobState::Queued)])),
        ("e", rec(vec![])),
    ]);
    let running = by_pool(&s, None);
    assert_eq!(running, RunningJobs::from([(addr("gpu_pool.train"), vec![addr("job.a"), addr("job.d")])]));
}

#[test]
fn a_refreshed_status_wins_over_the_record() {
    let s = state(&[("a", rec(vec![run("r-a", "i-1", JobState::Running)]))]);
    let ended = JobStatus {
        id: "r-a".into(),
        job: addr("job.a"),
        node_id: "i-1".into(),
        state: JobState::Succeeded,
        attempt: 1,
        message: None,
        started_ms: None,
        finished_ms: None,
        address: None,
    };
    let observed = BTreeMap::from([("r-a".to_string(), ended)]);
    assert_eq!(by_pool(&s, Some(&observed)), RunningJobs::new());
}

#[test]
fn a_run_on_a_node_of_its_own_belongs_to_the_pool_its_job_was_applied_with() {
    let s = state(&[("vm", rec(vec![run("r-v", "i-own", JobState::Running)]))]);
    assert_eq!(by_pool(&s, None), RunningJobs::from([(addr("gpu_pool.other"), vec![addr("job.vm")])]));
}
