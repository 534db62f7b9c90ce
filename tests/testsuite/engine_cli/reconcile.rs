//! `gpuplan reconcile` through the binary: restoring the spec after out-of-band changes,
//! the autoscaler's count, `--max-destroy`, `--dry-run`, `--json`, and the metrics endpoint.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use gpuplan::addr::{Address, Kind};
use gpuplan::providers::sim::{SimCloud, SimConfig, SimProvider};
use gpuplan::providers::{JobPort, LaunchJob};

use crate::engine_cli::{Fleet, PROVIDER, pool, small_spec, wait_until};

#[test]
fn reconcile_after_out_of_band_changes_restores_the_spec() {
    let fleet = Fleet::new(&small_spec(3));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    let victim = fleet.live_tagged().into_iter().find(|n| n.pool.name == "train").expect("a train node").id;
    fleet.sim(|c| c.terminate_out_of_band(&victim)).expect("terminated");
    assert_eq!(fleet.live_tagged().len(), 3);

    let r = fleet.run(&["reconcile", "--once", "--detailed-exitcode"]).expect(2);
    assert!(r.stdout.contains(&format!("node {victim} in")), "{}", r.stdout);
    assert!(r.stdout.contains("terminated outside gpuplan"), "{}", r.stdout);
    assert!(r.stdout.contains("applied (0 to add, 1 to change, 0 to destroy)"), "{}", r.stdout);
    assert_eq!(fleet.live_tagged().len(), 4);

    // Converged: the next pass has nothing to do, and plan agrees.
    let again = fleet.run(&["reconcile", "--once", "--detailed-exitcode"]).expect(0);
    assert!(again.stdout.contains("no changes"), "{}", again.stdout);
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
}

/// One L4 pool with an autoscaler; jobs in the sim run for an hour.
fn autoscaled_spec() -> String {
    let nodes = "  nodes {\n    min     = 1\n    desired = 1\n    max     = 3\n  }\n";
    let p = pool("train", &["us-east-1a"], 1, "")
        .replace("  nodes {\n    min     = 0\n    desired = 1\n    max     = 16\n  }\n", nodes);
    format!(
        "{PROVIDER}{p}\nautoscaler \"train\" {{\n  pool              = gpu_pool.train\n  utilization_above = 80\n  cooldown          = \"1h\"\n}}\n"
    )
}

/// Launch a job on `node` in the fleet's sim cloud, running for an hour.
fn run_job_on(fleet: &Fleet, node: &str) {
    let path = fleet.path().join("state/default.sim.json");
    let config = SimConfig { job_duration: Duration::from_secs(3600), ..SimConfig::default() };
    let cloud = SimCloud::open_with_timeout(&path, config, Duration::from_secs(10)).expect("sim opens");
    let job = LaunchJob {
        job: Address::new(Kind::Job, "sweep"),
        pool: Address::new(Kind::GpuPool, "train"),
        node_id: node.to_string(),
        region: String::new(),
        image: "img".into(),
        command: vec![],
        env: Default::default(),
        secrets: Default::default(),
        gpus: 1,
        attempt: 1,
        token: format!("t-{node}"),
        shape: None,
        max_runtime_secs: None,
        keep_node: true,
        kube: None,
        readiness: Default::default(),
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(SimProvider::new(cloud).launch_job(&job)).expect("job launches");
}

/// The text report is a text view: its autoscale line uses the text view's arrow
/// (docs/design/cli.md, "one arrow per format").
#[test]
fn the_text_reports_autoscale_line_uses_the_text_views_arrow() {
    let fleet = Fleet::new(&autoscaled_spec());
    fleet.run(&["reconcile", "--once"]).expect(0);
    let first = fleet.live_tagged();
    run_job_on(&fleet, &first[0].id);
    let up = fleet.run(&["reconcile", "--once"]).expect(0);
    assert!(up.stdout.contains("autoscale gpu_pool.train: up 1 -> 2: utilization 100% > 80%"), "{}", up.stdout);
    assert!(!up.stdout.contains('→'), "one arrow in text: {}", up.stdout);
}

#[test]
fn the_autoscalers_count_is_kept_not_reported_as_drift_and_restored() {
    let fleet = Fleet::new(&autoscaled_spec());
    fleet.run(&["reconcile", "--once"]).expect(0);
    let first = fleet.live_tagged();
    assert_eq!(first.len(), 1);
    run_job_on(&fleet, &first[0].id);

    // The only node is busy: 100% > 80% scales the pool to 2, beyond `desired = 1`.
    let up = fleet.run(&["reconcile", "--once", "--json"]).expect(0);
    let doc: serde_json::Value = serde_json::from_str(up.stdout.trim()).expect("one JSON object");
    assert_eq!(doc["outcome"], "applied", "{doc:#}");
    assert_eq!(doc["autoscale"][0]["action"], "up", "{doc:#}");
    assert_eq!(doc["autoscale"][0]["reason"], "utilization 100% > 80%", "{doc:#}");
    let change = crate::engine_cli::change(&doc["plan"], "gpu_pool.train");
    assert!(change["reasons"].to_string().contains("autoscale: utilization 100% > 80%"), "{change:#}");
    assert_eq!(fleet.live_tagged().len(), 2);

    // Neither plan nor drift calls the autoscaler's 2 nodes a difference from `desired = 1`.
    let plan = fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
    assert!(plan.stdout.contains("No changes"), "{}", plan.stdout);
    fleet.run(&["drift", "--detailed-exitcode"]).expect(0);
    assert_eq!(fleet.state().resources["gpu_pool.train"].config.to_value()["nodes"]["desired"], 2);

    // A node lost outside gpuplan comes back to the autoscaler's count (cooldown holds it at 2).
    let idle = fleet.live_tagged().into_iter().find(|n| n.id != first[0].id).expect("the new node").id;
    fleet.sim(|c| c.terminate_out_of_band(&idle)).expect("terminated");
    let fix = fleet.run(&["reconcile", "--once"]).expect(0);
    assert!(fix.stdout.contains("in cooldown"), "{}", fix.stdout);
    assert_eq!(fleet.live_tagged().len(), 2);
}

#[test]
fn max_destroy_refuses_a_large_destroy_and_dry_run_applies_nothing() {
    let fleet = Fleet::new(&small_spec(5));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    fleet.write_spec(&small_spec(1));

    let dry = fleet.run(&["reconcile", "--once", "--dry-run", "--detailed-exitcode"]).expect(2);
    assert!(dry.stdout.contains("dry run, nothing applied"), "{}", dry.stdout);
    assert_eq!(fleet.live_tagged().len(), 6);

    let refused = fleet.run(&["reconcile", "--once", "--max-destroy", "2", "--json"]).expect(3);
    let doc: serde_json::Value = serde_json::from_str(refused.stdout.trim()).expect("JSON");
    assert_eq!(doc["outcome"], "max-destroy", "{doc:#}");
    assert_eq!(doc["max_destroy"], serde_json::json!({"nodes": 4, "limit": 2}));
    assert_eq!(fleet.live_tagged().len(), 6, "a refused pass terminated nodes");

    let text = fleet.run(&["reconcile", "--once", "--max-destroy", "3"]).expect(3);
    assert!(text.stdout.contains("would terminate 4 nodes, more than --max-destroy 3"), "{}", text.stdout);
    assert!(text.stdout.contains("hint:"), "{}", text.stdout);

    fleet.run(&["reconcile", "--once", "--max-destroy", "4"]).expect(0);
    assert_eq!(fleet.live_tagged().len(), 2);
}

/// GET `path` from `addr`; the response's status line and body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut response = String::new();
    s.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    (head.to_string(), body.to_string())
}

#[test]
fn metrics_endpoint_answers_on_loopback_and_sigterm_stops_the_loop() {
    let fleet = Fleet::new(&small_spec(2));
    let mut child = fleet.spawn(&["reconcile", "--interval", "1h", "--metrics-addr", "127.0.0.1:0"], &[]);
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let addr = loop {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("the metrics address on stderr");
        lines.push(line.clone());
        if let Some(rest) = line.strip_prefix("Serving metrics on http://") {
            break rest.trim_end_matches("/metrics").to_string();
        }
    };
    let mut body = String::new();
    wait_until(Duration::from_secs(60), "the first pass in the metrics", || {
        let (head, b) = get(&addr, "/metrics");
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
        body = b;
        body.contains("gpuplan_reconcile_runs_total 1\n")
    });
    for expected in [
        "# TYPE gpuplan_pools gauge\ngpuplan_pools 2\n",
        "# HELP gpuplan_gpus ",
        "gpuplan_gpus{pool=\"gpu_pool.train\",state=\"running\",capacity=\"on-demand\"} 2\n",
        "gpuplan_gpus{pool=\"gpu_pool.serve\",state=\"running\",capacity=\"on-demand\"} 1\n",
        "gpuplan_gpus{pool=\"gpu_pool.train\",state=\"reclaimed\",capacity=\"spot\"} 0\n",
        "gpuplan_pool_nodes_desired{pool=\"gpu_pool.train\"} 2\n",
        "gpuplan_queued_jobs{pool=\"gpu_pool.train\"} 0\n",
        "# TYPE gpuplan_hourly_cost_usd gauge\ngpuplan_hourly_cost_usd ",
        "gpuplan_drift_items 0\n",
        "gpuplan_reconcile_failures_total 0\n",
        "# TYPE gpuplan_last_success_timestamp_seconds gauge\ngpuplan_last_success_timestamp_seconds ",
        "# TYPE gpuplan_spend_month_to_date_usd gauge\n",
        "# TYPE gpuplan_quota_spend_month_to_date_usd gauge\n",
    ] {
        assert!(body.contains(expected), "missing {expected:?} in\n{body}");
    }
    let cost: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix("gpuplan_hourly_cost_usd "))
        .and_then(|v| v.parse().ok())
        .expect("a cost value");
    assert!(cost > 0.0, "{body}");
    let (head, _) = get(&addr, "/other");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");

    let pid = child.id().to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
    assert!(killed.success());
    let status = child.wait().expect("gpuplan exits");
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
        lines.push(line);
    }
    assert_eq!(status.code(), Some(0), "{}", lines.join("\n"));
    assert!(lines.iter().any(|l| l == "Reconcile stopped."), "{}", lines.join("\n"));
    // The lock was released: another command runs at once.
    fleet.run(&["plan", "--detailed-exitcode"]).expect(0);
}

#[test]
fn a_second_reconciler_never_acts_while_the_state_is_locked() {
    let fleet = Fleet::new(&small_spec(1));
    fleet.run(&["apply", "--auto-approve"]).expect(0);
    fleet.write_spec(&small_spec(2));
    let backend = gpuplan::state::LocalBackend::new(fleet.state_path());
    let held = backend.lock("apply", Duration::ZERO).expect("the test takes the lock");

    // `--once` fails naming the holder; nothing is launched.
    let once = fleet.run(&["reconcile", "--once"]).expect(1);
    assert!(once.stderr.contains("is locked"), "{}", once.stderr);
    assert_eq!(fleet.live_tagged().len(), 2);

    // The loop skips the round, says so, and stops cleanly on SIGTERM.
    let mut child = fleet.spawn(&["reconcile", "--interval", "1h"], &[]);
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
    let skipped = lines.find(|l| l.starts_with("Skipping this round")).expect("the loop reports the skip");
    assert!(skipped.contains("another run holds the state lock"), "{skipped}");
    assert_eq!(fleet.live_tagged().len(), 2, "a skipped round acted");
    let killed = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    let rest: Vec<String> = lines.collect();
    assert_eq!(child.wait().expect("exits").code(), Some(0), "{rest:?}");
    drop(held);

    // With the lock free, the next pass acts.
    fleet.run(&["reconcile", "--once"]).expect(0);
    assert_eq!(fleet.live_tagged().len(), 3);
}
