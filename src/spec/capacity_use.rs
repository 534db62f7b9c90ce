//! A pool's `capacity {}` block as the typed spec holds it (docs/design/big-runs.md):
//! the reservation its first nodes launch into. Decoded and checked in `pool_capacity.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::spanned::Spanned;

/// `capacity { reservation = reservation.x }`, or `"open"`: the pool's first nodes run in
/// that reservation (or any matching open one), the rest per `mix`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapacityUse {
    /// `reservation.NAME`, or `open` for any matching open On-Demand reservation.
    pub reservation: Spanned<String>,
    #[serde(skip)]
    pub span: crate::diag::Span,
}

impl CapacityUse {
    /// The `reservation` block named; `None` for `open`.
    pub fn target(&self) -> Option<crate::addr::Address> {
        // The text is the decoder's own (`pool_capacity.rs` wrote it from a parsed address):
        // it always parses.
        if self.reservation.value == "open" { None } else { self.reservation.value.parse().ok() }
    }
}
