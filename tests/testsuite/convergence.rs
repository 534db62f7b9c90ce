//! Convergence after a fallback (docs/design/convergence.md): an applied fleet
//! whose pools could not get their preferred zone or spot plans empty until the preferred
//! placement is due again, then retries it as an explicit change, backing off when it is
//! still short; at any scale.

use std::path::Path;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `gpuplan ARGS` in `dir` on the sim cloud (`sim_run`: plain output, a fixed sim start).
fn run(dir: &Path, args: &[&str]) -> Run {
    let (code, stdout, stderr) = crate::sim_run::run(dir, args);
    Run { code, stdout, stderr }
}

fn ok(dir: &Path, args: &[&str]) -> Run {
    let r = run(dir, args);
    assert_eq!(r.code, 0, "gpuplan {args:?}\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

/// `n` one-node pools over two zones; `extra` goes into each pool's `mix` block.
fn pools(n: usize, capacity_mix: &str, extra: &str) -> String {
    let mut s = String::from("provider \"sim\" {}\n");
    for i in 0..n {
        s += &format!(
            r#"
gpu_pool "p{i}" {{
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a", "us-east-1b"]
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {{
    min     = 0
    desired = 1
    max     = 2
  }}
  mix {{
    {capacity_mix}
    {extra}
  }}
}}
"#
        );
    }
    s
}

fn state(dir: &Path) -> serde_json::Value {
    crate::state_plain::read(&dir.join("state/default.json"))
}

/// Nodes per zone over every pool in state.
fn zones(dir: &Path) -> (usize, usize) {
    let st = state(dir);
    let mut a = 0;
    let mut b = 0;
    for r in st["resources"].as_object().unwrap().values() {
        for n in r["nodes"].as_array().into_iter().flatten() {
            match n["zone"].as_str() {
                Some("us-east-1a") => a += 1,
                Some("us-east-1b") => b += 1,
                z => panic!("unexpected zone {z:?}"),
            }
        }
    }
    (a, b)
}

/// Every change's reason messages, from `plan --json` (prose in the text view wraps).
fn reasons(dir: &Path) -> Vec<String> {
    let doc: serde_json::Value = serde_json::from_str(&ok(dir, &["plan", "--json"]).stdout).unwrap();
    doc["changes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["reasons"].as_array().cloned().unwrap_or_default())
        .map(|r| r["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn fallback_records(dir: &Path) -> Vec<serde_json::Value> {
    let st = state(dir);
    st["resources"].as_object().unwrap().values().filter_map(|r| r.get("fallback").cloned()).collect()
}

#[test]
fn zone_fallback_settles_then_retries_with_backoff_and_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), pools(6, "on_demand_base = 1", "")).unwrap();
    ok(dir, &["sim", "capacity", "us-east-1a", "--on-demand", "--limit", "2"]);

    let apply = ok(dir, &["apply", "--auto-approve"]);
    assert_eq!(zones(dir), (2, 4), "two nodes fit in us-east-1a, four fell back to us-east-1b");
    // The progress line comes after the outcome and says what happened, not "falling back
    // to on-demand" for a pool that is on-demand already.
    assert!(
        apply.stderr.contains("us-east-1a had no on-demand capacity; 1 on-demand node placed in us-east-1b"),
        "{}",
        apply.stderr
    );
    assert!(!apply.stderr.contains("falling back to on-demand"), "{}", apply.stderr);
    assert_eq!(fallback_records(dir).len(), 4, "state records each pool's fallback");

    // Unchanged spec, unchanged world: no changes, and the fallback is a note.
    let plan = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "stdout:\n{}\nstderr:\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("No changes."), "{}", plan.stdout);
    assert_eq!(plan.stdout.matches("Note: `gpu_pool.p").count(), 4, "{}", plan.stdout);
    let json = ok(dir, &["plan", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let notes = doc["notes"].as_array().expect("notes in the JSON plan");
    assert_eq!(notes.len(), 4, "{}", json.stdout);
    let note = notes[0]["message"].as_str().unwrap();
    assert!(
        note.starts_with(
            "1 on-demand node in us-east-1b instead of us-east-1a; fell back under a minute ago (us-east-1a had no on-demand capacity); the preferred placement is tried again in "
        ),
        "{note}"
    );
    assert!(note.ends_with("29m") || note.ends_with("30m"), "the sim clock runs on from the apply: {note}");
    assert_eq!(doc["summary"]["change"], 0);

    // After retry_preferred (30m) the plan retries the preferred zone, with its reason.
    ok(dir, &["sim", "advance", "31m"]);
    let due = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(due.code, 2, "{}", due.stdout);
    let why = reasons(dir);
    assert_eq!(why.iter().filter(|r| r.starts_with("preferred zone again: fell back 31m ago")).count(), 4, "{why:?}");
    // Still no room: nothing moves, the summary says nothing changed, and it backs off.
    let retry = ok(dir, &["apply", "--auto-approve"]);
    assert!(retry.stderr.contains("0 changed") && retry.stderr.contains("0 terminated"), "{}", retry.stderr);
    assert_eq!(zones(dir), (2, 4));
    let recs = fallback_records(dir);
    assert!(recs.iter().all(|r| r["failed_retries"] == 1), "{recs:?}");
    assert_eq!(run(dir, &["plan", "--detailed-exitcode"]).code, 0, "settled again after the failed try");
    ok(dir, &["sim", "advance", "31m"]);
    assert_eq!(run(dir, &["plan", "--detailed-exitcode"]).code, 0, "the second wait is twice as long (60m)");
    ok(dir, &["sim", "advance", "30m"]);
    assert_eq!(run(dir, &["plan", "--detailed-exitcode"]).code, 2, "due again after 60m");

    // Room again: the retry moves the nodes home and ends the fallback.
    ok(dir, &["sim", "capacity", "us-east-1a", "--on-demand", "--limit", "10"]);
    let back = ok(dir, &["apply", "--auto-approve"]);
    assert!(back.stderr.contains("4 changed"), "{}", back.stderr);
    assert_eq!(zones(dir), (6, 0));
    assert!(fallback_records(dir).is_empty(), "{:?}", fallback_records(dir));
    let settled = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(settled.code, 0, "{}", settled.stdout);
    assert!(!settled.stdout.contains("Note:"), "{}", settled.stdout);
}

#[test]
fn spot_fallback_to_on_demand_settles_and_returns_to_spot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = pools(2, "spot_percent = 100\n    fallback = \"on_demand\"", "retry_preferred = \"1h\"");
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    ok(dir, &["sim", "capacity", "us-east-1a", "--spot", "--limit", "0"]);
    ok(dir, &["sim", "capacity", "us-east-1b", "--spot", "--limit", "0"]);
    ok(dir, &["apply", "--auto-approve"]);
    let plan = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "{}", plan.stdout);
    let json: serde_json::Value = serde_json::from_str(&ok(dir, &["plan", "--json"]).stdout).unwrap();
    let note = json["notes"][0]["message"].as_str().unwrap_or_default();
    assert!(note.starts_with("1 on-demand node instead of spot in us-east-1a;"), "{note}");
    let after = &json["changes"];
    assert!(after.as_array().unwrap().iter().all(|c| c["action"] == "no-op"), "{after}");

    ok(dir, &["sim", "advance", "59m"]);
    assert_eq!(run(dir, &["plan", "--detailed-exitcode"]).code, 0, "retry_preferred = 1h is not over");
    ok(dir, &["sim", "advance", "2m"]);
    ok(dir, &["sim", "capacity", "us-east-1a", "--spot", "--limit", "10"]);
    let why = reasons(dir);
    assert!(why.iter().any(|r| r.starts_with("spot again: fell back 1h 1m ago")), "{why:?}");
    ok(dir, &["apply", "--auto-approve"]);
    let st = state(dir);
    let spot = st["resources"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|r| r["nodes"].as_array().cloned().unwrap_or_default())
        .filter(|n| n["capacity"] == "spot")
        .count();
    assert_eq!(spot, 2, "both pools are back on spot");
    assert_eq!(run(dir, &["plan", "--detailed-exitcode"]).code, 0);
}

/// The issue's scale: 2,000 A100 pools exhaust us-east-1a, the rest fall back to
/// us-east-1b, and the next plan is empty.
#[test]
fn two_thousand_pools_converge_after_a_fallback() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), pools(2000, "on_demand_base = 1", "")).unwrap();
    ok(dir, &["sim", "capacity", "us-east-1a", "--on-demand", "--limit", "1000"]);
    ok(dir, &["apply", "--auto-approve"]);
    assert_eq!(zones(dir), (1000, 1000));
    // The apply folded its 2,000 launches into the sim cloud's snapshot: the plans that
    // follow read it instead of replaying the log.
    let log = std::fs::read(dir.join("state/default.sim.json.log")).unwrap();
    assert!(log.is_empty(), "{} bytes of log left", log.len());
    let plan = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "{}", &plan.stdout[..plan.stdout.len().min(3000)]);
    // A thousand notes are summarised in the terminal, listed in full in JSON.
    assert!(
        plan.stdout.contains("more pools run in their fallback placement"),
        "{}",
        &plan.stdout[..plan.stdout.len().min(3000)]
    );
    let again = ok(dir, &["apply", "--auto-approve"]);
    assert!(again.stderr.contains("0 changed") || again.stdout.contains("No changes"), "{}", again.stderr);
}
