//! gpuplan's integration tests, in one test binary (cargo's `tests/testsuite` layout, as
//! cargo itself uses): every module below used to be a binary of its own, and each linked
//! the AWS SDK again. One binary links it once.
//!
//! Data stays beside the code that reads it: bad-input specs in `tests/corpus/`, plan
//! cases in `tests/plan_cases/`, policy fixtures in `tests/policies/`, states in older
//! formats in `tests/state_formats/`, and insta snapshots in `tests/testsuite/snapshots/`
//! (named `testsuite__<module>__<name>.snap`).

mod addresses_cli;
mod adopt_moto;
mod adopt_sim;
mod aws;
mod aws_credentials;
mod aws_fake;
mod aws_moto;
mod big_runs;
mod build_features;
mod chinacloud;
mod ci_recipes;
mod cli;
mod convergence;
mod corpus;
mod cost;
mod deploy;
mod docs;
mod efa_moto;
mod encryption_moto;
mod encryption_sim;
mod engine_cli;
mod examples;
mod fencing_s3;
mod floating;
mod fmt_cli;
mod health_captures;
mod health_cli;
mod health_moto;
mod http_stub;
mod job_records;
mod job_release_moto;
mod jobs_cli;
mod jobs_sim;
mod k8s_schema;
mod kube_fake;
mod kube_jobs;
mod layering;
mod leader;
mod least_disruption;
mod limits;
mod mig;
mod no_panic;
mod pipelines;
mod placement_groups_moto;
mod plan_cases;
mod plan_view;
mod policies;
mod pool_truth;
mod poolless;
mod preemption;
mod removed_nodes;
mod rendezvous_moto;
mod replace_cli;
mod reservations;
mod reservations_moto;
mod reserved_pools;
mod reserved_pools_moto;
mod schema;
mod secrets_check_moto;
mod secrets_moto;
mod send_once_moto;
mod sigterm_moto;
mod sim_cli;
mod sim_run;
mod spec_folder;
mod spec_roundtrip;
mod spend_sim;
mod state_cli;
mod state_format;
mod state_plain;
mod state_s3;
mod state_stores;
mod test_cli;
mod tf_habits;
mod workspace_cli;
