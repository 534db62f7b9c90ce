//! Cost policies and quotas as users see them: one fixture and one snapshot per default
//! policy (`tests/policies/<name>/`), hard and soft verdicts through `plan` and `apply`,
//! overrides recorded in state, quota limits, the markdown plan, and broken policy files.

use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin_cmd;
use gpuplan::providers::sim::{SimCloud, SimConfig};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// What a snapshot holds: exit code, stdout and stderr, with random instance ids hidden.
    fn snapshot(&self) -> String {
        redact_ids(&format!(
            "exit code: {}\n----- stdout -----\n{}----- stderr -----\n{}",
            self.code, self.stdout, self.stderr
        ))
    }

    fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// `gpuplan ARGS` in `dir` with plain, fixed-width output.
fn run(dir: &Path, args: &[&str]) -> Run {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
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

/// Sim instance ids (`i-` and 17 hex digits) are random; snapshots show `i-<id>`.
fn redact_ids(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("i-") {
        let tail = &rest[i + 2..];
        let hex = tail.chars().take_while(char::is_ascii_hexdigit).count();
        out.push_str(&rest[..i + 2]);
        if hex == 17 {
            out.push_str("<id>");
            rest = &tail[hex..];
        } else {
            rest = tail;
        }
    }
    out + rest
}

/// Copy a spec directory, leaving out a `state/` folder: running the README's main job
/// first leaves one in `examples/quickstart`, and tests start from no state.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() && e.file_name() == "state" {
            continue;
        } else if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A temp root holding `case/`: the fixture of `policy` plus the shipped `policies/<policy>.hcl`.
/// Commands run in the root with `-C case`, so paths in messages are short and stable.
fn fixture(policy: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let case = tmp.path().join("case");
    copy_dir(&Path::new(ROOT).join("tests/policies").join(policy), &case);
    install_policy(&case, policy);
    (tmp, case)
}

fn install_policy(case: &Path, policy: &str) {
    std::fs::create_dir_all(case.join("policies")).unwrap();
    let file = format!("{policy}.hcl");
    std::fs::copy(Path::new(ROOT).join("policies").join(&file), case.join("policies").join(&file)).unwrap();
}

fn plan(tmp: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["plan", "-C", "case"];
    args.extend_from_slice(extra);
    run(tmp, &args)
}

fn sim_nodes(case: &Path) -> usize {
    SimCloud::open(&case.join("state/default.sim.json"), SimConfig::default()).expect("sim state").nodes().len()
}

/// A saved plan's JSON, read as `gpuplan` reads it (the file is compressed).
fn saved_plan(path: &Path) -> serde_json::Value {
    let json = gpuplan::engine::planfile::open(path).expect("a plan file");
    serde_json::from_reader(json).expect("the plan file holds JSON")
}

fn state_json(case: &Path) -> serde_json::Value {
    crate::state_plain::read(&case.join("state/default.json"))
}

// ---------------------------------------------------------------------------------------
// One fixture and one snapshot per default policy.

#[test]
fn every_default_policy_has_a_fixture() {
    for e in std::fs::read_dir(Path::new(ROOT).join("policies")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(policy) = name.strip_suffix(".hcl") {
            let dir = Path::new(ROOT).join("tests/policies").join(policy);
            assert!(dir.join("main.hcl").is_file(), "no fixture tests/policies/{policy}/main.hcl");
        }
    }
}

#[test]
fn fleet_hourly_cap_is_hard() {
    let (tmp, _) = fixture("fleet_hourly_cap");
    let r = plan(tmp.path(), &[]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stdout.contains("FAIL fleet_hourly_cap (hard)"), "{}", r.stdout);
    insta::assert_snapshot!("fleet_hourly_cap", r.snapshot());
}

#[test]
fn allowed_gpu_models_is_hard() {
    let (tmp, _) = fixture("allowed_gpu_models");
    let r = plan(tmp.path(), &[]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stdout.contains("FAIL allowed_gpu_models (hard)"), "{}", r.stdout);
    insta::assert_snapshot!("allowed_gpu_models", r.snapshot());
}

#[test]
fn no_destroy_pool_with_jobs_is_soft() {
    let (tmp, case) = fixture("no_destroy_pool_with_jobs");
    // Apply the `before` spec, then switch to the fixture's spec.
    let fixture_spec = std::fs::read_to_string(case.join("main.hcl")).unwrap();
    std::fs::copy(case.join("before/main.hcl"), case.join("main.hcl")).unwrap();
    let first = run(tmp.path(), &["apply", "-C", "case", "--auto-approve"]);
    assert_eq!(first.code, 0, "{}", first.all());
    std::fs::write(case.join("main.hcl"), fixture_spec).unwrap();
    let r = plan(tmp.path(), &[]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stdout.contains("FAIL no_destroy_pool_with_jobs (soft)"), "{}", r.stdout);
    insta::assert_snapshot!("no_destroy_pool_with_jobs", r.snapshot());
    let o = plan(tmp.path(), &["--override-policy", "no_destroy_pool_with_jobs"]);
    assert_eq!(o.code, 0, "{}", o.all());
}

#[test]
fn max_gpu_hour_price_is_soft() {
    let (tmp, _) = fixture("max_gpu_hour_price");
    let r = plan(tmp.path(), &[]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stdout.contains("FAIL max_gpu_hour_price (soft)"), "{}", r.stdout);
    insta::assert_snapshot!("max_gpu_hour_price", r.snapshot());
    let o = plan(tmp.path(), &["--override-policy", "max_gpu_hour_price"]);
    assert_eq!(o.code, 0, "{}", o.all());
    assert!(o.stdout.contains("FAIL max_gpu_hour_price (soft, overridden)"), "{}", o.stdout);
}

#[test]
fn min_spot_share_is_soft() {
    let (tmp, _) = fixture("min_spot_share");
    let r = plan(tmp.path(), &[]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stdout.contains("FAIL min_spot_share (soft)"), "{}", r.stdout);
    insta::assert_snapshot!("min_spot_share", r.snapshot());
    let o = plan(tmp.path(), &["--override-policy", "min_spot_share"]);
    assert_eq!(o.code, 0, "{}", o.all());
    assert!(o.stdout.contains("FAIL min_spot_share (soft, overridden)"), "{}", o.stdout);
    assert!(!o.stderr.contains("denied"), "{}", o.stderr);
}

// ---------------------------------------------------------------------------------------
// Hard policies cannot be applied; soft overrides are recorded.

#[test]
fn a_hard_policy_failure_cannot_be_applied_by_any_route() {
    let (tmp, case) = fixture("fleet_hourly_cap");
    assert_eq!(plan(tmp.path(), &[]).code, 3);

    let r = run(tmp.path(), &["apply", "-C", "case", "--auto-approve"]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stderr.contains("nothing was applied"), "{}", r.stderr);
    assert_eq!(sim_nodes(&case), 0, "apply --auto-approve created nodes");
    assert!(!case.join("state/default.json").exists(), "a denied apply wrote the state");

    let saved = plan(tmp.path(), &["--out", "p.json"]);
    assert_eq!(saved.code, 3, "{}", saved.all());
    assert!(case.join("p.json").is_file());
    assert!(!saved.stderr.contains("gpuplan apply p.json"), "a denied plan must not be suggested:\n{}", saved.stderr);
    let r = run(tmp.path(), &["apply", "-C", "case", "p.json"]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert_eq!(sim_nodes(&case), 0, "apply of a denied plan file created nodes");
    assert!(!case.join("state/default.json").exists(), "apply of a denied plan file wrote the state");
}

#[test]
fn override_policy_on_a_hard_policy_has_no_effect() {
    let (tmp, case) = fixture("fleet_hourly_cap");
    let r = plan(tmp.path(), &["--override-policy", "fleet_hourly_cap", "--out", "p.json"]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(
        r.stderr.contains(
            "warning: --override-policy fleet_hourly_cap had no effect: it is a hard policy and cannot be overridden"
        ),
        "{}",
        r.stderr
    );
    let saved = saved_plan(&case.join("p.json"));
    let verdict = saved["policies"].as_array().unwrap().iter().find(|p| p["name"] == "fleet_hourly_cap").unwrap();
    assert_eq!(verdict["passed"], false);
    assert!(verdict.get("overridden").is_none_or(|o| o == false), "{verdict}");
    let r = run(tmp.path(), &["apply", "-C", "case", "--auto-approve", "--override-policy", "fleet_hourly_cap"]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert_eq!(sim_nodes(&case), 0);
}

#[test]
fn a_hand_edited_override_of_a_hard_policy_is_still_refused() {
    let (tmp, case) = fixture("fleet_hourly_cap");
    assert_eq!(plan(tmp.path(), &["--out", "p.json"]).code, 3);
    let path = case.join("p.json");
    let mut saved = saved_plan(&path);
    for p in saved["policies"].as_array_mut().unwrap() {
        p["overridden"] = serde_json::Value::Bool(true);
    }
    std::fs::write(&path, serde_json::to_vec(&saved).unwrap()).unwrap();
    let r = run(tmp.path(), &["apply", "-C", "case", "p.json"]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert_eq!(sim_nodes(&case), 0);
}

#[test]
fn a_soft_override_is_saved_applied_and_recorded_in_history() {
    let (tmp, case) = fixture("min_spot_share");
    let r = plan(tmp.path(), &["--override-policy", "min_spot_share", "--out", "p.json"]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stderr.contains("gpuplan apply p.json"), "{}", r.stderr);
    let saved = saved_plan(&case.join("p.json"));
    let verdict = saved["policies"].as_array().unwrap().iter().find(|p| p["name"] == "min_spot_share").unwrap();
    assert_eq!(verdict["passed"], false, "{verdict}");
    assert_eq!(verdict["overridden"], true, "{verdict}");

    let r = run(tmp.path(), &["apply", "-C", "case", "p.json"]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(sim_nodes(&case), 4);
    let history = state_json(&case)["history"].as_array().unwrap().clone();
    let overrides: Vec<&serde_json::Value> = history.iter().filter(|h| h["event"] == "policy_override").collect();
    assert_eq!(overrides.len(), 1, "{history:?}");
    assert!(overrides[0]["detail"].as_str().unwrap().starts_with("min_spot_share: "), "{:?}", overrides[0]);
}

#[test]
fn a_soft_failure_without_override_cannot_be_applied() {
    let (tmp, case) = fixture("min_spot_share");
    let r = run(tmp.path(), &["apply", "-C", "case", "--auto-approve"]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert_eq!(sim_nodes(&case), 0);
}

// ---------------------------------------------------------------------------------------
// `destroy` is a plan like any other: its verdicts stop it, soft ones can be overridden.

/// The live sim nodes, by id.
fn live_nodes(case: &Path) -> Vec<String> {
    let cloud = SimCloud::open(&case.join("state/default.sim.json"), SimConfig::default()).expect("sim state");
    let mut ids: Vec<String> = cloud.nodes().into_iter().filter(|n| n.is_live()).map(|n| n.id).collect();
    ids.sort();
    ids
}

/// `case/` running the `no_destroy_pool_with_jobs` fixture's `before` spec (a pool a job
/// runs on), applied, with `policy` files installed afterwards.
fn applied_pool_with_a_job(policies: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let case = tmp.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    let before = Path::new(ROOT).join("tests/policies/no_destroy_pool_with_jobs/before/main.hcl");
    std::fs::copy(before, case.join("main.hcl")).unwrap();
    let first = run(tmp.path(), &["apply", "-C", "case", "--auto-approve"]);
    assert_eq!(first.code, 0, "{}", first.all());
    assert!(!live_nodes(&case).is_empty(), "the pool runs nodes");
    let runs = &state_json(&case)["resources"]["job.finetune"]["job"]["runs"];
    assert_eq!(runs[0]["status"], "running", "the job runs: {runs}");
    std::fs::create_dir_all(case.join("policies")).unwrap();
    for (file, text) in policies {
        std::fs::write(case.join("policies").join(file), text).unwrap();
    }
    (tmp, case)
}

const NO_DESTROY_SOFT: &str = "policy \"no_destroy\" {\n  enforcement = \"soft\"\n  for_each    = plan.pools\n  assert      = !each.value.destroys\n  message     = \"${each.key} would be destroyed\"\n}\n";

fn starter_no_destroy() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("policies/no_destroy_pool_with_jobs.hcl")).unwrap()
}

#[test]
fn destroy_of_a_pool_running_jobs_is_denied_naming_the_jobs_and_the_way_out() {
    let (tmp, case) = applied_pool_with_a_job(&[("no_destroy_pool_with_jobs.hcl", &starter_no_destroy())]);
    let state = std::fs::read(case.join("state/default.json")).unwrap();
    let nodes = live_nodes(&case);
    let r = run(tmp.path(), &["destroy", "-C", "case", "--auto-approve"]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stdout.contains("FAIL no_destroy_pool_with_jobs (soft)"), "the plan shows the verdict: {}", r.stdout);
    // The failure is quoted once, in the plan; stderr names the policy and the way out.
    let flat = r.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("gpu_pool.train would be destroyed under running job.finetune; wait for it to end, or cancel with `gpuplan jobs cancel`"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("error: policy `no_destroy_pool_with_jobs` (soft) denies this plan; nothing was applied\n"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("with `--override-policy no_destroy_pool_with_jobs`"), "{}", r.stderr);
    assert!(!r.stderr.contains("would be destroyed"), "printed once: {}", r.stderr);
    assert_eq!(std::fs::read(case.join("state/default.json")).unwrap(), state, "the state file changed");
    assert_eq!(live_nodes(&case), nodes, "the fleet changed");
    // The way out the message names.
    let r =
        run(tmp.path(), &["destroy", "-C", "case", "--auto-approve", "--override-policy", "no_destroy_pool_with_jobs"]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(live_nodes(&case), Vec::<String>::new());
}

/// Destroy with the starter policy passes once nothing runs on the pool, however the
/// job stopped: `prepare` runs in the applied case before the destroy.
fn destroy_passes_after(prepare: &[&str]) {
    let (tmp, case) = applied_pool_with_a_job(&[("no_destroy_pool_with_jobs.hcl", &starter_no_destroy())]);
    let mut args = prepare.to_vec();
    args.extend_from_slice(&["-C", "case"]);
    let r = run(tmp.path(), &args);
    assert_eq!(r.code, 0, "{}", r.all());
    let r = run(tmp.path(), &["destroy", "-C", "case", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(!r.stdout.contains("FAIL no_destroy_pool_with_jobs"), "{}", r.stdout);
    assert!(r.stderr.contains("Destroy complete!"), "{}", r.stderr);
    assert_eq!(live_nodes(&case), Vec::<String>::new());
}

#[test]
fn destroy_passes_once_the_job_succeeded() {
    // The sim's jobs run 60 s of its clock.
    destroy_passes_after(&["sim", "advance", "5m"]);
}

#[test]
fn destroy_passes_once_the_job_is_cancelled() {
    destroy_passes_after(&["jobs", "cancel", "job.finetune"]);
}

#[test]
fn destroy_passes_once_the_job_is_removed_from_state() {
    destroy_passes_after(&["state", "rm", "job.finetune"]);
}

#[test]
fn destroy_denied_by_a_soft_policy_proceeds_with_override_policy() {
    let (tmp, case) = applied_pool_with_a_job(&[("no_destroy.hcl", NO_DESTROY_SOFT)]);
    let nodes = live_nodes(&case);
    let r = run(tmp.path(), &["destroy", "-C", "case", "--auto-approve"]);
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stdout.contains("FAIL no_destroy (soft): gpu_pool.train would be destroyed"), "{}", r.stdout);
    assert!(
        r.stderr.contains("error: policy `no_destroy` (soft) denies this plan; nothing was applied"),
        "{}",
        r.stderr
    );
    assert_eq!(live_nodes(&case), nodes);

    // The job is not preemptible: a destroy leaves it (and its node) running unless it is
    // cancelled, which this policy's override does not do.
    let r = run(tmp.path(), &["jobs", "cancel", "job.finetune", "-C", "case"]);
    assert_eq!(r.code, 0, "{}", r.all());
    let r = run(tmp.path(), &["destroy", "-C", "case", "--auto-approve", "--override-policy", "no_destroy"]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stderr.contains("Destroy complete!"), "{}", r.stderr);
    assert_eq!(live_nodes(&case), Vec::<String>::new());
    let state = state_json(&case);
    assert_eq!(state["resources"].as_object().map_or(0, |r| r.len()), 0, "{state}");
    let history = state["history"].as_array().unwrap();
    assert!(
        history
            .iter()
            .any(|h| h["event"] == "policy_override" && h["detail"].as_str().unwrap().starts_with("no_destroy: ")),
        "the override is recorded: {history:?}"
    );
}

#[test]
fn destroy_honours_parallelism() {
    let (tmp, case) = applied_pool_with_a_job(&[]);
    // Cancelled first: a destroy leaves a running job that is not preemptible.
    let r = run(tmp.path(), &["jobs", "cancel", "job.finetune", "-C", "case"]);
    assert_eq!(r.code, 0, "{}", r.all());
    let r = run(tmp.path(), &["destroy", "-C", "case", "--auto-approve", "--parallelism", "1"]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stderr.contains("Destroy complete!"), "{}", r.stderr);
    assert_eq!(live_nodes(&case), Vec::<String>::new());
    let r = run(tmp.path(), &["destroy", "-C", "case", "--auto-approve", "--parallelism", "0"]);
    assert_eq!(r.code, 1, "a usage error: {}", r.all());
    assert!(r.stderr.contains("--parallelism"), "{}", r.stderr);
}

// ---------------------------------------------------------------------------------------
// Quotas at plan time. The pool: 2 on-demand p4de.24xlarge = 16 GPUs,
// 2 × 27.44705 = 54.8941 USD/h, × 730 = 40072.69 USD/month.

fn quota_case(limits: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let case = tmp.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    let spec = format!(
        r#"provider "sim" {{
  region = "us-east-1"
}}

gpu_pool "train" {{
  provider       = "sim"
  gpu            = "A100-80GB"
  gpus_per_node  = 8
  instance_types = ["p4de.24xlarge"]
  nodes {{
    min     = 2
    desired = 2
    max     = 2
  }}
  mix {{
    spot_percent = 0
  }}
}}

quota "team" {{
  pools = [gpu_pool.train]
{limits}
}}
"#
    );
    std::fs::write(case.join("main.hcl"), spec).unwrap();
    tmp
}

#[test]
fn quota_limits_exceeded_exit_3_naming_quota_limit_and_planned_value() {
    // The verdict's name (`quota.team.max_gpus`) is beside its message in every view, so
    // the message does not repeat it; money reads as everywhere else (`40,072.69`).
    let cases = [
        ("  max_gpus = 8", "the plan needs 16 GPUs, above the limit of 8 GPUs"),
        ("  allowed_gpus = [\"H100\"]", "gpu_pool.train uses A100-80GB (allowed: H100)"),
        ("  budget {\n    hourly_usd = 50\n  }", "the plan needs 54.89 USD/h, above the limit of 50.00 USD/h"),
        (
            "  budget {\n    monthly_usd = 30000\n  }",
            "the plan needs 40,072.69 USD/month, above the limit of 30,000.00 USD/month",
        ),
    ];
    for (limits, message) in cases {
        let tmp = quota_case(limits);
        let r = plan(tmp.path(), &["--json"]);
        assert_eq!(r.code, 3, "{limits}: {}", r.all());
        let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let failed: Vec<&serde_json::Value> =
            json["policies"].as_array().unwrap().iter().filter(|p| p["passed"] == false).collect();
        assert_eq!(failed.len(), 1, "{limits}: {failed:?}");
        assert_eq!(failed[0]["message"], message, "{limits}");
        assert_eq!(failed[0]["enforcement"], "hard");
        let name = failed[0]["name"].as_str().unwrap();
        let text = plan(tmp.path(), &[]);
        let start: String = message.chars().take(30).collect();
        assert!(text.stdout.contains(&format!("  FAIL {name} (hard): {start}")), "{}", text.stdout);
        let md = plan(tmp.path(), &["--format", "markdown"]);
        assert!(md.stdout.contains(message), "{}", md.stdout);
    }
}

#[test]
fn quotas_near_a_limit_warn_but_pass() {
    let tmp = quota_case("  max_gpus = 20\n  budget {\n    hourly_usd  = 60\n    monthly_usd = 1000000\n  }");
    let r = plan(tmp.path(), &[]);
    assert_eq!(r.code, 0, "{}", r.all());
    // 16 of 20 GPUs = 80 % (the default warn_percent); 54.89 of 60 USD/h = 91 %; 4 % of the monthly budget.
    assert!(
        r.stderr.contains("warning: quota.team.max_gpus: the plan uses 16 GPUs, 80% of the limit of 20 GPUs"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(
            "warning: quota.team.budget.hourly_usd: the plan uses 54.89 USD/h, 91% of the limit of 60.00 USD/h"
        ),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("monthly_usd"), "{}", r.stderr);
    assert!(r.stdout.contains("  warn quota.team.max_gpus (hard)"), "{}", r.stdout);
    // The plain pass is counted; `--verbose` lists it.
    assert!(r.stdout.contains("Policies: 3 passed (2 near a limit)\n"), "{}", r.stdout);
    assert!(!r.stdout.contains("  pass quota.team.budget.monthly_usd"), "{}", r.stdout);
    let verbose = plan(tmp.path(), &["--verbose"]);
    assert!(verbose.stdout.contains("  pass quota.team.budget.monthly_usd (hard)"), "{}", verbose.stdout);

    // warn_percent = 95 silences both.
    let tmp = quota_case("  max_gpus = 20\n  warn_percent = 95\n  budget {\n    hourly_usd = 60\n  }");
    let r = plan(tmp.path(), &[]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(!r.stderr.contains("warning:"), "{}", r.stderr);
}

// ---------------------------------------------------------------------------------------
// The markdown plan of the quickstart.

#[test]
fn quickstart_markdown_shows_cost_delta_and_policy_table() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&Path::new(ROOT).join("examples/quickstart"), &tmp.path().join("case"));
    let r = plan(tmp.path(), &["--format", "markdown"]);
    assert_eq!(r.code, 0, "{}", r.all());
    // train 2.4 × 27.44705 + inference 1.4 × 0.8048 = 66.99964 USD/h.
    assert!(r.stdout.contains("**Cost**: 0.00 → 67.00 USD/h (**+67.00**)"), "{}", r.stdout);
    // A plan every policy passes leads with the verdict and shows the passes as a count,
    // the passes themselves in its details.
    assert!(r.stdout.starts_with("### ✅ Ready to apply\n"), "{}", r.stdout);
    assert!(
        r.stdout.contains("<details><summary><b>Policies</b>: ✅ all 12 policy checks passed</summary>"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("- `quota.ml_team.budget.monthly_usd` (hard): 48,909.74 of 100,000.00 USD/month\n"));
    assert!(!r.stdout.contains("| Policy | Enforcement | Result | Message |"), "{}", r.stdout);
    insta::assert_snapshot!("quickstart_markdown", r.snapshot());
}

// ---------------------------------------------------------------------------------------
// Broken policy files.

fn broken_policy(policy: &str) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let case = tmp.path().join("case");
    copy_dir(&Path::new(ROOT).join("tests/policies/min_spot_share"), &case);
    std::fs::create_dir_all(case.join("policies")).unwrap();
    std::fs::write(case.join("policies/p.hcl"), policy).unwrap();
    plan(tmp.path(), &[])
}

#[test]
fn malformed_policy_files_exit_1_with_a_located_diagnostic() {
    let cases = [
        ("unknown attribute", "policy \"a\" {\n  asert  = true\n  assert = true\n}\n", "case/policies/p.hcl:2:3"),
        (
            "bad enforcement",
            "policy \"a\" {\n  enforcement = \"strict\"\n  assert      = true\n}\n",
            "case/policies/p.hcl:2:17",
        ),
        ("missing assert", "policy \"a\" {\n  enforcement = \"hard\"\n}\n", "case/policies/p.hcl:1:1"),
        ("syntax error", "policy \"a\" {\n  assert = plan.cost.hourly_after <=\n}\n", "case/policies/p.hcl:2:"),
        // Knowable before any plan: rejected when loaded, not failed on every plan.
        ("unknown fact", "policy \"a\" {\n  assert = plan.nope > 1\n}\n", "case/policies/p.hcl:2:17"),
    ];
    let mut all = String::new();
    for (what, text, at) in cases {
        let r = broken_policy(text);
        assert_eq!(r.code, 1, "{what}: {}", r.all());
        assert!(r.stderr.contains(&format!("╭─[{at}")), "{what}: not located at {at}:\n{}", r.stderr);
        assert!(r.stdout.is_empty(), "{what}: {}", r.stdout);
        all += &format!("===== {what}\n{}", r.snapshot());
    }
    insta::assert_snapshot!("malformed_policy_files", all);
}

#[test]
fn a_policy_that_cannot_be_evaluated_fails_instead_of_passing() {
    // A pool the plan does not hold: only evaluation can tell.
    let r = broken_policy(
        "policy \"a\" {\n  enforcement = \"hard\"\n  assert      = plan.pools[\"gpu_pool.gone\"].gpu == \"L4\"\n}\n",
    );
    assert_eq!(r.code, 3, "{}", r.all());
    // It fails whatever the fleet, so on the fleet as it stands too.
    assert!(r.stdout.contains("FAIL a (hard, failing before this change): could not be evaluated: "), "{}", r.stdout);
    let r = broken_policy("policy \"a\" {\n  enforcement = \"soft\"\n  assert      = plan.cost.hourly_after\n}\n");
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(
        r.stdout.contains(
            "FAIL a (soft, failing before this change): could not be evaluated: `assert` must be true or false,"
        ),
        "{}",
        r.stdout
    );
}
