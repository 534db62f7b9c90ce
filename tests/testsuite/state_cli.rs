//! `gpuplan init` and `gpuplan state list|show|rm|unlock` end to end: files created,
//! exit codes, and what goes to stdout versus stderr.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let mut cmd = cargo_bin_cmd!("gpuplan");
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "100").env_remove("GPUPLAN_WORKSPACE");
    let out = cmd.args(args).output().expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A state file with two pools, as an apply would leave it.
fn seed_state(dir: &Path) {
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let node = serde_json::json!({"id": "i-1", "pool": "gpu_pool.train", "instance_type": "g6.xlarge",
        "region": "us-east-1", "zone": "us-east-1a", "capacity": "spot", "state": "running"});
    let state = serde_json::json!({
        "format_version": 1, "serial": 3, "lineage": "l-1",
        "resources": {
            "gpu_pool.train": {"kind": "gpu_pool", "provider": "sim", "config": {"gpu": "L4"}, "nodes": [node]},
            "gpu_pool.infer": {"kind": "gpu_pool", "config": {}},
        }
    });
    std::fs::write(dir.join("state/default.json"), serde_json::to_vec_pretty(&state).unwrap()).unwrap();
}

#[test]
fn init_in_an_empty_dir_creates_state_readme_and_starter_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run(tmp.path(), &["init"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let readme = std::fs::read_to_string(tmp.path().join("state/README.md")).unwrap();
    for topic in [".backup", ".lock", ".journal", "lineage", "serial", "base_serial"] {
        assert!(readme.contains(topic), "README does not document `{topic}`");
    }
    let spec = std::fs::read_to_string(tmp.path().join("main.hcl")).unwrap();
    assert!(spec.contains("provider \"sim\" {}") && spec.contains("\"L4\""), "{spec}");
    assert!(r.stderr.contains("state/README.md") && r.stderr.contains("main.hcl"), "{}", r.stderr);

    let v = run(tmp.path(), &["validate"]);
    assert_eq!(v.code, 0, "the starter spec must validate:\n{}", v.stderr);
}

#[test]
fn init_never_overwrites_and_skips_the_starter_when_specs_exist() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("fleet.yaml"), "providers:\n  sim: {}\n").unwrap();
    std::fs::create_dir(tmp.path().join("state")).unwrap();
    std::fs::write(tmp.path().join("state/README.md"), "mine").unwrap();
    let r = run(tmp.path(), &["init"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!tmp.path().join("main.hcl").exists());
    assert_eq!(std::fs::read_to_string(tmp.path().join("state/README.md")).unwrap(), "mine");
    // An existing project gets no starter policies either, and is told so.
    assert!(!tmp.path().join("policies").exists(), "{}", r.stderr);
    assert!(
        r.stderr.contains("Left alone: the existing project (`fleet.yaml`); the starter spec and default policies are only written into an empty folder"),
        "{}",
        r.stderr
    );
    let again = run(tmp.path(), &["init"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("Nothing to do"), "{}", again.stderr);
    assert!(!tmp.path().join("policies").exists(), "{}", again.stderr);
}

/// A sim pool wholly on-demand: clean on its own, denied by the starter `min_spot_share`.
const ON_DEMAND_FLEET: &str = r#"provider "sim" {
  region = "us-east-1"
}

gpu_pool "serve" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 1
    desired = 1
    max     = 1
  }
  mix {
    spot_percent = 0
  }
}
"#;

#[test]
fn init_in_an_existing_project_adds_no_policies_and_the_plan_stays_clean() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), ON_DEMAND_FLEET).unwrap();
    let apply = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(apply.code, 0, "{}{}", apply.stdout, apply.stderr);
    assert_eq!(run(tmp.path(), &["plan", "--detailed-exitcode"]).code, 0);

    for args in [&["init"][..], &["init", "--migrate-state"][..]] {
        let r = run(tmp.path(), args);
        assert!(!tmp.path().join("policies").exists(), "{args:?} wrote policies:\n{}", r.stderr);
        assert!(r.stderr.contains("Left alone: the existing project (`main.hcl`)"), "{args:?}: {}", r.stderr);
        let plan = run(tmp.path(), &["plan", "--detailed-exitcode"]);
        assert_eq!(plan.code, 0, "after {args:?} the plan is no longer clean:\n{}{}", plan.stdout, plan.stderr);
        assert!(!plan.stdout.contains("min_spot_share"), "{}", plan.stdout);
    }
    assert_eq!(std::fs::read_to_string(tmp.path().join("main.hcl")).unwrap(), ON_DEMAND_FLEET);
}

#[test]
fn init_beside_a_policies_folder_writes_no_starter_spec() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("policies")).unwrap();
    let r = run(tmp.path(), &["init"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!tmp.path().join("main.hcl").exists(), "{}", r.stderr);
    assert_eq!(std::fs::read_dir(tmp.path().join("policies")).unwrap().count(), 0);
    assert!(tmp.path().join("state/README.md").exists());
    assert!(r.stderr.contains("Left alone: the existing project (`policies/`)"), "{}", r.stderr);
}

#[test]
fn state_list_on_no_state_prints_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run(tmp.path(), &["state", "list"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{}", r.stderr);
    assert!(!tmp.path().join("state").exists(), "listing must not create files");
}

#[test]
fn state_list_and_show() {
    let tmp = tempfile::tempdir().unwrap();
    seed_state(tmp.path());
    let r = run(tmp.path(), &["state", "list"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "gpu_pool.infer\ngpu_pool.train\n"), "{}", r.stderr);
    let r = run(tmp.path(), &["state", "show", "gpu_pool.train"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let shown: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(shown["config"]["gpu"], "L4");
    assert_eq!(shown["nodes"][0]["id"], "i-1");
}

#[test]
fn state_show_unknown_address_fails_with_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    seed_state(tmp.path());
    let r = run(tmp.path(), &["state", "show", "gpu_pool.trian"]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.is_empty());
    assert!(r.stderr.contains("error: no resource `gpu_pool.trian`"), "{}", r.stderr);
    assert!(r.stderr.contains("hint: did you mean `gpu_pool.train`?"), "{}", r.stderr);
}

#[test]
fn state_rm_on_corrupt_state_fails_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("state")).unwrap();
    std::fs::write(tmp.path().join("state/default.json"), "{\"format_version\": 1, \"ser").unwrap();
    let r = run(tmp.path(), &["state", "rm", "gpu_pool.a"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("unreadable at line 1") && r.stderr.contains("hint: "), "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("state/default.json")).unwrap(),
        "{\"format_version\": 1, \"ser"
    );
}

#[test]
fn plan_refuses_a_state_key_that_is_not_an_address_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), "provider \"sim\" {}\n").unwrap();
    std::fs::create_dir(tmp.path().join("state")).unwrap();
    let state = serde_json::json!({
        "format_version": 1, "serial": 3, "lineage": "l-1",
        "resources": {"gpu_pool..bad": {"kind": "gpu_pool", "config": {}}},
    });
    let text = serde_json::to_string_pretty(&state).unwrap();
    std::fs::write(tmp.path().join("state/default.json"), &text).unwrap();
    let r = run(tmp.path(), &["plan", "--refresh=false"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(r.stderr.contains("state/default.json") && r.stderr.contains("`gpu_pool..bad`"), "{}", r.stderr);
    assert!(r.stderr.contains("which is not a") && r.stderr.contains("help: nothing was written"), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(tmp.path().join("state/default.json")).unwrap(), text);
}

#[test]
fn state_rm_removes_with_one_write_and_warns_about_cloud_objects() {
    let tmp = tempfile::tempdir().unwrap();
    seed_state(tmp.path());
    let r = run(tmp.path(), &["state", "rm", "gpu_pool.train", "gpu_pool.nope"]);
    assert_eq!(r.code, 1, "a typo removes nothing");
    assert!(!tmp.path().join("state/default.json.backup").exists());

    let r = run(tmp.path(), &["state", "rm", "gpu_pool.train"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("warning: cloud objects were not destroyed: 1 live node"), "{}", r.stderr);
    let state: serde_json::Value = crate::state_plain::read(&tmp.path().join("state/default.json"));
    assert_eq!(state["serial"], 4, "one write");
    assert!(state["resources"].get("gpu_pool.train").is_none());
    assert_eq!(state["history"][0]["event"], "state_rm");
    assert!(!tmp.path().join("state/default.json.lock").exists(), "lock released");
    assert_eq!(run(tmp.path(), &["state", "list"]).stdout, "gpu_pool.infer\n");
}

#[test]
fn state_unlock_needs_the_right_id() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run(tmp.path(), &["state", "unlock", "abc"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("is not locked") && r.stderr.contains("hint:"), "{}", r.stderr);

    std::fs::create_dir(tmp.path().join("state")).unwrap();
    let lock = serde_json::json!({"id": "1111-right", "who": "ci@runner", "pid": 4242, "operation": "apply",
        "created": "2025-01-01T00:00:00Z"});
    let lock_path = tmp.path().join("state/default.json.lock");
    std::fs::write(&lock_path, lock.to_string()).unwrap();

    let r = run(tmp.path(), &["state", "unlock", "2222-wrong"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("does not match") && r.stderr.contains("hint:"), "{}", r.stderr);
    assert!(lock_path.exists());

    let r = run(tmp.path(), &["state", "unlock", "1111-right"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("ci@runner"), "{}", r.stderr);
    assert!(!lock_path.exists());
}

/// What a new user does first: `init` in an empty folder, then plan, apply and plan
/// again. The starter fleet must pass every starter policy `init` copies, or the very
/// first `plan` exits 3.
#[test]
fn first_run_init_plan_apply_plan_passes_the_starter_policies() {
    let tmp = tempfile::tempdir().unwrap();
    let init = run(tmp.path(), &["init"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let policies = std::fs::read_dir(tmp.path().join("policies")).unwrap().count();
    assert!(policies >= 5, "init copied {policies} policies");

    let plan = run(tmp.path(), &["plan", "--detailed-exitcode", "--verbose"]);
    assert_eq!(plan.code, 2, "the first plan should propose the starter pool:\n{}{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("gpu_pool.starter"), "{}", plan.stdout);
    assert!(plan.stdout.contains("Policies:"), "the starter policies were not checked:\n{}", plan.stdout);
    assert!(plan.stdout.contains("pass min_spot_share"), "{}", plan.stdout);
    for bad in ["FAIL", "denied", "could not be evaluated"] {
        assert!(!plan.stdout.contains(bad) && !plan.stderr.contains(bad), "`{bad}`:\n{}{}", plan.stdout, plan.stderr);
    }

    let apply = run(tmp.path(), &["apply", "--auto-approve"]);
    assert_eq!(apply.code, 0, "{}{}", apply.stdout, apply.stderr);
    assert!(
        apply.stderr.contains("Apply complete!") || apply.stdout.contains("Apply complete!"),
        "{}{}",
        apply.stdout,
        apply.stderr
    );

    let again = run(tmp.path(), &["plan", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "the second plan should find nothing to do:\n{}{}", again.stdout, again.stderr);
    assert!(again.stdout.contains("No changes."), "{}", again.stdout);
    assert!(!again.stdout.contains("FAIL"), "{}", again.stdout);

    // The starter test file shows each starter policy passing and failing, and passes.
    let tests = run(tmp.path(), &["test"]);
    assert_eq!(tests.code, 0, "{}{}", tests.stdout, tests.stderr);
    for policy in
        ["min_spot_share", "max_gpu_hour_price", "fleet_hourly_cap", "allowed_gpu_models", "no_destroy_pool_with_jobs"]
    {
        let text = std::fs::read_to_string(tmp.path().join("tests/starter.test.hcl")).unwrap();
        assert!(text.contains(&format!("policy.{policy}")), "the starter test never fails {policy}");
    }
    assert!(tests.stdout.ends_with("\n8 passed, 0 failed\n"), "{}", tests.stdout);
}
