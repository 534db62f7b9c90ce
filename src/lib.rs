//! gpuplan: Terraform for GPU fleets.

pub mod addr;
pub mod catalog;
pub mod diag;
pub mod spec;
pub mod graph;
pub mod providers;
pub mod state;
pub mod plan;
