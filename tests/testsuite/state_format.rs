//! The state file's format over time (docs/design/state-and-locks.md, "State that stays
//! small"): states written by older gpuplans (`tests/state_formats/v1`, committed as that
//! gpuplan left it after two applies and a spot reclaim; `v2`, the same fleet after one
//! more reclaim and apply by a format 2 gpuplan) are read, planned with no changes, and
//! written in the current format; a newer format is refused by name.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

fn gpuplan(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("GPUPLAN_WORKSPACE")
        .args(args)
        .output()
        .expect("gpuplan runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().expect("exit code"), text(&out.stdout), text(&out.stderr))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn state_json(dir: &Path) -> serde_json::Value {
    crate::state_plain::read(&dir.join("state/default.json"))
}

fn fleet(version: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/state_formats").join(version), tmp.path());
    tmp
}

fn v1_fleet() -> tempfile::TempDir {
    fleet("v1")
}

/// The state file as it is on disk, not unpacked.
fn raw_state(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("state/default.json")).unwrap()).unwrap()
}

#[test]
fn a_format_1_state_plans_no_changes_and_is_written_as_format_3() {
    let tmp = v1_fleet();
    let dir = tmp.path();
    let before = state_json(dir);
    assert_eq!(before["format_version"], 1);
    let nodes = |s: &serde_json::Value| s["resources"]["gpu_pool.starter"]["nodes"].as_array().unwrap().clone();
    assert!(nodes(&before).iter().all(|n| n["tags"]["gpuplan:lineage"] == before["lineage"]));

    let (code, stdout, stderr) = gpuplan(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "a migrated state plans no changes:\n{stdout}{stderr}");
    assert!(stdout.contains("No changes"), "{stdout}");

    // A reclaim gives the next apply something to write.
    let (code, _, stderr) = gpuplan(dir, &["sim", "interrupt", "starter", "--count", "1"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = gpuplan(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let after = state_json(dir);
    assert_eq!(after["format_version"], 3);
    assert_eq!(after["lineage"], before["lineage"]);
    let after_nodes = nodes(&after);
    assert_eq!(after_nodes.len(), 2);
    for n in &after_nodes {
        let tags = n["tags"].as_object().map(|t| t.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        assert!(tags.iter().all(|k| !k.starts_with("gpuplan:")), "derived tags stored: {n}");
    }
    // The kept node is the same record, less its derived tags.
    let kept = after_nodes.iter().find(|n| nodes(&before).iter().any(|b| b["id"] == n["id"])).expect("a node kept");
    let old = nodes(&before).into_iter().find(|b| b["id"] == kept["id"]).unwrap();
    for field in ["pool", "instance_type", "region", "zone", "capacity", "state"] {
        assert_eq!(kept[field], old[field], "{field}");
    }

    let (code, stdout, stderr) = gpuplan(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "the rewritten state plans no changes:\n{stdout}{stderr}");
    let (code, stdout, _) = gpuplan(dir, &["state", "show", "gpu_pool.starter"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("gpuplan:lineage"), "tags are rebuilt on read:\n{stdout}");
}

#[test]
fn a_newer_format_is_refused_naming_the_newer_gpuplan() {
    let tmp = v1_fleet();
    let dir = tmp.path();
    let mut state = state_json(dir);
    state["format_version"] = 4.into();
    std::fs::write(dir.join("state/default.json"), serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    let (code, stdout, stderr) = gpuplan(dir, &["plan"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let flat = stderr.split_whitespace().filter(|w| *w != "│").collect::<Vec<_>>().join(" ");
    assert!(flat.contains("format_version 4 was written by a newer gpuplan (this one reads 3)"), "{stderr}");
}

#[test]
fn a_format_2_state_gives_the_same_plan_before_and_after_it_is_written_as_format_3() {
    let tmp = fleet("v2");
    let dir = tmp.path();
    let before = raw_state(dir);
    assert_eq!(before["format_version"], 2);
    assert!(before["resources"]["gpu_pool.starter"]["nodes"].is_array() && before["spend"].is_object());
    let (code, planned, stderr) = gpuplan(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "a migrated state plans no changes:\n{planned}{stderr}");
    let (code, shown, _) = gpuplan(dir, &["state", "show", "gpu_pool.starter"]);
    assert_eq!(code, 0);
    let (code, cost, stderr) = gpuplan(dir, &["cost", "--json"]);
    assert_eq!(code, 0, "{stderr}");

    // `state mv` there and back writes the state twice and changes nothing else.
    for (from, to) in [("gpu_pool.starter", "gpu_pool.moved"), ("gpu_pool.moved", "gpu_pool.starter")] {
        let (code, stdout, stderr) = gpuplan(dir, &["state", "mv", from, to]);
        assert_eq!(code, 0, "{stdout}{stderr}");
    }
    let after = raw_state(dir);
    assert_eq!(after["format_version"], 3);
    let nodes = &after["resources"]["gpu_pool.starter"]["nodes"];
    assert_eq!(nodes["each"].as_array().map(Vec::len), Some(2), "packed nodes: {nodes:#}");
    assert!(after["spend"].is_array(), "the ledger in groups: {:#}", after["spend"]);
    assert_eq!(crate::state_plain::plain(after.clone())["spend"], before["spend"], "every ledger line as it was");
    let plain_nodes = crate::state_plain::plain(after)["resources"]["gpu_pool.starter"]["nodes"].clone();
    assert_eq!(plain_nodes, before["resources"]["gpu_pool.starter"]["nodes"], "every node as it was");

    let (code, replanned, stderr) = gpuplan(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{replanned}{stderr}");
    assert_eq!(replanned, planned, "the same plan");
    assert_eq!(gpuplan(dir, &["state", "show", "gpu_pool.starter"]).1, shown, "the same resource");
    // The sim's clock runs on between the two reads: everything but the time read is equal.
    let without_time = |text: &str| {
        let mut v: serde_json::Value = serde_json::from_str(text).expect("cost JSON");
        v["spend"]["as_of"] = serde_json::Value::Null;
        v
    };
    assert_eq!(without_time(&gpuplan(dir, &["cost", "--json"]).1), without_time(&cost), "the same spend");
}
