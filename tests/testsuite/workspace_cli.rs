//! Workspaces as Terraform has them (`gpuplan workspace list|new|select|show|delete`), a
//! mistyped workspace refused before anything is written, and read-only commands that
//! leave the folder as they found it (no state, no state folder, no lock file).

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = cargo_bin_cmd!("gpuplan");
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "200").env_remove("GPUPLAN_WORKSPACE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn run(dir: &Path, args: &[&str]) -> Run {
    run_env(dir, args, &[])
}

fn ok(dir: &Path, args: &[&str]) -> Run {
    let r = run(dir, args);
    assert_eq!(r.code, 0, "gpuplan {args:?}\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

/// Every file and folder under `dir` (relative, sorted) with the state files' bytes: what
/// a command that writes nothing must leave exactly as it was.
fn listing(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.strip_prefix(dir).unwrap().display().to_string();
            if p.is_dir() {
                todo.push(p.clone());
                out.push((format!("{name}/"), None));
            } else {
                let state = name.ends_with(".json") && !name.ends_with(".sim.json");
                out.push((name, state.then(|| std::fs::read(&p).unwrap())));
            }
        }
    }
    out.sort();
    out
}

fn names(listing: &[(String, Option<Vec<u8>>)]) -> Vec<&str> {
    listing.iter().map(|(n, _)| n.as_str()).collect()
}

/// A project from `gpuplan init` (the starter fleet on the sim cloud), in a new folder.
fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    ok(tmp.path(), &["init"]);
    tmp
}

#[test]
fn a_mistyped_workspace_is_refused_with_a_did_you_mean_and_nothing_is_written() {
    let tmp = project();
    let dir = tmp.path();
    ok(dir, &["workspace", "new", "dev"]);
    ok(dir, &["workspace", "select", "default"]);
    let before = listing(dir);
    for (args, env) in [
        (&["--workspace", "dve", "plan"][..], &[][..]),
        (&["apply", "--auto-approve"], &[("GPUPLAN_WORKSPACE", "dve")]),
        (&["--workspace", "dve", "sim", "advance", "1h"], &[]),
        (&["--workspace", "dve", "state", "list"], &[]),
        (&["--workspace", "dve", "jobs", "cancel", "x"], &[]),
    ] {
        let r = run_env(dir, args, env);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("error: workspace `dve` does not exist"), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("hint: did you mean `dev`?"), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("`gpuplan workspace new dve`"), "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
    }
    let selecting = run(dir, &["workspace", "select", "dve"]);
    assert_eq!(selecting.code, 1, "{}", selecting.stderr);
    assert!(selecting.stderr.contains("did you mean `dev`?"), "{}", selecting.stderr);
    assert_eq!(listing(dir), before, "a refused workspace wrote something");

    // A selection that names a workspace since deleted says how to go back.
    std::fs::write(dir.join("state/.workspace"), "gone\n").unwrap();
    let r = run(dir, &["plan"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("`gone` does not exist (chosen by `state/.workspace`"), "{}", r.stderr);
    assert!(r.stderr.contains("gpuplan workspace select default"), "{}", r.stderr);
}

#[test]
fn workspaces_are_made_selected_listed_and_deleted_as_in_terraform() {
    let tmp = project();
    let dir = tmp.path();
    assert_eq!(ok(dir, &["workspace", "list"]).stdout, "* default\n");
    assert_eq!(ok(dir, &["workspace", "show"]).stdout, "default\n");
    let new = ok(dir, &["workspace", "new", "dev"]);
    assert!(new.stderr.contains("Switched to workspace `dev`"), "{}", new.stderr);
    assert_eq!(std::fs::read_to_string(dir.join("state/.workspace")).unwrap(), "dev\n");
    assert_eq!(ok(dir, &["workspace", "list"]).stdout, "  default\n* dev\n");
    assert_eq!(ok(dir, &["workspace", "show"]).stdout, "dev\n");
    let again = run(dir, &["workspace", "new", "dev"]);
    assert!(again.code == 1 && again.stderr.contains("workspace `dev` already exists"), "{}", again.stderr);

    // The selected workspace has its own state and its own simulated cloud.
    ok(dir, &["apply", "--auto-approve"]);
    assert!(dir.join("state/dev.json").exists() && dir.join("state/dev.sim.json").exists());
    assert!(!dir.join("state/default.json").exists(), "the default workspace was applied");
    assert_eq!(ok(dir, &["--workspace", "default", "state", "list"]).stdout, "");
    assert!(ok(dir, &["state", "list"]).stdout.contains("gpu_pool.starter"));
    // `GPUPLAN_WORKSPACE` overrides the selection, which then cannot be changed.
    let env = [("GPUPLAN_WORKSPACE", "default")];
    assert_eq!(run_env(dir, &["workspace", "show"], &env).stdout, "default\n");
    let select = run_env(dir, &["workspace", "select", "default"], &env);
    assert!(select.code == 1 && select.stderr.contains("`GPUPLAN_WORKSPACE` chooses"), "{}", select.stderr);

    let current = run(dir, &["workspace", "delete", "dev"]);
    assert!(current.code == 1 && current.stderr.contains("`dev` is the current workspace"), "{}", current.stderr);
    ok(dir, &["workspace", "select", "default"]);
    assert!(!dir.join("state/.workspace").exists(), "selecting `default` leaves no file behind");
    let not_empty = run(dir, &["workspace", "delete", "dev"]);
    assert_eq!(not_empty.code, 1, "{}", not_empty.stderr);
    assert!(not_empty.stderr.contains("still manages 3 resources with 1 live node"), "{}", not_empty.stderr);
    assert!(not_empty.stderr.contains("--force"), "{}", not_empty.stderr);
    assert!(dir.join("state/dev.json").exists(), "a refused delete removed the state");
    let forced = ok(dir, &["workspace", "delete", "dev", "--force"]);
    assert!(forced.stderr.contains("keep running and billing"), "{}", forced.stderr);
    assert!(!dir.join("state/dev.json").exists() && !dir.join("state/dev.json.backup").exists());
    let default = run(dir, &["workspace", "delete", "default"]);
    assert!(default.code == 1 && default.stderr.contains("cannot be deleted"), "{}", default.stderr);
    assert_eq!(ok(dir, &["workspace", "list"]).stdout, "* default\n");
    let bad = run(dir, &["workspace", "new", "x.sim"]);
    assert!(bad.code == 1 && bad.stderr.contains("invalid workspace name"), "{}", bad.stderr);
}

/// CI's first run in a new workspace: `init` makes the one `GPUPLAN_WORKSPACE` names.
#[test]
fn init_makes_the_workspace_it_is_given() {
    let tmp = project();
    let env = [("GPUPLAN_WORKSPACE", "ci")];
    let init = run_env(tmp.path(), &["init"], &env);
    assert_eq!(init.code, 0, "{}", init.stderr);
    assert!(init.stderr.contains("Created workspace `ci`"), "{}", init.stderr);
    assert!(tmp.path().join("state/ci.json").exists());
    assert_eq!(run_env(tmp.path(), &["plan", "--detailed-exitcode"], &env).code, 2, "a fresh fleet to create");
    // `--state` names its file itself: no workspace to check, and none to manage.
    let pinned = run(tmp.path(), &["--state", "other.json", "--workspace", "elsewhere", "state", "list"]);
    assert_eq!(pinned.code, 0, "{}", pinned.stderr);
    let refused = run(tmp.path(), &["--state", "other.json", "workspace", "list"]);
    assert!(refused.code == 1 && refused.stderr.contains("`--state` names one state file"), "{}", refused.stderr);
}

/// `plan`, `validate`, `cost`, `show`, `state list|show`, `output`, `graph`, `drift` and `jobs`
/// create nothing, before the first apply (not even `state/`) and after it (the state file
/// unchanged), and no lock file outlives any command.
#[test]
fn read_only_commands_write_nothing_and_no_lock_file_outlives_a_command() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let plan_file = tempfile::tempdir().unwrap();
    let saved = plan_file.path().join("p.plan");
    let saved = saved.to_str().unwrap();
    std::fs::write(dir.join("main.hcl"), include_str!("../../src/cli/templates/main.hcl")).unwrap();
    let reads: [&[&str]; 12] = [
        &["plan"],
        &["plan", "--out", saved],
        &["plan", "--json"],
        &["validate"],
        &["cost"],
        &["show", saved],
        &["state", "list"],
        &["graph"],
        &["drift"],
        &["jobs"],
        &["jobs", "status", "hello"],
        &["output"],
    ];
    let before = listing(dir);
    assert_eq!(names(&before), ["main.hcl"]);
    for args in reads {
        let r = run(dir, args);
        assert!(r.code == 0 || args[0] == "jobs", "{args:?}: {}", r.stderr);
        assert_eq!(listing(dir), before, "`gpuplan {}` wrote in a new project", args.join(" "));
    }

    ok(dir, &["apply", "--auto-approve"]);
    let after_apply = listing(dir);
    assert!(!names(&after_apply).iter().any(|n| n.ends_with(".lock")), "a lock file outlived apply: {after_apply:?}");
    let mut reads = reads.to_vec();
    reads.push(&["state", "show", "gpu_pool.starter"]);
    for args in reads {
        let r = run(dir, args);
        assert!(r.code == 0 || args[0] == "jobs", "{args:?}: {}", r.stderr);
        assert_eq!(listing(dir), after_apply, "`gpuplan {}` wrote", args.join(" "));
    }
}
