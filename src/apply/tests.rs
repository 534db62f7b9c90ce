//! `execute` against a scripted provider: each pool's calls follow a script (succeed,
//! fail, panic, delay, no spot capacity), so order, skip-on-failure, cancel, panic and
//! fallback are checked without a cloud. The journal is real (a temporary state folder).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::*;
use crate::json_text::JsonText;
use crate::model::health::NodeHealth;
use crate::plan::model::{FORMAT_VERSION, NodeCounts, PoolChange, Summary};
use crate::providers::health::HealthPort;
use crate::providers::{
    AdoptionPort, Capacity, CreateNodes, CreateResult, ErrorClass, JobPort, JobStatus, LaunchJob, ListFilter, Node,
    NodePort, NodeState, ProviderError, Tags,
};
use crate::spec::model::{Fallback, ProviderKind};
use crate::state::{LocalBackend, State};

/// What a pool's create calls do.
#[derive(Clone)]
enum Step {
    Succeed,
    /// A non-retryable error.
    Fail,
    Panic,
    /// Succeed after this long.
    Delay(Duration),
    /// Spot calls find no capacity; on-demand ones succeed.
    NoSpot,
    /// Ask the run to stop (as Ctrl-C would), then succeed.
    CancelRun(Arc<Cancel>),
    /// Wait this long (other changes run meanwhile), then ask the run to stop and succeed.
    LaterCancelRun(Duration, Arc<Cancel>),
    /// Spot calls succeed; on-demand ones fail with a non-retryable error.
    SpotOnly,
    /// Lose the lock the run acts under (as the heartbeat would, seeing another holder),
    /// then succeed.
    LoseLock(crate::state::Fence),
}

/// A provider whose create calls follow a script per pool, and which logs every call.
struct Scripted {
    script: BTreeMap<String, Step>,
    /// `start NAME`, `end NAME`, and `create NAME CAPACITY ZONE` lines, in call order.
    log: Mutex<Vec<String>>,
    /// When set, each create call first logs `journaled N`: the `add_nodes` lines the
    /// journal at this path holds as the call is made.
    watch: Mutex<Option<std::path::PathBuf>>,
}

impl Scripted {
    fn new(script: &[(&str, Step)]) -> Arc<Scripted> {
        let script = script.iter().map(|(n, s)| (n.to_string(), s.clone())).collect();
        Arc::new(Scripted { script, log: Mutex::new(vec![]), watch: Mutex::new(None) })
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
    fn push(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
}

fn unused<T>() -> Result<T, ProviderError> {
    Err(ProviderError::new(ErrorClass::Fatal, "Unused", "not part of these tests"))
}

/// Every port with a write in it, so that the fence can be seen refusing each write; no
/// prices (its pools are priced from the catalog).
#[async_trait]
impl Provider for Scripted {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Sim
    }
    fn nodes(&self) -> Option<&dyn NodePort> {
        Some(self)
    }
    fn jobs(&self) -> Option<&dyn JobPort> {
        Some(self)
    }
    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        Some(self)
    }
    fn health(&self) -> Option<&dyn HealthPort> {
        Some(self)
    }
}

#[async_trait]
impl NodePort for Scripted {
    async fn list_nodes(&self, _: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        unused()
    }
    async fn create_nodes(&self, req: &CreateNodes) -> Result<CreateResult, ProviderError> {
        let name = req.pool.name.clone();
        let watched = self.watch.lock().unwrap().clone();
        if let Some(path) = watched {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            self.push(format!("journaled {}", text.matches(r#""op":"add_nodes""#).count()));
        }
        self.push(format!("create {name} {} {}", req.capacity, req.zone));
        self.push(format!("start {name}"));
        let step = self.script.get(&name).cloned().unwrap_or(Step::Succeed);
        let result = match step {
            Step::Succeed => Ok(made(req)),
            Step::Fail => Err(ProviderError::new(ErrorClass::Invalid, "InvalidParameter", "scripted failure")),
            Step::Panic => panic!("scripted panic in {name}"),
            Step::Delay(d) => {
                tokio::time::sleep(d).await;
                Ok(made(req))
            }
            Step::NoSpot if req.capacity == Capacity::Spot => {
                Err(ProviderError::new(ErrorClass::OutOfCapacity, "InsufficientInstanceCapacity", "no spot here"))
            }
            Step::NoSpot => Ok(made(req)),
            Step::CancelRun(cancel) => {
                cancel.cancel();
                Ok(made(req))
            }
            Step::LoseLock(fence) => {
                fence.lose(Some("it is held by `gpuplan apply` by ci@runner-2 (id 7e57) now".into()));
                Ok(made(req))
            }
            Step::LaterCancelRun(d, cancel) => {
                tokio::time::sleep(d).await;
                cancel.cancel();
                Ok(made(req))
            }
            Step::SpotOnly if req.capacity == Capacity::Spot => Ok(made(req)),
            Step::SpotOnly => Err(ProviderError::new(ErrorClass::Invalid, "InvalidParameter", "no on-demand here")),
        };
        self.push(format!("end {name}"));
        result
    }
    async fn terminate_nodes(&self, _: &str, ids: &[String]) -> Result<Vec<String>, ProviderError> {
        Ok(ids.to_vec())
    }
}

#[async_trait]
impl AdoptionPort for Scripted {
    async fn describe_nodes(&self, _: &str, _: &[String]) -> Result<Vec<Node>, ProviderError> {
        unused()
    }
    async fn list_unmanaged(&self, _: &str, _: &[(String, String)]) -> Result<Vec<Node>, ProviderError> {
        unused()
    }
    async fn tag_nodes(&self, _: &str, _: &[String], _: &Tags, _: &[String]) -> Result<(), ProviderError> {
        unused()
    }
}

#[async_trait]
impl HealthPort for Scripted {
    async fn read_health(&self, _: &str, _: &[String]) -> Result<Vec<NodeHealth>, ProviderError> {
        unused()
    }
    async fn cordon(&self, _: &str, _: &str) -> Result<(), ProviderError> {
        unused()
    }
}

#[async_trait]
impl JobPort for Scripted {
    async fn launch_job(&self, _: &LaunchJob) -> Result<JobStatus, ProviderError> {
        unused()
    }
    async fn job_status(&self, _: &str, _: &str) -> Result<JobStatus, ProviderError> {
        unused()
    }
    async fn cancel_job(&self, _: &str, _: &str) -> Result<JobStatus, ProviderError> {
        unused()
    }
}

/// The nodes a successful create call returns.
fn made(req: &CreateNodes) -> CreateResult {
    let nodes = (0..req.count)
        .map(|k| Node {
            provider: None,
            id: format!("{}-{k}", req.token),
            pool: req.pool.clone(),
            instance_type: req.instance_types[0].clone(),
            region: req.region.clone(),
            zone: req.zone.clone(),
            capacity: req.capacity,
            state: NodeState::Running,
            image: None,
            tags: Tags::new(),
        })
        .collect();
    CreateResult { nodes, errors: vec![] }
}

/// A create of `count` nodes for `gpu_pool.NAME`, after the pools named in `after`.
fn create(name: &str, count: u32, capacity: Capacity, after: &[&str]) -> ResourceChange {
    let address: Address = format!("gpu_pool.{name}").parse().unwrap();
    let batch = CreateNodes {
        pool: address.clone(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        zones: vec![],
        instance_types: vec!["g6.xlarge".into()],
        capacity,
        count,
        image: None,
        max_spot_price: None,
        token: format!("tok-{name}"),
        tags: Tags::new(),
        user_data: None,
        join: None,
        hardware: None,
        reservation: None,
    };
    let nodes = NodeCounts { on_demand: 0, spot: 0, gpus_per_node: 1 };
    let pool = PoolChange {
        provider: "scripted".into(),
        provider_kind: "sim".into(),
        region: "us-east-1".into(),
        gpu: "L4".into(),
        before: nodes,
        after: nodes,
        before_types: vec![],
        creates: vec![batch],
        deletes: vec![],
        deferred: vec![],
        adopt: vec![],
        forget: vec![],
        zones: vec!["us-east-1a".into(), "us-east-1b".into()],
        fallback: Fallback::OnDemand,
        create_before_destroy: true,
        fell_back: None,
        retry_preferred: None,
        placement: None,
        placement_before: None,
        alternates: Vec::new(),
    };
    ResourceChange {
        address,
        action: Action::Create,
        before: None,
        after: Some(JsonText::from_value(&serde_json::json!({ "gpu": "L4" }))),
        reasons: vec![],
        pool: Some(pool),
        after_changes: after.iter().map(|a| format!("gpu_pool.{a}").parse().unwrap()).collect(),
        sensitive: None,
    }
}

fn plan(changes: Vec<ResourceChange>) -> Plan {
    Plan {
        format_version: FORMAT_VERSION,
        lineage: "00000000-0000-4000-8000-000000000000".into(),
        serial: 1,
        spec_digest: String::new(),
        inputs: None,
        refreshed: true,
        targets: vec![],
        replace: vec![],
        destroy: false,
        changes,
        drift: vec![],
        notes: vec![],
        summary: Summary::default(),
        errors: vec![],
        cost: None,
        policies: vec![],
        jobs: vec![],
        spend: None,
        orphan_job_nodes: Vec::new(),
        evidence: Default::default(),
        health: Vec::new(),
        reservations: Vec::new(),
        adoptions: Vec::new(),
        placements: Vec::new(),
        outputs: Vec::new(),
        autoscale: vec![],
    }
}

/// What a run left behind: the report, the state its journal folds into, and the
/// journal's appends (fsyncs) and lines.
struct Run {
    report: ApplyReport,
    state: State,
    appends: usize,
    journal: Vec<String>,
}

impl Run {
    fn status(&self, name: &str) -> &Status {
        let o = self.report.outcomes.iter().find(|o| o.address.name == name);
        &o.unwrap_or_else(|| panic!("no outcome for {name}: {:?}", self.report.outcomes)).status
    }
    /// The capacity of every node the state records for a pool.
    fn capacities(&self, name: &str) -> Vec<Capacity> {
        self.state
            .resources
            .get(&format!("gpu_pool.{name}"))
            .map_or(vec![], |r| r.nodes.iter().map(|n| n.capacity).collect())
    }
}

async fn run(changes: Vec<ResourceChange>, provider: Arc<Scripted>, cancel: Arc<Cancel>, parallelism: usize) -> Run {
    run_in(&tempfile::tempdir().unwrap(), changes, provider, cancel, parallelism).await
}

async fn run_in(
    dir: &tempfile::TempDir,
    changes: Vec<ResourceChange>,
    provider: Arc<Scripted>,
    cancel: Arc<Cancel>,
    parallelism: usize,
) -> Run {
    let backend = LocalBackend::new(dir.path().join("state").join("default.json"));
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    let lock = backend.lock("apply", Duration::ZERO).unwrap();
    let mut state = State::new("00000000-0000-4000-8000-000000000000".into());
    backend.write(&lock, &mut state).unwrap();
    let journal = backend.open_journal(&lock, &state).unwrap();
    let (recorder, handle) = Recorder::start(journal);
    let providers: ProviderSet = BTreeMap::from([("scripted".to_string(), provider as Arc<dyn Provider>)]);
    // Behind the fence, as `engine::run::apply` puts them: a cancel without one passes all.
    let providers = fence::guard(&providers, &cancel);
    let opts = ApplyOptions { parallelism, progress: Arc::new(progress::Quiet), cancel };
    let report = execute(Arc::new(plan(changes)), &providers, recorder, &opts).await;
    let (journal, error) = handle.finish().unwrap();
    assert_eq!(error, None);
    let appends = journal.appends();
    let lines = std::fs::read_to_string(backend.journal_path()).unwrap().lines().map(str::to_string).collect();
    backend.compact(&lock, journal, &mut state).unwrap();
    Run { report, state, appends, journal: lines }
}

fn position(log: &[String], line: &str) -> usize {
    log.iter().position(|l| l == line).unwrap_or_else(|| panic!("`{line}` not in {log:?}"))
}

#[tokio::test]
async fn dependencies_finish_before_their_dependents_start() {
    // c after b after a; a is slow, so starting b early would show in the log.
    let p = Scripted::new(&[("a", Step::Delay(Duration::from_millis(50))), ("b", Step::Succeed)]);
    let changes = vec![
        create("c", 1, Capacity::OnDemand, &["b"]),
        create("b", 1, Capacity::OnDemand, &["a"]),
        create("a", 1, Capacity::OnDemand, &[]),
    ];
    let r = run(changes, p.clone(), Arc::default(), 4).await;
    assert!(r.report.succeeded(), "{:?}", r.report);
    let log = p.log();
    assert!(position(&log, "end a") < position(&log, "start b"), "{log:?}");
    assert!(position(&log, "end b") < position(&log, "start c"), "{log:?}");
    for name in ["a", "b", "c"] {
        assert_eq!(r.status(name), &Status::Done);
        assert_eq!(r.capacities(name), vec![Capacity::OnDemand], "{name} in state");
    }
}

#[tokio::test]
async fn a_failure_skips_its_dependents_and_independent_work_finishes() {
    // b and c wait on a (c through b); d is independent and slower than a's failure.
    let p = Scripted::new(&[("a", Step::Fail), ("d", Step::Delay(Duration::from_millis(30)))]);
    let changes = vec![
        create("a", 1, Capacity::OnDemand, &[]),
        create("b", 1, Capacity::OnDemand, &["a"]),
        create("c", 1, Capacity::OnDemand, &["b"]),
        create("d", 2, Capacity::OnDemand, &[]),
    ];
    let r = run(changes, p.clone(), Arc::default(), 4).await;
    assert!(!r.report.succeeded());
    assert!(!r.report.cancelled);
    assert!(matches!(r.status("a"), Status::Failed(m) if m.contains("scripted failure")), "{:?}", r.status("a"));
    assert!(matches!(r.status("b"), Status::Skipped(m) if m.contains("gpu_pool.a")), "{:?}", r.status("b"));
    assert!(matches!(r.status("c"), Status::Skipped(m) if m.contains("gpu_pool.b")), "{:?}", r.status("c"));
    assert_eq!(r.status("d"), &Status::Done);
    assert_eq!(r.capacities("d").len(), 2);
    assert_eq!(r.report.outcomes.len(), 4, "every change has an outcome");
    let log = p.log();
    assert!(!log.iter().any(|l| l.ends_with(" b") || l.ends_with(" c")), "skipped changes made calls: {log:?}");
}

#[tokio::test]
async fn cancel_skips_what_has_not_started_and_reports_cancelled() {
    // a asks the run to stop while it runs; it finishes, b and c never start.
    let cancel = Arc::new(Cancel::default());
    let p = Scripted::new(&[("a", Step::CancelRun(cancel.clone()))]);
    let changes = vec![
        create("a", 1, Capacity::OnDemand, &[]),
        create("b", 1, Capacity::OnDemand, &["a"]),
        create("c", 1, Capacity::OnDemand, &["b"]),
    ];
    let r = run(changes, p.clone(), cancel, 4).await;
    assert!(r.report.cancelled);
    assert!(!r.report.succeeded());
    assert_eq!(r.status("a"), &Status::Done, "in-flight work finishes and is recorded");
    assert_eq!(r.capacities("a"), vec![Capacity::OnDemand]);
    assert!(matches!(r.status("b"), Status::Skipped(m) if m.contains("interrupted")), "{:?}", r.status("b"));
    assert!(matches!(r.status("c"), Status::Skipped(_)), "{:?}", r.status("c"));
    assert_eq!(p.log().iter().filter(|l| l.starts_with("start")).count(), 1);
}

#[tokio::test]
async fn a_pool_waiting_for_a_permit_when_the_apply_is_cancelled_makes_no_call() {
    // One permit: three independent pools start together; the one holding the permit
    // asks the run to stop after the others began waiting for it. Neither may call the
    // cloud after that.
    let cancel = Arc::new(Cancel::default());
    let later = Step::LaterCancelRun(Duration::from_millis(50), cancel.clone());
    let p = Scripted::new(&[("a", later.clone()), ("b", later.clone()), ("c", later)]);
    let changes = vec![
        create("a", 1, Capacity::OnDemand, &[]),
        create("b", 1, Capacity::OnDemand, &[]),
        create("c", 1, Capacity::OnDemand, &[]),
    ];
    let r = run(changes, p.clone(), cancel, 1).await;
    assert!(r.report.cancelled);
    let started: Vec<String> = p.log().into_iter().filter(|l| l.starts_with("start")).collect();
    assert_eq!(started.len(), 1, "only the call in flight ran: {started:?}");
    let first = started[0].trim_start_matches("start ").to_string();
    assert_eq!(r.capacities(&first), vec![Capacity::OnDemand], "and it is recorded");
    for name in ["a", "b", "c"].into_iter().filter(|n| *n != first) {
        let status = r.status(name);
        assert!(matches!(status, Status::Failed(m) | Status::Skipped(m) if m.contains("interrupted")), "{status:?}");
        assert!(r.capacities(name).is_empty());
    }
}

#[tokio::test]
async fn a_panicking_change_fails_and_its_dependents_are_skipped() {
    let p = Scripted::new(&[("a", Step::Panic), ("c", Step::Delay(Duration::from_millis(20)))]);
    let changes = vec![
        create("a", 1, Capacity::OnDemand, &[]),
        create("b", 1, Capacity::OnDemand, &["a"]),
        create("c", 1, Capacity::OnDemand, &[]),
    ];
    let r = run(changes, p, Arc::default(), 4).await;
    assert!(!r.report.succeeded(), "a panic must never count as success");
    assert!(!r.report.cancelled);
    assert!(
        matches!(r.status("a"), Status::Failed(m) if m.contains("panicked") && m.contains("scripted panic in a")),
        "{:?}",
        r.status("a")
    );
    assert!(matches!(r.status("b"), Status::Skipped(m) if m.contains("gpu_pool.a")), "{:?}", r.status("b"));
    assert_eq!(r.status("c"), &Status::Done);
    assert_eq!(r.report.outcomes.len(), 3);
}

#[tokio::test]
async fn short_spot_capacity_falls_back_to_other_zones_then_on_demand() {
    let p = Scripted::new(&[("a", Step::NoSpot)]);
    let r = run(vec![create("a", 3, Capacity::Spot, &[])], p.clone(), Arc::default(), 1).await;
    assert!(r.report.succeeded(), "{:?}", r.report);
    assert_eq!(r.status("a"), &Status::Done);
    assert_eq!(r.report.outcomes[0].created, 3);
    assert_eq!(r.capacities("a"), vec![Capacity::OnDemand; 3]);
    let creates: Vec<String> = p.log().into_iter().filter(|l| l.starts_with("create")).collect();
    assert_eq!(
        creates,
        ["create a spot us-east-1a", "create a spot us-east-1b", "create a on-demand us-east-1a"],
        "the planned zone, the pool's other zone, then on-demand"
    );
}

#[tokio::test]
async fn short_spot_capacity_without_fallback_waits_or_fails_as_the_pool_says() {
    for (fallback, want_partial) in [(Fallback::Wait, true), (Fallback::Fail, false)] {
        let p = Scripted::new(&[("a", Step::NoSpot), ("b", Step::Succeed)]);
        let mut a = create("a", 2, Capacity::Spot, &[]);
        a.pool.as_mut().unwrap().fallback = fallback;
        let r = run(vec![a, create("b", 1, Capacity::OnDemand, &["a"])], p.clone(), Arc::default(), 2).await;
        assert!(r.capacities("a").is_empty(), "{fallback:?}: no node may be placed");
        assert!(!p.log().iter().any(|l| l.contains("on-demand us-east-1a") && l.contains(" a ")), "{fallback:?}");
        if want_partial {
            assert!(matches!(r.status("a"), Status::Partial(m) if m.contains("2 spot")), "{:?}", r.status("a"));
            assert_eq!(r.status("b"), &Status::Done, "a partial change lets its dependents go ahead");
            // Waiting is what the pool asked for, but the fleet is short of the plan: the
            // apply says so and does not succeed.
            assert_eq!(r.report.missing(), 2);
            assert!(!r.report.succeeded(), "an apply two nodes short of its plan is no success");
        } else {
            assert!(matches!(r.status("a"), Status::Failed(m) if m.contains("no spot here")), "{:?}", r.status("a"));
            assert!(matches!(r.status("b"), Status::Skipped(_)));
            assert!(!r.report.succeeded());
        }
    }
}

#[tokio::test]
async fn parallelism_bounds_the_provider_calls_in_flight() {
    let slow = Step::Delay(Duration::from_millis(10));
    let p = Scripted::new(&[("a", slow.clone()), ("b", slow.clone()), ("c", slow.clone()), ("d", slow)]);
    let changes = ["a", "b", "c", "d"].iter().map(|n| create(n, 1, Capacity::OnDemand, &[])).collect();
    let r = run(changes, p.clone(), Arc::default(), 1).await;
    assert!(r.report.succeeded(), "{:?}", r.report);
    let calls: Vec<String> = p.log().into_iter().filter(|l| !l.starts_with("create")).collect();
    for pair in calls.chunks(2) {
        let name = pair[0].strip_prefix("start ").unwrap_or_else(|| panic!("two calls at once: {calls:?}"));
        assert_eq!(pair[1], format!("end {name}"), "two calls at once: {calls:?}");
    }
    assert_eq!(calls.len(), 8);
}

/// The prices spend lines open at come from the plan's cost report, looked up by address
/// in an index instead of a copy keyed by address text: the same answers the copy gave
/// (the last report line of an address, only for pools that add nodes).
#[test]
fn ledger_prices_answer_as_a_map_of_the_cost_report_would() {
    use crate::plan::report::{CostReport, PoolCost, Range};
    let price = |usd: f64| serde_json::json!({"as_of": "2026-09-24", "source": "catalog", "usd_per_hour": usd});
    let pool = |name: &str, itype: &str, usd: f64| -> PoolCost {
        serde_json::from_value(serde_json::json!({
            "address": format!("gpu_pool.{name}"), "gpu": "L4", "gpus_after": 1, "gpus_before": 0,
            "hourly_after": usd, "hourly_before": 0.0, "instance_type": itype, "on_demand_after": 1,
            "on_demand_before": 0, "on_demand_hourly_after": usd, "on_demand_price": price(usd),
            "price_per_gpu_hour": usd, "provider": "sim", "region": "us-east-1", "spot_after": 0,
            "spot_before": 0, "spot_hourly_after": 0.0, "spot_price": price(usd / 2.0)
        }))
        .unwrap()
    };
    let mut no_adds = create("c", 1, Capacity::OnDemand, &[]);
    no_adds.pool.as_mut().unwrap().creates.clear();
    let mut p = plan(vec![create("b", 1, Capacity::OnDemand, &[]), create("a", 1, Capacity::Spot, &[]), no_adds]);
    let pools = vec![
        pool("c", "g6.xlarge", 9.0),
        pool("b", "g6.2xlarge", 2.0),
        pool("a", "g6.xlarge", 1.0),
        pool("zz", "g6.xlarge", 5.0),
        pool("a", "g6.4xlarge", 3.0),
    ];
    let mut report: CostReport = serde_json::from_value(serde_json::json!({
        "currency": "USD", "exchange_rates": [], "hourly_after": 0.0, "hourly_before": 0.0,
        "hourly_delta": 0.0, "hours_per_month": 730.0, "monthly_after": 0.0, "monthly_before": 0.0,
        "monthly_delta": 0.0, "on_demand_hourly_after": 0.0, "pools": [], "quotas": [],
        "range": serde_json::to_value(Range::default()).unwrap(), "spot_hourly_after": 0.0
    }))
    .unwrap();
    report.pools = pools;
    p.cost = Some(report);
    // What the executor kept before: a map by address text, built from the report in order.
    let adds = ["gpu_pool.a", "gpu_pool.b"];
    let mut expected = std::collections::HashMap::new();
    for c in &p.cost.as_ref().unwrap().pools {
        if adds.contains(&c.address.to_string().as_str()) {
            let prices = (c.instance_type.clone(), c.on_demand_price.clone(), c.spot_price.clone());
            expected.insert(c.address.to_string(), prices);
        }
    }
    let ledger = spend::LedgerPrices::new(Arc::new(p));
    for name in ["a", "b", "c", "zz", "nope"] {
        let address: Address = format!("gpu_pool.{name}").parse().unwrap();
        let got = ledger.get(&address).map(|(t, od, spot)| (t.to_string(), od.cloned(), spot.cloned()));
        assert_eq!(got, expected.get(&address.to_string()).cloned(), "{name}");
    }
    assert_eq!(ledger.get(&"gpu_pool.a".parse().unwrap()).unwrap().0, "g6.4xlarge", "the last line of an address");
    assert!(spend::LedgerPrices::default().get(&"gpu_pool.a".parse().unwrap()).is_none());
}

/// The op of each journal line after the header (`put_resource`, ...).
fn ops(journal: &[String]) -> Vec<String> {
    journal[1..]
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["op"].as_str().unwrap().to_string())
        .collect()
}

/// A pool whose only cloud call is one create waits for one journal append, not two: its
/// nodes, their spend lines and its record go together, in the order they were made.
#[tokio::test]
async fn a_pool_that_makes_one_call_is_journaled_in_one_append() {
    let p = Scripted::new(&[]);
    let r = run(vec![create("a", 2, Capacity::OnDemand, &[])], p, Arc::default(), 1).await;
    assert!(r.report.succeeded(), "{:?}", r.report);
    assert_eq!(r.appends, 1, "{:?}", r.journal);
    assert_eq!(ops(&r.journal), ["add_nodes", "spend_open", "put_resource"]);
    assert_eq!(r.capacities("a"), vec![Capacity::OnDemand; 2]);
    assert_eq!(r.state.spend.len(), 2);
}

/// What a pool's create made is durable before its next cloud call (here a fallback to
/// another zone, then to on-demand), and before a failure ends the change: the state
/// keeps those nodes.
#[tokio::test]
async fn nodes_a_call_made_are_journaled_before_the_next_call_and_when_the_change_fails() {
    let dir = tempfile::tempdir().unwrap();
    let p = Scripted::new(&[("a", Step::SpotOnly)]);
    *p.watch.lock().unwrap() = Some(dir.path().join("state").join("default.json.journal"));
    let mut a = create("a", 1, Capacity::Spot, &[]);
    let mut second = a.pool.as_ref().unwrap().creates[0].clone();
    (second.capacity, second.token, second.zone) = (Capacity::OnDemand, "tok-a2".into(), "us-east-1b".into());
    a.pool.as_mut().unwrap().creates.push(second);
    let r = run_in(&dir, vec![a], p.clone(), Arc::default(), 1).await;
    assert!(matches!(r.status("a"), Status::Failed(m) if m.contains("no on-demand here")), "{:?}", r.status("a"));
    let log: Vec<String> =
        p.log().into_iter().filter(|l| l.starts_with("journaled") || l.starts_with("create")).collect();
    assert_eq!(log, ["journaled 0", "create a spot us-east-1a", "journaled 1", "create a on-demand us-east-1b"]);
    assert_eq!(r.capacities("a"), vec![Capacity::Spot], "the spot node made before the failure is in state");
    assert_eq!(ops(&r.journal), ["add_nodes", "spend_open"], "no record of a failed change");
}

/// A progress writer's target for tests: the bytes and the number of writes.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<(Vec<u8>, usize)>>);

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let mut s = self.0.lock().unwrap();
        s.0.extend_from_slice(b);
        s.1 += 1;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Sink {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().0.clone()).unwrap()
    }
}

/// Progress lines for logs are written whole and in the order each task made them, all
/// of them by `done`, in far fewer writes than lines; after `done` a line goes out at once.
#[test]
fn progress_lines_are_written_whole_in_order_in_few_writes() {
    let sink = Sink::default();
    let lines = progress::Lines::to(Box::new(sink.clone()));
    std::thread::scope(|s| {
        for t in 0..4 {
            let lines = &lines;
            s.spawn(move || (0..5_000).for_each(|i| lines.event(&format!("gpu_pool.t{t}"), &format!("line {i}"))));
        }
    });
    lines.done();
    let text = sink.text();
    assert_eq!(text.lines().count(), 20_000);
    for t in 0..4 {
        let prefix = format!("gpu_pool.t{t}: ");
        let mine: Vec<&str> = text.lines().filter(|l| l.starts_with(&prefix)).collect();
        let want: Vec<String> = (0..5_000).map(|i| format!("{prefix}line {i}")).collect();
        assert_eq!(mine, want);
    }
    let writes = sink.0.lock().unwrap().1;
    assert!(writes < 1_000, "{writes} writes for 20,000 lines");
    lines.finished("gpu_pool.late", "done");
    assert!(sink.text().ends_with("gpu_pool.late: done\n"), "{}", sink.text());
}

/// A line nothing follows is still written soon (the flusher), without waiting for `done`.
#[test]
fn a_progress_line_is_written_without_waiting_for_the_next() {
    let sink = Sink::default();
    let lines = progress::Lines::to(Box::new(sink.clone()));
    lines.event("gpu_pool.a", "created 1 on-demand node in us-east-1a");
    let start = std::time::Instant::now();
    while sink.text().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30), "the line was never written");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(sink.text(), "gpu_pool.a: created 1 on-demand node in us-east-1a\n");
    drop(lines);
}

/// The state lock is lost while a change runs (another process took it over): that call
/// finishes and is recorded; nothing starts after it, and every mutating call through
/// the guarded providers is refused before it is sent, while reads go through.
#[tokio::test]
async fn a_lost_lock_starts_nothing_new_and_refuses_every_mutating_call() {
    let lock = crate::state::Fence::new("the state lock `mem://k.lock`", Duration::from_secs(60));
    let cancel = Cancel::fenced(Arc::default(), lock.clone());
    let p = Scripted::new(&[("a", Step::LoseLock(lock.clone()))]);
    let changes = vec![create("a", 1, Capacity::OnDemand, &[]), create("b", 1, Capacity::OnDemand, &["a"])];
    let r = run(changes, p.clone(), cancel.clone(), 4).await;
    assert_eq!(r.status("a"), &Status::Done, "the call in flight finishes");
    assert_eq!(r.capacities("a"), vec![Capacity::OnDemand], "and is recorded");
    let held_by =
        "not started: lost the state lock `mem://k.lock`: it is held by `gpuplan apply` by ci@runner-2 (id 7e57) now";
    assert!(matches!(r.status("b"), Status::Skipped(m) if m == held_by), "{:?}", r.status("b"));
    assert!(!p.log().iter().any(|l| l.ends_with(" b")), "{:?}", p.log());
    assert!(r.report.cancelled && !r.report.succeeded());

    let providers: ProviderSet = BTreeMap::from([("scripted".to_string(), p.clone() as Arc<dyn Provider>)]);
    let g = fence::guard(&providers, &cancel)["scripted"].clone();
    let batch = create("c", 1, Capacity::OnDemand, &[]).pool.unwrap().creates[0].clone();
    let ids = ["i-1".to_string()];
    let refused = |e: ProviderError| assert!(e.code == fence::LOCK_LOST && e.class == ErrorClass::Fatal, "{e:?}");
    // Every write of every port the provider has, asked through the port.
    let (nodes, jobs) = (g.nodes().expect("nodes"), g.jobs().expect("jobs"));
    let (adoption, health) = (g.adoption().expect("adoption"), g.health().expect("health"));
    refused(nodes.create_nodes(&batch).await.unwrap_err());
    refused(nodes.terminate_nodes("us-east-1", &ids).await.unwrap_err());
    refused(adoption.tag_nodes("us-east-1", &ids, &Tags::new(), &[]).await.unwrap_err());
    let launch = LaunchJob {
        job: crate::addr::Address::new(crate::addr::Kind::Job, "j"),
        pool: crate::addr::Address::new(crate::addr::Kind::GpuPool, "c"),
        node_id: "i-1".into(),
        region: "us-east-1".into(),
        image: "img".into(),
        command: Vec::new(),
        env: BTreeMap::new(),
        secrets: BTreeMap::new(),
        gpus: 1,
        attempt: 0,
        token: "t".into(),
        shape: None,
        max_runtime_secs: None,
        keep_node: false,
        kube: None,
        readiness: Default::default(),
    };
    refused(jobs.launch_job(&launch).await.unwrap_err());
    refused(jobs.cancel_job("us-east-1", "run-1").await.unwrap_err());
    refused(jobs.preempt_job("us-east-1", "run-1").await.unwrap_err());
    refused(jobs.release_job_node("us-east-1", "i-1").await.unwrap_err());
    refused(health.cordon("us-east-1", "i-1").await.unwrap_err());
    assert!(!p.log().iter().any(|l| l.ends_with(" c")), "refused before it was sent: {:?}", p.log());
    // Reads reach the provider.
    let filter = ListFilter { region: "us-east-1".into(), lineage: None };
    assert_eq!(nodes.list_nodes(&filter).await.unwrap_err().code, "Unused", "a read reaches the provider");
    assert_eq!(jobs.job_status("us-east-1", "run-1").await.unwrap_err().code, "Unused");
    assert_eq!(adoption.describe_nodes("us-east-1", &ids).await.unwrap_err().code, "Unused");
    assert_eq!(health.read_health("us-east-1", &ids).await.unwrap_err().code, "Unused");
}

/// A fenced provider has the ports its provider has, and no other: a missing one stays
/// missing (and gives the bare provider's error), never turns into a fenced stub.
#[tokio::test]
async fn a_fenced_provider_has_exactly_the_ports_of_the_provider_it_wraps() {
    let cancel = Cancel::fenced(Arc::default(), crate::state::Fence::new("the lock", Duration::from_secs(60)));
    let p = Scripted::new(&[]);
    let providers: ProviderSet = BTreeMap::from([("scripted".to_string(), p as Arc<dyn Provider>)]);
    let g = fence::guard(&providers, &cancel)["scripted"].clone();
    assert!(g.nodes().is_some() && g.jobs().is_some() && g.adoption().is_some() && g.health().is_some());
    assert!(g.prices().is_none() && g.logs().is_none() && g.cluster().is_none() && g.run_command().is_none());
    let e = crate::providers::ports::logs_of(g.as_ref(), "run-1").err().expect("no log port");
    assert_eq!(e.message, "provider `sim` cannot read the output of run run-1 yet");
    let e = crate::providers::ports::cluster_of(g.as_ref(), "kubeconfig:k").err().expect("no cluster port");
    assert_eq!(e.message, "provider `sim` runs no cluster `kubeconfig:k`");
}
