//! Spend on the sim cloud with its own clock (`GPUPLAN_SIM_START`, `gpuplan sim advance`):
//! month-to-date from the ledger in state is hours × price per node, survives destroy and
//! starts again at a month boundary.

use std::process::Command;

use crate::sim_run::run;
use std::path::Path;

const SPEC: &str = r#"provider "sim" {}

quota "ml" {
  pools = [gpu_pool.train]
}

gpu_pool "train" {
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 2
    max     = 4
  }
  mix {
    on_demand_base = 1
    spot_percent   = 100
  }
}
"#;

fn spend(dir: &Path) -> serde_json::Value {
    let (code, out, err) = run(dir, &["cost", "--json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("cost --json is JSON");
    doc["spend"].clone()
}

/// The ledger's prices, from the state file: one line per node.
fn prices(dir: &Path) -> Vec<f64> {
    let state: serde_json::Value = crate::state_plain::read(&dir.join("state/default.json"));
    state["spend"].as_object().expect("a ledger").values().map(|e| e["usd_per_hour"].as_f64().unwrap()).collect()
}

/// gpuplan in `dir`, plain and wide, on a sim clock that starts on 1 March 2026.
fn in_march(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .env_remove("GPUPLAN_WORKSPACE")
        .env("GPUPLAN_SIM_START", "2026-03-01T00:00:00Z")
        .args(args)
        .output()
        .unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.011
}

#[test]
fn month_to_date_is_hours_times_price_survives_destroy_and_resets_at_the_month() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), SPEC).unwrap();
    let (code, _, err) = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let p = prices(tmp.path());
    assert_eq!(p.len(), 2, "one ledger line per node");
    assert!(p.iter().all(|x| *x > 0.0), "{p:?}");
    // The on-demand node is priced as the plan priced it; the spot one at the catalog's estimate.
    assert!(p[0] != p[1], "on-demand and spot prices differ: {p:?}");

    let (code, out, _) = run(tmp.path(), &["sim", "advance", "10h"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("2026-03-10T10:00:"), "{out}");
    // The plan carries the month so far, and the pull-request comment says it.
    let (code, md, err) = run(tmp.path(), &["plan", "--format", "markdown"]);
    assert_eq!(code, 0, "{err}");
    // The sim clock runs with the wall clock between commands: on a loaded machine the plan
    // may read it a second or two after 10:00, and the amount moves by that much.
    let head = "**Spent this month** (2026-03, to 2026-03-10T10:00:";
    let line = md.lines().find(|l| l.contains(head)).unwrap_or_else(|| panic!("missing {head:?} in\n{md}"));
    let amount: f64 = line
        .split_once("Z): ")
        .and_then(|(_, rest)| rest.split_once(" USD"))
        .and_then(|(amount, _)| amount.parse().ok())
        .unwrap_or_else(|| panic!("no amount in {line:?}"));
    assert!(close(amount, (p[0] + p[1]) * 10.0), "{amount} vs 10 h × {p:?} in {line:?}");
    assert!(md.contains("by quota: `quota.ml`") && md.contains("most by pool: `gpu_pool.train`"), "{md}");
    let s = spend(tmp.path());
    assert_eq!(s["month"], "2026-03");
    let expected = 10.0 * (p[0] + p[1]);
    let mtd = s["month_to_date_usd"].as_f64().unwrap();
    assert!(close(mtd, expected), "month to date {mtd} vs 10 h × {p:?} = {expected}");
    assert!(close(s["by_pool"]["gpu_pool.train"].as_f64().unwrap(), expected), "{s}");
    assert!(close(s["by_quota"]["quota.ml"].as_f64().unwrap(), expected), "{s}");
    assert_eq!(s["open_nodes"], 2);
    let (_, text, _) = run(tmp.path(), &["cost"]);
    assert!(text.contains("Spent in 2026-03") && text.contains("gpu_pool.train"), "{text}");

    // Destroy closes the lines; the money spent stays in the month.
    let (code, _, err) = run(tmp.path(), &["destroy", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    run(tmp.path(), &["sim", "advance", "5h"]);
    let s = spend(tmp.path());
    assert!(close(s["month_to_date_usd"].as_f64().unwrap(), expected), "spend survives destroy: {s}");
    assert_eq!(s["open_nodes"], 0);

    // Running again, then across the month boundary: the new month counts only its hours.
    assert_eq!(run(tmp.path(), &["apply", "--auto-approve"]).0, 0);
    run(tmp.path(), &["sim", "advance", "22days"]); // 2026-03-10T15:00 → 2026-04-01T15:00
    let s = spend(tmp.path());
    assert_eq!(s["month"], "2026-04", "{s}");
    let april = 15.0 * (p[0] + p[1]);
    assert!(close(s["month_to_date_usd"].as_f64().unwrap(), april), "only April's 15 h: {s}");
}

#[test]
fn a_bad_sim_start_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), SPEC).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .env("GPUPLAN_SIM_START", "next tuesday")
        .args(["plan"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("GPUPLAN_SIM_START") && err.contains("next tuesday") && err.contains("2026-03-01T00:00:00Z"),
        "{err}"
    );
}

/// A local webhook receiver: answers 500 to the first request (so the sender must retry),
/// then 200; keeps every body it got.
fn receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<(u16, String)>>>) {
    let (base, log) = crate::http_stub::serve(|n, _| (if n == 0 { 500 } else { 200 }, "text/plain", "ok".into()));
    (format!("{base}/hooks/T0/secret"), log)
}

#[test]
fn budget_alerts_fire_once_each_in_order_and_a_failed_post_is_retried() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), SPEC).unwrap();
    assert_eq!(run(tmp.path(), &["apply", "--auto-approve"]).0, 0);
    let hourly: f64 = prices(tmp.path()).iter().sum();
    // A monthly budget the fleet's projection fits under (730 h × 1.05), alerting at 10, 20
    // and 30 %: crossed after 76.65 h, 153.3 h and 229.95 h of spend.
    let (url, got) = receiver();
    let with_budget = SPEC.replace(
        "  pools = [gpu_pool.train]\n",
        &format!(
            "  pools = [gpu_pool.train]\n  notify = [\"{url}\"]\n  budget {{\n    monthly_usd = {:.4}\n    alert_at    = [10, 20, 30]\n  }}\n",
            730.0 * 1.05 * hourly
        ),
    );
    std::fs::write(tmp.path().join("main.hcl"), with_budget).unwrap();
    let pass = |dir: &Path| {
        let (code, out, err) = run(dir, &["reconcile", "--once"]);
        assert_eq!(code, 0, "{out}\n{err}");
        err
    };
    let err = pass(tmp.path());
    assert!(got.lock().unwrap().is_empty(), "nothing crossed yet: {err}");

    run(tmp.path(), &["sim", "advance", "80h"]);
    let err = pass(tmp.path());
    assert!(err.contains("crossed 10% of its monthly budget in 2026-03") && err.contains("posted to 1 hook"), "{err}");
    run(tmp.path(), &["sim", "advance", "80h"]);
    pass(tmp.path());
    let again = pass(tmp.path());
    assert!(!again.contains("budget alert"), "never twice for the same threshold and month: {again}");
    run(tmp.path(), &["sim", "advance", "75h"]);
    pass(tmp.path());

    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 4, "one refused post, then 10, 20 and 30: {got:?}");
    assert_eq!(got[0].0, 500);
    assert_eq!(got[0].1, got[1].1, "the refused post was retried as it was");
    let texts: Vec<String> = got[1..]
        .iter()
        .map(|(_, body)| serde_json::from_str::<serde_json::Value>(body).unwrap()["text"].as_str().unwrap().to_string())
        .collect();
    for (text, t) in texts.iter().zip([10, 20, 30]) {
        assert!(text.contains("`quota.ml`") && text.contains(&format!("(alert at {t}%)")), "{text}");
    }
    let body: serde_json::Value = serde_json::from_str(&got[3].1).unwrap();
    let fields = body["attachments"][0]["fields"].as_array().unwrap();
    assert!(fields.iter().any(|f| f["title"] == "threshold" && f["value"] == "30%"), "{body}");
    // Delivered thresholds are in state, per quota and month.
    let state: serde_json::Value = crate::state_plain::read(&tmp.path().join("state/default.json"));
    assert_eq!(state["alerts"]["quota.ml"]["2026-03"], serde_json::json!([10, 20, 30]));
    // The same month-to-date is what `reconcile --json` would feed the metrics endpoint.
    let s = spend(tmp.path());
    let budget = 730.0 * 1.05 * hourly;
    assert!(s["by_quota"]["quota.ml"].as_f64().unwrap() >= 0.3 * budget, "{s}");
}

/// The budget's stop at 100 %: once a quota's month-to-date spend reached `monthly_usd`,
/// a plan that adds cost to its pools fails `budget.month_to_date`; one that does not passes.
#[test]
fn a_spent_monthly_budget_stops_plans_that_add_cost() {
    let tmp = tempfile::tempdir().unwrap();
    let gp = |args: &[&str]| {
        let out = in_march(tmp.path(), args);
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let one = SPEC.replace("desired = 2", "desired = 1").replace("on_demand_base = 1", "on_demand_base = 0");
    std::fs::write(tmp.path().join("main.hcl"), &one).unwrap();
    assert_eq!(gp(&["apply", "--auto-approve"]).0, 0);
    let hourly: f64 = prices(tmp.path()).iter().sum();
    // Just above a full month of this fleet, so the projection passes; spent after 734 h.
    let budget = 1.005 * 730.0 * hourly;
    let with_budget = |spec: &str| {
        spec.replace(
            "  pools = [gpu_pool.train]\n",
            &format!("  pools = [gpu_pool.train]\n  budget {{\n    monthly_usd = {budget:.4}\n  }}\n"),
        )
    };
    std::fs::write(tmp.path().join("main.hcl"), with_budget(&one)).unwrap();
    // Passes are listed with `--verbose` (and counted without).
    let (code, out) = gp(&["plan", "--verbose"]);
    assert!(code == 0 || code == 2, "{out}");
    assert!(out.contains("pass quota.ml.budget.month_to_date"), "{out}");

    gp(&["sim", "advance", "740h"]); // 2026-03-31T20:00, still March
    let (code, out) = gp(&["plan", "--verbose"]);
    assert!(code == 0 || code == 2, "keeping the fleet passes: {out}");
    assert!(out.contains("quota.ml.budget.month_to_date"), "{out}");
    assert!(!out.contains("FAIL quota.ml.budget.month_to_date"), "{out}");

    std::fs::write(tmp.path().join("main.hcl"), with_budget(&one.replace("desired = 1", "desired = 2"))).unwrap();
    let (code, out) = gp(&["plan"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("FAIL quota.ml.budget.month_to_date"), "{out}");
    assert!(out.contains("the whole") && out.contains("USD budget; the plan adds"), "{out}");
}

/// A job's cost is its share of its node's ledger price over the time it ran, by the sim
/// clock: half of a 4-GPU node for the hour it has run, then for its whole 2 hours.
#[test]
fn jobs_status_shows_what_a_job_cost_so_far() {
    let spec = r#"provider "sim" {
  job_duration = "2h"
}

gpu_pool "train" {
  provider      = "sim"
  region        = "us-east-1"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 4
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
}

job_template "t" {
  image = "x"
  gpus  = 2
}

job "half" {
  template = job_template.t
  pool     = gpu_pool.train
}
"#;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("main.hcl"), spec).unwrap();
    let (code, _, err) = run(d, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let node_price = prices(d)[0];
    let cost = |d: &Path| {
        let (code, out, err) = run(d, &["jobs", "status", "half", "--json"]);
        assert_eq!(code, 0, "{err}");
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        (doc["jobs"][0]["state"].as_str().unwrap().to_string(), doc["jobs"][0]["cost_usd"].as_f64())
    };
    run(d, &["sim", "advance", "1h"]);
    let (state, c) = cost(d);
    assert_eq!(state, "running");
    assert!(close(c.expect("a cost"), node_price / 2.0), "{c:?} vs {node_price}/2 for 1 h");
    // Done after 2 h: the cost stops growing.
    run(d, &["sim", "advance", "5h"]);
    let (state, c) = cost(d);
    assert_eq!(state, "succeeded");
    assert!(close(c.expect("a cost"), node_price / 2.0 * 2.0), "{c:?} vs {node_price}/2 for 2 h");
    let (_, table, _) = run(d, &["jobs", "status", "half"]);
    assert!(table.contains("cost so far: "), "{table}");
    // `gpuplan cost` answers "on which jobs" too: the month's spend by job.
    let by_job = spend(d)["by_job"]["job.half"].as_f64().expect("the job in spend.by_job");
    assert!(close(by_job, node_price / 2.0 * 2.0), "{by_job} vs {node_price}/2 for 2 h");
}

/// A saved plan's month-to-date spend is the figure when it was made: `show PLANFILE`
/// hours later prints the budget verdict with the time it was counted to (as the
/// markdown's spend line does), not as if current, and a fresh plan counts to its own time.
#[test]
fn a_saved_plan_s_month_to_date_names_the_time_it_was_counted_to() {
    let tmp = tempfile::tempdir().unwrap();
    let gp = |args: &[&str]| {
        let out = in_march(tmp.path(), args);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}{}", String::from_utf8_lossy(&out.stderr));
        text
    };
    let spec = SPEC.replace(
        "  pools = [gpu_pool.train]\n",
        "  pools = [gpu_pool.train]\n  budget {\n    monthly_usd = 10000\n  }\n",
    );
    std::fs::write(tmp.path().join("main.hcl"), &spec).unwrap();
    gp(&["apply", "--auto-approve"]);
    gp(&["sim", "advance", "2h"]);
    gp(&["plan", "--out", "p.plan"]);
    gp(&["sim", "advance", "5h"]);

    let json: serde_json::Value = serde_json::from_str(&gp(&["show", "p.plan", "--json"])).unwrap();
    let as_of = json["spend"]["as_of"].as_str().unwrap().to_string();
    assert!(as_of.starts_with("2026-03-01T02:00"), "the plan's clock: {as_of}");
    let verdict = |doc: &serde_json::Value| {
        let ps = doc["policies"].as_array().unwrap();
        ps.iter().find(|p| p["name"] == "quota.ml.budget.month_to_date").unwrap()["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(verdict(&json).ends_with(&format!("USD spent this month (to {as_of})")), "{json:#}");
    let to = format!("spent this month (to {as_of})");
    let text = gp(&["show", "p.plan", "--verbose"]);
    assert!(text.contains("pass quota.ml.budget.month_to_date (hard): ") && text.contains(&to), "{text}");
    let md = gp(&["show", "p.plan", "--format", "markdown"]);
    assert!(md.contains(&to), "{md}");

    let now: serde_json::Value = serde_json::from_str(&gp(&["plan", "--json"])).unwrap();
    let later = now["spend"]["as_of"].as_str().unwrap();
    assert!(later.starts_with("2026-03-01T07:00"), "{later}");
    assert!(verdict(&now).ends_with(&format!("(to {later})")), "{now:#}");
}
