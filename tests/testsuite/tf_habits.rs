//! What a Terraform user's fingers type: single-dash flags (`-auto-approve`, `-var x=1`,
//! `-input=false`), the confirmation answered on standard input (`echo yes | gpuplan
//! apply`), and times past what gpuplan can print (`sim advance 8000years`).

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

const SPEC: &str = r#"
variable "nodes" {
  default = 1
}

provider "sim" {}

gpu_pool "train" {
  provider      = "sim"
  region        = "us-east-1"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = var.nodes
    max     = 8
  }
}
"#;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `gpuplan args` in `dir`, plain output, no `GPUPLAN_*` from the caller, `stdin` piped in.
fn run_with(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Run {
    let mut cmd = cargo_bin_cmd!("gpuplan");
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "100");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GPUPLAN_")) {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().copied()).args(args).write_stdin(stdin);
    let out = cmd.output().expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn run(dir: &Path, args: &[&str]) -> Run {
    run_with(dir, args, &[], "")
}

fn fleet() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("main.hcl"), SPEC).expect("write spec");
    tmp
}

fn nodes_in_state(dir: &Path) -> usize {
    let Ok(text) = std::fs::read_to_string(dir.join("state/default.json")) else { return 0 };
    let state: serde_json::Value = crate::state_plain::plain(serde_json::from_str(&text).expect("state JSON"));
    state["resources"]["gpu_pool.train"]["nodes"].as_array().map_or(0, Vec::len)
}

#[track_caller]
fn expect(r: &Run, code: i32) {
    assert_eq!(r.code, code, "exit code\n--- stdout\n{}\n--- stderr\n{}", r.stdout, r.stderr);
}

#[test]
fn terraform_s_single_dash_flags_mean_their_double_dash_forms() {
    let tmp = fleet();
    let dir = tmp.path();
    // `-var x=1` and `-var=x=1`, `-out`, `-json`, `-no-color`, `-detailed-exitcode`,
    // `-refresh=false`, `-lock-timeout` and `-target`.
    let r = run(dir, &["plan", "-var", "nodes=2", "-detailed-exitcode", "-refresh=false", "-json"]);
    expect(&r, 2);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).expect("plan JSON on stdout");
    assert_eq!(plan["changes"][0]["after"]["nodes"]["desired"], 2, "{:#}", plan["changes"]);
    let r = run(
        dir,
        &["-no-color", "plan", "-var=nodes=3", "-out=p.plan", "-lock-timeout=5s", "-target", "gpu_pool.train"],
    );
    expect(&r, 0);
    assert!(dir.join("p.plan").is_file(), "-out wrote the plan:\n{}", r.stderr);
    // `-auto-approve` and `-input=false` on apply and destroy.
    let r = run(dir, &["apply", "-auto-approve", "-input=false", "-var", "nodes=2"]);
    expect(&r, 0);
    assert_eq!(nodes_in_state(dir), 2, "{}", r.stderr);
    let r = run(dir, &["destroy", "-auto-approve", "-var", "nodes=2"]);
    expect(&r, 0);
    assert_eq!(nodes_in_state(dir), 0, "{}", r.stderr);
}

#[test]
fn short_flags_and_values_are_left_alone_and_a_mistyped_flag_is_named() {
    let tmp = fleet();
    let dir = tmp.path();
    // `-C DIR` is a short flag with its value; `-v` a short flag of plan.
    let r = run(Path::new("/"), &["-C", dir.to_str().expect("utf-8 path"), "plan", "-v"]);
    expect(&r, 0);
    // The value after a flag that takes one is never rewritten: `-var -json` would be
    // `--var --json` otherwise; clap refuses a value that starts with a dash, as typed.
    let r = run(dir, &["plan", "-var", "-json"]);
    expect(&r, 1);
    assert!(r.stderr.contains("'-j'"), "{}", r.stderr);
    // A mistyped single-dash flag: clap names it and suggests the flag it is close to,
    // not its first letter.
    let r = run(dir, &["apply", "-auto-aprove"]);
    expect(&r, 1);
    assert!(r.stderr.contains("auto-aprove") && r.stderr.contains("--auto-approve"), "{}", r.stderr);
    assert!(!r.stderr.contains("'-a'"), "{}", r.stderr);
    assert_eq!(nodes_in_state(dir), 0);
}

#[test]
fn apply_reads_yes_from_standard_input_when_it_is_not_a_terminal() {
    let tmp = fleet();
    let dir = tmp.path();
    let r = run_with(dir, &["apply"], &[], "yes\n");
    expect(&r, 0);
    assert!(r.stderr.contains("Only 'yes' will be accepted"), "the question is asked:\n{}", r.stderr);
    assert!(r.stderr.contains("Apply complete!"), "{}", r.stderr);
    assert_eq!(nodes_in_state(dir), 1);
    let r = run_with(dir, &["destroy"], &[], "yes\n");
    expect(&r, 0);
    assert_eq!(nodes_in_state(dir), 0, "{}", r.stderr);
}

#[test]
fn any_other_answer_on_standard_input_cancels_and_changes_nothing() {
    let tmp = fleet();
    let dir = tmp.path();
    for answer in ["no\n", "y\n", "YES please\n"] {
        let r = run_with(dir, &["apply"], &[], answer);
        expect(&r, 1);
        assert!(r.stderr.contains("Apply cancelled."), "{answer:?}:\n{}", r.stderr);
        assert!(!r.stderr.contains("hint:"), "an answer was given:\n{}", r.stderr);
        assert_eq!(nodes_in_state(dir), 0, "{answer:?}");
    }
    // Standard input ends without a line: cancelled, with how to answer in CI.
    let r = run_with(dir, &["apply"], &[], "");
    expect(&r, 1);
    assert!(r.stderr.contains("Apply cancelled.\nhint: standard input ended without an answer"), "{}", r.stderr);
    assert!(r.stderr.contains("--auto-approve"), "{}", r.stderr);
    run_with(dir, &["apply"], &[], "yes\n");
    let r = run_with(dir, &["destroy"], &[], "nope\n");
    expect(&r, 1);
    assert!(r.stderr.contains("Destroy cancelled."), "{}", r.stderr);
    assert_eq!(nodes_in_state(dir), 1, "nothing destroyed");
}

#[test]
fn input_false_refuses_to_ask_and_names_the_way_around() {
    let tmp = fleet();
    let dir = tmp.path();
    let refused = |r: &Run| {
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains("`--input=false` forbids asking"), "{}", r.stderr);
        assert!(r.stderr.contains("hint: pass --auto-approve, or apply a saved plan"), "{}", r.stderr);
        assert!(!r.stderr.contains("Enter a value"), "nothing is asked:\n{}", r.stderr);
    };
    for args in [&["apply", "--input=false"][..], &["-input=false", "apply"]] {
        refused(&run_with(dir, args, &[], "yes\n"));
        assert_eq!(nodes_in_state(dir), 0, "{args:?}");
    }
    // A saved plan needs no answer.
    expect(&run(dir, &["plan", "-out", "p.plan"]), 0);
    let r = run(dir, &["apply", "-input=false", "p.plan"]);
    expect(&r, 0);
    assert_eq!(nodes_in_state(dir), 1);
    refused(&run_with(dir, &["destroy", "-input=false"], &[], "yes\n"));
    assert_eq!(nodes_in_state(dir), 1, "nothing destroyed");
}

fn sim_files(dir: &Path) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let read = |name: &str| std::fs::read(dir.join("state").join(name)).ok();
    (read("default.sim.json"), read("default.sim.json.log"))
}

/// [`run_with`] on a wide terminal: diagnostics on one line each, whatever their paths.
fn wide(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let env: Vec<(&str, &str)> = env.iter().copied().chain([("COLUMNS", "1000")]).collect();
    run_with(dir, args, &env, "")
}

#[track_caller]
fn no_panic(r: &Run) {
    assert!(!r.stderr.contains("panicked"), "a panic:\n{}", r.stderr);
}

#[test]
fn a_time_past_what_gpuplan_prints_is_refused_at_the_argument_and_nothing_is_written() {
    let tmp = fleet();
    let dir = tmp.path();
    // Today this panicked in date formatting, after writing the clock.
    let r = run(dir, &["sim", "advance", "8000years"]);
    expect(&r, 1);
    no_panic(&r);
    assert!(r.stderr.contains("invalid value '8000years' for '<DUR>'"), "{}", r.stderr);
    assert!(r.stderr.contains("longer than the 1000years gpuplan counts"), "{}", r.stderr);
    assert_eq!(sim_files(dir), (None, None), "nothing written");
    // Other durations on the command line, the same.
    let r = run(dir, &["reconcile", "--interval", "2000years"]);
    expect(&r, 1);
    assert!(r.stderr.contains("longer than the 1000years"), "{}", r.stderr);
    // A clock near the end: a move past it is refused before anything is written.
    let near_end = [("GPUPLAN_SIM_START", "9990-01-01T00:00:00Z")];
    expect(&run_with(dir, &["sim", "advance", "1h"], &near_end, ""), 0);
    let before = sim_files(dir);
    let r = wide(dir, &["sim", "advance", "20years"], &near_end);
    expect(&r, 1);
    no_panic(&r);
    assert!(r.stderr.contains("would carry it past 9999-12-31T23:59:59Z"), "{}", r.stderr);
    assert_eq!(sim_files(dir), before, "the refused move wrote nothing");
    let r = run(dir, &["plan"]);
    expect(&r, 0);
    // A start past it is refused where it is read.
    let tmp = fleet();
    let r = run_with(tmp.path(), &["plan"], &[("GPUPLAN_SIM_START", "10000-01-01T00:00:00Z")], "");
    expect(&r, 1);
    assert!(r.stderr.contains("GPUPLAN_SIM_START"), "{}", r.stderr);
    assert_eq!(sim_files(tmp.path()), (None, None));
}

/// A sim world whose clock an older gpuplan moved past 9999 (it panicked, and every later
/// command panicked too): each command now says which file holds it and how to get out.
#[test]
fn a_sim_world_with_a_clock_past_the_range_is_an_error_naming_the_file_and_the_fix() {
    let tmp = fleet();
    let dir = tmp.path();
    expect(&run(dir, &["apply", "--auto-approve"]), 0);
    let log = dir.join("state/default.sim.json.log");
    let mut text = std::fs::read_to_string(&log).unwrap_or_default();
    // What `sim advance 8000years` appended before it panicked.
    text.push_str(r#"{"seq":999,"at_ms":1796605201785,"changes":[{"op":"clock","offset_ms":252460800000000}]}"#);
    text.push('\n');
    std::fs::write(&log, &text).expect("write the log");
    for args in [&["plan"][..], &["cost"], &["sim", "advance", "1s"], &["apply", "--auto-approve"]] {
        let r = wide(dir, args, &[]);
        expect(&r, 1);
        no_panic(&r);
        assert!(r.stderr.contains("has its clock past 9999-12-31T23:59:59Z"), "{args:?}:\n{}", r.stderr);
        let sim = dir.join("state/default.sim.json");
        assert!(r.stderr.contains(&format!("move `{}`", sim.display())), "{args:?}: the fix:\n{}", r.stderr);
        assert_eq!(std::fs::read_to_string(&log).expect("log"), text, "{args:?} wrote nothing");
    }
    // The fix works.
    std::fs::remove_file(&log).expect("move the log aside");
    std::fs::remove_file(dir.join("state/default.sim.json")).expect("move the world aside");
    expect(&run(dir, &["apply", "--auto-approve"]), 0);
}

#[test]
fn a_spec_duration_past_the_range_is_a_located_error() {
    let tmp = fleet();
    let dir = tmp.path();
    let spec = format!(
        "{SPEC}\njob_template \"t\" {{\n  image       = \"nginx\"\n  gpus        = 1\n  max_runtime = \"9000years\"\n}}\n"
    );
    std::fs::write(dir.join("main.hcl"), &spec).expect("write spec");
    let line = spec.lines().position(|l| l.contains("9000years")).expect("line") + 1;
    for args in [&["validate"][..], &["plan"]] {
        let r = run(dir, args);
        expect(&r, 1);
        assert!(r.stderr.contains("`max_runtime` is too long"), "{}", r.stderr);
        assert!(r.stderr.contains(&format!("main.hcl:{line}:")), "file:line:col:\n{}", r.stderr);
        assert!(r.stderr.contains("give at most \"1000years\""), "{}", r.stderr);
    }
    assert_eq!(sim_files(dir), (None, None), "nothing written");
}

/// Extreme counts on the sim cloud's own controls: a launch larger than the zone holds is
/// refused as the cloud would refuse it, at once (it used to build every node first).
#[test]
fn a_sim_launch_beyond_the_zone_s_capacity_is_refused_and_writes_nothing() {
    let tmp = fleet();
    let dir = tmp.path();
    let r = wide(dir, &["sim", "launch", "--gpu", "A100-40GB", "--count", "4294967295"], &[]);
    expect(&r, 1);
    no_panic(&r);
    assert!(
        r.stderr.contains("insufficient on-demand capacity") && r.stderr.contains("0 of 1000 live"),
        "{}",
        r.stderr
    );
    let (_, log) = sim_files(dir);
    assert!(log.is_none_or(|l| l.is_empty()), "nothing launched");
    let r = run(dir, &["sim", "launch", "--gpu", "A100-40GB", "--count", "2"]);
    expect(&r, 0);
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
}
