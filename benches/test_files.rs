//! `gpuplan test` speed: two test files of 10 runs each (every third an apply) over a
//! 20-pool sim spec, through the built binary as a user runs it. Run by hand (never a
//! timed test):
//!
//! ```text
//! cargo bench --bench test_files
//! GPUPLAN_BENCH_ROUNDS=21 cargo bench --bench test_files
//! ```
//!
//! Prints, per round, the wall time of the whole command and each file's own duration
//! (`--json`), then the medians. The target: a file under 1 s; the two files together
//! in less than the sum of both (they run in parallel).

#[path = "test_files/fixture.rs"]
mod fixture;

use std::process::Command;
use std::time::Instant;

fn main() {
    let rounds: usize = std::env::var("GPUPLAN_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(11);
    let dir = tempfile::tempdir().expect("temporary directory");
    fixture::write_twenty_pool_tests(dir.path());
    let (mut walls, mut files) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
            .current_dir(dir.path())
            .args(["test", "--json"])
            .output()
            .expect("gpuplan runs");
        let wall = started.elapsed().as_secs_f64();
        assert!(out.status.success(), "gpuplan test failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let each: Vec<f64> =
            doc["files"].as_array().into_iter().flatten().filter_map(|f| f["duration"].as_f64()).collect();
        println!("wall {wall:.3} s, files {each:?} s");
        walls.push(wall);
        files.extend(each);
    }
    println!(
        "median of {rounds}: whole command {:.3} s, one file {:.3} s (2 files × 10 runs × 20 pools)",
        median(&mut walls),
        median(&mut files)
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
