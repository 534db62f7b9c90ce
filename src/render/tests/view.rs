//! The plan a reviewer reads in ten seconds (issue 46): the summary's node and job
//! counts, one header line per change, what is not drawn, job lines true to their
//! template, one block per failing policy.

use serde_json::json;

use super::*;
use crate::model::JobPlacement;
use crate::plan::report::{Enforcement, PolicyResult};

/// A job as `jobs::place` would leave it: `extra` overrides the defaults (one replica of
/// one GPU on `gpu_pool.train`, first attempt, no retries).
fn job(name: &str, extra: Json) -> JobPlacement {
    let mut doc = json!({
        "address": format!("job.{name}"), "pool": "gpu_pool.train", "priority": "medium",
        "preemptible": true, "replicas": 1, "gpus_per_replica": 1, "placement": "waiting",
        "attempt": 1, "retries": 0,
    });
    for (k, v) in extra.as_object().expect("an object") {
        doc[k] = v.clone();
    }
    serde_json::from_value(doc).expect("a job placement")
}

/// One replica launch of `job.NAME`, on spot; `boots` gives it a node of its own.
fn launch(name: &str, attempt: u32, boots: bool) -> Json {
    let shape =
        boots.then(|| serde_json::to_value(create("train", "us-east-1a", Capacity::Spot, 1, "g6.xlarge")).unwrap());
    json!({
        "replica": 0, "capacity": "spot", "provider": "sim", "region": "us-east-1", "gpus_per_node": 8,
        "request": {
            "job": format!("job.{name}"), "pool": "gpu_pool.train", "image": "x", "command": [], "env": {},
            "gpus": 1, "attempt": attempt, "token": format!("t-{name}"), "shape": shape,
        },
    })
}

/// A run of `job.NAME` on node `i-1`, stopped because a rebalance removes that node.
fn interrupted() -> Json {
    json!([{
        "run": "j-1", "replica": 0, "node_id": "i-1", "capacity": "spot", "zone": "us-east-1a",
        "why": "rebalance: `mix.spot_percent` changed; nodes 2 → 3", "node_reason": "rebalance",
    }])
}

fn jobs_plan(jobs: Vec<JobPlacement>) -> Plan {
    let mut p = update_with_drift();
    p.jobs = jobs;
    p
}

fn job_lines(plan: &Plan, verbose: bool) -> Vec<String> {
    let text = plan_text(plan, &TextOptions { width: 0, verbose, ..WIDTH });
    text.lines().filter(|l| l.contains(" job.")).map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect()
}

#[test]
fn a_requeued_job_reads_one_line_and_claims_a_checkpoint_only_when_its_template_has_one() {
    let requeued = job("a", json!({"placement": "launch", "attempt": 2, "interrupted": interrupted()}));
    let plan = jobs_plan(vec![requeued.clone()]);
    assert_eq!(job_lines(&plan, false), ["! job.a requeued: node i-1 removed (rebalance); attempt 2, no retry spent"]);
    let verbose = job_lines(&plan, true).join("\n");
    assert!(verbose.contains("run j-1 stops and is requeued as attempt 2, no retry spent"), "{verbose}");
    for untrue in ["checkpoint", "retries left", "→"] {
        assert!(!verbose.contains(untrue), "`{untrue}`: {verbose}");
    }
    let reason = plan_json(&plan)["jobs"][0]["reason"]["message"].as_str().unwrap().to_string();
    assert!(!reason.contains("checkpoint"), "{reason}");

    let checkpoints = JobPlacement { checkpoints: true, ..requeued };
    let lines = job_lines(&jobs_plan(vec![checkpoints]), false);
    assert_eq!(
        lines,
        ["! job.a requeued: node i-1 removed (rebalance); attempt 2 from its checkpoint, no retry spent"]
    );
}

#[test]
fn retries_are_shown_only_where_a_failure_spent_one() {
    let failed_once = job(
        "a",
        json!({"placement": "launch", "attempt": 2, "retries": 2, "retries_spent": 1, "launches": [launch("a", 2, false)]}),
    );
    let reclaimed =
        job("b", json!({"placement": "launch", "attempt": 2, "retries": 2, "launches": [launch("b", 2, false)]}));
    let fresh = job("c", json!({"placement": "launch", "launches": [launch("c", 1, false)]}));
    let running = job("d", json!({"placement": "running", "capacity": ["spot"]}));
    let plan = jobs_plan(vec![failed_once, reclaimed, fresh, running]);
    assert_eq!(
        job_lines(&plan, false),
        [
            "+ job.a relaunches on gpu_pool.train (1 × 1 GPU, spot): attempt 2 (1 of 2 retries left)",
            "+ job.b relaunches on gpu_pool.train (1 × 1 GPU, spot): attempt 2",
            "+ job.c launches on gpu_pool.train (1 × 1 GPU, spot)",
        ],
        "a job the plan leaves alone has no line by default"
    );
    let verbose = job_lines(&plan, true);
    assert_eq!(verbose.len(), 4, "{verbose:?}");
    assert!(verbose[3].contains("job.d running on gpu_pool.train (spot), attempt 1"), "{verbose:?}");
}

#[test]
fn the_summary_counts_nodes_and_jobs_in_every_view() {
    let mut plan = jobs_plan(vec![
        job("a", json!({"placement": "launch", "attempt": 2, "interrupted": interrupted()})),
        job("b", json!({"placement": "launch", "launches": [launch("b", 1, true)]})),
        job("c", json!({"placement": "waiting", "reason": {"code": "capacity", "message": "no room"}})),
    ]);
    plan.orphan_job_nodes.push(OrphanJobNode {
        provider: "sim".into(),
        region: "us-east-1".into(),
        node_id: "i-9".into(),
        job: "job.gone".into(),
    });
    let pool = plan.changes.iter().find_map(|c| c.pool.as_ref()).expect("a pool change");
    let launched: usize = pool.creates.iter().map(|b| b.count as usize).sum();
    let (nodes_launch, nodes_terminate) = (launched + 1, pool.deletes.len() + 1);
    let s = &plan.summary;
    let counts = format!(
        "{} to add, {} to change, {} to destroy. Nodes: {nodes_launch} to launch, {nodes_terminate} to terminate. \
         Jobs: 1 to launch, 1 to requeue, 1 waiting.",
        s.add, s.change, s.destroy
    );
    let text = plan_text(&plan, &TextOptions { width: 0, ..WIDTH });
    assert!(text.ends_with(&format!("\nPlan: {counts}\n")), "{text}");
    let md = plan_markdown(&plan, 60_000);
    assert!(md.contains(&format!("**gpuplan plan**: {}", counts.trim_end_matches('.'))), "{md}");
    let j = plan_json(&plan);
    assert_eq!(
        j["summary"],
        json!({"add": s.add, "change": s.change, "destroy": s.destroy, "nodes_launch": nodes_launch,
               "nodes_terminate": nodes_terminate, "jobs_launch": 1, "jobs_requeue": 1})
    );
    // At 100 columns the line breaks between sentences, never inside one.
    let narrow = plan_text(&plan, &TextOptions { width: 60, ..WIDTH });
    let tail: Vec<&str> = narrow.lines().rev().take(3).collect();
    assert!(tail[0].starts_with("      Jobs: 1 to launch") && tail[1].starts_with("      Nodes: "), "{narrow}");
}

#[test]
fn a_change_has_one_header_line_and_no_default_or_empty_attributes() {
    let mut job_cfg = json!({"count": 2, "pool": "gpu_pool.train", "replicas": 1, "template": "job_template.t",
                             "lifecycle": {}, "args": []});
    let addr = Address::new(Kind::Job, "hello").with_key(crate::addr::InstanceKey::Int(0));
    let mut c = change(addr, Action::Create, None, Some(job_cfg.take()));
    c.reasons = vec![Reason::new(rc("new"), "`job.hello[0]` is new in the spec")];
    let text = plan_text(&plan(vec![c]), &WIDTH);
    assert!(text.contains("  # job.hello[0] will be created\n  + job \"hello[0]\" {\n"), "{text}");
    for hidden in ["count", "replicas", "lifecycle", "args", "# ("] {
        assert!(!text.contains(hidden), "`{hidden}` drawn:\n{text}");
    }

    // Node-level work: the reason its lines do not say is the header's (wrapped only at
    // the terminal's width).
    let text = plan_text(&update_with_drift(), &TextOptions { width: 0, ..WIDTH });
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("  # gpu_pool.train will be updated in-place")).expect("a header");
    assert!(lines[at + 1].starts_with("  ~ gpu_pool \"train\" {"), "one header line:\n{text}");
    assert!(!text.contains('→') && !text.contains('±'), "{text}");
    let replace = plan_text(&replace_gpu(), &WIDTH);
    // `replace`, not Terraform's "destroy and then create": the nodes line says the order.
    assert!(replace.contains("  -/+ replace\n"), "{replace}");
    assert!(replace.contains("  -/+ gpu_pool \"train\" {"), "{replace}");
    assert!(replace.contains(", new nodes first\n"), "{replace}");
}

#[test]
fn a_policy_failing_many_times_is_one_block_of_five() {
    let mut plan = update_with_drift();
    plan.policies = (0..8)
        .map(|i| PolicyResult {
            enforcement: Enforcement::Soft,
            key: Some(format!("gpu_pool.p{i}")),
            message: format!("gpu_pool.p{i} pays too much"),
            name: "max_price".into(),
            overridden: false,
            passed: false,
            source: "policies/max_price.hcl:1".into(),
            standing: false,
            warning: false,
        })
        .collect();
    let text = plan_text(&plan, &WIDTH);
    let section = &text[text.find("Policies:").expect("a policy section")..];
    let lines: Vec<&str> = section.lines().take(8).collect();
    assert_eq!(
        lines,
        [
            "Policies: 8 soft failures",
            "  FAIL max_price (soft): 8 failed",
            "       - gpu_pool.p0 pays too much",
            "       - gpu_pool.p1 pays too much",
            "       - gpu_pool.p2 pays too much",
            "       - gpu_pool.p3 pays too much",
            "       - gpu_pool.p4 pays too much",
            "       … and 3 more (`gpuplan plan --json` lists every verdict)",
        ],
        "{text}"
    );
    let md = plan_markdown(&plan, 60_000);
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `max_price`")).collect();
    assert_eq!(rows.len(), 1, "{md}");
    assert!(rows[0].ends_with("gpu_pool.p4 pays too much<br>… and 3 more |"), "{md}");
}
