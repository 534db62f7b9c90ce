//! The engine through the real binary: plan, apply, destroy and drift against the
//! embedded sim cloud, each test in its own temporary directory.
//!
//! Helpers live here; the scenarios are in one file per theme. The sim cloud is opened
//! by the test only between gpuplan runs ([`Fleet::sim`]): it is one process at a time.
//! Nothing sleeps for a fixed time: waits poll with a deadline.

mod converge;
mod crash;
mod destroy_plan;
mod failures;
mod fallback;
mod health;
mod outputs;
mod ownership;
mod reconcile;
mod saved_inputs;
mod saved_plan;
mod sensitive;
mod standing;
mod var_files;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuplan::providers::sim::{SimCloud, SimConfig};
use gpuplan::providers::{Capacity, Node, TAG_ADDRESS, TAG_MANAGED};
use gpuplan::state::State;
use serde_json::Value as Json;

/// A spec directory of its own, with `state/` beside it.
pub struct Fleet {
    dir: tempfile::TempDir,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panic with both streams unless the exit code is `code`.
    #[track_caller]
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(self.code, code, "exit code\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        self
    }
}

impl Fleet {
    pub fn new(spec: &str) -> Fleet {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("main.hcl"), spec).expect("write spec");
        Fleet { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write_spec(&self, spec: &str) {
        std::fs::write(self.path().join("main.hcl"), spec).expect("write spec");
    }

    pub fn state_path(&self) -> PathBuf {
        self.path().join("state/default.json")
    }

    /// The state file as it is on disk (no journal folded in).
    pub fn state(&self) -> State {
        let bytes = std::fs::read(self.state_path()).expect("state file exists");
        serde_json::from_slice(&bytes).expect("state file parses")
    }

    /// A `gpuplan` command in this directory with plain output and a clean environment.
    fn command(&self, env: &[(&str, &str)]) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gpuplan"));
        cmd.current_dir(self.path()).env("NO_COLOR", "1").env("COLUMNS", "100").env_remove("GPUPLAN_WORKSPACE");
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GPUPLAN_")) {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[])
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let out = assert_cmd::Command::from_std(self.command(env)).args(args).output().expect("gpuplan runs");
        Run {
            code: out.status.code().expect("exit code"),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Start gpuplan in the background (output discarded).
    pub fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> Child {
        self.command(env).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("gpuplan starts")
    }

    pub fn plan_json(&self) -> Json {
        let r = self.run(&["plan", "--json"]).expect(0);
        serde_json::from_str(&r.stdout).expect("plan --json is JSON")
    }

    /// Open the sim cloud of this fleet while no gpuplan runs, and close it again.
    pub fn sim<T>(&self, f: impl FnOnce(&SimCloud) -> T) -> T {
        let path = self.path().join("state/default.sim.json");
        let cloud: Arc<SimCloud> =
            SimCloud::open_with_timeout(&path, SimConfig::default(), Duration::from_secs(10)).expect("sim opens");
        f(&cloud)
    }

    /// Live nodes carrying gpuplan's tags.
    pub fn live_tagged(&self) -> Vec<Node> {
        self.sim(|c| c.nodes()).into_iter().filter(|n| n.is_live() && n.tags.contains_key(TAG_MANAGED)).collect()
    }
}

/// Diagnostics as one line: miette wraps long messages and draws a gutter.
pub fn flat(s: &str) -> String {
    s.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Live tagged nodes of one pool, split (on-demand, spot).
pub fn mix_of(nodes: &[Node], pool: &str) -> (usize, usize) {
    let of_pool: Vec<&Node> = nodes.iter().filter(|n| n.tags.get(TAG_ADDRESS) == Some(pool)).collect();
    let spot = of_pool.iter().filter(|n| n.capacity == Capacity::Spot).count();
    (of_pool.len() - spot, spot)
}

/// The change for `address` in a `plan --json` document.
pub fn change<'a>(plan: &'a Json, address: &str) -> &'a Json {
    plan["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["address"] == address)
        .unwrap_or_else(|| panic!("no change for `{address}` in {plan:#}"))
}

/// Nodes a pool change creates, summed over its batches.
pub fn created(change: &Json) -> u64 {
    change["pool"]["creates"].as_array().map_or(0, |b| b.iter().map(|b| b["count"].as_u64().unwrap_or(0)).sum())
}

/// Poll `f` every 10 ms until it is true or `limit` passes.
pub fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One sim pool: `desired` on-demand L4 nodes in `zones`, with optional extra lines.
pub fn pool(name: &str, zones: &[&str], desired: u32, extra: &str) -> String {
    let zones: Vec<String> = zones.iter().map(|z| format!("{z:?}")).collect();
    format!(
        r#"
gpu_pool "{name}" {{
  provider       = "sim"
  zones          = [{}]
  gpu            = "L4"
  gpus_per_node  = 1
  instance_types = ["g6.xlarge"]

  nodes {{
    min     = 0
    desired = {desired}
    max     = 16
  }}
{extra}
}}
"#,
        zones.join(", ")
    )
}

pub const PROVIDER: &str = "provider \"sim\" {\n  region = \"us-east-1\"\n}\n";

/// A small fleet: two pools and a quota over them.
pub fn small_spec(train_desired: u32) -> String {
    format!(
        "{PROVIDER}{}{}\nquota \"team\" {{\n  pools    = [gpu_pool.train, gpu_pool.serve]\n  max_gpus = 32\n}}\n",
        pool("train", &["us-east-1a", "us-east-1b"], train_desired, ""),
        pool("serve", &["us-east-1a"], 1, "")
    )
}
