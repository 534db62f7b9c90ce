//! State: what gpuplan created and last observed, kept in a local file with a lock,
//! a backup and a journal so an apply never loses a finished operation.

pub mod model;

pub use model::{ResourceState, State};
