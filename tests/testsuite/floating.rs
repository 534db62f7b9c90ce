//! Floating pools on the sim cloud through the CLI (docs/design/floating-pools.md): a pool
//! with `placement {}` is created in its cheapest candidate, stays put for a saving below
//! `min_saving`, moves for one above it (new nodes before old ones go, a preemptible job
//! requeued without a retry, a non-preemptible one keeping its node), within a provider
//! block or across two, and leaves a candidate that has no room for the next one (in
//! any provider block); prices and capacity come from a `gpuplan sim trace`.

use std::path::Path;

use serde_json::Value;

use crate::sim_run::run;

fn ok(dir: &Path, args: &[&str]) -> (String, String) {
    let (code, out, err) = run(dir, args);
    assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    (out, err)
}

fn json(dir: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&ok(dir, args).0).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Two nodes of 8 × A100-80GB (one on-demand, one spot) that may live in three sim
/// regions; jobs run 48 h so that none ends during a test.
const SPEC: &str = r#"
provider "sim" {
  seed         = 7
  job_duration = "48h"
}

gpu_pool "train" {
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 2
    max     = 4
  }
  mix {
    on_demand_base = 1
    spot_percent   = 100
  }
  placement {
    candidates = [
      { provider = "sim", region = "us-east-1" },
      { provider = "sim", region = "us-west-2" },
      { provider = "sim", region = "cn-hangzhou" },
    ]
    strategy   = "cheapest"
    min_saving = 15
    min_stay   = "2h"
  }
}
"#;

const JOBS: &str = r#"
job_template "ckpt" {
  image          = "ghcr.io/example/train:1"
  command        = ["python", "train.py"]
  gpus           = 8
  preemptible    = true
  max_runtime    = "72h"
  retries        = 1
  checkpoint_uri = "s3://example/ckpt"
}

job_template "eval" {
  image       = "ghcr.io/example/eval:1"
  command     = ["python", "eval.py"]
  gpus        = 8
  preemptible = false
  max_runtime = "72h"
}

job "resumable" {
  template = job_template.ckpt
  pool     = gpu_pool.train
}

job "pinned" {
  template = job_template.eval
  pool     = gpu_pool.train
}
"#;

/// us-west-2 is cheapest at the start (1 × 24 + 1 × 12 = 36 USD/h against 48 in us-east-1
/// and 43.20 in cn-hangzhou); at 03:00 us-east-1 gets 6 % cheaper than us-west-2 (33.60
/// USD/h: below `min_saving`); at 06:00 us-west-2 gets dear (56 USD/h: us-east-1 is 40 %
/// cheaper).
const TRACE: &str = "\
time,provider,region,gpu,capacity,price_usd_hour,available_nodes
2026-03-10T00:00:00Z,sim,us-east-1,A100-80GB,spot,2.00,
2026-03-10T00:00:00Z,sim,us-east-1,A100-80GB,on-demand,4.00,
2026-03-10T00:00:00Z,sim,us-west-2,A100-80GB,spot,1.50,
2026-03-10T00:00:00Z,sim,us-west-2,A100-80GB,on-demand,3.00,
2026-03-10T00:00:00Z,sim,cn-hangzhou,A100-80GB,spot,1.80,
2026-03-10T00:00:00Z,sim,cn-hangzhou,A100-80GB,on-demand,3.60,
2026-03-10T03:00:00Z,sim,us-east-1,A100-80GB,on-demand,2.20,
2026-03-10T06:00:00Z,sim,us-west-2,A100-80GB,spot,3.00,
2026-03-10T06:00:00Z,sim,us-west-2,A100-80GB,on-demand,4.00,
";

fn setup(dir: &Path, spec: &str, trace: &str) {
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    std::fs::write(dir.join("trace.csv"), trace).unwrap();
    let (out, _) = ok(dir, &["sim", "trace", "trace.csv"]);
    assert!(out.contains("loaded"), "{out}");
}

/// The pool's nodes as the state records them: (id, region, capacity).
fn sim_nodes(dir: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(dir.join("state/default.json")).unwrap_or_default();
    let state: Value = crate::state_plain::plain(serde_json::from_str(&text).unwrap_or(Value::Null));
    let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().cloned().unwrap_or_default();
    nodes
        .iter()
        .map(|n| {
            let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
            (s("id"), s("region"), s("capacity"))
        })
        .collect()
}

fn regions(dir: &Path) -> Vec<String> {
    let mut r: Vec<String> = sim_nodes(dir).into_iter().map(|n| n.1).collect();
    r.sort();
    r
}

fn placement(plan: &Value) -> &Value {
    &plan["placements"][0]
}

#[test]
fn validate_reports_every_candidate_without_the_shape_at_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let spec = SPEC
        .replace("region = \"us-west-2\" }", "region = \"eu-west-1\" }")
        .replace("region = \"cn-hangzhou\" }", "region = \"cn-hangzhou\", zones = [\"cn-hangzhou-q\"] }");
    std::fs::write(d.join("main.hcl"), &spec).unwrap();
    let (code, out, err) = run(d, &["validate", "--json"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let diags = v["diagnostics"].as_array().unwrap();
    let line_of = |needle: &str| spec.lines().position(|l| l.contains(needle)).unwrap() as u64 + 1;
    let at = |line: u64| diags.iter().any(|d| d["line"] == line && d["severity"] == "error");
    assert!(at(line_of("eu-west-1")), "eu-west-1 sells no 8 × A100-80GB: {v:#}");
    assert!(at(line_of("cn-hangzhou-q")), "cn-hangzhou-q is no zone of cn-hangzhou: {v:#}");
    assert!(!at(line_of("us-east-1")), "us-east-1 is a good candidate: {v:#}");

    // `provider`/`region` beside `placement` is refused at its line.
    let both = SPEC
        .replace("  gpu           = \"A100-80GB\"", "  region        = \"us-east-1\"\n  gpu           = \"A100-80GB\"");
    std::fs::write(d.join("main.hcl"), &both).unwrap();
    let (code, out, _) = run(d, &["validate", "--json"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("takes its provider, region and zones from its candidates"), "{out}");
}

#[test]
fn yaml_spells_placement_too() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let yaml = "\
providers:
  sim: {}
gpu_pools:
  train:
    gpu: A100-80GB
    gpus_per_node: 8
    nodes: {min: 0, desired: 1, max: 2}
    placement:
      candidates:
        - {provider: sim, region: us-east-1}
        - {provider: sim, region: eu-west-1}
      strategy: ordered
";
    std::fs::write(d.join("main.yaml"), yaml).unwrap();
    let (code, out, _) = run(d, &["validate", "--json"]);
    assert_eq!(code, 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["diagnostics"][0]["line"], 11, "at the eu-west-1 candidate: {v:#}");
    std::fs::write(d.join("main.yaml"), yaml.replace("eu-west-1", "us-west-2")).unwrap();
    ok(d, &["validate"]);
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(placement(&plan)["chosen"], "sim us-east-1", "ordered: the first with capacity: {plan:#}");
    assert_eq!(placement(&plan)["action"], "create");
}

#[test]
fn created_in_the_cheapest_candidate_and_kept_for_a_saving_below_min_saving() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, SPEC, TRACE);
    let plan = json(d, &["plan", "--json"]);
    let p = placement(&plan);
    assert_eq!(p["action"], "create", "{p:#}");
    assert_eq!(p["chosen"], "sim us-west-2", "{p:#}");
    let rows = p["candidates"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1]["hourly_usd"], 36.0, "1 × 24 on-demand + 1 × 12 spot: {p:#}");
    assert!(rows[1]["price"].as_str().unwrap().starts_with("live 2026-03-10T00:00:00Z"), "{p:#}");
    let (text, _) = ok(d, &["plan"]);
    assert!(text.contains("Placement of `gpu_pool.train`: create: sim us-west-2 is the cheapest"), "{text}");
    let (md, _) = ok(d, &["plan", "--format", "markdown"]);
    assert!(md.contains("| sim us-west-2 | 36.00 | live 2026-03-10T00:00:00Z | ok | chosen |"), "{md}");

    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(regions(d), ["us-west-2", "us-west-2"]);
    // An unchanged world: an empty plan.
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("stay: sim us-west-2 is the cheapest"), "{out}");

    // 03:30: us-east-1 is 6 % cheaper, below min_saving 15 %: the pool stays.
    ok(d, &["sim", "advance", "3h30m"]);
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("stay: sim us-east-1 is 6 % cheaper (33.60 USD/h vs 36.00 USD/h), below min_saving 15 %"),
        "{out}"
    );
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(placement(&plan)["action"], "stay");
    assert_eq!(plan["summary"]["add"], 0);
}

#[test]
fn a_saving_above_min_saving_moves_new_nodes_first_jobs_by_the_removed_node_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, &format!("{SPEC}{JOBS}"), TRACE);
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(regions(d), ["us-west-2", "us-west-2"]);
    let before: Vec<(String, String, String)> = sim_nodes(d);
    let od_old = before.iter().find(|n| n.2 == "on-demand").unwrap().0.clone();

    // 06:00: us-west-2 costs 56 USD/h, us-east-1 33.60: 40 % cheaper, above min_saving 15 %.
    ok(d, &["sim", "advance", "6h"]);
    let plan = json(d, &["plan", "--json"]);
    let p = placement(&plan);
    assert_eq!(p["action"], "move", "{p:#}");
    assert_eq!(p["chosen"], "sim us-east-1");
    assert_eq!(p["current"], "sim us-west-2");
    assert!(p["reason"].as_str().unwrap().contains("40 % cheaper"), "{p:#}");
    let change = &plan["changes"][0];
    assert_eq!(change["action"], "replace", "{change:#}");
    // The cost before is the pool where it runs: us-west-2 at 06:00.
    assert_eq!(plan["cost"]["hourly_before"], 56.0, "{:#}", plan["cost"]);
    let job = plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == "job.resumable").unwrap();
    assert_eq!(job["retries_spent"], 0, "a move spends no retry: {job:#}");
    assert_eq!(job["attempt"], 2, "requeued as attempt 2: {job:#}");

    // A policy sees the move.
    std::fs::create_dir_all(d.join("policies")).unwrap();
    std::fs::write(
        d.join("policies/moves.hcl"),
        "policy \"calm\" {\n  enforcement = \"hard\"\n  assert = plan.moves <= 0\n  message = \"${plan.moves} move(s)\"\n}\n",
    )
    .unwrap();
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 3, "the hard policy denies a move\n{out}\n{err}");
    std::fs::remove_file(d.join("policies/moves.hcl")).unwrap();

    let (out, err) = ok(d, &["apply", "--auto-approve"]);
    let log = format!("{out}{err}");
    let created = log.find("created").unwrap_or_else(|| panic!("{log}"));
    let terminated = log.find("terminated 1 node").unwrap_or_else(|| panic!("{log}"));
    assert!(created < terminated, "new nodes before old ones go:\n{log}");
    let after = sim_nodes(d);
    // The non-preemptible job keeps its on-demand node in us-west-2; the spot one went.
    assert!(after.iter().any(|n| n.0 == od_old && n.1 == "us-west-2"), "{after:?}");
    assert_eq!(after.iter().filter(|n| n.1 == "us-east-1").count(), 2, "{after:?}");
    assert_eq!(after.iter().filter(|n| n.1 == "us-west-2").count(), 1, "{after:?}");

    let jobs = json(d, &["jobs", "list", "--json"]);
    let job = |name: &str| jobs["jobs"].as_array().unwrap().iter().find(|j| j["address"] == name).unwrap().clone();
    let resumable = job("job.resumable");
    let pinned = job("job.pinned");
    assert_eq!(resumable["attempt"], 2, "requeued from its checkpoint: {resumable:#}");
    let first = &resumable["runs"][0];
    assert!(first["message"].as_str().unwrap().ends_with("requeued from its checkpoint"), "{resumable:#}");
    assert_eq!(pinned["attempt"], 1, "kept on its node: {pinned:#}");
    assert_eq!(pinned["state"], "running", "{pinned:#}");

    // Placed in us-east-1 now: the next plan stays and changes nothing.
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("stay: sim us-east-1"), "{out}");
    assert!(out.contains("deferred until it"), "the old node waits for job.pinned: {out}");
}

#[test]
fn min_stay_keeps_a_young_placement() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // us-west-2 gets dear 30 minutes after the pool was placed there.
    let trace = TRACE
        .replace("2026-03-10T06:00:00Z", "2026-03-10T00:30:00Z")
        .replace("2026-03-10T03:00:00Z", "2026-03-10T00:30:00Z");
    setup(d, &SPEC.replace("min_stay   = \"2h\"", "min_stay   = \"6h\""), &trace);
    ok(d, &["apply", "--auto-approve"]);
    ok(d, &["sim", "advance", "1h"]);
    let plan = json(d, &["plan", "--json"]);
    let reason = placement(&plan)["reason"].as_str().unwrap().to_string();
    assert_eq!(placement(&plan)["action"], "stay", "{reason}");
    assert!(reason.contains("% cheaper, but sim us-west-2 was placed 1h ago (min_stay 6h)"), "{reason}");
    ok(d, &["sim", "advance", "5h"]);
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(placement(&plan)["action"], "move", "{:#}", placement(&plan));
}

#[test]
fn a_capacity_failure_falls_over_to_the_next_candidate() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // us-west-2 is cheapest but has no A100 left of either kind.
    let trace = TRACE
        .replace("us-west-2,A100-80GB,spot,1.50,", "us-west-2,A100-80GB,spot,1.50,0")
        .replace("us-west-2,A100-80GB,on-demand,3.00,", "us-west-2,A100-80GB,on-demand,3.00,0");
    setup(d, SPEC, &trace);
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(placement(&plan)["chosen"], "sim us-west-2", "{:#}", placement(&plan));
    // One apply: us-west-2 has no room, so the nodes go to the next cheapest candidate.
    let (out, err) = ok(d, &["apply", "--auto-approve"]);
    assert_eq!(regions(d), ["cn-hangzhou", "cn-hangzhou"], "{out}\n{err}");
    assert!(format!("{out}{err}").contains("placed in sim cn-hangzhou"), "{out}\n{err}");
    let plan = json(d, &["plan", "--json"]);
    let p = placement(&plan);
    let west = &p["candidates"][1];
    assert!(west["capacity"].as_str().unwrap().starts_with("short since 2026-03-10T00:00"), "{p:#}");
    assert_eq!(p["current"], "sim cn-hangzhou", "{p:#}");
    assert_eq!(p["action"], "stay", "{p:#}");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

#[test]
fn a_move_whose_target_has_no_room_goes_to_the_next_candidate_and_never_below_size() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // At 06:00 us-west-2 gets dear, and us-east-1 has no spot left.
    let trace = format!("{TRACE}2026-03-10T05:00:00Z,sim,us-east-1,A100-80GB,spot,2.00,0\n");
    setup(d, SPEC, &trace);
    ok(d, &["apply", "--auto-approve"]);
    ok(d, &["sim", "advance", "6h"]);
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(placement(&plan)["chosen"], "sim us-east-1", "{:#}", placement(&plan));
    let (out, err) = ok(d, &["apply", "--auto-approve"]);
    // us-east-1 took the on-demand node; the spot one went to the next candidate in the
    // same apply. The old nodes went only once both had replacements.
    let nodes = sim_nodes(d);
    assert_eq!(nodes.len(), 2, "the pool keeps its size: {nodes:?}\n{out}\n{err}");
    assert!(nodes.iter().any(|n| n.1 == "us-east-1" && n.2 == "on-demand"), "{nodes:?}");
    assert!(nodes.iter().any(|n| n.1 == "cn-hangzhou" && n.2 == "spot"), "{nodes:?}");
    let plan = json(d, &["plan", "--json"]);
    let p = placement(&plan);
    let east = &p["candidates"][0];
    assert!(east["capacity"].as_str().unwrap().starts_with("short since"), "{p:#}");
    assert_eq!(p["current"], "sim cn-hangzhou", "{p:#}");
    assert_eq!(p["chosen"], "sim cn-hangzhou", "{p:#}");
    // The on-demand node left in us-east-1 joins the others.
    let change = &plan["changes"][0]["pool"];
    assert_eq!(change["region"], "cn-hangzhou", "{change:#}");
    assert!(change["creates"][0]["zone"].as_str().unwrap().starts_with("cn-hangzhou-"), "{change:#}");
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(regions(d), ["cn-hangzhou", "cn-hangzhou"]);
}

#[test]
fn a_bad_trace_names_every_bad_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let bad = "\
time,provider,region,gpu,capacity,price_usd_hour,available_nodes
2026-03-10T00:00:00Z,aws,us-east-1,A100-80GB,spot,2.00,
yesterday,sim,us-east-1,A100-80GB,spot,2.00,
2026-03-10T00:00:00Z,sim,us-east-1,A100-80GB,preemptible,2.00,
2026-03-10T00:00:00Z,sim,us-east-1,A100-80GB,spot,2.00,
";
    std::fs::write(d.join("trace.csv"), bad).unwrap();
    let (code, out, err) = run(d, &["sim", "trace", "trace.csv"]);
    assert_eq!(code, 1, "{out}\n{err}");
    for line in
        ["line 2: provider `aws`", "line 3: `yesterday` is not an RFC 3339 time", "line 4: capacity `preemptible`"]
    {
        assert!(err.contains(line), "{line}:\n{err}");
    }
    assert!(!err.contains("line 5"), "{err}");
}

#[test]
fn reconcile_moves_a_pool_on_its_own_and_then_rests() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, SPEC, TRACE);
    ok(d, &["reconcile", "--once"]);
    assert_eq!(regions(d), ["us-west-2", "us-west-2"], "created in the cheapest candidate");
    ok(d, &["sim", "advance", "6h"]);
    ok(d, &["reconcile", "--once"]);
    assert_eq!(regions(d), ["us-east-1", "us-east-1"], "moved where it is 40 % cheaper");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// SPEC with each candidate served by its own sim provider block: `sim` (us-west-2, where
/// the pool starts), `sim2` (us-east-1) and `sim3` (cn-hangzhou). All three reach the one
/// embedded cloud, so the blocks are told apart by what the plan and the state record.
fn three_blocks(spec: &str) -> String {
    spec.replace(
        "provider \"sim\" {\n",
        "provider \"sim\" {\n  alias = \"sim2\"\n}\n\nprovider \"sim\" {\n  alias = \"sim3\"\n}\n\nprovider \"sim\" {\n",
    )
    .replace("{ provider = \"sim\", region = \"us-east-1\" }", "{ provider = \"sim2\", region = \"us-east-1\" }")
    .replace("{ provider = \"sim\", region = \"cn-hangzhou\" }", "{ provider = \"sim3\", region = \"cn-hangzhou\" }")
}

/// The pool's nodes as the state records them: (id, provider block, region), and the
/// provider block the state has the pool in.
fn blocks(dir: &Path) -> (Vec<(String, String, String)>, String) {
    let text = std::fs::read_to_string(dir.join("state/default.json")).unwrap_or_default();
    let state: Value = crate::state_plain::plain(serde_json::from_str(&text).unwrap_or(Value::Null));
    let pool = &state["resources"]["gpu_pool.train"];
    let home = pool["provider"].as_str().unwrap_or_default().to_string();
    let nodes = pool["nodes"].as_array().cloned().unwrap_or_default();
    let nodes = nodes
        .iter()
        .map(|n| {
            let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
            let provider = n["provider"].as_str().unwrap_or(&home).to_string();
            (s("id"), provider, s("region"))
        })
        .collect();
    (nodes, home)
}

#[test]
fn a_pool_moves_to_another_provider_block_new_nodes_first_jobs_by_the_removed_node_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, &three_blocks(&format!("{SPEC}{JOBS}")), TRACE);
    ok(d, &["apply", "--auto-approve"]);
    let (before, home) = blocks(d);
    assert_eq!(home, "sim");
    assert!(before.iter().all(|n| n.1 == "sim" && n.2 == "us-west-2"), "{before:?}");
    let od_old = sim_nodes(d).into_iter().find(|n| n.2 == "on-demand").unwrap().0;

    // 06:00: us-west-2 costs 56 USD/h; sim2's us-east-1 33.60, 40 % cheaper.
    ok(d, &["sim", "advance", "6h"]);
    let plan = json(d, &["plan", "--json"]);
    let p = placement(&plan);
    assert_eq!(p["action"], "move", "{p:#}");
    assert_eq!(p["chosen"], "sim2 us-east-1", "{p:#}");
    assert_eq!(p["current"], "sim us-west-2", "{p:#}");
    assert!(p["reason"].as_str().unwrap().contains("sim2 us-east-1 is 40 % cheaper than sim us-west-2"), "{p:#}");
    let pool = &plan["changes"][0]["pool"];
    assert_eq!(pool["provider"], "sim2", "{pool:#}");
    let deletes = pool["deletes"].as_array().unwrap();
    assert!(!deletes.is_empty() && deletes.iter().all(|d| d["provider"] == "sim"), "{pool:#}");
    assert_eq!(plan["cost"]["hourly_before"], 56.0, "priced where it runs: {:#}", plan["cost"]);
    // After: the two new nodes in us-east-1 (33.60) and the on-demand node job.pinned keeps
    // in us-west-2, at that region's price (8 × 4.00).
    assert_eq!(plan["cost"]["hourly_after"], 65.6, "{:#}", plan["cost"]);
    let job = plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == "job.resumable").unwrap();
    assert_eq!(job["retries_spent"], 0, "a move spends no retry: {job:#}");
    let (text, _) = ok(d, &["plan"]);
    assert!(text.contains("sim us-west-2 -> sim2 us-east-1"), "both provider blocks named:\n{text}");

    let (out, err) = ok(d, &["apply", "--auto-approve"]);
    let log = format!("{out}{err}");
    let created = log.find("created").unwrap_or_else(|| panic!("{log}"));
    let terminated = log.find("terminated 1 node through sim").unwrap_or_else(|| panic!("{log}"));
    assert!(created < terminated, "new nodes before old ones go:\n{log}");
    let (after, home) = blocks(d);
    assert_eq!(home, "sim2", "{after:?}");
    // The non-preemptible job keeps its node in sim's us-west-2, recorded there.
    assert!(after.iter().any(|n| n.0 == od_old && n.1 == "sim" && n.2 == "us-west-2"), "{after:?}");
    assert_eq!(after.iter().filter(|n| n.1 == "sim2" && n.2 == "us-east-1").count(), 2, "{after:?}");
    assert_eq!(after.len(), 3, "{after:?}");
    let jobs = json(d, &["jobs", "list", "--json"]);
    let job = |name: &str| jobs["jobs"].as_array().unwrap().iter().find(|j| j["address"] == name).unwrap().clone();
    let resumable = job("job.resumable");
    assert_eq!(resumable["attempt"], 2, "requeued from its checkpoint: {resumable:#}");
    assert!(
        resumable["runs"][0]["message"].as_str().unwrap().ends_with("requeued from its checkpoint"),
        "{resumable:#}"
    );
    let pinned = job("job.pinned");
    assert_eq!((pinned["attempt"].clone(), pinned["state"].clone()), (1.into(), "running".into()), "{pinned:#}");

    // The next plan stays and changes nothing; the old node waits for job.pinned.
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("stay: sim2 us-east-1"), "{out}");
    assert!(out.contains("deferred until it"), "{out}");

    // Once job.pinned has ended, its node goes through the block it lives in, and the
    // plan after that is empty.
    ok(d, &["sim", "advance", "48h"]);
    let plan = json(d, &["plan", "--json"]);
    let deletes = plan["changes"][0]["pool"]["deletes"].as_array().cloned().unwrap_or_default();
    assert!(deletes.iter().any(|x| x["id"] == od_old.as_str() && x["provider"] == "sim"), "{plan:#}");
    ok(d, &["apply", "--auto-approve"]);
    let (after, _) = blocks(d);
    assert!(after.iter().all(|n| n.1 == "sim2" && n.2 == "us-east-1"), "{after:?}");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

#[test]
fn reconcile_moves_a_pool_to_another_provider_block_on_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, &three_blocks(SPEC), TRACE);
    ok(d, &["reconcile", "--once"]);
    assert!(blocks(d).0.iter().all(|n| n.1 == "sim" && n.2 == "us-west-2"), "{:?}", blocks(d));
    ok(d, &["sim", "advance", "6h"]);
    ok(d, &["reconcile", "--once"]);
    let (nodes, home) = blocks(d);
    assert_eq!(home, "sim2", "{nodes:?}");
    assert!(nodes.len() == 2 && nodes.iter().all(|n| n.1 == "sim2" && n.2 == "us-east-1"), "{nodes:?}");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

#[test]
fn a_capacity_failure_in_the_target_block_falls_over_to_a_third_block() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // At 06:00 us-west-2 gets dear, and sim2's us-east-1 has no A100 left of either kind.
    let trace = format!(
        "{TRACE}2026-03-10T05:00:00Z,sim,us-east-1,A100-80GB,spot,2.00,0\n2026-03-10T05:00:00Z,sim,us-east-1,A100-80GB,on-demand,2.20,0\n"
    );
    setup(d, &three_blocks(SPEC), &trace);
    ok(d, &["apply", "--auto-approve"]);
    ok(d, &["sim", "advance", "6h"]);
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(placement(&plan)["chosen"], "sim2 us-east-1", "{:#}", placement(&plan));
    let (out, err) = ok(d, &["apply", "--auto-approve"]);
    let log = format!("{out}{err}");
    assert!(log.contains("placed in sim3 cn-hangzhou"), "{log}");
    let (nodes, home) = blocks(d);
    assert_eq!(home, "sim3", "{nodes:?}\n{log}");
    assert_eq!(nodes.len(), 2, "the pool keeps its size: {nodes:?}\n{log}");
    assert!(nodes.iter().all(|n| n.1 == "sim3" && n.2 == "cn-hangzhou"), "{nodes:?}\n{log}");
    let plan = json(d, &["plan", "--json"]);
    let p = placement(&plan);
    assert_eq!(p["current"], "sim3 cn-hangzhou", "{p:#}");
    assert!(p["candidates"][0]["capacity"].as_str().unwrap().starts_with("short since"), "{p:#}");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// How many of the pool's nodes in `region` the journal of a running apply records.
fn journaled(dir: &Path, region: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir.join("state")) else { return 0 };
    let needle = format!("\"region\":\"{region}\"");
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".journal"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default().matches(&needle).count())
        .sum()
}

#[test]
fn an_apply_killed_mid_move_across_blocks_leaves_every_node_recorded_and_the_next_plan_finishes_it() {
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, &three_blocks(SPEC), TRACE);
    ok(d, &["apply", "--auto-approve"]);
    ok(d, &["sim", "advance", "6h"]);
    // Every sim call waits 2 s: the apply is killed once both new nodes are journaled,
    // while the old ones' termination is still waiting.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .current_dir(d)
        .env("NO_COLOR", "1")
        .env_remove("GPUPLAN_WORKSPACE")
        .env("GPUPLAN_SIM_START", crate::sim_run::SIM_START)
        .env("GPUPLAN_SIM_LATENCY", "2s")
        .args(["apply", "--auto-approve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while journaled(d, "us-east-1") < 2 {
        assert!(start.elapsed() < Duration::from_secs(120), "the new nodes were never journaled");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();

    // Every node is recorded in the block it lives in: the old ones in sim, the new in sim2.
    let (out, _) = ok(d, &["state", "pull"]);
    let state: Value = serde_json::from_str(&out).unwrap();
    let pool = &state["resources"]["gpu_pool.train"];
    assert_eq!(pool["provider"], "sim", "the move did not finish: {pool:#}");
    let nodes = pool["nodes"].as_array().unwrap();
    let at = |p: &str, r: &str| nodes.iter().filter(|n| n["provider"] == p && n["region"] == r).count();
    assert_eq!((at("sim", "us-west-2"), at("sim2", "us-east-1"), nodes.len()), (2, 2, 4), "{pool:#}");

    // The next plan finishes the move: it keeps the new nodes and removes the old ones
    // through sim; the plan after that is empty.
    let plan = json(d, &["plan", "--json"]);
    let pool = &plan["changes"][0]["pool"];
    assert!(pool["creates"].as_array().is_none_or(|c| c.is_empty()), "nothing launched twice: {pool:#}");
    let deletes = pool["deletes"].as_array().unwrap();
    assert_eq!(deletes.len(), 2, "{pool:#}");
    assert!(deletes.iter().all(|x| x["provider"] == "sim" && x["region"] == "us-west-2"), "{pool:#}");
    ok(d, &["apply", "--auto-approve"]);
    let (after, home) = blocks(d);
    assert_eq!(home, "sim2", "{after:?}");
    assert!(after.len() == 2 && after.iter().all(|n| n.1 == "sim2" && n.2 == "us-east-1"), "{after:?}");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

#[test]
fn a_destroy_while_a_node_waits_in_the_old_block_terminates_each_node_through_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, &three_blocks(&format!("{SPEC}{JOBS}")), TRACE);
    ok(d, &["apply", "--auto-approve"]);
    ok(d, &["sim", "advance", "6h"]);
    ok(d, &["apply", "--auto-approve"]);
    let (nodes, home) = blocks(d);
    assert_eq!((home.as_str(), nodes.len()), ("sim2", 3), "job.pinned keeps its node in sim: {nodes:?}");

    // Cancelled first: a destroy leaves a running job that is not preemptible on its node.
    ok(d, &["jobs", "cancel", "job.pinned"]);
    let (out, err) = ok(d, &["destroy", "--auto-approve"]);
    let log = format!("{out}{err}");
    assert!(log.contains("terminated 1 node through sim"), "{log}");
    assert!(log.contains("terminated 2 nodes"), "{log}");
    assert!(blocks(d).0.is_empty(), "{:?}", blocks(d));
}

/// A team quota over the floating pool (`max_gpus` and an hourly budget given by the test).
fn quota(limits: &str) -> String {
    format!("\nquota \"ml\" {{\n  pools = [gpu_pool.train]\n{limits}}}\n")
}

#[test]
fn a_move_whose_overlap_breaks_a_team_quota_stays_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, &format!("{SPEC}{}", quota("  max_gpus = 16\n")), TRACE);
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(regions(d), ["us-west-2", "us-west-2"]);
    // 06:00: us-east-1 is 40 % cheaper, but while its 2 new nodes start the 2 old ones
    // still run: 32 GPUs against a quota of 16. The pool stays, and says why.
    ok(d, &["sim", "advance", "6h"]);
    let plan = json(d, &["plan", "--json"]);
    let p = placement(&plan);
    assert_eq!(p["action"], "stay", "{p:#}");
    assert_eq!(p["held_by"], "quota.ml", "{p:#}");
    let reason = p["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "stay: moving to sim us-east-1 would exceed quota.ml during the overlap (32 GPUs > max_gpus 16"
        ),
        "{reason}"
    );
    assert!(reason.contains("40 % cheaper"), "the saving it waits for: {reason}");
    assert_eq!(plan["summary"]["add"], 0, "{:#}", plan["summary"]);
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "nothing to do while the quota has no room\n{out}\n{err}");
    assert!(out.contains("would exceed quota.ml during the overlap"), "{out}");

    // Room for the GPUs, but not for the hourly budget while both sets run: 56 USD/h where
    // it runs + 33.60 where it goes = 89.60 USD/h > 60, though 33.60 after the move fits.
    std::fs::write(
        d.join("main.hcl"),
        format!("{SPEC}{}", quota("  max_gpus = 32\n  budget {\n    hourly_usd = 60\n  }\n")),
    )
    .unwrap();
    let plan = json(d, &["plan", "--json"]);
    let p = placement(&plan);
    assert_eq!(p["action"], "stay", "{p:#}");
    assert!(p["reason"].as_str().unwrap().contains("89.60 USD/h > budget.hourly_usd 60.00 USD/h"), "{p:#}");

    // With room for the overlap, it moves.
    std::fs::write(
        d.join("main.hcl"),
        format!("{SPEC}{}", quota("  max_gpus = 32\n  budget {\n    hourly_usd = 100\n  }\n")),
    )
    .unwrap();
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(placement(&plan)["action"], "move", "{:#}", placement(&plan));
    assert!(placement(&plan).get("held_by").is_none(), "{:#}", placement(&plan));
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(regions(d), ["us-east-1", "us-east-1"]);
}

#[test]
fn a_move_that_cannot_wait_and_breaks_a_quota_during_the_overlap_is_a_plan_error() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, SPEC, TRACE);
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(regions(d), ["us-west-2", "us-west-2"]);
    // us-west-2 is no longer a candidate: the pool must move, and the overlap breaks the quota.
    let spec = SPEC.replace("      { provider = \"sim\", region = \"us-west-2\" },\n", "");
    std::fs::write(d.join("main.hcl"), format!("{spec}{}", quota("  max_gpus = 16\n"))).unwrap();
    let (code, out, err) = run(d, &["plan", "--json"]);
    assert_eq!(code, 1, "a plan error\n{out}\n{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(placement(&plan)["action"], "move", "{:#}", placement(&plan));
    let errors = plan["errors"].as_array().unwrap();
    let e = errors.iter().find(|e| e["address"] == "gpu_pool.train").unwrap_or_else(|| panic!("{errors:#?}"));
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.starts_with("during the move both sets run: quota.ml would hold 32 GPUs, above its max_gpus 16"),
        "{msg}"
    );
    let (code, out, err) = run(d, &["apply", "--auto-approve"]);
    assert_ne!(code, 0, "apply refuses\n{out}\n{err}");
    assert_eq!(regions(d), ["us-west-2", "us-west-2"], "nothing moved");
}

#[test]
fn every_view_shows_a_moves_peak_and_a_policy_can_cap_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, SPEC, TRACE);
    ok(d, &["apply", "--auto-approve"]);
    ok(d, &["sim", "advance", "6h"]);
    let plan = json(d, &["plan", "--json"]);
    let p = placement(&plan);
    assert_eq!(p["action"], "move", "{p:#}");
    // 2 nodes where it runs (56 USD/h at 06:00) and 2 where it goes (33.60 USD/h).
    assert_eq!(p["peak"]["nodes"], 4, "{p:#}");
    assert_eq!(p["peak"]["gpus"], 32, "{p:#}");
    assert_eq!(p["peak"]["hourly_usd"], 89.6, "{p:#}");
    assert_eq!(plan["cost"]["pools"][0]["peak"]["hourly_usd"], 89.6, "{:#}", plan["cost"]);
    let (text, _) = ok(d, &["plan"]);
    assert!(text.contains("while both sets run: 4 nodes, 32 GPUs, 89.60 USD/h"), "{text}");
    let (md, _) = ok(d, &["plan", "--format", "markdown"]);
    assert!(md.contains("while both sets run: 4 nodes, 32 GPUs, 89.60 USD/h"), "{md}");

    std::fs::create_dir_all(d.join("policies")).unwrap();
    std::fs::write(
        d.join("policies/overlap.hcl"),
        "policy \"small_moves\" {\n  enforcement = \"hard\"\n  for_each = { for a, p in plan.pools : a => p if p.moving }\n  assert = each.value.peak_gpus <= 16\n  message = \"${each.key} peaks at ${each.value.peak_gpus} GPUs, ${each.value.peak_hourly} USD/h\"\n}\n",
    )
    .unwrap();
    let (code, out, err) = run(d, &["plan"]);
    assert_eq!(code, 3, "the hard policy denies the move\n{out}\n{err}");
    assert!(format!("{out}{err}").contains("gpu_pool.train peaks at 32 GPUs, 89.6 USD/h"), "{out}\n{err}");
}

#[test]
fn a_quotas_peak_counts_its_moving_pools_at_their_peak_and_the_others_after() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let fixed = "\ngpu_pool \"infer\" {\n  provider      = \"sim\"\n  region        = \"us-east-1\"\n  gpu           = \"A100-80GB\"\n  gpus_per_node = 8\n  nodes {\n    min     = 0\n    desired = 1\n    max     = 1\n  }\n}\n";
    let quota = "\nquota \"ml\" {\n  pools = [gpu_pool.train, gpu_pool.infer]\n}\n";
    setup(d, &format!("{SPEC}{fixed}{quota}"), TRACE);
    ok(d, &["apply", "--auto-approve"]);
    ok(d, &["sim", "advance", "6h"]);
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(placement(&plan)["action"], "move", "{:#}", placement(&plan));
    let q = &plan["cost"]["quotas"][0];
    assert_eq!(q["gpus_after"], 24, "{q:#}");
    // gpu_pool.train with both sets (32 GPUs), gpu_pool.infer as after (8).
    assert_eq!(q["peak"]["gpus"], 40, "{q:#}");
    assert_eq!(q["peak"]["nodes"], 5, "{q:#}");
    let infer = plan["cost"]["pools"].as_array().unwrap().iter().find(|p| p["address"] == "gpu_pool.infer").unwrap();
    assert!(infer.get("peak").is_none(), "a pool that does not move has no peak: {infer:#}");
    let (text, _) = ok(d, &["plan"]);
    assert!(text.contains("quota.ml: 24 GPUs") && text.contains("while a move runs both sets: 40 GPUs"), "{text}");
}

#[test]
fn reconcile_keeps_a_pool_whose_move_a_quota_cannot_take_and_moves_it_once_it_can() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    setup(d, &format!("{SPEC}{JOBS}{}", quota("  max_gpus = 24\n")), TRACE);
    ok(d, &["reconcile", "--once"]);
    assert_eq!(regions(d), ["us-west-2", "us-west-2"]);
    ok(d, &["sim", "advance", "6h"]);
    let (out, err) = ok(d, &["reconcile", "--once"]);
    assert_eq!(regions(d), ["us-west-2", "us-west-2"], "32 GPUs while both sets run > 24\n{out}\n{err}");
    let jobs = json(d, &["jobs", "list", "--json"]);
    let resumable = jobs["jobs"].as_array().unwrap().iter().find(|j| j["address"] == "job.resumable").unwrap();
    assert_eq!(resumable["attempt"], 1, "not requeued for a move that waits: {resumable:#}");
    std::fs::write(d.join("main.hcl"), format!("{SPEC}{JOBS}{}", quota("  max_gpus = 32\n"))).unwrap();
    ok(d, &["reconcile", "--once"]);
    let r = regions(d);
    assert_eq!(r.iter().filter(|x| *x == "us-east-1").count(), 2, "moved once the quota has room: {r:?}");
}
