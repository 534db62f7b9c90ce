//! Jobs that name a GPU model instead of a pool (`gpu` on the template): placed on the
//! cheapest pool of that model with room, honouring spot eligibility, and the plan lists
//! the pools it considered.

use crate::sim_run::run;

const SPEC: &str = r#"provider "sim" {}

gpu_pool "od" {
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
}

gpu_pool "spot" {
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
  mix {
    spot_percent = 100
  }
}

job_template "cheap" {
  image       = "x"
  gpu         = "L4"
  gpus        = 1
  preemptible = true
}

job_template "steady" {
  image = "x"
  gpu   = "L4"
  gpus  = 1
}

job "sweep" {
  template = job_template.cheap
}

job "serve" {
  template = job_template.steady
}
"#;

fn job<'a>(plan: &'a serde_json::Value, addr: &str) -> &'a serde_json::Value {
    plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == addr).unwrap_or_else(|| panic!("{addr}: {plan:#}"))
}

#[test]
fn a_pool_less_preemptible_job_lands_on_the_spot_pool_when_it_is_cheapest() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), SPEC).unwrap();
    let (code, out, err) = run(d, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sweep = job(&plan, "job.sweep");
    assert_eq!(sweep["pool"], "gpu_pool.spot", "{sweep:#}");
    assert_eq!(sweep["placement"], "launch");
    assert_eq!(sweep["capacity"], serde_json::json!(["spot"]));
    let alts = sweep["alternatives"].as_array().expect("the pools considered");
    assert_eq!(alts.len(), 2, "{alts:?}");
    assert!(
        alts[0].as_str().unwrap().starts_with("gpu_pool.spot: ") && alts[0].as_str().unwrap().ends_with("(chosen)"),
        "{alts:?}"
    );
    // A job that is not preemptible needs on-demand nodes: only `od` has them.
    let serve = job(&plan, "job.serve");
    assert_eq!(serve["pool"], "gpu_pool.od", "{serve:#}");
    assert_eq!(serve["capacity"], serde_json::json!(["on-demand"]));
    let (_, text, _) = run(d, &["plan", "--verbose"]);
    assert!(text.contains("pools considered: gpu_pool.spot: "), "{text}");

    // Apply runs them where the plan said.
    let (code, _, err) = run(d, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run(d, &["plan", "--json"]);
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(job(&plan, "job.sweep")["placement"], "running");
    assert_eq!(job(&plan, "job.sweep")["pool"], "gpu_pool.spot", "it stays where it runs");
}

#[test]
fn a_job_without_pool_or_gpu_and_a_model_no_pool_has_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let bad = SPEC.replace("  gpu         = \"L4\"\n", "").replace("  gpu   = \"L4\"\n", "  gpu   = \"H100\"\n");
    std::fs::write(d.join("main.hcl"), bad).unwrap();
    let (code, _, err) = run(d, &["validate"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("`job.sweep` names no `pool`, and its template no `gpu`"), "{err}");
    assert!(err.contains("`job.serve` asks for H100 GPUs, but no pool it may use has them"), "{err}");
    assert!(err.contains("main.hcl:"), "{err}");
}
