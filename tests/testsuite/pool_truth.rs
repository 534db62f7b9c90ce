//! A pool is planned, priced and applied for what the cloud can really do: no pool is
//! free because gpuplan could not place or price it, and no apply says "complete" when it
//! launched fewer nodes than the plan said.

use std::path::Path;

use crate::sim_run::run;

/// 2 × 8 A100-80GB on the sim cloud in `ap-southeast-1`: a region both AWS and Alibaba
/// Cloud list, where only Alibaba Cloud sells this shape (`ecs.gn7e-c16g1.32xlarge`,
/// 277.94 CNY/h, 39.15 USD/h at the default rate).
const SINGAPORE: &str = r#"provider "sim" {}

gpu_pool "sg" {
  provider      = "sim"
  region        = "ap-southeast-1"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 2
    max     = 2
  }
  mix {
    on_demand_base = 2
    spot_percent   = 0
  }
}
"#;

fn plan_json(dir: &Path) -> serde_json::Value {
    let (code, out, err) = run(dir, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("plan --json is JSON")
}

#[test]
fn a_region_two_clouds_share_is_planned_priced_and_applied_at_the_cloud_that_sells_the_shape() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), SINGAPORE).unwrap();
    let plan = plan_json(tmp.path());
    let hourly = plan["cost"]["hourly_after"].as_f64().unwrap();
    assert!((hourly - 2.0 * 277.94 / 7.1).abs() < 0.01, "2 × 39.15 USD/h, got {hourly}: {}", plan["cost"]);
    let creates: u64 = plan["changes"][0]["pool"]["creates"]
        .as_array()
        .expect("creates")
        .iter()
        .map(|c| c["count"].as_u64().unwrap())
        .sum();
    assert_eq!(creates, 2, "{}", plan["changes"][0]);

    let (code, _, err) = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Nodes: 2 launched"), "{err}");
    let (code, out, err) = run(tmp.path(), &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "the fleet has what the spec asks for:\n{out}\n{err}");
}

/// 8 × A100-40GB on the sim cloud's Guangzhou: Tencent Cloud sells the shape
/// (`GT4.41XLARGE948`) in ap-guangzhou-4 only.
const GUANGZHOU_3: &str = r#"provider "sim" {}

gpu_pool "gz" {
  provider      = "sim"
  region        = "ap-guangzhou"
  zones         = ["ap-guangzhou-3"]
  gpu           = "A100-40GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
}
"#;

#[test]
fn a_zone_that_does_not_sell_the_pools_shape_is_an_error_at_validate_and_plan() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), GUANGZHOU_3).unwrap();
    for cmd in ["validate", "plan"] {
        let (code, out, err) = run(tmp.path(), &[cmd]);
        assert_eq!(code, 1, "{cmd}: {out}\n{err}");
        assert!(err.contains("main.hcl:6:"), "{cmd}: the zone's file:line:col in\n{err}");
        assert!(err.contains("zone \"ap-guangzhou-3\" does not sell 8 × A100-40GB (GT4.41XLARGE948)"), "{cmd}: {err}");
        // What the region offers instead: the zones that sell the shape, and what the
        // chosen zone sells.
        assert!(err.contains("zones of ap-guangzhou selling 8 × A100-40GB: ap-guangzhou-4"), "{cmd}: {err}");
        assert!(err.contains("ap-guangzhou-3 sells ") && err.contains("1, 2 or 4 × T4"), "{cmd}: {err}");
        assert!(!out.contains("Plan:"), "{cmd}: no plan for an invalid spec:\n{out}");
    }
    // The zone that sells it is valid.
    let fixed = GUANGZHOU_3.replace("ap-guangzhou-3", "ap-guangzhou-4");
    std::fs::write(tmp.path().join("main.hcl"), fixed).unwrap();
    let (code, _, err) = run(tmp.path(), &["validate"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_plan_error_names_the_blocks_file_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = |gpu: &str| {
        format!(
            "provider \"sim\" {{}}\n\ngpu_pool \"keep\" {{\n  provider      = \"sim\"\n  region        = \"us-east-1\"\n  zones         = [\"us-east-1a\"]\n  gpu           = \"{gpu}\"\n  gpus_per_node = 1\n  nodes {{\n    min     = 0\n    desired = 1\n    max     = 1\n  }}\n  lifecycle {{\n    prevent_destroy = true\n  }}\n}}\n"
        )
    };
    std::fs::write(tmp.path().join("main.hcl"), spec("L4")).unwrap();
    let (code, _, err) = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(tmp.path().join("main.hcl"), spec("T4")).unwrap();
    let (code, out, err) = run(tmp.path(), &["plan"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("× `gpu_pool.keep` has `lifecycle.prevent_destroy` set"), "{out}");
    assert!(out.contains("╭─[main.hcl:3:1]"), "drawn at the pool's block: {out}");
    let (_, json, _) = run(tmp.path(), &["plan", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json).expect("plan --json is JSON");
    assert_eq!(doc["errors"][0]["location"], "main.hcl:3:1", "{}", doc["errors"]);
}

/// Three L4 nodes, two of them spot with `fallback = "wait"`, in a zone without spot.
const WAITING: &str = r#"provider "sim" {}

gpu_pool "wait" {
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 3
    max     = 3
  }
  mix {
    on_demand_base = 1
    spot_percent   = 100
    fallback       = "wait"
  }
}
"#;

fn planned_creates(plan: &serde_json::Value) -> Vec<(String, u64)> {
    plan["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .flat_map(|c| c["pool"]["creates"].as_array().cloned().unwrap_or_default())
        .map(|b| (b["capacity"].as_str().unwrap().to_string(), b["count"].as_u64().unwrap()))
        .collect()
}

#[test]
fn an_apply_short_of_its_plan_says_so_exits_1_and_the_next_plan_shows_the_missing_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), WAITING).unwrap();
    let (code, _, err) = run(tmp.path(), &["sim", "capacity", "us-east-1a", "--spot", "--limit", "0"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(code, 1, "fewer nodes than planned is not a success:\n{err}");
    assert!(!err.contains("Apply complete!"), "{err}");
    assert!(err.contains("Error: gpu_pool.wait is 2 nodes short of the plan: 2 spot nodes"), "{err}");
    assert!(err.contains("Apply incomplete: 2 nodes fewer than planned."), "{err}");
    assert!(err.contains("Nodes: 1 launched"), "{err}");

    // The missing nodes are a change, so drift detection sees them.
    let (code, out, err) = run(tmp.path(), &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 2, "{out}\n{err}");
    let plan = plan_json(tmp.path());
    assert_eq!(planned_creates(&plan), vec![("spot".to_string(), 2)], "{}", plan["changes"]);

    // A reconcile pass says the same, and exits 1.
    let (code, out, err) = run(tmp.path(), &["reconcile", "--once"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(format!("{out}{err}").contains("apply incomplete: 2 nodes fewer than planned"), "{out}\n{err}");

    // Once the cloud has spot again, the next apply completes and the plan settles.
    let (code, _, err) = run(tmp.path(), &["sim", "capacity", "us-east-1a", "--spot", "--reset"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Apply complete!") && err.contains("Nodes: 2 launched"), "{err}");
    let (code, out, err) = run(tmp.path(), &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
}
