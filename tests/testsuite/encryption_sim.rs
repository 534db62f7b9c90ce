//! Client-side encryption end to end on the sim cloud (docs/design/secrets.md,
//! "Encryption at rest"): what an encrypted fleet leaves on disk, a wrong or missing key,
//! migrating a plain state in and back out, and a passphrase rotation with `state rekey`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin_cmd;

const PASS: &str = "GPUPLAN_TEST_STATE_PASSPHRASE";
const TAG: &str = "vision-team-4f2e";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = cargo_bin_cmd!("gpuplan");
    // Wide, so messages stay on one line for the asserts.
    cmd.current_dir(dir).env("NO_COLOR", "1").env("COLUMNS", "1000").env_remove("GPUPLAN_WORKSPACE").env_remove(PASS);
    cmd.envs(env.iter().copied());
    let out = cmd.args(args).output().expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ok(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let r = run(dir, args, env);
    assert_eq!(r.code, 0, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
    r
}

fn spec(desired: u32, encryption: &str) -> String {
    format!(
        r#"provider "sim" {{
  region = "us-east-1"
}}

gpu_pool "train" {{
  provider      = "sim"
  zones         = ["us-east-1a"]
  gpu           = "L4"
  gpus_per_node = 1
  labels        = {{ team = "{TAG}" }}
  nodes {{
    min     = 0
    desired = {desired}
    max     = 8
  }}
}}

output "train_nodes" {{
  value = gpu_pool.train.nodes.desired
}}
{encryption}"#
    )
}

fn passphrase_block(var: &str, fallback: Option<&str>) -> String {
    let fallback = fallback.map_or(String::new(), |old| {
        format!("    fallback {{\n      key_provider \"passphrase\" {{\n        passphrase_env = \"{old}\"\n      }}\n    }}\n")
    });
    format!(
        "\ngpuplan {{\n  encryption {{\n    key_provider \"passphrase\" {{\n      passphrase_env = \"{var}\"\n    }}\n{fallback}  }}\n}}\n"
    )
}

/// Every file under `dir` gpuplan wrote, but the sim cloud's own world (the cloud, which
/// knows its instances: `*.sim.json`, its log and lock), with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                todo.push(path);
            } else if !name.contains(".sim.json") && name != "main.hcl" {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The node ids the state holds, read through `state pull` (which prints it in the clear).
fn node_ids(dir: &Path, env: &[(&str, &str)]) -> Vec<String> {
    let pulled: serde_json::Value = serde_json::from_str(&ok(dir, &["state", "pull"], env).stdout).unwrap();
    let ids: Vec<String> = pulled["resources"]["gpu_pool.train"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!ids.is_empty(), "{pulled}");
    ids
}

fn assert_sealed(path: &Path, provider: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.starts_with(r#"{"encoding":"gzip+aes-256-gcm+base64","#), "{}: {text}", path.display());
    assert!(text.contains(provider), "{}: {text}", path.display());
}

#[test]
fn an_encrypted_fleet_leaves_no_id_or_tag_in_its_files_and_still_plans_shows_and_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let env = [(PASS, "correct horse battery staple")];
    std::fs::write(dir.join("main.hcl"), spec(2, &passphrase_block(PASS, None))).unwrap();
    ok(dir, &["apply", "--auto-approve"], &env);
    std::fs::write(dir.join("main.hcl"), spec(3, &passphrase_block(PASS, None))).unwrap();
    ok(dir, &["apply", "--auto-approve"], &env);
    let saved = ok(dir, &["plan", "--out", "saved.plan", "--detailed-exitcode"], &env);
    assert!(saved.stdout.contains("No changes"), "{}", saved.stdout);

    let ids = node_ids(dir, &env);
    let written = files(dir);
    for name in ["state/default.json", "state/default.json.backup", "saved.plan"] {
        assert!(written.contains_key(&dir.join(name)), "{name} missing: {:?}", written.keys());
        assert_sealed(&dir.join(name), PASS);
    }
    for (path, bytes) in &written {
        let text = String::from_utf8_lossy(bytes);
        for secret in ids.iter().map(String::as_str).chain([TAG, "correct horse"]) {
            assert!(!text.contains(secret), "`{secret}` in {}:\n{text}", path.display());
        }
    }

    let shown = ok(dir, &["show", "saved.plan"], &env);
    assert!(shown.stdout.contains("No changes"), "{}", shown.stdout);
    let out = ok(dir, &["output", "train_nodes"], &env);
    assert_eq!(out.stdout.trim(), "3");
    let listed = ok(dir, &["state", "list"], &env);
    assert!(listed.stdout.contains("gpu_pool.train"), "{}", listed.stdout);
}

#[test]
fn a_wrong_or_missing_passphrase_is_exit_1_naming_the_file_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(2, &passphrase_block(PASS, None))).unwrap();
    ok(dir, &["apply", "--auto-approve"], &[(PASS, "right")]);
    std::fs::write(dir.join("main.hcl"), spec(4, &passphrase_block(PASS, None))).unwrap();
    let before = files(dir);
    for (env, reason) in [
        (&[(PASS, "wrong")][..], format!("the passphrase in {PASS} does not open it")),
        (&[][..], format!("{PASS} is not set")),
    ] {
        for args in [&["apply", "--auto-approve"][..], &["plan"], &["state", "rekey"], &["output"]] {
            let r = run(dir, args, env);
            assert_eq!(r.code, 1, "{args:?}:\n{}\n{}", r.stdout, r.stderr);
            let want = format!("cannot decrypt `state/default.json` with key_provider passphrase ({PASS}): {reason}");
            assert!(r.stderr.contains(&want), "{args:?}: want {want}\n{}", r.stderr);
            assert!(
                r.stderr.contains("set the key it was sealed with") || r.stderr.contains(&format!("export {PASS}")),
                "{}",
                r.stderr
            );
            assert_eq!(files(dir), before, "{args:?} wrote something");
        }
    }
    // The right one still opens it, and the change goes through.
    ok(dir, &["apply", "--auto-approve"], &[(PASS, "right")]);
}

#[test]
fn a_plain_state_is_encrypted_by_the_next_write_and_decrypted_back_with_rekey_decrypt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let env = [(PASS, "migrate me")];
    std::fs::write(dir.join("main.hcl"), spec(1, "")).unwrap();
    ok(dir, &["apply", "--auto-approve"], &[]);
    let plain = std::fs::read_to_string(dir.join("state/default.json")).unwrap();
    assert!(plain.contains(TAG), "a plain state to start with");

    std::fs::write(dir.join("main.hcl"), spec(1, &passphrase_block(PASS, None))).unwrap();
    // A read-only command reads the plain state and writes nothing.
    let r = ok(dir, &["plan", "--detailed-exitcode"], &env);
    assert!(r.stdout.contains("No changes"), "{}", r.stdout);
    assert_eq!(std::fs::read_to_string(dir.join("state/default.json")).unwrap(), plain);
    std::fs::write(dir.join("main.hcl"), spec(2, &passphrase_block(PASS, None))).unwrap();
    ok(dir, &["apply", "--auto-approve"], &env);
    assert_sealed(&dir.join("state/default.json"), PASS);

    // Without the block, an encrypted state is refused, naming the way back.
    std::fs::write(dir.join("main.hcl"), spec(2, "")).unwrap();
    let r = run(dir, &["plan"], &env);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("the spec has no `encryption` block"), "{}", r.stderr);
    assert!(r.stderr.contains("gpuplan state rekey --decrypt"), "{}", r.stderr);
    let r = ok(dir, &["state", "rekey", "--decrypt"], &env);
    assert!(r.stderr.contains("and its backup stored unencrypted"), "{}", r.stderr);
    for name in ["state/default.json", "state/default.json.backup"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(text.starts_with("{\n") && text.contains(TAG), "{name} is plain JSON again:\n{text}");
    }
    let r = ok(dir, &["plan", "--detailed-exitcode"], &[]);
    assert!(r.stdout.contains("No changes"), "{}", r.stdout);
}

#[test]
fn a_rotated_passphrase_reads_with_the_fallback_and_rekey_moves_every_file_to_the_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (old, new) = ("GPUPLAN_TEST_OLD_PASSPHRASE", "GPUPLAN_TEST_NEW_PASSPHRASE");
    let env = [(old, "old secret"), (new, "new secret")];
    std::fs::write(dir.join("main.hcl"), spec(1, &passphrase_block(old, None))).unwrap();
    ok(dir, &["apply", "--auto-approve"], &env);
    std::fs::write(dir.join("main.hcl"), spec(2, &passphrase_block(old, None))).unwrap();
    ok(dir, &["apply", "--auto-approve"], &env);

    std::fs::write(dir.join("main.hcl"), spec(2, &passphrase_block(new, Some(old)))).unwrap();
    let r = ok(dir, &["plan", "--detailed-exitcode"], &env);
    assert!(r.stdout.contains("No changes"), "the fallback reads the state:\n{}", r.stdout);
    let r = ok(dir, &["state", "rekey"], &env);
    assert!(
        r.stderr.contains(&format!("and its backup encrypted with key_provider passphrase ({new})")),
        "{}",
        r.stderr
    );
    for name in ["state/default.json", "state/default.json.backup"] {
        assert_sealed(&dir.join(name), new);
    }
    // The old passphrase is no longer needed, and no longer opens anything.
    std::fs::write(dir.join("main.hcl"), spec(2, &passphrase_block(new, None))).unwrap();
    ok(dir, &["plan", "--detailed-exitcode"], &[(new, "new secret")]);
    std::fs::write(dir.join("main.hcl"), spec(2, &passphrase_block(old, None))).unwrap();
    let r = run(dir, &["plan"], &env);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains(&format!("the passphrase in {old} does not open it")), "{}", r.stderr);
}

#[test]
fn a_bad_encryption_block_is_located_with_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let typo =
        "\ngpuplan {\n  encryption {\n    key_provider \"pasphrase\" {\n      passphrase_env = \"X\"\n    }\n  }\n}\n";
    let literal = "\ngpuplan {\n  encryption {\n    key_provider \"passphrase\" {\n      passphrase = \"hunter2\"\n    }\n  }\n}\n";
    for (block, want) in [
        (typo, &["main.hcl:24:18", "unknown key provider `pasphrase`", "did you mean `passphrase`?"][..]),
        (
            literal,
            &["main.hcl:25:7", "key provider `passphrase` has no setting `passphrase`", "`passphrase_env = \"NAME\"`"],
        ),
        (&format!("{typo}{literal}"), &["encryption is configured twice", "second `encryption` block"]),
    ] {
        std::fs::write(dir.join("main.hcl"), spec(1, block)).unwrap();
        let r = run(dir, &["validate"], &[]);
        let all = format!("{}{}", r.stdout, r.stderr);
        assert_eq!(r.code, 1, "{all}");
        for w in want {
            assert!(all.contains(w), "want {w}:\n{all}");
        }
    }
}

/// Quoted `i-…` ids in `text` (the sim cloud's world names its instances so).
fn quoted_ids(text: &str) -> Vec<String> {
    text.split('"')
        .filter(|s| s.starts_with("i-") && s[2..].chars().all(|c| c.is_ascii_hexdigit()))
        .map(String::from)
        .collect()
}

/// An apply killed mid-way leaves its journal: with encryption on, the journal's entries
/// are sealed too (no instance id, no tag value), its header names the key provider, and
/// the next apply reads it and finishes the work.
#[test]
fn a_journal_left_by_a_killed_apply_holds_no_id_or_tag_and_the_next_apply_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let env = [(PASS, "correct horse battery staple")];
    // Twelve pools, so the journal holds a pool's nodes while the others are launched.
    let one = spec(2, &passphrase_block(PASS, None));
    let (head, pool) = one.split_at(one.find("gpu_pool").unwrap());
    let pool = &pool[..pool.find("output").unwrap()];
    let mut text = head.to_string() + &passphrase_block(PASS, None);
    for i in 0..12 {
        text += &pool.replace("\"train\"", &format!("\"p{i:02}\""));
    }
    std::fs::write(dir.join("main.hcl"), text).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpuplan"))
        .args(["apply", "--auto-approve", "--parallelism", "2"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("GPUPLAN_SIM_LATENCY", "100ms")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("gpuplan starts");
    let journal = dir.join("state/default.json.journal");
    let lines = || std::fs::read(&journal).map(|b| b.iter().filter(|&&c| c == b'\n').count()).unwrap_or(0);
    let start = std::time::Instant::now();
    while lines() < 4 && start.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    let text = std::fs::read_to_string(&journal).expect("the journal is left");
    assert!(text.lines().count() >= 3, "a header and entries: {text}");
    let header = text.lines().next().unwrap();
    assert!(header.contains("passphrase") && header.contains(PASS), "the header names its key provider: {header}");

    // The sim cloud's world (its file and its log) knows the instances it launched.
    let mut world = String::new();
    for e in std::fs::read_dir(dir.join("state")).unwrap() {
        let path = e.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().contains(".sim.") && path.is_file() {
            world += &String::from_utf8_lossy(&std::fs::read(&path).unwrap());
        }
    }
    let ids = quoted_ids(&world);
    assert!(!ids.is_empty(), "the apply launched nodes: {world}");
    for (path, bytes) in files(dir) {
        let text = String::from_utf8_lossy(&bytes);
        for secret in ids.iter().map(String::as_str).chain([TAG, "correct horse"]) {
            assert!(!text.contains(secret), "`{secret}` in {}:\n{text}", path.display());
        }
    }

    ok(dir, &["apply", "--auto-approve"], &env);
    let pulled: serde_json::Value = serde_json::from_str(&ok(dir, &["state", "pull"], &env).stdout).unwrap();
    let nodes: usize =
        (0..12).map(|i| pulled["resources"][format!("gpu_pool.p{i:02}")]["nodes"].as_array().map_or(0, Vec::len)).sum();
    assert_eq!(nodes, 24, "the next apply finished the work: {pulled}");
    assert!(!journal.exists(), "the journal was folded into the sealed state");
    assert_sealed(&dir.join("state/default.json"), PASS);
}
