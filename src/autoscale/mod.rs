//! The autoscaler: a pure decision per pool from rules, limits and signals.
//!
//! [`decide`] takes an `autoscaler` block's [`Rules`], the pool's [`Limits`] (min..max,
//! quota headroom, budget headroom, prices), what is happening ([`Signals`]: live nodes,
//! busy or idle since when, queued demand) and the time of the pool's last action, and
//! returns a [`Decision`]: scale up by `step`, scale down idle nodes, or hold (and why).
//!
//! It owns no I/O and no clock: `now` is an argument, so it is tested with plain `#[test]`s
//! and driven on a paused tokio clock by `reconcile/`. Gathering the signals (sim job runs,
//! the jobs queue) and carrying the decision into a plan is `reconcile/`'s job; the planner
//! then converges the pool to the decided count and apply records it (see
//! `plan::diff`, `state::ScaleRecord`).

mod decide;
mod signals;

#[cfg(test)]
mod tests;

pub use decide::{Decision, Direction, Limits, Rules, decide};
pub use signals::{Demand, NodeSignal, Signals, Waiting, queued_demand};
