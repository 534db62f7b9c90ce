//! Planner behaviour that no snapshot case pins down on its own: the order of deletes in
//! a destroy, over dependency shapes larger than the snapshot cases.

use std::collections::BTreeMap;

use crate::json_text::JsonText;
use crate::plan::diff::{PlanInput, plan};
use crate::plan::{Action, Plan};
use crate::spec::Spec;
use crate::state::{ResourceState, State};

/// A state of configuration-only quotas (no nodes, no provider) with recorded dependencies.
fn state(deps: &[(&str, &[&str])]) -> State {
    let mut s = State::new("00000000-0000-4000-8000-000000000000".into());
    for (addr, on) in deps {
        let r = ResourceState {
            kind: "quota".into(),
            provider: None,
            provider_kind: None,
            region: None,
            config: JsonText::from_value(&serde_json::json!({"max_gpus": 8})),
            sensitive: Vec::new(),
            dependencies: on.iter().map(|d| d.to_string()).collect(),
            nodes: vec![],
            job: None,
            fallback: None,
            placement: None,
            reservation: None,
        };
        s.resources.insert(addr.to_string(), r);
    }
    s
}

fn destroy(state: &State) -> Plan {
    let spec = Spec::default();
    plan(&PlanInput { destroy: true, spec_digest: String::new(), ..PlanInput::offline(&spec, state) })
        .expect("the state's keys are addresses")
}

/// Each delete's `after_changes`, by address.
fn waits(plan: &Plan) -> BTreeMap<String, Vec<String>> {
    plan.changes
        .iter()
        .filter(|c| c.action == Action::Delete)
        .map(|c| (c.address.to_string(), c.after_changes.iter().map(ToString::to_string).collect()))
        .collect()
}

#[test]
fn destroy_waits_for_every_dependent_in_address_order() {
    // b and c depend on a; c also on b (written twice, and out of order); d on nothing.
    let s = state(&[
        ("quota.a", &[]),
        ("quota.b", &["quota.a"]),
        ("quota.c", &["quota.b", "quota.a", "quota.b"]),
        ("quota.d", &[]),
    ]);
    let w = waits(&destroy(&s));
    assert_eq!(w["quota.a"], ["quota.b", "quota.c"]);
    assert_eq!(w["quota.b"], ["quota.c"]);
    assert!(w["quota.c"].is_empty());
    assert!(w["quota.d"].is_empty());
}

#[test]
fn deletes_do_not_wait_for_resources_that_stay() {
    // quota.b stays in the spec, so quota.a's delete must not wait for it; quota.c goes
    // and depended on quota.a (and on a resource the state no longer has).
    let s = state(&[("quota.a", &[]), ("quota.b", &["quota.a"]), ("quota.c", &["quota.a", "quota.gone"])]);
    let mut sources = crate::diag::Sources::default();
    sources.add("main.hcl", "quota \"b\" {\n  max_gpus = 8\n}\n");
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let p = plan(&PlanInput { spec_digest: String::new(), ..PlanInput::offline(&loaded.spec, &s) })
        .expect("the state's keys are addresses");
    let w = waits(&p);
    assert_eq!(w.keys().collect::<Vec<_>>(), ["quota.a", "quota.c"]);
    assert_eq!(w["quota.a"], ["quota.c"]);
    assert!(w["quota.c"].is_empty());
}

#[test]
fn a_long_chain_is_ordered_link_by_link() {
    let names: Vec<String> = (0..2_000).map(|i| format!("quota.q{i:05}")).collect();
    let deps: Vec<Vec<&str>> =
        (0..names.len()).map(|i| if i == 0 { vec![] } else { vec![names[i - 1].as_str()] }).collect();
    let pairs: Vec<(&str, &[&str])> = names.iter().zip(&deps).map(|(n, d)| (n.as_str(), d.as_slice())).collect();
    let w = waits(&destroy(&state(&pairs)));
    assert_eq!(w.len(), names.len());
    for (i, n) in names.iter().enumerate() {
        let expected: Vec<String> = names.get(i + 1).cloned().into_iter().collect();
        assert_eq!(w[n], expected, "{n}");
    }
}

#[test]
fn a_state_key_that_is_no_address_is_an_error_not_dropped() {
    // The state layer refuses such a file when it reads it; a state built in memory still
    // must not lose the resource silently.
    let mut s = state(&[("quota.a", &[])]);
    let bad = s.resources["quota.a"].clone();
    s.resources.insert("gpu_pool..bad".into(), bad);
    let spec = Spec::default();
    let err = plan(&PlanInput { spec_digest: String::new(), ..PlanInput::offline(&spec, &s) }).unwrap_err();
    assert_eq!(err.key, "gpu_pool..bad");
    assert!(err.to_string().contains("`gpu_pool..bad`") && err.to_string().contains("not a resource address"), "{err}");
}

#[test]
fn an_aws_pool_over_two_zones_creates_one_batch_per_capacity_type_over_both() {
    let mut sources = crate::diag::Sources::default();
    sources.add(
        "main.hcl",
        r#"provider "aws" {
  region = "us-east-1"
  image  = "ami-0123456789abcdef0"
}

gpu_pool "p" {
  provider       = "aws"
  zones          = ["us-east-1a", "us-east-1b"]
  gpu            = "A10G"
  gpus_per_node  = 1
  instance_types = ["g5.xlarge", "g5.2xlarge"]
  nodes {
    min     = 0
    desired = 5
    max     = 10
  }
  mix {
    on_demand_base = 1
    spot_percent   = 50
    fallback       = "on_demand"
  }
}
"#,
    );
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let s = State::new("00000000-0000-4000-8000-000000000000".into());
    let p =
        plan(&PlanInput { observed: Some(&[]), spec_digest: String::new(), ..PlanInput::offline(&loaded.spec, &s) })
            .unwrap();
    let pc = p.changes[0].pool.as_ref().expect("a pool change");
    let batches: Vec<(crate::providers::Capacity, u32, &str, Vec<&str>)> = pc
        .creates
        .iter()
        .map(|b| (b.capacity, b.count, b.zone.as_str(), b.zones.iter().map(String::as_str).collect()))
        .collect();
    use crate::providers::Capacity::{OnDemand, Spot};
    let both = vec!["us-east-1a", "us-east-1b"];
    assert_eq!(batches, [(OnDemand, 3, "us-east-1a", both.clone()), (Spot, 2, "us-east-1a", both)]);
    assert_ne!(pc.creates[0].token, pc.creates[1].token);
}

/// A plan large enough to be computed on several threads is the plan one thread computes:
/// the same changes, drift, notes and errors in the same order.
#[test]
fn a_plan_split_over_threads_is_the_one_thread_plan() {
    use crate::model::{Capacity, Node, NodeState};
    let n = 1_100;
    let mut hcl = String::from("provider \"sim\" {\n  region = \"us-east-1\"\n}\n");
    for i in 0..n {
        let lifecycle = if i % 5 == 0 { "  lifecycle {\n    prevent_destroy = true\n  }\n" } else { "" };
        hcl.push_str(&format!(
            "gpu_pool \"p{i:04}\" {{\n  provider = \"sim\"\n  gpu = \"L4\"\n  gpus_per_node = 1\n  nodes {{\n    min = 0\n    desired = {}\n    max = 4\n  }}\n{lifecycle}}}\n",
            1 + i % 3
        ));
    }
    let mut sources = crate::diag::Sources::default();
    sources.add("main.hcl", hcl);
    let loaded = crate::spec::load_sources(sources, &Default::default());
    let mut s = State::new("00000000-0000-4000-8000-000000000000".into());
    let node = |pool: &str, id: String| Node {
        provider: None,
        id,
        pool: pool.parse().unwrap(),
        instance_type: "g6.xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::OnDemand,
        state: NodeState::Running,
        image: None,
        tags: crate::model::Tags::new(),
    };
    // Recorded pools (some gone from the spec) with a node each; every 5th node is gone
    // from the cloud (drift) and every 11th pool's recorded configuration differs; every
    // 3rd pool in the spec is recorded with the spec's own configuration.
    for i in (0..n + 300).step_by(2) {
        let addr = format!("gpu_pool.p{i:04}");
        let mut config =
            serde_json::json!({"gpu": "L4", "gpus_per_node": if i % 11 == 0 { 2 } else { 1 }, "provider": "sim"});
        if i % 5 == 0 {
            // Removed from the spec while recorded as not to be destroyed: a plan error.
            config["lifecycle"] = serde_json::json!({"prevent_destroy": true});
        }
        if let Some(pool) =
            loaded.spec.gpu_pools.get(&addr.parse::<crate::addr::Address>().unwrap()).filter(|_| i % 3 == 0)
        {
            config = JsonText::to_json(pool).unwrap().to_value();
        }
        let r = ResourceState {
            kind: "gpu_pool".into(),
            provider: Some("sim".into()),
            provider_kind: Some("sim".into()),
            region: Some("us-east-1".into()),
            config: JsonText::from_value(&config),
            sensitive: Vec::new(),
            dependencies: vec![],
            nodes: vec![node(&addr, format!("i-{i:05}"))],
            job: None,
            fallback: None,
            placement: None,
            reservation: None,
        };
        s.resources.insert(addr, r);
    }
    let observed: Vec<Node> =
        s.resources.values().flat_map(|r| r.nodes.iter()).filter(|n| !n.id.ends_with('4')).cloned().collect();
    let input =
        PlanInput { observed: Some(&observed), spec_digest: String::new(), ..PlanInput::offline(&loaded.spec, &s) };
    let one = crate::plan::diff::plan_on(&input, 1).expect("the state's keys are addresses");
    let three = crate::plan::diff::plan_on(&input, 3).expect("the state's keys are addresses");
    // The case covers what a split could reorder.
    assert!(one.changes.len() > 1_000, "{}", one.changes.len());
    assert!(loaded.diags.items.is_empty(), "{:?}", loaded.diags.items);
    assert!(one.errors.len() >= 8, "{}", one.errors.len());
    assert!(one.drift.len() > 50, "{}", one.drift.len());
    assert!(one.changes.iter().any(|c| c.action == Action::Delete));
    assert!(one.changes.iter().any(|c| c.action == Action::Replace || c.action == Action::Update));
    assert_eq!(serde_json::to_value(&three).unwrap(), serde_json::to_value(&one).unwrap());
    // With whether each pool is as recorded found before the diff, as `gather` finds it:
    // the same plan, from answers both ways.
    let known = crate::plan::AsRecorded::of(&loaded.spec, &s);
    let answers = known.answers();
    assert!(answers.0 > 100 && answers.1 > 100, "{answers:?}");
    let knowing = crate::plan::diff::plan_knowing(&input, Some(&known)).expect("the state's keys are addresses");
    assert_eq!(serde_json::to_value(&knowing).unwrap(), serde_json::to_value(&one).unwrap());
    // Planned in rounds (each round's runs joined before the next starts): the same plan.
    for (threads, round) in [(2, 600), (3, 1), (1, 512)] {
        let rounds =
            crate::plan::diff::plan_in_rounds(&input, threads, round, None).expect("the state's keys are addresses");
        assert_eq!(serde_json::to_value(&rounds).unwrap(), serde_json::to_value(&one).unwrap(), "{threads} {round}");
    }
}

/// A pool change boxes the records few plans fill (the fallback record, the retry of the
/// preferred placement, a floating pool's placement after and before): a plan holds one
/// change per pool, and inline those four took 224 of a change's 704 bytes (22 MB of a
/// 100,000-pool plan, alive through its diff, its rendering and its apply). Boxed, they
/// are written and read back exactly as before: plan files and `--json` do not change.
/// The sensitive paths of a change (issue 50) are boxed too: 8 bytes where none.
#[test]
fn a_pool_changes_rare_records_are_boxed_and_written_as_before() {
    use crate::plan::model::{NodeCounts, PoolChange, ResourceChange};
    use crate::state::model::{FallbackRecord, PlacementRecord, ShortRecord};
    assert!(std::mem::size_of::<PoolChange>() <= 352, "{} bytes", std::mem::size_of::<PoolChange>());
    assert!(std::mem::size_of::<ResourceChange>() <= 488, "{} bytes", std::mem::size_of::<ResourceChange>());

    let fell_back = FallbackRecord { since_ms: 1, tried_ms: 2, failed_retries: 3, reason: "us-east-1a short".into() };
    let short = ShortRecord { provider: "b".into(), region: "us-west-2".into(), since_ms: 4, reason: "full".into() };
    let after = PlacementRecord { provider: "a".into(), region: "us-east-1".into(), since_ms: 5, short: vec![short] };
    let before = PlacementRecord { provider: "b".into(), region: "us-west-2".into(), since_ms: 6, short: vec![] };
    let counts = NodeCounts { on_demand: 1, spot: 0, gpus_per_node: 1 };
    let pc = PoolChange {
        provider: "a".into(),
        provider_kind: "sim".into(),
        region: "us-east-1".into(),
        gpu: "L4".into(),
        before: counts,
        after: counts,
        before_types: vec![],
        creates: vec![],
        deletes: vec![],
        deferred: vec![],
        adopt: vec![],
        forget: vec![],
        zones: vec![],
        fallback: Default::default(),
        create_before_destroy: true,
        fell_back: Some(Box::new(fell_back.clone())),
        retry_preferred: Some(Box::new(fell_back.clone())),
        placement: Some(Box::new(after.clone())),
        placement_before: Some(Box::new(before.clone())),
        alternates: vec![],
    };
    let json = serde_json::to_value(&pc).expect("a pool change serializes");
    let inline = |record: serde_json::Result<serde_json::Value>| record.expect("a record serializes");
    assert_eq!(json["fell_back"], inline(serde_json::to_value(&fell_back)));
    assert_eq!(json["retry_preferred"], inline(serde_json::to_value(&fell_back)));
    assert_eq!(json["placement"], inline(serde_json::to_value(&after)));
    assert_eq!(json["placement_before"], inline(serde_json::to_value(&before)));
    let back: PoolChange = serde_json::from_value(json).expect("and reads back");
    assert_eq!(back, pc);
}

/// A kept pool that drops what asks for its groups while nodes stay is refused, in its
/// cloud's words: on Tencent Cloud `fabric = "rdma"` and HPC clusters, not placement groups.
#[test]
fn a_dropped_group_is_refused_in_the_cloud_s_own_words() {
    use crate::addr::{Address, Kind};
    use crate::plan::model::{NodeCounts, PoolChange, ResourceChange};
    let counts = NodeCounts { on_demand: 2, spot: 0, gpus_per_node: 8 };
    let pool = |kind: &str| PoolChange {
        provider: kind.into(),
        provider_kind: kind.into(),
        region: "ap-guangzhou".into(),
        gpu: "V100-32GB".into(),
        before: counts,
        after: counts,
        before_types: vec![],
        creates: vec![],
        deletes: vec![],
        deferred: vec![],
        adopt: vec![],
        forget: vec![],
        zones: vec![],
        fallback: Default::default(),
        create_before_destroy: true,
        fell_back: None,
        retry_preferred: None,
        placement: None,
        placement_before: None,
        alternates: vec![],
    };
    let change = |kind: &str, network: serde_json::Value| ResourceChange {
        address: Address::new(Kind::GpuPool, "train"),
        action: Action::Update,
        before: Some(JsonText::from(serde_json::json!({"zones": ["z-1"], "network": network}))),
        after: Some(JsonText::from(serde_json::json!({"zones": ["z-1"]}))),
        reasons: vec![],
        pool: Some(pool(kind)),
        after_changes: vec![],
        sensitive: None,
    };
    let message = |c: &ResourceChange| crate::plan::pool::dropped_group_error(c).expect("refused").message;
    let tencent = message(&change("tencentcloud", serde_json::json!({"fabric": "rdma"})));
    assert!(
        tencent.contains("drops `network { fabric = \"rdma\" }` while 2 of its nodes stay in its HPC clusters"),
        "{tencent}"
    );
    let alibaba = message(&change("alicloud", serde_json::json!({"placement_group": "cluster"})));
    assert!(
        alibaba.contains("drops `network { placement_group }` while 2 of its nodes stay in its deployment sets"),
        "{alibaba}"
    );
    let aws = message(&change("aws", serde_json::json!({"placement_group": "cluster"})));
    assert!(aws.contains("stay in its placement groups"), "{aws}");
}
