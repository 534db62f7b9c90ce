//! The capability ports a cloud may offer, one trait per file, each reached through one
//! accessor on [`super::Provider`] that answers `None` where the cloud lacks it: a cloud
//! implements what it has and nothing else (no "unsupported" bodies, no one-line
//! forwards). [`super::health::HealthPort`] is the same pattern, kept in its own file.
//!
//! Where a caller needs a capability the provider lacks, the functions here give the one
//! error each missing capability has always given (`provider `sim` cannot … yet`).

mod adoption;
mod cluster;
mod fabric;
mod jobs;
mod logs;
mod nodes;
mod placement;
mod prices;
mod run_command;

pub use adoption::AdoptionPort;
pub use cluster::ClusterPort;
pub use fabric::FabricPort;
pub use jobs::JobPort;
pub use logs::{LogPort, LogSink};
pub use nodes::NodePort;
pub use placement::{PlacementPort, still_in_use};
pub use prices::PricePort;
pub use run_command::RunCommandPort;

use super::{ErrorClass, Provider, ProviderError};

/// `p`'s nodes, or the error of a provider that makes none (the Kubernetes job backend).
pub fn nodes_of(p: &dyn Provider) -> Result<&dyn NodePort, ProviderError> {
    p.nodes().ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "NotANodeProvider",
            format!("provider `{}` makes no nodes here: the pool's provider makes and terminates them", p.kind()),
        )
    })
}

/// `p`'s jobs, or the error of a provider that runs none.
pub fn jobs_of(p: &dyn Provider) -> Result<&dyn JobPort, ProviderError> {
    p.jobs().ok_or_else(|| {
        ProviderError::new(ErrorClass::Invalid, "NoJobs", format!("provider `{}` runs no jobs", p.kind()))
    })
}

/// `p`'s adoption calls (`import`, `moved`, `removed`), or the error `what` cannot be done.
pub fn adoption_of<'p>(p: &'p dyn Provider, what: &str) -> Result<&'p dyn AdoptionPort, ProviderError> {
    p.adoption().ok_or_else(|| {
        ProviderError::new(ErrorClass::Invalid, "NotSupported", format!("provider `{}` cannot {what} yet", p.kind()))
    })
}

/// What [`adoption_of`] says each adoption call is.
pub const DESCRIBE: &str = "describe instances by id for `import`";
pub const LIST_UNMANAGED: &str = "list unmanaged instances for `gpuplan import`";
pub const RETAG: &str = "retag instances for `import`, `moved` and `removed`";

/// `p`'s cluster check, or the error of a provider that runs no cluster `region`.
pub fn cluster_of<'p>(p: &'p dyn Provider, region: &str) -> Result<&'p dyn ClusterPort, ProviderError> {
    p.cluster().ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "NoCluster",
            format!("provider `{}` runs no cluster `{region}`", p.kind()),
        )
    })
}

/// `p`'s job output, or the error of a provider that cannot read run `id`'s.
pub fn logs_of<'p>(p: &'p dyn Provider, id: &str) -> Result<&'p dyn LogPort, ProviderError> {
    p.logs().ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "NoJobOutput",
            format!("provider `{}` cannot read the output of run {id} yet", p.kind()),
        )
    })
}
