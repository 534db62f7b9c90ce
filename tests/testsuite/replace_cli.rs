//! `--replace ADDR` on `plan` and `apply` (Terraform's `-replace`; docs/design/cli.md):
//! every node of the pool is replaced though nothing changed, new nodes first, the old
//! ones going the way stale nodes go (a preemptible job under one is requeued without
//! spending a retry); `lifecycle.prevent_destroy` refuses it; a saved plan carries its
//! replacements; the next plan is empty again. On the sim cloud, through the CLI.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::sim_run::run;

const REASON: &str = "replacement requested (--replace)";

fn ok(dir: &Path, args: &[&str]) -> (String, String) {
    let (code, out, err) = run(dir, args);
    assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    (out, err)
}

/// Exit 1 with `error: {message}` and `hint: {hint}` on stderr.
fn fails(dir: &Path, args: &[&str], message: &str, hint: &str) -> String {
    let (code, out, err) = run(dir, args);
    assert_eq!(code, 1, "{args:?}\n{out}\n{err}");
    assert!(err.contains(&format!("error: {message}")), "{args:?}: {err}");
    assert!(err.contains(&format!("hint: {hint}")), "{args:?}: {err}");
    out
}

fn json(dir: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&ok(dir, args).0).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn change<'a>(plan: &'a Value, addr: &str) -> Option<&'a Value> {
    plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == addr)
}

fn deleted(plan: &Value, addr: &str) -> BTreeSet<String> {
    let c = change(plan, addr).unwrap_or_else(|| panic!("{addr}: {plan:#}"));
    let deletes = c["pool"]["deletes"].as_array().unwrap();
    for d in deletes {
        assert_eq!(d["reason"], format!("replaced: {REASON}"), "{d:#}");
    }
    deletes.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect()
}

/// The quickstart (its policies left out), with jobs that run for hours; `prevent` sets
/// the training pool's `lifecycle.prevent_destroy`.
fn quickstart(dir: &Path, prevent: bool) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart/main.hcl");
    let text = std::fs::read_to_string(from).unwrap();
    let mut text = text.replace("  seed   = 42\n", "  seed   = 42\n  job_duration = \"6h\"\n");
    if prevent {
        text = text.replace("prevent_destroy = false", "prevent_destroy = true");
    }
    assert!(text.contains("job_duration") && text.contains("prevent_destroy"), "the quickstart moved");
    std::fs::write(dir.join("main.hcl"), &text).unwrap();
}

/// A pool running a preemptible job and an idle pool: each `--replace` replaces every
/// node of that pool alone; the job is requeued with no retry spent; after the apply the
/// pool's nodes are all new and the next plan has no changes.
#[test]
fn replace_swaps_every_node_of_the_pool_and_is_not_sticky() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    quickstart(d, false);
    ok(d, &["apply", "--auto-approve"]);

    let plan = json(d, &["plan", "--replace", "gpu_pool.train", "--json"]);
    let train = change(&plan, "gpu_pool.train").unwrap();
    assert_eq!(train["action"], "replace", "{train:#}");
    assert!(train.to_string().contains(REASON), "{train:#}");
    let old = deleted(&plan, "gpu_pool.train");
    assert_eq!(old.len(), 3, "{train:#}");
    let creates: u64 = train["pool"]["creates"].as_array().unwrap().iter().map(|c| c["count"].as_u64().unwrap()).sum();
    assert_eq!(creates, 3, "{train:#}");
    assert!(change(&plan, "gpu_pool.inference").is_none_or(|c| c["action"] == "no-op"), "{plan:#}");
    assert_eq!(plan["replace"], serde_json::json!(["gpu_pool.train"]));
    let job = plan["jobs"].as_array().unwrap().iter().find(|j| j["address"] == "job.llama_finetune").unwrap();
    assert_eq!(job["after"], "requeued", "{job:#}");
    assert_eq!(job["retries_spent"], 0, "{job:#}");
    // The job says why its node goes once, in every view.
    let message = job["reason"]["message"].as_str().unwrap();
    assert_eq!(message.matches(REASON).count(), 1, "{message}");
    assert_eq!(job["interrupted"][0]["why"].as_str().unwrap().matches(REASON).count(), 1, "{job:#}");

    let (text, _) = ok(d, &["plan", "--replace", "train"]);
    assert!(text.contains("gpu_pool.train must be replaced") && text.contains(REASON), "{text}");
    for (args, section) in
        [(&["--verbose"][..], "Jobs (admission order):"), (&["--format", "markdown"][..], "**Jobs**")]
    {
        let (text, _) = ok(d, &[&["plan", "--replace", "train"][..], args].concat());
        let jobs = text.split_once(section).and_then(|(_, j)| j.split_once("Cost")).unwrap().0;
        let jobs = jobs.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(jobs.matches(REASON).count(), 1, "{args:?}: {jobs}");
    }

    ok(d, &["apply", "--replace", "train", "--auto-approve"]);
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "the replacement is not sticky\n{out}\n{err}");
    // Relaunched on a new node, as attempt 2, with no retry spent.
    let s = json(d, &["jobs", "status", "llama_finetune", "--json"]);
    assert_eq!(s["jobs"][0]["state"], "running", "{s:#}");
    assert_eq!(s["jobs"][0]["attempt"], 2, "{s:#}");
    // Every training node is new: replacing again deletes none of the old ones.
    let again = deleted(&json(d, &["plan", "--replace", "gpu_pool.train", "--json"]), "gpu_pool.train");
    assert_eq!(again.len(), 3);
    assert!(again.is_disjoint(&old), "{old:?} {again:?}");

    // An idle pool: its two nodes go, two new ones come, nothing else moves.
    let plan = json(d, &["plan", "--replace", "gpu_pool.inference", "--json"]);
    assert_eq!(deleted(&plan, "gpu_pool.inference").len(), 2, "{plan:#}");
    assert!(change(&plan, "gpu_pool.train").is_none_or(|c| c["action"] == "no-op"), "{plan:#}");
}

#[test]
fn prevent_destroy_refuses_a_replacement() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    quickstart(d, true);
    ok(d, &["apply", "--auto-approve"]);
    let (code, out, err) = run(d, &["plan", "--replace", "gpu_pool.train"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let all = format!("{out}\n{err}");
    assert!(all.contains("`gpu_pool.train` has `lifecycle.prevent_destroy` set"), "{all}");
    assert!(all.contains("drop `--replace` for this pool"), "{all}");
    let (code, out, err) = run(d, &["apply", "--replace", "gpu_pool.train", "--auto-approve"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!err.contains("Apply complete"), "{err}");
}

/// A mistyped address, a kind with no nodes, and `--destroy` are errors before anything
/// is planned or saved.
#[test]
fn replace_takes_checked_pool_addresses() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    quickstart(d, false);
    let out = fails(
        d,
        &["plan", "--replace", "gpu_pool.trian", "--out", "p.plan"],
        "no resource `gpu_pool.trian` in the spec",
        "did you mean `gpu_pool.train`?",
    );
    assert!(!out.contains("Plan:") && !d.join("p.plan").exists(), "{out}");
    fails(
        d,
        &["apply", "--replace", "gpu_pool.trian", "--auto-approve"],
        "no resource `gpu_pool.trian` in the spec",
        "did you mean `gpu_pool.train`?",
    );
    fails(
        d,
        &["plan", "--replace", "quota.ml_team"],
        "`quota.ml_team` cannot be replaced: only a gpu_pool has nodes to replace",
        "a quota is configuration",
    );
    fails(
        d,
        &["plan", "--replace", "llama_finetune"],
        "`job.llama_finetune` cannot be replaced",
        "`gpuplan jobs cancel NAME` stops a job's run",
    );
    fails(
        d,
        &["plan", "--destroy", "--replace", "train"],
        "`--replace` cannot be combined with `--destroy`",
        "a destroy removes every node already",
    );
    assert!(!d.join("state").join("default.json").exists(), "a refused plan wrote state");
}

/// `plan --replace X --out p` carries X: `show p` says so, `apply p` replaces, `apply p`
/// with another replacement is refused; Terraform's single-dash spellings work.
#[test]
fn a_saved_plan_carries_its_replacements() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    quickstart(d, false);
    ok(d, &["apply", "--auto-approve"]);
    for dash in [&["-replace", "gpu_pool.inference"][..], &["-replace=inference"][..]] {
        let plan = json(d, &[&["plan", "-json"][..], dash].concat());
        assert_eq!(plan["replace"], serde_json::json!(["gpu_pool.inference"]), "{dash:?}");
        assert_eq!(deleted(&plan, "gpu_pool.inference").len(), 2, "{dash:?}");
    }
    ok(d, &["plan", "--replace", "inference", "--out", "p.plan"]);
    let shown = json(d, &["show", "p.plan", "--json"]);
    assert_eq!(shown["replace"], serde_json::json!(["gpu_pool.inference"]));
    fails(
        d,
        &["apply", "p.plan", "--replace", "gpu_pool.train"],
        "the plan was saved with --replace gpu_pool.inference",
        "drop --replace",
    );
    let (_, err) = ok(d, &["apply", "p.plan", "-replace=inference"]);
    assert!(err.contains("Apply complete!"), "{err}");
    let (code, out, err) = run(d, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// A `--replace` that would replace nothing says why in the plan instead of passing in
/// silence: a pool left out by `--target`, or one with no node running yet.
#[test]
fn a_replacement_that_replaces_nothing_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    quickstart(d, false);

    // Before the first apply the pool has no node to replace.
    let plan = json(d, &["plan", "--replace", "gpu_pool.train", "--json"]);
    let notes = plan["notes"].to_string();
    assert!(notes.contains("the pool has no running node to replace"), "{plan:#}");

    ok(d, &["apply", "--auto-approve"]);
    let (text, _) = ok(d, &["plan", "--target", "gpu_pool.inference", "--replace", "gpu_pool.train"]);
    assert!(text.contains("the pool is outside `--target`"), "{text}");
    let plan = json(d, &["plan", "--target", "gpu_pool.inference", "--replace", "gpu_pool.train", "--json"]);
    assert!(change(&plan, "gpu_pool.train").is_none(), "{plan:#}");
    assert!(plan["notes"].to_string().contains("gpu_pool.train"), "{plan:#}");
    // A replacement that does replace adds no note.
    let plan = json(d, &["plan", "--replace", "gpu_pool.train", "--json"]);
    assert!(plan.get("notes").is_none_or(|n| !n.to_string().contains("--replace")), "{plan:#}");
}
