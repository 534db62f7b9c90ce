//! Jobs: admission, launch and lifecycle of `job` blocks.
//!
//! Placement, by phase (each pure; `place.rs` runs them in order):
//! - `demand.rs`: what each job's replicas need, from state and refresh ([`demand::PlaceInput`]).
//! - `room.rs`: each pool's and quota's room as this plan leaves it, running replicas taken out.
//! - `depends.rs`: `depends_on` holds a job back until its dependencies succeeded.
//! - `admit.rs`: admission (priority, age, quotas, capacity) over [`admit::Demand`]s.
//! - `place.rs`: spec + state + plan + observed run statuses → the plan's
//!   [`model::JobPlacement`]s, with the exact launch requests apply will send.
//! - `launch.rs`: one replica attempt's launch request (token, node shape, Kubernetes Job);
//!   its environment is `providers/job_env.rs` and its Job `providers/kube/manifest.rs`,
//!   so no Kubernetes wire type is built here.
//! - `regroup.rs`: a multi-node job that lost a replica before all started requeues whole.
//! - `preempt.rs`: waiting jobs take the GPUs of lower-priority preemptible ones.
//!
//! Around it:
//! - `adopt.rs`: pure: job nodes no recorded run owns → adopted as the run they are, or orphans.
//! - `refresh.rs`: reads the status of the runs state records as active (provider calls).
//! - `queue.rs`: the demand waiting per pool, for the autoscaler.
//! - `running.rs`: the jobs running on each pool now, for policies.
//! - `template_change.rs`: a changed template names the running jobs that keep the old one.
//!
//! Nothing here reads the clock, and nothing re-reads the spec at apply: launches are in
//! the plan.

pub mod admit;
pub mod adopt;
pub mod demand;
pub mod depends;
pub mod launch;
pub use crate::model::job as model;
pub mod place;
pub mod preempt;
pub mod queue;
pub mod refresh;
mod regroup;
pub mod room;
pub mod running;
pub mod status;
pub mod template_change;

pub use model::{JobPlacement, JobRecord, JobRun, Placement};
