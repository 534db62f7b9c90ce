//! Planning: diff(Spec, observed state) → [`Plan`]. Pure: no I/O, no clock, no randomness.

pub mod model;

pub use model::{Action, Plan, ResourceChange};
