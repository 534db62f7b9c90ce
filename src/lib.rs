//! gpuplan: Terraform for GPU fleets.

pub mod addr;
pub mod catalog;
pub mod diag;
pub mod graph;
pub mod plan;
pub mod providers;
pub mod render;
pub mod spec;
pub mod state;
