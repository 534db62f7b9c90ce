//! MIG slices on the sim cloud: a pool with `mig = "1g.10gb"` offers 7 slices per A100
//! 80GB, a job's `gpus` count slices there, and admission and apply hold to it.

use crate::sim_run::run;

const SPEC: &str = r#"provider "sim" {
  job_duration = "1h"
}

gpu_pool "mig" {
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "A100-80GB"
  gpus_per_node = 8
  mig           = "1g.10gb"
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
}

job_template "small" {
  image = "x"
  gpus  = 1
}

job "tiny" {
  count    = 60
  template = job_template.small
  pool     = gpu_pool.mig
}
"#;

fn count(plan: &serde_json::Value, placement: &str) -> usize {
    plan["jobs"].as_array().unwrap().iter().filter(|j| j["placement"] == placement).count()
}

#[test]
fn sixty_one_slice_jobs_on_eight_a100s_cut_into_1g_10gb_launch_56_and_4_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), SPEC).unwrap();
    let (code, out, err) = run(d, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((count(&plan, "launch"), count(&plan, "waiting")), (56, 4), "8 GPUs × 7 slices");
    // The pool's node, and with it the pool's jobs (`--target` of a pool launches its jobs,
    // and records their runs).
    let (code, _, err) = run(d, &["apply", "--auto-approve", "--target", "gpu_pool.mig"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(d, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((count(&plan, "running"), count(&plan, "waiting")), (56, 4), "8 GPUs × 7 slices");
    let waiting = plan["jobs"].as_array().unwrap().iter().find(|j| j["placement"] == "waiting").unwrap();
    assert_eq!(waiting["reason"]["code"], "capacity", "{waiting:#}");

    // Apply places them all on the one node, and no more than its 56 slices.
    let (code, _, err) = run(d, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run(d, &["jobs", "list", "--json"]);
    let jobs: serde_json::Value = serde_json::from_str(&out).unwrap();
    let running = jobs["jobs"].as_array().unwrap().iter().filter(|j| j["state"] == "running").count();
    assert_eq!(running, 56, "{jobs:#}");
    let nodes: std::collections::BTreeSet<String> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|j| j["runs"].as_array().cloned().unwrap_or_default())
        .map(|r| r["node_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(nodes.len(), 1, "{nodes:?}");

    // The Kubernetes manifest asks for the profile's slices.
    let (code, out, err) = run(d, &["jobs", "render", "tiny[0]"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nvidia.com/mig-1g.10gb: \"1\""), "{out}");
}

#[test]
fn a_profile_the_gpu_does_not_offer_and_a_job_larger_than_a_node_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let bad =
        SPEC.replace("mig           = \"1g.10gb\"", "mig           = \"1g.5gb\"").replace("gpus  = 1", "gpus  = 57");
    std::fs::write(d.join("main.hcl"), bad).unwrap();
    let (code, _, err) = run(d, &["validate"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("A100-80GB GPUs do not offer the MIG profile \"1g.5gb\""), "{err}");
    assert!(err.contains("profiles: 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"), "{err}");
    let big = SPEC.replace("gpus  = 1", "gpus  = 57");
    std::fs::write(d.join("main.hcl"), big).unwrap();
    let (code, _, err) = run(d, &["validate"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("needs 57 MIG slices per replica, but a node of `gpu_pool.mig` has 56"), "{err}");
}
