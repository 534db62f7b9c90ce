//! gpuplan: Terraform for GPU fleets.

pub mod addr;
pub mod catalog;
pub mod cli;
pub mod diag;
pub mod spec;
