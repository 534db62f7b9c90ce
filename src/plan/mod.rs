//! Planning: diff(Spec, observed state) → [`Plan`]. Pure: no I/O, no clock, no randomness.

pub mod adopt;
pub mod context;
pub mod diff;
pub mod health;
pub mod inputs;
pub mod keep;
pub mod model;
pub mod outputs;
mod pool;
pub mod report;
pub mod reservations;
pub mod shape;
pub mod standing;

pub use inputs::PlanInputs;
pub use model::{Action, Plan, ResourceChange};
pub use pool::{AsRecorded, groups_to_delete};

#[cfg(test)]
mod tests;
