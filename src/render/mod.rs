//! Views of one plan model: terminal text, JSON and pull-request markdown.
//!
//! Every view reads the same [`Plan`](crate::plan::Plan) and decides nothing: no
//! planning, pricing or policy logic lives here, so the text a reviewer reads, the JSON a
//! script parses and the comment posted on a pull request cannot disagree (OpenTofu's
//! `command/jsonformat` habit). Shared readings of the model (attribute diffs, node
//! counts, cost and policy lines) sit in `facts.rs`; terminal styling in `style.rs`.
//!
//! - [`plan_text`] / [`drift_text`]: Terraform-like terminal output; colour only when asked.
//! - [`plan_json`] / [`drift_json`]: the documented `--json` shape (see `json.rs`).
//! - [`plan_markdown`]: a pull-request comment kept under a character limit.
//!
//! Views are deterministic: changes are ordered by address, drift by address, and
//! nothing reads the clock or the environment.

mod adopt;
pub mod cost;
mod facts;
mod health;
mod jobs;
mod json;
mod leaf_text;
pub mod markdown;
pub mod outputs;
mod placement;
mod reservations;
mod style;
pub mod text;
pub mod variables;

#[cfg(test)]
mod tests;

pub use facts::SENSITIVE;
pub use json::{drift_json, plan_document, plan_json, plan_schema, write_plan_json};
pub use markdown::plan_markdown;

/// A recorded configuration as views show it: `(sensitive)` at each of `paths`.
pub fn masked_config(config: &crate::json_text::JsonText, paths: &[String]) -> crate::json_text::JsonText {
    facts::masked(config, paths)
}
pub use text::{TextOptions, drift_text, plan_text, write_plan_text, write_plan_text_framed};
