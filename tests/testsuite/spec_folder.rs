//! What the spec folder holds besides specs: YAML files of other tools (a kubeconfig, a
//! CI workflow) are skipped and named once; near misses of gpuplan's keys are still read.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env_remove("GPUPLAN_WORKSPACE")
        .args(args)
        .output()
        .expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const FLEET: &str = "\
providers:
  sim: {region: us-east-1}
gpu_pools:
  train:
    provider: sim
    gpu: L4
    gpus_per_node: 1
    nodes: {min: 0, desired: 1, max: 1}
";

const KUBECONFIG: &str = "\
apiVersion: v1
kind: Config
clusters:
  - name: prod
    cluster: {server: 'https://10.0.0.1'}
contexts:
  - name: prod
    context: {cluster: prod, user: admin}
current-context: prod
users:
  - name: admin
    user: {token: abc}
";

const WORKFLOW: &str = "\
name: plan
on:
  pull_request:
jobs:
  plan:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: gpuplan plan --format markdown
";

const SKIPPED: &str = "warning: skipped `ci.yml`, `kubeconfig.yaml`: their top-level keys are not gpuplan's, so they are not read as specs";

#[test]
fn a_kubeconfig_and_a_ci_workflow_beside_the_specs_are_skipped_and_named_once() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("fleet.yaml"), FLEET).unwrap();
    std::fs::write(tmp.path().join("kubeconfig.yaml"), KUBECONFIG).unwrap();
    std::fs::write(tmp.path().join("ci.yml"), WORKFLOW).unwrap();
    for args in [&["validate"][..], &["plan"][..]] {
        let r = run(tmp.path(), args);
        assert_eq!(r.code, 0, "{args:?}:\n{}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(SKIPPED), "{args:?}: {}", r.stderr);
        assert_eq!(r.stderr.matches("kubeconfig.yaml").count(), 1, "{args:?} names it once: {}", r.stderr);
        assert_eq!(r.stderr.matches("ci.yml").count(), 1, "{args:?} names it once: {}", r.stderr);
        assert!(!r.stderr.contains("apiVersion"), "{}", r.stderr);
    }
    let plan = run(tmp.path(), &["plan"]);
    assert!(plan.stdout.contains("gpu_pool.train"), "{}", plan.stdout);
    // The files are left as they are.
    assert_eq!(std::fs::read_to_string(tmp.path().join("kubeconfig.yaml")).unwrap(), KUBECONFIG);
}

#[test]
fn a_near_miss_of_a_gpuplan_key_is_still_read_with_a_did_you_mean() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("fleet.yaml"), "providers:\n  sim: {region: us-east-1}\n").unwrap();
    std::fs::write(
        tmp.path().join("pools.yaml"),
        FLEET.replace("gpu_pools:", "gpu_pool:").replace("providers:\n  sim: {region: us-east-1}\n", ""),
    )
    .unwrap();
    let r = run(tmp.path(), &["validate"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("unknown top-level key `gpu_pool`"), "{}", r.stderr);
    assert!(r.stderr.contains("did you mean `gpu_pools`?"), "{}", r.stderr);
    assert!(!r.stderr.contains("skipped"), "{}", r.stderr);
}

#[test]
fn a_folder_of_other_tools_files_only_has_no_spec() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("kubeconfig.yaml"), KUBECONFIG).unwrap();
    let r = run(tmp.path(), &["validate"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("every YAML file there belongs to another tool"), "{}", r.stderr);
}
