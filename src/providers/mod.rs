//! The provider seam: a small [`Provider`] trait every cloud implements, and the
//! capability ports (`ports/`, `health.rs`, `reservations.rs`, `secrets.rs`) it hands out where the cloud has them.
//!
//! The executor (`apply/`) and refresh talk only to [`Provider`] and its ports; SDK and wire types never
//! leave a provider's folder. Errors carry an [`ErrorClass`] so retries, backoff and
//! fallbacks are decided in one place (`apply::policy`), not in each provider.
//!
//! Clouds: [`sim`] (embedded), [`aws`] (EC2 SDK), [`kube`] (Kubernetes jobs),
//! [`tencentcloud`] (CVM, TKE) and [`alicloud`] (ECS, ACK). Each implements its ports in
//! the files of their calls, and its `Provider` impl holds only accessors. The last two
//! sign their own HTTP requests ([`signing`]) and are one core, [`signed_json`] (the
//! provider, the signed client, the job and log ports, the run-command runner), over
//! what each keeps of its own; they share the HTTP client and endpoint handling in
//! [`http`] and the credential cache in [`credentials`].

pub mod alicloud;
pub mod aws;
pub mod boot;
pub mod credentials;
pub mod health;
pub mod health_read;
pub mod http;
pub mod job_env;
pub mod kube;
pub mod launch;
pub mod ports;
pub mod reservations;
pub mod secrets;
pub mod signed_json;
pub mod signing;
pub mod sim;
pub mod tencentcloud;
pub mod userdata;

use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::ProviderKind;

// The vocabulary lives in `model/` (layer 0) so that state, plan and jobs need not depend
// on this layer; re-exported here for the providers' own code.
pub use crate::model::node::*;
pub use crate::model::tags::{self, Tags};
pub use ports::{
    AdoptionPort, ClusterPort, FabricPort, JobPort, LogPort, NodePort, PlacementPort, PricePort, RunCommandPort,
};

/// Providers by the local name pools use (`sim`, `aws`, an alias).
pub type ProviderSet = BTreeMap<String, Arc<dyn Provider>>;

/// What every cloud is: its kind, its clock, where its credentials came from, and one
/// accessor per capability port (`ports/`, `health.rs`) that answers `None` where the
/// cloud lacks it. Object-safe: the executor holds `Arc<dyn Provider>`. A caller asks for
/// the capability it needs (`p.nodes()`, or [`ports::nodes_of`] where its absence is an
/// error); a new kind of cloud call is a new port, never a new method here.
#[async_trait]
pub trait Provider: Send + Sync {
    fn kind(&self) -> ProviderKind;

    /// The provider's clock, in ms since the epoch: spend accrues by it. Real clouds run
    /// on the wall clock; the sim cloud has its own (`GPUPLAN_SIM_START`, `sim advance`).
    fn clock_ms(&self) -> u64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }

    /// Which credential source answered (`gpuplan check`), once a call has been made:
    /// its name, never a value. `None` for a cloud without credentials (sim).
    fn credential_source(&self) -> Option<String> {
        None
    }

    /// Pool nodes: list, create, terminate, read ahead, quotas. Every VM cloud.
    fn nodes(&self) -> Option<&dyn NodePort> {
        None
    }

    /// Priced offers for a GPU model.
    fn prices(&self) -> Option<&dyn PricePort> {
        None
    }

    /// Job runs: launch, status, cancel, preempt, job nodes.
    fn jobs(&self) -> Option<&dyn JobPort> {
        None
    }

    /// A job's own output (`gpuplan jobs logs`).
    fn logs(&self) -> Option<&dyn LogPort> {
        None
    }

    /// `gpuplan check` of a cluster jobs are submitted to (the Kubernetes backend).
    fn cluster(&self) -> Option<&dyn ClusterPort> {
        None
    }

    /// Instances gpuplan did not make, and retags in place (`import`, `moved`, `removed`).
    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        None
    }

    /// The run-command agents of pool nodes, for jobs on warm nodes. `None`: this cloud
    /// runs jobs on nodes of their own.
    fn run_command(&self) -> Option<&dyn RunCommandPort> {
        None
    }

    /// GPU health reads and cordons ([`health::HealthPort`]), where this cloud has them.
    fn health(&self) -> Option<&dyn health::HealthPort> {
        None
    }

    /// Reserved capacity ([`reservations::ReservationPort`]), where this cloud sells it.
    fn reservations(&self) -> Option<&dyn reservations::ReservationPort> {
        None
    }

    /// Whether a job's secret exists, asked without reading it ([`secrets::SecretPort`]).
    fn secrets(&self) -> Option<&dyn secrets::SecretPort> {
        None
    }

    /// Cluster placement groups a pool's nodes launch into ([`PlacementPort`]). `None`
    /// on the sim cloud too: its nodes carry their group's name and need no group object.
    fn placement(&self) -> Option<&dyn PlacementPort> {
        None
    }

    /// What a fast fabric needs beside the nodes ([`FabricPort`]): on AWS, EFA's security
    /// group rules. `None` where a cloud needs nothing beside its launches, or has no fabric.
    fn fabric(&self) -> Option<&dyn FabricPort> {
        None
    }
}

/// The pool an instance without a `gpuplan:address` tag reports: a name no address can
/// take (a leading `-` is not an identifier), so it never matches a pool.
pub fn unowned_pool() -> crate::addr::Address {
    crate::addr::Address::new(crate::addr::Kind::GpuPool, "-foreign")
}
