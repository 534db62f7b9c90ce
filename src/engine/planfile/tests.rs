//! The plan file: every plan comes back equal, and a damaged or foreign file is refused
//! with its path in the message.

use std::io::Read;
use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value as Json, json};

use super::*;

/// A plan with every part the file must keep, built from its JSON so that the test does
/// not depend on where the plan's types live. Strings and numbers vary with the property.
fn plan(pools: usize, text: &str, serial: u64, count: u32, price: f64) -> Plan {
    let changes: Vec<Json> = (0..pools)
        .map(|i| {
            let action = ["create", "update", "replace", "delete", "no-op"][i % 5];
            json!({
                "address": format!("gpu_pool.p{i}"),
                "action": action,
                "before": if i % 2 == 0 { Json::Null } else { json!({"gpu": "L4", "nodes": {"desired": count}}) },
                "after": {"gpu": "H100", "labels": {"team": text}, "price": price, "zones": ["a", "b"]},
                "reasons": [{"code": "node_count", "message": text}],
                "pool": {
                    "provider": "sim", "provider_kind": "sim", "region": "us-east-1", "gpu": "H100",
                    "before": {"on_demand": 1, "spot": 0, "gpus_per_node": 8},
                    "after": {"on_demand": count, "spot": 2, "gpus_per_node": 8},
                    "creates": [{
                        "pool": format!("gpu_pool.p{i}"), "region": "us-east-1", "zone": "us-east-1a",
                        "instance_types": ["p5.48xlarge"], "capacity": "spot", "count": count,
                        "max_spot_price": price, "token": format!("gp-{i}-{serial}"),
                        "tags": {"gpuplan:managed": "true", "team": text},
                    }],
                    "deletes": [{"id": format!("i-{i}"), "zone": "us-east-1b", "instance_type": "p5.48xlarge",
                                 "capacity": "on-demand", "reason": text}],
                    "adopt": [{"id": format!("orphan-{i}"), "pool": format!("gpu_pool.p{i}"),
                               "instance_type": "p5.48xlarge", "region": "us-east-1", "zone": "us-east-1a",
                               "capacity": "spot", "state": "running", "tags": {"gpuplan:managed": "true"}}],
                    "forget": [format!("gone-{i}")],
                    "zones": ["us-east-1a", "us-east-1b"],
                    "fallback": "wait",
                    "create_before_destroy": i % 2 == 0,
                },
                "after_changes": if i > 0 { json!([format!("gpu_pool.p{}", i - 1)]) } else { json!([]) },
            })
        })
        .collect();
    let pool_cost = json!({
        "address": "gpu_pool.p0", "gpu": text, "gpus_after": count, "gpus_before": 0,
        "hourly_after": price, "hourly_before": 0.0, "instance_type": "p5.48xlarge",
        "on_demand_after": 0, "on_demand_before": 0, "on_demand_hourly_after": 0.0,
        "on_demand_price": null, "price_per_gpu_hour": price, "provider": "sim", "region": "us-east-1",
        "spot_after": count, "spot_before": 0, "spot_hourly_after": price,
        "spot_price": {"source": "catalog", "usd_per_hour": price, "estimated": false},
    });
    let cost = json!({
        "currency": "USD", "exchange_rates": [], "hourly_after": price, "hourly_before": 0.0,
        "hourly_delta": price, "hours_per_month": 730.0, "monthly_after": price, "monthly_before": 0.0,
        "monthly_delta": price, "on_demand_hourly_after": 0.0, "quotas": [], "spot_hourly_after": price,
        "range": {"hourly_expected": price, "hourly_max": price, "hourly_min": 0.0},
        "pools": [pool_cost],
    });
    let doc = json!({
        "format_version": FILE_FORMAT_VERSION,
        "lineage": "4f9c1a52-0000-4000-8000-000000000001",
        "serial": serial,
        "spec_digest": format!("sha256:{serial:x}"),
        "refreshed": true,
        "targets": ["gpu_pool.p0"],
        "changes": changes,
        "drift": [{"address": "gpu_pool.p1", "kind": "reclaimed", "node_id": "i-9", "message": text}],
        "summary": {"add": pools, "change": 1, "destroy": 2},
        "errors": [{"address": "gpu_pool.p0", "message": text, "hint": "plan again"}],
        "cost": cost,
        "policies": [{"name": "min_spot_share", "enforcement": "soft", "passed": false, "message": text,
                      "overridden": true, "source": "policies/spot.hcl:1"}],
    });
    serde_json::from_value(doc).expect("the test plan is a plan")
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The error's message, which must name the file.
fn refused(path: &Path) -> String {
    let err = load(path).expect_err("a damaged plan file was read");
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "the error does not name the file: {message}");
    assert!(err.hint().is_some(), "no hint: {message}");
    message
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_plan_comes_back_equal(
        pools in 0usize..12,
        text in "\\PC{0,24}",
        serial in any::<u64>(),
        count in any::<u32>(),
        // Prices in cents: `serde_json` reads long-digit floats to within an ulp only.
        cents in 0u64..100_000_000_000,
    ) {
        let price = cents as f64 / 100.0;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.out");
        let plan = plan(pools, &text, serial, count, price);
        save(&path, &plan).unwrap();
        prop_assert_eq!(load(&path).unwrap(), plan);
        prop_assert!(!dir.path().join("plan.tmp").exists(), "the temporary file was left behind");
    }

    #[test]
    fn a_truncated_file_is_refused_naming_it(cut in 0.0f64..1.0) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.out");
        save(&path, &plan(20, "truncated", 7, 3, 1.5)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let keep = ((bytes.len() as f64 * cut) as usize).min(bytes.len() - 1);
        let cut_path = write(dir.path(), "cut.out", &bytes[..keep]);
        refused(&cut_path);
    }

    #[test]
    fn a_corrupted_byte_is_refused_naming_it(at in 0.0f64..1.0, flip in 1u8..=255) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.out");
        save(&path, &plan(20, "corrupt", 7, 3, 1.5)).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        // Past the 10-byte gzip header (whose flag and time bytes a reader may ignore).
        let i = 10 + ((bytes.len() - 10) as f64 * at) as usize;
        let i = i.min(bytes.len() - 1);
        bytes[i] ^= flip;
        let bad = write(dir.path(), "bad.out", &bytes);
        refused(&bad);
    }
}

#[test]
fn the_file_is_gzip_of_the_compact_plan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.out");
    let plan = plan(3, "x", 1, 1, 1.0);
    save(&path, &plan).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes[..2], GZIP_MAGIC);
    let mut json = String::new();
    open(&path).unwrap().read_to_string(&mut json).unwrap();
    assert_eq!(json, serde_json::to_string(&plan).unwrap());
}

/// A plan of many blocks, compressed on its own thread while the next block is written,
/// inflates to exactly the compact JSON, in order.
#[test]
fn a_plan_of_many_blocks_is_gzip_of_the_compact_plan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.out");
    let plan = plan(2_000, "blocks", 7, 3, 2.5);
    let compact = serde_json::to_string(&plan).unwrap();
    assert!(compact.len() > 8 * BUFFER, "{} bytes: several blocks", compact.len());
    save(&path, &plan).unwrap();
    let mut json = String::new();
    open(&path).unwrap().read_to_string(&mut json).unwrap();
    assert!(json == compact, "the file inflates to the compact plan");
    assert!(!path.with_extension("tmp").exists(), "no temporary file is left");
}

#[test]
fn a_plain_json_plan_file_from_an_earlier_version_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan(3, "old", 4, 2, 0.5);
    let path = write(dir.path(), "old.json", serde_json::to_string_pretty(&plan).unwrap().as_bytes());
    assert_eq!(load(&path).unwrap(), plan);
}

#[test]
fn foreign_files_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(dir.path(), "empty.out", b"");
    assert!(refused(&empty).contains("empty"));
    let text = write(dir.path(), "notes.txt", b"terraform plan output\n");
    assert!(refused(&text).contains("neither a gzip stream nor JSON"));
    let state = write(dir.path(), "state.json", br#"{"format_version": 1, "serial": 3, "resources": {}}"#);
    assert!(refused(&state).contains("is not a gpuplan plan file"));
    let missing = dir.path().join("missing.out");
    assert!(refused(&missing).contains("cannot read the plan file"));

    let mut newer = plan(1, "future", 1, 1, 1.0);
    newer.format_version = FILE_FORMAT_VERSION + 1;
    let future = dir.path().join("future.out");
    save(&future, &newer).unwrap();
    assert!(refused(&future).contains(&format!("has format {}", FILE_FORMAT_VERSION + 1)));
}

#[test]
fn a_plan_of_another_format_is_refused_naming_its_version_even_when_it_does_not_read_as_this_one() {
    let dir = tempfile::tempdir().unwrap();
    // A format-1 plan: what it lacks or has otherwise would fail the parse, which would
    // call it "not a gpuplan plan file"; its version says more.
    let old = br#"{"format_version": 1, "lineage": "l", "serial": 2, "spec_digest": "d",
                   "spec_sources": {"digest": "x", "env": []}, "refreshed": true}"#;
    let old = write(dir.path(), "old.plan", old);
    let message = refused(&old);
    assert!(message.contains("has format 1; this gpuplan reads format 2"), "{message}");
    assert_eq!(
        load(&old).unwrap_err().hint().as_deref(),
        Some("make the plan again with this version of gpuplan: `gpuplan plan --out FILE`")
    );
}

#[test]
fn data_after_the_compressed_plan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.out");
    save(&path, &plan(2, "x", 1, 1, 1.0)).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"garbage");
    let appended = write(dir.path(), "appended.out", &bytes);
    assert!(refused(&appended).contains("truncated or corrupt"));
}

/// Any flipped byte of the compressed body is reported as damage, even where it inflates
/// to JSON that fails before the gzip trailer is reached.
#[test]
fn a_flipped_byte_anywhere_is_reported_as_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.out");
    save(&path, &plan(20, "flip", 1, 2, 1.5)).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    // After the 10-byte gzip header, up to the 8-byte trailer.
    for at in (10..bytes.len() - 8).step_by(((bytes.len() - 18) / 97).max(1)) {
        let mut bad = bytes.clone();
        bad[at] ^= 0x55;
        let p = write(dir.path(), "flipped.out", &bad);
        let msg = refused(&p);
        assert!(msg.contains("truncated or corrupt"), "byte {at}: {msg}");
    }
}

#[test]
fn a_plan_read_back_holds_no_spare_room_in_its_lists() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.out");
    save(&path, &plan(5, "x", 1, 1, 1.0)).unwrap();
    let read = load(&path).unwrap();
    assert_eq!(read.changes.capacity(), 5);
    for c in &read.changes {
        assert_eq!((c.reasons.len(), c.reasons.capacity()), (1, 1));
        let pool = c.pool.as_ref().unwrap();
        assert_eq!((pool.creates.len(), pool.creates.capacity()), (1, 1));
        assert_eq!(pool.creates[0].instance_types.capacity(), 1);
        assert_eq!((pool.deletes.len(), pool.deletes.capacity()), (1, 1));
    }
    assert_eq!(read.cost.as_ref().unwrap().pools.capacity(), 1);
}

#[test]
fn a_plan_parsed_on_the_cores_is_the_plan_parsed_on_one_thread() {
    for (pools, text) in [(0, "x"), (1, "\"changes\": []"), (2_000, "a,]}\\\"changes\":[")] {
        let plan = plan(pools, text, 7, 3, 1.5);
        let json = serde_json::to_string(&plan).unwrap();
        let on_cores = parse_on_cores(&json).unwrap();
        assert_eq!(on_cores, plan, "{pools} changes");
        assert_eq!(on_cores.changes.capacity(), on_cores.changes.len(), "no spare room");
    }
    // A change that does not read is an error there, and the plain parse says where.
    let plan = plan(3, "x", 7, 3, 1.5);
    let json = serde_json::to_string(&plan).unwrap().replacen("\"action\":\"create\"", "\"action\":\"explode\"", 1);
    assert!(parse_on_cores(&json).is_err());
    let err = parse(json.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("line 1 column"), "{err}");
    // Reading a plan with its changes skipped leaves later plans on this thread whole.
    let whole: Plan = serde_json::from_slice(&serde_json::to_vec(&plan).unwrap()).unwrap();
    assert_eq!(whole.changes.len(), 3);
}
