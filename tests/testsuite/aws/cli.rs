#![allow(dead_code)]

//! Running the gpuplan binary against an EC2 endpoint with dummy credentials.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Dummy credentials and an isolated AWS configuration: the tests never read the
/// developer's `~/.aws` nor instance metadata.
pub const ACCESS_KEY: &str = "AKIAGPUPLANTEST";
pub const SECRET_KEY: &str = "gpuplan-test-secret";

pub fn run(dir: &Path, args: &[&str]) -> Run {
    run_as(dir, args, Some((ACCESS_KEY, SECRET_KEY)))
}

/// [`run`] with these credentials in the environment, or none anywhere (`None`).
pub fn run_as(dir: &Path, args: &[&str], credentials: Option<(&str, &str)>) -> Run {
    run_env(dir, args, credentials, &[])
}

/// [`run_as`] with more environment variables (e.g. the sim clock's start).
pub fn run_env(dir: &Path, args: &[&str], credentials: Option<(&str, &str)>, env: &[(&str, &str)]) -> Run {
    let mut cmd = cargo_bin_cmd!("gpuplan");
    cmd.envs(env.iter().copied());
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env_remove("GPUPLAN_WORKSPACE")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_ENDPOINT_URL_EC2")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_WEB_IDENTITY_TOKEN_FILE")
        .env_remove("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        .env_remove("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-aws-credentials"));
    if let Some((id, secret)) = credentials {
        cmd.env("AWS_ACCESS_KEY_ID", id).env("AWS_SECRET_ACCESS_KEY", secret);
    }
    let out = cmd.args(args).output().expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A spec with one aws pool of `g5.xlarge` (1 × A10G) nodes.
pub fn pool_spec(
    endpoint: &str,
    region: &str,
    zones: &[&str],
    desired: u32,
    base: u32,
    spot: u32,
    extra: &str,
) -> String {
    let zones: Vec<String> = zones.iter().map(|z| format!("\"{z}\"")).collect();
    format!(
        r#"provider "aws" {{
  region   = "{region}"
  endpoint = "{endpoint}"
  image    = "ami-0123456789abcdef0"
{extra}}}

gpu_pool "train" {{
  provider       = "aws"
  region         = "{region}"
  zones          = [{zones}]
  gpu            = "A10G"
  gpus_per_node  = 1
  instance_types = ["g5.xlarge"]
  nodes {{
    min     = 0
    desired = {desired}
    max     = 20
  }}
  mix {{
    on_demand_base = {base}
    spot_percent   = {spot}
    fallback       = "on_demand"
  }}
  labels = {{ team = "ml" }}
}}
"#,
        zones = zones.join(", ")
    )
}

/// The state's lineage.
pub fn lineage(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("state/default.json")).expect("state file");
    let v: serde_json::Value = crate::state_plain::plain(serde_json::from_str(&text).expect("state JSON"));
    v["lineage"].as_str().expect("lineage").to_string()
}
