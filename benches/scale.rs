//! Scale benchmark: parse, plan, apply and no-op plan for generated fleets of N sim pools,
//! and apply under injected latency against the ideal schedule. Run by hand (never a
//! timed test):
//!
//! ```text
//! cargo bench --bench scale
//! GPUPLAN_BENCH_SIZES=1000,10000,100000 cargo bench --bench scale
//! ```
//!
//! Environment: `GPUPLAN_BENCH_SIZES` (default `1000,10000`), `GPUPLAN_BENCH_PLANFILE`
//! (default 1; 0 skips the saved-plan runs), `GPUPLAN_BENCH_PARALLELISM`
//! (default 10), `GPUPLAN_BENCH_LATENCY_POOLS` (default 200; 0 skips the latency run),
//! `GPUPLAN_BENCH_LATENCY_MS` (default 50), `GPUPLAN_BENCH_VERBOSE` (RSS after each phase,
//! on stderr), `GPUPLAN_BENCH_DIR` (where the specs, state
//! and sim cloud go; default a temporary directory on the system temp folder).
//!
//! Each size runs in a fresh child process (this binary re-run with `--child`), so the
//! peak RSS it reports (`VmHWM`) belongs to that size alone.

#[path = "scale/generate.rs"]
mod generate;
#[path = "scale/scenario.rs"]
mod scenario;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use scenario::{ApplyFileResult, LatencyResult, SaveResult, SizeResult};

/// The binary's allocator, so the measured peak is the one `gpuplan` itself would reach.
#[global_allocator]
static ALLOCATOR: gpuplan::Allocator = gpuplan::Allocator;

const RESULT: &str = "RESULT ";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1..]);
    }
    let sizes: Vec<usize> = env("GPUPLAN_BENCH_SIZES", "1000,10000")
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().replace('_', "").parse().expect("GPUPLAN_BENCH_SIZES: comma-separated pool counts"))
        .collect();
    let parallelism: usize = env("GPUPLAN_BENCH_PARALLELISM", "10").parse().expect("GPUPLAN_BENCH_PARALLELISM");
    let latency_pools: usize = env("GPUPLAN_BENCH_LATENCY_POOLS", "200").parse().expect("GPUPLAN_BENCH_LATENCY_POOLS");
    let latency_ms: u64 = env("GPUPLAN_BENCH_LATENCY_MS", "50").parse().expect("GPUPLAN_BENCH_LATENCY_MS");
    let temp = tempfile::tempdir().expect("temporary directory");
    let root = std::env::var_os("GPUPLAN_BENCH_DIR").map(PathBuf::from).unwrap_or_else(|| temp.path().to_path_buf());

    println!("gpuplan scale benchmark: {} cores, parallelism {parallelism}", cores());
    let planfile = env("GPUPLAN_BENCH_PLANFILE", "1") != "0";
    let mut results = Vec::new();
    let mut saved = Vec::new();
    for n in &sizes {
        let dir = fresh(&root, &format!("size-{n}"));
        let r: SizeResult = run_child(&["size", &n.to_string(), &parallelism.to_string()], &dir);
        eprintln!("  {n} pools done");
        results.push(r);
        if planfile {
            // Two processes, as CI runs them: `plan --out FILE` on the PR, `apply FILE` on merge.
            let dir = fresh(&root, &format!("planfile-{n}"));
            let s: SaveResult = run_child(&["save", &n.to_string()], &dir);
            let a: ApplyFileResult = run_child(&["apply-file", &n.to_string(), &parallelism.to_string()], &dir);
            eprintln!("  {n} pools, saved plan done");
            saved.push((s, a));
        }
    }
    print_sizes(&results);
    print_saved(&saved);
    if latency_pools > 0 {
        let dir = fresh(&root, "latency");
        let args = ["latency", &latency_pools.to_string(), &latency_ms.to_string(), &parallelism.to_string()];
        let r: LatencyResult = run_child(&args, &dir);
        print_latency(&r);
    }
}

/// `--child size N PARALLELISM DIR` or `--child latency N MS PARALLELISM DIR`: run one
/// scenario and print its result as one JSON line.
fn child(args: &[String]) {
    let num = |i: usize| -> usize { args[i].parse().expect("numeric child argument") };
    let dir = Path::new(args.last().expect("child directory"));
    let line = match args[0].as_str() {
        "size" => serde_json::to_string(&scenario::size(dir, num(1), num(2))),
        "save" => serde_json::to_string(&scenario::save(dir, num(1))),
        "apply-file" => serde_json::to_string(&scenario::apply_file(dir, num(1), num(2))),
        "latency" => {
            serde_json::to_string(&scenario::latency(dir, num(1), Duration::from_millis(num(2) as u64), num(3)))
        }
        other => panic!("unknown child scenario `{other}`"),
    };
    println!("{RESULT}{}", line.expect("result serializes"));
}

fn run_child<T: serde::de::DeserializeOwned>(args: &[&str], dir: &Path) -> T {
    let exe = std::env::current_exe().expect("current executable");
    let out = Command::new(exe)
        .arg("--child")
        .args(args)
        .arg(dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix(RESULT));
    match (out.status.success(), line) {
        (true, Some(line)) => serde_json::from_str(line).expect("child result"),
        _ => panic!("benchmark child {args:?} failed ({}):\n{stdout}", out.status),
    }
}

fn print_sizes(results: &[SizeResult]) {
    println!("\n| benchmark | size | result | target |\n|---|---|---|---|");
    for r in results {
        let n = r.pools;
        let plan_target = if n >= 100_000 {
            "≤ 10 s"
        } else if n >= 10_000 {
            "≤ 1 s"
        } else {
            ""
        };
        let apply_target = if n >= 100_000 {
            "≤ 60 s"
        } else if n >= 10_000 {
            "≤ 5 s"
        } else {
            ""
        };
        let mib = r.peak_rss_kib as f64 / 1024.0;
        println!(
            "| parse + validate ({:.1} MiB of HCL) | {n} | {} | |",
            r.spec_bytes as f64 / 1048576.0,
            secs(r.parse_s)
        );
        println!("| plan, all create | {n} | {} | {plan_target} |", secs(r.plan_create_s));
        println!("| apply, no latency ({} calls) | {n} | {} | {apply_target} |", r.calls, secs(r.apply_s));
        println!("| plan, no-op after apply | {n} | {} | {plan_target} |", secs(r.plan_noop_s));
        let mem_target = if n >= 100_000 { "≤ 1 GiB" } else { "" };
        println!("| peak RSS (whole run) | {n} | {mib:.0} MiB | {mem_target} |");
    }
    let apply_at = |n: usize| results.iter().find(|r| r.pools == n).map(|r| r.apply_s);
    if let (Some(small), Some(big)) = (apply_at(10_000), apply_at(100_000)) {
        println!("| apply 100k / apply 10k | | {:.1}× | ≤ 12× |", big / small);
    }
}

fn print_saved(results: &[(SaveResult, ApplyFileResult)]) {
    if results.is_empty() {
        return;
    }
    println!("\nsaved plan (`plan --out FILE`, then `apply FILE` in a new process)");
    println!("| benchmark | size | result | target |\n|---|---|---|---|");
    for (s, a) in results {
        let n = s.pools;
        let big = n >= 100_000;
        let per_pool = s.file_bytes as f64 / n as f64;
        println!(
            "| plan file size | {n} | {:.1} MB ({per_pool:.0} B/pool) | {} |",
            s.file_bytes as f64 / 1e6,
            if big { "≤ 1 KB/pool" } else { "" }
        );
        println!("| plan (all create), then save | {n} | {} + {} | |", secs(s.plan_s), secs(s.save_s));
        println!("| peak RSS, plan --out | {n} | {:.0} MiB | |", s.peak_rss_kib as f64 / 1024.0);
        println!(
            "| apply FILE: parse + read plan + apply | {n} | {} + {} + {} | |",
            secs(a.parse_s),
            secs(a.load_s),
            secs(a.apply_s)
        );
        println!(
            "| peak RSS, apply FILE | {n} | {:.0} MiB | {} |",
            a.peak_rss_kib as f64 / 1024.0,
            if big { "≤ 1 GiB" } else { "" }
        );
    }
}

fn print_latency(r: &LatencyResult) {
    println!(
        "\nlatency {} ms, parallelism {}: {} pools, {} provider calls, longest chain {}",
        r.latency_ms, r.parallelism, r.pools, r.calls, r.chain
    );
    println!(
        "| apply, {} ms latency, parallelism {} | {} | {} (ideal {}, {:.2}×) | ≤ 1.25× ideal |",
        r.latency_ms,
        r.parallelism,
        r.pools,
        secs(r.measured_s),
        secs(r.ideal_s),
        r.measured_s / r.ideal_s
    );
}

fn secs(s: f64) -> String {
    if s < 1.0 { format!("{:.0} ms", s * 1000.0) } else { format!("{s:.2} s") }
}

fn env(key: &str, default: &str) -> String {
    std::env::var(key).ok().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| default.to_string())
}

/// An empty `root/name`.
fn fresh(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the benchmark directory");
    dir
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
