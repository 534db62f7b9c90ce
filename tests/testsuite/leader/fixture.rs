//! What the leader-election tests and the takeover benchmark (`benches/leader.rs`) share:
//! replicas of `gpuplan reconcile --leader-elect` as child processes, with every line
//! they print and when, on a spec folder wired to the Kubernetes API server double.
#![allow(dead_code)] // the benchmark uses a part of it

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::kube_fake::{FakeApi, kubeconfig_for};

pub const NS: &str = "gpuplan";
pub const LEASE: &str = "gpuplan";
pub const LEASE_DURATION: Duration = Duration::from_secs(3);

pub fn spec(desired: u32) -> String {
    format!(
        r#"provider "sim" {{}}

gpu_pool "train" {{
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1
  nodes {{
    min     = 0
    desired = {desired}
    max     = 8
  }}
  mix {{
    on_demand_base = {desired}
    spot_percent   = 0
  }}
}}
"#
    )
}

/// One replica: its child process and every line it printed, with when.
pub struct Replica {
    pub id: String,
    pub child: Child,
    out: Arc<Mutex<Vec<(Instant, String)>>>,
    err: Arc<Mutex<Vec<(Instant, String)>>>,
}

pub fn collect(stream: impl Read + Send + 'static) -> Arc<Mutex<Vec<(Instant, String)>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            sink.lock().unwrap().push((Instant::now(), line));
        }
    });
    lines
}

impl Replica {
    pub fn start(dir: &Path, id: &str) -> Replica {
        let duration = format!("{}s", LEASE_DURATION.as_secs());
        Replica::spawn(
            dir,
            id,
            &[
                "--interval",
                "1s",
                "--leader-elect",
                "--lease-namespace",
                NS,
                "--lease-duration",
                &duration,
                "--lease-identity",
                id,
                "--lock-timeout",
                "5s",
            ],
        )
    }

    /// `gpuplan reconcile --json --metrics-addr 127.0.0.1:0 ARGS...` in `dir`.
    pub fn spawn(dir: &Path, id: &str, args: &[&str]) -> Replica {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
            .current_dir(dir)
            .env("NO_COLOR", "1")
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env_remove("POD_NAME")
            .env_remove("GPUPLAN_WORKSPACE")
            .args(["reconcile", "--json", "--metrics-addr", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpuplan starts");
        let out = collect(child.stdout.take().unwrap());
        let err = collect(child.stderr.take().unwrap());
        Replica { id: id.to_string(), child, out, err }
    }

    /// The passes this replica ran: (when printed, outcome).
    pub fn passes(&self) -> Vec<(Instant, String)> {
        self.out
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(at, l)| {
                let v: serde_json::Value = serde_json::from_str(l).ok()?;
                Some((*at, v["outcome"].as_str()?.to_string()))
            })
            .collect()
    }

    pub fn stderr(&self) -> String {
        self.err.lock().unwrap().iter().map(|(_, l)| format!("{l}\n")).collect()
    }

    pub fn metrics_addr(&self) -> String {
        wait_for("the metrics address", Duration::from_secs(20), || self.stderr().contains("Serving metrics on"));
        let err = self.stderr();
        let line = err.lines().find(|l| l.contains("Serving metrics on")).unwrap();
        line.trim_start_matches("Serving metrics on http://").trim_end_matches("/metrics").to_string()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap().success();
        assert!(ok, "kill {sig} {}", self.child.id());
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        // A test that failed half way must not leave replicas running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` on the replica's metrics address: (status, body).
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("the metrics server answers");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

pub fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn setup(desired: u32) -> (tempfile::TempDir, FakeApi) {
    let api = FakeApi::start();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("kubeconfig"), kubeconfig_for(&api.url)).unwrap();
    std::fs::write(tmp.path().join("main.hcl"), spec(desired)).unwrap();
    (tmp, api)
}

/// The pool's nodes in the state file (0 before the first write; it is replaced by rename).
pub fn nodes(dir: &Path) -> usize {
    let Ok(bytes) = std::fs::read(dir.join("state/default.json")) else { return 0 };
    let state: serde_json::Value =
        crate::state_plain::plain(serde_json::from_slice(&bytes).expect("a whole state file"));
    state["resources"]["gpu_pool.train"]["nodes"].as_array().map_or(0, Vec::len)
}

/// The holder now, once the lease names one of `ids`.
pub fn holder(api: &FakeApi, ids: &[&str], timeout: Duration) -> String {
    let mut found = None;
    wait_for("a lease holder", timeout, || {
        found = api.lease_holder(NS, LEASE).filter(|h| ids.contains(&h.as_str()));
        found.is_some()
    });
    found.unwrap()
}

pub fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}
