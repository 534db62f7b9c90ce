//! Nodes for big runs (docs/design/big-runs.md) through the CLI on the sim cloud: a
//! pool's `disk {}` in the plan (text, markdown, JSON), in its cost and in the ledger;
//! `network {}` checked against the catalog by `validate`; a multi-node job's replicas
//! started together in one zone with their rendezvous.

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
    // Before a state exists, the group's name (of the state's lineage) is not known.
    let r = run(dir, &["plan"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains(", fabric efa, placement group (known after apply)"), "{}", r.stdout);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    // Once it does, a node more launches into the group of the state's lineage.
    let state = crate::state_plain::read(&dir.join("state/default.json"));
    let short: String =
        state["lineage"].as_str().unwrap().chars().filter(char::is_ascii_alphanumeric).take(8).collect();
    std::fs::write(dir.join("main.hcl"), pool(net).replace("desired = 2", "desired = 3")).unwrap();
    let r = run(dir, &["plan"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let line = format!(", fabric efa, placement group gpuplan-{short}-train-us-east-1a");
    assert!(r.stdout.contains(&line), "{line}:\n{}", r.stdout);
}

/// Every object under `v` (at any depth) that has `key`.
fn all_with<'a>(v: &'a Value, key: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            if m.contains_key(key) {
                out.push(v);
            }
            m.values().for_each(|x| all_with(x, key, out));
        }
        Value::Array(a) => a.iter().for_each(|x| all_with(x, key, out)),
        _ => {}
    }
}

/// The sim cloud's file and its log as JSON documents.
fn sim_documents(dir: &Path) -> Vec<Value> {
    let mut docs = Vec::new();
    for name in ["state/default.sim.json", "state/default.sim.json.log"] {
        let Ok(text) = std::fs::read_to_string(dir.join(name)) else { continue };
        match serde_json::from_str::<Value>(&text) {
            Ok(v) => docs.push(v),
            Err(_) => docs.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok())),
        }
    }
    docs
}

#[test]
fn a_multi_node_job_starts_its_replicas_together_in_one_zone_with_replica_0_s_address() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pool("")
        .replace("region = \"us-east-1\"\n", "region = \"us-east-1\"\n  job_duration = \"1h\"\n")
        .replace("[\"us-east-1a\"]", "[\"us-east-1a\", \"us-east-1b\"]")
        .replace("desired = 2", "desired = 3")
        + "\njob_template \"ddp\" {\n  image   = \"ghcr.io/example/ddp:1\"\n  command = [\"torchrun\", \"train.py\"]\n  gpus    = 8\n}\n\njob \"pretrain\" {\n  template = job_template.ddp\n  pool     = gpu_pool.train\n  replicas = 2\n}\n";
    std::fs::write(dir.join("main.hcl"), &spec).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);

    // The state records each replica's run; replica 0's with its node's private address.
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state/default.json")).expect("state")).expect("JSON");
    let runs = state["resources"]["job.pretrain"]["job"]["runs"].as_array().unwrap_or_else(|| panic!("{state}"));
    assert_eq!(runs.len(), 2, "{runs:?}");
    let rank0 = runs.iter().find(|r| r["replica"] == 0).expect("replica 0");
    let master = rank0["address"].as_str().unwrap_or_else(|| panic!("replica 0 has an address: {rank0}"));
    assert!(master.starts_with("10."), "{master}");

    // What each replica's container sees, as the sim cloud recorded it.
    let docs = sim_documents(dir);
    let mut jobs = Vec::new();
    docs.iter().for_each(|d| all_with(d, "rendezvous", &mut jobs));
    assert_eq!(jobs.len(), 2, "two replica launches: {jobs:?}");
    let mut nodes = Vec::new();
    for j in &jobs {
        let env = &j["rendezvous"];
        assert_eq!(env["GPUPLAN_MASTER_ADDR"], master, "{j}");
        assert_eq!(env["GPUPLAN_MASTER_PORT"], "29500", "{j}");
        assert_eq!(env["GPUPLAN_NNODES"], "2", "{j}");
        nodes.push(j["node_id"].as_str().expect("a node").to_string());
    }
    let ranks: Vec<&str> = jobs.iter().filter_map(|j| j["rendezvous"]["GPUPLAN_NODE_RANK"].as_str()).collect();
    assert!(ranks.contains(&"0") && ranks.contains(&"1"), "{ranks:?}");
    assert_ne!(nodes[0], nodes[1], "a node each");

    // Both nodes in one zone (the pool's placement group there).
    let mut sim_nodes = Vec::new();
    docs.iter().for_each(|d| all_with(d, "zone", &mut sim_nodes));
    let zone_of =
        |id: &str| sim_nodes.iter().find(|n| n["id"] == id).and_then(|n| n["zone"].as_str()).map(String::from);
    let zones: Vec<Option<String>> = nodes.iter().map(|n| zone_of(n)).collect();
    assert!(zones[0].is_some() && zones[0] == zones[1], "{nodes:?} in {zones:?}");
}

#[test]
fn validate_takes_efa_on_aws_groups_on_aws_and_alicloud_rdma_on_tencent_and_refuses_a_tencent_placement_group() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let aws = pool("  network {\n    fabric          = \"efa\"\n    placement_group = \"cluster\"\n  }\n")
        .replace(
            "provider \"sim\" {\n  region = \"us-east-1\"\n",
            "provider \"aws\" {\n  region = \"us-east-1\"\n  image  = \"ami-0123456789abcdef0\"\n",
        )
        .replace("provider       = \"sim\"", "provider       = \"aws\"");
    std::fs::write(dir.join("main.hcl"), &aws).unwrap();
    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let out = r.stdout + &r.stderr;
    assert!(out.contains("asks for fabric `efa`, but its provider block names no `security_groups`"), "{out}");
    assert!(out.contains("main.hcl:18:"), "located at `fabric`: {out}");
    assert!(!out.contains("does not yet launch"), "aws makes EFA interfaces and placement groups: {out}");

    let with_groups = aws.replace(
        "  image  = \"ami-0123456789abcdef0\"\n",
        "  image  = \"ami-0123456789abcdef0\"\n  security_groups = [\"sg-0abc\"]\n",
    );
    std::fs::write(dir.join("main.hcl"), with_groups).unwrap();
    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);

    let tencent = "provider \"tencentcloud\" {\n  region = \"ap-guangzhou\"\n  image  = \"img-gpuplan\"\n}\n\n\
gpu_pool \"train\" {\n  provider       = \"tencentcloud\"\n  gpu            = \"T4\"\n  gpus_per_node  = 1\n  nodes {\n    min     = 0\n    desired = 1\n    max     = 1\n  }\n  network {\n    placement_group = \"cluster\"\n  }\n}\n";
    std::fs::write(dir.join("main.hcl"), tencent).unwrap();
    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let out = r.stdout + &r.stderr;
    assert!(out.contains("`tencentcloud` has no cluster placement group"), "{out}");
    assert!(out.contains("write `fabric = \"rdma\"` instead"), "the hint points at HPC clusters: {out}");
    assert!(out.contains("main.hcl:16:"), "located at `placement_group`: {out}");

    // Tencent's HPC clusters come with `fabric = "rdma"`; its HCC types need them.
    let rdma = tencent.replace("\"T4\"", "\"V100-32GB\"").replace("placement_group = \"cluster\"", "fabric = \"rdma\"");
    std::fs::write(dir.join("main.hcl"), rdma.replace("gpus_per_node  = 1", "gpus_per_node  = 8")).unwrap();
    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let hcc = tencent
        .replace("\"T4\"", "\"V100-32GB\"")
        .replace("gpus_per_node  = 1", "gpus_per_node  = 8\n  instance_types = [\"HCCG5v.24XLARGE384\"]");
    std::fs::write(dir.join("main.hcl"), hcc.replace("  network {\n    placement_group = \"cluster\"\n  }\n", ""))
        .unwrap();
    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let out = r.stdout + &r.stderr;
    assert!(out.contains("HCCG5v.24XLARGE384, an HPC-cluster type, without `fabric = \"rdma\"`"), "{out}");
    assert!(out.contains("main.hcl:10:"), "located at the type: {out}");

    // Alibaba Cloud takes both: a deployment set and an eRDMA interface.
    let ali = "provider \"alicloud\" {\n  region = \"cn-hangzhou\"\n  image  = \"m-gpuplan\"\n}\n\n\
gpu_pool \"train\" {\n  provider       = \"alicloud\"\n  gpu            = \"A100-80GB\"\n  gpus_per_node  = 8\n  nodes {\n    min     = 0\n    desired = 1\n    max     = 1\n  }\n  network {\n    fabric          = \"erdma\"\n    placement_group = \"cluster\"\n  }\n}\n";
    std::fs::write(dir.join("main.hcl"), ali.replace("\n  gpu ", "\n  zones          = [\"cn-hangzhou-h\"]\n  gpu "))
        .unwrap();
    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let out = r.stdout + &r.stderr;
    assert!(
        out.contains("needs a vSwitch in `subnets` for cn-hangzhou-h and a security group in `security_groups`"),
        "its interface's network: {out}"
    );
    assert!(out.contains("main.hcl:17:"), "located at `fabric`: {out}");
    let wired =
        "  image  = \"m-gpuplan\"\n  subnets = { \"cn-hangzhou-h\" = \"vsw-1\" }\n  security_groups = [\"sg-1\"]\n";
    std::fs::write(dir.join("main.hcl"), ali.replace("  image  = \"m-gpuplan\"\n", wired)).unwrap();
    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}
