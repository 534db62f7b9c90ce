//! Jobs: admission, launch and lifecycle of `job` blocks, and the Kubernetes backend.
//!
//! - `adopt.rs`: pure: job nodes no recorded run owns → adopted as the run they are, or orphans.
//! - `admit.rs`: pure admission (priority, age, quotas, capacity) over [`admit::Demand`]s.
//! - `place.rs`: pure: spec + state + plan + observed run statuses → the plan's
//!   [`model::JobPlacement`]s, with the exact launch requests apply will send.
//! - `refresh.rs`: reads the status of the runs state records as active (provider calls).
//! - `queue.rs`: the demand waiting per pool, for the autoscaler.
//! - `running.rs`: the jobs running on each pool now, for policies.
//! - `template_change.rs`: a changed template names the running jobs that keep the old one.
//! - `k8s.rs`: typed batch/v1 Job manifests, for `gpuplan jobs render` and the
//!   Kubernetes backend (`providers/kube`), which submits the same objects.
//!
//! Nothing here reads the clock except `launch.rs` (it stamps times into state), and
//! nothing re-reads the spec at apply: launches are in the plan.

pub mod admit;
pub mod adopt;
pub mod k8s;
pub use crate::model::job as model;
pub mod place;
pub mod queue;
pub mod refresh;
pub mod running;
pub mod status;
pub mod template_change;

pub use model::{JobPlacement, JobRecord, JobRun, Placement};
