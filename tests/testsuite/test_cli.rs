//! `gpuplan test` with the real binary on `tests/fleet_tests/`: a fleet whose `tests/` holds
//! one passing and one failing file. The output users see, `expect_failures` both ways,
//! runs that see earlier applies, located problems in test files, the JUnit file checked
//! against the JUnit schema by an independent validator, and the speed the contract asks.

use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin_cmd;

#[path = "../../benches/test_files/fixture.rs"]
mod fixture;
use fixture::write_twenty_pool_tests;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fleet_tests")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn gpuplan(dir: &Path, args: &[&str]) -> Run {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env_remove("GPUPLAN_WORKSPACE")
        .env_remove("GPUPLAN_SIM_LATENCY")
        .args(args)
        .output()
        .expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A copy of the fixture's spec and policies, with the given test files.
fn project(tests: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(fixture().join("main.hcl"), tmp.path().join("main.hcl")).unwrap();
    std::fs::create_dir_all(tmp.path().join("policies")).unwrap();
    for p in ["min_spot_share.hcl", "fleet_hourly_cap.hcl"] {
        std::fs::copy(fixture().join("policies").join(p), tmp.path().join("policies").join(p)).unwrap();
    }
    std::fs::create_dir_all(tmp.path().join("tests")).unwrap();
    for (name, text) in tests {
        std::fs::write(tmp.path().join("tests").join(name), text).unwrap();
    }
    tmp
}

#[test]
fn the_failing_file_names_file_line_and_values() {
    let r = gpuplan(&fixture(), &["test", "--filter", "tests/failing.test.hcl"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout,
        "\
tests/failing.test.hcl
  run \"wrong_assert\"... fail
    tests/failing.test.hcl:6:21: expected 70% spot to be more
      plan.summary.add = 1
      var.spot = 70
  run \"expects_a_passing_policy_to_fail\"... fail
    tests/failing.test.hcl:13:22: `policy.min_spot_share` was expected to fail, but it passed
  run \"over_the_cap\"... fail
    tests/failing.test.hcl:16:1: `policy.fleet_hourly_cap` denied the plan: the fleet would cost 153.70 USD/h
  run \"broken_assert\"... error
    tests/failing.test.hcl:23:26: no attribute `summry` (did you mean `summary`?)
  run \"after_the_broken_one\"... skip

0 passed, 4 failed, 1 skipped
"
    );
    assert_eq!(r.stderr, "");
}

#[test]
fn the_passing_file_passes_without_touching_the_real_state() {
    let dir = fixture();
    let r = gpuplan(&dir, &["test", "--filter", "passing.test.hcl"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    // Five runs: a plan, a denial expected by `expect_failures`, an apply, a plan that sees
    // the applied state, and a spot reclaim the next plan sees.
    assert_eq!(
        r.stdout,
        "\
tests/passing.test.hcl
  run \"plan_from_nothing\"... pass
  run \"low_spot_is_denied\"... pass
  run \"apply\"... pass
  run \"settled\"... pass
  run \"spot_reclaimed\"... pass

5 passed, 0 failed
"
    );
    assert!(!dir.join("state").exists(), "gpuplan test wrote the project's state folder");
}

#[test]
fn expect_failures_passes_a_denying_policy_and_fails_a_passing_one() {
    let denies = "run \"denied\" {\n  command = plan\n  variables { spot = 0 }\n  expect_failures = [policy.min_spot_share]\n}\n";
    let passes = "run \"not_denied\" {\n  command = plan\n  expect_failures = [policy.min_spot_share]\n}\n";
    let unexpected = "run \"denied_unexpectedly\" {\n  command = plan\n  variables { spot = 0 }\n}\n";
    let p = project(&[("a.test.hcl", denies), ("b.test.hcl", passes), ("c.test.hcl", unexpected)]);
    let r = gpuplan(p.path(), &["test", "--filter", "a.test.hcl"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("run \"denied\"... pass"), "{}", r.stdout);
    let r = gpuplan(p.path(), &["test", "--filter", "b.test.hcl"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("tests/b.test.hcl:3:22: `policy.min_spot_share` was expected to fail, but it passed"),
        "{}",
        r.stdout
    );
    let r = gpuplan(p.path(), &["test", "--filter", "c.test.hcl"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("`policy.min_spot_share` denied the plan: gpu_pool.train runs 0% on spot"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_pool_expected_to_fail_validation_passes_when_only_it_fails() {
    // `desired` above `max` is a spec error inside `gpu_pool.train`.
    let t = "run \"too_big\" {\n  command = plan\n  variables { desired = 20 }\n  expect_failures = [gpu_pool.train]\n}\n\
             run \"too_big_unexpected\" {\n  command = plan\n  variables { desired = 20 }\n}\n";
    let p = project(&[("v.test.hcl", t)]);
    let r = gpuplan(p.path(), &["test"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("run \"too_big\"... pass"), "{}", r.stdout);
    assert!(r.stdout.contains("run \"too_big_unexpected\"... error"), "{}", r.stdout);
    assert!(r.stdout.contains("the spec does not load with this run's variables"), "{}", r.stdout);
}

#[test]
fn sim_capacity_and_the_clock_shape_the_world_before_a_run() {
    let t = r#"
run "no_spot_in_the_zone" {
  sim {
    capacity {
      zone = "us-east-1a"
      spot = 0
    }
    advance = "2h"
  }
  assert {
    condition     = length([for n in state.resources["gpu_pool.train"].nodes : n if n.capacity == "spot"]) == 0
    error_message = "no spot node launches where spot capacity is 0"
  }
  assert {
    condition     = length(state.resources["gpu_pool.train"].nodes) == 3
    error_message = "the pool falls back to on-demand"
  }
}
"#;
    let p = project(&[("sim.test.hcl", t)]);
    let r = gpuplan(p.path(), &["test"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

#[test]
fn json_output_carries_every_run_and_the_summary() {
    let r = gpuplan(&fixture(), &["test", "--json"]);
    assert_eq!(r.code, 1);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON on stdout");
    assert_eq!(doc["summary"], serde_json::json!({"passed": 5, "failed": 4, "skipped": 1}));
    let failing = &doc["files"][0];
    assert_eq!(failing["file"], "tests/failing.test.hcl");
    let wrong = &failing["runs"][0];
    assert_eq!(wrong["status"], "fail");
    assert_eq!(wrong["failures"][0]["location"], "tests/failing.test.hcl:6:21");
    assert_eq!(wrong["failures"][0]["values"][0], serde_json::json!({"expression": "plan.summary.add", "value": "1"}));
    assert!(wrong["duration"].as_f64().is_some());
}

#[test]
fn run_selects_runs_by_name() {
    let r = gpuplan(&fixture(), &["test", "--run", "plan_from_nothing"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.ends_with("\n1 passed, 0 failed\n"), "{}", r.stdout);
    let r = gpuplan(&fixture(), &["test", "--run", "nope"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no test file has a run named `nope`"), "{}", r.stderr);
}

#[test]
fn problems_in_test_files_are_located_by_test_and_validate() {
    let t = "variables {\n  spot = 70\n}\n\nrun \"x\" {\n  comand = plan\n  assert {\n    condition = true\n  }\n}\n";
    let p = project(&[("bad.test.hcl", t)]);
    let r = gpuplan(p.path(), &["test"]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(r.stderr.contains("tests/bad.test.hcl:6:3"), "{}", r.stderr);
    assert!(r.stderr.contains("did you mean `command`?"), "{}", r.stderr);
    assert!(r.stderr.contains("tests/bad.test.hcl:7:3"), "{}", r.stderr);
    assert!(r.stderr.contains("`assert` needs `error_message`"), "{}", r.stderr);
    let v = gpuplan(p.path(), &["validate"]);
    assert_eq!(v.code, 1);
    assert!(v.stderr.contains("tests/bad.test.hcl:6:3"), "{}", v.stderr);
    assert!(v.stderr.contains("error: 2 problems in 1 file"), "{}", v.stderr);
}

/// The spec's remote backend and cloud providers are never contacted: the endpoints here
/// answer nothing (port 9, discard), and no credentials are set.
#[test]
fn a_spec_with_a_remote_backend_and_cloud_providers_tests_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = r#"
gpuplan {
  backend "s3" {
    bucket   = "fleet-state"
    key      = "prod.json"
    region   = "us-east-1"
    endpoint = "http://127.0.0.1:9"
  }
}

provider "aws" {
  region   = "us-east-1"
  image    = "ami-0123456789abcdef0"
  endpoint = "http://127.0.0.1:9"
}

provider "tencentcloud" {
  region   = "ap-guangzhou"
  image    = "img-gpuplan"
  endpoint = "http://127.0.0.1:9"
}

gpu_pool "a" {
  provider      = "aws"
  gpu           = "A10G"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 2
    max     = 2
  }
}

gpu_pool "t" {
  provider      = "tencentcloud"
  gpu           = "T4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
}
"#;
    std::fs::write(tmp.path().join("main.hcl"), spec).unwrap();
    std::fs::create_dir_all(tmp.path().join("tests")).unwrap();
    let t = "run \"apply\" {\n  assert {\n    condition     = length(state.resources[\"gpu_pool.a\"].nodes) == 2 && length(state.resources[\"gpu_pool.t\"].nodes) == 1\n    error_message = \"both clouds' pools are launched in the test world\"\n  }\n}\n";
    std::fs::write(tmp.path().join("tests/offline.test.hcl"), t).unwrap();
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_PROFILE")
        .env_remove("TENCENTCLOUD_SECRET_ID")
        .env_remove("TENCENTCLOUD_SECRET_KEY")
        .env("HOME", tmp.path())
        .args(["test"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.ends_with("\n1 passed, 0 failed\n"), "{stdout}");
    assert!(!tmp.path().join("state").exists(), "the test wrote a state folder beside the spec");
}

#[test]
fn a_folder_without_tests_says_so_and_passes() {
    let p = project(&[]);
    std::fs::remove_dir(p.path().join("tests")).unwrap();
    let r = gpuplan(p.path(), &["test"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "0 passed, 0 failed\n"));
    assert!(r.stderr.contains("warning: no test files in `.`: `gpuplan test` runs `tests/*.test.hcl`"), "{}", r.stderr);
    let r = gpuplan(p.path(), &["test", "--filter", "x.test.hcl"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("`--filter x.test.hcl` names no test file"), "{}", r.stderr);
}

#[test]
fn a_test_variable_the_spec_does_not_declare_is_an_error_at_its_line() {
    let t = "run \"x\" {\n  command = plan\n  variables {\n    spto = 1\n  }\n}\n";
    let p = project(&[("v.test.hcl", t)]);
    let r = gpuplan(p.path(), &["test"]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("tests/v.test.hcl:4:5: the spec declares no variable `spto`"), "{}", r.stdout);
}

/// The JUnit file, checked by an independent parser and validator (Python's `xmlschema`,
/// installed into `.venv/` by `scripts/moto`) against `tests/junit/junit.xsd`, the
/// structure Jenkins' JUnit schema fixes and GitLab reads.
#[test]
fn junit_xml_validates_against_the_junit_schema() {
    let out = tempfile::tempdir().unwrap();
    let xml = out.path().join("junit.xml");
    let r = gpuplan(&fixture(), &["test", "--junit-xml", xml.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = "import sys, xmlschema\n\
                  schema = xmlschema.XMLSchema(sys.argv[1])\n\
                  schema.validate(sys.argv[2])\n\
                  doc = schema.to_dict(sys.argv[2])\n\
                  cases = [c for s in doc['testsuite'] for c in s['testcase']]\n\
                  print(len(doc['testsuite']), len(cases), sum('failure' in c for c in cases), sum('error' in c for c in cases), sum('skipped' in c for c in cases))\n";
    let check = std::process::Command::new(root.join(".venv/bin/python"))
        .args(["-c", script])
        .arg(root.join("tests/junit/junit.xsd"))
        .arg(&xml)
        .output()
        .expect("the .venv Python runs: run the tests with `scripts/test`, which installs xmlschema");
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{}{}", said, String::from_utf8_lossy(&check.stderr));
    // 2 suites, 10 cases: 3 failures, 1 error, 1 skipped.
    assert_eq!(said.trim(), "2 10 3 1 1");
    // A broken document must fail the same check, or the check proves nothing.
    let text = std::fs::read_to_string(&xml).unwrap().replacen("<testcase name=", "<testcase nam=", 1);
    std::fs::write(&xml, text).unwrap();
    let check = std::process::Command::new(root.join(".venv/bin/python"))
        .args(["-c", script])
        .arg(root.join("tests/junit/junit.xsd"))
        .arg(&xml)
        .output()
        .unwrap();
    assert!(!check.status.success(), "the schema accepted a testcase without a name");
}

/// Two files of 10 runs each (every third an apply) over a 20-pool spec: every run
/// passes and each file reports its own duration. Their speed is measured by
/// `benches/test_files.rs` (run by hand), never by a timed test.
#[test]
fn two_files_of_ten_runs_over_twenty_pools_all_pass() {
    let tmp = tempfile::tempdir().unwrap();
    write_twenty_pool_tests(tmp.path());
    let r = gpuplan(tmp.path(), &["test", "--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["summary"]["passed"], 20);
    let files = doc["files"].as_array().unwrap();
    assert_eq!(files.len(), 2, "{doc:#}");
    assert!(files.iter().all(|f| f["duration"].as_f64().is_some()), "{doc:#}");
}

/// `sim { fault {} }` in a test file gives the pool's first nodes a GPU fault: the next
/// plan replaces one (docs/design/gpu-health.md).
#[test]
fn a_test_file_can_schedule_gpu_faults() {
    let text = r#"run "apply" {}

run "xid_79" {
  command = plan
  sim {
    fault {
      pool = gpu_pool.train
      xid  = 79
      gpu  = 3
    }
  }
  assert {
    condition     = length(plan.health) == 1 && plan.health[0].xid == 79 && plan.health[0].gpu == 3
    error_message = "one node with XID 79 on GPU 3"
  }
  assert {
    condition     = plan.health[0].action == "replace"
    error_message = "replaced by default"
  }
}
"#;
    let bad = "run \"apply\" {}\nrun \"two\" {\n  command = plan\n  sim {\n    fault {\n      pool = gpu_pool.train\n      ecc  = true\n      xid  = 79\n    }\n  }\n}\n";
    let p = project(&[("health.test.hcl", text), ("bad.test.hcl", bad)]);
    let r = gpuplan(p.path(), &["test", "--filter", "health.test.hcl"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("run \"xid_79\"... pass"), "{}", r.stdout);
    let r = gpuplan(p.path(), &["test", "--filter", "bad.test.hcl"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(all.contains("`fault` names one fault") && all.contains("bad.test.hcl:5:5"), "{all}");
}
