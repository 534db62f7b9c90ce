//! Refresh for jobs: ask the providers for the status of every run state records as
//! queued or running. One call per active run (clouds have no batched job status); runs
//! already finished are never asked about again.

use std::collections::BTreeMap;

use crate::providers::ProviderSet;
use crate::providers::{JobState, JobStatus, ProviderError};
use crate::state::State;

/// Run id → status, for every active run in state. A run the provider no longer knows is
/// left out (the state's record stands) rather than failing the whole refresh.
pub async fn statuses(
    providers: &ProviderSet,
    state: &State,
) -> Result<BTreeMap<String, JobStatus>, (String, ProviderError)> {
    let mut out = BTreeMap::new();
    for r in state.resources.values() {
        let Some(rec) = &r.job else { continue };
        for run in rec.runs.iter().filter(|r| r.is_active()) {
            let Some(p) = providers.get(&run.provider) else { continue };
            match p.job_status(&run.region, &run.id).await {
                Ok(s) => {
                    out.insert(run.id.clone(), s);
                }
                // A job VM the cloud no longer has: the run ended with its node (a spot
                // node reclaimed and gone, or terminated outside gpuplan). Without this the
                // run would count as running forever.
                Err(e) if e.code == "JobNotFound" && run.has_own_node() => {
                    let (state, why) = match run.capacity {
                        crate::providers::Capacity::Spot => (JobState::Preempted, "its spot node is gone"),
                        crate::providers::Capacity::OnDemand => (JobState::Failed, "its node is gone"),
                    };
                    out.insert(
                        run.id.clone(),
                        JobStatus {
                            id: run.id.clone(),
                            job: crate::addr::Address::new(crate::addr::Kind::Job, &run.id),
                            node_id: run.node_id.clone(),
                            state,
                            attempt: run.attempt,
                            message: Some(format!(
                                "{why}: {} no longer exists (terminated outside gpuplan?)",
                                run.node_id
                            )),
                            started_ms: None,
                            finished_ms: None,
                        },
                    );
                }
                // Anything else the provider cannot answer about: the state's record stands.
                Err(e) if e.class == crate::providers::ErrorClass::Invalid => {}
                Err(e) => return Err((run.provider.clone(), e)),
            }
        }
    }
    Ok(out)
}
