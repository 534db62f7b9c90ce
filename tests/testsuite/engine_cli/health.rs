//! GPU health under `gpuplan reconcile` (docs/design/gpu-health.md): a pass repairs an
//! unhealthy node on its own, within `max_repairs`, and the metrics count it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::engine_cli::{Fleet, small_spec, wait_until};

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut response = String::new();
    s.read_to_string(&mut response).expect("read");
    response.split_once("\r\n\r\n").expect("a head and a body").1.to_string()
}

#[test]
fn reconcile_replaces_an_unhealthy_node_and_counts_it() {
    let fleet = Fleet::new(&small_spec(2));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    let bad = fleet.live_tagged().into_iter().find(|n| n.pool.name == "train").expect("a train node").id;
    fleet.run(&["sim", "fault", &bad, "--xid", "79"]).expect(0);

    let mut child = fleet.spawn(&["reconcile", "--interval", "1h", "--metrics-addr", "127.0.0.1:0"], &[]);
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            // The receiver is gone once the test has its address: lines after are not needed.
            let _ = tx.send(line);
        }
    });
    let addr = loop {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("the metrics address on stderr");
        if let Some(rest) = line.strip_prefix("Serving metrics on http://") {
            break rest.trim_end_matches("/metrics").to_string();
        }
    };
    let mut body = String::new();
    wait_until(Duration::from_secs(60), "the first pass in the metrics", || {
        body = get(&addr, "/metrics");
        body.contains("gpuplan_reconcile_runs_total 1\n")
    });
    let pid = child.id().to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
    assert!(killed.success());
    assert_eq!(child.wait().expect("gpuplan exits").code(), Some(0));

    for expected in [
        "# TYPE gpuplan_repairs_total counter\ngpuplan_repairs_total{pool=\"gpu_pool.train\"} 1\n",
        "# TYPE gpuplan_node_unhealthy gauge\ngpuplan_node_unhealthy{pool=\"gpu_pool.train\",signal=\"xid_fatal\"} 1\n",
    ] {
        assert!(body.contains(expected), "missing {expected:?} in\n{body}");
    }
    let live: Vec<String> = fleet.live_tagged().into_iter().filter(|n| n.pool.name == "train").map(|n| n.id).collect();
    assert_eq!(live.len(), 2, "{live:?}");
    assert!(!live.contains(&bad), "the pass replaced {bad}: {live:?}");
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
}
