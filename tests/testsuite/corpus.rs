//! The bad-input corpus: `gpuplan validate` on every case under `tests/corpus/<case>/`
//! (one or more spec files, HCL and YAML mixed, and policy files in `<case>/policies/`,
//! which `validate` checks as `plan` would), plus inputs generated here because they
//! are too binary or too big to check in. Each case's rendered stderr and exit code are
//! snapshotted together (`tests/testsuite/snapshots/testsuite__corpus__<case>.snap`); every case must exit 1 with
//! a `file:line:col` location, except the few listed in [`VALID`], and nothing may panic.
//!
//! Update the snapshots with `INSTA_UPDATE=always cargo test --test testsuite corpus`, then read them.

use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin_cmd;

/// Cases that are deliberately valid: an empty file and a comment-only file declare
/// nothing, which is allowed (with a warning), like an empty Terraform file.
const VALID: &[&str] = &["valid_comments_only_yaml", "valid_empty_hcl_file"];

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `gpuplan validate -C <case>` run from `parent`, so paths print as `<case>/main.hcl`.
fn validate(parent: &Path, case: &str, json: bool) -> Run {
    let mut cmd = cargo_bin_cmd!("gpuplan");
    cmd.current_dir(parent).env("NO_COLOR", "1").env("COLUMNS", "100").env_remove("GPUPLAN_WORKSPACE");
    cmd.args(["validate", "-C", case]);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("gpuplan runs");
    Run {
        code: out.status.code().expect("exit code (not killed by a signal)"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Does `text` hold `<name>.hcl:<digit>` or `<name>.yaml:<digit>` (a `file:line:col`)?
fn has_location(text: &str) -> bool {
    [".hcl:", ".yaml:", ".yml:"]
        .iter()
        .any(|ext| text.match_indices(ext).any(|(i, m)| text[i + m.len()..].starts_with(|c: char| c.is_ascii_digit())))
}

/// Validate one case both ways and check everything a user or script relies on.
fn check_case(parent: &Path, case: &str) {
    let r = validate(parent, case, false);
    assert_ne!(r.code, 101, "{case}: gpuplan panicked:\n{}", r.stderr);
    if VALID.contains(&case) {
        assert_eq!(r.code, 0, "{case} should be valid:\n{}", r.stderr);
    } else {
        assert_eq!(r.code, 1, "{case} should be rejected:\n{}", r.stderr);
        assert!(has_location(&r.stderr), "{case}: no file:line:col in\n{}", r.stderr);
    }
    assert!(r.stdout.is_empty(), "{case}: diagnostics belong on stderr, stdout had:\n{}", r.stdout);
    insta::assert_snapshot!(case, format!("exit code: {}\n{}", r.code, r.stderr));

    let j = validate(parent, case, true);
    assert_eq!(j.code, r.code, "{case}: --json changed the exit code");
    let doc: serde_json::Value =
        serde_json::from_str(&j.stdout).unwrap_or_else(|e| panic!("{case}: --json is not JSON ({e}):\n{}", j.stdout));
    assert_eq!(doc["valid"], r.code == 0, "{case}: {doc}");
    let diags = doc["diagnostics"].as_array().unwrap_or_else(|| panic!("{case}: no diagnostics array"));
    if r.code == 1 {
        assert!(doc["error_count"].as_u64().is_some_and(|n| n >= 1), "{case}: {doc}");
    }
    for d in diags {
        if !d["file"].is_null() {
            assert!(d["line"].as_u64().is_some_and(|l| l >= 1), "{case}: diagnostic without a line: {d}");
            assert!(d["column"].as_u64().is_some_and(|c| c >= 1), "{case}: diagnostic without a column: {d}");
        }
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

#[test]
fn every_checked_in_case() {
    let root = corpus_dir();
    let mut cases: Vec<String> = std::fs::read_dir(&root)
        .expect("tests/corpus exists")
        .map(|e| e.expect("entry"))
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    cases.sort();
    assert!(cases.len() >= 80, "the corpus shrank to {} cases", cases.len());
    for v in VALID {
        assert!(cases.iter().any(|c| c == v), "VALID names a missing case `{v}`");
    }
    for case in &cases {
        check_case(&root, case);
    }
}

/// Write `files` into `<tmp>/<case>/` and check the case like a checked-in one.
fn generated(case: &str, files: &[(&str, Vec<u8>)]) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join(case);
    std::fs::create_dir(&dir).expect("mkdir");
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).expect("write");
    }
    check_case(tmp.path(), case);
}

#[test]
fn binary_junk_with_invalid_utf8() {
    let mut bytes = b"gpu_pool \"train\" {\n  gpu = \"A100".to_vec();
    bytes.extend_from_slice(&[0x00, 0xff, 0xfe, 0x00, 0xc3, 0x28]);
    bytes.extend_from_slice(b"\"\n}\n");
    generated("gen_binary_invalid_utf8", &[("main.hcl", bytes.clone()), ("fleet.yaml", bytes)]);
}

#[test]
fn nul_bytes_in_valid_utf8() {
    let hcl = b"provider \"sim\" {\n  region = \"us-east-1\0\"\n}\n\0\0\0gpu_pool\0\n".to_vec();
    let yaml = b"providers:\n  sim:\n    region: us-east-1\0\n\0gpu_pools: {}\n".to_vec();
    generated("gen_nul_bytes", &[("main.hcl", hcl), ("fleet.yaml", yaml)]);
}

/// 5 MB of repeated junk lines, in each format: rejected quickly, with a short report.
#[test]
fn five_megabytes_of_junk() {
    let line = "gpu_pool \"x\" { nodes = [1, 2 } ]] @@ ::: - ? !! {{ \"\n";
    let junk: Vec<u8> = line.repeat(5 * 1024 * 1024 / line.len()).into_bytes();
    let start = std::time::Instant::now();
    generated("gen_5mb_junk", &[("junk.hcl", junk.clone()), ("junk.yaml", junk)]);
    assert!(start.elapsed().as_secs() < 20, "5 MB of junk took {:?}", start.elapsed());
}

/// One out-of-range value in the provider block a thousand pools use is one problem, not
/// a thousand and one: the block is still declared for the pools that name it.
#[test]
fn a_bad_provider_attribute_under_a_thousand_pools_is_one_problem() {
    let mut hcl = String::from("provider \"sim\" {\n  zone_capacity = 10000000\n}\n");
    for i in 0..1000 {
        hcl += &format!(
            "\ngpu_pool \"p{i:04}\" {{\n  provider      = \"sim\"\n  region        = \"us-east-1\"\n  gpu           = \"L4\"\n  gpus_per_node = 1\n  nodes {{\n    min     = 0\n    desired = 1\n    max     = 2\n  }}\n}}\n"
        );
    }
    generated("gen_provider_range_1000_pools", &[("main.hcl", hcl.into_bytes())]);
}

#[test]
fn location_check_is_strict() {
    assert!(has_location("  ╭─[case/main.hcl:3:7]"));
    assert!(has_location("at a/b.yaml:12:1"));
    assert!(!has_location("error: cannot read `main.hcl`"));
    assert!(!has_location("fleet.yaml: broken"));
}
