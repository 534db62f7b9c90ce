//! Job records that never slip: every launch is in state before the next step (under
//! `--target` too), a job node launched by an apply that died before recording it is
//! adopted by the next plan (never terminated as an orphan), and so on. CLI scenarios on
//! the sim cloud, and on moto's EC2 server (`scripts/test` exports
//! GPUPLAN_TEST_MOTO_ENDPOINT) through a proxy that holds an answer back.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::aws::cli::{self, pool_spec};
use crate::aws::fake_ec2::{FakeEc2, console_proxy, error, forward};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn gpuplan(dir: &Path, args: &[&str]) -> Out {
    let out = command(dir, args).output().expect("gpuplan runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplan"));
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "100");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GPUPLAN_") || k.starts_with("AWS_")) {
        cmd.env_remove(k);
    }
    cmd.env("AWS_ACCESS_KEY_ID", cli::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", cli::SECRET_KEY)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-aws-credentials"));
    cmd.args(args);
    cmd
}

#[track_caller]
fn ok(dir: &Path, args: &[&str]) -> Out {
    let out = gpuplan(dir, args);
    assert_eq!(out.code, 0, "{args:?}\n--- stdout\n{}\n--- stderr\n{}", out.stdout, out.stderr);
    out
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The state as the next command reads it: the state file with any journal a killed
/// apply left (`state pull` replays it).
fn state(dir: &Path) -> serde_json::Value {
    let out = ok(dir, &["state", "pull"]);
    serde_json::from_str(&out.stdout).expect("state pull prints JSON")
}

fn runs(state: &serde_json::Value, job: &str) -> Vec<serde_json::Value> {
    state["resources"][job]["job"]["runs"].as_array().cloned().unwrap_or_default()
}

const SIM_SPEC: &str = r#"
provider "sim" {
  region       = "us-east-1"
  job_duration = "1h"
}

gpu_pool "train" {
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  nodes {
    min     = 0
    desired = 2
    max     = 4
  }
  mix {
    on_demand_base = 2
    spot_percent   = 0
  }
}

job_template "t" {
  image   = "ghcr.io/example/train:1"
  gpus    = 8
  retries = 1
}

job "ft" {
  template = job_template.t
  pool     = gpu_pool.train
}
"#;

fn sim_fleet() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.hcl"), SIM_SPEC).expect("write spec");
    dir
}

/// `apply --target gpu_pool.train` launches the pool's job: its run is in state, and
/// the next plan has nothing to do.
#[test]
fn a_job_launched_under_target_is_recorded_in_state() {
    let tmp = sim_fleet();
    let dir = tmp.path();
    let out = ok(dir, &["apply", "--auto-approve", "--target", "gpu_pool.train"]);
    assert!(out.stderr.contains("launched as"), "the job launched:\n{}", out.stderr);
    let s = state(dir);
    let r = runs(&s, "job.ft");
    assert_eq!(r.len(), 1, "the launched run is recorded: {:#}", s["resources"]);
    assert_eq!(r[0]["status"], "running", "{r:#?}");
    let out = ok(dir, &["jobs", "status", "ft", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["jobs"][0]["runs"].as_array().map(Vec::len), Some(1), "{doc:#}");
}

fn moto() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!(
            "GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`, which installs moto into .venv/ and starts it"
        ),
    }
}

/// An EC2 client straight to moto.
async fn ec2(region: &str) -> aws_sdk_ec2::Client {
    let sdk = gpuplan::providers::aws::AwsSettings {
        name: "aws".into(),
        endpoint: Some(moto()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..Default::default()
    };
    gpuplan::providers::aws::AwsSettings::client(&sdk.load().await, region)
}

/// Job instances (pending, running or stopped) of `job` with this state's `lineage` in
/// `region` on moto, by id, with their tags.
async fn job_instances(
    region: &str,
    lineage: &str,
    job: &str,
) -> Vec<(String, std::collections::BTreeMap<String, String>)> {
    use aws_sdk_ec2::types::Filter;
    let c = ec2(region).await;
    let out = c
        .describe_instances()
        .filters(Filter::builder().name("tag:gpuplan:job").values(job).build())
        .filters(Filter::builder().name("tag:gpuplan:lineage").values(lineage).build())
        .filters(
            Filter::builder().name("instance-state-name").values("pending").values("running").values("stopped").build(),
        )
        .send()
        .await
        .expect("DescribeInstances");
    let mut v = Vec::new();
    for r in out.reservations() {
        for i in r.instances() {
            let tags =
                i.tags().iter().map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string())).collect();
            v.push((i.instance_id().unwrap().to_string(), tags));
        }
    }
    v.sort();
    v
}

fn spawn(dir: &Path, args: &[&str]) -> Child {
    command(dir, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("gpuplan starts")
}

/// kill -9 while a job's second replica launches on moto: EC2 made the instance, the
/// answer never reached gpuplan. The first replica's run is already in state; the next
/// plan adopts the second's node from its tags (no orphan), and apply records it and
/// launches nothing new: every job node is recorded, none terminated, none doubled.
#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_a_job_launch_leaves_every_job_node_recorded_or_adopted() {
    let region = "us-east-2";
    let upstream = moto().trim_start_matches("http://").trim_end_matches('/').to_string();
    let launches = Arc::new(AtomicUsize::new(0));
    let seen = launches.clone();
    // Forward everything; hold the second RunInstances answer back (the instance exists).
    let proxy = FakeEc2::start(move |req, _| {
        let reply = forward(&upstream, req);
        if req.action == "RunInstances" && seen.fetch_add(1, Ordering::SeqCst) == 1 {
            std::thread::sleep(Duration::from_secs(4));
        }
        reply
    });
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&proxy.url, region, &["us-east-2a"], 0, 0, 0, "")
        + "\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"crash\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n  replicas = 2\n}\n";
    std::fs::write(dir.join("main.hcl"), spec).unwrap();

    let mut child = spawn(dir, &["apply", "--auto-approve", "--parallelism", "1"]);
    wait_for("the second RunInstances", Duration::from_secs(60), || launches.load(Ordering::SeqCst) >= 2);
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL, while the second answer is held back
    let _ = child.wait();

    // The first launch was durable before the second began.
    let s = state(dir);
    let lineage = s["lineage"].as_str().expect("a lineage").to_string();
    let nodes = job_instances(region, &lineage, "job.crash").await;
    assert_eq!(nodes.len(), 2, "both replicas' instances exist: {nodes:?}");
    let recorded: Vec<String> =
        runs(&s, "job.crash").iter().map(|r| r["node_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(recorded.len(), 1, "the first replica's run is in state: {:#}", s["resources"]);
    assert!(nodes.iter().any(|n| n.0 == recorded[0]), "{recorded:?} vs {nodes:?}");

    // The next plan adopts the unrecorded node: no orphan, no new launch.
    std::thread::sleep(Duration::from_secs(4)); // the held answer goes nowhere
    let out = gpuplan(dir, &["plan", "--json"]);
    assert!(out.code == 0 || out.code == 2, "{}", out.stderr);
    let plan: serde_json::Value = serde_json::from_str(&out.stdout).expect("plan JSON");
    let orphans: Vec<_> = plan["drift"].as_array().into_iter().flatten().filter(|d| d["kind"] == "orphan").collect();
    assert!(orphans.is_empty(), "no job node is an orphan: {orphans:#?}");
    let out = ok(dir, &["apply", "--auto-approve"]);
    assert!(out.stdout.contains("adopted"), "the plan says what it adopts:\n{}", out.stdout);
    assert_eq!(job_instances(region, &lineage, "job.crash").await, nodes, "nothing terminated, nothing launched twice");
    let s = state(dir);
    let mut recorded: Vec<String> =
        runs(&s, "job.crash").iter().map(|r| r["node_id"].as_str().unwrap().to_string()).collect();
    recorded.sort();
    let ids: Vec<String> = nodes.iter().map(|n| n.0.clone()).collect();
    assert_eq!(recorded, ids, "every job node is recorded: {:#}", s["resources"]["job.crash"]);
    // The adopted run is recorded like a launched one: a launch time (its deadline counts
    // from it) and a spend-ledger line, so both nodes bill in `cost`, charged to the job.
    for r in runs(&s, "job.crash") {
        assert!(r["launched_at"].is_string(), "a launch time for every run: {r:#}");
    }
    let out = ok(dir, &["cost", "--json"]);
    let spend = serde_json::from_str::<serde_json::Value>(&out.stdout).expect("cost JSON")["spend"].clone();
    assert_eq!(spend["open_nodes"], 2, "both job nodes are in the ledger: {spend:#}");
    assert!(spend["by_job"]["job.crash"].is_number(), "{spend:#}");
    let out = gpuplan(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(out.code, 0, "nothing left to do:\n{}\n{}", out.stdout, out.stderr);
    ok(dir, &["destroy", "--auto-approve"]);
    assert!(job_instances(region, &lineage, "job.crash").await.is_empty(), "destroy leaves no job node");
}

fn job_doc(dir: &Path, name: &str) -> serde_json::Value {
    let out = ok(dir, &["jobs", "status", name, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("jobs status JSON");
    doc["jobs"][0].clone()
}

/// EC2 posts console output minutes after a stop: a job node that stopped while its
/// console shows no exit line is `stopped, exit code awaited` (never `running`), spends no
/// retry, keeps its node and is read again; once the exit line is there it succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn an_empty_console_is_an_exit_code_awaited_read_again_never_a_failure() {
    let region = "eu-west-1";
    let console = Arc::new(std::sync::Mutex::new(None));
    let proxy = console_proxy(&moto(), console.clone());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&proxy.url, region, &["eu-west-1a"], 0, 0, 0, "")
        + "\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n\njob \"late\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    ok(dir, &["apply", "--auto-approve"]);
    let lineage = state(dir)["lineage"].as_str().unwrap().to_string();
    let nodes = job_instances(region, &lineage, "job.late").await;
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let id = nodes[0].0.clone();

    // The job powered its node off; the console is not posted yet.
    ec2(region).await.stop_instances().instance_ids(&id).send().await.expect("StopInstances");
    *console.lock().unwrap() = Some(String::new());
    let out = ok(dir, &["apply", "--auto-approve"]);
    let job = job_doc(dir, "late");
    assert_eq!(job["state"], "stopped, exit code awaited", "unknown, not failed:\n{job:#}\n{}", out.stderr);
    let run = &job["runs"][0];
    assert_eq!(run["status"], "stopped", "{run:#}");
    assert!(run["message"].as_str().is_some_and(|m| m.contains("exit code awaited until")), "{run:#}");
    assert_ne!(run["node_released"], true, "its node is kept to read the exit code: {run:#}");
    assert_eq!(job_instances(region, &lineage, "job.late").await.len(), 1, "the node is still there");

    // The console arrives: the run succeeded, and its node goes.
    *console.lock().unwrap() = Some("boot\ngpuplan-job-exit=0\n".into());
    ok(dir, &["apply", "--auto-approve"]);
    let job = job_doc(dir, "late");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(job["runs"][0]["node_released"], true, "{job:#}");
    assert!(job_instances(region, &lineage, "job.late").await.is_empty());
    ok(dir, &["destroy", "--auto-approve"]);
}

/// A job node stopped after its job, with no exit line on its console (moto's console is
/// a fixed sample without one): `jobs status` says `stopped, exit code awaited` and EC2's
/// reason, not `running` until `max_runtime` + 15 min. Past the grace from the stop
/// (`GPUPLAN_EXIT_CODE_GRACE`, 10 minutes unless set) the run has failed: it spends a
/// retry, its node is terminated and attempt 2 launches.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_node_stopped_without_an_exit_code_fails_after_the_grace_and_is_retried() {
    let region = "us-east-2";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&moto(), region, &["us-east-2a"], 0, 0, 0, "")
        + "\njob_template \"t\" {\n  image       = \"nginx\"\n  gpus        = 1\n  retries     = 1\n  max_runtime = \"2h\"\n}\n\njob \"halted\" {\n  template = job_template.t\n  pool     = gpu_pool.train\n}\n";
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    ok(dir, &["apply", "--auto-approve"]);
    let lineage = state(dir)["lineage"].as_str().unwrap().to_string();
    let nodes = job_instances(region, &lineage, "job.halted").await;
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let first = nodes[0].0.clone();
    ec2(region).await.stop_instances().instance_ids(&first).send().await.expect("StopInstances");

    // Within the grace: awaited, never running; nothing relaunched, the node kept.
    let job = job_doc(dir, "halted");
    assert_eq!(job["state"], "stopped, exit code awaited", "{job:#}");
    let msg = job["runs"][0]["message"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("its node stopped (Client.UserInitiatedShutdown") && msg.contains("awaited until"), "{msg}");
    let out = ok(dir, &["jobs", "status", "halted"]);
    assert!(out.stdout.starts_with("job.halted: stopped, exit code awaited ("), "{}", out.stdout);
    ok(dir, &["apply", "--auto-approve"]);
    assert_eq!(runs(&state(dir), "job.halted").len(), 1, "no second attempt within the grace");
    assert_eq!(job_instances(region, &lineage, "job.halted").await.len(), 1);

    // Past it: failed, its node terminated, the retry launched.
    let out = command(dir, &["apply", "--auto-approve"]).env("GPUPLAN_EXIT_CODE_GRACE", "0s").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recorded = runs(&state(dir), "job.halted");
    assert_eq!(recorded.len(), 2, "{recorded:#?}");
    assert_eq!(recorded[0]["status"], "failed", "{:#}", recorded[0]);
    let why = recorded[0]["message"].as_str().unwrap_or_default();
    assert!(why.starts_with("its node stopped and never posted an exit code"), "{why}");
    assert_eq!(recorded[0]["node_released"], true, "{:#}", recorded[0]);
    assert_eq!(recorded[1]["attempt"], 2, "the failure spent a retry: {:#}", recorded[1]);
    let live = job_instances(region, &lineage, "job.halted").await;
    assert!(live.iter().all(|(id, _)| *id != first), "the stopped node is terminated: {live:?}");
    ok(dir, &["destroy", "--auto-approve"]);
    assert!(job_instances(region, &lineage, "job.halted").await.is_empty());
}

const JOB: &str = "\njob_template \"t\" {\n  image   = \"nginx\"\n  gpus    = 1\n  retries = 0\n}\n";

fn job_block(name: &str) -> String {
    format!("\njob \"{name}\" {{\n  template = job_template.t\n  pool     = gpu_pool.train\n}}\n")
}

/// A proxy to moto that refuses `CreateTags` (the first step of cancelling an AWS job)
/// while `refuse` is set.
fn refusing_proxy(refuse: Arc<std::sync::atomic::AtomicBool>) -> FakeEc2 {
    let upstream = moto().trim_start_matches("http://").trim_end_matches('/').to_string();
    FakeEc2::start(move |req, _| {
        if req.action == "CreateTags" && refuse.load(Ordering::SeqCst) {
            return error(403, "UnauthorizedOperation", "You are not authorized to perform this operation.");
        }
        forward(&upstream, req)
    })
}

/// A run `destroy` could not cancel keeps its job's record, and the command fails naming
/// the job: the record is how the next destroy (or `jobs cancel`) finds the node again.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_cancel_on_destroy_keeps_the_job_record_and_fails_naming_the_job() {
    let region = "us-west-2";
    let refuse = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let proxy = refusing_proxy(refuse.clone());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&proxy.url, region, &["us-west-2a"], 0, 0, 0, "") + JOB + &job_block("stuck");
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    ok(dir, &["apply", "--auto-approve"]);
    let lineage = state(dir)["lineage"].as_str().unwrap().to_string();
    let nodes = job_instances(region, &lineage, "job.stuck").await;
    assert_eq!(nodes.len(), 1, "{nodes:?}");

    refuse.store(true, Ordering::SeqCst);
    let out = gpuplan(dir, &["destroy", "--auto-approve"]);
    assert_eq!(out.code, 1, "a failed cancel fails destroy:\n{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("job.stuck") && out.stderr.contains("could not cancel"), "{}", out.stderr);
    assert_eq!(runs(&state(dir), "job.stuck").len(), 1, "the job's record is kept");
    assert_eq!(job_instances(region, &lineage, "job.stuck").await, nodes, "its node still runs");

    refuse.store(false, Ordering::SeqCst);
    ok(dir, &["destroy", "--auto-approve"]);
    assert!(runs(&state(dir), "job.stuck").is_empty());
    assert!(job_instances(region, &lineage, "job.stuck").await.is_empty(), "the node went with the job");
}

/// `destroy` terminates job nodes no run in the state owns (here the job was forgotten
/// with `state rm`): nothing tagged with the state's lineage outlives it.
#[tokio::test(flavor = "multi_thread")]
async fn destroy_terminates_job_nodes_the_state_does_not_record() {
    let region = "us-west-2";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&moto(), region, &["us-west-2b"], 0, 0, 0, "") + JOB + &job_block("forgotten");
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    ok(dir, &["apply", "--auto-approve"]);
    let lineage = state(dir)["lineage"].as_str().unwrap().to_string();
    assert_eq!(job_instances(region, &lineage, "job.forgotten").await.len(), 1);
    ok(dir, &["state", "rm", "job.forgotten"]);
    let out = ok(dir, &["destroy", "--auto-approve"]);
    assert!(
        job_instances(region, &lineage, "job.forgotten").await.is_empty(),
        "destroy swept the job node:\n{}\n{}",
        out.stdout,
        out.stderr
    );
}

/// `reconcile --max-destroy` counts job nodes: a removed job's running node and an
/// orphan job node are nodes the pass would terminate.
#[tokio::test(flavor = "multi_thread")]
async fn reconcile_max_destroy_counts_job_nodes() {
    let region = "us-west-2";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let base = pool_spec(&moto(), region, &["us-west-2c"], 0, 0, 0, "") + JOB;
    std::fs::write(dir.join("main.hcl"), base.clone() + &job_block("removed") + &job_block("orphaned")).unwrap();
    ok(dir, &["apply", "--auto-approve"]);
    let lineage = state(dir)["lineage"].as_str().unwrap().to_string();
    let removed = job_instances(region, &lineage, "job.removed").await;
    let orphaned = job_instances(region, &lineage, "job.orphaned").await;
    assert_eq!((removed.len(), orphaned.len()), (1, 1));

    // One job leaves the spec, the other's record is forgotten.
    std::fs::write(dir.join("main.hcl"), base).unwrap();
    ok(dir, &["state", "rm", "job.orphaned"]);
    let out = gpuplan(dir, &["reconcile", "--once", "--max-destroy", "1", "--json"]);
    assert_eq!(out.code, 3, "refused by --max-destroy:\n{}\n{}", out.stdout, out.stderr);
    let doc: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap_or("{}")).expect("pass JSON");
    assert_eq!(doc["max_destroy"]["nodes"], 2, "{doc:#}");
    assert_eq!(job_instances(region, &lineage, "job.removed").await, removed, "nothing terminated");
    assert_eq!(job_instances(region, &lineage, "job.orphaned").await, orphaned, "nothing terminated");

    let out = gpuplan(dir, &["reconcile", "--once", "--max-destroy", "2"]);
    assert!(out.code == 0 || out.code == 2, "{}\n{}", out.stdout, out.stderr);
    assert!(job_instances(region, &lineage, "job.removed").await.is_empty());
    assert!(job_instances(region, &lineage, "job.orphaned").await.is_empty());
}

/// A job VM has a deadline: here its run was launched (so the state says) more than 24 h
/// ago, the default `max_runtime`, and its node still runs: the next apply ends the run as
/// failed and terminates the node, instead of letting it bill forever.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_vm_past_its_max_runtime_is_terminated_and_its_run_failed() {
    let region = "us-east-2";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool_spec(&moto(), region, &["us-east-2b"], 0, 0, 0, "") + JOB + &job_block("forever");
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    ok(dir, &["apply", "--auto-approve"]);
    let lineage = state(dir)["lineage"].as_str().unwrap().to_string();
    assert_eq!(job_instances(region, &lineage, "job.forever").await.len(), 1);
    ok(dir, &["plan", "--detailed-exitcode"]);

    // Launched two days ago, by the state's record.
    let path = dir.join("state/default.json");
    let mut s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    s["resources"]["job.forever"]["job"]["runs"][0]["launched_at"] = "2026-01-01T00:00:00Z".into();
    std::fs::write(&path, serde_json::to_string_pretty(&s).unwrap()).unwrap();

    let out = ok(dir, &["apply", "--auto-approve"]);
    let job = job_doc(dir, "forever");
    assert_eq!(job["state"], "failed", "{job:#}\n{}", out.stderr);
    assert!(job["runs"][0]["message"].as_str().is_some_and(|m| m.contains("max_runtime")), "{job:#}");
    assert!(job_instances(region, &lineage, "job.forever").await.is_empty(), "its node is terminated");
    ok(dir, &["destroy", "--auto-approve"]);
}
