//! One arrow per view: the terminal text writes `->` (a terminal may lack the glyph, and
//! Terraform's own plans write `->`), gpuplan's messages included, which are written once
//! for every view with `→`; the pull-request markdown writes `→` in its prose and tables,
//! and its `diff` and `text` blocks are the text view's lines, `->` as there.

use serde_json::json;

use super::*;

/// `update_with_drift` with what carries a message's `→` into a view: a node replaced for
/// its image, one whose removal a job defers, a node changed outside gpuplan, a note, and
/// a job requeued off the replaced node.
fn arrowed() -> Plan {
    let mut plan = update_with_drift();
    let pool = plan.changes[0].pool.as_mut().expect("a pool change");
    pool.deletes.push(delete("i-9", "us-east-1a", Capacity::Spot, "replaced: image img-1 → img-2"));
    pool.deferred.push(DeferredDelete {
        id: "i-8".into(),
        zone: "us-east-1a".into(),
        capacity: Capacity::OnDemand,
        reason: "replaced: region us-east-1 → us-west-2".into(),
        job: "job.b".parse().unwrap(),
    });
    plan.drift.push(DriftItem {
        address: pool_addr("train"),
        kind: DriftKind::Changed,
        node_id: Some("i-7".into()),
        message: "node i-7 changed outside gpuplan (p4de.24xlarge us-east-1a → p5.48xlarge us-east-1a)".into(),
    });
    plan.notes.push(PlanNote {
        address: pool_addr("train"),
        message: "on-demand/spot 2/1 → 3/0 once capacity returns".into(),
    });
    let job: crate::model::JobPlacement = serde_json::from_value(json!({
        "address": "job.a", "pool": "gpu_pool.train", "priority": "medium", "preemptible": true,
        "replicas": 1, "gpus_per_replica": 1, "placement": "waiting", "attempt": 2, "retries": 0,
        "interrupted": [{
            "run": "j-1", "replica": 0, "node_id": "i-9", "capacity": "spot", "zone": "us-east-1a",
            "why": "replaced: image img-1 → img-2", "node_reason": "replaced: image img-1 → img-2",
        }],
    }))
    .expect("a job placement");
    plan.jobs = vec![job];
    plan
}

/// What lies outside (`prose`) and inside (`code`) a markdown comment's fenced blocks.
fn split_fences(md: &str) -> (String, String) {
    let (mut prose, mut code, mut fenced) = (String::new(), String::new(), false);
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let to = if fenced { &mut code } else { &mut prose };
        to.push_str(line);
        to.push('\n');
    }
    (prose, code)
}

#[test]
fn the_text_view_writes_one_arrow_in_every_line() {
    let plan = arrowed();
    for verbose in [false, true] {
        let text = plan_text(&plan, &TextOptions { width: 0, verbose, ..WIDTH });
        assert!(!text.contains('→'), "verbose {verbose}:\n{text}");
        for said in [
            "(replaced: image img-1 -> img-2)",
            "(replaced: region us-east-1 -> us-west-2): removal deferred",
            "p4de.24xlarge us-east-1a -> p5.48xlarge",
            "on-demand/spot 2/1 -> 3/0 once",
        ] {
            assert!(text.contains(said), "verbose {verbose}: `{said}`:\n{text}");
        }
    }
}

#[test]
fn markdown_writes_its_arrow_in_prose_and_the_text_view_s_in_its_blocks() {
    let md = plan_markdown(&arrowed(), 65_000);
    let (prose, code) = split_fences(&md);
    assert!(!prose.contains("->"), "{prose}");
    assert!(prose.contains("removed (replaced: image img-1 → img-2)"), "the jobs table: {prose}");
    assert!(prose.contains("on-demand/spot 2/1 → 3/0 once"), "the note: {prose}");
    assert!(!code.contains('→'), "{code}");
    assert!(code.contains("(replaced: image img-1 -> img-2)") && code.contains("-> p5.48xlarge"), "{code}");
}
