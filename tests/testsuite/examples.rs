//! Every directory under `examples/` validates cleanly with the real binary: exit 0, no
//! warnings, nothing on stdout.

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
