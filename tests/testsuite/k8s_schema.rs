//! Every Job manifest gpuplan writes passes the real Kubernetes OpenAPI schemas
//! (`kubernetes-validate --strict`, installed into `.venv/` by `scripts/test`): what
//! `jobs render` prints and what apply submits to a cluster.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::kube_fake::{FakeApi, kubeconfig_for};

/// The Kubernetes version gpuplan's typed objects are generated for (k8s-openapi `v1_33`).
const K8S_VERSION: &str = "1.33.0";

const SPEC: &str = r#"
provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 10
    max     = 12
  }
  mix {
    on_demand_base = 1
    spot_percent   = 100
  }
  kubernetes {
    kubeconfig = "kube/config"
    namespace  = "ml-jobs"
  }
}

job_template "finetune" {
  image          = "ghcr.io/example/finetune:1.4"
  command        = ["python", "train.py"]
  env            = { WANDB_PROJECT = "ml", YES = "yes", ODD = "a: b # c", NUM = "1e3" }
  gpus           = 8
  priority       = "critical"
  preemptible    = true
  max_runtime    = "12h"
  retries        = 3
  checkpoint_uri = "s3://example-ckpt/ml/finetune"
}

gpu_pool "slices" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  mig           = "1g.10gb"
  nodes {
    min     = 0
    desired = 1
    max     = 1
  }
  kubernetes {
    kubeconfig = "kube/config"
    namespace  = "ml-jobs"
  }
}

job "notebook" {
  template = job_template.eval
  pool     = gpu_pool.slices
}

job_template "eval" {
  image = "nginx:1.27"
  gpus  = 1
}

job "sweep" {
  count    = 2
  template = job_template.finetune
  pool     = gpu_pool.train
  args     = ["--lr", "0.001"]
  replicas = 4
}

job "eval" {
  template = job_template.eval
  pool     = gpu_pool.train
}
"#;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `kubernetes-validate --strict` on a file: (passed, output).
fn validate(file: &Path) -> (bool, String) {
    let out = Command::new(root().join(".venv/bin/kubernetes-validate"))
        .args(["--strict", "-k", K8S_VERSION])
        .arg(file)
        .output()
        .expect("kubernetes-validate runs (scripts/test installs it into .venv/)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn gpuplan(dir: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplan"));
    cmd.current_dir(dir).env("NO_COLOR", "1");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GPUPLAN_")) {
        cmd.env_remove(k);
    }
    let out = cmd.args(args).output().expect("gpuplan runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fleet(api: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("main.hcl"), SPEC).expect("spec");
    std::fs::create_dir(dir.path().join("kube")).expect("mkdir");
    std::fs::write(dir.path().join("kube/config"), kubeconfig_for(api)).expect("kubeconfig");
    dir
}

#[test]
fn rendered_and_submitted_jobs_pass_the_kubernetes_schemas() {
    let api = FakeApi::start();
    let dir = fleet(&api.url);
    let d = dir.path();
    // Not in the spec folder: every `*.yaml` there is read as spec.
    let scratch = tempfile::tempdir().expect("tempdir");

    // What `jobs render` prints, every job at once (a YAML stream of 4 Jobs, one of them
    // asking for MIG slices).
    let rendered = scratch.path().join("rendered.yaml");
    let text = ["sweep", "eval", "notebook"].map(|j| gpuplan(d, &["jobs", "render", j])).join("---\n");
    assert!(text.contains("nvidia.com/mig-1g.10gb"), "{text}");
    std::fs::write(&rendered, &text).expect("write");
    let (ok, out) = validate(&rendered);
    assert!(ok, "{out}\n{text}");
    // 4 Jobs, and the headless Services of the two multi-node ones.
    assert!(text.contains("kind: Service"), "{text}");
    assert_eq!(out.matches("passed").count(), 6, "{out}");

    // What apply submits: the request bodies the API server received.
    gpuplan(d, &["apply", "--auto-approve"]);
    let posted: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|(m, p, _)| {
            m == "POST" && (p.ends_with("/namespaces/ml-jobs/jobs") || p.ends_with("/namespaces/ml-jobs/services"))
        })
        .map(|(_, _, body)| body)
        .collect();
    assert_eq!(posted.len(), 6, "one Job per job instance, one Service per multi-node one");
    for (i, body) in posted.iter().enumerate() {
        let file = scratch.path().join(format!("posted-{i}.json"));
        std::fs::write(&file, body).expect("write");
        let (ok, out) = validate(&file);
        assert!(ok, "{out}\n{body}");
    }
}

/// The check can fail: a field the schema does not know and a wrong type are refused.
#[test]
fn the_schema_check_refuses_a_broken_job() {
    let dir = tempfile::tempdir().expect("tempdir");
    let api = FakeApi::start();
    let d = fleet(&api.url);
    let good = gpuplan(d.path(), &["jobs", "render", "eval"]);
    for (what, broken) in [
        ("unknown field", good.replace("completionMode: Indexed", "completionMode: Indexed\n  gpuFlavor: fast")),
        ("wrong type", good.replace("completions: 1", "completions: one")),
    ] {
        assert_ne!(broken, good, "{what}: the fixture changed");
        let file = dir.path().join("broken.yaml");
        std::fs::write(&file, &broken).expect("write");
        let (ok, out) = validate(&file);
        assert!(!ok, "{what} passed:\n{out}\n{broken}");
    }
}
