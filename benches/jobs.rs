//! Job-queue benchmark: 1,000 sim pools, N queued jobs over 20 quotas (priorities,
//! preemptible and not, fair-share weights, `max_gpus`, short `depends_on` pipelines):
//! plan (pools and jobs new), apply (the pools and the admitted launches on sim), and a
//! plan after that apply (jobs running or still waiting, nothing to do). Run by hand,
//! never a timed test:
//!
//! ```text
//! cargo bench --bench jobs                                      # 10,000 and 20,000 jobs
//! GPUPLAN_BENCH_JOBS=10000,20000,100000 cargo bench --bench jobs
//! ```
//!
//! `GPUPLAN_BENCH_PARALLELISM` (default 10), `GPUPLAN_BENCH_DIR` (default a temporary
//! directory). Each size runs in a fresh child process, so its peak RSS is its own.

#[path = "scale/generate.rs"]
#[allow(dead_code)]
mod generate;
#[path = "jobs/generate.rs"]
mod jobs_spec;
#[path = "scale/scenario.rs"]
#[allow(dead_code)]
mod scenario;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuplan::engine;
use gpuplan::jobs::Placement;
use gpuplan::plan::Plan;
use serde::{Deserialize, Serialize};

/// The binary's allocator, so the measured peak is the one `gpuplan` itself would reach.
#[global_allocator]
static ALLOCATOR: gpuplan::Allocator = gpuplan::Allocator;

const RESULT: &str = "RESULT ";

/// What one size measured; printed by the child as one JSON line.
#[derive(Debug, Serialize, Deserialize)]
struct JobsResult {
    jobs: usize,
    parse_s: f64,
    plan_s: f64,
    launches: usize,
    waiting: usize,
    apply_s: f64,
    noop_plan_s: f64,
    noop_launches: usize,
    peak_rss_kib: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("--child") {
        let n: usize = args[1].parse().expect("job count");
        let parallelism: usize = args[2].parse().expect("parallelism");
        let r = run(Path::new(&args[3]), n, parallelism);
        println!("{RESULT}{}", serde_json::to_string(&r).expect("result serializes"));
        return;
    }
    let sizes: Vec<usize> = env("GPUPLAN_BENCH_JOBS", "10000,20000")
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().replace('_', "").parse().expect("GPUPLAN_BENCH_JOBS: comma-separated job counts"))
        .collect();
    let parallelism = env("GPUPLAN_BENCH_PARALLELISM", "10");
    let temp = tempfile::tempdir().expect("temporary directory");
    let root = std::env::var_os("GPUPLAN_BENCH_DIR").map(PathBuf::from).unwrap_or_else(|| temp.path().to_path_buf());
    println!("gpuplan job-queue benchmark: {} pools, {} quotas", jobs_spec::POOLS, jobs_spec::QUOTAS);
    println!("| queued jobs | plan | launches | waiting | apply | no-op plan | peak RSS |");
    println!("|---|---|---|---|---|---|---|");
    for n in sizes {
        let dir = root.join(format!("jobs-{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the benchmark directory");
        let exe = std::env::current_exe().expect("current executable");
        let out = Command::new(exe)
            .args(["--child", &n.to_string(), &parallelism])
            .arg(&dir)
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().find_map(|l| l.strip_prefix(RESULT));
        let Some(r) = line.filter(|_| out.status.success()).map(serde_json::from_str::<JobsResult>) else {
            panic!("child for {n} jobs failed: {}", out.status);
        };
        let r = r.expect("child result");
        println!(
            "| {} | {:.2} s | {} | {} | {:.2} s | {:.2} s | {} MiB |",
            r.jobs,
            r.plan_s,
            r.launches,
            r.waiting,
            r.apply_s,
            r.noop_plan_s,
            r.peak_rss_kib / 1024
        );
    }
}

fn run(root: &Path, jobs: usize, parallelism: usize) -> JobsResult {
    let dir = root.join("spec");
    jobs_spec::write_spec(&dir, jobs).expect("write the spec");
    let (spec, parse_s) = scenario::timed(|| scenario::load(&dir));
    let ws = scenario::workspace(&dir, BTreeMap::new());
    scenario::rt().block_on(async {
        let mut session = engine::open_session(&ws, "bench").expect("open the state");
        let (providers, _cloud) = scenario::sim_providers(&ws, &spec);
        let (plan, plan_s) = scenario::timed_async(scenario::make_plan(&spec, &session, &providers)).await;
        let (launches, waiting) = counts(&plan);
        let (_, apply_s) = scenario::timed_async(scenario::apply(&mut session, plan, &providers, parallelism)).await;
        let (noop, noop_plan_s) = scenario::timed_async(scenario::make_plan(&spec, &session, &providers)).await;
        let (noop_launches, _) = counts(&noop);
        JobsResult {
            jobs,
            parse_s,
            plan_s,
            launches,
            waiting,
            apply_s,
            noop_plan_s,
            noop_launches,
            peak_rss_kib: scenario::peak_rss_kib(),
        }
    })
}

/// Jobs the plan launches and jobs it leaves waiting.
fn counts(plan: &Plan) -> (usize, usize) {
    let launch = plan.jobs.iter().filter(|j| j.placement == Placement::Launch).count();
    let waiting = plan.jobs.iter().filter(|j| j.placement == Placement::Waiting).count();
    (launch, waiting)
}

fn env(key: &str, default: &str) -> String {
    std::env::var(key).ok().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| default.to_string())
}
