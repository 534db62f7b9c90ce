//! GPU health on the embedded cloud (docs/design/gpu-health.md), through the CLI: the
//! `health {}` block in HCL and YAML, faults scripted with `gpuplan sim fault`, and what
//! the plan does with an unhealthy node: replace it (new node first), quarantine it, or
//! hold the repair at `max_repairs` with one alert.

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

/// A training pool of `nodes` on-demand nodes of 8 A100s in one zone, with `health` (HCL
/// lines, may be empty: the defaults), and a job of one replica that runs for hours.
fn fleet(dir: &Path, nodes: u32, health: &str) {
    let text = format!(
        r#"provider "sim" {{
  region       = "us-east-1"
  seed         = 42
  job_duration = "6h"
}}

gpu_pool "train" {{
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  image          = "ami-gpuplan-cuda12"
  nodes {{
    desired = {nodes}
    max     = 8
  }}
{health}
}}

job_template "finetune" {{
  image   = "ghcr.io/example/finetune:1.4"
  command = ["python", "train.py"]
  gpus    = 8
  retries = 2
}}

job "llama" {{
  template = job_template.finetune
  pool     = gpu_pool.train
}}
"#
    );
    std::fs::write(dir.join("main.hcl"), text).unwrap();
}

/// The pool's node ids as the state records them.
fn nodes(dir: &Path) -> Vec<String> {
    let state: Value = crate::state_plain::read(&dir.join("state/default.json"));
    let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().expect("nodes");
    nodes.iter().map(|n| n["id"].as_str().unwrap().to_string()).collect()
}

/// The node the job's latest run is on.
fn job_node(dir: &Path) -> String {
    let s = json(dir, &["jobs", "status", "llama", "--json"]);
    let runs = s["jobs"][0]["runs"].as_array().unwrap_or_else(|| panic!("{s:#}"));
    runs.last().unwrap()["node_id"].as_str().unwrap().to_string()
}

fn change<'a>(plan: &'a Value, addr: &str) -> &'a Value {
    plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == addr).unwrap_or_else(|| panic!("{plan:#}"))
}

/// A `health {}` block with every attribute is valid in HCL and in YAML.
#[test]
fn a_health_block_validates_in_hcl_and_yaml() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fleet(
        d,
        1,
        r#"  health {
    readiness   = "dcgm"
    signals     = ["xid_fatal", "ecc_uncorrectable", "row_remap_failure", "gpu_missing", "nvlink_down"]
    action      = "quarantine"
    max_repairs = 2
    grace       = "10m"
  }"#,
    );
    ok(d, &["validate"]);
    let yaml = tempfile::tempdir().unwrap();
    std::fs::write(
        yaml.path().join("main.yaml"),
        "providers:\n  sim:\n    region: us-east-1\ngpu_pools:\n  train:\n    provider: sim\n    gpu: A100-80GB\n    \
         gpus_per_node: 8\n    nodes: {desired: 1, max: 2}\n    health:\n      readiness: none\n      signals: [xid_fatal]\n      \
         action: replace\n      max_repairs: 0\n      grace: 1m\n",
    )
    .unwrap();
    ok(yaml.path(), &["validate"]);
}

/// Done when: an XID 79 node is replaced, new node first, with the evidence in every view.
/// The pool has no `health {}`: the checks are on by default.
#[test]
fn an_xid_79_node_is_replaced_new_node_first() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fleet(d, 2, "");
    ok(d, &["apply", "--auto-approve"]);
    let bad = job_node(d);
    let (out, err) = ok(d, &["sim", "fault", &bad, "--xid", "79", "--gpu", "3"]);
    assert!(!out.trim().is_empty(), "the run on the node failed with its GPU:\n{err}");

    let plan = json(d, &["plan", "--json"]);
    let health = plan["health"].as_array().unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(health.len(), 1, "{plan:#}");
    let h = &health[0];
    assert_eq!((h["address"].as_str(), h["node"].as_str()), (Some("gpu_pool.train"), Some(bad.as_str())), "{h:#}");
    assert_eq!((h["signal"].as_str(), h["gpu"].as_u64(), h["xid"].as_u64()), (Some("xid_fatal"), Some(3), Some(79)));
    assert_eq!(h["action"], "replace");
    assert!(h.get("held_by").is_none(), "{h:#}");
    let train = change(&plan, "gpu_pool.train");
    let deletes = train["pool"]["deletes"].as_array().unwrap();
    assert_eq!(deletes.len(), 1, "{train:#}");
    assert_eq!(deletes[0]["id"], bad.as_str());
    let reason = deletes[0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("replaced: XID 79 (GPU has fallen off the bus) on GPU 3, seen "), "{reason}");
    let creates: u64 = train["pool"]["creates"].as_array().unwrap().iter().map(|c| c["count"].as_u64().unwrap()).sum();
    assert_eq!(creates, 1, "{train:#}");
    assert_eq!(train["pool"]["create_before_destroy"], true);
    let drift = plan["drift"].as_array().unwrap();
    let seen = drift.iter().find(|d| d["kind"] == "unhealthy" && d["node_id"] == bad.as_str()).expect("drift item");
    // The fate after `; `, never `seen 11:15: replaced`, where the colon reads as the time's.
    let message = seen["message"].as_str().unwrap();
    assert!(message.ends_with("; replaced by this plan") && !message.contains(": replaced"), "{message}");
    // The run died with its GPU: it spent no retry and is requeued.
    let job = plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == "job.llama").unwrap();
    assert_eq!(job["retries_spent"], 0, "{job:#}");

    let listed = json(d, &["nodes", "--json"]);
    let healthy: Vec<bool> =
        listed["nodes"].as_array().unwrap().iter().map(|n| n["healthy"].as_bool().unwrap()).collect();
    assert_eq!(healthy.iter().filter(|h| !**h).count(), 1, "{listed:#}");
    assert_eq!(healthy.len(), 2, "{listed:#}");
    let (text, _) = ok(d, &["plan"]);
    let line = format!("-/+ {bad} replace: XID 79 (GPU has fallen off the bus) on GPU 3, seen ");
    assert!(text.contains(&line), "{text}");
    let (md, _) = ok(d, &["plan", "--format", "markdown"]);
    assert!(md.contains(&line), "{md}");

    ok(d, &["apply", "--auto-approve"]);
    let now = nodes(d);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(!now.contains(&bad), "the unhealthy node is gone: {now:?}");
    // Relaunched as attempt 2, on a healthy node, with no retry spent.
    let s = json(d, &["jobs", "status", "llama", "--json"]);
    let runs = s["jobs"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{s:#}");
    assert_eq!(runs[0]["status"], "preempted", "{s:#}");
    assert!(runs[0]["message"].as_str().unwrap().contains("requeued without spending a retry"), "{s:#}");
    assert_eq!((runs[1]["attempt"].as_u64(), runs[1]["status"].as_str()), (Some(2), Some("running")), "{s:#}");
    assert_ne!(runs[1]["node_id"], bad.as_str(), "{s:#}");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "nothing is left to repair\n{out}\n{err}");
}

/// Done when: a quarantine keeps the node, says so, and places no job on it.
#[test]
fn a_quarantined_node_stays_and_takes_no_job() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fleet(d, 1, "  health {\n    action = \"quarantine\"\n  }");
    ok(d, &["apply", "--auto-approve"]);
    let bad = job_node(d);
    ok(d, &["sim", "fault", &bad, "--xid", "48"]);
    let plan = json(d, &["plan", "--json"]);
    let h = &plan["health"][0];
    assert_eq!((h["node"].as_str(), h["action"].as_str()), (Some(bad.as_str()), Some("quarantine")), "{plan:#}");
    let deletes = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["pool"]["deletes"].as_array().cloned().unwrap_or_default());
    assert_eq!(deletes.count(), 0, "a quarantine removes nothing: {plan:#}");
    let (text, _) = ok(d, &["plan"]);
    assert!(text.contains(&format!("!   {bad} quarantine: XID 48 (double bit ECC error) on GPU 0")), "{text}");
    // `gpuplan nodes` says the same.
    let listed = json(d, &["nodes", "--unhealthy", "--json"]);
    let listed = listed["nodes"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!((listed[0]["node"].as_str(), listed[0]["healthy"].as_bool()), (Some(bad.as_str()), Some(false)));
    assert_eq!(listed[0]["health"]["action"], "quarantine");
    let (table, _) = ok(d, &["nodes"]);
    assert!(table.contains("quarantine") && table.contains("XID 48 (double bit ECC error) on GPU 0"), "{table}");
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(nodes(d), vec![bad.clone()], "the node stays");
    let s = json(d, &["jobs", "status", "llama", "--json"]);
    let runs = s["jobs"][0]["runs"].as_array().unwrap();
    assert!(runs.iter().skip(1).all(|r| r["node_id"] != bad.as_str()), "no new run on the quarantined node: {s:#}");
}

/// Done when: `max_repairs` stops a storm: three nodes go bad with the same XID, one is
/// replaced, two wait, and one alert names what they share.
#[test]
fn max_repairs_stops_a_storm_with_one_alert() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fleet(d, 3, "  health {\n    max_repairs = 1\n  }");
    ok(d, &["apply", "--auto-approve"]);
    let all = nodes(d);
    for n in &all {
        ok(d, &["sim", "fault", n, "--xid", "79"]);
    }
    let plan = json(d, &["plan", "--json"]);
    let health = plan["health"].as_array().unwrap();
    assert_eq!(health.len(), 3, "{plan:#}");
    let held: Vec<&Value> = health.iter().filter(|h| h["held_by"] == "max_repairs").collect();
    assert_eq!(held.len(), 2, "{plan:#}");
    let deletes = change(&plan, "gpu_pool.train")["pool"]["deletes"].as_array().unwrap().len();
    assert_eq!(deletes, 1, "{plan:#}");
    let notes: Vec<&str> = plan["notes"].as_array().unwrap().iter().filter_map(|n| n["message"].as_str()).collect();
    let alerts: Vec<&&str> = notes.iter().filter(|n| n.contains("max_repairs")).collect();
    assert_eq!(alerts.len(), 1, "{notes:?}");
    assert!(
        alerts[0].contains("the same fault (XID 79)") && alerts[0].contains("the same zone (us-east-1a)"),
        "{alerts:?}"
    );
    assert!(alerts[0].contains("the same image (ami-gpuplan-cuda12)"), "{alerts:?}");

    // The bound is an hour's: once one repair is applied, the next plan repairs nothing
    // and both nodes left wait; an hour later, one more goes.
    ok(d, &["apply", "--auto-approve"]);
    let held =
        |plan: &Value| plan["health"].as_array().unwrap().iter().filter(|h| h["held_by"] == "max_repairs").count();
    let plan = json(d, &["plan", "--json"]);
    assert_eq!((plan["health"].as_array().unwrap().len(), held(&plan)), (2, 2), "{plan:#}");
    assert!(change_deletes(&plan) == 0, "{plan:#}");
    ok(d, &["sim", "advance", "61m"]);
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(held(&plan), 1, "{plan:#}");
    assert_eq!(change_deletes(&plan), 1, "{plan:#}");
}

/// Nodes every change of `plan` deletes.
fn change_deletes(plan: &Value) -> usize {
    let changes = plan["changes"].as_array().unwrap();
    changes.iter().map(|c| c["pool"]["deletes"].as_array().map_or(0, Vec::len)).sum()
}

/// `sim fault` refuses a node the cloud does not run, and `--gpu` without a GPU fault.
#[test]
fn sim_fault_refuses_what_it_cannot_do() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fleet(d, 1, "");
    ok(d, &["apply", "--auto-approve"]);
    let (code, _, err) = run(d, &["sim", "fault", "sim-nope", "--xid", "79"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no live node `sim-nope`"), "{err}");
    let n = &nodes(d)[0];
    let (code, _, err) = run(d, &["sim", "fault", n, "--missing-gpu", "--gpu", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("hint: e.g. `gpuplan sim fault NODE --xid 79 --gpu 3`"), "{err}");
    let (code, _, err) = run(d, &["sim", "fault", n]);
    assert_eq!(code, 1, "clap asks for a fault: {err}");
    assert!(err.contains("--readiness-fail"), "{err}");
    // Cleared, the node is healthy again: nothing to plan.
    ok(d, &["sim", "fault", n, "--ecc"]);
    ok(d, &["sim", "fault", n, "--clear"]);
    let plan = json(d, &["plan", "--json"]);
    assert!(plan.get("health").is_none(), "{plan:#}");
}

/// Done when: a readiness failure is replaced before any job lands: the node failed its
/// check before the job arrived, and the job goes to its replacement.
#[test]
fn a_readiness_failure_is_replaced_before_any_job_lands() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fleet(d, 1, "");
    // The pool first, without the job.
    let text = std::fs::read_to_string(d.join("main.hcl")).unwrap();
    let without_job = text.split("job \"llama\"").next().unwrap().to_string();
    std::fs::write(d.join("main.hcl"), &without_job).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let bad = nodes(d)[0].clone();
    ok(d, &["sim", "fault", &bad, "--readiness-fail"]);
    std::fs::write(d.join("main.hcl"), &text).unwrap();
    let plan = json(d, &["plan", "--json"]);
    let h = &plan["health"][0];
    assert_eq!((h["node"].as_str(), h["signal"].as_str()), (Some(bad.as_str()), Some("readiness_failed")), "{plan:#}");
    let (text_plan, _) = ok(d, &["plan"]);
    assert!(
        text_plan.contains(&format!("-/+ {bad} replace: readiness_failed (the readiness check failed)")),
        "{text_plan}"
    );
    ok(d, &["apply", "--auto-approve"]);
    assert!(!nodes(d).contains(&bad), "replaced");
    let node = job_node(d);
    assert_ne!(node, bad, "the job landed on the replacement");
}

/// Done when: a raw nvidia-smi capture with a row-remap failure drives a replacement: the
/// capture is parsed, its signal counts once `grace` has passed, and the node is replaced.
#[test]
fn a_raw_nvidia_smi_capture_with_a_row_remap_failure_drives_a_replacement() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fleet(d, 1, "");
    ok(d, &["apply", "--auto-approve"]);
    let bad = nodes(d)[0].clone();
    let capture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/health/nvidia-smi/a10g-row-remap-failure.xml");
    ok(d, &["sim", "fault", &bad, "--from", capture.to_str().unwrap()]);
    // Within `grace` (5m by default) the signal does not count yet.
    let plan = json(d, &["plan", "--json"]);
    assert!(plan.get("health").is_none(), "{plan:#}");
    ok(d, &["sim", "advance", "6m"]);
    let plan = json(d, &["plan", "--json"]);
    let h = &plan["health"][0];
    // The capture (an A10G's) shows uncorrectable ECC errors besides the failed remap: the
    // plan names the first signal and the others.
    assert_eq!((h["node"].as_str(), h["signal"].as_str()), (Some(bad.as_str()), Some("ecc_uncorrectable")), "{plan:#}");
    let evidence = h["evidence"].as_str().unwrap();
    assert!(evidence.ends_with("; also row_remap_failure"), "{evidence}");
    let (text, _) = ok(d, &["plan"]);
    let line =
        format!("-/+ {bad} replace: ecc_uncorrectable (2 uncorrectable ECC errors since the last reset) on GPU 0");
    assert!(text.contains(&line) && text.contains("also row_remap_failure"), "{text}");
    ok(d, &["apply", "--auto-approve"]);
    assert!(!nodes(d).contains(&bad), "replaced");

    // A file that is no capture is refused with a hint.
    let junk = d.join("junk.txt");
    std::fs::write(&junk, "hello\n").unwrap();
    let n = nodes(d)[0].clone();
    let (code, _, err) = run(d, &["sim", "fault", &n, "--from", junk.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not a capture gpuplan reads") && err.contains("hint: give the output of"), "{err}");
}

/// The pool's `readiness` reaches each launch: the sim runs the check a job script runs
/// before its job. The node fails its readiness check after the plan chose it: with
/// `readiness = "dcgm"` the run fails at once naming DCGM's check, its retry is given back,
/// and the node is replaced before the job runs again; with `readiness = "none"` nothing
/// is checked and the job runs on the node.
#[test]
fn the_pool_s_readiness_check_runs_before_each_job() {
    for (health, check) in [
        ("  health {\n    readiness = \"dcgm\"\n  }", Some("dcgmi diag -r 1")),
        ("  health {\n    readiness = \"none\"\n  }", None),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fleet(d, 1, health);
        let text = std::fs::read_to_string(d.join("main.hcl")).unwrap();
        std::fs::write(d.join("main.hcl"), text.split("job \"llama\"").next().unwrap()).unwrap();
        ok(d, &["apply", "--auto-approve"]);
        let node = nodes(d)[0].clone();
        std::fs::write(d.join("main.hcl"), &text).unwrap();
        ok(d, &["plan", "--out", "p.plan"]);
        ok(d, &["sim", "fault", &node, "--readiness-fail"]);
        ok(d, &["apply", "p.plan"]);
        let s = json(d, &["jobs", "status", "llama", "--json"]);
        let run = &s["jobs"][0]["runs"][0];
        assert_eq!(run["node_id"], node.as_str(), "{s:#}");
        let Some(check) = check else {
            assert_eq!(run["status"], "running", "no check, the job runs: {s:#}");
            continue;
        };
        let message = run["message"].as_str().unwrap_or_default();
        assert!(
            message
                .starts_with(&format!("its node failed its readiness check: `{check}` failed on the simulated node"))
                && message.contains("the job did not run"),
            "{s:#}"
        );
        let plan = json(d, &["plan", "--json"]);
        assert_eq!(
            (plan["health"][0]["node"].as_str(), plan["health"][0]["action"].as_str()),
            (Some(node.as_str()), Some("replace"))
        );
        let job = plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == "job.llama").unwrap();
        assert_eq!(job["retries_spent"], 0, "the node failed, not the job: {job:#}");
        ok(d, &["apply", "--auto-approve"]);
        let s = json(d, &["jobs", "status", "llama", "--json"]);
        let runs = s["jobs"][0]["runs"].as_array().unwrap();
        assert_eq!(runs[0]["status"], "preempted", "{s:#}");
        assert!(runs[0]["message"].as_str().unwrap().ends_with("requeued without spending a retry"), "{s:#}");
        assert_eq!((runs[1]["attempt"].as_u64(), runs[1]["status"].as_str()), (Some(2), Some("running")), "{s:#}");
        assert_ne!(runs[1]["node_id"], node.as_str(), "the job runs on the replacement: {s:#}");
    }
}
