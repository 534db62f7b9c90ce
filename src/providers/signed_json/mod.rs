//! The shared core of the two signed-JSON clouds, Tencent Cloud (`tencentcloud/`) and
//! Alibaba Cloud (`alicloud/`): what they do alike lives here once, and each cloud keeps
//! only what differs (its signer in `signing/`, endpoints, field names, its data).
//!
//! - `cloud.rs`: [`cloud::Cloud`], the provider of both clouds (`Cloud<Tencent>`,
//!   `Cloud<Alibaba>`), implementing `Provider` once over a [`cloud::CloudApi`], and the
//!   small traits each cloud writes for the shared ports: its instance reads
//!   ([`cloud::Instances`], with the ownership check of a release), its job nodes
//!   ([`cloud::JobNodes`]) and its send-time secrets ([`cloud::SendSecrets`]).
//! - `adopt.rs`: the adoption port of both, over each cloud's tag calls
//!   ([`adopt::Retag`]).
//! - `jobs.rs`: the job and log ports of both: a warm node's run through the agent or a
//!   node made for the job, status, cancel, job nodes, release, output.
//! - `client.rs`: the signed client over `providers/http.rs`: credentials, send, the
//!   answer read by the cloud's [`client::Wire`] (addressing, signature, error envelope).
//! - `agents.rs`: the run-command runner (TAT, Cloud Assistant), both clouds'
//!   run-command and health port: agents, send, status, output, cancel, boot checks and
//!   GPU health reads, over each cloud's [`agents::AgentApi`] (four calls).
//! - `errors.rs`: error classification as data: each cloud's `code → class` table and
//!   hints, read by one classifier.
//! - `run_command.rs`: the agents' status words as data → a run's state, and their base64
//!   output.
//!
//! Nothing here knows a wire format or a cloud's name; a cloud passes its own. Retries
//! and backoff are the executor's (`apply::policy`), by each error's class.

pub mod adopt;
pub mod agents;
pub mod client;
pub mod cloud;
pub mod errors;
pub mod jobs;
pub mod run_command;
