//! The [`Provider`] trait over [`AwsProvider`]: its kind, credential source and one
//! accessor per port it has. Each port is implemented in the file of its calls: nodes
//! `nodes.rs`, prices `prices.rs`, jobs and logs `jobs.rs`, run-command agents `ssm.rs`,
//! adoption `adopt.rs`, health `health.rs`, reservations `reservations.rs`, secrets
//! `secrets.rs`, placement groups `placement.rs`.

use async_trait::async_trait;

use super::AwsProvider;
use crate::providers::{AdoptionPort, JobPort, LogPort, NodePort, PricePort, Provider, RunCommandPort};
use crate::spec::model::ProviderKind;

#[async_trait]
impl Provider for AwsProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Aws
    }

    /// GPU health through the run-command agent (`health.rs`).
    fn health(&self) -> Option<&dyn crate::providers::health::HealthPort> {
        Some(self)
    }

    fn credential_source(&self) -> Option<String> {
        self.credentials.source()
    }

    fn nodes(&self) -> Option<&dyn NodePort> {
        Some(self)
    }

    fn prices(&self) -> Option<&dyn PricePort> {
        Some(self)
    }

    fn jobs(&self) -> Option<&dyn JobPort> {
        Some(self)
    }

    fn logs(&self) -> Option<&dyn LogPort> {
        Some(self)
    }

    fn adoption(&self) -> Option<&dyn AdoptionPort> {
        Some(self)
    }

    fn run_command(&self) -> Option<&dyn RunCommandPort> {
        Some(self)
    }

    /// Capacity Blocks and On-Demand Capacity Reservations (`reservations.rs`).
    fn reservations(&self) -> Option<&dyn crate::providers::reservations::ReservationPort> {
        Some(self)
    }

    /// `aws-sm:` and `ssm:` references checked without reading them (`secrets.rs`).
    fn secrets(&self) -> Option<&dyn crate::providers::secrets::SecretPort> {
        Some(self)
    }

    fn placement(&self) -> Option<&dyn crate::providers::PlacementPort> {
        Some(self)
    }

    /// EFA's security group rules (`efa.rs`).
    fn fabric(&self) -> Option<&dyn crate::providers::FabricPort> {
        Some(self)
    }
}
