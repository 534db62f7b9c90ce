//! A big state (issue 51, "Big states stay light"): N pools of 100 H100 × 8 nodes on the
//! sim cloud (its on-demand capacity raised so that every node launches), applied in one
//! whole process of the binary; the bench prints the state file's bytes a node, what the
//! remote backend's envelope would upload (gzip, base64), the apply's time, and the no-op
//! plan's median time, and compares with the target of docs/design/state-and-locks.md,
//! "State that stays small": 100,000 nodes in at most 20 MB of local state.
//!
//! ```sh
//! cargo bench --bench big_state                             # 1,000 pools: 100,000 nodes
//! cargo bench --bench big_state --profile dev               # reuses the test build
//! GPUPLAN_BENCH_POOLS=50 GPUPLAN_BENCH_BIN=/tmp/gpuplan-old cargo bench --bench big_state
//! ```
//!
//! Settings: `GPUPLAN_BENCH_POOLS` (1,000), `GPUPLAN_BENCH_RUNS` (3 no-op plans),
//! `GPUPLAN_BENCH_BIN` (the binary, default this build's), `GPUPLAN_BENCH_DIR` (where the
//! fleet goes; default a temporary directory).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const NODES_PER_POOL: usize = 100;
/// Bytes a node the state may take: 20 MB for 100,000 nodes.
const TARGET_BYTES_PER_NODE: f64 = 200.0;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace([',', '_'], "").parse().ok()).unwrap_or(default)
}

/// Run one command to its end; panics (ending the bench) if it fails. Returns its time.
fn run(bin: &Path, dir: &Path, args: &[&str]) -> f64 {
    let started = Instant::now();
    let out = Command::new(bin)
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
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

fn spec(pools: usize) -> String {
    let mut s = String::from("provider \"sim\" {\n  region = \"us-east-1\"\n}\n");
    for i in 0..pools {
        s.push_str(&format!(
            "\ngpu_pool \"h{i}\" {{\n  provider      = \"sim\"\n  gpu           = \"H100\"\n  gpus_per_node = 8\n  \
             labels = {{ team = \"research\", owner = \"platform\" }}\n  nodes {{\n    min     = 0\n    \
             desired = {NODES_PER_POOL}\n    max     = {NODES_PER_POOL}\n  }}\n}}\n"
        ));
    }
    s
}

/// The envelope's body for `text`: gzip at the envelope's level, then base64 (4 bytes per 3).
fn envelope_bytes(text: &[u8]) -> usize {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text).expect("gzip");
    gz.finish().expect("gzip").len().div_ceil(3) * 4
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let pools = env_usize("GPUPLAN_BENCH_POOLS", 1_000).max(1);
    let runs = env_usize("GPUPLAN_BENCH_RUNS", 3).max(1);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let root = std::env::var_os("GPUPLAN_BENCH_DIR").map_or_else(|| tmp.path().to_path_buf(), PathBuf::from);
    let bin =
        PathBuf::from(std::env::var("GPUPLAN_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_gpuplan").into()));
    let fleet = root.join("big-state");
    std::fs::create_dir_all(&fleet).expect("mkdir");
    std::fs::write(fleet.join("main.hcl"), spec(pools)).expect("the spec");
    let nodes = pools * NODES_PER_POOL;
    let limit = nodes.to_string();
    for zone in ["us-east-1a", "us-east-1b", "us-east-1c"] {
        run(&bin, &fleet, &["sim", "capacity", zone, "--on-demand", "--limit", &limit]);
    }
    let apply = run(&bin, &fleet, &["apply", "--auto-approve"]);
    let plan: Vec<f64> = (0..runs).map(|_| run(&bin, &fleet, &["plan", "--detailed-exitcode"])).collect();
    let text = std::fs::read(fleet.join("state/default.json")).expect("the state file");
    let per_node = text.len() as f64 / nodes as f64;
    let remote = envelope_bytes(&text) as f64 / nodes as f64;
    let mark = if per_node <= TARGET_BYTES_PER_NODE { "✓" } else { "✗" };
    println!("| measure | {nodes} nodes ({pools} pools of {NODES_PER_POOL}) | target |");
    println!("|---|---|---|");
    println!(
        "| local state file | {:.1} MB ({per_node:.0} bytes a node) | ≤ {TARGET_BYTES_PER_NODE:.0} bytes a node {mark} |",
        text.len() as f64 / 1e6
    );
    println!("| remote state object (gzip + base64) | {remote:.0} bytes a node | |");
    println!("| apply, all create | {:.2} s | |", apply / 1e3);
    println!("| no-op plan (median of {runs}) | {:.2} s | |", median(plan) / 1e3);
}
