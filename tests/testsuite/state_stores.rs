//! Remote state on every store, end to end with the real binary: Azure Blob against
//! Azurite, Google Cloud Storage against gcp-storage-emulator, S3 against moto (all started
//! by `scripts/test`, which exports GPUPLAN_TEST_AZURITE_ENDPOINT, GPUPLAN_TEST_GCS_ENDPOINT
//! and GPUPLAN_TEST_MOTO_ENDPOINT; the tests fail, never skip, without them).
//!
//! Each store gets the same two scenarios: state is written again and again (every write
//! after the first is a compare-and-swap on the version last seen) and `init`'s probe
//! passes; and an apply whose lock is broken and whose state someone else wrote stops
//! writing, keeps its final state in `errored.json` and names the command that pushes it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn endpoint(var: &str) -> String {
    match std::env::var(var) {
        Ok(e) if !e.trim().is_empty() => e.trim_end_matches('/').to_string(),
        _ => panic!("{var} is not set: run the tests with `scripts/test`, which installs and starts the emulators"),
    }
}

/// One HTTP/1.0 request: (status, body).
fn http(base: &str, method: &str, path: &str, headers: &[(&str, String)], body: &[u8]) -> (u16, String) {
    let host = base.trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&host).expect("the emulator answers");
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += "\r\n";
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text)
}

fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

/// A store under test: the backend block and the environment the binary needs.
struct Store {
    backend: String,
    env: Vec<(&'static str, String)>,
    /// How the state object is named in messages.
    url: String,
}

const AZURITE_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's well-known development key (public, documented by Microsoft).
const AZURITE_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// `Thu, 26 Nov 2026 09:20:54 GMT`, the date format Azure's SharedKey signature covers.
fn rfc1123_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        months[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Create a container in Azurite (gpuplan never creates buckets or containers): a
/// SharedKey-signed `Create Container`.
fn azure_container(name: &str) {
    use base64::Engine;
    use hmac::{Hmac, Mac};
    let base = endpoint("GPUPLAN_TEST_AZURITE_ENDPOINT");
    let (date, version) = (rfc1123_now(), "2021-08-06".to_string());
    let to_sign = format!(
        "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{name}\nrestype:container"
    );
    let key = base64::engine::general_purpose::STANDARD.decode(AZURITE_KEY).unwrap();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(to_sign.as_bytes());
    let signature = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    let headers = [
        ("x-ms-date", date),
        ("x-ms-version", version),
        ("Authorization", format!("SharedKey {AZURITE_ACCOUNT}:{signature}")),
    ];
    let (status, text) = http(&base, "PUT", &format!("/{AZURITE_ACCOUNT}/{name}?restype=container"), &headers, b"");
    assert_eq!(status, 201, "create container {name}: {text}");
}

fn azure() -> Store {
    let container = unique("gpstate");
    azure_container(&container);
    Store {
        backend: format!(
            "backend \"azurerm\" {{\n    storage_account_name = \"{AZURITE_ACCOUNT}\"\n    container_name = \"{container}\"\n    key = \"fleets/prod.json\"\n  }}"
        ),
        env: vec![
            ("AZURE_STORAGE_USE_EMULATOR", "true".into()),
            ("AZURITE_BLOB_STORAGE_URL", endpoint("GPUPLAN_TEST_AZURITE_ENDPOINT")),
        ],
        url: format!("az://{AZURITE_ACCOUNT}/{container}/fleets/prod.json"),
    }
}

fn gcs() -> Store {
    let base = endpoint("GPUPLAN_TEST_GCS_ENDPOINT");
    let bucket = unique("gpstate");
    let body = format!("{{\"name\": \"{bucket}\"}}");
    let headers = [("Content-Type", "application/json".to_string())];
    let (status, text) = http(&base, "POST", "/storage/v1/b?project=gpuplan-test", &headers, body.as_bytes());
    assert_eq!(status, 200, "create bucket {bucket}: {text}");
    // No OAuth against the emulator: object_store's documented switch for test servers.
    let key = format!(
        "{{\"private_key\": \"unused\", \"private_key_id\": \"unused\", \"client_email\": \"test@gpuplan.invalid\", \"disable_oauth\": true, \"gcs_base_url\": \"{base}\"}}"
    );
    Store {
        backend: format!("backend \"gcs\" {{\n    bucket = \"{bucket}\"\n    key = \"fleets/prod.json\"\n  }}"),
        env: vec![("GOOGLE_SERVICE_ACCOUNT_KEY", key), ("GOOGLE_ALLOW_HTTP", "true".into())],
        url: format!("gs://{bucket}/fleets/prod.json"),
    }
}

fn s3() -> Store {
    let base = endpoint("GPUPLAN_TEST_MOTO_ENDPOINT");
    let bucket = unique("gp-any");
    let (status, text) = http(&base, "PUT", &format!("/{bucket}"), &[], b"");
    assert_eq!(status, 200, "create bucket {bucket}: {text}");
    Store {
        backend: format!(
            "backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key = \"fleets/prod.json\"\n    region = \"us-east-1\"\n    endpoint = \"{base}\"\n    lock_mode = \"conditional\"\n  }}"
        ),
        env: vec![("AWS_ACCESS_KEY_ID", "testing".into()), ("AWS_SECRET_ACCESS_KEY", "testing".into())],
        url: format!("s3://{bucket}/fleets/prod.json"),
    }
}

fn spec(store: &Store, pools: usize) -> String {
    let mut s = format!("gpuplan {{\n  {}\n}}\n\nprovider \"sim\" {{}}\n", store.backend);
    for i in 0..pools {
        s += &format!(
            "\ngpu_pool \"p{i}\" {{\n  provider = \"sim\"\n  region = \"us-east-1\"\n  zones = [\"us-east-1a\"]\n  gpu = \"L4\"\n  gpus_per_node = 1\n  nodes {{\n    min = 0\n    desired = 2\n    max = 4\n  }}\n}}\n"
        );
    }
    s
}

fn command(dir: &Path, store: &Store, args: &[&str], extra: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplan"));
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .env_remove("GPUPLAN_WORKSPACE")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env_remove("GOOGLE_SERVICE_ACCOUNT")
        .args(args);
    for (k, v) in &store.env {
        cmd.env(k, v);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, store: &Store, args: &[&str]) -> Run {
    let out = command(dir, store, args, &[]).output().expect("gpuplan runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn spawn(dir: &Path, store: &Store, args: &[&str], extra: &[(&str, &str)]) -> Child {
    command(dir, store, args, extra).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("gpuplan starts")
}

/// The remote state as `gpuplan state pull` prints it (no lock taken).
fn pulled(dir: &Path, store: &Store) -> Option<serde_json::Value> {
    let r = run(dir, store, &["state", "pull"]);
    (r.code == 0).then(|| serde_json::from_str(&r.stdout).expect("state pull prints JSON"))
}

fn nodes(state: &serde_json::Value) -> usize {
    state["resources"].as_object().map_or(0, |r| r.values().map(|v| v["nodes"].as_array().map_or(0, Vec::len)).sum())
}

/// State is written many times over (create, progress, final; then a second apply), each
/// write after the first a compare-and-swap on the version the last one returned, and the
/// store passes `init`'s probe (create-only twice, the right version, a wrong version).
fn written_again_and_again(store: Store) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), spec(&store, 3)).unwrap();
    let init = run(tmp.path(), &store, &["init"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    assert!(init.stderr.contains(&store.url) && init.stderr.contains("can be locked"), "{}", init.stderr);

    let apply = run(tmp.path(), &store, &["apply", "--auto-approve"]);
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    let first = pulled(tmp.path(), &store).expect("the state object");
    assert_eq!(nodes(&first), 6);
    let plan = run(tmp.path(), &store, &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);

    std::fs::write(tmp.path().join("main.hcl"), spec(&store, 4)).unwrap();
    let again = run(tmp.path(), &store, &["apply", "--auto-approve"]);
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    let second = pulled(tmp.path(), &store).unwrap();
    assert_eq!(nodes(&second), 8);
    assert!(second["serial"].as_u64() > first["serial"].as_u64());
    assert_eq!(second["lineage"], first["lineage"]);
}

/// The lock of a running apply is broken and someone else writes the state: the apply's
/// compare-and-swap refuses to overwrite it, its final state goes to `errored.json`, the
/// error names the command, and pushing that file (with --force, as it is older) converges.
fn errored_after_someone_else_wrote(store: Store) {
    let tmp = tempfile::tempdir().unwrap();
    // The apply must still be running while this test breaks its lock and writes over its
    // state (three processes, slow on a busy machine): ten pools one at a time, a second
    // per cloud call, keep it going for about ten seconds after its first progress write,
    // and end it well before its first lock renewal (20 s), which would find the lock gone.
    const POOLS: usize = 10;
    std::fs::write(tmp.path().join("main.hcl"), spec(&store, POOLS)).unwrap();
    let apply =
        spawn(tmp.path(), &store, &["apply", "--auto-approve", "--parallelism", "1"], &[("GPUPLAN_SIM_LATENCY", "1s")]);
    let start = Instant::now();
    let progress = loop {
        if let Some(s) = pulled(tmp.path(), &store).filter(|s| nodes(s) > 0) {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no progress write within a minute");
        std::thread::sleep(Duration::from_millis(200));
    };
    // Break the lock (as an operator would) and write the state from elsewhere.
    let locked = run(tmp.path(), &store, &["plan"]);
    assert_eq!(locked.code, 1, "{}", locked.stderr);
    let id = locked.stderr.split("gpuplan state unlock ").nth(1).and_then(|s| s.split('`').next()).unwrap().trim();
    assert_eq!(run(tmp.path(), &store, &["state", "unlock", id]).code, 0);
    std::fs::write(tmp.path().join("theirs.json"), serde_json::to_vec(&progress).unwrap()).unwrap();
    let theirs = run(tmp.path(), &store, &["state", "push", "--force", "theirs.json"]);
    assert_eq!(theirs.code, 0, "{}", theirs.stderr);

    let out = apply.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("errored.json") && stderr.contains("`gpuplan state push errored.json`"), "{stderr}");
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("errored.json")).expect("errored.json")).unwrap();
    assert_eq!(nodes(&kept), 2 * POOLS, "every node the apply launched is in errored.json");
    assert!(nodes(&pulled(tmp.path(), &store).unwrap()) < 2 * POOLS, "the other writer's state was not overwritten");

    let refused = run(tmp.path(), &store, &["state", "push", "errored.json"]);
    assert_eq!(refused.code, 1, "an older serial needs --force: {}", refused.stderr);
    let pushed = run(tmp.path(), &store, &["state", "push", "--force", "errored.json"]);
    assert_eq!(pushed.code, 0, "{}", pushed.stderr);
    let plan = run(tmp.path(), &store, &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "converged from errored.json:\n{}\n{}", plan.stdout, plan.stderr);
}

#[test]
fn gcs_state_is_written_again_and_again_and_passes_the_probe() {
    written_again_and_again(gcs());
}

#[test]
fn gcs_keeps_errored_json_when_someone_else_wrote() {
    errored_after_someone_else_wrote(gcs());
}

#[test]
fn azurerm_state_is_written_again_and_again_and_passes_the_probe() {
    written_again_and_again(azure());
}

#[test]
fn azurerm_keeps_errored_json_when_someone_else_wrote() {
    errored_after_someone_else_wrote(azure());
}

#[test]
fn s3_keeps_errored_json_when_someone_else_wrote() {
    errored_after_someone_else_wrote(s3());
}
