//! Cordons of quarantined nodes (docs/design/gpu-health.md, "Quarantine"): each node the
//! plan quarantines in a Kubernetes cluster (`health[]` entries with a `cordon`) is marked
//! unschedulable there through its provider's health port, behind the fence like every
//! write, before any job launches. A cordon that fails fails the apply; the node stays
//! quarantined (gpuplan places nothing there) and the next plan shows the cordon again.

use super::{ApplyOptions, Outcome, ProviderSet, Status};
use crate::plan::{Action, Plan};

/// Cordons every node the plan says to, one outcome each (under its pool's address).
pub async fn run(plan: &Plan, providers: &ProviderSet, opts: &ApplyOptions) -> Vec<Outcome> {
    let mut out = Vec::new();
    for (h, c) in plan.cordons() {
        let pool = h.address.to_string();
        let status = if opts.cancel.is_cancelled() {
            Status::Skipped(opts.cancel.reason())
        } else {
            match providers.get(&c.provider).and_then(|p| p.health()) {
                None => Status::Failed(format!(
                    "cannot cordon node {}: provider `{}` is not configured to reach its cluster",
                    h.node, c.provider
                )),
                Some(port) => match port.cordon(&c.cluster, &h.node).await {
                    Ok(()) => Status::Done,
                    Err(e) => Status::Failed(format!("cordon of node {}: {e}", h.node)),
                },
            }
        };
        let message = match &status {
            Status::Done => format!("node {} cordoned (quarantine)", h.node),
            s => super::progress_message(s),
        };
        opts.progress.event(&pool, &message);
        out.push(Outcome {
            address: h.address.clone(),
            action: Action::Update,
            status,
            created: 0,
            deleted: 0,
            missing: 0,
        });
    }
    out
}
