//! The secrets step run for real: the job script on a fake node whose `aws` answers from
//! its own "role" and whose `docker` records the environment the container got. The
//! values reach the container and never the script, its log or the console.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use super::super::job_script;
use super::*;

const HF: &str = "hf_node-read-VALUE-1";
const WANDB: &str = "wandb-node-read-VALUE-2";
const CI: &str = "ci-send-time-VALUE-3";

/// A fake node: `aws` answers each read (a JSON secret for `ml/creds`), `docker run`
/// writes the container's secret variables to `$ROOT/container`.
fn node() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let stubs = [
        (
            "aws",
            format!(
                "echo \"aws $*\" >> \"$GPUPLAN_ROOT/calls\"\ncase \"$*\" in\n  *ml/creds*) echo '{{\"token\": \"{HF}\"}}' ;;\n  *ssm*get-parameter*/ml/wandb*) echo '{WANDB}' ;;\n  *) echo 'not found' >&2; exit 254 ;;\nesac"
            ),
        ),
        (
            "docker",
            "case \"$1\" in\n  info) echo 'Runtimes: nvidia runc' ;;\n  run) for v in HF_TOKEN WANDB CI_TOKEN; do echo \"$v=${!v:-}\"; done > \"$GPUPLAN_ROOT/container\" ;;\nesac"
                .to_string(),
        ),
        // Two GPUs, as `nvidia-smi -L` lists them: the readiness check passes.
        ("nvidia-smi", "printf 'GPU 0: NVIDIA A100 (UUID: GPU-0)\\nGPU 1: NVIDIA A100 (UUID: GPU-1)\\n'".to_string()),
    ];
    for (name, body) in stubs {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

fn run(root: &Path, script: &str) -> (i32, String) {
    let file = root.join("job.sh");
    // The job log is the node's `/var/log`; here, a file of the fake root.
    std::fs::write(&file, script.replace(crate::providers::userdata::JOB_LOG, &root.join("log").to_string_lossy()))
        .unwrap();
    let out = Command::new("bash")
        .arg(&file)
        .env("PATH", format!("{}:/usr/bin:/bin", root.join("bin").display()))
        .env("GPUPLAN_ROOT", root)
        .env("GPUPLAN_CONSOLE", root.join("console"))
        .output()
        .expect("bash runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn req(secrets: &[(&str, &str)], keep_node: bool) -> LaunchJob {
    let secrets: BTreeMap<String, SecretRef> =
        secrets.iter().map(|(k, r)| (k.to_string(), SecretRef::parse(r).expect("a reference"))).collect();
    LaunchJob { secrets, keep_node, region: "eu-west-1".into(), ..super::super::tests::req() }
}

#[test]
fn a_node_reads_its_secrets_with_its_role_and_the_container_gets_them_by_name() {
    let node = node();
    let r = req(&[("HF_TOKEN", "aws-sm:ml/creds#token"), ("WANDB", "ssm:/ml/wandb")], true);
    let script = job_script(&r).expect("a script");
    assert!(!script.contains(HF) && !script.contains(WANDB), "{script}");
    assert!(script.contains("-e HF_TOKEN") && script.contains("-e WANDB"), "{script}");
    let (code, stdout) = run(node.path(), &script);
    assert_eq!(code, 0, "{stdout}");
    let container = std::fs::read_to_string(node.path().join("container")).expect("docker ran");
    assert!(container.contains(&format!("HF_TOKEN={HF}")), "{container}");
    assert!(container.contains(&format!("WANDB={WANDB}")), "{container}");
    let calls = std::fs::read_to_string(node.path().join("calls")).unwrap();
    assert!(calls.contains("secretsmanager get-secret-value --region eu-west-1 --secret-id ml/creds"), "{calls}");
    assert!(calls.contains("ssm get-parameter --region eu-west-1 --name /ml/wandb --with-decryption"), "{calls}");
    let log = std::fs::read_to_string(node.path().join("log")).unwrap_or_default();
    let console = std::fs::read_to_string(node.path().join("console")).unwrap_or_default();
    for seen in [&stdout, &log, &console] {
        assert!(!seen.contains(HF) && !seen.contains(WANDB), "a value was printed: {seen}");
    }
}

#[test]
fn a_secret_the_node_cannot_read_ends_the_job_naming_the_reference() {
    let node = node();
    let script = job_script(&req(&[("HF_TOKEN", "aws-sm:ml/missing")], true)).expect("a script");
    let (code, _) = run(node.path(), &script);
    assert_eq!(code, crate::providers::userdata::NOT_RUNNABLE);
    let console = std::fs::read_to_string(node.path().join("console")).unwrap_or_default();
    assert!(console.contains("secret HF_TOKEN (aws-sm:ml/missing) could not be read"), "{console}");
    assert!(!node.path().join("container").exists(), "the job did not start");
}

#[test]
fn env_secrets_go_only_to_a_warm_node_at_send_time_never_into_user_data() {
    let env = |name: &str| (name == "CI_TOKEN").then(|| CI.to_string());
    let warm = req(&[("CI_TOKEN", "env:CI_TOKEN")], true);
    let (lines, args) = steps_with(&warm, &env).expect("a warm node takes it");
    assert!(lines.contains(CI) && args == ["-e CI_TOKEN"], "{lines}");
    let unset = steps_with(&warm, &|_: &str| None).expect_err("unset");
    assert_eq!(unset.code, "SecretNotSet");
    assert!(unset.message.contains("`env:CI_TOKEN`") && !unset.message.contains(CI), "{}", unset.message);
    let vm = req(&[("CI_TOKEN", "env:CI_TOKEN")], false);
    let e = steps_with(&vm, &env).expect_err("a job node's user data would carry it");
    assert_eq!(e.code, "SecretNotDeliverable");
    assert!(e.message.contains("user data"), "{}", e.message);
    let k8s = steps_with(&req(&[("X", "k8s:s/k")], true), &env).expect_err("not on a VM");
    assert_eq!(k8s.code, "SecretNotDeliverable");
}
