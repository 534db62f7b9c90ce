//! Encryption at rest with the `aws_kms` key provider, against moto's KMS, EC2 and S3
//! (started by `scripts/test`): an apply on AWS with the state in S3 leaves no instance
//! id or tag value in the state object, its backup or a saved plan, and `plan`, `show` and
//! `output` still read them.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::aws::cli::{pool_spec, run_env};
use crate::state_s3::{bucket, endpoint, object};

const TAG: &str = "vision-team-9c1d";

/// A new symmetric key in moto's KMS: its id.
fn kms_key() -> String {
    let host = endpoint().trim_start_matches("http://").trim_end_matches('/').to_string();
    let body = br#"{"Description":"gpuplan state","KeyUsage":"ENCRYPT_DECRYPT"}"#;
    let mut s = TcpStream::connect(&host).expect("moto answers");
    let head = format!(
        "POST / HTTP/1.0\r\nHost: {host}\r\nX-Amz-Target: TrentService.CreateKey\r\nContent-Type: application/x-amz-json-1.1\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/kms/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
    let doc: serde_json::Value = serde_json::from_slice(&out[split + 4..]).expect("CreateKey's JSON");
    doc["KeyMetadata"]["KeyId"].as_str().expect("a key id").to_string()
}

fn spec(bucket: &str, key_id: &str, desired: u32) -> String {
    let endpoint = endpoint();
    let pool = pool_spec(&endpoint, "us-east-1", &["us-east-1a"], desired, desired, 0, "")
        .replace("labels = { team = \"ml\" }", &format!("labels = {{ team = \"{TAG}\" }}"));
    format!(
        r#"gpuplan {{
  backend "s3" {{
    bucket   = "{bucket}"
    key      = "fleets/prod.json"
    region   = "us-east-1"
    endpoint = "{endpoint}"
  }}
  encryption {{
    key_provider "aws_kms" {{
      key_id   = "{key_id}"
      region   = "us-east-1"
      endpoint = "{endpoint}"
    }}
  }}
}}

output "nodes" {{
  value = gpu_pool.train.nodes.desired
}}

{pool}"#
    )
}

#[test]
fn an_apply_on_aws_with_kms_leaves_no_id_or_tag_in_the_state_object_backup_or_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (b, key) = (bucket(), kms_key());
    let go = |args: &[&str]| {
        let r = run_env(dir, args, Some(("testing", "testing")), &[]);
        assert!(r.code == 0, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
        r
    };
    std::fs::write(dir.join("main.hcl"), spec(&b, &key, 1)).unwrap();
    go(&["apply", "--auto-approve"]);
    std::fs::write(dir.join("main.hcl"), spec(&b, &key, 2)).unwrap();
    go(&["apply", "--auto-approve"]);
    let plan = go(&["plan", "--out", "saved.plan", "--detailed-exitcode"]);
    assert!(plan.stdout.contains("No changes"), "{}", plan.stdout);

    let pulled: serde_json::Value = serde_json::from_str(&go(&["state", "pull"]).stdout).unwrap();
    let ids: Vec<String> = pulled["resources"]["gpu_pool.train"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "{pulled}");
    assert!(ids.iter().all(|id| id.starts_with("i-")), "{ids:?}");

    let mut stored = vec![
        ("the state object".to_string(), object(&b, "fleets/prod.json").expect("the state object")),
        ("its backup".to_string(), object(&b, "fleets/prod.json.backup").expect("the backup object")),
        ("saved.plan".to_string(), std::fs::read(dir.join("saved.plan")).unwrap()),
    ];
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_file() && path.file_name().is_some_and(|n| n != "main.hcl") {
            stored.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    for (what, bytes) in &stored {
        let text = String::from_utf8_lossy(bytes);
        if what == "the state object" || what == "its backup" || what == "saved.plan" {
            assert!(text.starts_with(r#"{"encoding":"gzip+aes-256-gcm+base64","#), "{what}: {text}");
            assert!(text.contains(r#""key_provider":{"aws_kms":{"key_id":""#), "{what}: {text}");
        }
        for secret in ids.iter().map(String::as_str).chain([TAG]) {
            assert!(!text.contains(secret), "`{secret}` in {what}:\n{text}");
        }
    }
    let shown = go(&["show", "saved.plan"]);
    assert!(shown.stdout.contains("No changes"), "{}", shown.stdout);
    assert_eq!(go(&["output", "nodes"]).stdout.trim(), "2");
    go(&["destroy", "--auto-approve"]);
}
