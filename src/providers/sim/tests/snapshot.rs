//! The snapshot's format 2 (nodes in groups alike, tokens short) reads back the world
//! written, and format 1 still reads; a newer format is refused by name.

use super::{LINEAGE, cloud_path, pool};
use crate::model::hardware::Hardware;
use crate::providers::sim::world::{FORMAT_VERSION, SimNode, TokenRecord, World};
use crate::providers::sim::{SimCloud, SimConfig};
use crate::providers::{Capacity, NodeState, TAG_ADDRESS, TAG_LINEAGE, TAG_MANAGED, Tags};

fn node(id: &str, pool_name: Option<&str>, tags: &[(&str, &str)]) -> SimNode {
    SimNode {
        id: id.into(),
        pool: pool_name.map(pool),
        instance_type: "p4de.24xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::OnDemand,
        state: NodeState::Running,
        image: None,
        tags: tags.iter().copied().collect::<Tags>(),
        launched_ms: 1_000 + id.len() as u64,
        ended_ms: None,
        hardware: None,
    }
}

/// Nodes of every kind a world holds: gpuplan's own (tagged with their pool), one whose
/// address tag names another pool, one that lacks it, a foreign one with no pool and
/// none; fields that differ from their group's (zone, capacity, state, image, hardware,
/// an end); tokens that placed one node, several, and fewer than asked.
fn world() -> World {
    let own = |p: &str, team: &str| -> Vec<(String, String)> {
        vec![
            (TAG_ADDRESS.into(), format!("gpu_pool.{p}")),
            (TAG_LINEAGE.into(), LINEAGE.into()),
            (TAG_MANAGED.into(), "true".into()),
            ("team".into(), team.into()),
        ]
    };
    let tags = |v: &[(String, String)]| v.iter().map(|(k, val)| (k.as_str(), val.as_str())).collect::<Tags>();
    let mut nodes = Vec::new();
    for (i, p) in ["a", "b", "c", "d"].iter().enumerate() {
        let mut n = node(&format!("i-{i:02}"), Some(p), &[]);
        n.tags = tags(&own(p, if i % 2 == 0 { "x" } else { "y" }));
        nodes.push(n);
    }
    nodes[1].zone = "us-east-1b".into();
    nodes[1].capacity = Capacity::Spot;
    nodes[2].state = NodeState::Reclaimed;
    nodes[2].ended_ms = Some(5_000);
    nodes[3].image = Some("ami-1".into());
    nodes[3].hardware = Some(Box::new(Hardware { placement_group: Some("pg".into()), ..Hardware::default() }));
    let mut other = node("i-10", Some("e"), &[]);
    other.tags = tags(&own("somewhere_else", "x"));
    let mut lacking = node("i-11", Some("e"), &[(TAG_MANAGED, "true"), ("team", "x")]);
    lacking.instance_type = "p5.48xlarge".into();
    let foreign = node("i-12", None, &[]);
    let tagged_foreign = node("i-13", None, &[("owner", "someone")]);
    let mut w = World::default();
    for n in nodes.into_iter().chain([other, lacking, foreign, tagged_foreign]) {
        w.nodes.insert(n.id.clone(), n);
    }
    let record = |ids: &[&str], requested| TokenRecord { ids: ids.iter().map(|s| s.to_string()).collect(), requested };
    w.tokens.insert("gp-one".into(), record(&["i-00"], 1));
    w.tokens.insert("gp-two".into(), record(&["i-01", "i-02"], 2));
    w.tokens.insert("gp-short".into(), record(&["i-03"], 3));
    w.tokens.insert("gp-none".into(), record(&[], 0));
    w.seq = 7;
    w.counter = 14;
    w
}

#[test]
fn format_2_reads_back_the_world_written() {
    let w = world();
    let text = serde_json::to_string_pretty(&w).unwrap();
    let back: World = serde_json::from_str(&text).unwrap();
    assert_eq!(back, w, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["format_version"], FORMAT_VERSION);
    assert_eq!(FORMAT_VERSION, 2);
    // Groups by the tags shared once a node's own address tag is left out: team x, team
    // y, the node tagged with another pool, the node lacking the tag, the untagged
    // foreign node and the tagged one.
    let groups = v["nodes"].as_array().expect("nodes as groups");
    assert_eq!(groups.len(), 6, "{text}");
    assert_eq!(groups[0]["common"]["address_tag"], true);
    assert!(groups[0]["common"]["tags"].get(TAG_ADDRESS).is_none(), "{text}");
    assert_eq!(groups[0]["each"][0], serde_json::json!({"id": "i-00", "pool": "gpu_pool.a", "launched_ms": 1004}));
    // The node whose address tag names another pool keeps it in its group's tags.
    let other = groups.iter().find(|g| g["each"][0]["id"] == "i-10").unwrap();
    assert_eq!(other["common"]["tags"][TAG_ADDRESS], "gpu_pool.somewhere_else");
    assert_eq!(v["tokens"]["gp-one"], "i-00");
    assert_eq!(v["tokens"]["gp-two"], serde_json::json!(["i-01", "i-02"]));
    assert_eq!(v["tokens"]["gp-short"], serde_json::json!({"ids": ["i-03"], "requested": 3}));
    assert_eq!(v["tokens"]["gp-none"], serde_json::json!([]));
}

/// Format 1 (nodes whole in a map by id, tokens as objects) reads as it is: the same
/// world format 2 then writes and reads back.
#[test]
fn format_1_reads_as_it_is() {
    let w = world();
    let mut v = serde_json::to_value(&w).unwrap();
    v["format_version"] = 1.into();
    // The map serialized as it is: each node whole (only `World` writes the groups).
    v["nodes"] = serde_json::to_value(&w.nodes).unwrap();
    let whole = |r: &TokenRecord| serde_json::json!({"ids": r.ids, "requested": r.requested});
    v["tokens"] = w.tokens.iter().map(|(t, r)| (t.clone(), whole(r))).collect::<serde_json::Map<_, _>>().into();
    assert!(v["nodes"]["i-00"]["tags"].get(TAG_ADDRESS).is_some(), "{v:#}");
    let mut old: World = serde_json::from_value(v).unwrap();
    assert_eq!(old.format_version, 1);
    old.format_version = FORMAT_VERSION;
    assert_eq!(old, w);
}

/// A snapshot of a newer format is refused as such, even when its nodes do not fit this
/// gpuplan's reading; the current and the older one open.
#[test]
fn a_newer_format_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = cloud_path(&dir);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, r#"{"format_version": 3, "seq": 0, "counter": 0, "nodes": "elsewhere"}"#).unwrap();
    let e = SimCloud::open(&path, SimConfig::default()).err().expect("refused");
    assert!(e.to_string().contains("format_version 3 was written by a newer gpuplan (this one reads 2)"), "{e}");
    let mut v = serde_json::to_value(world()).unwrap();
    for version in [2, 1] {
        v["format_version"] = version.into();
        if version == 1 {
            v["nodes"] = serde_json::json!({});
        }
        std::fs::write(&path, v.to_string()).unwrap();
        let cloud = SimCloud::open(&path, SimConfig::default()).expect("opens");
        assert_eq!(cloud.nodes().len(), if version == 1 { 0 } else { 8 });
    }
}
