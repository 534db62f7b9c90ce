//! The 2,000-pool fleet end to end, as people and CI run it: whole `gpuplan` processes
//! (the binary this bench builds), `validate`, `plan --out FILE` from an empty state and
//! the no-op plan after an apply, each timed from spawn to exit. Every command runs in
//! rounds back to back, then spaced: a pause before each run (3 s by default), because a
//! plan on a pull request or a reconcile tick comes seconds after the last command, not in
//! a tight loop, and on a virtual machine that is slower (README, "Small fleet, end to
//! end"). With `GPUPLAN_BENCH_BASELINE` another build runs alternately in the same rounds,
//! so both columns see the same hour of the machine; its no-op plan runs on a fleet it
//! applied itself.
//!
//! ```sh
//! cargo bench --bench small_fleet
//! GPUPLAN_BENCH_BASELINE=/tmp/gpuplan-old GPUPLAN_BENCH_RUNS=31 cargo bench --bench small_fleet
//! ```
//!
//! Settings: `GPUPLAN_BENCH_POOLS` (2,000), `GPUPLAN_BENCH_RUNS` (12 per command and
//! binary and way), `GPUPLAN_BENCH_PAUSE_MS` (3,000; 0 skips the spaced rounds),
//! `GPUPLAN_BENCH_BIN` (the binary measured, default this build's), `GPUPLAN_BENCH_BASELINE`,
//! `GPUPLAN_BENCH_DIR` (where the workspaces go; default a temporary directory),
//! `GPUPLAN_BENCH_SHAPE`: `l4` (default: one-node L4 pools, on-demand, one zone, one
//! dependency in ten) or `realistic` (issue 51: A100 × 8, spot mixes, zones that fall
//! back, chains of ten, quotas, the starter policies, queued jobs; `small_fleet/realistic.rs`).
//!
//! Targets (issues 25 and 51, both shapes): `validate` ≤ 25 ms, `plan --out` ≤ 60 ms, the
//! no-op plan ≤ 35 ms.

#[path = "scale/generate.rs"]
mod generate;
#[path = "small_fleet/realistic.rs"]
mod realistic;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace([',', '_'], "").parse().ok()).unwrap_or(default)
}

/// One `gpuplan` run in `dir`, timed from spawn to exit; panics unless it succeeds (so a
/// broken build is never timed as a fast one).
fn run(bin: &Path, dir: &Path, args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = gpuplan(bin)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("gpuplan runs");
    let took = start.elapsed();
    let code = status.code().unwrap_or(-1);
    assert_eq!(code, 0, "`{} {}` in {} failed", bin.display(), args.join(" "), dir.display());
    took
}

/// A `gpuplan` command; the sim's jobs run for a day, so the queued jobs of the realistic
/// shape are still running when the no-op plans are timed.
fn gpuplan(bin: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env("GPUPLAN_SIM_JOB_DURATION", "24h");
    cmd
}

/// A spec of `pools` pools of `shape` in `dir/spec`, applied when `applied`, by `bin`.
fn workspace(root: &Path, name: &str, shape: &str, pools: usize, bin: &Path, applied: bool) -> PathBuf {
    let dir = root.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    match shape {
        "realistic" => realistic::write_spec(&dir, pools),
        _ => generate::write_spec(&dir, pools),
    }
    .expect("write the spec");
    if applied {
        run(bin, &dir, &["apply", "--auto-approve"]);
        // The fleet must have settled: the no-op plan timed below is a no-op.
        let out = gpuplan(bin).args(["plan", "--detailed-exitcode"]).current_dir(&dir).output().expect("gpuplan runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "the plan after the apply is not empty:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    dir
}

/// A command timed: its target (ms, issue 25) and whether it runs in the applied fleet.
struct Cmd<'a> {
    name: &'a str,
    target: f64,
    applied: bool,
    args: Vec<&'a str>,
}

struct Side {
    name: String,
    bin: PathBuf,
    fresh: PathBuf,
    applied: PathBuf,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn main() {
    let pools = env_usize("GPUPLAN_BENCH_POOLS", 2_000);
    let shape = std::env::var("GPUPLAN_BENCH_SHAPE").unwrap_or_else(|_| "l4".into());
    assert!(matches!(shape.as_str(), "l4" | "realistic"), "GPUPLAN_BENCH_SHAPE is `l4` or `realistic`, not `{shape}`");
    let runs = env_usize("GPUPLAN_BENCH_RUNS", 12).max(1);
    let pause = Duration::from_millis(env_usize("GPUPLAN_BENCH_PAUSE_MS", 3_000) as u64);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let root = std::env::var_os("GPUPLAN_BENCH_DIR").map_or_else(|| tmp.path().to_path_buf(), PathBuf::from);
    let bin =
        PathBuf::from(std::env::var("GPUPLAN_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_gpuplan").into()));
    let mut bins = vec![("now".to_string(), bin)];
    if let Ok(base) = std::env::var("GPUPLAN_BENCH_BASELINE") {
        bins.insert(0, ("baseline".to_string(), PathBuf::from(base)));
    }
    let sides: Vec<Side> = bins
        .into_iter()
        .map(|(name, bin)| Side {
            fresh: workspace(&root, &format!("{name}-fresh"), &shape, pools, &bin, false),
            applied: workspace(&root, &format!("{name}-applied"), &shape, pools, &bin, true),
            name,
            bin,
        })
        .collect();
    let out_file = root.join("bench.plan");
    let out_arg = out_file.to_string_lossy().into_owned();
    let commands = [
        Cmd { name: "validate", target: 25.0, applied: false, args: vec!["validate"] },
        Cmd { name: "plan --out FILE", target: 60.0, applied: false, args: vec!["plan", "--out", &out_arg] },
        Cmd { name: "plan (no-op)", target: 35.0, applied: true, args: vec!["plan"] },
    ];
    let ways: Vec<(&str, Duration)> = if pause.is_zero() {
        vec![("back to back", pause)]
    } else {
        vec![("back to back", Duration::ZERO), ("spaced", pause)]
    };
    println!(
        "{pools} pools ({shape} shape), {runs} runs per command, binary and way; spaced: {} ms before each run",
        pause.as_millis()
    );
    println!("{:<18} {:<13} {}", "command", "way", sides.iter().map(|s| format!("{:<28}", s.name)).collect::<String>());
    for Cmd { name, target, applied, args } in &commands {
        let pick = |s: &Side| if *applied { s.applied.clone() } else { s.fresh.clone() };
        for (way, wait) in &ways {
            let mut times: Vec<Vec<f64>> = vec![Vec::new(); sides.len()];
            // One warm-up run each, so the first timed run does not read the binary from disk.
            for s in &sides {
                run(&s.bin, &pick(s), args);
            }
            for _ in 0..runs {
                for (i, s) in sides.iter().enumerate() {
                    std::thread::sleep(*wait);
                    times[i].push(run(&s.bin, &pick(s), args).as_secs_f64() * 1e3);
                }
            }
            let cells: String = times
                .iter_mut()
                .map(|t| {
                    let (lo, hi) = (t.iter().copied().fold(f64::MAX, f64::min), t.iter().copied().fold(0.0, f64::max));
                    let m = median(t);
                    let mark = if m <= *target { "✓" } else { "✗" };
                    format!("{:<28}", format!("{m:.1} ms ({lo:.1}–{hi:.1}) {mark}"))
                })
                .collect();
            println!("{name:<18} {way:<13} {cells}");
        }
    }
    println!("targets: validate ≤ 25 ms, plan --out ≤ 60 ms, no-op plan ≤ 35 ms (medians)");
}
