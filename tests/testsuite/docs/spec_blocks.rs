//! Every spec shown in the docs is one gpuplan accepts. A block is checked when its fence
//! says so: ```` ```hcl spec ```` (a `main.hcl`), ```` ```yaml spec ```` (a `main.yaml`) or
//! ```` ```hcl policy ```` (a file of `policies/`, beside a one-pool sim spec). Each runs
//! `gpuplan validate` in a folder of its own and must exit 0 without errors.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

use super::{fences, markdown_files, read, rel};

/// The spec a policy block is validated beside.
const POLICY_HOST: &str = r#"
provider "sim" {}

gpu_pool "train" {
  provider      = "sim"
  region        = "us-east-1"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}
"#;

fn validate(dir: &Path) -> (i32, String) {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env_remove("GPUPLAN_WORKSPACE")
        .arg("validate")
        .output()
        .expect("gpuplan runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().expect("exit code"), text)
}

#[test]
fn every_spec_block_in_the_docs_validates() {
    let mut checked = 0;
    let mut failed = Vec::new();
    for page in markdown_files() {
        for f in fences(&read(&page)) {
            let (file, host) = match f.info.as_str() {
                "hcl spec" => ("main.hcl", None),
                "yaml spec" => ("main.yaml", None),
                "hcl policy" => ("policies/docs.hcl", Some(POLICY_HOST)),
                _ => continue,
            };
            let dir = tempfile::tempdir().expect("temp dir");
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &f.body).unwrap();
            if let Some(host) = host {
                std::fs::write(dir.path().join("main.hcl"), host).unwrap();
            }
            checked += 1;
            let (code, text) = validate(dir.path());
            if code != 0 || text.contains("Error") || text.contains("× ") {
                failed.push(format!("{}:{}: ```{} block (exit {code}):\n{text}", rel(&page), f.line, f.info));
            }
        }
    }
    assert!(checked >= 10, "only {checked} spec blocks found in the docs: are they still marked ```hcl spec?");
    assert!(failed.is_empty(), "spec blocks that do not validate:\n\n{}", failed.join("\n"));
}
