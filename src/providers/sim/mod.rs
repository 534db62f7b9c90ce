//! The embedded simulated cloud: gpuplan's default provider, `provider "sim" {}`.
//!
//! A persistent multi-cloud that needs no credentials: it serves the AWS, Tencent Cloud and
//! Alibaba Cloud catalogs, enforces capacity per zone, reclaims spot nodes on request, runs
//! jobs for a while, and can add latency and failures for tests and benchmarks. It is a
//! product feature (what users try first), so it keeps the rules real providers keep:
//! ownership tags, idempotency tokens, paged lists, batched terminates.
//!
//! - [`SimCloud`] (`cloud.rs`): the cloud kept at `state/<workspace>.sim.json`, opened by one
//!   process at a time, and its controls (`interrupt`, `set_capacity`, ...).
//! - [`SimProvider`] (`provider.rs`): the [`crate::providers::Provider`] trait over it; the
//!   calls themselves are in `nodes.rs`, `jobs.rs`, `offers.rs`.
//! - `world.rs` holds the state and the changes that alter it; `store.rs` persists them as a
//!   snapshot plus an append-only log; `catalog_check.rs` validates against the catalogs;
//!   `rng.rs` makes ids and failures deterministic from the seed.
//!
//! This module must not depend on the executor or the CLI: they depend on it.

mod adopt;
mod catalog_check;
mod cloud;
mod config;
mod error;
mod health;
mod jobs;
mod nodes;
mod offers;
mod provider;
pub mod reservations;
mod reserved_room;
mod rng;
mod snapshot;
mod store;
pub mod trace;
mod usage;
mod world;

#[cfg(test)]
mod tests;

pub use cloud::{COMPACT_AFTER, LOCK_TIMEOUT, SimCloud, SimStats};
pub use config::{DEFAULT_ZONE_CAPACITY, SimConfig};
pub use error::SimError;
pub use health::Fault;
pub use provider::SimProvider;
pub use store::Preread;
pub use usage::NodeUsage;
