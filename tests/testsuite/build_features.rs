//! The tests reuse the dependency build of `cargo run` (README, Set up): every crate the
//! binary builds must be resolved with the same features whether or not dev-dependencies
//! are in the build. A dev-dependency that turns on one more feature of a shared crate
//! (tokio, regex-automata, …) makes the test build compile that crate again, and every
//! crate above it, the AWS SDK included: minutes on a new machine. Cargo.toml's
//! "Feature unification" block names those features; this test finds new ones.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// `cargo tree` as `crate version -> feature sets` (one set per build of that crate).
fn resolved(extra: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--locked", "--offline", "--prefix", "none", "-f", "{p}|{f}"])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim_end_matches(" (*)");
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        // `{p}` ends with the source for path dependencies ("gpuplan v0.1.0 (/…)").
        let package = package.split(" (").next().unwrap_or(package).trim();
        map.entry(package.to_string()).or_default().insert(features.trim().to_string());
    }
    map
}

#[test]
fn dev_dependencies_turn_on_no_feature_of_a_crate_the_binary_builds() {
    let binary = resolved(&["-e", "no-dev"]);
    let tests = resolved(&[]);
    assert!(binary.keys().any(|k| k.starts_with("aws-sdk-ec2 ")), "cargo tree output not understood: {binary:?}");
    let mut differ = Vec::new();
    for (package, sets) in &binary {
        let in_tests = tests.get(package).cloned().unwrap_or_default();
        for set in sets {
            if !in_tests.contains(set) {
                differ.push(format!("{package}: binary builds [{set}], tests build {in_tests:?}"));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "the test build would compile these crates (and all above them) again; add the \
         features to Cargo.toml's \"Feature unification\" block:\n{}",
        differ.join("\n")
    );
}
