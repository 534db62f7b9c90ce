//! The fleet as it stands, as a plan: what policies are checked against to tell a
//! standing violation (failing before the plan) from one the plan brings (docs/design/cli.md, "The
//! daily loop"). Pure.
//!
//! Every pool that exists keeps its nodes: no creates, deletes or moves, "after" is
//! "before", so pricing it prices the live nodes at their own prices. Pools the plan
//! would create do not exist yet and are left out; so are jobs, adoptions and output
//! values, which policies do not read.

use crate::plan::model::{Action, Plan, ResourceChange};

/// `plan` with every change undone.
pub fn as_it_stands(plan: &Plan) -> Plan {
    let changes = plan.changes.iter().filter(|c| c.action != Action::Create).map(unchanged).collect();
    let mut out = plan_header(plan);
    out.changes = changes;
    out.summarize();
    out
}

/// The plan's identity without its contents.
fn plan_header(plan: &Plan) -> Plan {
    Plan {
        format_version: plan.format_version,
        lineage: plan.lineage.clone(),
        serial: plan.serial,
        spec_digest: plan.spec_digest.clone(),
        inputs: None,
        refreshed: plan.refreshed,
        targets: plan.targets.clone(),
        replace: plan.replace.clone(),
        destroy: false,
        changes: Vec::new(),
        drift: Vec::new(),
        notes: Vec::new(),
        summary: Default::default(),
        errors: Vec::new(),
        cost: None,
        policies: Vec::new(),
        jobs: Vec::new(),
        spend: None,
        autoscale: Vec::new(),
        orphan_job_nodes: Vec::new(),
        evidence: Default::default(),
        health: Vec::new(),
        reservations: Vec::new(),
        adoptions: Vec::new(),
        placements: Vec::new(),
        outputs: Vec::new(),
    }
}

/// One change undone: a `no-op` whose pool keeps the nodes it has, where it has them.
fn unchanged(c: &ResourceChange) -> ResourceChange {
    let pool = c.pool.as_ref().map(|pc| {
        let mut pc = pc.clone();
        pc.after = pc.before;
        pc.creates.clear();
        pc.deletes.clear();
        pc.deferred.clear();
        pc.adopt.clear();
        pc.forget.clear();
        pc.alternates.clear();
        pc.retry_preferred = None;
        // A floating pool stays where it lives (and is priced there: `placement_before`).
        if let Some(before) = pc.placement_before.clone() {
            pc.placement = Some(before);
        }
        pc
    });
    ResourceChange {
        address: c.address.clone(),
        action: Action::NoOp,
        before: c.before.clone(),
        after: c.before.clone(),
        reasons: Vec::new(),
        pool,
        after_changes: Vec::new(),
        sensitive: c.sensitive.clone(),
    }
}
