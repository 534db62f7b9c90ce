//! Why a plan or an apply failed: [`RunError`], with the text a run whose lock or Lease was
//! lost prints (docs/design/state-and-locks.md, "Expiry and fencing").

use crate::apply::{ApplyReport, Status};
use crate::cost;
use crate::plan::diff;
use crate::providers::ProviderError;
use crate::state::StateError;

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RunError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    State(#[from] StateError),
    #[error("refresh failed: provider `{provider}` answered {error}")]
    #[diagnostic(
        code(gpuplan::refresh),
        help("check the provider's credentials and endpoint, or plan with --refresh=false")
    )]
    Refresh { provider: String, error: ProviderError },
    #[error(
        "the saved plan is stale: it was made against state {plan_lineage} serial {plan_serial}, but the state is now {lineage} serial {serial}"
    )]
    #[diagnostic(code(gpuplan::plan::stale), help("run `gpuplan plan --out FILE` again and apply the new plan"))]
    StalePlan { plan_lineage: String, plan_serial: u64, lineage: String, serial: u64 },
    #[error("the saved plan was made from a different spec: {changed}")]
    #[diagnostic(
        code(gpuplan::plan::spec_changed),
        help("plan again (`gpuplan plan --out FILE`) and apply the new plan, or put back what changed")
    )]
    SpecChanged { changed: String },
    #[error(transparent)]
    #[diagnostic(transparent)]
    StateKey(#[from] diff::BadStateKey),
    #[error("the state journal failed: {0}")]
    #[diagnostic(code(gpuplan::state::journal))]
    Journal(String),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Cost(#[from] cost::CostError),
    /// A `GPUPLAN_*` setting from the environment that cannot be used.
    #[error("{0}")]
    #[diagnostic(code(gpuplan::env), help("fix or unset the variable"))]
    Setting(String),
    /// The state lock or the Lease the apply ran under stopped holding: it started nothing
    /// after that (docs/design/state-and-locks.md, "Expiry and fencing").
    #[error("{broken}; {}", not_started_text(not_started))]
    #[diagnostic(code(gpuplan::state::lock_lost), help("{}", lock_lost_help(saved)))]
    LockLost {
        broken: crate::state::fence::Broken,
        /// The changes it did not start (or not finish: a pool's later batches).
        not_started: Vec<String>,
        /// Why the final state write failed, when it did.
        saved: Option<Box<StateError>>,
    },
}

/// The run's failure once its lock or Lease no longer held: `report`'s changes it did not
/// start, and `unsaved`, the final write's error if it failed.
pub(super) fn lock_lost(
    broken: &crate::state::fence::Broken,
    report: &ApplyReport,
    unsaved: Option<StateError>,
) -> RunError {
    let not_started = report
        .outcomes
        .iter()
        .filter(|o| match &o.status {
            Status::Skipped(_) => true,
            Status::Failed(m) => crate::apply::fence::refused(m),
            _ => false,
        })
        .map(|o| o.address.to_string())
        .collect();
    RunError::LockLost { broken: broken.clone(), not_started, saved: unsaved.map(Box::new) }
}

fn not_started_text(not_started: &[String]) -> String {
    const SHOWN: usize = 10;
    if not_started.is_empty() {
        return "every operation it had started finished".to_string();
    }
    let mut text = format!(
        "{} operation(s) not started: {}",
        not_started.len(),
        not_started[..not_started.len().min(SHOWN)].join(", ")
    );
    if not_started.len() > SHOWN {
        text += &format!(" and {} more", not_started.len() - SHOWN);
    }
    text
}

fn lock_lost_help(unsaved: &Option<Box<StateError>>) -> String {
    let next = "let the run that holds it now finish, then run `gpuplan plan` to see what is left; nodes \
                launched but not recorded carry gpuplan's tags, and the next plan adopts them rather than \
                launching them again";
    match unsaved.as_deref() {
        None => format!("what this run finished is saved in the state; {next}"),
        Some(StateError::Errored { saved, .. }) => format!(
            "the state could not be written under the lost lock; a copy of this run's state is in `{}` for the \
             record (do not push it over the newer state); {next}",
            crate::spec::display_path(saved)
        ),
        Some(e) => format!("the state could not be written under the lost lock ({e}); {next}"),
    }
}
