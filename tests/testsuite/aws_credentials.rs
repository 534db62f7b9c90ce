//! One AWS credential chain for the `aws` provider (EC2) and the s3 state backend, source
//! by source, through `gpuplan check` against moto (STS, EC2, S3; started by
//! `scripts/test`) and in-test fakes of the instance-metadata and container endpoints.
//! Each case removes every `AWS_*` variable of the test's own environment first, so only
//! the source under test can answer; `check` must pass for both and name that source.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

fn moto() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e.trim_end_matches('/').to_string(),
        _ => panic!("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`, which starts moto"),
    }
}

/// A raw request to moto (bucket creation and its own API need no signature): the body.
fn moto_http(method: &str, path: &str) -> (u16, String) {
    let host = moto().trim_start_matches("http://").to_string();
    let mut s = std::net::TcpStream::connect(&host).expect("moto answers");
    write!(s, "{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP response");
    (head.split_whitespace().nth(1).unwrap().parse().unwrap(), body.to_string())
}

fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

/// A spec folder whose state is in a new moto bucket and whose provider is moto's EC2.
fn fleet(backend_extra: &str, provider_extra: &str) -> tempfile::TempDir {
    let bucket = unique("gp-creds");
    assert_eq!(moto_http("PUT", &format!("/{bucket}")).0, 200, "create bucket {bucket}");
    let dir = tempfile::tempdir().unwrap();
    let m = moto();
    let spec = format!(
        "gpuplan {{\n  backend \"s3\" {{\n    bucket   = \"{bucket}\"\n    key      = \"fleet.json\"\n    region   = \"us-east-1\"\n    endpoint = \"{m}\"\n{backend_extra}  }}\n}}\n\nprovider \"aws\" {{\n  region   = \"us-east-1\"\n  endpoint = \"{m}\"\n{provider_extra}}}\n"
    );
    std::fs::write(dir.path().join("main.hcl"), spec).unwrap();
    dir
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `gpuplan check` with no AWS variable of the test's environment, STS at moto and
/// instance metadata off, plus `env`.
fn check(dir: &Path, env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplan"));
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "200").env("HOME", dir);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_") || k.starts_with("GPUPLAN_WORKSPACE")) {
        cmd.env_remove(k);
    }
    cmd.env("AWS_CONFIG_FILE", dir.join("no-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        .env("AWS_ENDPOINT_URL_STS", moto())
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.arg("check").output().expect("gpuplan runs");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    for secret in ["wJalrXUtnFEMI", "fake-imds-secret", "fake-ecs-secret", "fake-ecs-token", "web-identity-jwt"] {
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret), "`{secret}` printed: {}", run.stdout);
    }
    run
}

/// Both the backend's and the provider's lines passed and name `source`.
fn both_from(r: &Run, source: &str) {
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let lines: Vec<&str> =
        r.stdout.lines().filter(|l| l.contains("state backend: s3://") || l.contains("provider \"aws\"")).collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    for l in lines {
        assert!(l.starts_with("ok") && l.ends_with(&format!("credentials from {source}")), "{l}\n{}", r.stdout);
    }
}

#[test]
fn environment_keys_answer_for_ec2_and_the_backend() {
    let dir = fleet("", "");
    let r = check(dir.path(), &[("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI")]);
    both_from(&r, "the environment (AWS_ACCESS_KEY_ID)");
}

/// A profile with `role_arn` and `source_profile`, as teams keep roles per environment:
/// the source profile's keys are exchanged with moto's STS for the role's.
#[test]
fn an_assume_role_profile_answers_for_ec2_and_the_backend() {
    let dir = fleet("", "");
    let session = unique("gpuplan-role");
    let config = format!(
        "[profile ci]\nrole_arn = arn:aws:iam::123456789012:role/gpuplan-ci\nsource_profile = base\nrole_session_name = {session}\nregion = us-east-1\n\n[profile base]\nregion = us-east-1\n"
    );
    std::fs::write(dir.path().join("config"), config).unwrap();
    std::fs::write(
        dir.path().join("credentials"),
        "[base]\naws_access_key_id = testing\naws_secret_access_key = wJalrXUtnFEMI\n",
    )
    .unwrap();
    let files = [
        ("AWS_CONFIG_FILE", dir.path().join("config").display().to_string()),
        ("AWS_SHARED_CREDENTIALS_FILE", dir.path().join("credentials").display().to_string()),
    ];
    let mut env: Vec<(&str, &str)> = files.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("AWS_PROFILE", "ci"));
    // aws-config names credentials `AssumeRoleProvider` only when they came from STS's
    // answer, so the source line proves moto's STS was asked.
    both_from(&check(dir.path(), &env), "profile `ci` (role_arn, STS AssumeRole)");

    // The same profile named in the blocks (Terraform's `profile`), without AWS_PROFILE.
    let named = fleet("    profile  = \"ci\"\n", "  profile  = \"ci\"\n");
    std::fs::copy(dir.path().join("config"), named.path().join("config")).unwrap();
    std::fs::copy(dir.path().join("credentials"), named.path().join("credentials")).unwrap();
    let files = [
        ("AWS_CONFIG_FILE", named.path().join("config").display().to_string()),
        ("AWS_SHARED_CREDENTIALS_FILE", named.path().join("credentials").display().to_string()),
    ];
    let env: Vec<(&str, &str)> = files.iter().map(|(k, v)| (*k, v.as_str())).collect();
    both_from(&check(named.path(), &env), "profile `ci` (role_arn, STS AssumeRole)");
}

/// CI's OIDC: a token file and a role, exchanged with STS AssumeRoleWithWebIdentity.
#[test]
fn a_web_identity_token_answers_for_ec2_and_the_backend() {
    let dir = fleet("", "");
    let session = unique("gpuplan-oidc");
    let token = dir.path().join("token");
    std::fs::write(&token, "web-identity-jwt.payload.signature").unwrap();
    let token = token.display().to_string();
    let env = [
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.as_str()),
        ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/gpuplan-oidc"),
        ("AWS_ROLE_SESSION_NAME", session.as_str()),
        ("AWS_REGION", "us-east-1"),
    ];
    both_from(&check(dir.path(), &env), "web identity (AWS_WEB_IDENTITY_TOKEN_FILE, STS AssumeRoleWithWebIdentity)");
}

/// A scripted endpoint: `answer(method, path, headers)` → (status, extra headers, body).
/// Returns its URL and how many requests it served.
type Answer = dyn Fn(&str, &str, &[(String, String)]) -> (u16, Vec<(String, String)>, String) + Send + Sync;

fn serve(answer: Arc<Answer>) -> (String, Arc<Mutex<usize>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(Mutex::new(0));
    let seen = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            reader.read_line(&mut first).unwrap_or(0);
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
            let len: usize =
                headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            let mut parts = first.split_whitespace();
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            *seen.lock().unwrap() += 1;
            let (status, extra, reply) = answer(method, path, &headers);
            let mut head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n", reply.len());
            for (k, v) in extra {
                head += &format!("{k}: {v}\r\n");
            }
            let _ = stream.write_all(format!("{head}\r\n{reply}").as_bytes());
        }
    });
    (url, hits)
}

const EXPIRES: &str = "2099-01-01T00:00:00Z";

/// The instance role through IMDSv2 (a session token first), as on an EC2 runner.
#[test]
fn the_instance_role_answers_for_ec2_and_the_backend() {
    let (url, hits) = serve(Arc::new(|method: &str, path: &str, headers: &[(String, String)]| {
        let token_ok = headers.iter().any(|(k, v)| k == "x-aws-ec2-metadata-token" && v == "imds-session");
        match (method, path) {
            ("PUT", "/latest/api/token") => {
                (200, vec![("x-aws-ec2-metadata-token-ttl-seconds".into(), "21600".into())], "imds-session".into())
            }
            (_, _) if !token_ok => (401, vec![], String::new()),
            ("GET", "/latest/meta-data/iam/security-credentials/") => (200, vec![], "gpuplan-node".into()),
            ("GET", "/latest/meta-data/iam/security-credentials/gpuplan-node") => (
                200,
                vec![],
                format!(
                    r#"{{"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"ASIAFAKEIMDS","SecretAccessKey":"fake-imds-secret","Token":"fake-imds-token","Expiration":"{EXPIRES}","LastUpdated":"2026-01-01T00:00:00Z"}}"#
                ),
            ),
            _ => (404, vec![], String::new()),
        }
    }));
    let dir = fleet("", "");
    let env = [("AWS_EC2_METADATA_DISABLED", "false"), ("AWS_EC2_METADATA_SERVICE_ENDPOINT", url.as_str())];
    both_from(&check(dir.path(), &env), "the instance role (instance metadata)");
    assert!(*hits.lock().unwrap() >= 3, "the metadata endpoint was asked");
}

/// The container endpoint (ECS task roles, EKS Pod Identity).
#[test]
fn the_container_endpoint_answers_for_ec2_and_the_backend() {
    let (url, hits) = serve(Arc::new(|_: &str, path: &str, _: &[(String, String)]| match path {
        "/creds" => (
            200,
            vec![("Content-Type".into(), "application/json".into())],
            format!(
                r#"{{"AccessKeyId":"ASIAFAKEECS","SecretAccessKey":"fake-ecs-secret","Token":"fake-ecs-token","Expiration":"{EXPIRES}"}}"#
            ),
        ),
        _ => (404, vec![], String::new()),
    }));
    let dir = fleet("", "");
    let uri = format!("{url}/creds");
    both_from(
        &check(dir.path(), &[("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri.as_str())]),
        "the container credentials endpoint (ECS, EKS Pod Identity)",
    );
    assert_eq!(*hits.lock().unwrap(), 2, "one fetch per chain (provider and backend), each kept while fresh");
}

#[test]
fn without_any_source_both_fail_with_where_they_looked() {
    let dir = fleet("", "");
    let r = check(dir.path(), &[("AWS_PROFILE", "nope")]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let backend = r.stdout.lines().find(|l| l.contains("state backend: s3://")).expect("a backend line");
    assert!(
        backend.starts_with("FAIL") && backend.contains("no usable AWS credentials (AWS_PROFILE=nope)"),
        "{}",
        r.stdout
    );
    let provider = r.stdout.lines().find(|l| l.contains("provider \"aws\"")).expect("a provider line");
    assert!(provider.starts_with("FAIL") && provider.contains("credentials"), "{}", r.stdout);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

/// An SSO (IAM Identity Center) profile after `aws sso login`: the cached token is
/// exchanged at the SSO portal (a fake here, `AWS_ENDPOINT_URL_SSO`) for role keys.
#[test]
fn an_sso_profile_answers_for_ec2_and_the_backend() {
    let (url, hits) = serve(Arc::new(|method: &str, path: &str, headers: &[(String, String)]| {
        let bearer = headers.iter().any(|(k, v)| k == "x-amz-sso_bearer_token" && v == "sso-access-token");
        let wanted = path.starts_with("/federation/credentials?")
            && path.contains("account_id=123456789012")
            && path.contains("role_name=GpuplanDeploy");
        match (method, wanted, bearer) {
            ("GET", true, true) => (
                200,
                vec![("Content-Type".into(), "application/json".into())],
                r#"{"roleCredentials":{"accessKeyId":"ASIAFAKESSO","secretAccessKey":"fake-ecs-secret","sessionToken":"fake-ecs-token","expiration":4070908800000}}"#.into(),
            ),
            (_, _, false) => (401, vec![], r#"{"message":"Session token not found or invalid"}"#.into()),
            _ => (404, vec![], String::new()),
        }
    }));
    let dir = fleet("", "");
    let start = "https://gpuplan.awsapps.com/start";
    let config = format!(
        "[profile sso]\nsso_start_url = {start}\nsso_region = us-east-1\nsso_account_id = 123456789012\nsso_role_name = GpuplanDeploy\nregion = us-east-1\n"
    );
    std::fs::write(dir.path().join("config"), config).unwrap();
    // `aws sso login` caches the token under the SHA-1 of the start URL.
    let cache = dir.path().join(".aws/sso/cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(
        cache.join("f6f24f12ec5674ced3825fec6a1a1eb3ad2b1412.json"),
        format!(
            r#"{{"accessToken":"sso-access-token","expiresAt":"{EXPIRES}","region":"us-east-1","startUrl":"{start}"}}"#
        ),
    )
    .unwrap();
    let config = dir.path().join("config").display().to_string();
    let env = [("AWS_CONFIG_FILE", config.as_str()), ("AWS_PROFILE", "sso"), ("AWS_ENDPOINT_URL_SSO", url.as_str())];
    both_from(&check(dir.path(), &env), "profile `sso` (IAM Identity Center, SSO)");
    assert_eq!(*hits.lock().unwrap(), 2, "one exchange per chain (provider and backend)");
}
