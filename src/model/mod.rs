//! The shared vocabulary (layer 0): the words every later phase speaks, as plain data.
//!
//! [`ProviderKind`], job [`Priority`], node [`Capacity`], [`Node`], [`Offer`], [`Tags`],
//! job runs and records, GPU [`health`] evidence, [`secret`] references, and [`Endpoint`]. Nothing here does I/O or depends on another
//! top-level module except `addr`; the spec, the state, the plan, the providers and the
//! executor all build on it, so none of them needs to reach up or sideways for a type
//! (the module graph stays one-way: `tests` in `lib.rs` checks it).

pub mod common;
pub mod encryption;
pub mod endpoint;
pub mod exact;
pub mod hardware;
pub mod health;
pub mod job;
pub mod kind;
pub mod money;
pub mod node;
pub mod reservation;
pub mod secret;
pub mod tags;
pub mod time;
pub mod tls;
pub mod words;

pub use endpoint::Endpoint;
pub use job::{JobPlacement, JobRecord, JobRun, Placement, Priority, ReplicaLaunch, Sending, WaitCode, WaitReason};
pub use kind::{ProviderKind, UnknownProviderKind};
pub use node::{
    AgentState, Capacity, CreateNodes, CreateResult, ErrorClass, JobState, JobStatus, LaunchJob, ListFilter, NewPool,
    Node, NodeState, Offer, ProviderError,
};
pub use tags::Tags;
