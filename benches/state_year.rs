//! A year of daily churn on `gpuplan init`'s fleet (issue 51): 4 spot nodes and 2 jobs,
//! then each day one spot reclaim (`gpuplan sim interrupt`), a day of sim time
//! (`gpuplan sim advance 1d`) and one `gpuplan reconcile --once`, all whole processes of
//! the binary this bench builds. At day 30 the state folder is copied aside; at the end
//! the bench prints both folders' sizes and times the no-op plan on each, alternately
//! (so both see the same minute of the machine), and compares them with the targets of
//! docs/design/state-and-locks.md, "State that stays small".
//!
//! ```sh
//! cargo bench --bench state_year
//! GPUPLAN_BENCH_BIN=target/debug/gpuplan GPUPLAN_BENCH_DAYS=120 cargo bench --bench state_year
//! ```
//!
//! Settings: `GPUPLAN_BENCH_DAYS` (365), `GPUPLAN_BENCH_RUNS` (15 timed plans per
//! folder), `GPUPLAN_BENCH_BIN` (the binary, default this build's), `GPUPLAN_BENCH_DIR`
//! (where the fleet goes; default a temporary directory).
//!
//! Targets: folder(365) ≤ 1.5 × folder(30), no-op plan(365) ≤ 1.2 × plan(30).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const VARS: [&str; 4] = ["--var", "nodes=4", "--var", "jobs=2"];
const KEEP_DAY: usize = 30;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace([',', '_'], "").parse().ok()).unwrap_or(default)
}

/// Run one command to its end; panics (ending the bench) if it fails.
fn run(bin: &Path, dir: &Path, args: &[&str]) -> f64 {
    let started = Instant::now();
    let out = Command::new(bin)
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .env("GPUPLAN_SIM_START", "2026-01-01T00:00:00Z")
        .env_remove("GPUPLAN_WORKSPACE")
        .stdin(Stdio::null())
        .output()
        .expect("gpuplan starts");
    let ms = started.elapsed().as_secs_f64() * 1e3;
    assert!(
        out.status.success(),
        "`gpuplan {}` failed in {}:\n{}{}",
        args.join(" "),
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ms
}

fn with_vars<'a>(args: &[&'a str]) -> Vec<&'a str> {
    args.iter().copied().chain(VARS).collect()
}

/// Bytes of every file in `dir/state`.
fn folder_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("state"))
        .expect("the state folder")
        .map(|e| e.expect("an entry").metadata().expect("its size").len())
        .sum()
}

fn copy_state(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("state")).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("the fleet") {
        let entry = entry.expect("an entry");
        if entry.file_type().expect("its type").is_dir() {
            copy_state(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let days = env_usize("GPUPLAN_BENCH_DAYS", 365).max(KEEP_DAY + 1);
    let runs = env_usize("GPUPLAN_BENCH_RUNS", 15).max(1);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let root = std::env::var_os("GPUPLAN_BENCH_DIR").map_or_else(|| tmp.path().to_path_buf(), PathBuf::from);
    let bin =
        PathBuf::from(std::env::var("GPUPLAN_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_gpuplan").into()));
    let fleet = root.join("fleet");
    let early = root.join(format!("day-{KEEP_DAY}"));
    std::fs::create_dir_all(&fleet).expect("mkdir");
    run(&bin, &fleet, &["init"]);
    run(&bin, &fleet, &with_vars(&["apply", "--auto-approve"]));
    let started = Instant::now();
    for day in 1..=days {
        run(&bin, &fleet, &["sim", "interrupt", "starter", "--count", "1"]);
        run(&bin, &fleet, &["sim", "advance", "1d"]);
        run(&bin, &fleet, &with_vars(&["reconcile", "--once"]));
        if day == KEEP_DAY {
            copy_state(&fleet, &early);
        }
    }
    println!("replayed {days} days in {:.0} s", started.elapsed().as_secs_f64());
    let plan = with_vars(&["plan", "--detailed-exitcode"]);
    let (mut at_early, mut at_end) = (Vec::new(), Vec::new());
    run(&bin, &early, &plan);
    run(&bin, &fleet, &plan);
    for _ in 0..runs {
        at_early.push(run(&bin, &early, &plan));
        at_end.push(run(&bin, &fleet, &plan));
    }
    let (size_early, size_end) = (folder_bytes(&early), folder_bytes(&fleet));
    let (plan_early, plan_end) = (median(at_early), median(at_end));
    let mark = |ok: bool| if ok { "✓" } else { "✗" };
    let size_ratio = size_end as f64 / size_early as f64;
    let plan_ratio = plan_end / plan_early;
    println!("| measure | day {KEEP_DAY} | day {days} | ratio | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| state folder | {:.1} KiB | {:.1} KiB | {size_ratio:.2}× | ≤ 1.5× {} |",
        size_early as f64 / 1024.0,
        size_end as f64 / 1024.0,
        mark(size_ratio <= 1.5)
    );
    println!(
        "| no-op plan (median of {runs}) | {plan_early:.1} ms | {plan_end:.1} ms | {plan_ratio:.2}× | ≤ 1.2× {} |",
        mark(plan_ratio <= 1.2)
    );
}
