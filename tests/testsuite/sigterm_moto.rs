//! SIGTERM in the middle of job launches on an AWS pool (moto, through a counting proxy):
//! no launch starts after the signal, and every instance launched is a run in state.
//!
//! The proxy in front of moto holds every `RunInstances` from the third on, so the apply's
//! `--parallelism` permits all end up held by launches in flight; only then is SIGTERM
//! sent. Every launch the proxy sees after gpuplan said it was interrupted (a `ClientToken`
//! not seen before) is one that started after the signal.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::Filter;

use crate::aws::cli::{ACCESS_KEY, SECRET_KEY, lineage, pool_spec};
use crate::aws::fake_ec2::{FakeEc2, Request};

const JOBS: usize = 50;
const PARALLELISM: usize = 4;
/// `RunInstances` calls answered before the proxy starts holding them.
const ANSWERED: usize = 2;

pub(crate) fn endpoint() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`, which starts moto"),
    }
}

/// 50 one-replica jobs on a pool of no nodes: each launch boots an instance of its own.
fn spec(url: &str, region: &str) -> String {
    let mut spec =
        pool_spec(url, region, &[&format!("{region}a")], 0, 0, 0, "").replace("max     = 20", "max     = 64");
    spec += "\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n";
    for i in 0..JOBS {
        spec += &format!("\njob \"j{i:02}\" {{\n  template = job_template.t\n  pool     = gpu_pool.train\n}}\n");
    }
    spec
}

/// The `ClientToken`s of the `RunInstances` calls the proxy saw: one per launch (a retried
/// call repeats its launch's token).
fn launch_tokens(log: &[Request]) -> BTreeSet<String> {
    log.iter().filter(|r| r.action == "RunInstances").filter_map(|r| r.params.get("ClientToken").cloned()).collect()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn gpuplan(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplan"));
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "100");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GPUPLAN_") || k.starts_with("AWS_")) {
        cmd.env_remove(k);
    }
    cmd.env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-aws-credentials"))
        .args(args);
    cmd
}

/// Live instances of `lineage` that carry a job tag, by id, straight from moto.
async fn job_instances(region: &str, lineage: &str) -> BTreeSet<String> {
    let sdk = gpuplan::providers::aws::AwsSettings {
        name: "aws".into(),
        endpoint: Some(endpoint()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..Default::default()
    }
    .load()
    .await;
    let c = gpuplan::providers::aws::AwsSettings::client(&sdk, region);
    let out = c
        .describe_instances()
        .filters(Filter::builder().name("tag:gpuplan:lineage").values(lineage).build())
        .filters(Filter::builder().name("tag-key").values("gpuplan:job").build())
        .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
        .max_results(1000)
        .send()
        .await
        .expect("DescribeInstances on moto");
    out.reservations().iter().flat_map(|r| r.instances()).filter_map(|i| i.instance_id().map(String::from)).collect()
}

/// The runs the state records, node id → job address.
fn recorded_runs(dir: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir.join("state/default.json")).expect("state file");
    let state: serde_json::Value = crate::state_plain::plain(serde_json::from_str(&text).expect("state JSON"));
    let mut out = BTreeMap::new();
    for (addr, r) in state["resources"].as_object().expect("resources") {
        for run in r["job"]["runs"].as_array().into_iter().flatten() {
            out.insert(run["node_id"].as_str().unwrap_or_default().to_string(), addr.clone());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_mid_launches_starts_no_launch_after_the_signal_and_records_every_launched_one() {
    let region = "eu-central-1";
    let open = Arc::new(AtomicBool::new(false));
    let gate = open.clone();
    let proxy = FakeEc2::proxy_holding(&endpoint(), Duration::from_secs(300), move |req, log| {
        if req.action != "RunInstances" || gate.load(Ordering::SeqCst) {
            return true;
        }
        let nth = log.iter().filter(|r| r.action == "RunInstances").position(|r| r.at == req.at && r.body == req.body);
        nth.is_some_and(|n| n < ANSWERED)
    });
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(&proxy.url, region)).expect("write spec");

    let parallelism = PARALLELISM.to_string();
    let mut child = gpuplan(dir, &["apply", "--auto-approve", "--parallelism", &parallelism])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpuplan starts");
    let stderr = Arc::new(Mutex::new(String::new()));
    let sink = stderr.clone();
    let pipe = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            sink.lock().unwrap().push_str(&(line + "\n"));
        }
    });

    // Every permit is held by a launch the proxy holds: nothing else can start now.
    wait_for("every permit to hold a launch", || launch_tokens(&proxy.requests()).len() >= ANSWERED + PARALLELISM);
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    wait_for("gpuplan to say it was interrupted", || stderr.lock().unwrap().contains("Interrupt received"));
    let at_signal = launch_tokens(&proxy.requests());
    open.store(true, Ordering::SeqCst);
    let out = child.wait_with_output().expect("gpuplan ends");
    reader.join().expect("stderr read");
    let stderr = stderr.lock().unwrap().clone();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();

    assert_eq!(out.status.code(), Some(1), "an interrupted apply fails\n{stdout}\n{stderr}");
    let after = launch_tokens(&proxy.requests());
    assert_eq!(at_signal.len(), ANSWERED + PARALLELISM, "{stderr}");
    assert_eq!(after, at_signal, "launches started after the signal:\n{stderr}");

    // Every instance launched is a run in state, and nothing else was launched.
    let launched = job_instances(region, &lineage(dir)).await;
    let runs = recorded_runs(dir);
    assert_eq!(launched.len(), at_signal.len(), "{launched:?}");
    for id in &launched {
        assert!(runs.contains_key(id), "instance {id} launched but not in state: {runs:?}\n{stderr}");
    }
    // The apply names what it did not start.
    let text = format!("{stdout}\n{stderr}");
    let skipped = text.lines().filter(|l| l.starts_with("Skipped: job.j") && l.contains("not launched")).count();
    assert_eq!(skipped, JOBS - at_signal.len(), "{text}");
    assert!(text.contains("Apply interrupted."), "{text}");
    assert!(text.contains("SIGTERM received"), "{text}");

    // The next apply launches the rest, and nothing twice.
    let r = gpuplan(dir, &["apply", "--auto-approve"]).output().expect("gpuplan runs");
    assert_eq!(r.status.code(), Some(0), "{}", String::from_utf8_lossy(&r.stderr));
    let launched = job_instances(region, &lineage(dir)).await;
    assert_eq!(launched.len(), JOBS, "{launched:?}");
    let r = gpuplan(dir, &["destroy", "--auto-approve"]).output().expect("gpuplan runs");
    assert_eq!(r.status.code(), Some(0), "{}", String::from_utf8_lossy(&r.stderr));
}
