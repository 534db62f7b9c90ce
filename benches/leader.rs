//! Reconcile as a service: how fast a follower takes over the Lease and how fast a spec
//! change starts a pass, through the built binary against the Kubernetes API server double
//! (the README's "takeover and trigger latency" table). Run by hand, never a timed test:
//!
//! ```text
//! cargo bench --bench leader
//! GPUPLAN_BENCH_LEASE=5s cargo bench --bench leader
//! ```
//!
//! Takeover after kill -9 and after SIGTERM: median of 5 rounds of three replicas with the
//! default 15 s lease (`GPUPLAN_BENCH_LEASE` to change it); spec change to pass: median of
//! 5. About two minutes.

#[path = "../tests/testsuite/leader/fixture.rs"]
mod fixture;
#[path = "../tests/testsuite/kube_fake.rs"]
#[allow(dead_code)]
mod kube_fake;
#[path = "../tests/testsuite/state_plain.rs"]
#[allow(dead_code)]
mod state_plain;

use std::time::{Duration, Instant};

use fixture::*;

fn main() {
    let lease = std::env::var("GPUPLAN_BENCH_LEASE").unwrap_or_else(|_| "15s".into());
    let (mut killed, mut termed) = (Vec::new(), Vec::new());
    for round in 0..5 {
        let (tmp, api) = setup(1);
        let ids: Vec<String> = (0..3).map(|i| format!("m{round}-{i}")).collect();
        let args = |id: &str| -> Vec<String> {
            ["--interval", "1s", "--leader-elect", "--lease-namespace", NS, "--lease-duration", &lease]
                .iter()
                .map(|s| s.to_string())
                .chain(["--lease-identity".to_string(), id.to_string()])
                .collect()
        };
        let mut rs: Vec<Replica> = ids
            .iter()
            .map(|id| {
                let a = args(id);
                Replica::spawn(tmp.path(), id, &a.iter().map(String::as_str).collect::<Vec<_>>())
            })
            .collect();
        let all: Vec<&str> = ids.iter().map(String::as_str).collect();
        let first = holder(&api, &all, Duration::from_secs(30));
        std::thread::sleep(Duration::from_secs(2));
        let i = rs.iter().position(|r| r.id == first).unwrap();
        rs[i].child.kill().unwrap();
        let t = Instant::now();
        let rest: Vec<&str> = all.iter().copied().filter(|id| *id != first).collect();
        let second = holder(&api, &rest, Duration::from_secs(120));
        killed.push(t.elapsed());
        std::thread::sleep(Duration::from_secs(2));
        let j = rs.iter().position(|r| r.id == second).unwrap();
        rs[j].signal("-TERM");
        let t = Instant::now();
        let last: Vec<&str> = rest.iter().copied().filter(|id| *id != second).collect();
        holder(&api, &last, Duration::from_secs(120));
        termed.push(t.elapsed());
        rs.clear();
    }
    let (tmp, _api) = setup(1);
    let r = Replica::spawn(tmp.path(), "solo", &["--interval", "1h"]);
    wait_for("the first pass", Duration::from_secs(30), || r.passes().len() == 1);
    let mut trigger = Vec::new();
    for n in 0..5 {
        std::thread::sleep(Duration::from_secs(2));
        std::fs::write(tmp.path().join("main.hcl"), spec(2 + n)).unwrap();
        let t = Instant::now();
        wait_for("a pass", Duration::from_secs(30), || r.passes().len() == 2 + n as usize);
        trigger.push(r.passes()[1 + n as usize].0.duration_since(t));
    }
    eprintln!("lease {lease}: kill -9 {killed:?} median {:?}", median(killed.clone()));
    eprintln!("lease {lease}: SIGTERM {termed:?} median {:?}", median(termed.clone()));
    eprintln!("spec change to pass {trigger:?} median {:?}", median(trigger.clone()));
}
