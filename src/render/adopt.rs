//! Imports, moves and forgets in every view: one line per imported instance, one per
//! moved or forgotten resource, as Terraform words them. Derived from `plan.adoptions`
//! only, so the views cannot disagree.

use serde::Serialize;

use crate::plan::adopt::{AdoptAction, Adoption};
use crate::plan::model::Plan;

/// `# gpu_pool.legacy: i-0abc (p4d.24xlarge, on-demand, us-east-1a) will be imported`,
/// and the like, in plan order.
pub(crate) fn lines(plan: &Plan) -> Vec<String> {
    plan.adoptions.iter().flat_map(adoption_lines).collect()
}

fn adoption_lines(a: &Adoption) -> Vec<String> {
    let nodes = a.nodes.len();
    let keep = match nodes {
        0 => String::new(),
        1 => " (1 node keeps running".to_string(),
        n => format!(" ({n} nodes keep running"),
    };
    match a.action {
        AdoptAction::Import => a
            .nodes
            .iter()
            .map(|n| {
                format!("# {}: {} ({}, {}, {}) will be imported", a.address, n.id, n.instance_type, n.capacity, n.zone)
            })
            .collect(),
        AdoptAction::Move => {
            let from = a.from.as_ref().map_or_else(|| "?".to_string(), ToString::to_string);
            let how =
                if nodes == 0 { String::new() } else { format!("{keep}; their address tag is updated in place)") };
            vec![format!("# {from} has moved to {}{how}", a.address)]
        }
        AdoptAction::Forget => {
            let how = if nodes == 0 { String::new() } else { format!("{keep}; gpuplan's tags come off)") };
            vec![format!("# {} will no longer be managed by gpuplan, but will not be destroyed{how}", a.address)]
        }
    }
}

/// One entry of `plan --json`'s `adoptions`: per instance for imports, per resource
/// for moves and forgets (with the instance ids).
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct AdoptionDoc {
    /// `import`, `move` or `forget`.
    action: &'static str,
    address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    /// The instance ids it concerns.
    ids: Vec<String>,
}

pub(crate) fn docs(plan: &Plan) -> Vec<AdoptionDoc> {
    let mut out = Vec::new();
    for a in &plan.adoptions {
        let doc = |ids: Vec<String>| AdoptionDoc {
            action: a.action.as_str(),
            address: a.address.to_string(),
            from: a.from.as_ref().map(ToString::to_string),
            ids,
        };
        match a.action {
            AdoptAction::Import => out.extend(a.nodes.iter().map(|n| doc(vec![n.id.clone()]))),
            _ => out.push(doc(a.nodes.iter().map(|n| n.id.clone()).collect())),
        }
    }
    out
}
