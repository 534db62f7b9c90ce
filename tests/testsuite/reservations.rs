//! Reservations on the sim cloud (issue 52, docs/design/big-runs.md): Capacity Block
//! offerings listed by `gpuplan sim capacity-blocks`; a `reservation` block's rules at the
//! block; the plan's commitment line in text, markdown, JSON and policies; apply buying,
//! the state recording, destroy cancelling what can be cancelled and forgetting (with a
//! note) what cannot.

use std::path::Path;

use crate::sim_run::run;

const BLOCK: &str = r#"provider "sim" {}

reservation "h100_block" {
  provider      = "sim"
  region        = "us-east-1"
  zone          = "us-east-1a"
  kind          = "capacity_block"
  instance_type = "p5.48xlarge"
  instance_count = 2
  start         = "2027-01-10T00:00:00Z"
  duration      = "7d"
  max_price_usd = 10000
  commit        = true
}
"#;

const ON_DEMAND: &str = r#"provider "sim" {}

reservation "odcr" {
  provider      = "sim"
  region        = "us-east-1"
  zone          = "us-east-1b"
  kind          = "on_demand"
  instance_type = "p5.48xlarge"
  instance_count = 1
}
"#;

fn folder(spec: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("main.hcl"), spec).unwrap();
    tmp
}

fn state(dir: &Path) -> serde_json::Value {
    crate::state_plain::read(&dir.join("state/default.json"))
}

fn sim_world(dir: &Path) -> String {
    // The snapshot and its log together: a purchase may sit in either.
    let mut text = String::new();
    for entry in std::fs::read_dir(dir.join("state")).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("default.sim")) {
            text += &std::fs::read_to_string(&path).unwrap_or_default();
        }
    }
    text
}

#[test]
fn sim_capacity_blocks_lists_fixed_windows_priced_up_front() {
    let tmp = folder("provider \"sim\" {}\n");
    let args = [
        "sim",
        "capacity-blocks",
        "--instance-type",
        "p5.48xlarge",
        "--count",
        "2",
        "--duration",
        "7d",
        "--zone",
        "us-east-1a",
        "--start",
        "2027-01-10T00:00:00Z",
    ];
    let (code, out, err) = run(tmp.path(), &args);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "three windows in one zone:\n{out}");
    // 2 × 55.04 USD/h × 168 h at 50, 45 and 40 percent off, cheapest first.
    assert!(rows[0].contains("2027-01-10 00:00Z") && rows[0].contains("2027-01-17 00:00Z"), "{out}");
    assert!(rows[0].ends_with("9,246.72"), "{out}");
    assert!(rows[1].contains("2027-01-12 00:00Z") && rows[1].ends_with("10,171.39"), "{out}");
    assert!(rows[2].contains("2027-01-11 00:00Z") && rows[2].ends_with("11,096.06"), "{out}");

    let (code, _, err) =
        run(tmp.path(), &["sim", "capacity-blocks", "--instance-type", "p5.48xlarge", "--duration", "36h"]);
    assert_eq!(code, 1);
    assert!(err.contains("whole days") && err.contains("hint:"), "{err}");
}

#[test]
fn a_capacity_block_without_commit_is_an_error_at_the_block() {
    let spec = BLOCK.replace("  commit        = true\n", "");
    let tmp = folder(&spec);
    let (code, _, err) = run(tmp.path(), &["validate"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot be cancelled: buying it needs `commit = true`"), "{err}");
    assert!(err.contains("main.hcl:3:1"), "located at the block: {err}");
    assert!(err.contains("add `commit = true`"), "{err}");
    assert!(!tmp.path().join("state/default.json").exists(), "nothing written");
}

#[test]
fn a_reservation_on_a_cloud_without_them_is_a_located_error() {
    let spec = r#"provider "tencentcloud" {
  region = "ap-guangzhou"
}

reservation "r" {
  provider      = "tencentcloud"
  zone          = "ap-guangzhou-3"
  kind          = "on_demand"
  instance_type = "GN10Xp.2XLARGE40"
  instance_count = 1
}
"#;
    let tmp = folder(spec);
    let (code, _, err) = run(tmp.path(), &["validate"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("reservation is not on this cloud (tencentcloud)"), "{err}");
    assert!(err.contains("main.hcl:8:"), "located at `kind`: {err}");
    let alicloud = spec
        .replace("tencentcloud", "alicloud")
        .replace("\"on_demand\"", "\"capacity_block\"\n  duration = \"7d\"\n  commit = true");
    std::fs::write(tmp.path().join("main.hcl"), alicloud).unwrap();
    let (code, _, err) = run(tmp.path(), &["validate"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not on this cloud (alicloud)") && err.contains("alicloud sells: on_demand"), "{err}");
}

#[test]
fn a_capacity_block_is_planned_with_its_commitment_bought_and_forgotten_on_destroy() {
    let tmp = folder(BLOCK);
    let dir = tmp.path();
    let line = "commits 9,246.72 USD up front, cannot be cancelled, ends 2027-01-17 00:00Z";
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("buy reservation.h100_block: capacity_block, 2 × p5.48xlarge in us-east-1a"), "{out}");
    assert!(out.contains(line), "{out}");
    let (code, md, _) = run(dir, &["plan", "--format", "markdown"]);
    assert_eq!(code, 0);
    assert!(md.contains("**Reservations**") && md.contains(line), "{md}");
    let (code, json, err) = run(dir, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let r = &doc["reservations"][0];
    assert_eq!(r["address"], "reservation.h100_block");
    assert_eq!(r["kind"], "capacity_block");
    assert_eq!(r["instance_type"], "p5.48xlarge");
    assert_eq!(r["count"], 2);
    assert_eq!(r["zone"], "us-east-1a");
    assert_eq!(r["start"], "2027-01-10T00:00:00Z");
    assert_eq!(r["end"], "2027-01-17T00:00:00Z");
    assert_eq!(r["commitment_usd"], 9246.72);
    assert_eq!(r["cancellable"], false);
    assert_eq!(r["used"], 0);

    // A policy reads `plan.reservations[ADDRESS]`.
    std::fs::create_dir(dir.join("policies")).unwrap();
    let policy = r#"policy "prepaid_cap" {
  enforcement = "hard"
  assert      = plan.reservations["reservation.h100_block"].commitment_usd <= 5000
  message     = "prepays ${plan.reservations["reservation.h100_block"].commitment_usd} USD"
}
"#;
    std::fs::write(dir.join("policies/cap.hcl"), policy).unwrap();
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 3, "a hard policy denies the purchase: {out}{err}");
    assert!(format!("{out}{err}").contains("prepays 9246.72 USD"), "{out}{err}");
    std::fs::remove_dir_all(dir.join("policies")).unwrap();

    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let st = state(dir);
    let rec = &st["resources"]["reservation.h100_block"];
    let id = rec["reservation"]["id"].as_str().expect("the reservation's id is recorded").to_string();
    assert!(id.starts_with("cr-"), "{rec}");
    assert_eq!(rec["reservation"]["upfront_usd"], 9246.72);
    assert_eq!(rec["provider"], "sim");
    assert!(sim_world(dir).contains(&id), "the sim holds {id}");

    // Applied again: nothing more is bought.
    let (code, out, err) = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("keep reservation.h100_block") && out.contains(line), "{out}");

    // A bought block cannot change in place.
    std::fs::write(dir.join("main.hcl"), BLOCK.replace("instance_count = 2", "instance_count = 3")).unwrap();
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("is already bought: its `instance_count` cannot change in place"),
        "{out}{err}"
    );
    std::fs::write(dir.join("main.hcl"), BLOCK).unwrap();

    let (code, out, err) = run(dir, &["plan", "--destroy"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("forget reservation.h100_block"), "{out}");
    assert!(
        out.contains(&format!(
            "cannot be cancelled: apply forgets it, and {id} stays paid and reserved until 2027-01-17 00:00Z"
        )),
        "{out}"
    );
    let (code, _, err) = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    assert!(state(dir)["resources"].get("reservation.h100_block").is_none(), "forgotten");
    assert!(!sim_world(dir).contains("\"cancelled\""), "a Capacity Block is never cancelled");
}

#[test]
fn an_on_demand_reservation_is_bought_and_cancelled_on_destroy() {
    let tmp = folder(ON_DEMAND);
    let dir = tmp.path();
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("commits 55.04 USD/h, used or not, cancellable, until cancelled"), "{out}");
    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let id = state(dir)["resources"]["reservation.odcr"]["reservation"]["id"].as_str().unwrap().to_string();
    let (code, out, err) = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(state(dir)["resources"].get("reservation.odcr").is_none());
    let world = sim_world(dir);
    assert!(world.contains(&id) && world.contains("\"cancelled\""), "{id} cancelled in the sim:\n{world}");
}

#[test]
fn a_capacity_block_past_its_window_is_read_back_as_ended_not_kept() {
    let tmp = folder(BLOCK);
    let dir = tmp.path();
    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("keep reservation.h100_block"), "scheduled, still held: {out}");

    // The sim clock passes the window's end (2027-01-17): the cloud says it expired.
    let (code, _, err) = run(dir, &["sim", "advance", "320days"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 2, "apply records what happened: {out}{err}");
    assert!(!out.contains("keep reservation.h100_block"), "{out}");
    assert!(out.contains("ended reservation.h100_block: capacity_block, 2 × p5.48xlarge in us-east-1a"), "{out}");
    assert!(out.contains("expired 2027-01-17 00:00Z: holds no capacity"), "{out}");
    assert!(out.contains("holds no capacity now, and apply buys nothing in its place"), "{out}");
    let (code, json, err) = run(dir, &["plan", "--json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["reservations"][0]["action"], "ended", "{json}");
    assert_eq!(doc["reservations"][0]["state"], "expired", "{json}");

    let (code, _, err) = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(state(dir)["resources"]["reservation.h100_block"]["reservation"]["state"], "expired");
    let (code, out, err) = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0, "recorded: nothing more to do: {out}{err}");
    assert!(out.contains("ended reservation.h100_block"), "{out}");

    // Removed from the spec: forgotten, with no "stays paid" note (it has ended).
    std::fs::write(dir.join("main.hcl"), "provider \"sim\" {}\n").unwrap();
    let (code, out, err) = run(dir, &["plan"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("forget reservation.h100_block") && !out.contains("stays paid"), "{out}");
}
