//! Every directory under `examples/` validates cleanly with the real binary: exit 0, no
//! warnings, nothing on stdout. And the README's status paragraph reads as plain prose.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

#[test]
fn every_example_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut dirs: Vec<_> =
        std::fs::read_dir(&root).expect("examples/").map(|e| e.expect("entry").path()).filter(|p| p.is_dir()).collect();
    // `examples/ci/` holds CI pipelines, not a fleet: `ci_recipes.rs` checks them.
    dirs.retain(|d| !d.ends_with("ci"));
    dirs.sort();
    assert!(dirs.len() >= 3, "examples went missing: {dirs:?}");
    for dir in dirs {
        let out = cargo_bin_cmd!("gpuplan")
            .current_dir(&root)
            .env("NO_COLOR", "1")
            .env("COLUMNS", "100")
            .env_remove("GPUPLAN_WORKSPACE")
            .arg("validate")
            .arg("-C")
            .arg(&dir)
            .output()
            .expect("gpuplan runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}:\n{stderr}", dir.display());
        assert_eq!(stderr, "Success! The configuration is valid.\n", "{}", dir.display());
        assert!(out.stdout.is_empty(), "{}", dir.display());
    }
}

/// Every example ships tests (`tests/*.test.hcl`), and `gpuplan test` passes them all
/// without credentials, against private simulated clouds, leaving no `state/` behind.
#[test]
fn every_example_has_passing_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut dirs: Vec<_> =
        std::fs::read_dir(&root).expect("examples/").map(|e| e.expect("entry").path()).filter(|p| p.is_dir()).collect();
    dirs.retain(|d| !d.ends_with("ci"));
    dirs.sort();
    for dir in dirs {
        let tests = gpuplan::testing::test_files(&dir).expect("tests/ reads");
        assert!(!tests.is_empty(), "{} has no tests/*.test.hcl", dir.display());
        let had_state = dir.join("state").exists();
        let out = cargo_bin_cmd!("gpuplan")
            .current_dir(&root)
            .env("NO_COLOR", "1")
            .env_remove("GPUPLAN_WORKSPACE")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("TENCENTCLOUD_SECRET_ID")
            .env_remove("ALIBABA_CLOUD_ACCESS_KEY_ID")
            .arg("test")
            .arg("-C")
            .arg(&dir)
            .output()
            .expect("gpuplan runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}:\n{stdout}{}", dir.display(), String::from_utf8_lossy(&out.stderr));
        assert!(stdout.trim_end().ends_with(" passed, 0 failed"), "{stdout}");
        assert_eq!(dir.join("state").exists(), had_state, "{}: gpuplan test touched state/", dir.display());
    }
}

/// The README's status paragraph is what a newcomer reads first: a paragraph of its own,
/// in plain sentences, naming no issue numbers (they mean nothing outside the tracker).
#[test]
fn the_readme_status_paragraph_names_no_issue_numbers() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).expect("README");
    let status = readme.split("\n\n").find(|p| p.contains("**Status:**")).expect("a status paragraph");
    assert!(status.starts_with("**Status:**"), "the status is a paragraph of its own:\n{status}");
    assert!(!status.to_lowercase().contains("issue"), "{status}");
    assert!(status.trim_end().ends_with('.'), "{status}");
}
