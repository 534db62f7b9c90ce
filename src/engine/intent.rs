//! What the user asked of a plan ([`PlanRequest`]) and what the caller will do with it
//! ([`Hints`]): the two inputs of the pipeline besides the spec and the state
//! (docs/design/pipeline.md). Facts the clouds report go in an
//! [`Observation`](super::gather::Observation), never here.

use crate::addr::Address;
use crate::plan::model::ScaleAction;
use crate::policy;

/// The user's intent: what to plan, under which policies. Built by each command from its
/// flags (and by `reconcile` once per pass, with the autoscaler's steps).
#[derive(Debug, Clone, Default)]
pub struct PlanRequest {
    /// Read the clouds ([`gather`](super::gather::gather)); `false` plans against the
    /// state's record alone.
    pub refresh: bool,
    pub targets: Vec<Address>,
    /// `--replace`: pools whose every node the plan replaces though nothing changed.
    pub replace: Vec<Address>,
    pub destroy: bool,
    /// The environment (exchange-rate overrides such as `GPUPLAN_CNY_PER_USD`).
    pub env: std::collections::BTreeMap<String, String>,
    /// Policies to check the plan against (quotas are always checked).
    pub policies: Vec<policy::Policy>,
    /// Soft policies accepted with `--override-policy`.
    pub overrides: Vec<String>,
    /// The autoscaler's steps to plan with (`reconcile`; empty for every command).
    pub autoscale: Vec<ScaleAction>,
}

/// What the caller does with the plan: what is read ahead and what is kept for a saved
/// plan. Never what is planned, but for the reconciler's narrower price reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hints {
    /// The plan is executed by this process right after (`apply` without a plan file):
    /// the providers may ask the reads of new pools' first creates while refresh lists
    /// the fleet ([`read_ahead`](super::gather)).
    pub read_ahead: bool,
    /// The plan is only shown as text, never saved or printed as JSON: it does not need
    /// the spec's digest (`Plan::spec_digest`, which applying a saved plan checks), which
    /// takes a serialization of the whole spec (about 1.5 ms at 2,000 pools). Left empty.
    pub shown_only: bool,
    /// Ask the clouds for live prices only when the spec has floating pools, which move
    /// by price (`reconcile`: a pass prices nothing else live).
    pub floating_prices_only: bool,
}
