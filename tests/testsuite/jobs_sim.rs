//! Jobs on the embedded sim cloud through the library: admission in the plan, launches on
//! apply, status on refresh, and preemption recovery. The sim's job duration is set in the
//! provider block, so nothing here waits on a clock.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use gpuplan::addr::{Address, Kind};
use gpuplan::apply::progress::Quiet;
use gpuplan::apply::{ApplyOptions, Cancel, ProviderSet};
use gpuplan::engine::run::PlanRequest;
use gpuplan::engine::{self, Session, Workspace};
use gpuplan::jobs::{JobPlacement, Placement};
use gpuplan::plan::Plan;
use gpuplan::providers::sim::{SimCloud, SimProvider};
use gpuplan::providers::{
    Capacity, JobPort, JobState, JobStatus, LaunchJob, NodePort, PricePort, Provider, ProviderError,
};
use gpuplan::spec::model::ProviderKind;
use gpuplan::spec::{self, LoadOptions, Spec};

fn spec_text(duration: &str, retries: u32, fallback: &str) -> String {
    format!(
        r#"
provider "sim" {{
  region       = "us-east-1"
  job_duration = "{duration}"
}}

gpu_pool "train" {{
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  nodes {{
    min     = 0
    desired = 2
    max     = 4
  }}
  mix {{
    on_demand_base = 1
    spot_percent   = 100
    fallback       = "{fallback}"
  }}
}}

job_template "finetune" {{
  image          = "ghcr.io/example/finetune:1.4"
  command        = ["python", "train.py"]
  gpus           = 8
  priority       = "high"
  preemptible    = true
  retries        = {retries}
  checkpoint_uri = "s3://ckpt/finetune"
}}

job "ft" {{
  template = job_template.finetune
  pool     = gpu_pool.train
  args     = ["--resume"]
}}
"#
    )
}

/// The sim provider, recording every launch request it is sent.
struct Recording {
    inner: SimProvider,
    launches: Mutex<Vec<LaunchJob>>,
}

/// The sim cloud's own ports, but its jobs' launches recorded on the way.
#[async_trait]
impl Provider for Recording {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Sim
    }
    fn nodes(&self) -> Option<&dyn NodePort> {
        self.inner.nodes()
    }
    fn prices(&self) -> Option<&dyn PricePort> {
        self.inner.prices()
    }
    fn jobs(&self) -> Option<&dyn JobPort> {
        Some(self)
    }
}

#[async_trait]
impl JobPort for Recording {
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        self.launches.lock().unwrap().push(req.clone());
        self.inner.launch_job(req).await
    }
    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.inner.job_status(region, id).await
    }
    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        self.inner.cancel_job(region, id).await
    }
}

struct World {
    _dir: tempfile::TempDir,
    spec: Spec,
    session: Session,
    providers: ProviderSet,
    cloud: Arc<SimCloud>,
    recording: Arc<Recording>,
}

fn world(text: &str) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.hcl"), text).expect("write spec");
    let spec = load(dir.path());
    let ws = Workspace {
        dir: dir.path().to_path_buf(),
        state_path: dir.path().join("state/default.json"),
        env: BTreeMap::new(),
        lock_timeout: Duration::from_secs(5),
        workspace: "default".into(),
        backend: None,
        encryption: None,
        read_only: false,
    };
    let session = engine::open_session(&ws, "test").expect("open the state");
    let cloud = engine::providers::open_sim(&ws, spec.providers.get("sim")).expect("open the sim cloud");
    let recording = Arc::new(Recording { inner: SimProvider::new(cloud.clone()), launches: Mutex::new(Vec::new()) });
    let providers: ProviderSet = BTreeMap::from([("sim".to_string(), recording.clone() as Arc<dyn Provider>)]);
    World { _dir: dir, spec, session, providers, cloud, recording }
}

fn load(dir: &Path) -> Spec {
    let loaded = spec::load_dir(dir, &LoadOptions::default()).expect("read the spec");
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    loaded.spec
}

impl World {
    async fn plan(&self) -> Plan {
        let req = PlanRequest { refresh: true, ..PlanRequest::default() };
        let plan = engine::run::plan(&self.spec, &self.session, &self.providers, &req).await.expect("plan");
        assert!(plan.errors.is_empty(), "{:?}", plan.errors);
        plan
    }

    async fn apply(&mut self, plan: Plan) {
        let opts = ApplyOptions { parallelism: 4, progress: Arc::new(Quiet), cancel: Arc::new(Cancel::default()) };
        let report =
            engine::run::apply(&mut self.session, Arc::new(plan), &self.providers, &opts).await.expect("apply");
        assert!(report.succeeded(), "{:?}", report.outcomes);
    }

    fn record(&self) -> gpuplan::jobs::JobRecord {
        self.session.state.resources["job.ft"].job.as_deref().cloned().expect("the job has a record in state")
    }
}

fn job<'p>(plan: &'p Plan, name: &str) -> &'p JobPlacement {
    plan.jobs.iter().find(|j| j.address.name == name).expect("the job is in the plan")
}

fn pool() -> Address {
    Address::new(Kind::GpuPool, "train")
}

#[tokio::test]
async fn a_reclaim_mid_job_relaunches_it_as_attempt_2_with_its_checkpoint_uri() {
    let mut w = world(&spec_text("1h", 2, "on_demand"));
    let plan = w.plan().await;
    let ft = job(&plan, "ft");
    assert_eq!(ft.placement, Placement::Launch);
    assert_eq!(ft.capacity, vec![Capacity::Spot], "a preemptible job goes to spot first");
    w.apply(plan).await;
    let rec = w.record();
    assert_eq!(rec.runs.len(), 1);
    assert_eq!((rec.runs[0].attempt, rec.runs[0].status), (1, JobState::Running));
    let first_node = rec.runs[0].node_id.clone();

    // Nothing changed: the running job keeps its GPUs and the plan is empty.
    let plan = w.plan().await;
    assert!(!plan.has_changes(), "{:?}", plan.jobs);
    assert_eq!(job(&plan, "ft").placement, Placement::Running);

    // The cloud reclaims the spot node in the middle of the run.
    let reclaimed = w.cloud.interrupt(&pool(), 1).expect("interrupt");
    assert_eq!(reclaimed, vec![first_node.clone()]);
    let plan = w.plan().await;
    let ft = job(&plan, "ft");
    assert_eq!(ft.placement, Placement::Launch);
    assert_eq!(ft.attempt, 2);
    assert_eq!(ft.runs[0].status, JobState::Preempted, "refresh read the preemption");
    w.apply(plan).await;

    let launches = w.recording.launches.lock().unwrap().clone();
    assert_eq!(launches.len(), 2);
    let second = &launches[1];
    assert_eq!(second.attempt, 2);
    assert_eq!(second.env.get("GPUPLAN_ATTEMPT").map(String::as_str), Some("2"));
    assert_eq!(second.env.get("GPUPLAN_CHECKPOINT_URI").map(String::as_str), Some("s3://ckpt/finetune"));
    assert_eq!(second.command, ["python", "train.py", "--resume"]);
    assert_ne!(second.node_id, first_node, "never on the reclaimed node");
    assert_ne!(second.token, launches[0].token, "a new attempt is a new launch");

    let rec = w.record();
    let latest = rec.runs.iter().max_by_key(|r| r.attempt).expect("runs");
    assert_eq!((latest.attempt, latest.status), (2, JobState::Running));
    let live = w.cloud.nodes().into_iter().find(|n| n.id == latest.node_id).expect("the node exists");
    assert!(live.is_live());
    assert!(!w.plan().await.has_changes(), "converged after the relaunch");
}

#[tokio::test]
async fn with_spot_gone_the_job_resumes_on_demand_when_the_pool_falls_back() {
    let mut w = world(&spec_text("1h", 1, "on_demand"));
    let plan = w.plan().await;
    w.apply(plan).await;
    // Spot capacity disappears from the zone, then the node is reclaimed.
    w.cloud.set_capacity("us-east-1a", Capacity::Spot, Some(0)).expect("capacity");
    w.cloud.interrupt(&pool(), 1).expect("interrupt");
    let plan = w.plan().await;
    assert_eq!(job(&plan, "ft").attempt, 2);
    w.apply(plan).await;
    let rec = w.record();
    let latest = rec.runs.iter().max_by_key(|r| r.attempt).expect("runs");
    assert_eq!(latest.attempt, 2);
    assert_eq!(latest.capacity, Capacity::OnDemand, "resumed on the on-demand fallback node");
    assert_eq!(latest.status, JobState::Running);
}

#[tokio::test]
async fn a_job_out_of_retries_is_failed_and_not_relaunched() {
    let mut w = world(&spec_text("1h", 0, "on_demand"));
    let plan = w.plan().await;
    w.apply(plan).await;
    // A spot reclaim is not the job's failure: it spends no retry.
    w.cloud.interrupt(&pool(), 1).expect("interrupt");
    let plan = w.plan().await;
    let ft = job(&plan, "ft");
    assert_eq!((ft.placement, ft.attempt, ft.retries_spent), (Placement::Launch, 2, 0));
    w.apply(plan).await;
    // Its node terminated under it: the run failed, and that spends the only retry... of none.
    let node = w.record().runs.iter().find(|r| r.attempt == 2).expect("attempt 2").node_id.clone();
    w.cloud.terminate_out_of_band(&node).expect("terminate");
    let plan = w.plan().await;
    let ft = job(&plan, "ft");
    assert_eq!(ft.placement, Placement::Failed);
    assert!(ft.launches.is_empty());
    w.apply(plan).await;
    assert_eq!(w.recording.launches.lock().unwrap().len(), 2, "no third launch");
}

#[tokio::test]
async fn a_finished_job_stays_finished() {
    let mut w = world(&spec_text("0s", 2, "on_demand"));
    let plan = w.plan().await;
    w.apply(plan).await;
    let plan = w.plan().await;
    assert_eq!(job(&plan, "ft").placement, Placement::Succeeded);
    assert!(!plan.has_changes());
    w.apply(plan).await;
    assert_eq!(w.recording.launches.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_waiting_job_is_queued_demand_for_its_pool() {
    // Spot-only fallback `wait` and no spot nodes: the preemptible job waits.
    let text = spec_text("1h", 1, "wait").replace("spot_percent   = 100", "spot_percent   = 0");
    let mut w = world(&text);
    let plan = w.plan().await;
    let ft = job(&plan, "ft");
    assert_eq!(ft.placement, Placement::Waiting);
    assert_eq!(ft.reason.as_ref().map(|r| r.code.as_str()), Some("capacity"));
    let demand = gpuplan::jobs::queue::waiting(&plan);
    let w0 = &demand[&pool()];
    assert_eq!((w0.len(), w0[0].gpus, w0[0].since.clone()), (1, 8, None));
    w.apply(plan).await;
    // Apply records since when it waits; the next plan reports it.
    let since = w.record().waiting_since.expect("waiting since recorded");
    let plan = w.plan().await;
    assert_eq!(gpuplan::jobs::queue::waiting(&plan)[&pool()][0].since.as_deref(), Some(since.as_str()));
    assert!(w.recording.launches.lock().unwrap().is_empty());
}

/// 40 one-GPU jobs on a pool of two 8-GPU nodes: 16 launch, 24 wait.
fn many_jobs_spec() -> String {
    let mut text = spec_text("1h", 1, "on_demand").replace("spot_percent   = 100", "spot_percent   = 0");
    text = text.replace("on_demand_base = 1", "on_demand_base = 2").replace("gpus           = 8", "gpus           = 1");
    text = text.replace("preemptible    = true", "preemptible    = false");
    for i in 0..40 {
        text.push_str(&format!(
            "\njob \"j{i:02}\" {{\n  template = job_template.finetune\n  pool     = gpu_pool.train\n}}\n"
        ));
    }
    text.replace("job \"ft\" {", "job \"zz_ft\" {")
}

/// The jobs phase settles many jobs at once: its journal writes are shared (group commit)
/// instead of one or two fsyncs per job (72 here before), yet every launch is recorded,
/// no node holds more than its GPUs, and the nodes are those best fit gives in plan order.
#[tokio::test(flavor = "multi_thread")]
async fn many_jobs_settle_in_a_few_journal_writes_and_every_launch_is_recorded() {
    use gpuplan::apply::recorder::Recorder;
    let mut w = world(&many_jobs_spec());
    let plan = Arc::new(w.plan().await);
    let launched: Vec<&JobPlacement> = plan.jobs.iter().filter(|j| j.placement == Placement::Launch).collect();
    assert_eq!(launched.len(), 16, "two 8-GPU nodes hold 16 one-GPU jobs");
    assert_eq!(plan.jobs.len(), 41);
    let opts = ApplyOptions { parallelism: 4, progress: Arc::new(Quiet), cancel: Arc::new(Cancel::default()) };
    let s = &mut w.session;
    let journal = s.backend.open_journal(&s.lock, &s.state).expect("open the journal");
    let (recorder, handle) = Recorder::start(journal);
    let stopped = gpuplan::apply::jobs::before_nodes(&plan, &s.state, &w.providers, &opts).await;
    let report = gpuplan::apply::execute(plan.clone(), &w.providers, recorder.clone(), &opts).await;
    assert!(report.succeeded(), "{:?}", report.outcomes);
    drop(recorder);
    let (journal, error) = handle.finish().expect("the journal writer");
    assert_eq!(error, None);
    let before = journal.appends();

    // The jobs phase alone, on the same journal.
    let (recorder, handle) = Recorder::start(journal);
    let (outcomes, tally) = gpuplan::apply::jobs::run(&plan, &s.state, &w.providers, &recorder, &opts, stopped).await;
    assert!(outcomes.is_empty(), "{outcomes:?}");
    // Apply's closing line counts what the plan's summary counted: 16 jobs launched.
    assert_eq!((tally.launched, tally.requeued), (16, 0), "{tally:?}");
    drop(recorder);
    let (journal, error) = handle.finish().expect("the journal writer");
    assert_eq!(error, None);
    let writes = journal.appends() - before;
    assert!(writes <= 20, "41 jobs, 16 launches: {writes} journal writes");
    s.backend.compact(&s.lock, journal, &mut s.state).expect("fold the journal into the state");

    // Every launch is in state, on the node sequential best fit gives it.
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for j in &launched {
        let rec = s.state.resources[&j.address.to_string()].job.as_deref().expect("a record");
        assert_eq!(rec.runs.len(), 1, "{}: {rec:?}", j.address);
        assert_eq!(rec.runs[0].status, JobState::Running);
        by_node.entry(rec.runs[0].node_id.clone()).or_default().push(j.address.name.clone());
    }
    let filled: Vec<Vec<String>> = by_node.into_values().collect();
    let names: Vec<String> = launched.iter().map(|j| j.address.name.clone()).collect();
    let mut expected = vec![names[..8].to_vec(), names[8..].to_vec()];
    expected.sort();
    let mut filled = filled;
    filled.sort();
    assert_eq!(filled, expected, "the first 8 admitted fill one node, the next 8 the other");
    let waiting = plan.jobs.iter().filter(|j| j.placement == Placement::Waiting);
    for j in waiting {
        let rec = s.state.resources[&j.address.to_string()].job.as_deref().expect("a record");
        assert!(rec.runs.is_empty() && rec.waiting_since.is_some(), "{}: {rec:?}", j.address);
    }
    assert_eq!(w.recording.launches.lock().unwrap().len(), 16);
}
