//! Pools that use reserved capacity first (issue 52 item 5, docs/design/big-runs.md) on
//! the sim cloud: `capacity { reservation = reservation.x }` is checked against the
//! reservation at `validate`; once the reservation is bought and its window open, the
//! pool's first nodes launch into it (shown as reserved, counted in the reservation's
//! `used`), the rest per `mix`; before a Capacity Block ends its nodes are replaced per
//! `mix`.

use std::path::Path;

use crate::sim_run::run;

const SPEC: &str = r#"provider "sim" {
  job_duration = "30d"
}

reservation "h100_block" {
  provider       = "sim"
  region         = "us-east-1"
  zone           = "us-east-1a"
  kind           = "capacity_block"
  instance_type  = "p5.48xlarge"
  instance_count = 2
  start          = "2027-01-10T00:00:00Z"
  duration       = "7d"
  max_price_usd  = 10000
  commit         = true
}

gpu_pool "train" {
  provider       = "sim"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b"]
  gpu            = "H100"
  gpus_per_node  = 8
  instance_types = ["p5.48xlarge"]
  nodes {
    min     = 0
    desired = 3
    max     = 4
  }
  mix {
    spot_percent = 100
  }
  capacity {
    reservation = reservation.h100_block
  }
}
"#;

/// Three long jobs, one per node of the pool.
const JOBS: &str = r#"
job_template "t" {
  image          = "x"
  gpus           = 8
  preemptible    = false
  retries        = 0
  checkpoint_uri = "s3://ckpt/t"
}

job "a" {
  template = job_template.t
  pool     = gpu_pool.train
}

job "b" {
  template = job_template.t
  pool     = gpu_pool.train
}

job "c" {
  template = job_template.t
  pool     = gpu_pool.train
}
"#;

fn folder(spec: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), spec).unwrap();
    tmp
}

fn state(dir: &Path) -> serde_json::Value {
    crate::state_plain::read(&dir.join("state/default.json"))
}

/// The pool's recorded nodes as (capacity, zone, reservation tag).
fn nodes(dir: &Path) -> Vec<(String, String, String)> {
    let st = state(dir);
    let mut out: Vec<(String, String, String)> = st["resources"]["gpu_pool.train"]["nodes"]
        .as_array()
        .map(|v| v.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|n| {
            let tag = n["tags"]["gpuplan:reservation"].as_str().unwrap_or("").to_string();
            (n["capacity"].as_str().unwrap_or("").to_string(), n["zone"].as_str().unwrap_or("").to_string(), tag)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_reservation_that_cannot_hold_the_pools_nodes_is_a_located_error() {
    let spec = SPEC.replace(r#"zones          = ["us-east-1a", "us-east-1b"]"#, r#"zones          = ["us-east-1b"]"#)
        + r#"
gpu_pool "small" {
  provider      = "sim"
  region        = "us-east-1"
  gpu           = "A10G"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
  capacity {
    reservation = reservation.h100_block
  }
}
"#;
    let tmp = folder(&spec);
    let (code, _, err) = run(tmp.path(), &["validate"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("`reservation.h100_block` holds 2 × p5.48xlarge in us-east-1a, which `gpu_pool.train` cannot run: us-east-1a is not among its `zones` (us-east-1b)"),
        "{err}"
    );
    assert!(err.contains("main.hcl:34:"), "located at `reservation` of the pool: {err}");
    // Every problem in one run: the other pool's GPUs differ.
    assert!(
        err.contains("which `gpu_pool.small` cannot run: p5.48xlarge has 8 × H100, the pool's nodes 1 × A10G"),
        "{err}"
    );
    assert!(!tmp.path().join("state/default.json").exists(), "nothing written");
}

/// Buys the block, opens its window and lets the pool settle in it: two nodes in the
/// block, one on spot. The block's id.
fn settle_in_block(dir: &Path) -> String {
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("`gpu_pool.train`: its first nodes launch into `reservation.h100_block` once it is bought, its window open and it has room"),
        "not bought yet: {out}"
    );
    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(nodes(dir).iter().filter(|n| n.0 == "spot").count(), 3, "{:?}", nodes(dir));
    let id = state(dir)["resources"]["reservation.h100_block"]["reservation"]["id"].as_str().unwrap().to_string();
    // Bought, and its window (from 2027-01-10 00:00Z) not open yet: nothing moves.
    let (code, out, err) = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}{err}");

    // The sim clock at the window's start.
    let (code, _, err) = run(dir, &["sim", "advance", "306days"]);
    assert_eq!(code, 0, "{err}");

    // Bought and open: two nodes launch into it, the third stays on spot per `mix`.
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&"+ 2 on-demand in us-east-1a".to_string()), "{out}");
    assert!(out.contains(&format!("reserved: reservation.h100_block ({id})")), "{out}");
    let (code, json, err) = run(dir, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["reservations"][0]["used"], 2, "{json}");
    // The two in the block at its prepaid rate (9,246.72 USD over 2 nodes × 168 h = 27.52
    // USD/h each), the spot node at the spot price: not three on-demand prices.
    let pool = &doc["cost"]["pools"][0];
    assert_eq!(pool["hourly_after"], 77.056, "{pool:#}");
    assert_eq!(pool["on_demand_hourly_after"], 55.04, "{pool:#}");
    assert_eq!((pool["on_demand_after"].as_u64(), pool["spot_after"].as_u64()), (Some(2), Some(1)), "{pool:#}");
    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    // The ledger prices them as the plan did.
    let st = state(dir);
    let prepaid: Vec<&serde_json::Value> = st["spend"]
        .as_object()
        .unwrap()
        .values()
        .filter(|e| e["price_source"].as_str().is_some_and(|s| s.starts_with("prepaid")))
        .collect();
    assert_eq!(prepaid.len(), 2, "{:#}", st["spend"]);
    assert!(prepaid.iter().all(|e| e["usd_per_hour"] == 27.52), "{prepaid:?}");
    assert!(prepaid.iter().all(|e| e["capacity"] == "reserved"), "the ledger says reserved: {prepaid:?}");
    // Shown and recorded as `reserved` capacity, priced as the block.
    let reserved = ("reserved".to_string(), "us-east-1a".to_string(), id.clone());
    let have = nodes(dir);
    assert_eq!(have.iter().filter(|n| **n == reserved).count(), 2, "{have:?}");
    assert_eq!(have.iter().filter(|n| n.0 == "spot").count(), 1, "{have:?}");
    let (code, out, err) = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "settled: {out}{err}");
    id
}

#[test]
fn a_pool_fills_its_capacity_block_first_then_mix_and_leaves_it_before_the_window_ends() {
    let tmp = folder(SPEC);
    let dir = tmp.path();
    let id = settle_in_block(dir);
    std::fs::write(dir.join("main.hcl"), format!("{SPEC}{JOBS}")).unwrap();
    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "three jobs, one on each node: {err}");

    // 20 minutes before the window ends: its nodes go, replaced per `mix` (spot).
    let (code, _, err) = run(dir, &["sim", "advance", "6days 23h 40m"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "replaced: `reservation.h100_block` ends 2027-01-17 00:00Z: its nodes go before the window closes"
        ),
        "{out}"
    );
    // Their jobs are stopped under "Jobs under removed nodes", requeued from their
    // checkpoint; a job that is not preemptible does not hold the node back (the cloud
    // takes it at the window's end).
    assert!(!out.contains("deferred"), "{out}");
    let requeued = out
        .lines()
        .filter(|l| l.contains("requeued: node") && l.contains("from its checkpoint, no retry spent"))
        .count();
    assert_eq!(requeued, 2, "{out}");
    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let have = nodes(dir);
    assert_eq!(have.iter().filter(|n| n.0 == "spot").count(), 3, "{have:?}");
    assert!(have.iter().all(|n| n.2 != id), "none left in the block: {have:?}");
}

#[test]
fn open_reservations_on_a_cloud_without_them_are_refused_at_the_attribute() {
    let spec = r#"provider "tencentcloud" {
  region = "ap-guangzhou"
}

gpu_pool "train" {
  provider       = "tencentcloud"
  gpu            = "T4"
  gpus_per_node  = 1
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
  capacity {
    reservation = "open"
  }
}
"#;
    let tmp = folder(spec);
    let (code, _, err) = run(tmp.path(), &["validate"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("open reservations are not on this cloud (tencentcloud)"), "{err}");
    assert!(err.contains("main.hcl:15:"), "{err}");
}

#[test]
fn after_a_capacity_block_closes_the_cloud_takes_its_nodes_and_the_pool_falls_back_per_mix() {
    let tmp = folder(SPEC);
    let dir = tmp.path();
    let id = settle_in_block(dir);
    // No plan ran in the last half hour: the window closes with the nodes in it.
    let (code, _, err) = run(dir, &["sim", "advance", "7days"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ended reservation.h100_block") && out.contains("expired 2027-01-17 00:00Z"), "{out}");
    assert_eq!(out.matches("+ 1 spot in").count(), 2, "two spot nodes in their place, per `mix`: {out}");
    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let have = nodes(dir);
    assert_eq!(have.len(), 3, "{have:?}");
    assert!(have.iter().all(|n| n.0 == "spot" && n.2 != id), "{have:?}");
}

#[test]
fn an_open_pool_launches_into_a_matching_on_demand_reservation_and_only_as_many_as_it_holds() {
    let spec = |desired: u32| {
        format!(
            r#"provider "sim" {{}}

reservation "odcr" {{
  provider       = "sim"
  region         = "us-east-1"
  zone           = "us-east-1b"
  kind           = "on_demand"
  instance_type  = "p5.48xlarge"
  instance_count = 1
  duration       = "1d"
}}

gpu_pool "train" {{
  provider       = "sim"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b"]
  gpu            = "H100"
  gpus_per_node  = 8
  instance_types = ["p5.48xlarge"]
  nodes {{
    min     = 0
    desired = {desired}
    max     = 4
  }}
  capacity {{
    reservation = "open"
  }}
}}
"#
        )
    };
    let tmp = folder(&spec(0));
    let dir = tmp.path();
    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let id = state(dir)["resources"]["reservation.odcr"]["reservation"]["id"].as_str().unwrap().to_string();
    std::fs::write(dir.join("main.hcl"), spec(3)).unwrap();
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("+ 1 on-demand in us-east-1b (p5.48xlarge), reserved: reservation.odcr ({id})")),
        "{out}"
    );
    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let have = nodes(dir);
    assert_eq!(have.len(), 3, "{have:?}");
    assert_eq!(have.iter().filter(|n| n.2 == id).count(), 1, "the one it holds: {have:?}");
    let (code, json, err) = run(dir, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["reservations"][0]["used"], 1, "{json}");

    // The On-Demand reservation ends: its instance runs on as a plain on-demand node.
    let (code, _, err) = run(dir, &["sim", "advance", "2days"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ended reservation.odcr"), "{out}");
    assert!(!out.contains("replaced:") && !out.contains("gpu_pool.train will be"), "the pool keeps its nodes: {out}");
}

#[test]
fn nodes_in_a_reservation_show_as_reserved_in_state_show_nodes_and_every_plan_view() {
    let tmp = folder(SPEC);
    let dir = tmp.path();
    let id = settle_in_block(dir);
    let (code, out, err) = run(dir, &["state", "show", "gpu_pool.train"]);
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut caps: Vec<&str> =
        shown["nodes"].as_array().unwrap().iter().filter_map(|n| n["capacity"].as_str()).collect();
    caps.sort();
    assert_eq!(caps, ["reserved", "reserved", "spot"], "{out}");
    let (code, out, err) = run(dir, &["nodes", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("\"reserved\"").count(), 2, "{out}");
    assert!(!out.contains("on-demand"), "{out}");

    // Before the window ends their deletes say so too, in text and JSON.
    let (code, _, err) = run(dir, &["sim", "advance", "6days 23h 40m"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().filter(|l| l.contains(" reserved us-east-1a (replaced:")).count(), 2, "{out}");
    let (code, out, err) = run(dir, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    let pool = plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == "gpu_pool.train").unwrap();
    let deleted: Vec<&str> =
        pool["pool"]["deletes"].as_array().unwrap().iter().filter_map(|d| d["capacity"].as_str()).collect();
    assert_eq!(deleted, ["reserved", "reserved"], "{pool:#}");
    assert!(!id.is_empty());
}
