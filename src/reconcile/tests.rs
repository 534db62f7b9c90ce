//! Passes against the sim cloud on a paused tokio clock: time moves only when the test
//! advances it, so "waited 6 minutes" and "idle for 20 minutes" take no real time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::addr::{Address, Kind};
use crate::apply::progress::Quiet;
use crate::apply::{ApplyOptions, Cancel};
use crate::autoscale::Direction;
use crate::autoscale::Waiting;
use crate::engine::Workspace;
use crate::providers::sim::{SimCloud, SimConfig, SimProvider};
use crate::providers::{JobPort, LaunchJob, Node};
use crate::spec::{LoadOptions, Spec};

const SPEC: &str = r#"
provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "L4"
  gpus_per_node  = 1
  instance_types = ["g6.xlarge"]

  nodes {
    min     = 1
    desired = 1
    max     = 3
  }
}

autoscaler "train" {
  pool       = gpu_pool.train
  queue_wait = "5m"
  idle_for   = "15m"
  step       = 1
  cooldown   = "5m"
}
"#;

const MIN: Duration = Duration::from_secs(60);

struct Fixture {
    _dir: tempfile::TempDir,
    ws: Workspace,
    spec: Spec,
    opts: Options,
    queue: Arc<Mutex<Vec<Waiting>>>,
}

impl Fixture {
    fn new(spec: &str) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("main.hcl"), spec).expect("write spec");
        let loaded = crate::spec::load_dir(dir.path(), &LoadOptions::default()).expect("spec loads");
        assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
        let env: BTreeMap<String, String> = [("GPUPLAN_SIM_JOB_DURATION".to_string(), "10h".to_string())].into();
        let ws = Workspace {
            dir: dir.path().to_path_buf(),
            state_path: dir.path().join("state/default.json"),
            env: env.clone(),
            lock_timeout: Duration::ZERO,
            workspace: "default".into(),
            backend: None,
            encryption: None,
            read_only: false,
        };
        let opts = Options {
            plan: PlanRequest { refresh: true, env, ..PlanRequest::default() },
            dry_run: false,
            max_destroy: None,
            apply: ApplyOptions { parallelism: 4, progress: Arc::new(Quiet), cancel: Arc::new(Cancel::default()) },
        };
        Fixture { _dir: dir, ws, spec: loaded.spec, opts, queue: Arc::default() }
    }

    async fn pass(&self, clock: &Clock) -> Pass {
        let queue = self.queue.clone();
        let q = move |_: &Spec, _: &State, _: SystemTime| queue.lock().expect("queue").clone();
        pass(&self.ws, &self.spec, &self.opts, &q, clock).await.expect("pass runs")
    }

    /// The sim cloud, opened between passes (a pass releases it).
    fn cloud(&self) -> Arc<SimCloud> {
        let config = SimConfig { job_duration: Duration::from_secs(36_000), ..SimConfig::default() };
        SimCloud::open_with_timeout(&self.ws.sim_path(), config, Duration::from_secs(5)).expect("sim opens")
    }

    /// A ten-hour job on `node`.
    async fn run_job(&self, node: &str) {
        let sim = SimProvider::new(self.cloud());
        let job = LaunchJob {
            job: Address::new(Kind::Job, "sweep"),
            pool: pool(),
            node_id: node.to_string(),
            region: String::new(),
            image: "img".into(),
            command: vec![],
            env: BTreeMap::new(),
            secrets: Default::default(),
            gpus: 1,
            attempt: 1,
            token: format!("t-{node}"),
            shape: None,
            max_runtime_secs: None,
            keep_node: true,
            kube: None,
            readiness: Default::default(),
        };
        sim.launch_job(&job).await.expect("job launches");
    }

    fn live(&self) -> Vec<Node> {
        self.cloud().nodes().into_iter().filter(|n| n.is_live()).collect()
    }
}

fn pool() -> Address {
    Address::new(Kind::GpuPool, "train")
}

fn decision(p: &Pass) -> &PoolDecision {
    p.decisions.iter().find(|d| d.pool == pool()).expect("a verdict for gpu_pool.train")
}

#[tokio::test(start_paused = true)]
async fn scale_up_on_queue_wait_then_down_when_idle_on_a_paused_clock() {
    let fx = Fixture::new(SPEC);
    let clock = Clock::start();

    let first = fx.pass(&clock).await;
    assert_eq!(first.outcome, Outcome::Applied);
    assert_eq!(fx.live().len(), 1);

    // A job needing a node waits; after 4 minutes nothing happens, after 6 the pool grows.
    fx.queue.lock().unwrap().push(Waiting {
        job: Address::new(Kind::Job, "sweep"),
        pool: pool(),
        gpus: 1,
        since: clock.now(),
    });
    tokio::time::advance(4 * MIN).await;
    let early = fx.pass(&clock).await;
    assert_eq!(early.outcome, Outcome::NoChanges, "{:?}", early.decisions);
    assert_eq!(decision(&early).action, Direction::Hold);
    tokio::time::advance(2 * MIN).await;
    let up = fx.pass(&clock).await;
    assert_eq!(up.outcome, Outcome::Applied);
    let d = decision(&up);
    assert_eq!((d.action, d.from, d.to, d.applied), (Direction::Up, 1, 2, true), "{d:?}");
    assert!(d.reason.contains("1 job waited > 5m"), "{d:?}");
    let change = up.plan.changes.iter().find(|c| c.address == pool()).expect("pool change");
    assert!(change.reasons.iter().any(|r| r.code == "autoscale" && r.message == "autoscale: 1 job waited > 5m"));
    assert_eq!(fx.live().len(), 2);

    // Within the cooldown the job still waits, but the autoscaler holds.
    let cooling = fx.pass(&clock).await;
    assert!(decision(&cooling).reason.contains("cooldown"), "{:?}", decision(&cooling));
    assert_eq!(fx.live().len(), 2);

    // The job lands on the first node; the queue empties. 20 minutes later the other node
    // has been idle longer than idle_for: it goes, the busy one stays.
    let busy = fx.live()[0].id.clone();
    fx.run_job(&busy).await;
    fx.queue.lock().unwrap().clear();
    tokio::time::advance(20 * MIN).await;
    let down = fx.pass(&clock).await;
    assert_eq!(down.outcome, Outcome::Applied, "{:?}", down.decisions);
    let d = decision(&down);
    assert_eq!((d.action, d.from, d.to), (Direction::Down, 2, 1), "{d:?}");
    assert!(d.reason.contains("idle > 15m"), "{d:?}");
    let live = fx.live();
    assert_eq!(live.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), vec![busy.as_str()], "the busy node stays");

    let state = crate::state::LocalBackend::new(&fx.ws.state_path).read().unwrap().unwrap();
    let record = &state.autoscale["gpu_pool.train"];
    assert_eq!((record.from, record.to, record.reason.as_str()), (2, 1, "1 node idle > 15m"));

    // Now the only node is busy: 100% utilization is above 80%, so once the cooldown is
    // over the pool grows again.
    let cooling = fx.pass(&clock).await;
    assert_eq!(cooling.outcome, Outcome::NoChanges, "{:?}", cooling.decisions);
    tokio::time::advance(5 * MIN).await;
    let hot = fx.pass(&clock).await;
    let d = decision(&hot);
    assert_eq!((d.action, d.to, d.reason.as_str()), (Direction::Up, 2, "utilization 100% > 80%"), "{d:?}");
}

#[tokio::test(start_paused = true)]
async fn the_autoscalers_count_is_what_plan_converges_to_and_not_drift() {
    let fx = Fixture::new(SPEC);
    let clock = Clock::start();
    fx.pass(&clock).await;
    fx.queue.lock().unwrap().push(Waiting {
        job: Address::new(Kind::Job, "j"),
        pool: pool(),
        gpus: 1,
        since: clock.now(),
    });
    tokio::time::advance(6 * MIN).await;
    assert_eq!(decision(&fx.pass(&clock).await).to, 2);

    // A plain plan (no autoscaling) keeps 2 nodes although the spec says desired = 1.
    let session = crate::engine::open_session(&fx.ws, "plan").unwrap();
    let providers = crate::engine::providers::build(&fx.ws, &fx.spec, &session.state).unwrap();
    let plan = run::plan(&fx.spec, &session, &providers, &fx.opts.plan).await.unwrap();
    assert!(!plan.has_changes(), "{:#?}", plan.changes);
    assert!(plan.drift.is_empty(), "{:#?}", plan.drift);
    drop((session, providers));

    // Out-of-band termination: the next pass restores the autoscaler's 2, not the spec's 1.
    let victim = fx.live()[1].id.clone();
    fx.cloud().terminate_out_of_band(&victim).unwrap();
    let fix = fx.pass(&clock).await;
    assert_eq!(fix.outcome, Outcome::Applied);
    assert_eq!(fix.plan.drift.len(), 1, "{:?}", fix.plan.drift);
    assert_eq!(fx.live().len(), 2);
    // `--json` streams the pass; its bytes are the tree's, keys sorted at every level.
    let mut streamed = Vec::new();
    super::report::write_json(&fix, &mut streamed).unwrap();
    assert_eq!(String::from_utf8(streamed).unwrap(), format!("{}\n", super::report::json(&fix)));
}

#[tokio::test(start_paused = true)]
async fn quota_and_budget_hold_a_step_the_policy_would_deny() {
    let spec = SPEC.replace("desired = 1", "desired = 2")
        + "\nquota \"ml\" {\n  pools    = [gpu_pool.train]\n  max_gpus = 2\n}\n";
    let fx = Fixture::new(&spec);
    let clock = Clock::start();
    fx.pass(&clock).await;
    for n in fx.live() {
        fx.run_job(&n.id).await;
    }
    let full = fx.pass(&clock).await;
    assert_eq!(full.outcome, Outcome::NoChanges, "{:?}", full.decisions);
    let d = decision(&full);
    assert_eq!(d.action, Direction::Hold);
    assert_eq!(d.reason, "utilization 100% > 80%, but the quota allows no more nodes");

    // A budget of 2 USD/h over a pool at about 1.61 USD/h leaves no room for a 0.80 node.
    let spec = SPEC.replace("desired = 1", "desired = 2")
        + "\nquota \"ml\" {\n  pools = [gpu_pool.train]\n  budget {\n    hourly_usd = 2\n  }\n}\n";
    let fx = Fixture::new(&spec);
    fx.pass(&clock).await;
    for n in fx.live() {
        fx.run_job(&n.id).await;
    }
    let d = fx.pass(&clock).await.decisions.remove(0);
    assert_eq!(d.reason, "utilization 100% > 80%, but the budget allows no more nodes");
    assert_eq!(fx.live().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_step_a_policy_denies_is_held_and_the_rest_of_the_plan_applies() {
    let mut fx = Fixture::new(&SPEC.replace("desired = 1", "desired = 2"));
    let policy = "policy \"cap\" {\n  enforcement = \"hard\"\n  assert      = plan.cost.hourly_after <= 2\n  message     = \"too expensive\"\n}\n";
    let mut sources = crate::diag::Sources::default();
    let mut diags = crate::diag::Diagnostics::default();
    let id = sources.add("cap.hcl", policy);
    fx.opts.plan.policies = crate::policy::load::parse(id, policy, &sources, &mut diags);
    assert!(!diags.has_errors() && fx.opts.plan.policies.len() == 1, "{:?}", diags.items);
    let clock = Clock::start();
    fx.pass(&clock).await;
    let nodes = fx.live();
    for n in &nodes {
        fx.run_job(&n.id).await;
    }
    // A node lost outside gpuplan, and 100% utilization: the step to 3 nodes (~2.4 USD/h)
    // breaks the cap, restoring the lost node (~1.6 USD/h) does not.
    fx.cloud().terminate_out_of_band(&nodes[1].id).unwrap();
    let p = fx.pass(&clock).await;
    assert_eq!(p.outcome, Outcome::Applied, "{:?}", p.decisions);
    let d = decision(&p);
    assert_eq!((d.action, d.applied), (Direction::Hold, false), "{d:?}");
    assert!(d.reason.ends_with("but the plan with this step is denied by policy"), "{d:?}");
    assert_eq!(fx.live().len(), 2);
}

/// The jobs engine feeds the autoscaler: a job the plan's admission leaves waiting for
/// capacity (two replicas, one single-GPU node) grows the pool once it has waited longer
/// than `queue_wait`, and then launches on the new node.
#[tokio::test(start_paused = true)]
async fn a_job_waiting_for_capacity_scales_the_pool_up_and_then_launches() {
    let spec = format!(
        "{SPEC}\n{}",
        r#"
job_template "sweep" {
  image = "img"
  gpus  = 1
}

job "sweep" {
  template = job_template.sweep
  pool     = gpu_pool.train
  replicas = 2
}
"#
    );
    let fx = Fixture::new(&spec);
    let clock = Clock::start();

    let first = fx.pass(&clock).await;
    assert_eq!(first.outcome, Outcome::Applied, "{:?}", first.decisions);
    let job = first.plan.jobs.iter().find(|j| j.address == Address::new(Kind::Job, "sweep")).expect("job placed");
    assert_eq!(job.placement, crate::jobs::model::Placement::Waiting, "{job:?}");
    assert_eq!(job.reason.as_ref().map(|r| r.code.as_str()), Some("capacity"), "{job:?}");
    assert_eq!(first.queued.get(&pool()).copied(), Some(2), "both replicas queue: {:?}", first.queued);
    assert_eq!(fx.live().len(), 1);

    tokio::time::advance(2 * MIN).await;
    let early = fx.pass(&clock).await;
    assert_eq!(decision(&early).action, Direction::Hold, "{:?}", decision(&early));

    tokio::time::advance(4 * MIN).await;
    let up = fx.pass(&clock).await;
    let d = decision(&up);
    assert_eq!((d.action, d.from, d.to, d.applied), (Direction::Up, 1, 2, true), "{d:?}");
    assert!(d.reason.contains("waited > 5m"), "{d:?}");
    assert_eq!(fx.live().len(), 2);
    let job = up.plan.jobs.iter().find(|j| j.address == Address::new(Kind::Job, "sweep")).expect("job placed");
    assert_eq!(job.launches.len(), 2, "the scaled plan admits the job: {job:?}");
}

/// The Lease stores whole seconds (`leaseDurationSeconds`): a duration with a fraction is
/// rounded up once, and the deadlines this replica keeps derive from the same value as
/// the one it writes (1.9 s used to be written as 1 s while the leader kept 1.9 s).
#[test]
fn lease_durations_are_whole_seconds_rounded_up_everywhere_alike() {
    use crate::reconcile::leader::LeaseConfig;
    let cfg = |d| LeaseConfig::new("gpuplan".into(), None, "r0".into(), d);
    let odd = cfg(Duration::from_millis(1900));
    assert_eq!(odd.duration(), Duration::from_secs(2));
    assert_eq!(odd.renew_deadline(), Duration::from_secs(2).mul_f64(2.0 / 3.0));
    assert_eq!(odd.retry(), Duration::from_millis(250));
    assert_eq!(cfg(Duration::from_secs(15)).renew_deadline(), Duration::from_secs(10));
    assert_eq!(cfg(Duration::from_millis(300)).duration(), Duration::from_secs(1), "at least a second");
}

/// After a change kept a spot node in us-east-1a and added on-demand nodes in 1b and 1c
/// (not the usual layout), scaling down by one idle node is still possible: the
/// autoscaler counts in the layout the planner will choose, so it removes the idle
/// on-demand node in 1c and keeps the busy one in 1b and the spot node.
#[test]
fn the_autoscaler_scales_down_in_the_layout_the_planner_keeps() {
    use crate::autoscale::{Decision, Limits, NodeSignal, Rules, Signals};
    use crate::providers::Capacity;
    let shape = crate::plan::shape::PoolShape {
        provider: "sim".into(),
        provider_kind: crate::spec::model::ProviderKind::Sim,
        region: "us-east-1".into(),
        zones: vec!["us-east-1a".into(), "us-east-1b".into(), "us-east-1c".into()],
        gpu: "L4".into(),
        gpus_per_node: 1,
        instance_types: vec!["g6.xlarge".into()],
        image: None,
        max_spot_price: None,
        hardware: None,
        cluster_placement: false,
        reserved: None,
    };
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(86_400);
    let node = |id: &str, zone: &str, capacity, busy: bool| NodeSignal {
        id: id.into(),
        zone: zone.into(),
        capacity,
        busy,
        idle_since: (!busy).then(|| now - 60 * MIN),
    };
    let signals = Signals {
        nodes: vec![
            node("spot-a", "us-east-1a", Capacity::Spot, false),
            node("od-b", "us-east-1b", Capacity::OnDemand, true),
            node("od-c", "us-east-1c", Capacity::OnDemand, false),
        ],
        usage_known: true,
        queued: vec![],
    };
    let rules = Rules { queue_wait: 5 * MIN, utilization_above: 90, idle_for: 15 * MIN, step: 1, cooldown: 5 * MIN };
    let limits = Limits { current: 3, min: 1, max: 3, gpus_per_node: 1, spot_percent: 50, ..Limits::default() };
    let decide = |fell_back: bool| {
        let layout = signals::planner_layout(&shape, (0, 50), &signals, (rules.idle_for, now), fell_back);
        crate::autoscale::decide(&rules, &limits, &signals, None, now, &layout)
    };
    match decide(false) {
        Decision::Down { to, remove, .. } => assert_eq!((to, remove), (2, vec!["od-c".to_string()])),
        other => panic!("expected a scale-down, got {other:?}"),
    }
    // In the usual layout (a pool that fell back) 2 nodes are on-demand in 1a and spot in
    // 1b: every node would have to go, the busy one too, so the autoscaler holds.
    assert!(matches!(decide(true), Decision::Hold { .. }), "{:?}", decide(true));
}

/// What the loop does after each kind of failed pass (`runner::error_policy`).
mod error_policy {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::super::ReconcileError;
    use super::super::runner::{Next, error_policy};
    use crate::engine::providers::ProviderSetupError;
    use crate::engine::run::RunError;
    use crate::model::{ErrorClass, ProviderError};
    use crate::state::StateError;
    use crate::state::fence::Broken;

    fn policy(e: impl Into<ReconcileError>) -> Next {
        error_policy(&e.into())
    }

    fn broken(lost: bool) -> Broken {
        Broken {
            what: "lease `gpuplan/reconcile`".into(),
            lost,
            taken_by: None,
            unrenewed_for: Duration::from_secs(20),
            valid_for: Duration::from_secs(15),
            failure: None,
        }
    }

    #[test]
    fn a_held_lock_skips_the_round() {
        let locked =
            StateError::Locked { path: PathBuf::from("state/default.json"), holder: None, waited: Duration::ZERO };
        assert_eq!(policy(locked), Next::Skip);
    }

    #[test]
    fn a_lost_lock_or_lease_stands_down() {
        let lost = RunError::LockLost { broken: broken(true), not_started: vec!["gpu_pool.a".into()], saved: None };
        assert_eq!(policy(lost), Next::StandDown);
        assert_eq!(policy(StateError::Fenced { broken: broken(true) }), Next::StandDown);
        // Lapsed with no new holder: it may hold again after a renewal, but not in this pass.
        assert_eq!(policy(StateError::Fenced { broken: broken(false) }), Next::StandDown);
        assert_eq!(policy(StateError::LockLost { path: PathBuf::from("state/default.json") }), Next::StandDown);
    }

    #[test]
    fn a_cloud_or_store_that_did_not_answer_is_retried() {
        let error = ProviderError::new(ErrorClass::Throttled, "RequestLimitExceeded", "slow down");
        assert_eq!(policy(RunError::Refresh { provider: "aws".into(), error }), Next::Retry);
        let remote = StateError::Remote {
            action: "read",
            url: "s3://bucket/state".into(),
            message: "connection reset".into(),
            hint: String::new(),
        };
        assert_eq!(policy(remote), Next::Retry);
        assert_eq!(policy(RunError::Journal("disk full".into())), Next::Retry);
    }

    #[test]
    fn what_needs_a_person_alerts() {
        assert_eq!(policy(RunError::Setting("GPUPLAN_CNY_PER_USD is not a number".into())), Next::Alert);
        let setup = ProviderSetupError::Unavailable { name: "gcp".into(), kind: "gcp".into() };
        assert_eq!(error_policy(&ReconcileError::Providers(setup)), Next::Alert);
    }
}

/// A pass plans through the same two calls as `gpuplan plan`: with the fleet as it
/// stands, the pass's plan is the command's (less the spend the command shows), and
/// composing twice from one observation gives one plan.
#[tokio::test(start_paused = true)]
async fn a_pass_and_a_plan_go_through_one_gather_and_one_compose() {
    let fx = Fixture::new(SPEC);
    let clock = Clock::start();
    assert_eq!(fx.pass(&clock).await.outcome, Outcome::Applied);
    let pass = fx.pass(&clock).await;
    assert_eq!(pass.outcome, Outcome::NoChanges);
    let session = crate::engine::open_session(&fx.ws, "plan").unwrap();
    let providers = crate::engine::providers::build(&fx.ws, &fx.spec, &session.state).unwrap();
    let mut plan = run::plan(&fx.spec, &session, &providers, &fx.opts.plan).await.unwrap();
    plan.spend = None;
    assert_eq!(*pass.plan, plan);
    let req = &fx.opts.plan;
    let obs = crate::engine::gather(&fx.spec, &session.state, &providers, req, &Hints::default()).await.unwrap();
    assert_eq!(obs.nodes.as_ref().map(Vec::len), Some(1));
    let composed = crate::engine::compose(&fx.spec, &session.state, &obs, req).unwrap();
    assert_eq!(composed, crate::engine::compose(&fx.spec, &session.state, &obs, req).unwrap());
    assert_eq!(composed.changes, plan.changes);
    assert!(composed.spec_digest.is_empty(), "the digest is the keeper's to add");
}
