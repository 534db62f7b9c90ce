//! Snapshots of what users see, over hand-built plans (no planner involved), and the
//! contracts around them: colour only when asked, the JSON key set, the markdown limit.

use std::collections::BTreeSet;

use serde_json::{Value as Json, json};

use super::*;

/// A reason code from its text, as plans print it.
fn rc(code: &str) -> ReasonCode {
    code.parse().expect("a known reason code")
}
use crate::addr::{Address, Kind};
use crate::json_text::JsonText;
use crate::plan::model::*;
use crate::providers::{Capacity, CreateNodes};

mod arrows;
mod leaves;
mod saved;
mod view;

const WIDTH: TextOptions = TextOptions { color: false, width: 80, verbose: false };

fn pool_addr(name: &str) -> Address {
    Address::new(Kind::GpuPool, name)
}

fn pool_cfg(gpu: &str, desired: u32, spot_percent: u32) -> Json {
    let instance_type = match gpu {
        "H100" => "p5.48xlarge",
        "L4" => "g6.48xlarge",
        _ => "p4de.24xlarge",
    };
    json!({
        "provider": "sim",
        "region": "us-east-1",
        "zones": ["us-east-1a", "us-east-1b"],
        "gpu": gpu,
        "gpus_per_node": 8,
        "instance_types": [instance_type],
        "nodes": {"min": 0, "desired": desired, "max": 16},
        "mix": {"on_demand_base": 1, "spot_percent": spot_percent, "fallback": "on_demand"},
        "labels": {"team": "ml"},
    })
}

fn counts(on_demand: u32, spot: u32) -> NodeCounts {
    NodeCounts { on_demand, spot, gpus_per_node: 8 }
}

fn create(pool: &str, zone: &str, capacity: Capacity, count: u32, instance_type: &str) -> CreateNodes {
    CreateNodes {
        pool: pool_addr(pool),
        region: "us-east-1".into(),
        zone: zone.into(),
        zones: vec![],
        instance_types: vec![instance_type.into()],
        capacity,
        count,
        image: None,
        max_spot_price: None,
        token: format!("gp-{pool}-{zone}-{count}"),
        tags: crate::providers::Tags::new(),
        user_data: None,
        join: None,
        hardware: None,
        reservation: None,
    }
}

fn delete(id: &str, zone: &str, capacity: Capacity, reason: &str) -> NodeDelete {
    NodeDelete {
        id: id.into(),
        zone: zone.into(),
        instance_type: "p4de.24xlarge".into(),
        capacity,
        reason: reason.into(),
        region: None,
        provider: None,
        reservation: None,
    }
}

fn pool_change(gpu: &str, before: NodeCounts, after: NodeCounts) -> PoolChange {
    PoolChange {
        provider: "sim".into(),
        provider_kind: "sim".into(),
        region: "us-east-1".into(),
        gpu: gpu.into(),
        before,
        after,
        creates: vec![],
        deletes: vec![],
        deferred: vec![],
        adopt: vec![],
        forget: vec![],
        zones: vec!["us-east-1a".into(), "us-east-1b".into()],
        before_types: vec![],
        fallback: Default::default(),
        create_before_destroy: true,
        fell_back: None,
        retry_preferred: None,
        placement: None,
        placement_before: None,
        alternates: Vec::new(),
    }
}

fn change(address: Address, action: Action, before: Option<Json>, after: Option<Json>) -> ResourceChange {
    let (before, after) = (before.map(JsonText::from), after.map(JsonText::from));
    ResourceChange {
        address,
        action,
        before,
        after,
        reasons: vec![],
        pool: None,
        after_changes: vec![],
        sensitive: None,
    }
}

fn plan(changes: Vec<ResourceChange>) -> Plan {
    let mut p = Plan {
        format_version: FORMAT_VERSION,
        lineage: "6f1c2d3e-0000-4000-8000-000000000001".into(),
        serial: 7,
        spec_digest: "ab".repeat(32),
        inputs: None,
        refreshed: true,
        targets: vec![],
        replace: vec![],
        destroy: false,
        changes,
        drift: vec![],
        notes: vec![],
        summary: Summary::default(),
        errors: vec![],
        cost: None,
        policies: vec![],
        autoscale: vec![],
        jobs: vec![],
        spend: None,
        orphan_job_nodes: Vec::new(),
        evidence: Default::default(),
        health: Vec::new(),
        reservations: Vec::new(),
        adoptions: Vec::new(),
        placements: Vec::new(),
        outputs: Vec::new(),
    };
    p.summarize();
    p
}

fn no_changes() -> Plan {
    let mut c = change(pool_addr("train"), Action::NoOp, Some(pool_cfg("A100-80GB", 2, 50)), None);
    c.after = c.before.clone();
    c.pool = Some(pool_change("A100-80GB", counts(1, 1), counts(1, 1)));
    plan(vec![c])
}

fn create_two_pools_and_quota() -> Plan {
    let mut train = change(pool_addr("train"), Action::Create, None, Some(pool_cfg("A100-80GB", 3, 70)));
    train.reasons.push(Reason::new(rc("new"), "`gpu_pool.train` is new in the spec"));
    let mut p = pool_change("A100-80GB", NodeCounts::default(), counts(1, 2));
    p.before.gpus_per_node = 8;
    p.creates = vec![
        create("train", "us-east-1a", Capacity::OnDemand, 1, "p4de.24xlarge"),
        create("train", "us-east-1a", Capacity::Spot, 1, "p4de.24xlarge"),
        create("train", "us-east-1b", Capacity::Spot, 1, "p4de.24xlarge"),
    ];
    train.pool = Some(p);
    let mut infer = change(pool_addr("infer"), Action::Create, None, Some(pool_cfg("L4", 1, 0)));
    infer.reasons.push(Reason::new(rc("new"), "`gpu_pool.infer` is new in the spec"));
    let mut p = pool_change("L4", NodeCounts::default(), counts(1, 0));
    p.creates = vec![create("infer", "us-east-1a", Capacity::OnDemand, 1, "g6.48xlarge")];
    infer.pool = Some(p);
    let quota_cfg = json!({"max_gpus": 64, "budget": {"hourly_usd": 500}, "gpus": ["A100-80GB", "L4"]});
    let mut quota = change(Address::new(Kind::Quota, "ml"), Action::Create, None, Some(quota_cfg));
    quota.reasons.push(Reason::new(rc("new"), "`quota.ml` is new in the spec"));
    // Deliberately out of order: views sort by address.
    plan(vec![quota, train, infer])
}

fn update_with_drift() -> Plan {
    let mut c = change(
        pool_addr("train"),
        Action::Update,
        Some(pool_cfg("A100-80GB", 2, 50)),
        Some(pool_cfg("A100-80GB", 3, 70)),
    );
    c.reasons = vec![
        Reason::new(rc("changed:mix.spot_percent"), "`mix.spot_percent` changed"),
        Reason::new(rc("changed:nodes.desired"), "`nodes.desired` changed"),
        Reason::new(rc("drift"), "1 node disappeared outside gpuplan; restoring the mix"),
        Reason::new(rc("node_count"), "nodes 2 → 3"),
        Reason::new(rc("adopt"), "adopting 1 orphan node(s) tagged for this pool"),
    ];
    let mut p = pool_change("A100-80GB", counts(2, 0), counts(1, 2));
    p.creates = vec![
        create("train", "us-east-1a", Capacity::Spot, 1, "p4de.24xlarge"),
        create("train", "us-east-1b", Capacity::Spot, 1, "p4de.24xlarge"),
    ];
    p.deletes = vec![delete("i-0b7e", "us-east-1b", Capacity::OnDemand, "rebalance")];
    p.adopt = vec![crate::providers::Node {
        provider: None,
        id: "i-0orphan9".into(),
        pool: "gpu_pool.train".parse().unwrap(),
        instance_type: "p4de.24xlarge".into(),
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::Spot,
        state: crate::providers::NodeState::Running,
        image: None,
        tags: Default::default(),
    }];
    c.pool = Some(p);
    let mut plan = plan(vec![c]);
    plan.drift = vec![
        DriftItem {
            address: pool_addr("train"),
            kind: DriftKind::Reclaimed,
            node_id: Some("i-0spot1".into()),
            message: "spot node i-0spot1 in us-east-1b was reclaimed by the cloud".into(),
        },
        DriftItem {
            address: pool_addr("train"),
            kind: DriftKind::Orphan,
            node_id: Some("i-0orphan9".into()),
            message: "node i-0orphan9 carries this state's tags but the state does not know it; adopting it".into(),
        },
    ];
    plan.cost = Some(crate::plan::report::CostReport {
        currency: "USD".into(),
        exchange_rates: vec![],
        hourly_after: 81.9,
        hourly_before: 65.52,
        hourly_delta: 16.38,
        hours_per_month: 730.0,
        monthly_after: 59787.0,
        monthly_before: 47829.6,
        monthly_delta: 11957.4,
        on_demand_hourly_after: 40.95,
        pools: vec![],
        quotas: vec![],
        range: Default::default(),
        spot_hourly_after: 40.95,
        unpriced: vec![],
    });
    let verdict = |name: &str, enforcement, passed, message: &str| crate::plan::report::PolicyResult {
        enforcement,
        key: None,
        message: message.into(),
        name: name.into(),
        overridden: false,
        passed,
        source: format!("policies/{name}.hcl:1"),
        standing: false,
        warning: false,
    };
    use crate::plan::report::Enforcement;
    plan.policies = vec![
        verdict("fleet_hourly_cap", Enforcement::Hard, true, "fleet would cost 81.9 USD/h"),
        verdict("min_spot_share", Enforcement::Advisory, false, "spot share 67% < 70%"),
    ];
    plan
}

fn replace_gpu() -> Plan {
    let mut c =
        change(pool_addr("train"), Action::Replace, Some(pool_cfg("A100-80GB", 2, 50)), Some(pool_cfg("H100", 2, 50)));
    c.reasons =
        vec![Reason::new(rc("immutable"), "gpu, instance_types cannot change in place; 2 nodes will be replaced")];
    let mut p = pool_change("H100", counts(1, 1), counts(1, 1));
    p.creates = vec![
        create("train", "us-east-1a", Capacity::OnDemand, 1, "p5.48xlarge"),
        create("train", "us-east-1b", Capacity::Spot, 1, "p5.48xlarge"),
    ];
    p.deletes = vec![
        delete(
            "i-0a1",
            "us-east-1a",
            Capacity::OnDemand,
            "replaced: instance type p4de.24xlarge no longer matches 8 × H100",
        ),
        delete(
            "i-0a2",
            "us-east-1b",
            Capacity::Spot,
            "replaced: instance type p4de.24xlarge no longer matches 8 × H100",
        ),
    ];
    c.pool = Some(p);
    plan(vec![c])
}

fn delete_prevented() -> Plan {
    let mut cfg = pool_cfg("A100-80GB", 12, 50);
    cfg["lifecycle"] = json!({"prevent_destroy": true});
    let mut c = change(pool_addr("old"), Action::Delete, Some(cfg), None);
    c.reasons = vec![Reason::new(rc("removed_from_spec"), "`gpu_pool.old` is removed from the spec")];
    let mut p = pool_change("A100-80GB", counts(6, 6), counts(0, 0));
    p.create_before_destroy = false;
    p.deletes = (0..12)
        .map(|i| {
            let cap = if i % 2 == 0 { Capacity::OnDemand } else { Capacity::Spot };
            delete(&format!("i-0old{i:02}"), "us-east-1a", cap, "removed from the spec")
        })
        .collect();
    c.pool = Some(p);
    let mut plan = plan(vec![c]);
    plan.errors.push(PlanError {
        address: pool_addr("old"),
        message: "`gpu_pool.old` has `lifecycle.prevent_destroy` set, but this plan would destroy it".into(),
        hint: Some("set prevent_destroy = false and apply first, if destroying it is really intended".into()),
        location: None,
        span: None,
    });
    plan
}

/// `n` pools each growing by one node: many detail blocks for the markdown limit.
fn many_updates(n: usize) -> Plan {
    let changes = (0..n)
        .map(|i| {
            let mut c = change(
                pool_addr(&format!("p{i:02}")),
                Action::Update,
                Some(pool_cfg("A100-80GB", 2, 50)),
                Some(pool_cfg("A100-80GB", 3, 50)),
            );
            c.reasons = vec![Reason::new(rc("node_count"), "nodes 2 → 3")];
            let mut p = pool_change("A100-80GB", counts(1, 1), counts(1, 2));
            p.creates = vec![create("p", "us-east-1b", Capacity::Spot, 1, "p4de.24xlarge")];
            c.pool = Some(p);
            c
        })
        .collect();
    plan(changes)
}

fn all_fixtures() -> Vec<(&'static str, Plan)> {
    vec![
        ("no_changes", no_changes()),
        ("create", create_two_pools_and_quota()),
        ("update_drift", update_with_drift()),
        ("replace", replace_gpu()),
        ("delete_prevented", delete_prevented()),
    ]
}

/// A plan whose only news is an error never says the fleet matches the spec.
#[test]
fn an_error_without_changes_is_not_no_changes() {
    let mut plan = no_changes();
    plan.errors.push(PlanError {
        address: pool_addr("train"),
        message: "during the move both sets run: quota.a 12 GPUs".into(),
        hint: Some("raise `quota.a`'s limit".into()),
        location: None,
        span: None,
    });
    let text = plan_text(&plan, &WIDTH);
    assert!(!text.contains("No changes"), "{text}");
    assert!(text.contains("Planning failed. Fix the errors below and plan again."), "{text}");
    assert!(text.contains("during the move both sets run"), "{text}");
    assert!(plan_text(&no_changes(), &WIDTH).contains("No changes. Your fleet matches the spec."));
}

#[test]
fn text_snapshots() {
    for (name, plan) in all_fixtures() {
        insta::assert_snapshot!(format!("text_{name}"), plan_text(&plan, &WIDTH));
    }
}

#[test]
fn markdown_snapshots() {
    for (name, plan) in all_fixtures() {
        insta::assert_snapshot!(format!("markdown_{name}"), plan_markdown(&plan, 60_000));
    }
}

#[test]
fn json_snapshots() {
    insta::assert_json_snapshot!("json_update_drift", plan_json(&update_with_drift()));
    insta::assert_json_snapshot!("json_create", plan_json(&create_two_pools_and_quota()));
}

#[test]
fn streamed_json_is_the_tree_printed_pretty() {
    // The streamed document lists keys in its structs' field order; a tree sorts them. The
    // bytes must agree, or `plan --json` would change with the size of the plan.
    // With the keys only some plans have: health, placements, `--replace`, a saved plan's
    // variables.
    let mut rare = update_with_drift();
    rare.placements = vec![
        serde_json::from_value(json!({
            "address": "gpu_pool.train", "action": "stay", "chosen": "sim us-east-1", "reason": "cheapest",
            "candidates": [{"provider": "sim", "region": "us-east-1", "hourly_usd": 1.5, "price": "catalog",
                "capacity": "ok", "role": "chosen"}],
        }))
        .expect("a placement decision"),
    ];
    rare.replace = vec![pool_addr("train")];
    rare.health = vec![
        serde_json::from_value(json!({
            "address": "gpu_pool.train", "node": "i-0b7e", "signal": "xid_fatal", "xid": 79,
            "seen": "2026-03-01T00:00:00Z", "action": "replace", "evidence": "XID 79 on GPU 0",
        }))
        .expect("a health entry"),
    ];
    rare.inputs = Some(crate::plan::inputs::PlanInputs {
        workspace: "default".into(),
        variables: [(
            "n".to_string(),
            crate::plan::inputs::SavedVar {
                value: json!(3),
                ty: crate::spec::model::VarType::Number,
                from: "--var".into(),
                sensitive: Some(false),
            },
        )]
        .into(),
        overrides: vec![],
        sources: crate::spec::fingerprint::Fingerprint {
            gpuplan: "0".into(),
            files: Default::default(),
            env: Default::default(),
        },
        made_at: Some("2026-12-07T10:00:00Z".into()),
    });
    for (name, plan) in all_fixtures().into_iter().chain([("rare keys", rare)]) {
        let mut streamed = Vec::new();
        super::write_plan_json(&plan, &mut streamed).unwrap();
        let tree = format!("{:#}\n", plan_json(&plan));
        assert_eq!(String::from_utf8(streamed).unwrap(), tree, "{name}");
    }
}

#[test]
fn drift_views() {
    let plan = update_with_drift();
    assert_eq!(drift_text(&[], &WIDTH), "No drift.\n");
    insta::assert_snapshot!("drift_text", drift_text(&plan.drift, &WIDTH));
    let j = drift_json(&plan.drift);
    assert_eq!(j["summary"], json!({"items": 2, "resources": 1}));
    assert_eq!(j["drift"][0]["kind"], "reclaimed");
}

#[test]
fn json_has_the_design_keys_and_documented_extras() {
    let design = ["format_version", "changes", "drift", "cost", "policies", "summary"];
    let extras = ["errors", "lineage", "serial", "refreshed", "targets"];
    let want: BTreeSet<&str> = design.into_iter().chain(extras).collect();
    for (name, plan) in all_fixtures() {
        let j = plan_json(&plan);
        let got: BTreeSet<&str> = j.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(got, want, "{name}");
        for c in j["changes"].as_array().unwrap() {
            for k in ["address", "action", "before", "after", "reasons"] {
                assert!(c.get(k).is_some(), "{name}: change without `{k}`");
            }
        }
        let s = &j["summary"];
        let keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
        let counts = ["add", "change", "destroy", "jobs_launch", "jobs_requeue", "nodes_launch", "nodes_terminate"];
        assert_eq!(keys, counts, "{name}");
        assert_eq!(
            (s["add"].as_u64(), s["change"].as_u64()),
            (Some(plan.summary.add as u64), Some(plan.summary.change as u64))
        );
    }
    let j = plan_json(&no_changes());
    assert_eq!(j["cost"], Json::Null);
    let j = plan_json(&update_with_drift());
    assert_eq!(j["cost"]["currency"], "USD");
    assert_eq!(j["policies"][1]["passed"], false);
    assert_eq!(
        j["changes"][0]["reasons"][0],
        json!({"code": "changed:mix.spot_percent", "message": "`mix.spot_percent` changed"})
    );
}

#[test]
fn colour_only_when_asked() {
    for (name, plan) in all_fixtures() {
        let plain = plan_text(&plan, &TextOptions { color: false, width: 80, verbose: false });
        assert!(!plain.contains('\x1b'), "{name}: escape codes without colour");
        let colour = plan_text(&plan, &TextOptions { color: true, width: 80, verbose: false });
        assert!(colour.contains("\x1b["), "{name}: no escape codes with colour");
        assert!(!plan_markdown(&plan, 60_000).contains('\x1b'), "{name}: escape codes in markdown");
        assert!(!drift_text(&plan.drift, &TextOptions { color: false, width: 80, verbose: false }).contains('\x1b'));
    }
    let colour = plan_text(&update_with_drift(), &TextOptions { color: true, width: 80, verbose: false });
    assert!(colour.contains("\x1b[33m~\x1b[0m"), "yellow ~");
    assert!(colour.contains("\x1b[32m+\x1b[0m"), "green +");
    assert!(colour.contains("\x1b[31m-\x1b[0m"), "red -");
    let colour = plan_text(&replace_gpu(), &TextOptions { color: true, width: 80, verbose: false });
    assert!(colour.contains("\x1b[35m-/+\x1b[0m"), "magenta -/+");
}

#[test]
fn views_do_not_depend_on_input_order() {
    let mut shuffled = create_two_pools_and_quota();
    shuffled.changes.reverse();
    let plan = create_two_pools_and_quota();
    assert_eq!(plan_text(&plan, &WIDTH), plan_text(&shuffled, &WIDTH));
    assert_eq!(plan_json(&plan), plan_json(&shuffled));
    assert_eq!(plan_markdown(&plan, 60_000), plan_markdown(&shuffled, 60_000));
}

#[test]
fn markdown_under_a_small_limit_drops_details_and_keeps_the_table() {
    let plan = many_updates(40);
    let full = plan_markdown(&plan, 1_000_000);
    assert_eq!(full.matches("<details>").count(), 40);
    assert!(!full.contains("not shown"));

    let limit = 4_000;
    let md = plan_markdown(&plan, limit);
    assert!(md.chars().count() <= limit, "{} > {limit}", md.chars().count());
    let shown = md.matches("<details>").count();
    assert!(shown > 0 && shown < 40, "{shown} detail blocks");
    for i in 0..40 {
        assert!(md.contains(&format!("| `gpu_pool.p{i:02}` | update | 16 → 24 | 1 / 1 → 1 / 2 |")), "row {i}");
    }
    let line = format!(
        "_… {} more changes not shown (output limited to 4000 characters); run `gpuplan plan` locally for the full diff._\n",
        40 - shown
    );
    assert!(md.ends_with(&line), "{md}");
    // The blocks that remain are the first ones, whole.
    assert!(md.contains("<code>gpu_pool.p00</code>"));
    assert_eq!(md.matches("</details>").count(), shown);
    insta::assert_snapshot!("markdown_truncated", md);
}

#[test]
fn markdown_cuts_table_rows_only_when_even_the_table_does_not_fit() {
    let plan = many_updates(40);
    let limit = 1_200;
    let md = plan_markdown(&plan, limit);
    assert!(md.chars().count() <= limit);
    assert!(!md.contains("<details>"));
    assert!(md.starts_with("### ✅ Ready to apply\n\n**gpuplan plan**: 0 to add, 40 to change, 0 to destroy"), "{md}");
    let rows = md.lines().filter(|l| l.starts_with("| `gpu_pool.")).count();
    assert!(rows > 0 && rows < 40);
    assert!(md.contains(&format!(
        "_… {} more pools not shown in this table (output limited to 1200 characters)._",
        40 - rows
    )));
    assert!(md.contains("_… 40 more changes not shown (output limited to 1200 characters)"));
}

#[test]
fn a_batch_over_several_zones_names_them_all() {
    let mut p = create_two_pools_and_quota();
    let c = p.changes.iter_mut().find(|c| c.address == pool_addr("train")).expect("train");
    let mut b = create("train", "us-east-1a", Capacity::Spot, 2, "p4de.24xlarge");
    b.zones = vec!["us-east-1a".into(), "us-east-1b".into()];
    c.pool.as_mut().expect("pool").creates = vec![b];
    let text = plan_text(&p, &WIDTH);
    assert!(text.contains("+ 2 spot across us-east-1a, us-east-1b (p4de.24xlarge)"), "{text}");
    let json = plan_json(&p).to_string();
    assert!(json.contains(r#""zone":"us-east-1a","zones":["us-east-1a","us-east-1b"]"#), "{json}");
}

/// Twelve passes, a near-limit warning, a soft failure, a hard one and an overridden one.
fn many_verdicts() -> Plan {
    use crate::plan::report::{Enforcement, PolicyResult};
    let verdict = |name: &str, enforcement, passed: bool, message: &str| PolicyResult {
        enforcement,
        key: None,
        message: message.into(),
        name: name.into(),
        overridden: false,
        passed,
        source: format!("policies/{name}.hcl:1"),
        standing: false,
        warning: false,
    };
    let mut plan = no_changes();
    plan.policies = (0..11).map(|i| verdict(&format!("ok_{i:02}"), Enforcement::Hard, true, "passed")).collect();
    let mut warn =
        verdict("quota.ml.max_gpus", Enforcement::Hard, true, "the plan uses 14 GPUs, 88% of the limit of 16 GPUs");
    warn.warning = true;
    plan.policies.insert(3, warn);
    plan.policies.insert(5, verdict("min_spot_share", Enforcement::Soft, false, "spot share 20% < 30%"));
    plan.policies.push(verdict(
        "quota.ml.budget.monthly_usd",
        Enforcement::Hard,
        false,
        "the plan needs 80,967.89 USD/month",
    ));
    let mut accepted = verdict("max_price", Enforcement::Soft, false, "7.10 USD per GPU-hour");
    accepted.overridden = true;
    plan.policies.push(accepted);
    plan
}

#[test]
fn the_policy_section_leads_with_failures_and_counts_the_passes() {
    let text = plan_text(&many_verdicts(), &TextOptions { width: 120, ..WIDTH });
    let section = &text[text.find("Policies:").expect("a policy section")..];
    let lines: Vec<&str> = section.lines().take(5).collect();
    assert_eq!(
        lines,
        [
            "Policies: 12 passed (1 near a limit), 1 hard failure, 1 soft failure, 1 overridden soft failure",
            "  FAIL quota.ml.budget.monthly_usd (hard): the plan needs 80,967.89 USD/month",
            "  FAIL min_spot_share (soft): spot share 20% < 30%",
            "  FAIL max_price (soft, overridden): 7.10 USD per GPU-hour",
            "  warn quota.ml.max_gpus (hard): the plan uses 14 GPUs, 88% of the limit of 16 GPUs",
        ],
        "{text}"
    );
    assert!(!text.contains("pass ok_"), "passes are counted, not listed:\n{text}");

    // `--verbose`: the passes follow, in the order the policies ran.
    let verbose = plan_text(&many_verdicts(), &TextOptions { verbose: true, ..WIDTH });
    let passes: Vec<&str> = verbose.lines().filter(|l| l.starts_with("  pass ")).collect();
    assert_eq!(passes.len(), 11, "{verbose}");
    assert_eq!(passes[0], "  pass ok_00 (hard): passed");
    assert!(verbose.find("  warn quota.ml.max_gpus").unwrap() < verbose.find("  pass ok_00").unwrap(), "{verbose}");

    // JSON and markdown carry every verdict; markdown keeps the passes in its details.
    let json = plan_json(&many_verdicts());
    assert_eq!(json["policies"].as_array().map(Vec::len), Some(15));
    let md = plan_markdown(&many_verdicts(), 60_000);
    assert!(md.contains("<details><summary>✅ 11 policy checks passed</summary>"), "{md}");
    assert!(md.contains("- `ok_10` (hard): passed\n"), "{md}");
}

/// Counts the writes it is given.
struct CountingWriter {
    bytes: Vec<u8>,
    writes: usize,
}

impl std::io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writes += 1;
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_streamed_plan_is_the_same_text_written_in_pieces() {
    let plan = many_updates(2_000);
    let whole = plan_text(&plan, &WIDTH);
    let mut w = CountingWriter { bytes: Vec::new(), writes: 0 };
    crate::render::write_plan_text(&plan, &WIDTH, &mut w).unwrap();
    assert_eq!(String::from_utf8(w.bytes).unwrap(), whole);
    assert!(whole.len() > 4 << 16, "the plan must span several pieces: {} bytes", whole.len());
    assert!(w.writes > 4, "written in {} pieces", w.writes);
}

#[test]
fn a_closed_stream_stops_the_writing_and_is_reported() {
    struct Closed(usize);
    impl std::io::Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            self.0 += 1;
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = Closed(0);
    let result = crate::render::write_plan_text(&many_updates(2_000), &WIDTH, &mut w);
    assert_eq!(result.unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);
    assert_eq!(w.0, 1);
}

/// A plan's change blocks rendered on several threads, over more than one round, are the
/// text one thread renders, block after block.
#[test]
fn plan_blocks_rendered_on_the_cores_are_the_one_threads_text() {
    let plan = many_updates(9_000);
    let changes = crate::render::facts::actionable(&plan);
    let p = crate::render::style::Paint::new(false);
    let serial: String = changes
        .iter()
        .map(|c| format!("\n{}", crate::render::text::block(c, Some(&plan.lineage), &WIDTH, &p)))
        .collect();
    for threads in [1, 2, 4] {
        let text: String = crate::render::text::blocks(&changes, Some(&plan.lineage), &WIDTH, &p, threads).collect();
        assert!(text == serial, "{threads} thread(s)");
    }
}
