//! Priority preemption on the sim cloud: a critical job preempts a running low-priority
//! preemptible job, which requeues from its checkpoint as the next attempt without spending
//! `retries`, and resumes once the critical job is done.

use crate::sim_run::run;
use std::path::Path;

const BASE: &str = r#"provider "sim" {
  job_duration = "2h"
}

gpu_pool "train" {
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
}

job_template "batch" {
  image          = "x"
  gpus           = 8
  priority       = "low"
  preemptible    = true
  retries        = 0
  checkpoint_uri = "s3://ckpt/batch"
}

job_template "urgent" {
  image    = "x"
  gpus     = 8
  priority = "critical"
}

job "batch" {
  template = job_template.batch
  pool     = gpu_pool.train
}
"#;

const URGENT: &str = r#"
job "urgent" {
  template = job_template.urgent
  pool     = gpu_pool.train
}
"#;

fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(dir, args);
    assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    out
}

fn job<'a>(plan: &'a serde_json::Value, addr: &str) -> &'a serde_json::Value {
    plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == addr).unwrap_or_else(|| panic!("{addr}: {plan:#}"))
}

#[test]
fn a_critical_job_preempts_a_low_priority_one_which_then_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), BASE).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let status: serde_json::Value = serde_json::from_str(&ok(d, &["jobs", "status", "batch", "--json"])).unwrap();
    assert_eq!(status["jobs"][0]["state"], "running");

    // The critical job arrives: the only node is busy, so the plan preempts the batch job.
    std::fs::write(d.join("main.hcl"), format!("{BASE}{URGENT}")).unwrap();
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"])).unwrap();
    let batch = job(&plan, "job.batch");
    assert_eq!(batch["placement"], "preempt", "{plan:#}");
    assert_eq!(batch["preempted_for"], "job.urgent");
    assert_eq!(job(&plan, "job.urgent")["placement"], "launch");
    let text = ok(d, &["plan"]);
    assert!(text.contains("job.batch   preempted for job.urgent (higher priority): attempt 2"), "{text}");
    let md = ok(d, &["plan", "--format", "markdown"]);
    assert!(md.contains("| `job.batch` | preempted for job.urgent (higher priority): attempt 2"), "{md}");
    assert!(md.contains("Jobs: 1 to launch, 1 to requeue"), "a preempted job is requeued: {md}");

    ok(d, &["apply", "--auto-approve"]);
    let s: serde_json::Value = serde_json::from_str(&ok(d, &["jobs", "status", "urgent", "--json"])).unwrap();
    assert_eq!(s["jobs"][0]["state"], "running");
    let s: serde_json::Value = serde_json::from_str(&ok(d, &["jobs", "status", "batch", "--json"])).unwrap();
    let run0 = &s["jobs"][0]["runs"][0];
    assert_eq!(run0["status"], "preempted", "{s:#}");
    assert_eq!(run0["preempted_for"], "job.urgent");

    // It waits for room (its retries were not spent), then resumes as attempt 2.
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"])).unwrap();
    assert_eq!(job(&plan, "job.batch")["placement"], "waiting", "{plan:#}");
    ok(d, &["sim", "advance", "3h"]);
    let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"])).unwrap();
    let batch = job(&plan, "job.batch");
    assert_eq!(batch["placement"], "launch", "{plan:#}");
    assert_eq!(batch["launches"][0]["attempt"], 2);
    assert_eq!(batch["launches"][0]["env"]["GPUPLAN_CHECKPOINT_URI"], "s3://ckpt/batch");
    ok(d, &["apply", "--auto-approve"]);
    let s: serde_json::Value = serde_json::from_str(&ok(d, &["jobs", "status", "batch", "--json"])).unwrap();
    assert_eq!(s["jobs"][0]["state"], "running", "{s:#}");
    assert_eq!(s["jobs"][0]["attempt"], 2);
}

/// A job of the same priority, or a non-preemptible one, is never preempted.
#[test]
fn peers_and_non_preemptible_jobs_are_never_preempted() {
    for (victim_priority, preemptible) in [("critical", "true"), ("low", "false")] {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let base = BASE
            .replace("priority       = \"low\"", &format!("priority       = \"{victim_priority}\""))
            .replace("preemptible    = true", &format!("preemptible    = {preemptible}"));
        std::fs::write(d.join("main.hcl"), &base).unwrap();
        ok(d, &["apply", "--auto-approve"]);
        std::fs::write(d.join("main.hcl"), format!("{base}{URGENT}")).unwrap();
        let plan: serde_json::Value = serde_json::from_str(&ok(d, &["plan", "--json"])).unwrap();
        assert_eq!(job(&plan, "job.batch")["placement"], "running", "{victim_priority}/{preemptible}: {plan:#}");
        assert_eq!(job(&plan, "job.urgent")["placement"], "waiting");
    }
}
