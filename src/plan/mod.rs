//! Planning: diff(Spec, observed state) → [`Plan`]. Pure: no I/O, no clock, no randomness.

pub mod adopt;
pub mod diff;
pub mod keep;
pub mod model;
pub mod outputs;
mod pool;
pub mod report;
pub mod shape;
pub mod standing;

pub use model::{Action, Plan, ResourceChange, SpecSources};

#[cfg(test)]
mod tests;
