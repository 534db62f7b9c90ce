//! Issue 50's look-everywhere test: secret values written into moto's Secrets Manager and
//! SSM Parameter Store (and one into gpuplan's own environment), a job that references
//! them launched on an AWS pool, then every place gpuplan writes searched for the values:
//! each file under the project and state dirs (the saved plan decompressed), every stdout
//! and stderr, the user data moto stores for the job's instance, the markdown plan and the
//! Kubernetes Job manifests. The references must be where a reader looks for them.
//! Needs moto (`scripts/test` exports `GPUPLAN_TEST_MOTO_ENDPOINT`).

use std::path::{Path, PathBuf};

use base64::Engine;

use crate::aws::cli::{lineage, pool_spec, run_env};
use gpuplan::providers::aws::AwsSettings;

const HF: &str = "hf_VALUE-from-secrets-manager-7Qz";
const WANDB: &str = "wandb-VALUE-from-parameter-store-3Kx";
const CI: &str = "ci-VALUE-from-gpuplan-env-9Lm";
const REGION: &str = "eu-west-1";

pub(crate) fn endpoint() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`"),
    }
}

/// One JSON call to moto (which reads the service from the credential scope and checks no
/// signature).
pub(crate) async fn moto(service: &str, target: &str, body: serde_json::Value) {
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential=AKIAGPUPLANTEST/20260101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0"
    );
    let resp = gpuplan::providers::http::client()
        .expect("an HTTP client")
        .post(format!("{}/", endpoint()))
        .header("content-type", "application/x-amz-json-1.1")
        .header("x-amz-target", target)
        .header("authorization", auth)
        .body(body.to_string())
        .send()
        .await
        .expect("moto answers");
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    assert!(
        status.is_success() || (text.contains("AlreadyExists") || text.contains("ResourceExists")),
        "{target}: {status} {text}"
    );
}

/// Every file under `dir`, with its text (the saved plan read as gpuplan reads it).
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("a readable dir") {
            let path = e.expect("an entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|x| x == "plan") {
                let mut text = String::new();
                let mut r = gpuplan::engine::planfile::open(&path).expect("a plan file");
                std::io::Read::read_to_string(&mut r, &mut text).expect("a plan's JSON");
                out.push((path, text));
            } else {
                let bytes = std::fs::read(&path).expect("a readable file");
                out.push((path, String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
    }
    out
}

const JOBS: &str = r#"
job_template "t" {
  image   = "ghcr.io/acme/trainer:1"
  gpus    = 1
  retries = 0
  env = {
    HF_TOKEN = secret("aws-sm:ml/hf-token")
    WANDB    = secret("ssm:/ml/wandb")
    EPOCHS   = "3"
  }
}

job "train" {
  template = job_template.t
  pool     = gpu_pool.train
}

output "job_env" {
  value = job_template.t.env
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn secret_values_appear_nowhere_gpuplan_writes_and_references_do() {
    moto(
        "secretsmanager",
        "secretsmanager.CreateSecret",
        serde_json::json!({"Name": "ml/hf-token", "SecretString": HF}),
    )
    .await;
    moto(
        "ssm",
        "AmazonSSM.PutParameter",
        serde_json::json!({"Name": "/ml/wandb", "Value": WANDB, "Type": "SecureString", "Overwrite": true}),
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), pool_spec(&endpoint(), REGION, &["eu-west-1a"], 0, 0, 0, "") + JOBS).unwrap();
    let env = [("CI_TOKEN", CI)];
    let mut seen = Vec::new();
    let mut go = |args: &[&str]| {
        let r = run_env(dir, args, Some((crate::aws::cli::ACCESS_KEY, crate::aws::cli::SECRET_KEY)), &env);
        assert!(r.code == 0 || r.code == 2, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
        seen.push((format!("{args:?}"), r.stdout.clone() + &r.stderr));
        r.stdout
    };
    let plan = go(&["plan"]);
    assert!(plan.contains("env.HF_TOKEN = (secret: aws-sm:ml/hf-token)"), "{plan}");
    assert!(plan.contains("env.WANDB    = (secret: ssm:/ml/wandb)"), "{plan}");
    let markdown = go(&["plan", "--format", "markdown"]);
    assert!(markdown.contains("(secret: aws-sm:ml/hf-token)"), "{markdown}");
    let json = go(&["plan", "--json"]);
    assert!(json.contains("\"HF_TOKEN\": \"(secret: aws-sm:ml/hf-token)\""), "{json}");
    go(&["apply", "--auto-approve"]);
    go(&["plan", "--out", "saved.plan"]);
    go(&["jobs", "status", "train", "--json"]);
    go(&["jobs", "list"]);
    go(&["output"]);
    go(&["output", "--json"]);
    let shown = go(&["show", "saved.plan"]);
    assert!(shown.is_empty() || !shown.contains(HF), "{shown}");
    go(&["show", "--json", "saved.plan"]);
    go(&["state", "show", "job_template.t"]);
    let state = std::fs::read_to_string(dir.join("state/default.json")).expect("the state");
    assert!(
        state.contains("aws-sm:ml/hf-token") && state.contains("ssm:/ml/wandb"),
        "the state keeps references: {state}"
    );
    let before_destroy = files(dir);

    // The user data moto keeps for the job's instance: the reference and its fetch step.
    let sdk = AwsSettings {
        name: "aws".into(),
        endpoint: Some(endpoint()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..Default::default()
    }
    .load()
    .await;
    let ec2 = AwsSettings::client(&sdk, REGION);
    let lineage = lineage(dir);
    let found = ec2
        .describe_instances()
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag:gpuplan:lineage").values(&lineage).build())
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag-key").values("gpuplan:job").build())
        .send()
        .await
        .expect("DescribeInstances");
    let ids: Vec<String> = found
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_id().map(String::from))
        .collect();
    assert_eq!(ids.len(), 1, "one job instance: {ids:?}");
    let attr = ec2
        .describe_instance_attribute()
        .instance_id(&ids[0])
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
        .send()
        .await
        .expect("DescribeInstanceAttribute");
    let encoded = attr.user_data().and_then(|u| u.value()).expect("user data");
    let user_data = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded).unwrap()).unwrap();
    assert!(
        user_data.contains("secretsmanager get-secret-value --region eu-west-1 --secret-id ml/hf-token"),
        "{user_data}"
    );
    assert!(
        user_data.contains("--name /ml/wandb --with-decryption") && user_data.contains("-e HF_TOKEN"),
        "{user_data}"
    );

    go(&["destroy", "--auto-approve"]);
    seen.push(("user data".into(), user_data));
    let written: Vec<(PathBuf, String)> = before_destroy.into_iter().chain(files(dir)).collect();
    let saved = written.iter().find(|(p, _)| p.ends_with("saved.plan")).expect("the saved plan was searched");
    assert!(saved.1.contains("aws-sm:ml/hf-token"), "the saved plan keeps the reference");
    for (what, text) in
        seen.iter().map(|(w, t)| (w.clone(), t)).chain(written.iter().map(|(p, t)| (p.display().to_string(), t)))
    {
        for value in [HF, WANDB, CI] {
            assert!(!text.contains(value), "a secret's value in {what}:\n{text}");
        }
    }
}

/// A Kubernetes job's manifest names its Secret and key; the value in gpuplan's
/// environment (where a careless implementation would look) is nowhere in it.
#[test]
fn job_manifests_carry_secret_key_refs_not_values() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = r#"
provider "sim" {
  region = "us-east-1"
}

gpu_pool "k" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    desired = 1
    max     = 2
  }
  kubernetes {
    kubeconfig = "kube/config"
    namespace  = "ml"
  }
}

job_template "t" {
  image = "ghcr.io/acme/trainer:1"
  gpus  = 8
  env = {
    HF_TOKEN = secret("k8s:hf-token/token")
  }
}

job "train" {
  template = job_template.t
  pool     = gpu_pool.k
}
"#;
    std::fs::write(dir.join("main.hcl"), spec).unwrap();
    let r = run_env(dir, &["jobs", "render", "train"], None, &[("HF_TOKEN", HF), ("hf-token", HF)]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("secretKeyRef:") && r.stdout.contains("name: hf-token"), "{}", r.stdout);
    assert!(r.stdout.contains("key: token"), "{}", r.stdout);
    assert!(!r.stdout.contains(HF) && !r.stderr.contains(HF), "{}\n{}", r.stdout, r.stderr);
}
