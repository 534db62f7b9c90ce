use super::*;
use crate::diag::Sources;
use crate::jobs::place::{PlaceInput, place, token};
use crate::model::Placement;
use crate::plan::diff::{self, PlanInput};
use crate::providers::{Capacity, NodeState, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, Tags};

const LINEAGE: &str = "00000000-0000-4000-8000-000000000000";

fn spec() -> Spec {
    let text = r#"
provider "aws" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider       = "aws"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  nodes {
    min     = 0
    desired = 0
    max     = 4
  }
}

job_template "t" {
  image   = "img:1"
  gpus    = 8
  retries = 0
}

job "a" {
  template = job_template.t
  pool     = gpu_pool.train
  replicas = 2
}
"#;
    let mut sources = Sources::default();
    sources.add("main.hcl", text.to_string());
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    loaded.spec
}

/// A job node as `list_job_nodes` reports it.
fn node(id: &str, job: &str, replica: u32, attempt: u32, state: NodeState) -> Listed {
    let tags: Tags = [
        (TAG_MANAGED, "true".to_string()),
        (TAG_LINEAGE, LINEAGE.to_string()),
        (TAG_ADDRESS, "gpu_pool.train".to_string()),
        (TAG_JOB, job.to_string()),
        (TAG_REPLICA, replica.to_string()),
        (TAG_ATTEMPT, attempt.to_string()),
    ]
    .into_iter()
    .collect();
    Listed {
        provider: "aws".into(),
        region: "us-east-1".into(),
        node: Node {
            provider: None,
            id: id.into(),
            pool: "gpu_pool.train".parse().unwrap(),
            instance_type: "p4de.24xlarge".into(),
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            capacity: Capacity::OnDemand,
            state,
            image: None,
            tags,
        },
    }
}

fn job_a() -> Address {
    "job.a".parse().unwrap()
}

fn place_jobs(spec: &Spec, state: &State) -> Vec<crate::model::JobPlacement> {
    let input = PlanInput::offline(spec, state);
    let plan = diff::plan(&input).expect("the state's keys are addresses");
    place(&PlaceInput { spec, state, plan: &plan, observed: None, agents: None })
}

#[test]
fn an_unrecorded_live_node_of_a_declared_job_is_adopted_as_its_run_and_not_relaunched() {
    let spec = spec();
    let state = State::new(LINEAGE.into());
    let sorted = sort(&spec, &state, vec![node("i-1", "job.a", 1, 1, NodeState::Running)], false);
    assert!(sorted.orphans.is_empty(), "{:?}", sorted.orphans);
    let runs = &sorted.adopted[&job_a()];
    assert_eq!((runs[0].replica, runs[0].attempt, runs[0].id.as_str()), (1, 1, "i-1"));
    assert!(runs[0].is_active() && runs[0].own_node, "{runs:?}");
    let planned = with_adopted(&state, &sorted.adopted).expect("a state with the adopted run");
    let jobs = place_jobs(&spec, &planned);
    let a = &jobs[0];
    assert_eq!(a.launches.iter().map(|l| l.replica).collect::<Vec<_>>(), [0], "only replica 0 launches");
    assert!(a.runs.iter().any(|r| r.id == "i-1"), "{:?}", a.runs);
}

#[test]
fn nodes_of_undeclared_jobs_of_recorded_attempts_and_of_cancelled_jobs_are_orphans() {
    let spec = spec();
    let mut state = State::new(LINEAGE.into());
    let listed = [
        node("i-gone-job", "job.removed", 0, 1, NodeState::Running),
        node("i-replica-9", "job.a", 9, 1, NodeState::Running),
        node("i-untagged", "job.a", 0, 1, NodeState::Running),
    ];
    let mut untagged = listed[2].clone();
    untagged.node.tags.remove(TAG_REPLICA);
    let sorted = sort(&spec, &state, vec![listed[0].clone(), listed[1].clone(), untagged], false);
    assert!(sorted.adopted.is_empty(), "{:?}", sorted.adopted);
    assert_eq!(sorted.orphans.len(), 3);

    // Replica 0 attempt 1 is recorded on another node: a second node of it is a duplicate.
    let adopted = sort(&spec, &state, vec![node("i-a", "job.a", 0, 1, NodeState::Running)], false).adopted;
    state = with_adopted(&state, &adopted).unwrap();
    let sorted = sort(
        &spec,
        &state,
        vec![node("i-a", "job.a", 0, 1, NodeState::Running), node("i-b", "job.a", 0, 1, NodeState::Running)],
        false,
    );
    assert!(sorted.adopted.is_empty(), "the recorded node is owned, the other a duplicate");
    assert_eq!(sorted.orphans.iter().map(|o| o.node.id.as_str()).collect::<Vec<_>>(), ["i-b"]);

    // A cancelled job adopts nothing.
    let rec = state.resources.get_mut("job.a").and_then(|r| r.job.as_mut()).unwrap();
    rec.cancelled = true;
    let sorted = sort(&spec, &state, vec![node("i-c", "job.a", 1, 1, NodeState::Running)], false);
    assert!(sorted.adopted.is_empty() && sorted.orphans.len() == 1);
}

/// The crash left a node that is gone by the next plan (terminated, say): relaunching
/// the same attempt would send its token again and get the gone node back. It is
/// adopted as an ended run that spent no retry, and the replica relaunches as the next
/// attempt under a new token.
#[test]
fn a_gone_unrecorded_node_makes_the_relaunch_the_next_attempt_with_a_new_token() {
    let spec = spec();
    let state = State::new(LINEAGE.into());
    let sorted = sort(&spec, &state, vec![node("i-1", "job.a", 0, 1, NodeState::Terminated)], false);
    assert!(sorted.orphans.is_empty(), "a gone node needs no terminating");
    let runs = &sorted.adopted[&job_a()];
    assert_eq!(runs[0].status, JobState::Preempted, "{runs:?}");
    assert!(!runs[0].spends_retry(), "the loss is not the job's failure");
    let planned = with_adopted(&state, &sorted.adopted).unwrap();
    let a = &place_jobs(&spec, &planned)[0];
    assert_eq!(a.placement, Placement::Launch, "{a:?}");
    let r0 = a.launches.iter().find(|l| l.replica == 0).expect("replica 0 relaunches");
    assert_eq!(r0.request.attempt, 2);
    assert_ne!(r0.request.token, token(LINEAGE, &job_a(), "s0", 0, 1), "never the gone node's token");
    assert_eq!(r0.request.token, token(LINEAGE, &job_a(), "s0", 0, 2));
    // Without the adoption the relaunch would be attempt 1 again, with the gone node's token.
    let blind = &place_jobs(&spec, &state)[0];
    let r0 = blind.launches.iter().find(|l| l.replica == 0).unwrap();
    assert_eq!(r0.request.token, token(LINEAGE, &job_a(), "s0", 0, 1));
}

#[test]
fn destroy_adopts_nothing_and_sweeps_every_live_job_node() {
    let spec = spec();
    let state = State::new(LINEAGE.into());
    let listed =
        vec![node("i-1", "job.a", 0, 1, NodeState::Running), node("i-2", "job.a", 1, 1, NodeState::Terminated)];
    let sorted = sort(&spec, &state, listed, true);
    assert!(sorted.adopted.is_empty());
    assert_eq!(sorted.orphans.iter().map(|o| o.node.id.as_str()).collect::<Vec<_>>(), ["i-1"]);
}
