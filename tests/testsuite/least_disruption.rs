//! Least disruption (issue 46): a change the pool's shape can reach by adding nodes keeps
//! every node that runs, and the fleet it applies plans empty afterwards.

use std::path::Path;

fn ok(dir: &Path, args: &[&str]) -> (String, String) {
    let (code, stdout, stderr) = crate::sim_run::run(dir, args);
    assert_eq!(code, 0, "gpuplan {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr)
}

/// The ids of the starter pool's nodes in state, with their zone and capacity.
fn nodes(dir: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(dir.join("state/default.json")).expect("state");
    let state: serde_json::Value = crate::state_plain::plain(serde_json::from_str(&text).expect("state JSON"));
    let nodes = state["resources"]["gpu_pool.starter"]["nodes"].as_array().cloned().unwrap_or_default();
    let mut out: Vec<(String, String, String)> = nodes
        .iter()
        .map(|n| {
            let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
            (s("id"), s("zone"), s("capacity"))
        })
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

#[test]
fn growing_the_starter_fleet_to_three_nodes_at_half_spot_keeps_its_spot_node() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    ok(dir, &["init"]);
    ok(dir, &["apply", "--auto-approve"]);
    let before = nodes(dir);
    assert_eq!(before.len(), 1);
    assert_eq!((before[0].1.as_str(), before[0].2.as_str()), ("us-east-1a", "spot"));

    let vars = ["--var", "nodes=3", "--var", "spot_percent=50"];
    let (json, _) = ok(dir, &[&["plan", "--json"][..], &vars].concat());
    let plan: serde_json::Value = serde_json::from_str(&json).expect("plan JSON");
    let change = plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == "gpu_pool.starter").unwrap();
    let pool = &change["pool"];
    assert_eq!(pool["deletes"], serde_json::json!([]), "no node is stopped: {pool}");
    let creates: Vec<(String, String, u64)> = pool["creates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (c["zone"].as_str().unwrap().into(), c["capacity"].as_str().unwrap().into(), c["count"].as_u64().unwrap())
        })
        .collect();
    let want = |z: &str| (z.to_string(), "on-demand".to_string(), 1);
    assert_eq!(creates, [want("us-east-1b"), want("us-east-1c")]);
    let (text, _) = ok(dir, &[&["plan"][..], &vars].concat());
    assert!(!text.contains("rebalance") && !text.contains(&format!("- {}", before[0].0)), "{text}");

    let (_, applied) = ok(dir, &[&["apply", "--auto-approve"][..], &vars].concat());
    assert!(applied.contains("Nodes: 2 launched, 0 terminated"), "{applied}");
    let after = nodes(dir);
    let spread: Vec<(&str, &str)> = after.iter().map(|(_, z, c)| (z.as_str(), c.as_str())).collect();
    assert_eq!(spread, [("us-east-1a", "spot"), ("us-east-1b", "on-demand"), ("us-east-1c", "on-demand")]);
    assert_eq!(after[0].0, before[0].0, "the spot node that ran is the one that runs");
    // Converged: the same variables plan no change.
    let (code, stdout, stderr) = crate::sim_run::run(dir, &[&["plan", "--detailed-exitcode"][..], &vars].concat());
    assert_eq!(code, 0, "{stdout}{stderr}");
}
