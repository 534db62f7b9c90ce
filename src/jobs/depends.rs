//! Pipelines: a job whose `depends_on` jobs have not all succeeded is not admitted; it
//! waits for them and says why (forever, with the reason, when one of them failed). Pure.

use std::collections::BTreeMap;

use super::model::{JobPlacement, Placement, WaitCode, WaitReason};
use crate::addr::Address;
use crate::spec::Spec;

/// Why `job` may not start yet: the first job it `depends_on` (every instance of it, for
/// `count`/`for_each` jobs) that has not succeeded. `None`: all succeeded (or none named).
pub(super) fn unmet_dependency(
    spec: &Spec,
    job: &Address,
    out: &BTreeMap<Address, JobPlacement>,
) -> Option<WaitReason> {
    let deps = &spec.jobs.get(job)?.meta.depends_on;
    for dep in deps.iter().filter(|d| d.value.kind == crate::addr::Kind::Job) {
        let instances = instances(out, &dep.value);
        if instances.is_empty() {
            continue; // validation explains a dangling reference
        }
        if let Some(bad) = instances.iter().find(|j| matches!(j.placement, Placement::Failed | Placement::Cancelled)) {
            return Some(WaitReason {
                code: WaitCode::Dependency,
                message: format!(
                    "{} {}, so this job will not start (fix it and `gpuplan state rm {}` to run the pipeline again)",
                    bad.address,
                    bad.placement.as_str(),
                    bad.address
                ),
            });
        }
        if let Some(open) = instances.iter().find(|j| j.placement != Placement::Succeeded) {
            return Some(WaitReason {
                code: WaitCode::Dependency,
                message: format!(
                    "waits for {} to succeed ({})",
                    open.address,
                    match open.placement {
                        Placement::Running => "it is running",
                        _ => "it has not run yet",
                    }
                ),
            });
        }
    }
    None
}

/// The jobs `target` names (every instance when it has no key), in address order: a
/// range of the map, since instances sort together, so a long pipeline stays n log n.
fn instances<'o>(out: &'o BTreeMap<Address, JobPlacement>, target: &Address) -> Vec<&'o JobPlacement> {
    if target.key.is_some() {
        return out.get(target).into_iter().collect();
    }
    let first = Address { key: None, ..target.clone() };
    out.range(first..).map(|(_, j)| j).take_while(|j| j.address.matches_target(target)).collect()
}
