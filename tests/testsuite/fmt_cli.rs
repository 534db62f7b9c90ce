//! `gpuplan fmt` end to end over the real formatters (`spec::hcl::format`,
//! `spec::yaml::format`): `--check`, `--diff`, explicit paths, parse errors, refusals.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let mut cmd = cargo_bin_cmd!("gpuplan");
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "100");
    let out = cmd.args(args).output().expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const UGLY_HCL: &str = "gpu_pool \"train\" {\ngpu=\"A100-80GB\"\n    gpus_per_node    =   8\n}\n";
const UGLY_YAML: &str = "gpu_pools:\n    train:\n        gpu:     A100-80GB\n        gpus_per_node:   8\n";

fn fleet(files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        std::fs::write(tmp.path().join(name), text).expect("write");
    }
    tmp
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).expect("read")
}

#[test]
fn check_prints_a_diff_writes_nothing_and_exits_1() {
    let tmp = fleet(&[("main.hcl", UGLY_HCL), ("pools.yaml", UGLY_YAML)]);
    let r = run(tmp.path(), &["fmt", "--check"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stdout.contains("--- main.hcl") && r.stdout.contains("+++ main.hcl"), "{}", r.stdout);
    assert!(r.stdout.contains("--- pools.yaml"), "{}", r.stdout);
    assert!(r.stderr.contains("2 files are not formatted"), "{}", r.stderr);
    assert_eq!(read(tmp.path(), "main.hcl"), UGLY_HCL);
    assert_eq!(read(tmp.path(), "pools.yaml"), UGLY_YAML);
}

#[test]
fn fmt_rewrites_names_changed_files_and_is_idempotent() {
    let tmp = fleet(&[("main.hcl", UGLY_HCL), ("pools.yaml", UGLY_YAML)]);
    let r = run(tmp.path(), &["fmt"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "main.hcl\npools.yaml\n");
    assert_ne!(read(tmp.path(), "main.hcl"), UGLY_HCL);
    let again = run(tmp.path(), &["fmt", "--check"]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(again.stdout.is_empty(), "{}", again.stdout);
    let names: Vec<_> = std::fs::read_dir(tmp.path()).expect("ls").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(names.len(), 2, "temp files left behind: {names:?}");
}

/// As `terraform fmt` formats `.tfvars`: the folder's var files are formatted with its
/// spec, and a value in them survives.
#[test]
fn var_files_in_the_folder_are_formatted_too() {
    let vars = "n=3\nteam   =  \"ml\"\n";
    let auto = "spot_percent    = 50\n";
    let tmp = fleet(&[("main.hcl", UGLY_HCL), ("prod.vars.hcl", vars), ("ci.auto.vars.hcl", auto)]);
    let check = run(tmp.path(), &["fmt", "--check"]);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert!(
        check.stdout.contains("--- prod.vars.hcl") && check.stdout.contains("--- ci.auto.vars.hcl"),
        "{}",
        check.stdout
    );
    let r = run(tmp.path(), &["fmt"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "ci.auto.vars.hcl\nmain.hcl\nprod.vars.hcl\n");
    assert_eq!(read(tmp.path(), "prod.vars.hcl"), "n    = 3\nteam = \"ml\"\n");
    assert_eq!(read(tmp.path(), "ci.auto.vars.hcl"), "spot_percent = 50\n");
}

#[test]
fn fmt_diff_writes_and_shows_the_change() {
    let tmp = fleet(&[("main.hcl", UGLY_HCL)]);
    let r = run(tmp.path(), &["fmt", "--diff"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("main.hcl\n--- main.hcl"), "{}", r.stdout);
    assert_ne!(read(tmp.path(), "main.hcl"), UGLY_HCL);
}

#[test]
fn explicit_paths_limit_what_is_formatted() {
    let tmp = fleet(&[("main.hcl", UGLY_HCL), ("pools.yaml", UGLY_YAML)]);
    let r = run(tmp.path(), &["fmt", "pools.yaml"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "pools.yaml\n");
    assert_eq!(read(tmp.path(), "main.hcl"), UGLY_HCL);
}

#[test]
fn parse_errors_are_rendered_and_exit_1() {
    let tmp = fleet(&[("broken.hcl", "gpu_pool \"train\" {\n  gpu = \n")]);
    let r = run(tmp.path(), &["fmt"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("broken.hcl"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert_eq!(read(tmp.path(), "broken.hcl"), "gpu_pool \"train\" {\n  gpu = \n");
}

#[test]
fn non_spec_paths_are_refused() {
    let tmp = fleet(&[("notes.txt", "hi")]);
    let r = run(tmp.path(), &["fmt", "notes.txt"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("`notes.txt` is not a spec file") && r.stderr.contains("hint:"), "{}", r.stderr);
    let r = run(tmp.path(), &["fmt", "missing.hcl"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("`missing.hcl`"), "{}", r.stderr);
}

#[test]
fn empty_dir_is_a_warning_not_an_error() {
    let tmp = fleet(&[]);
    let r = run(tmp.path(), &["fmt", "--check"]);
    assert_eq!(r.code, 0);
    assert!(r.stderr.contains("warning: no spec files"), "{}", r.stderr);
}

#[test]
fn other_tools_yaml_in_the_folder_is_left_alone_unless_named() {
    let kubeconfig = "apiVersion:    v1\nkind:   Config\nclusters:\n    - name: prod\ncurrent-context:   prod\n";
    let tmp = fleet(&[("pools.yaml", UGLY_YAML), ("kubeconfig.yaml", kubeconfig)]);
    let r = run(tmp.path(), &["fmt"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "pools.yaml\n");
    assert!(r.stderr.contains("warning: skipped `kubeconfig.yaml`"), "{}", r.stderr);
    assert_eq!(read(tmp.path(), "kubeconfig.yaml"), kubeconfig);
    // Named on the command line, it is formatted as asked.
    let r = run(tmp.path(), &["fmt", "kubeconfig.yaml"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "kubeconfig.yaml\n"), "{}", r.stderr);
}
