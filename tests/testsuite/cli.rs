//! The binary as users and scripts see it: subcommands, exit codes, where messages go.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

/// `gpuplan` with plain, fixed-width output and no workspace from the caller's shell.
fn gpuplan(dir: &Path) -> assert_cmd::Command {
    let mut cmd = cargo_bin_cmd!("gpuplan");
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "100").env_remove("GPUPLAN_WORKSPACE");
    cmd
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let out = gpuplan(dir).args(args).output().expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const COMMANDS: [&str; 16] = [
    "init",
    "validate",
    "fmt",
    "plan",
    "show",
    "completions",
    "apply",
    "destroy",
    "drift",
    "reconcile",
    "graph",
    "cost",
    "offers",
    "state",
    "jobs",
    "sim",
];

#[test]
fn help_lists_every_subcommand_and_exits_0() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let r = run(tmp.path(), &["--help"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let listed: Vec<&str> = r.stdout.lines().filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next()).collect();
    for cmd in COMMANDS {
        assert!(listed.contains(&cmd), "`{cmd}` missing from --help:\n{}", r.stdout);
    }
    for flag in ["-C <DIR>", "--state <PATH>", "--workspace <NAME>", "--no-color", "--lock-timeout <DUR>"] {
        assert!(r.stdout.contains(flag), "`{flag}` missing from --help:\n{}", r.stdout);
    }
    assert_eq!(run(tmp.path(), &["--version"]).code, 0);
    assert_eq!(run(tmp.path(), &["plan", "--help"]).code, 0);
}

#[test]
fn usage_errors_exit_1() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for args in [&["frobnicate"][..], &["plan", "--no-such-flag"], &["graph", "--format", "png"], &[]] {
        let r = run(tmp.path(), args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(!r.stderr.is_empty());
    }
    std::fs::write(tmp.path().join("main.hcl"), "provider \"sim\" {}\n").unwrap();
    let r = run(tmp.path(), &["plan", "--target", "pool.nope"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("not a resource address"), "{}", r.stderr);
}

#[test]
fn validate_on_an_empty_dir_points_at_init() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let r = run(tmp.path(), &["validate"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no spec files"), "{}", r.stderr);
    assert!(r.stderr.contains("gpuplan init"), "{}", r.stderr);
    assert!(r.stderr.contains("error: 1 problem"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "diagnostics belong on stderr: {}", r.stdout);
}

#[test]
fn validate_json_goes_to_stdout() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fleet = tmp.path().join("fleet");
    std::fs::create_dir(&fleet).expect("mkdir");
    // `-C` after the command works too: global flags go anywhere.
    let r = run(tmp.path(), &["validate", "--json", "-C", "fleet"]);
    assert_eq!(r.code, 1);
    let json: serde_json::Value = serde_json::from_str(&r.stdout).expect("stdout is JSON");
    assert_eq!(json["valid"], false);
    assert_eq!(json["error_count"], 1);
    assert_eq!(json["diagnostics"][0]["code"], "gpuplan::spec::no_files");
    assert!(r.stderr.is_empty(), "{}", r.stderr);
}

#[test]
fn malformed_var_is_rejected_with_a_hint() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let r = run(tmp.path(), &["validate", "--var", "team"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("error: invalid `--var team`: expected `NAME=VALUE`"), "{}", r.stderr);
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);
    let r = run(tmp.path(), &["validate", "--var", "team=ml", "--var", "=x"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("not a variable name"), "{}", r.stderr);
}

#[test]
fn missing_working_dir_is_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let r = run(tmp.path(), &["-C", "no/such/dir", "validate"]);
    assert_eq!(r.code, 1);
    let missing = tmp.path().join("no/such/dir");
    assert!(r.stderr.contains(&format!("`{}` does not exist", missing.display())), "{}", r.stderr);
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);
    std::fs::write(tmp.path().join("file"), "").expect("write");
    let r = run(tmp.path(), &["-C", "file", "validate"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("is not a directory"), "{}", r.stderr);
}

#[test]
fn bad_workspace_and_lock_timeout_are_errors() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let r = run(tmp.path(), &["--workspace", "../x", "validate"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("invalid workspace name `../x`"), "{}", r.stderr);
    let r = run(tmp.path(), &["--lock-timeout", "soon", "validate"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("--lock-timeout"), "{}", r.stderr);
}

/// As Terraform does: a text plan with changes that was not saved says that `apply` plans
/// again; a saved one, a plan without changes and a JSON plan do not.
#[test]
fn an_unsaved_plan_with_changes_says_apply_plans_again() {
    let note = "Note: you didn't use --out to save this plan";
    let tmp = tempfile::tempdir().expect("tempdir");
    assert_eq!(run(tmp.path(), &["init"]).code, 0);
    let unsaved = run(tmp.path(), &["plan"]);
    assert_eq!(unsaved.code, 0, "{}", unsaved.stderr);
    assert!(unsaved.stderr.contains(note), "{}", unsaved.stderr);
    assert!(!unsaved.stdout.contains(note), "stdout stays the plan: {}", unsaved.stdout);
    let saved = run(tmp.path(), &["plan", "--out", "p.plan"]);
    assert!(!saved.stderr.contains(note) && saved.stderr.contains("Saved the plan to"), "{}", saved.stderr);
    assert!(!run(tmp.path(), &["plan", "--json"]).stderr.contains(note));
    assert_eq!(run(tmp.path(), &["apply", "p.plan"]).code, 0);
    let settled = run(tmp.path(), &["plan"]);
    assert!(!settled.stderr.contains(note), "nothing to apply: {}", settled.stderr);
}

#[test]
fn show_renders_a_saved_plan_as_plan_printed_it_without_state_or_spec() {
    let tmp = tempfile::tempdir().expect("tempdir");
    assert_eq!(run(tmp.path(), &["init"]).code, 0);
    let text = run(tmp.path(), &["plan", "--out", "pr.plan"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let json = run(tmp.path(), &["plan", "--json"]);
    let md = run(tmp.path(), &["plan", "--format", "markdown"]);
    // A reviewer's machine has only the artifact: no spec, no state, no sim cloud.
    let review = tempfile::tempdir().expect("tempdir");
    std::fs::copy(tmp.path().join("pr.plan"), review.path().join("pr.plan")).unwrap();
    let shown = run(review.path(), &["show", "pr.plan"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    // The plan as printed, after the variables it was made with.
    let (head, plan) = shown.stdout.split_once("\n\n").unwrap();
    // When it was made, and how long ago (`show` ran within the minute).
    let made = head.strip_prefix("Saved plan of workspace `default`, made ").unwrap_or_else(|| panic!("{head}"));
    let (at, rest) = made.split_once(' ').unwrap();
    humantime::parse_rfc3339(at).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert!(rest.starts_with("(less than a minute ago) with these variables:\n"), "{head}");
    assert!(head.contains("\n  nodes         = 1  (default)"), "{head}");
    assert_eq!(plan, text.stdout);
    // Each plan made before the first apply has a lineage of its own (the state begins
    // with the applied plan's): the plans are the same but for it, and the saved plan's
    // `variables`.
    let without_lineage = |text: &str| {
        let mut doc: serde_json::Value = serde_json::from_str(text).expect("JSON");
        doc["lineage"] = serde_json::Value::Null;
        doc
    };
    let mut shown_json = without_lineage(&run(review.path(), &["show", "pr.plan", "--json"]).stdout);
    let vars = shown_json.as_object_mut().unwrap().remove("variables").expect("a saved plan's variables");
    let stamp = shown_json.as_object_mut().unwrap().remove("timestamp").expect("when the saved plan was made");
    assert_eq!(stamp.as_str(), Some(at), "the JSON's timestamp is the text's");
    assert_eq!(vars["nodes"], serde_json::json!({"from": "default", "value": 1}), "{vars:#}");
    assert_eq!(shown_json, without_lineage(&json.stdout));
    let shown_md = run(review.path(), &["show", "--format", "markdown", "pr.plan"]).stdout;
    let vars_md = shown_md.strip_prefix(&md.stdout).unwrap_or_else(|| panic!("{shown_md}"));
    let summary =
        format!("\n<details><summary>Variables of this saved plan (workspace <code>default</code>, made {at})");
    assert!(vars_md.starts_with(&summary), "{vars_md}");
    assert_eq!(std::fs::read_dir(review.path()).unwrap().count(), 1, "show writes nothing");

    std::fs::write(review.path().join("bad.plan"), b"not a plan").unwrap();
    let bad = run(review.path(), &["show", "bad.plan"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("bad.plan"), "{}", bad.stderr);
}

#[test]
fn completions_cover_every_subcommand_for_bash_zsh_and_fish() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for shell in ["bash", "zsh", "fish"] {
        let r = run(tmp.path(), &["completions", shell]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        for cmd in COMMANDS {
            assert!(r.stdout.contains(cmd), "{shell}: `{cmd}` missing");
        }
        assert!(r.stdout.contains("lock-timeout") && r.stdout.contains("migrate-state"), "{shell}");
    }
    let bash = run(tmp.path(), &["completions", "bash"]).stdout;
    assert!(bash.contains("complete -F _gpuplan"), "a bash completion function");
    let out = std::process::Command::new("bash").args(["-n", "-c", &bash]).output().unwrap();
    assert!(out.status.success(), "bash parses it: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(run(tmp.path(), &["completions", "powershell"]).code, 1, "unknown shells are usage errors");
}

/// A plan that cannot be written to stdout (a full disk under `> plan.txt`) fails the
/// command with exit 1 and says why; a reader that stops reading (`| head`) is no error.
#[test]
fn a_plan_that_cannot_reach_stdout_fails_but_a_closed_pipe_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("main.hcl"),
        "provider \"sim\" {\n  region = \"us-east-1\"\n}\n\ngpu_pool \"train\" {\n  provider = \"sim\"\n  gpu = \"L4\"\n  gpus_per_node = 1\n  nodes {\n    min = 0\n    desired = 1\n    max = 2\n  }\n}\n",
    )
    .unwrap();
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full (Linux)");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .env_remove("GPUPLAN_WORKSPACE")
        .arg("plan")
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("could not be written to stdout") && stderr.contains("No space left"), "{stderr}");

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .env_remove("GPUPLAN_WORKSPACE")
        .arg("plan")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone before the plan is written
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}
