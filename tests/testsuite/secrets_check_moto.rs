//! The plan-time existence check of a job's secrets (issue 50), against moto's Secrets
//! Manager and SSM Parameter Store: a reference to a secret that does not exist is a plan
//! error at the reference's `file:line:col`, naming it; references that exist plan; the
//! value of an existing secret is never printed. Needs moto
//! (`scripts/test` exports `GPUPLAN_TEST_MOTO_ENDPOINT`).

use crate::aws::cli::{ACCESS_KEY, SECRET_KEY, pool_spec, run_env};
use crate::secrets_moto::{endpoint, moto};

const REGION: &str = "eu-west-1";
const VALUE: &str = "present-VALUE-never-read-4Rt";

/// A job reading two secrets that exist and two that do not, under `check/<run>/`.
fn jobs(run: &str) -> String {
    format!(
        r#"
job_template "t" {{
  image = "ghcr.io/acme/trainer:1"
  gpus  = 1
  env = {{
    PRESENT_SM  = secret("aws-sm:check/{run}/present")
    PRESENT_SSM = secret("ssm:/check/{run}/present")
    ABSENT_SM   = secret("aws-sm:check/{run}/absent#token")
    ABSENT_SSM  = secret("ssm:/check/{run}/absent")
  }}
}}

job "train" {{
  template = job_template.t
  pool     = gpu_pool.train
}}
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_secret_is_a_located_plan_error_and_an_existing_one_plans() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Names of this run only: moto outlives a test, and this one creates the missing ones.
    let run: String = dir.file_name().unwrap().to_string_lossy().chars().filter(char::is_ascii_alphanumeric).collect();
    let sm = serde_json::json!({"Name": format!("check/{run}/present"), "SecretString": VALUE});
    moto("secretsmanager", "secretsmanager.CreateSecret", sm).await;
    let param = serde_json::json!({"Name": format!("/check/{run}/present"), "Value": VALUE, "Type": "SecureString"});
    moto("ssm", "AmazonSSM.PutParameter", param).await;
    let spec = pool_spec(&endpoint(), REGION, &["eu-west-1a"], 0, 0, 0, "") + &jobs(&run);
    std::fs::write(dir.join("main.hcl"), &spec).unwrap();
    let line = |needle: &str| spec.lines().position(|l| l.contains(needle)).expect("in the spec") + 1;

    let plan = run_env(dir, &["plan"], Some((ACCESS_KEY, SECRET_KEY)), &[]);
    let out = format!("{}\n{}", plan.stdout, plan.stderr);
    assert_eq!(plan.code, 1, "{out}");
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    let absent_sm = format!("reads `ABSENT_SM` from `aws-sm:check/{run}/absent#token`, which does not exist");
    assert!(flat.contains(&absent_sm), "{out}");
    assert!(
        flat.contains(&format!("reads `ABSENT_SSM` from `ssm:/check/{run}/absent`, which does not exist")),
        "{out}"
    );
    assert!(out.contains(&format!("main.hcl:{}:", line("ABSENT_SM"))), "located at the reference: {out}");
    assert!(out.contains(&format!("main.hcl:{}:", line("ABSENT_SSM"))), "located at the reference: {out}");
    assert!(!out.contains("present`"), "an existing secret reported: {out}");
    assert!(!out.contains(VALUE), "a value printed: {out}");
    assert!(!dir.join("state/default.json").exists(), "a failed plan wrote no state");

    // The missing ones created: the plan goes through.
    let sm = serde_json::json!({"Name": format!("check/{run}/absent"), "SecretString": "{\"token\": \"x\"}"});
    moto("secretsmanager", "secretsmanager.CreateSecret", sm).await;
    let param = serde_json::json!({"Name": format!("/check/{run}/absent"), "Value": "x", "Type": "SecureString"});
    moto("ssm", "AmazonSSM.PutParameter", param).await;
    let plan = run_env(dir, &["plan"], Some((ACCESS_KEY, SECRET_KEY)), &[]);
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
    assert!(!plan.stdout.contains(VALUE) && !plan.stderr.contains(VALUE));
}
