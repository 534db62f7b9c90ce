//! # gpuplan: Terraform for GPU fleets
//!
//! Platform and ML teams describe GPU pools, team quotas and budgets, spot/on-demand
//! mixes, job templates and autoscalers in HCL or YAML. `gpuplan plan` refreshes what the
//! clouds really run, diffs it against the spec and shows a reviewable plan with its cost
//! and policy verdicts; `gpuplan apply` executes exactly that plan and records the result
//! in local state.
//!
//! ## The pipeline (one direction, no back and forth)
//!
//! ```text
//! spec files ──parse──▶ raw tree (spans) ──decode/eval──▶ typed Spec ──▶ dependency graph
//!                                                                          │
//! state (lock) ──▶ refresh via providers (observed) ──▶ drift ──┐           │
//!                                                               ▼           ▼
//!                                              plan = diff(Spec, observed state)  (pure)
//!                                                               │
//!                                              cost(plan) ─▶ policy(plan, cost) ─▶ render
//!                                                               │
//!                                    apply(plan) ─▶ executor over graph ─▶ providers ─▶ state journal
//! ```
//!
//! 1. [`spec`]: `hcl.rs` and `yaml.rs` parse files into one format-independent
//!    [`spec::raw`] tree that keeps a [`diag::Span`] on every node; `decode.rs` evaluates
//!    expressions ([`spec::eval`]: references, interpolation, functions) and decodes blocks
//!    into the typed [`spec::Spec`]; `validate.rs` checks it against the [`catalog`].
//!    Every problem becomes a located [`diag::Diagnostic`]; one run reports them all.
//! 2. [`graph`]: a petgraph DAG over [`addr::Address`]es from references and `depends_on`.
//! 3. [`providers`]: the narrow async [`providers::Provider`] trait. Refresh lists the
//!    nodes carrying gpuplan's ownership tags, one paged call per region.
//! 4. [`plan`]: `diff(Spec, state, observed)` → [`plan::Plan`]. Pure: no I/O, no clock, no
//!    randomness, so it is tested with plain `#[test]`s. Every change has an action and
//!    reasons; the node operations it carries are exactly what apply will do.
//! 5. [`apply`]: the executor walks the plan in dependency order with bounded parallelism,
//!    journals each finished operation durably, and never re-reads the spec.
//! 6. [`jobs`]: admission of `job` blocks into the plan (pure: priority, age, quotas,
//!    capacity), their launch after the node changes, status on refresh, relaunch after
//!    preemption, and the Kubernetes manifests of `gpuplan jobs render`.
//! 7. [`state`]: versioned JSON with serial and lineage, atomic writes, a backup, a lock
//!    and a journal compacted once per apply (linear in the fleet, not quadratic).
//!
//! 7. [`autoscale`]: a pure decision per autoscaled pool from its rules, limits and
//!    signals; [`reconcile`] runs passes (refresh → drift → autoscale → plan → policies →
//!    apply) once or on a loop, and [`metrics`] serves their Prometheus view.
//!
//! I/O lives in three places only: reading spec files, the state backend, providers.
//!
//! Memory: configurations in plans and state, and a plan's cost report, are kept as
//! compact JSON text ([`json_text::JsonText`]), shared between a plan and the state it
//! produces; large files are streamed, never built whole in memory.
//!
//! ## Where to start
//! - A new spec attribute: `spec/model.rs` (type), `spec/blocks.rs` (decoding),
//!   `spec/validate.rs` (cross-checks); the schema test then asks to regenerate
//!   `schemas/spec.schema.json`.
//! - A new cloud: implement [`providers::Provider`] in its own folder; SDK types stay there.
//! - A new command: a thin file in `cli/` over library calls.

pub mod addr;
pub mod apply;
pub mod autoscale;
pub mod catalog;
pub mod cli;
pub mod cost;
pub mod diag;
pub mod engine;
pub mod graph;
pub mod health;
pub mod hex;
pub mod jobs;
pub mod json_text;
pub mod metrics;
pub mod model;
pub mod par;
pub mod plan;
pub mod policy;
pub mod providers;
pub mod reconcile;
pub mod render;
pub mod schema;
pub mod spec;
pub mod state;
pub mod testing;

/// The allocator the `gpuplan` binary runs on (and the scale benchmark, so it measures
/// the same process): mimalloc, which keeps large plans' freed memory reusable where
/// glibc's malloc leaves it fragmented. Declared by the executable, not by this library.
pub use mimalloc::MiMalloc as Allocator;
