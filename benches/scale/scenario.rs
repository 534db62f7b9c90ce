//! The measured scenarios, each run inside one child process so that its peak memory is
//! its own: the pipeline at size N (parse, plan, apply, no-op plan), the saved-plan path
//! CI takes (`plan --out FILE` in one process, `apply FILE` in the next) and apply under
//! injected latency against its ideal schedule.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gpuplan::apply::progress::Quiet;
use gpuplan::apply::{ApplyOptions, Cancel, ProviderSet, Status};
use gpuplan::engine::{self, Session, Workspace, run::PlanRequest};
use gpuplan::plan::{Action, Plan};
use gpuplan::providers::sim::{SimCloud, SimProvider};
use gpuplan::spec::{self, LoadOptions, Spec};
use serde::{Deserialize, Serialize};

use crate::generate;

/// What one size measured; printed by the child as one JSON line, read by the parent.
#[derive(Debug, Serialize, Deserialize)]
pub struct SizeResult {
    pub pools: usize,
    pub spec_bytes: u64,
    pub parse_s: f64,
    pub plan_create_s: f64,
    pub apply_s: f64,
    pub plan_noop_s: f64,
    pub creates: usize,
    pub calls: u64,
    pub peak_rss_kib: u64,
}

/// `plan --out FILE` at size N: parse, plan (all create), save.
#[derive(Debug, Serialize, Deserialize)]
pub struct SaveResult {
    pub pools: usize,
    pub plan_s: f64,
    pub save_s: f64,
    pub file_bytes: u64,
    pub peak_rss_kib: u64,
}

/// `apply FILE` at size N in a fresh process: parse, read the saved plan, check it is
/// fresh, apply.
#[derive(Debug, Serialize, Deserialize)]
pub struct ApplyFileResult {
    pub pools: usize,
    pub parse_s: f64,
    pub load_s: f64,
    pub apply_s: f64,
    pub peak_rss_kib: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LatencyResult {
    pub pools: usize,
    pub latency_ms: u64,
    pub parallelism: usize,
    pub calls: u64,
    /// The longest dependency chain, in changes.
    pub chain: usize,
    pub measured_s: f64,
    pub ideal_s: f64,
}

/// Parse → plan (all create) → apply (no latency) → plan (no-op) for `pools` pools.
pub fn size(root: &Path, pools: usize, parallelism: usize) -> SizeResult {
    let dir = root.join("spec");
    let spec_bytes = generate::write_spec(&dir, pools).expect("write the spec");
    let (spec, parse_s) = timed(|| load(&dir));
    phase("parse");
    let ws = workspace(&dir, BTreeMap::new());
    rt().block_on(async {
        let mut session = engine::open_session(&ws, "bench").expect("open the state");
        let (providers, cloud) = sim_providers(&ws, &spec);
        let (plan, plan_create_s) = timed_async(make_plan(&spec, &session, &providers)).await;
        phase("plan all-create");
        let creates = plan.changes.iter().filter(|c| c.action == Action::Create).count();
        assert_eq!(creates, pools, "every pool is created");
        let before = total_calls(&cloud);
        let (_, apply_s) = timed_async(apply(&mut session, plan, &providers, parallelism)).await;
        let calls = total_calls(&cloud) - before;
        phase("apply");
        let (noop, plan_noop_s) = timed_async(make_plan(&spec, &session, &providers)).await;
        assert!(!noop.has_changes(), "a second plan after apply has no changes");
        phase("plan no-op");
        SizeResult {
            pools,
            spec_bytes,
            parse_s,
            plan_create_s,
            apply_s,
            plan_noop_s,
            creates,
            calls,
            peak_rss_kib: peak_rss_kib(),
        }
    })
}

/// The saved plan's path inside a scenario directory.
fn plan_path(root: &Path) -> std::path::PathBuf {
    root.join("plan.out")
}

/// The first half of the saved-plan path: what `gpuplan plan --out FILE` does (without
/// printing the plan). The spec stays in `root` for [`apply_file`].
pub fn save(root: &Path, pools: usize) -> SaveResult {
    let dir = root.join("spec");
    generate::write_spec(&dir, pools).expect("write the spec");
    let spec = load(&dir);
    let ws = workspace(&dir, BTreeMap::new());
    rt().block_on(async {
        let session = engine::open_session(&ws, "bench").expect("open the state");
        let (providers, _cloud) = sim_providers(&ws, &spec);
        let (plan, plan_s) = timed_async(make_plan(&spec, &session, &providers)).await;
        phase("plan all-create");
        let path = plan_path(root);
        let (saved, save_s) = timed(|| engine::planfile::save(&path, &plan));
        saved.expect("save the plan");
        phase("save");
        let file_bytes = std::fs::metadata(&path).expect("the saved plan").len();
        SaveResult { pools, plan_s, save_s, file_bytes, peak_rss_kib: peak_rss_kib() }
    })
}

/// The second half, in its own process: what `gpuplan apply FILE` does, in its order
/// (spec, plan file, state, freshness check, apply).
pub fn apply_file(root: &Path, pools: usize, parallelism: usize) -> ApplyFileResult {
    let dir = root.join("spec");
    let (spec, parse_s) = timed(|| load(&dir));
    phase("parse");
    let (plan, load_s) = timed(|| engine::planfile::load(&plan_path(root)).expect("read the saved plan"));
    phase("read plan file");
    assert_eq!(plan.changes.len(), pools, "the saved plan has every pool");
    let ws = workspace(&dir, BTreeMap::new());
    rt().block_on(async move {
        let mut session = engine::open_session(&ws, "bench").expect("open the state");
        let (providers, _cloud) = sim_providers(&ws, &spec);
        engine::run::check_fresh(&plan, &session, Some(&spec)).expect("the saved plan is fresh");
        // As `gpuplan apply FILE` does: the spec is not needed to execute the plan.
        drop(spec);
        let (_, apply_s) = timed_async(apply(&mut session, plan, &providers, parallelism)).await;
        phase("apply");
        ApplyFileResult { pools, parse_s, load_s, apply_s, peak_rss_kib: peak_rss_kib() }
    })
}

/// Apply `pools` pools with `latency` per call and `parallelism`, against the ideal
/// schedule: max(longest chain × calls per pool × latency, calls × latency / parallelism).
pub fn latency(root: &Path, pools: usize, latency: Duration, parallelism: usize) -> LatencyResult {
    let dir = root.join("spec");
    generate::write_spec(&dir, pools).expect("write the spec");
    let spec = load(&dir);
    let env = BTreeMap::from([("GPUPLAN_SIM_LATENCY".to_string(), format!("{}ms", latency.as_millis()))]);
    let ws = workspace(&dir, env);
    rt().block_on(async {
        let mut session = engine::open_session(&ws, "bench").expect("open the state");
        let (providers, cloud) = sim_providers(&ws, &spec);
        let plan = make_plan(&spec, &session, &providers).await;
        let chain = longest_chain(&plan);
        let before = total_calls(&cloud);
        let (_, measured_s) = timed_async(apply(&mut session, plan, &providers, parallelism)).await;
        let calls = total_calls(&cloud) - before;
        let per_pool = calls as f64 / pools as f64;
        let l = latency.as_secs_f64();
        let ideal_s = (chain as f64 * per_pool * l).max(calls as f64 * l / parallelism as f64);
        LatencyResult { pools, latency_ms: latency.as_millis() as u64, parallelism, calls, chain, measured_s, ideal_s }
    })
}

pub fn load(dir: &Path) -> Spec {
    let loaded = spec::load_dir(dir, &LoadOptions::default()).map(gpuplan::graph::checked).expect("read the spec");
    let first: Vec<_> = loaded.diags.items.iter().take(3).map(|d| d.message.clone()).collect();
    assert!(!loaded.diags.has_errors(), "generated spec is invalid: {first:?}");
    loaded.spec
}

pub fn workspace(dir: &Path, env: BTreeMap<String, String>) -> Workspace {
    Workspace {
        dir: dir.to_path_buf(),
        state_path: dir.join("state").join("default.json"),
        env,
        lock_timeout: Duration::from_secs(5),
        workspace: "default".into(),
        backend: None,
        encryption: None,
        read_only: false,
    }
}

/// The sim cloud under every sim provider name, keeping the cloud for its call counts.
pub fn sim_providers(ws: &Workspace, spec: &Spec) -> (ProviderSet, Arc<SimCloud>) {
    let block = spec.providers.values().next();
    let cloud = engine::providers::open_sim(ws, block).expect("open the sim cloud");
    let provider: Arc<dyn gpuplan::providers::Provider> = Arc::new(SimProvider::new(cloud.clone()));
    let set = spec.providers.keys().map(|name| (name.clone(), provider.clone())).collect();
    (set, cloud)
}

pub async fn make_plan(spec: &Spec, session: &Session, providers: &ProviderSet) -> Plan {
    let req = PlanRequest { refresh: true, ..PlanRequest::default() };
    let plan = engine::run::plan(spec, session, providers, &req).await.expect("plan");
    assert!(plan.errors.is_empty(), "plan errors: {:?}", plan.errors);
    plan
}

pub async fn apply(session: &mut Session, plan: Plan, providers: &ProviderSet, parallelism: usize) {
    let opts = ApplyOptions { parallelism, progress: Arc::new(Quiet), cancel: Arc::new(Cancel::default()) };
    let report = engine::run::apply(session, Arc::new(plan), providers, &opts).await.expect("apply");
    let failed: Vec<_> = report.outcomes.iter().filter(|o| !matches!(o.status, Status::Done)).take(3).collect();
    assert!(report.succeeded() && failed.is_empty(), "apply did not complete: {failed:?}");
}

pub fn total_calls(cloud: &SimCloud) -> u64 {
    cloud.stats().calls.values().sum()
}

/// The most changes on one dependency path of the plan.
fn longest_chain(plan: &Plan) -> usize {
    let index: BTreeMap<_, _> = plan.changes.iter().enumerate().map(|(i, c)| (&c.address, i)).collect();
    let mut depth: Vec<Option<usize>> = vec![None; plan.changes.len()];
    fn visit(
        i: usize,
        plan: &Plan,
        index: &BTreeMap<&gpuplan::addr::Address, usize>,
        depth: &mut [Option<usize>],
    ) -> usize {
        if let Some(d) = depth[i] {
            return d;
        }
        let deps: Vec<usize> = plan.changes[i].after_changes.iter().filter_map(|a| index.get(a).copied()).collect();
        let d = 1 + deps.into_iter().map(|j| visit(j, plan, index, depth)).max().unwrap_or(0);
        depth[i] = Some(d);
        d
    }
    (0..plan.changes.len()).map(|i| visit(i, plan, &index, &mut depth)).max().unwrap_or(0)
}

/// With `GPUPLAN_BENCH_VERBOSE` set: the resident set now and its peak so far, on stderr,
/// then the peak is reset (where the kernel allows) so the next phase shows its own.
pub fn phase(name: &str) {
    if std::env::var_os("GPUPLAN_BENCH_VERBOSE").is_none() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim).unwrap_or("?").to_string();
    eprintln!("    after {name}: rss {} (peak {})", field("VmRSS:"), field("VmHWM:"));
    PEAK_SO_FAR.fetch_max(vm_hwm_kib(), Ordering::Relaxed);
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peaks seen before [`phase`] reset the kernel's counter.
static PEAK_SO_FAR: AtomicU64 = AtomicU64::new(0);

/// The process's peak resident set (`VmHWM`, and any peak seen before a reset), in KiB.
pub fn peak_rss_kib() -> u64 {
    PEAK_SO_FAR.load(Ordering::Relaxed).max(vm_hwm_kib())
}

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}

pub fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64())
}

pub async fn timed_async<T>(f: impl std::future::Future<Output = T>) -> (T, f64) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed().as_secs_f64())
}
