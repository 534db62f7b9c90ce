//! `gpuplan jobs ...` through the binary against the embedded sim cloud.

use std::path::Path;
use std::process::Command;

const SPEC: &str = r#"
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
    on_demand_base = 1
    spot_percent   = 100
  }
}

job_template "finetune" {
  image          = "ghcr.io/example/finetune:1.4"
  gpus           = 8
  priority       = "high"
  preemptible    = true
  retries        = 1
  max_runtime    = "2h"
  checkpoint_uri = "s3://ckpt/ft"
}

job "ft" {
  template = job_template.finetune
  pool     = gpu_pool.train
}
"#;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn gpuplan(dir: &Path, args: &[&str]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplan"));
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "100").env_remove("GPUPLAN_WORKSPACE");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GPUPLAN_")) {
        cmd.env_remove(k);
    }
    let out = cmd.args(args).output().expect("gpuplan runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[track_caller]
fn ok(dir: &Path, args: &[&str]) -> Out {
    let out = gpuplan(dir, args);
    assert_eq!(out.code, 0, "{args:?}\n--- stdout\n{}\n--- stderr\n{}", out.stdout, out.stderr);
    out
}

fn fleet() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.hcl"), SPEC).expect("write spec");
    dir
}

fn json(out: &Out) -> serde_json::Value {
    serde_json::from_str(&out.stdout).expect("stdout is JSON")
}

#[test]
fn list_before_apply_shows_declared_jobs_as_not_launched() {
    let dir = fleet();
    let out = ok(dir.path(), &["jobs"]);
    assert!(out.stdout.contains("job.ft  not launched  0/1"), "{}", out.stdout);
    let without_jobs = SPEC.split("job_template").next().expect("spec head");
    std::fs::write(dir.path().join("main.hcl"), without_jobs).expect("write spec");
    let out = ok(dir.path(), &["jobs", "list"]);
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("No jobs"), "{}", out.stderr);
}

#[test]
fn launch_preempt_relaunch_and_cancel_through_the_cli() {
    let dir = fleet();
    let d = dir.path();
    let apply = ok(d, &["apply", "--auto-approve"]);
    assert!(apply.stdout.contains("+ job.ft"), "{}", apply.stdout);

    let list = json(&ok(d, &["jobs", "list", "--json"]));
    assert_eq!(list["jobs"][0]["address"], "job.ft");
    assert_eq!(list["jobs"][0]["state"], "running");
    let text = ok(d, &["jobs", "list"]).stdout;
    assert!(text.starts_with("JOB") && text.contains("job.ft  running  1/1"), "{text}");

    // The provider's view: after a reclaim, status shows the preemption before any plan.
    ok(d, &["sim", "interrupt", "train"]);
    let status = json(&ok(d, &["jobs", "status", "ft", "--json"]));
    assert_eq!(status["jobs"][0]["runs"][0]["status"], "preempted");
    assert_eq!(status["jobs"][0]["state"], "preempted");

    let plan = gpuplan(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "a relaunch is a change\n{}", plan.stdout);
    // A reclaim spends no retry, so the retries are not shown (issue 46: only when they change).
    assert!(
        plan.stdout.contains("job.ft  relaunches on gpu_pool.train (1 × 8 GPUs, spot): attempt 2\n"),
        "{}",
        plan.stdout
    );
    assert!(!plan.stdout.contains("retries left"), "{}", plan.stdout);
    ok(d, &["apply", "--auto-approve"]);
    let logs = ok(d, &["jobs", "logs", "job.ft"]).stdout;
    assert!(logs.contains("replica 0 attempt 1: preempted"), "{logs}");
    assert!(logs.contains("replica 0 attempt 2: launched as"), "{logs}");

    let cancel = ok(d, &["jobs", "cancel", "ft"]);
    assert!(cancel.stderr.contains("cancelled"), "{}", cancel.stderr);
    let status = ok(d, &["jobs", "status", "ft"]).stdout;
    assert!(status.starts_with("job.ft: cancelled"), "{status}");
    let plan = gpuplan(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "a cancelled job is not launched again\n{}", plan.stdout);
}

/// A new image in the template of a running job: the template is "updated in-place", and
/// every view says the running job keeps the old image until its next launch.
#[test]
fn a_template_change_names_the_running_jobs_that_keep_the_old_one() {
    let dir = fleet();
    let d = dir.path();
    ok(d, &["apply", "--auto-approve"]);
    let spec = SPEC.replace("finetune:1.4", "finetune:1.5");
    std::fs::write(d.join("main.hcl"), spec).expect("write spec");
    let note = "`job.ft` keeps running with the old template until its next launch";

    let text = ok(d, &["plan"]).stdout;
    // One header line with the reason no attribute line says (wrapped at 100 columns).
    let header: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("  # job_template.finetune"))
        .take_while(|l| l.starts_with("  # "))
        .map(|l| &l[4..])
        .collect();
    assert_eq!(header.join(" "), format!("job_template.finetune will be updated in-place: {note}"), "{text}");
    let plan = json(&ok(d, &["plan", "--json"]));
    let change = plan["changes"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["address"] == "job_template.finetune"))
        .expect("the template's change");
    let reasons = change["reasons"].as_array().expect("reasons");
    assert!(reasons.iter().any(|r| r["code"] == "running_jobs_keep_template" && r["message"] == note), "{reasons:?}");
    let md = ok(d, &["plan", "--format", "markdown"]).stdout;
    assert!(md.contains("keeps running with the old template until its next launch"), "{md}");
}

#[test]
fn unknown_job_names_fail_with_a_hint() {
    let dir = fleet();
    ok(dir.path(), &["apply", "--auto-approve"]);
    for sub in ["status", "logs", "cancel"] {
        let out = gpuplan(dir.path(), &["jobs", sub, "fx"]);
        assert_eq!(out.code, 1, "{sub}: {}", out.stderr);
        assert!(out.stderr.contains("no job `fx`") && out.stderr.contains("job.ft"), "{sub}: {}", out.stderr);
    }
}

#[test]
fn render_prints_a_kubernetes_job_and_refuses_unknown_names() {
    let dir = fleet();
    let out = ok(dir.path(), &["jobs", "render", "ft"]);
    for needle in [
        "apiVersion: batch/v1",
        "kind: Job",
        "nvidia.com/gpu: \"8\"",
        "action: Ignore",
        "type: DisruptionTarget",
        "gpuplan.dev/pool: train",
        "priorityClassName: gpuplan-high",
        "backoffLimit: 1",
        "activeDeadlineSeconds: 7200",
        "value: s3://ckpt/ft",
    ] {
        assert!(out.stdout.contains(needle), "missing {needle:?} in\n{}", out.stdout);
    }
    let bad = gpuplan(dir.path(), &["jobs", "render", "nope"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("no job `nope` in the spec"), "{}", bad.stderr);
}
