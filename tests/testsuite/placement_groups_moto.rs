//! Cluster placement groups on AWS (issue 52 item 2, `network { placement_group =
//! "cluster" }`): moto answers `CreatePlacementGroup` with 500, so a scripted front holds
//! the groups (`CreatePlacementGroup`, `DescribePlacementGroups`, `DeletePlacementGroup`)
//! and sends every other call to moto through the real AWS SDK. Apply makes one group per
//! pool and zone, under gpuplan's name and ownership tags, before the nodes that launch
//! into it; a second apply makes none; destroy deletes them after the nodes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::aws::cli::run;
use crate::aws::fake_ec2::{FakeEc2, Request, error, forward, ok};

fn moto() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`"),
    }
}

/// The groups the front's EC2 holds: name → tags.
type Groups = Arc<Mutex<BTreeMap<String, BTreeMap<String, String>>>>;

fn group_xml(name: &str, tags: &BTreeMap<String, String>) -> String {
    let tags: String = tags.iter().map(|(k, v)| format!("<item><key>{k}</key><value>{v}</value></item>")).collect();
    format!(
        "<item><groupName>{name}</groupName><state>available</state><strategy>cluster</strategy>\
<groupId>pg-0{}</groupId><tagSet>{tags}</tagSet></item>",
        name.len()
    )
}

/// The tags of `TagSpecification.1` (the only one gpuplan sends with a group).
fn tags_of(req: &Request) -> BTreeMap<String, String> {
    let p = &req.params;
    (1..)
        .map_while(|i| {
            let k = p.get(&format!("TagSpecification.1.Tag.{i}.Key"))?;
            Some((k.clone(), p.get(&format!("TagSpecification.1.Tag.{i}.Value")).cloned().unwrap_or_default()))
        })
        .collect()
}

fn front(groups: Groups) -> FakeEc2 {
    let host = moto().trim_start_matches("http://").trim_end_matches('/').to_string();
    FakeEc2::start(move |req, _| {
        let name = req.params.get("GroupName").cloned().unwrap_or_default();
        match req.action.as_str() {
            "DescribePlacementGroups" => {
                let held = groups.lock().unwrap();
                let asked: Vec<&String> =
                    req.params.iter().filter(|(k, _)| k.starts_with("Filter.1.Value.")).map(|(_, v)| v).collect();
                let items: String =
                    held.iter().filter(|(n, _)| asked.contains(n)).map(|(n, t)| group_xml(n, t)).collect();
                ok(&req.action, &format!("<placementGroupSet>{items}</placementGroupSet>"))
            }
            "CreatePlacementGroup" => {
                if req.params.get("Strategy").map(String::as_str) != Some("cluster") {
                    return error(400, "InvalidParameterValue", "strategy");
                }
                let mut held = groups.lock().unwrap();
                if held.contains_key(&name) {
                    return error(400, "InvalidPlacementGroup.Duplicate", &format!("{name} exists"));
                }
                let tags = tags_of(req);
                let xml = group_xml(&name, &tags);
                held.insert(name, tags);
                ok(
                    &req.action,
                    &format!("<return>true</return><placementGroup>{}</placementGroup>", &xml[6..xml.len() - 7]),
                )
            }
            "DeletePlacementGroup" => match groups.lock().unwrap().remove(&name) {
                Some(_) => ok(&req.action, "<return>true</return>"),
                None => error(400, "InvalidPlacementGroup.Unknown", &format!("{name} is unknown")),
            },
            _ => forward(&host, req),
        }
    })
}

fn spec(endpoint: &str, desired: u32) -> String {
    format!(
        r#"provider "aws" {{
  region   = "us-east-1"
  endpoint = "{endpoint}"
  image    = "ami-0123456789abcdef0"
}}

gpu_pool "train" {{
  provider       = "aws"
  zones          = ["us-east-1a", "us-east-1b"]
  gpu            = "H100"
  gpus_per_node  = 8
  instance_types = ["p5.48xlarge"]
  nodes {{
    min     = 0
    desired = {desired}
    max     = 4
  }}
  network {{
    placement_group = "cluster"
  }}
}}
"#
    )
}

/// The placement group of each `CreateFleet` call (a batch in a group has one zone, so
/// every override of a call names the same group).
fn fleet_groups(front: &FakeEc2) -> Vec<String> {
    let mut out = Vec::new();
    for call in front.actions("CreateFleet") {
        let named: std::collections::BTreeSet<&String> =
            call.params.iter().filter(|(k, _)| k.ends_with(".Placement.GroupName")).map(|(_, v)| v).collect();
        let overrides = call.params.keys().filter(|k| k.ends_with(".InstanceType")).count();
        let placed = call.params.keys().filter(|k| k.ends_with(".Placement.GroupName")).count();
        assert_eq!(overrides, placed, "every override names its group: {:?}", call.params);
        assert_eq!(named.len(), 1, "one group per call: {:?}", call.params);
        out.extend(named.into_iter().cloned());
    }
    out
}

#[test]
fn apply_makes_one_placement_group_per_pool_and_zone_launches_into_it_and_destroy_deletes_it() {
    let groups: Groups = Arc::default();
    let front = front(groups.clone());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(&front.url, 4)).unwrap();

    let r = run(dir, &["validate"]);
    assert_eq!(r.code, 0, "aws takes `placement_group`: {}\n{}", r.stdout, r.stderr);
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    let state: serde_json::Value = crate::state_plain::read(&dir.join("state/default.json"));
    let lineage = short_lineage(dir);
    let name = |zone: &str| format!("gpuplan-{lineage}-train-{zone}");
    let held = groups.lock().unwrap().clone();
    assert_eq!(held.keys().cloned().collect::<Vec<_>>(), [name("us-east-1a"), name("us-east-1b")], "{held:?}");
    for tags in held.values() {
        assert_eq!(tags.get("gpuplan:managed").map(String::as_str), Some("true"), "{tags:?}");
        assert_eq!(tags.get("gpuplan:address").map(String::as_str), Some("gpu_pool.train"), "{tags:?}");
        assert_eq!(tags.get("gpuplan:lineage"), state["lineage"].as_str().map(str::to_string).as_ref(), "{tags:?}");
    }
    let creates = front.actions("CreatePlacementGroup");
    assert_eq!(creates.len(), 2, "one call per group");
    // Each group exists before the first node that launches into it.
    let first_fleet = front.actions("CreateFleet").iter().map(|c| c.at).min().expect("nodes were launched");
    assert!(creates.iter().all(|c| c.at < first_fleet), "groups first, then nodes");
    let mut launched = fleet_groups(&front);
    launched.sort();
    assert_eq!(launched, [name("us-east-1a"), name("us-east-1b")], "each zone's batch launches into its group");
    let zones: Vec<&str> = state["resources"]["gpu_pool.train"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["zone"].as_str())
        .collect();
    assert_eq!(zones.iter().filter(|z| **z == "us-east-1a").count(), 2, "{zones:?}");
    let nodes = state["resources"]["gpu_pool.train"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4, "{state:#}");

    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(front.actions("CreatePlacementGroup").len(), 2, "a settled pool makes no group");

    let r = run(dir, &["plan", "--destroy", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let pool = plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == "gpu_pool.train").unwrap();
    assert_eq!(pool["pool"]["delete_groups"], serde_json::json!([name("us-east-1a"), name("us-east-1b")]), "{pool:#}");
    assert!(front.actions("DeletePlacementGroup").is_empty(), "a plan deletes nothing");
    let r = run(dir, &["plan", "--destroy"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for zone in ["us-east-1a", "us-east-1b"] {
        let line = format!("- placement group {} (after its nodes)", name(zone));
        assert!(r.stdout.contains(&line), "the text plan lists {line}:\n{}", r.stdout);
    }

    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(groups.lock().unwrap().is_empty(), "destroy deletes the pool's groups");
    let deletes = front.actions("DeletePlacementGroup");
    assert_eq!(deletes.len(), 2, "one call per group");
    let last_terminate = front.actions("TerminateInstances").iter().map(|c| c.at).max().expect("nodes were terminated");
    assert!(deletes.iter().all(|d| d.at > last_terminate), "nodes first, then their groups");
}

#[test]
fn apply_refuses_a_group_of_gpuplan_s_name_that_this_state_did_not_make() {
    let groups: Groups = Arc::default();
    let front = front(groups.clone());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(&front.url, 4)).unwrap();
    // An empty apply fixes the lineage (and so the names); someone else's group takes one.
    std::fs::write(dir.join("main.hcl"), spec(&front.url, 0)).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let lineage = short_lineage(dir);
    let taken = format!("gpuplan-{lineage}-train-us-east-1a");
    groups.lock().unwrap().insert(taken.clone(), BTreeMap::from([("team".to_string(), "other".to_string())]));
    std::fs::write(dir.join("main.hcl"), spec(&front.url, 4)).unwrap();

    let r = run(dir, &["apply", "--auto-approve"]);
    assert_ne!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("PlacementGroupNotOwned") || r.stdout.contains("PlacementGroupNotOwned"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(groups.lock().unwrap().get(&taken).and_then(|t| t.get("team")).map(String::as_str), Some("other"));
    let into_taken = fleet_groups(&front).into_iter().filter(|g| *g == taken).count();
    assert_eq!(into_taken, 0, "no node launches into a group gpuplan does not own");
}

#[test]
fn a_multi_node_job_s_nodes_launch_in_the_group_of_the_pool_s_first_zone_made_first() {
    job_nodes_launch_in_the_first_zone_s_group(3);
}

/// A job of one replica on a pool of no warm nodes: its node too.
#[test]
fn a_job_node_of_a_grouped_pool_launches_into_the_first_zone_s_group() {
    job_nodes_launch_in_the_first_zone_s_group(1);
}

/// A job of `replicas` on a grouped pool of no warm nodes: each node launches into the
/// group of the pool's first zone, made first under the pool's tags (not the run's), and
/// destroy deletes the group after them.
fn job_nodes_launch_in_the_first_zone_s_group(replicas: usize) {
    let groups: Groups = Arc::default();
    let front = front(groups.clone());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = (spec(&front.url, 0)
        + "\njob_template \"ddp\" {\n  image   = \"ghcr.io/example/ddp:1\"\n  command = [\"torchrun\", \"train.py\"]\n  gpus    = 8\n  retries = 0\n}\n\n\
           job \"pretrain\" {\n  template = job_template.ddp\n  pool     = gpu_pool.train\n  replicas = REPLICAS\n}\n")
        .replace("REPLICAS", &replicas.to_string());
    std::fs::write(dir.join("main.hcl"), &spec).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    let lineage = short_lineage(dir);
    let group = format!("gpuplan-{lineage}-train-us-east-1a");
    let held = groups.lock().unwrap().clone();
    assert_eq!(
        held.keys().cloned().collect::<Vec<_>>(),
        std::slice::from_ref(&group),
        "the first zone's group only: {held:?}"
    );
    let tags = &held[&group];
    assert_eq!(tags.get("gpuplan:managed").map(String::as_str), Some("true"), "{tags:?}");
    assert_eq!(tags.get("gpuplan:address").map(String::as_str), Some("gpu_pool.train"), "{tags:?}");
    assert!(!tags.contains_key("gpuplan:job"), "the pool's group, not the job's: {tags:?}");
    let launches = front.actions("RunInstances");
    assert_eq!(launches.len(), replicas, "a node per replica");
    for call in &launches {
        assert_eq!(call.params.get("Placement.GroupName"), Some(&group), "{:?}", call.params);
    }
    let made = front.actions("CreatePlacementGroup");
    assert_eq!(made.len(), 1, "made once, found by the other replicas");
    let first = launches.iter().map(|c| c.at).min().unwrap();
    assert!(made[0].at < first, "the group first, then the replicas");

    let r = run(dir, &["destroy", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(groups.lock().unwrap().is_empty(), "destroy deletes the pool's group after the job's nodes");
}

/// The pool change of a `plan --json` run in `dir`.
fn planned_pool(dir: &std::path::Path) -> serde_json::Value {
    let r = run(dir, &["plan", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == "gpu_pool.train").cloned().unwrap()
}

#[test]
fn a_kept_pool_that_drops_a_zone_or_its_group_deletes_that_zone_s_group_once_its_nodes_there_are_gone() {
    let groups: Groups = Arc::default();
    let front = front(groups.clone());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(&front.url, 4)).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let lineage = short_lineage(dir);
    let name = |zone: &str| format!("gpuplan-{lineage}-train-{zone}");
    assert_eq!(groups.lock().unwrap().len(), 2);

    // us-east-1b dropped: its nodes go, then its group; us-east-1a keeps its own.
    let one_zone =
        |desired: u32| spec(&front.url, desired).replace(r#"["us-east-1a", "us-east-1b"]"#, r#"["us-east-1a"]"#);
    std::fs::write(dir.join("main.hcl"), one_zone(4)).unwrap();
    let pool = planned_pool(dir);
    assert_eq!(pool["action"], "update", "{pool:#}");
    assert_eq!(pool["pool"]["delete_groups"], serde_json::json!([name("us-east-1b")]), "{pool:#}");
    // The text and markdown plans list it after the nodes it waits for.
    let line = format!("placement group {} (after its nodes)", name("us-east-1b"));
    for format in ["text", "markdown"] {
        let r = run(dir, &["plan", "--format", format]);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        let at = r.stdout.find(&line).unwrap_or_else(|| panic!("{format}:\n{}", r.stdout));
        let last_node = r.stdout.rfind("on-demand us-east-1b (").unwrap_or_else(|| panic!("{format}:\n{}", r.stdout));
        assert!(last_node < at, "{format}: the group after its zone's nodes:\n{}", r.stdout);
        let kept = format!("placement group {} (after", name("us-east-1a"));
        assert!(!r.stdout.contains(&kept), "{format}: the kept zone's group stays:\n{}", r.stdout);
    }
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let held: Vec<String> = groups.lock().unwrap().keys().cloned().collect();
    assert_eq!(held, [name("us-east-1a")], "the dropped zone's group is gone");
    let deletes = front.actions("DeletePlacementGroup");
    assert_eq!(deletes.len(), 1);
    let last_terminate = front.actions("TerminateInstances").iter().map(|c| c.at).max().expect("1b's nodes went");
    assert!(deletes[0].at > last_terminate, "its nodes first, then the group");
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "settled: {}\n{}", r.stdout, r.stderr);

    // `network {}` dropped while nodes stay in the group: refused, nothing deleted.
    let ungrouped =
        |desired: u32| one_zone(desired).replace("  network {\n    placement_group = \"cluster\"\n  }\n", "");
    std::fs::write(dir.join("main.hcl"), ungrouped(4)).unwrap();
    let r = run(dir, &["plan"]);
    assert_ne!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = format!("{}{}", r.stdout, r.stderr).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(out.contains("drops `network { placement_group }` while 4 of its nodes stay"), "{out}");
    assert!(out.contains("--replace gpu_pool.train"), "{out}");
    // Its nodes replaced outside the group (the hint's way out), the group goes after them.
    let r = run(dir, &["plan", "--json", "--replace", "gpu_pool.train"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let pool = plan["changes"].as_array().unwrap().iter().find(|c| c["address"] == "gpu_pool.train").unwrap();
    assert_eq!(pool["pool"]["delete_groups"], serde_json::json!([name("us-east-1a")]), "{pool:#}");
    let r = run(dir, &["apply", "--auto-approve", "--replace", "gpu_pool.train"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(groups.lock().unwrap().is_empty(), "no group left behind");
    let fleets = front.actions("CreateFleet");
    let ungrouped_fleet = fleets.last().expect("the replacements launched");
    assert!(!ungrouped_fleet.params.keys().any(|k| k.ends_with(".Placement.GroupName")), "outside any group");
    let state: serde_json::Value = crate::state_plain::read(&dir.join("state/default.json"));
    assert_eq!(state["resources"]["gpu_pool.train"]["nodes"].as_array().unwrap().len(), 4, "{state:#}");
    let r = run(dir, &["plan", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "settled: {}\n{}", r.stdout, r.stderr);

    // The state no longer asks for groups: a later change lists none.
    std::fs::write(dir.join("main.hcl"), ungrouped(0)).unwrap();
    let pool = planned_pool(dir);
    assert!(pool["pool"]["delete_groups"].is_null(), "{pool:#}");
}

/// A plan made before any state exists names no group: its lineage is its own, and an
/// `apply` without the saved plan plans again under another one, so the text and markdown
/// views say `(known after apply)`. A saved plan keeps its lineage (`begin_state_of`):
/// `plan --out` then `apply FILE` makes the groups of the lineage that plan carries, and
/// once the state exists a plan names the group its nodes launch into.
#[test]
fn a_first_plan_names_no_group_its_apply_would_not_make_and_a_saved_plan_keeps_its_lineage() {
    let groups: Groups = Arc::default();
    let front = front(groups.clone());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("main.hcl"), spec(&front.url, 2)).unwrap();
    for format in ["text", "markdown"] {
        let r = run(dir, &["plan", "--format", format]);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("placement group (known after apply)"), "{format}:\n{}", r.stdout);
        assert!(!r.stdout.contains("placement group gpuplan-"), "{format} names a group:\n{}", r.stdout);
    }
    assert!(!dir.join("state/default.json").exists(), "a plan writes no state");

    let r = run(dir, &["plan", "--out", "first.plan"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let r = run(dir, &["show", "--json", "first.plan"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let saved: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let planned = saved["lineage"].as_str().expect("a lineage").to_string();
    let r = run(dir, &["apply", "first.plan"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let state = crate::state_plain::read(&dir.join("state/default.json"));
    assert_eq!(state["lineage"].as_str(), Some(planned.as_str()), "the saved plan's lineage begins the state");
    let short: String = planned.chars().filter(char::is_ascii_alphanumeric).take(8).collect();
    let name = |zone: &str| format!("gpuplan-{short}-train-{zone}");
    let held: Vec<String> = groups.lock().unwrap().keys().cloned().collect();
    assert_eq!(held, [name("us-east-1a"), name("us-east-1b")]);
    let creates = saved["changes"][0]["pool"]["creates"].as_array().expect("creates");
    let mut in_json: Vec<&str> = creates.iter().filter_map(|b| b["hardware"]["placement_group"].as_str()).collect();
    in_json.sort();
    assert_eq!(in_json, held, "the saved plan's JSON names the groups its apply made");

    // With a state, the name is known: a plan that adds a node names the group it exists in.
    std::fs::write(dir.join("main.hcl"), spec(&front.url, 4)).unwrap();
    let r = run(dir, &["plan"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains(&format!("placement group {}", name("us-east-1a"))), "{}", r.stdout);
    assert!(!r.stdout.contains("(known after apply)"), "{}", r.stdout);
}

/// The state's lineage as gpuplan's group names carry it: its first eight letters and digits.
fn short_lineage(dir: &std::path::Path) -> String {
    let state = crate::state_plain::read(&dir.join("state/default.json"));
    state["lineage"].as_str().unwrap().chars().filter(char::is_ascii_alphanumeric).take(8).collect()
}
