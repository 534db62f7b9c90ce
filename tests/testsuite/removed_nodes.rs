//! Jobs under removed nodes, on the sim cloud through the CLI (docs/design/jobs.md, "Jobs under
//! removed nodes"): a change that removes nodes takes idle ones first; a preemptible job
//! whose node goes is listed in every view as requeued from its checkpoint, never as
//! running; a non-preemptible job keeps its node, whose removal waits until the job ends;
//! and neither such a stop nor a spot reclaim spends one of the job's retries.

use std::path::Path;

use serde_json::Value;

use crate::sim_run::run;

fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(dir, args);
    assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    out
}

fn json(dir: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&ok(dir, args)).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn job<'a>(plan: &'a Value, addr: &str) -> &'a Value {
    plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == addr).unwrap_or_else(|| panic!("{addr}: {plan:#}"))
}

fn pool<'a>(plan: &'a Value, addr: &str) -> &'a Value {
    let c = plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == addr);
    &c.unwrap_or_else(|| panic!("{addr}: {plan:#}"))["pool"]
}

/// The node each running job runs on, from `jobs status --json`.
fn job_nodes(dir: &Path) -> Vec<(String, String)> {
    let s = json(dir, &["jobs", "list", "--json"]);
    let mut out = Vec::new();
    for j in s["jobs"].as_array().unwrap() {
        for r in j["runs"].as_array().unwrap().iter().filter(|r| r["status"] == "running") {
            out.push((j["address"].as_str().unwrap().to_string(), r["node_id"].as_str().unwrap().to_string()));
        }
    }
    out
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array().map(|a| a.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect()).unwrap_or_default()
}

/// The quickstart's spec alone (its policies would ask for an override), with jobs that
/// run for hours so that none ends during a test.
fn quickstart(dir: &Path) -> String {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart/main.hcl");
    let text = std::fs::read_to_string(from).unwrap();
    let text = text.replace("  seed   = 42\n", "  seed   = 42\n  job_duration = \"6h\"\n");
    assert!(text.contains("job_duration"), "the quickstart's provider block moved");
    std::fs::write(dir.join("main.hcl"), &text).unwrap();
    text
}

#[test]
fn a_spot_reclaim_spends_no_retry() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    quickstart(d);
    ok(d, &["apply", "--auto-approve"]);
    // Three reclaims of a job with `retries = 2`: each relaunches it, none spends a retry.
    for attempt in 2..=4 {
        ok(d, &["sim", "interrupt", "gpu_pool.train"]);
        let text = ok(d, &["plan"]);
        // No retry spent, so none shown: the attempt alone (issue 46).
        assert!(text.contains(&format!(": attempt {attempt}\n")) && !text.contains("retries left"), "{text}");
        let plan = json(d, &["plan", "--json"]);
        let ft = job(&plan, "job.llama_finetune");
        assert_eq!(ft["placement"], "launch", "{ft:#}");
        assert_eq!(ft["retries_spent"], 0);
        ok(d, &["apply", "--auto-approve"]);
    }
    let s = json(d, &["jobs", "status", "llama_finetune", "--json"]);
    assert_eq!(s["jobs"][0]["state"], "running", "{s:#}");
    assert_eq!(s["jobs"][0]["attempt"], 4);
}

#[test]
fn lowering_spot_percent_requeues_the_job_of_the_removed_spot_node() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let text = quickstart(d);
    ok(d, &["apply", "--auto-approve"]);
    let (_, spot_node) = job_nodes(d).into_iter().next().expect("the job runs");

    std::fs::write(d.join("main.hcl"), text.replace("spot_percent   = 70", "spot_percent   = 20")).unwrap();
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(ids(&pool(&plan, "gpu_pool.train")["deletes"]), std::slice::from_ref(&spot_node), "{plan:#}");
    let ft = job(&plan, "job.llama_finetune");
    assert_eq!(ft["before"], "running", "{ft:#}");
    assert_eq!(ft["after"], "requeued", "{ft:#}");
    assert_eq!(ft["reason"]["code"], "node_removed");
    let why = ft["reason"]["message"].as_str().unwrap();
    assert!(why.contains(&spot_node) && why.contains("requeued from its checkpoint"), "{why}");
    assert_eq!(ft["launches"][0]["attempt"], 2);
    assert_eq!(ft["launches"][0]["capacity"], "on-demand", "spot is gone: it resumes on-demand");

    let text = ok(d, &["plan"]);
    let line = text.lines().find(|l| l.contains("job.llama_finetune") && !l.contains("~")).unwrap_or_default();
    assert!(!text.contains("running on gpu_pool.train"), "{text}");
    assert!(text.contains(&format!("requeued: node {spot_node} removed (")), "{text}");
    assert!(line.trim_start().starts_with('!'), "an interrupted job is marked: {line}");
    let md = ok(d, &["plan", "--format", "markdown"]);
    assert!(md.contains(&format!("node {spot_node} removed")) && !md.contains("running on gpu_pool.train"), "{md}");

    ok(d, &["apply", "--auto-approve"]);
    let s = json(d, &["jobs", "status", "llama_finetune", "--json"]);
    let runs = s["jobs"][0]["runs"].as_array().unwrap();
    assert_eq!(runs[0]["status"], "preempted", "stopped by gpuplan, not failed: {s:#}");
    assert!(runs[0]["message"].as_str().unwrap().contains(&spot_node), "{s:#}");
    assert_eq!((runs[1]["attempt"].as_u64(), runs[1]["status"].as_str()), (Some(2), Some("running")));
    assert_eq!(runs[1]["capacity"], "on-demand");
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(job(&plan, "job.llama_finetune")["retries_spent"], 0);
    let (code, out, _) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "converged: {out}");
}

/// A pool of three on-demand nodes with two 8-GPU jobs, one on each of two of them.
fn two_jobs(preemptible: bool, desired: u32) -> String {
    format!(
        r#"provider "sim" {{
  region       = "us-east-1"
  job_duration = "2h"
}}

gpu_pool "train" {{
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  nodes {{
    min     = 0
    desired = {desired}
    max     = 4
  }}
}}

job_template "t" {{
  image          = "x"
  gpus           = 8
  preemptible    = {preemptible}
  retries        = 0
  checkpoint_uri = "s3://ckpt/t"
}}

job "a" {{
  template = job_template.t
  pool     = gpu_pool.train
}}

job "b" {{
  template = job_template.t
  pool     = gpu_pool.train
}}
"#
    )
}

/// Apply three nodes and two jobs, then ask for `desired` nodes: the plan, the nodes
/// the jobs run on and the idle node.
fn scale_in(d: &Path, preemptible: bool, desired: u32) -> (Value, Vec<(String, String)>, String) {
    std::fs::write(d.join("main.hcl"), two_jobs(preemptible, 3)).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let busy = job_nodes(d);
    assert_eq!(busy.len(), 2, "{busy:?}");
    let state: Value = crate::state_plain::read(&d.join("state/default.json"));
    let all = ids(&state["resources"]["gpu_pool.train"]["nodes"]);
    let idle = all.iter().find(|n| busy.iter().all(|(_, b)| b != *n)).expect("an idle node").clone();
    std::fs::write(d.join("main.hcl"), two_jobs(preemptible, desired)).unwrap();
    (json(d, &["plan", "--json"]), busy, idle)
}

#[test]
fn scale_in_takes_the_idle_node_first() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (plan, _, idle) = scale_in(d, true, 2);
    assert_eq!(ids(&pool(&plan, "gpu_pool.train")["deletes"]), [idle], "{plan:#}");
    for j in ["job.a", "job.b"] {
        assert_eq!(job(&plan, j)["after"], "running", "{plan:#}");
    }
}

#[test]
fn scale_in_under_a_preemptible_job_requeues_it_without_spending_a_retry() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (plan, busy, idle) = scale_in(d, true, 1);
    let deletes = ids(&pool(&plan, "gpu_pool.train")["deletes"]);
    assert_eq!(deletes.len(), 2, "{plan:#}");
    assert!(deletes.contains(&idle), "the idle node goes: {plan:#}");
    let (gone_job, gone_node) = busy.iter().find(|(_, n)| deletes.contains(n)).expect("one job loses its node");
    let (kept_job, _) = busy.iter().find(|(_, n)| !deletes.contains(n)).expect("one job keeps its node");
    let gone = job(&plan, gone_job);
    assert_eq!((gone["before"].as_str(), gone["after"].as_str()), (Some("running"), Some("pending")), "{gone:#}");
    assert_eq!(gone["reason"]["code"], "node_removed");
    assert!(gone["reason"]["message"].as_str().unwrap().contains(gone_node.as_str()), "{gone:#}");
    assert_eq!(job(&plan, kept_job)["after"], "running");
    let text = ok(d, &["plan"]);
    assert!(text.contains(&format!("requeued: node {gone_node} removed (")), "{text}");

    ok(d, &["apply", "--auto-approve"]);
    let plan = json(d, &["plan", "--json"]);
    let gone = job(&plan, gone_job);
    assert_eq!(gone["placement"], "waiting", "requeued, not failed (retries = 0): {gone:#}");
    assert_eq!(gone["reason"]["code"], "capacity");
    assert_eq!(gone["retries_spent"], 0);
    assert_eq!(job(&plan, kept_job)["placement"], "running");
}

#[test]
fn scale_in_under_a_non_preemptible_job_defers_its_node_until_the_job_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (plan, busy, idle) = scale_in(d, false, 1);
    let train = pool(&plan, "gpu_pool.train");
    assert_eq!(ids(&train["deletes"]), [idle], "only the idle node goes now: {plan:#}");
    let deferred = ids(&train["deferred"]);
    assert_eq!(deferred.len(), 1, "{plan:#}");
    let (held_job, held_node) = busy.iter().find(|(_, n)| **n == deferred[0]).expect("a job's node is deferred");
    assert_eq!(train["deferred"][0]["job"], held_job.as_str());
    let change = plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == "gpu_pool.train").unwrap();
    assert!(change["reasons"].as_array().unwrap().iter().any(|r| r["code"] == "deferred"), "{change:#}");
    assert_eq!(plan["summary"]["destroy"], 0);
    assert_eq!(train["after"]["nodes"], 2, "the deferred node stays, and costs, after this plan");
    let held = job(&plan, held_job);
    assert_eq!((held["before"].as_str(), held["after"].as_str()), (Some("running"), Some("running")));
    assert_eq!(held["reason"]["code"], "removal_deferred", "{held:#}");
    let text = ok(d, &["plan"]);
    assert!(text.contains(&format!("removal of node {held_node}")) && text.contains("deferred"), "{text}");
    let md = ok(d, &["plan", "--format", "markdown"]);
    assert!(md.contains(&format!("removal of node {held_node}")), "{md}");

    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(job_nodes(d).len(), 2, "both jobs still run");
    // While the job runs, nothing is left to do.
    let (code, out, _) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("deferred"), "the plan still says why the node stays: {out}");

    // Once the jobs ended, the next plan removes the node, and a reconcile pass does it.
    ok(d, &["sim", "advance", "3h"]);
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(ids(&pool(&plan, "gpu_pool.train")["deletes"]), std::slice::from_ref(held_node), "{plan:#}");
    ok(d, &["reconcile", "--once"]);
    let state: Value = crate::state_plain::read(&d.join("state/default.json"));
    assert_eq!(ids(&state["resources"]["gpu_pool.train"]["nodes"]).len(), 1);
}

/// Pools `old` (two nodes, one job on each) and `new`, and the jobs `a` (not preemptible)
/// and `b` (preemptible) on `jobs_pool`; `old` only while `with_old`.
fn moving_jobs(with_old: bool, jobs_pool: &str) -> String {
    let pool = |name: &str, desired: u32| {
        format!(
            r#"
gpu_pool "{name}" {{
  provider       = "sim"
  zones          = ["us-east-1a"]
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  nodes {{
    min     = 0
    desired = {desired}
    max     = 4
  }}
}}
"#
        )
    };
    let mut spec = "provider \"sim\" {\n  region       = \"us-east-1\"\n  job_duration = \"2h\"\n}\n".to_string();
    if with_old {
        spec += &pool("old", 2);
    }
    spec += &pool("new", 1);
    for (name, preemptible) in [("a", false), ("b", true)] {
        spec += &format!(
            "\njob_template \"{name}\" {{\n  image          = \"x\"\n  gpus           = 8\n  preemptible    = {preemptible}\n  retries        = 0\n  checkpoint_uri = \"s3://ckpt/{name}\"\n}}\n\njob \"{name}\" {{\n  template = job_template.{name}\n  pool     = gpu_pool.{jobs_pool}\n}}\n"
        );
    }
    spec
}

fn state_nodes(d: &Path, pool: &str) -> Option<Vec<String>> {
    let state: Value = crate::state_plain::read(&d.join("state/default.json"));
    state["resources"].get(pool).map(|r| ids(&r["nodes"]))
}

/// A pool removed from the spec while its jobs move to another pool: the job that is not
/// preemptible keeps its node (the removal deferred, and said so) until it ends; the
/// preemptible one is requeued onto the new pool. The deferred removal then finishes,
/// and the plan after it is empty.
#[test]
fn a_removed_pool_keeps_the_node_of_a_job_that_is_not_preemptible_until_it_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), moving_jobs(true, "old")).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let busy = job_nodes(d);
    let node_of = |job: &str| busy.iter().find(|(j, _)| j == job).map(|(_, n)| n.clone()).expect("running");
    let (a_node, b_node) = (node_of("job.a"), node_of("job.b"));

    std::fs::write(d.join("main.hcl"), moving_jobs(false, "new")).unwrap();
    let plan = json(d, &["plan", "--json"]);
    let old = pool(&plan, "gpu_pool.old");
    assert_eq!(ids(&old["deletes"]), std::slice::from_ref(&b_node), "{plan:#}");
    assert_eq!(ids(&old["deferred"]), std::slice::from_ref(&a_node), "{plan:#}");
    assert_eq!(old["deferred"][0]["job"], "job.a");
    let a = job(&plan, "job.a");
    assert_eq!((a["before"].as_str(), a["after"].as_str()), (Some("running"), Some("running")), "{a:#}");
    let b = job(&plan, "job.b");
    assert_eq!(b["before"], "running", "{b:#}");
    assert_ne!(b["after"], "running", "{b:#}");
    let text = ok(d, &["plan"]);
    assert!(text.contains(&format!("removal of node {a_node}")) && text.contains("deferred"), "{text}");

    ok(d, &["apply", "--auto-approve"]);
    let running = job_nodes(d);
    assert!(running.contains(&("job.a".to_string(), a_node.clone())), "a still runs on its node: {running:?}");
    assert_eq!(state_nodes(d, "gpu_pool.old"), Some(vec![a_node.clone()]), "the record keeps the node");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "nothing to do while a runs:\n{out}\n{err}");
    assert!(out.contains("deferred"), "{out}");

    ok(d, &["sim", "advance", "3h"]);
    let plan = json(d, &["plan", "--json"]);
    assert_eq!(ids(&pool(&plan, "gpu_pool.old")["deletes"]), [a_node], "{plan:#}");
    ok(d, &["apply", "--auto-approve"]);
    assert_eq!(state_nodes(d, "gpu_pool.old"), None, "the pool is gone from state");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "converged:\n{out}\n{err}");
}

/// `destroy` lists a job that is not preemptible and leaves it and its node until it ends;
/// once it has, the next destroy removes both. `--override-policy
/// no_destroy_pool_with_jobs` destroys at once.
#[test]
fn destroy_defers_the_node_and_record_of_a_job_that_is_not_preemptible() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), two_jobs(false, 2)).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    let busy = job_nodes(d);
    assert_eq!(busy.len(), 2, "{busy:?}");

    let (code, out, err) = run(d, &["destroy", "--auto-approve"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let text = format!("{out}\n{err}").split_whitespace().collect::<Vec<_>>().join(" ");
    for (job, node) in &busy {
        assert!(text.contains(&format!("gpuplan jobs cancel {job}")), "{text}");
        assert!(text.contains(&format!("still runs on {node}, which stays until it ends")), "{text}");
    }
    assert!(text.contains("not destroyed"), "{text}");
    assert_eq!(job_nodes(d).len(), 2, "both jobs still run");
    assert_eq!(state_nodes(d, "gpu_pool.train").map(|n| n.len()), Some(2));

    ok(d, &["sim", "advance", "3h"]);
    ok(d, &["destroy", "--auto-approve"]);
    assert_eq!(state_nodes(d, "gpu_pool.train"), None, "{}", ok(d, &["state", "list"]));
    assert!(ok(d, &["state", "list"]).trim().is_empty(), "everything destroyed");

    // With the starter policy in the spec, its override stops them at once.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), two_jobs(false, 2)).unwrap();
    std::fs::create_dir(d.join("policies")).unwrap();
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/no_destroy_pool_with_jobs.hcl");
    std::fs::copy(policy, d.join("policies/no_destroy_pool_with_jobs.hcl")).unwrap();
    ok(d, &["apply", "--auto-approve"]);
    ok(d, &["destroy", "--auto-approve", "--override-policy", "no_destroy_pool_with_jobs"]);
    assert_eq!(state_nodes(d, "gpu_pool.train"), None);
    assert!(job_nodes(d).is_empty(), "the jobs were stopped");
}
