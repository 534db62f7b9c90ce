//! Nodes for big runs (docs/design/big-runs.md) through the CLI on the sim cloud: a
//! pool's `disk {}` in the plan (text, markdown, JSON), in its cost and in the ledger;
//! `network {}` checked against the catalog by `validate`.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::Value;

/// aws `p4de.24xlarge` on-demand, USD/h (src/catalog/aws.json).
const P4DE: f64 = 27.44705;
/// 500 GB root + 2000 GB data, both gp3 at 0.08 USD per GB-month, per hour of 730.
const DISKS: f64 = 2500.0 * 0.08 / 730.0;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .env_remove("GPUPLAN_WORKSPACE")
        .env_remove("GPUPLAN_CNY_PER_USD")
        .args(args)
        .output()
        .expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn pool(extra: &str) -> String {
    format!(
        "provider \"sim\" {{\n  region = \"us-east-1\"\n}}\n\ngpu_pool \"train\" {{\n  provider       = \"sim\"\n  zones          = [\"us-east-1a\"]\n  gpu            = \"A100-80GB\"\n  gpus_per_node  = 8\n  instance_types = [\"p4de.24xlarge\"]\n  nodes {{\n    min     = 0\n    desired = 2\n    max     = 4\n  }}\n{extra}}}\n"
    )
}

#[track_caller]
fn close(actual: &Value, expected: f64) {
    let a = actual.as_f64().unwrap_or_else(|| panic!("not a number: {actual}"));
    assert!((a - expected).abs() < 5e-4, "got {a}, expected {expected}");
}

#[test]
fn disks_are_launched_priced_and_shown_in_every_plan_format_and_the_ledger() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let disk = "  disk {\n    size_gb = 500\n    data    = [{ size_gb = 2000 }]\n  }\n";
    std::fs::write(dir.join("main.hcl"), pool(disk)).unwrap();

    let text = run(dir, &["plan"]);
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    assert!(text.stdout.contains("+ 2 on-demand in us-east-1a"), "{}", text.stdout);
    assert!(text.stdout.contains(", disks root 500 GB gp3, data 2000 GB gp3"), "{}", text.stdout);
    assert!(
        text.stdout.contains("gpu_pool.train disks per node: root 500 GB gp3, data 2000 GB gp3 at 0.27 USD/h"),
        "{}",
        text.stdout
    );

    let md = run(dir, &["plan", "--format", "markdown"]);
    assert_eq!(md.code, 0, "{}", md.stderr);
    assert!(md.stdout.contains("`gpu_pool.train` disks per node: root 500 GB gp3, data 2000 GB gp3"), "{}", md.stdout);

    let json = run(dir, &["plan", "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let plan: Value = serde_json::from_str(&json.stdout).expect("JSON");
    let text_of = json.stdout.clone();
    let create = find(&plan, "creates").and_then(|c| c.get(0)).unwrap_or_else(|| panic!("no creates: {text_of}"));
    assert_eq!(create["hardware"]["disks"]["root"], serde_json::json!({"size_gb": 500, "type": "gp3"}), "{create}");
    assert_eq!(create["hardware"]["disks"]["data"], serde_json::json!([{"size_gb": 2000, "type": "gp3"}]));

    let cost: Value = serde_json::from_str(&run(dir, &["cost", "--json"]).stdout).expect("cost JSON");
    close(&cost["hourly_after"], 2.0 * (P4DE + DISKS));
    close(&cost["pools"][0]["disks"]["usd_per_node_hour"], DISKS);
    close(&cost["pools"][0]["on_demand_price"]["usd_per_hour"], P4DE + DISKS);

    // Applied: the ledger's lines carry the disks with the node.
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let state = std::fs::read_to_string(dir.join("state/default.json")).expect("state");
    let state: Value = crate::state_plain::plain(serde_json::from_str(&state).expect("state JSON"));
    let lines = state["spend"].as_object().unwrap_or_else(|| panic!("no ledger in {state}"));
    let prices: Vec<f64> = lines.values().filter_map(|l| l["usd_per_hour"].as_f64()).collect();
    assert_eq!(prices.len(), 2, "{lines:?}");
    for p in prices {
        assert!((p - (P4DE + DISKS)).abs() < 5e-4, "ledger line {p}, expected node and disks {}", P4DE + DISKS);
    }
}

/// The first value under `key` anywhere in `v`.
fn find<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m.get(key).or_else(|| m.values().find_map(|x| find(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find(x, key)),
        _ => None,
    }
}

#[test]
fn validate_refuses_a_fabric_the_instance_type_lacks_and_an_unknown_disk_type() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool("  disk {\n    type = \"gp9\"\n  }\n  network {\n    fabric          = \"efa\"\n    placement_group = \"cluster\"\n  }\n")
        .replace("p4de.24xlarge", "g6.xlarge")
        .replace("A100-80GB", "L4")
        .replace("gpus_per_node  = 8", "gpus_per_node  = 1");
    std::fs::write(dir.join("main.hcl"), &spec).unwrap();
    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let out = r.stdout + &r.stderr;
    assert!(out.contains("unknown disk type \"gp9\""), "{out}");
    assert!(out.contains("main.hcl:17:"), "located at the disk type: {out}");
    assert!(out.contains("did you mean \"gp2\"?"), "{out}");
    assert!(out.contains("asks for fabric `efa`, which instance type g6.xlarge does not have"), "{out}");
    assert!(out.contains("main.hcl:10:"), "located at the instance type: {out}");
    assert!(out.contains("p4d.24xlarge"), "the hint names types with EFA: {out}");

    // A type that has it passes.
    let ok = pool("  network {\n    fabric          = \"efa\"\n    placement_group = \"cluster\"\n  }\n");
    std::fs::write(dir.join("main.hcl"), ok).unwrap();
    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

#[test]
fn a_pool_in_a_cluster_placement_group_launches_into_its_zone_s_group_with_its_fabric() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let net = "  network {\n    fabric          = \"efa\"\n    placement_group = \"cluster\"\n  }\n";
    std::fs::write(dir.join("main.hcl"), pool(net)).unwrap();
    let r = run(dir, &["plan"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains(", fabric efa, placement group gpuplan-"), "{}", r.stdout);
    assert!(r.stdout.contains("-train-us-east-1a"), "{}", r.stdout);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}
