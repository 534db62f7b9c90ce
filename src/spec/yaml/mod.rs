//! YAML specs: parsing into the raw tree (spans kept) and canonical formatting.
//!
//! The pipeline, one file per step:
//! - `tree.rs`: saphyr-parser events → syntax tree with byte positions (syntax errors,
//!   one document only, bounded depth); `text.rs`: positions saphyr leaves inexact;
//! - `expand.rs`: duplicate keys, aliases (copied, size-capped) and `<<` merge keys;
//! - `scalar.rs`: YAML 1.2 core typing of plain scalars, `${...}` templates;
//! - `lower.rs`: the gpuplan meaning of the top level (`gpu_pools:` → `gpu_pool` blocks);
//! - `fmt/`: `gpuplan fmt`, a re-printer that keeps comments and scalar spellings.
//!
//! Nothing here reads files or knows what attributes a `gpu_pool` has.

mod expand;
mod fmt;
mod lower;
mod scalar;
mod text;
mod tree;

#[cfg(test)]
mod fmt_tests;
#[cfg(test)]
mod parse_tests;

use crate::diag::{Diagnostics, Span};
use crate::spec::raw::Body;

/// Parse one YAML file into the raw tree (see `raw.rs` for the mapping). Returns `None`
/// (with diagnostics) when the file is not usable at all; other problems are reported
/// and parsing continues, so one run shows them all.
pub fn parse(file: u32, text: &str, diags: &mut Diagnostics) -> Option<Body> {
    let doc = tree::build(file, text, diags)?;
    let Some(root) = doc.root else {
        // Empty, or only comments: a valid file declaring nothing.
        return Some(Body { span: Span::new(file, 0, text.len()), ..Body::default() });
    };
    expand::check_duplicate_keys(file, &root, diags);
    let root = expand::expand(file, &root, diags)?;
    lower::lower(file, text, &root, diags)
}

/// Canonical formatting (`gpuplan fmt`). Comments are preserved. Returns `None` (with
/// diagnostics) when the input does not parse.
pub fn format(file: u32, text: &str, diags: &mut Diagnostics) -> Option<String> {
    fmt::format(file, text, diags)
}
