use super::*;
use crate::diag::Sources;
use crate::jobs::model::JobRecord;
use crate::plan::diff::{self, PlanInput};
use crate::providers::{Node, NodeState, Tags};
use crate::state::ResourceState;

const LINEAGE: &str = "00000000-0000-4000-8000-000000000000";

fn spec(provider: &str) -> Spec {
    let text = format!(
        r#"
provider "{provider}" {{
  region = "us-east-1"
}}

gpu_pool "train" {{
  provider       = "{provider}"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  nodes {{
    min     = 0
    desired = 1
    max     = 2
  }}
}}

job_template "t" {{
  image          = "img:1"
  gpus           = 8
  retries        = 1
  max_runtime    = "2h"
  checkpoint_uri = "s3://c/t"
}}

job "a" {{
  template = job_template.t
  pool     = gpu_pool.train
}}

job "b" {{
  template = job_template.t
  pool     = gpu_pool.train
}}
"#
    );
    let mut sources = Sources::default();
    sources.add("main.hcl", text);
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    loaded.spec
}

fn place_with(spec: &Spec, state: &State) -> Vec<JobPlacement> {
    let input = PlanInput::offline(spec, state);
    let plan = diff::plan(&input).expect("the state's keys are addresses");
    place(&PlaceInput { spec, state, plan: &plan, observed: None, agents: None })
}

/// [`place_with`], with the agents refresh saw.
fn place_agents(spec: &Spec, state: &State, agents: &BTreeMap<String, AgentState>) -> Vec<JobPlacement> {
    let input = PlanInput::offline(spec, state);
    let plan = diff::plan(&input).expect("the state's keys are addresses");
    place(&PlaceInput { spec, state, plan: &plan, observed: None, agents: Some(agents) })
}

fn get<'a>(jobs: &'a [JobPlacement], name: &str) -> &'a JobPlacement {
    jobs.iter().find(|j| j.address.name == name).expect("job placed")
}

fn run(attempt: u32, status: JobState) -> JobRun {
    JobRun {
        replica: 0,
        attempt,
        id: format!("j-{attempt}"),
        provider: "sim".into(),
        region: "us-east-1".into(),
        node_id: "i-1".into(),
        capacity: Capacity::OnDemand,
        gpus: 8,
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

/// A state where the pool has one live on-demand node and job `a` has `rec`.
fn state_with(spec: &Spec, rec: JobRecord) -> State {
    let mut state = State::new(LINEAGE.into());
    let node = Node {
        provider: None,
        id: "i-1".into(),
        pool: "gpu_pool.train".parse().unwrap(),
        instance_type: "p4de.24xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::OnDemand,
        state: NodeState::Running,
        image: None,
        tags: Tags::new(),
    };
    let pool_cfg = serde_json::to_value(&spec.gpu_pools[&"gpu_pool.train".parse::<Address>().unwrap()]).unwrap();
    let resource = |kind: &str, config: serde_json::Value| ResourceState {
        kind: kind.into(),
        provider: Some("sim".into()),
        provider_kind: Some("sim".into()),
        region: Some("us-east-1".into()),
        config: config.into(),
        sensitive: Vec::new(),
        dependencies: vec![],
        nodes: vec![],
        job: None,
        fallback: None,
        placement: None,
        reservation: None,
    };
    state
        .resources
        .insert("gpu_pool.train".into(), ResourceState { nodes: vec![node], ..resource("gpu_pool", pool_cfg) });
    state
        .resources
        .insert("job.a".into(), ResourceState { job: Some(Box::new(rec)), ..resource("job", serde_json::Value::Null) });
    state
}

#[test]
fn cloud_launches_carry_a_one_node_shape_with_job_tags() {
    let spec = spec("aws");
    let jobs = place_with(&spec, &State::new(LINEAGE.into()));
    let a = get(&jobs, "a");
    assert_eq!(a.placement, Placement::Launch);
    let req = &a.launches[0].request;
    let shape = req.shape.as_ref().expect("clouds get a node shape");
    assert_eq!((shape.count, shape.capacity), (1, Capacity::OnDemand));
    assert_eq!(shape.instance_types, ["p4de.24xlarge"]);
    assert_eq!(shape.tags.get(TAG_JOB), Some("job.a"));
    assert_eq!(shape.tags.get(TAG_ATTEMPT), Some("1"));
    assert_eq!(shape.tags.get(TAG_LINEAGE), Some(LINEAGE));
    assert_eq!(shape.token, req.token);
    assert!(req.node_id.is_empty());
    assert_eq!(req.max_runtime_secs, Some(7200));
    assert_eq!(req.env.get(ENV_CHECKPOINT).map(String::as_str), Some("s3://c/t"));
    // One 8-GPU node: `b` (same priority, later address) waits for capacity.
    assert_eq!(get(&jobs, "b").reason.as_ref().map(|r| r.code.as_str()), Some("capacity"));
}

#[test]
fn sim_launches_run_on_pool_nodes_and_tokens_are_stable_per_attempt() {
    let spec = spec("sim");
    let state = State::new(LINEAGE.into());
    let a = place_with(&spec, &state);
    let again = place_with(&spec, &state);
    assert_eq!(a, again, "placement is deterministic");
    let l = &get(&a, "a").launches[0];
    assert!(l.request.shape.is_none());
    // A new job's life is the state's serial (0 here).
    assert_eq!(get(&a, "a").incarnation.as_deref(), Some("s0"));
    assert_eq!(l.request.token, token(LINEAGE, &"job.a".parse().unwrap(), "s0", 0, 1));
    assert_ne!(l.request.token, token(LINEAGE, &"job.a".parse().unwrap(), "s0", 0, 2));
    // Another life of the same address (removed and added again): other tokens.
    assert_ne!(l.request.token, token(LINEAGE, &"job.a".parse().unwrap(), "s7", 0, 1));
}

#[test]
fn a_running_job_keeps_its_gpus_and_the_next_one_waits() {
    let spec = spec("sim");
    let rec = JobRecord {
        first_seen: Some("2026-01-01T00:00:00Z".into()),
        runs: vec![run(1, JobState::Running)],
        ..Default::default()
    };
    let jobs = place_with(&spec, &state_with(&spec, rec));
    assert_eq!(get(&jobs, "a").placement, Placement::Running);
    assert!(get(&jobs, "a").launches.is_empty());
    assert_eq!(get(&jobs, "b").placement, Placement::Waiting);
}

#[test]
fn a_preempted_run_is_retried_without_spending_and_the_job_fails_when_failures_spent_them() {
    let spec = spec("sim");
    let rec = JobRecord { runs: vec![run(1, JobState::Preempted)], ..Default::default() };
    let jobs = place_with(&spec, &state_with(&spec, rec));
    let a = get(&jobs, "a");
    assert_eq!((a.placement, a.attempt), (Placement::Launch, 2));
    assert_eq!(a.launches[0].request.env.get(ENV_ATTEMPT).map(String::as_str), Some("2"));

    // A preemption spends no retry (the template has one): a failure spends it, the next ends the job.
    let rec = JobRecord { runs: vec![run(1, JobState::Preempted), run(2, JobState::Failed)], ..Default::default() };
    let jobs = place_with(&spec, &state_with(&spec, rec));
    let a = get(&jobs, "a");
    assert_eq!((a.placement, a.attempt, a.retries_spent), (Placement::Launch, 3, 1));
    let runs = vec![run(1, JobState::Preempted), run(2, JobState::Failed), run(3, JobState::Failed)];
    let jobs = place_with(&spec, &state_with(&spec, JobRecord { runs, ..Default::default() }));
    assert_eq!(get(&jobs, "a").placement, Placement::Failed);
    assert!(get(&jobs, "a").launches.is_empty());
    // Its GPUs are free again: `b` launches.
    assert_eq!(get(&jobs, "b").placement, Placement::Launch);
}

#[test]
fn cancelled_and_succeeded_jobs_are_not_launched() {
    let spec = spec("sim");
    let rec = JobRecord { cancelled: true, ..Default::default() };
    assert_eq!(get(&place_with(&spec, &state_with(&spec, rec)), "a").placement, Placement::Cancelled);
    let rec = JobRecord { runs: vec![run(1, JobState::Succeeded)], ..Default::default() };
    assert_eq!(get(&place_with(&spec, &state_with(&spec, rec)), "a").placement, Placement::Succeeded);
}

#[test]
fn refreshed_statuses_override_the_state_record() {
    let spec = spec("sim");
    let state = state_with(&spec, JobRecord { runs: vec![run(1, JobState::Running)], ..Default::default() });
    let input = PlanInput::offline(&spec, &state);
    let plan = diff::plan(&input).expect("the state's keys are addresses");
    let status = JobStatus {
        id: "j-1".into(),
        job: "job.a".parse().unwrap(),
        node_id: "i-1".into(),
        state: JobState::Preempted,
        attempt: 1,
        message: Some("node reclaimed (spot)".into()),
        started_ms: None,
        finished_ms: None,
        address: None,
    };
    let seen = BTreeMap::from([("j-1".to_string(), status)]);
    let jobs = place(&PlaceInput { spec: &spec, state: &state, plan: &plan, observed: Some(&seen), agents: None });
    let a = get(&jobs, "a");
    assert_eq!(a.runs[0].status, JobState::Preempted);
    assert_eq!((a.placement, a.attempt), (Placement::Launch, 2));
}

mod preemption {
    use super::super::{Victim, choose_victims};
    use crate::providers::Capacity;
    use crate::spec::model::Priority;

    fn v(job: &str, priority: Priority, seen: Option<&str>, run: &str, node: &str, gpus: u32) -> Victim {
        Victim {
            job: format!("job.{job}").parse().unwrap(),
            priority,
            first_seen: seen.map(str::to_string),
            run_id: run.into(),
            node: node.into(),
            gpus,
            capacity: Capacity::Spot,
        }
    }

    fn runs(c: &Option<(Vec<Victim>, Vec<Capacity>)>) -> Vec<&str> {
        c.as_ref().map(|(v, _)| v.iter().map(|v| v.run_id.as_str()).collect()).unwrap_or_default()
    }

    #[test]
    fn lowest_priority_goes_first_then_the_youngest() {
        let cands = vec![
            v("medium_old", Priority::Medium, Some("2026-01-01T00:00:00Z"), "r-med", "n1", 8),
            v("low_old", Priority::Low, Some("2026-01-01T00:00:00Z"), "r-low-old", "n2", 8),
            v("low_young", Priority::Low, Some("2026-02-01T00:00:00Z"), "r-low-young", "n3", 8),
        ];
        // One 8-GPU replica: the youngest of the lowest priority.
        assert_eq!(runs(&choose_victims(cands.clone(), 8, 1)), ["r-low-young"]);
        // Two: both low jobs before the medium one.
        assert_eq!(runs(&choose_victims(cands.clone(), 8, 2)), ["r-low-young", "r-low-old"]);
        // Three: everyone.
        assert_eq!(runs(&choose_victims(cands.clone(), 8, 3)).len(), 3);
        // Four cannot fit: nothing is preempted in vain.
        assert_eq!(choose_victims(cands, 8, 4), None);
    }

    #[test]
    fn a_replica_needs_its_gpus_on_one_node() {
        // Two 4-GPU runs on different nodes do not make room for one 8-GPU replica; two
        // on the same node do, and the run on the other node is left alone.
        let split = vec![v("a", Priority::Low, None, "r1", "n1", 4), v("b", Priority::Low, None, "r2", "n2", 4)];
        assert_eq!(choose_victims(split, 8, 1), None);
        let same = vec![
            v("a", Priority::Low, Some("2026-01-03T00:00:00Z"), "r1", "n1", 4),
            v("b", Priority::Low, Some("2026-01-02T00:00:00Z"), "r2", "n2", 4),
            v("c", Priority::Low, Some("2026-01-01T00:00:00Z"), "r3", "n1", 4),
        ];
        let got = choose_victims(same, 8, 1);
        assert_eq!(runs(&got), ["r1", "r3"]);
        assert_eq!(got.unwrap().1, [Capacity::Spot]);
    }

    #[test]
    fn new_jobs_count_as_the_youngest() {
        let cands = vec![
            v("old", Priority::Low, Some("2026-01-01T00:00:00Z"), "r-old", "n1", 1),
            v("new", Priority::Low, None, "r-new", "n2", 1),
        ];
        assert_eq!(runs(&choose_victims(cands, 1, 1)), ["r-new"]);
    }
}

/// A cloud VM pool with one warm node (`i-1`, 8 GPUs) and room for one more node: the
/// first job runs on the warm node when its agent is online, the second boots a node.
#[test]
fn a_warm_node_whose_agent_is_online_takes_a_job_and_the_next_boots_a_node() {
    let spec = spec("aws");
    let state = state_with(&spec, JobRecord::default());
    let online = BTreeMap::from([("i-1".to_string(), AgentState::Online)]);
    let jobs = place_agents(&spec, &state, &online);
    let a = &get(&jobs, "a").launches[0];
    assert_eq!(a.request.node_id, "i-1");
    assert_eq!(a.request.region, "us-east-1");
    assert!(a.request.shape.is_none() && a.request.keep_node && a.fallback.is_none(), "{a:?}");
    let b = &get(&jobs, "b").launches[0];
    assert!(b.request.shape.is_some() && b.request.node_id.is_empty(), "{b:?}");
    assert!(get(&jobs, "a").warm_skipped.is_empty());

    // The agent is offline: the node is not warm for jobs; `a` boots the one node
    // `nodes.max` allows, `b` waits, and the plan says why the warm node was passed over.
    let offline = BTreeMap::from([("i-1".to_string(), AgentState::Offline("SSM agent ConnectionLost".into()))]);
    let jobs = place_agents(&spec, &state, &offline);
    let a = get(&jobs, "a");
    assert!(a.launches[0].request.shape.is_some());
    assert_eq!(a.warm_skipped, ["i-1: SSM agent ConnectionLost"]);
    assert_eq!(get(&jobs, "b").placement, Placement::Waiting);
    // Without agents (no refresh, or a cloud without run-command): as before, a node each.
    assert!(get(&place_with(&spec, &state), "a").launches[0].request.shape.is_some());
}

/// A job running on the warm node keeps it: the next job boots a node.
#[test]
fn a_busy_warm_node_takes_no_second_job() {
    let spec = spec("aws");
    let mut busy = run(1, JobState::Running);
    busy.id = "i-1/cmd-1".into();
    busy.node_id = "i-1".into();
    busy.gpus = 8;
    let state = state_with(&spec, JobRecord { runs: vec![busy], ..Default::default() });
    let online = BTreeMap::from([("i-1".to_string(), AgentState::Online)]);
    let jobs = place_agents(&spec, &state, &online);
    assert_eq!(get(&jobs, "a").placement, Placement::Running);
    let b = &get(&jobs, "b").launches[0];
    assert!(b.request.shape.is_some(), "{b:?}");
}

/// A run refresh sees stopped (its exit code awaited) is neither relaunched nor a change
/// to the fleet: the plan records the stop once (work for apply, which a standing policy
/// violation never denies), and not again once the state has it.
#[test]
fn a_run_newly_seen_stopped_is_recorded_once_and_changes_nothing_in_the_fleet() {
    let spec = spec("sim");
    let plan_for = |recorded: JobState| {
        let rec = JobRecord { runs: vec![run(1, recorded)], ..Default::default() };
        let state = state_with(&spec, rec);
        let input = PlanInput::offline(&spec, &state);
        let mut plan = diff::plan(&input).expect("the state's keys are addresses");
        let seen = JobStatus {
            id: "j-1".into(),
            job: "job.a".parse().unwrap(),
            node_id: "i-1".into(),
            state: JobState::Stopped,
            attempt: 1,
            message: Some("its node stopped".into()),
            started_ms: None,
            finished_ms: Some(1_767_225_600_000),
            address: None,
        };
        let observed = BTreeMap::from([("j-1".to_string(), seen)]);
        plan.jobs =
            place(&PlaceInput { spec: &spec, state: &state, plan: &plan, observed: Some(&observed), agents: None });
        // The jobs alone: this hand-made state differs from the spec elsewhere.
        plan.changes.clear();
        plan
    };
    let plan = plan_for(JobState::Running);
    let a = get(&plan.jobs, "a");
    assert_eq!((a.placement, a.launches.len()), (Placement::Running, 0), "not relaunched while awaited");
    assert_eq!(a.stopped, ["j-1"]);
    assert!(a.all_stopped());
    assert_eq!(a.runs[0].finished_at.as_deref(), Some("2026-01-01T00:00:00Z"), "the stop, kept as the run's end");
    assert!(!plan.has_changes() && plan.records_stops() && plan.has_work(), "{:?}", a);
    // Once recorded, nothing is left to do until the grace ends.
    let plan = plan_for(JobState::Stopped);
    assert!(get(&plan.jobs, "a").stopped.is_empty());
    assert!(!plan.has_work());
}

/// Multi-node jobs (`jobs::regroup`, `providers::job_env`): one zone, no warm node, the
/// rendezvous in every launch, and the whole job requeued when a replica is lost early.
mod rendezvous {
    use super::*;

    fn multi_node(provider: &str) -> Spec {
        let text = format!(
            "provider \"{provider}\" {{\n  region = \"us-east-1\"\n}}\n\
             gpu_pool \"train\" {{\n  provider = \"{provider}\"\n  zones = [\"us-east-1b\", \"us-east-1a\"]\n  gpu = \"A100-80GB\"\n  gpus_per_node = 8\n  instance_types = [\"p4de.24xlarge\"]\n  nodes {{\n    min = 0\n    desired = 0\n    max = 8\n  }}\n}}\n\
             job_template \"t\" {{\n  image = \"img:1\"\n  gpus = 8\n  retries = 1\n}}\n\
             job \"a\" {{\n  template = job_template.t\n  pool = gpu_pool.train\n  replicas = 3\n}}\n"
        );
        let mut sources = Sources::default();
        sources.add("main.hcl", text);
        let loaded = crate::spec::load_sources(sources, &Default::default());
        assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
        loaded.spec
    }

    fn replica(replica: u32, status: JobState) -> JobRun {
        JobRun {
            replica,
            id: format!("i-{replica}"),
            node_id: format!("i-{replica}"),
            provider: "aws".into(),
            own_node: true,
            address: (replica == 0).then(|| "10.0.3.7".to_string()),
            ..run(1, status)
        }
    }

    fn place_seen(spec: &Spec, state: &State, seen: &[(u32, JobState)]) -> JobPlacement {
        let input = PlanInput::offline(spec, state);
        let plan = diff::plan(&input).expect("the state's keys are addresses");
        let seen: BTreeMap<String, JobStatus> = seen
            .iter()
            .map(|(r, s)| {
                let status = JobStatus {
                    id: format!("i-{r}"),
                    job: "job.a".parse().unwrap(),
                    node_id: format!("i-{r}"),
                    state: *s,
                    attempt: 1,
                    message: None,
                    started_ms: None,
                    finished_ms: None,
                    address: None,
                };
                (status.id.clone(), status)
            })
            .collect();
        let jobs = place(&PlaceInput { spec, state, plan: &plan, observed: Some(&seen), agents: None });
        get(&jobs, "a").clone()
    }

    #[test]
    fn a_new_multi_node_job_launches_every_replica_in_the_first_zone_with_its_rank() {
        let spec = multi_node("aws");
        let a = place_with(&spec, &State::new(LINEAGE.into()));
        let a = get(&a, "a");
        assert_eq!(a.launches.len(), 3);
        for (i, l) in a.launches.iter().enumerate() {
            let shape = l.request.shape.as_ref().expect("a node made for it");
            assert_eq!(shape.zone, "us-east-1b", "every replica in the pool's first zone");
            assert_eq!(l.request.env["GPUPLAN_NODE_RANK"], i.to_string());
            assert_eq!(l.request.env["GPUPLAN_NNODES"], "3");
            assert_eq!(l.request.env["GPUPLAN_MASTER_PORT"], "29500");
            assert!(!l.request.env.contains_key("GPUPLAN_MASTER_ADDR"), "apply sets it from replica 0's launch");
        }
    }

    #[test]
    fn a_replica_lost_before_the_rest_started_requeues_the_whole_job_without_a_retry() {
        let spec = multi_node("aws");
        let runs = vec![replica(0, JobState::Running), replica(1, JobState::Queued), replica(2, JobState::Queued)];
        let state = state_with(&spec, JobRecord { runs, ..Default::default() });
        let a = place_seen(&spec, &state, &[(0, JobState::Running), (1, JobState::Preempted), (2, JobState::Queued)]);
        let g = a.regroup.as_ref().expect("requeued whole");
        assert_eq!((g.lost, g.stops.clone()), (1, vec!["i-0".to_string(), "i-2".to_string()]));
        assert_eq!(a.placement, Placement::Launch);
        let attempts: Vec<(u32, u32)> = a.launches.iter().map(|l| (l.replica, l.attempt())).collect();
        assert_eq!(attempts, [(0, 2), (1, 2), (2, 2)]);
        assert_eq!(a.retries_spent, 0);
        // Replica 0 launches again: its old address is no one's rendezvous.
        assert!(a.launches.iter().all(|l| !l.request.env.contains_key("GPUPLAN_MASTER_ADDR")), "{:?}", a.launches);
    }

    #[test]
    fn a_replica_failed_for_good_launches_none_of_the_others_again() {
        let spec = multi_node("aws");
        let failed = |attempt: u32| JobRun { attempt, id: format!("i-1-{attempt}"), ..replica(1, JobState::Failed) };
        let runs = vec![replica(0, JobState::Queued), failed(1), failed(2), replica(2, JobState::Queued)];
        let state = state_with(&spec, JobRecord { runs, ..Default::default() });
        let a = place_seen(&spec, &state, &[(0, JobState::Queued), (2, JobState::Queued)]);
        assert_eq!(a.regroup.as_ref().map(|g| g.stops.clone()), Some(vec!["i-0".to_string(), "i-2".to_string()]));
        assert!(a.launches.is_empty(), "{:?}", a.launches);
        assert_eq!(a.placement, Placement::Failed);
    }

    #[test]
    fn a_replica_failed_after_all_started_relaunches_alone_on_replica_0s_address() {
        let spec = multi_node("aws");
        let runs = vec![replica(0, JobState::Running), replica(1, JobState::Running), replica(2, JobState::Running)];
        let state = state_with(&spec, JobRecord { runs, ..Default::default() });
        let a = place_seen(&spec, &state, &[(0, JobState::Running), (1, JobState::Running), (2, JobState::Failed)]);
        assert_eq!(a.regroup, None);
        assert_eq!(a.launches.len(), 1);
        assert_eq!(a.launches[0].replica, 2);
        assert_eq!(a.launches[0].request.env["GPUPLAN_MASTER_ADDR"], "10.0.3.7");
        assert_eq!(a.retries_spent, 1);
    }
}
