//! A pool's `health {}` block as the typed spec holds it (docs/design/gpu-health.md):
//! readiness, the signals that count, the action, `max_repairs` and `grace`, with their
//! defaults. `health_block.rs` decodes it; `spec::model` re-exports these types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diag::Span;
use crate::spec::spanned::{Duration, Spanned};

/// A pool's `health {}` block (docs/design/gpu-health.md): which GPU faults mark a node,
/// what happens to it, and how many repairs an hour the pool may make. A pool without the
/// block has [`Health::default`]: health checks are on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Health {
    /// The check a new node passes before it takes jobs: `dcgm` (DCGM diagnostics level 1),
    /// `nvidia-smi` (default) or `none`.
    #[serde(default)]
    pub readiness: Spanned<Readiness>,
    /// The faults that count (default: `xid_fatal`, `ecc_uncorrectable`,
    /// `row_remap_failure`, `gpu_missing`, `nvlink_down`).
    #[serde(default = "default_signals")]
    pub signals: Vec<Spanned<crate::model::health::Signal>>,
    /// `replace` (default: a new node, then the old one goes) or `quarantine` (no new
    /// jobs; a person decides).
    #[serde(default)]
    pub action: Spanned<HealthAction>,
    /// Replacements per pool per hour, an absolute count (default 1; 0 turns repair off).
    #[serde(default = "default_max_repairs")]
    pub max_repairs: Spanned<u32>,
    /// How long a signal must persist before it counts (default 5m); fatal XIDs and a
    /// failed readiness check count at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub grace: Option<Spanned<Duration>>,
}

fn default_signals() -> Vec<Spanned<crate::model::health::Signal>> {
    crate::model::health::Signal::DEFAULT.into_iter().map(|s| Spanned::new(s, Span::default())).collect()
}

fn default_max_repairs() -> Spanned<u32> {
    Spanned::new(1, Span::default())
}

impl Default for Health {
    fn default() -> Self {
        Health {
            readiness: Spanned::default(),
            signals: default_signals(),
            action: Spanned::default(),
            max_repairs: default_max_repairs(),
            grace: None,
        }
    }
}

impl Health {
    /// `grace`, else five minutes.
    pub fn grace(&self) -> std::time::Duration {
        self.grace.as_ref().map_or(std::time::Duration::from_secs(300), |d| d.value.0)
    }

    /// Does the pool count `signal`?
    pub fn counts(&self, signal: crate::model::health::Signal) -> bool {
        self.signals.iter().any(|s| s.value == signal)
    }
}

/// `health.readiness`: the check a new node passes before its first job (one type with
/// the launch request's, so the pool's choice reaches the job script as written).
pub use crate::model::health::Readiness;

/// `health.action`: what an unhealthy node's fate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthAction {
    /// A new node first, then the old one goes (under the rules for jobs under removed nodes).
    #[default]
    Replace,
    /// No new jobs or warm-node sends; Kubernetes nodes are cordoned. A person decides.
    Quarantine,
}

impl HealthAction {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthAction::Replace => "replace",
            HealthAction::Quarantine => "quarantine",
        }
    }
}
