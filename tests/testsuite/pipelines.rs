//! Job pipelines (`depends_on = [job.prep]`) on the sim cloud with its own clock: a job
//! starts after the jobs it depends on succeeded, and never when one failed, with the
//! reason in the plan.

use crate::sim_run::run;
use std::path::Path;

/// `spot`: an all-spot pool and preemptible jobs (a reclaim ends a run).
fn spec(spot: bool) -> String {
    let (mix, preemptible) = if spot { ("100", "true") } else { ("0", "false") };
    format!(
        r#"provider "sim" {{
  job_duration = "1h"
}}

gpu_pool "train" {{
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1
  nodes {{
    min     = 0
    desired = 2
    max     = 2
  }}
  mix {{
    spot_percent = {mix}
    fallback     = "wait"
  }}
}}

job_template "t" {{
  image       = "x"
  gpus        = 1
  retries     = 0
  preemptible = {preemptible}
}}

job "prep" {{
  template = job_template.t
  pool     = gpu_pool.train
}}

job "train" {{
  template   = job_template.t
  pool       = gpu_pool.train
  depends_on = [job.prep]
}}
"#
    )
}

fn jobs(dir: &Path) -> serde_json::Value {
    let (code, out, err) = run(dir, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    plan["jobs"].clone()
}

fn placement<'a>(jobs: &'a serde_json::Value, addr: &str) -> &'a serde_json::Value {
    jobs.as_array().unwrap().iter().find(|j| j["address"] == addr).unwrap_or_else(|| panic!("{addr} in {jobs:#}"))
}

#[test]
fn a_job_starts_after_the_job_it_depends_on_succeeded() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), spec(false)).unwrap();
    let (code, _, err) = run(d, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    // prep runs; train waits for it, though a node is free.
    let j = jobs(d);
    assert_eq!(placement(&j, "job.prep")["placement"], "running");
    let train = placement(&j, "job.train");
    assert_eq!(train["placement"], "waiting", "{train:#}");
    assert_eq!(train["reason"]["code"], "dependency");
    assert_eq!(train["reason"]["message"], "waits for job.prep to succeed (it is running)");
    let (_, text, _) = run(d, &["plan"]);
    assert!(text.contains("waits (dependency): waits for job.prep to succeed"), "{text}");

    run(d, &["sim", "advance", "2h"]);
    let j = jobs(d);
    assert_eq!(placement(&j, "job.prep")["placement"], "succeeded");
    assert_eq!(placement(&j, "job.train")["placement"], "launch", "{j:#}");
}

#[test]
fn a_job_never_starts_when_the_job_it_depends_on_was_cancelled() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), spec(true)).unwrap();
    let (code, _, err) = run(d, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    // The spot nodes go: a reclaim is not prep's failure, so it is requeued, not failed.
    let (code, _, err) = run(d, &["sim", "interrupt", "gpu_pool.train", "--count", "2"]);
    assert_eq!(code, 0, "{err}");
    let j = jobs(d);
    assert_ne!(placement(&j, "job.prep")["placement"], "failed", "{j:#}");
    // Cancelled, it never succeeds: train never starts.
    let (code, _, err) = run(d, &["jobs", "cancel", "prep"]);
    assert_eq!(code, 0, "{err}");
    let j = jobs(d);
    assert_eq!(placement(&j, "job.prep")["placement"], "cancelled", "{j:#}");
    let train = placement(&j, "job.train");
    assert_eq!(train["placement"], "waiting");
    let why = train["reason"]["message"].as_str().unwrap();
    assert!(why.starts_with("job.prep cancelled, so this job will not start"), "{why}");
}
