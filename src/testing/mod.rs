//! `gpuplan test`: a fleet repository's own tests, `tests/*.test.hcl` beside the specs
//! (not this crate's tests, which live in `src/**/tests.rs` and `tests/testsuite/`).
//!
//! A test file holds `variables {}` and ordered `run "NAME" {}` blocks; each file runs
//! against one private sim world ([`world`]) in a temporary folder, files in parallel.
//! A run loads the spec with its variables, shapes the world (`sim {}`), plans, applies
//! when `command = apply` (the default) and checks its `assert`s and `expect_failures`
//! against `plan` (the `plan --json` document plus `pools` and `quotas` as policies see
//! them), `state`, `output` and `var`.
//!
//! - `file.rs`: parse test files (located diagnostics; `validate` uses it too).
//! - `world.rs`: the private world and the spec as it runs there.
//! - `run.rs`: one file's runs, in order.
//! - `check.rs`: asserts and expected failures → pass or fail with the values that decided.
//! - `report.rs`, `junit.rs`: the text, JSON and JUnit XML views.

pub mod check;
pub mod file;
pub mod junit;
pub mod report;
pub mod run;
pub mod world;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use file::{TestFile, test_files};

/// What one `gpuplan test` runs.
pub struct Options {
    /// The spec folder.
    pub dir: PathBuf,
    /// The process environment (for `env()` in specs and the sim's start time).
    pub env: BTreeMap<String, String>,
    /// Policies, as `plan` loads them.
    pub policies: Vec<crate::policy::Policy>,
    /// `--run NAME`: only runs of these names (empty: all).
    pub runs: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Error,
    /// Not run: an earlier run of the file broke, so the state it would see is unknown.
    Skip,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Error => "error",
            Status::Skip => "skip",
        }
    }
}

/// Why a run did not pass: where, what, and the values that decided it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// `tests/x.test.hcl:12:17`.
    pub location: String,
    pub message: String,
    /// The operands that decided a false assert, e.g. `plan.summary.destroy` = `2`.
    pub values: Vec<Shown>,
}

/// An expression as written and its value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shown {
    pub expression: String,
    pub value: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub name: String,
    /// Where the run block starts.
    pub location: String,
    pub status: Status,
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
    pub failures: Vec<Failure>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub file: String,
    pub runs: Vec<RunReport>,
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub files: Vec<FileReport>,
    /// How long all files took together (they run in parallel, so less than their sum).
    #[serde(skip)]
    pub duration: Duration,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub passed: usize,
    /// Failed and errored runs.
    pub failed: usize,
    pub skipped: usize,
}

impl Report {
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in self.files.iter().flat_map(|f| &f.runs) {
            match r.status {
                Status::Pass => c.passed += 1,
                Status::Fail | Status::Error => c.failed += 1,
                Status::Skip => c.skipped += 1,
            }
        }
        c
    }

    pub fn passed(&self) -> bool {
        let c = self.counts();
        c.failed == 0 && c.skipped == 0
    }
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// Run every file, files in parallel (one thread each, as many at once as there are
/// cores), runs of a file in order. Reports come back in the files' order.
pub fn run_files(files: &[TestFile], sources: &crate::diag::Sources, opts: &Options) -> Report {
    let started = std::time::Instant::now();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<BTreeMap<usize, FileReport>> = std::sync::Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for _ in 0..workers.min(files.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(f) = files.get(i) else { break };
                    let report = run::file(f, sources, opts);
                    results.lock().unwrap_or_else(|e| e.into_inner()).insert(i, report);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    Report { files: results.into_values().collect(), duration: started.elapsed() }
}

#[cfg(test)]
mod tests;
