//! YAML specs: parsing into the raw tree (spans kept) and canonical formatting.
//!
//! The pipeline, one file per step:
//! - `tree.rs`: saphyr-parser events → syntax tree with byte positions (syntax errors,
//!   one document only, bounded depth); `text.rs`: positions saphyr leaves inexact;
//! - `expand.rs`: duplicate keys, aliases (copied, size-capped) and `<<` merge keys;
//! - `scalar.rs`: YAML 1.2 core typing of plain scalars, `${...}` templates;
//! - `lower.rs`: the gpuplan meaning of the top level (`gpu_pools:` → `gpu_pool` blocks);
//! - `foreign.rs`: which files of the spec folder belong to other tools (a kubeconfig);
//! - `fmt/`: `gpuplan fmt`, a re-printer that keeps comments and scalar spellings.
//!
//! Nothing here reads files or knows what attributes a `gpu_pool` has.

mod expand;
mod fmt;
mod foreign;
mod lower;
mod scalar;
mod text;
mod tree;

#[cfg(test)]
mod fmt_tests;
#[cfg(test)]
mod foreign_tests;
#[cfg(test)]
mod parse_tests;

use crate::diag::{Diagnostics, Span};
use crate::spec::raw::{Attr, Body};

/// Parse one YAML file into the raw tree (see `raw.rs` for the mapping). Returns `None`
/// (with diagnostics) when the file is not usable at all; other problems are reported
/// and parsing continues, so one run shows them all.
pub fn parse(file: u32, text: &str, diags: &mut Diagnostics) -> Option<Body> {
    let doc = tree::build(file, text, diags)?;
    lower_document(file, text, doc, diags)
}

/// A YAML file found in the spec folder: a spec, or another tool's file beside it.
#[derive(Debug)]
pub enum FolderFile {
    /// Read as a spec, as [`parse`] does (`None`: not usable, diagnostics pushed).
    Spec(Option<Body>),
    /// Another tool's file (see `foreign.rs`): not part of the spec, nothing reported.
    Foreign,
}

/// [`parse`] for a file the folder listing found, which may be another tool's: those are
/// recognised by their top-level keys (of several documents, by the first one's: a
/// Kubernetes manifest) and skipped without a diagnostic.
pub fn parse_in_folder(file: u32, text: &str, diags: &mut Diagnostics) -> FolderFile {
    let mut own = Diagnostics::default();
    let doc = tree::build(file, text, &mut own);
    let foreign = match &doc {
        Some(doc) => doc.root.as_ref().is_some_and(foreign::is_foreign),
        None => first_of_several_is_foreign(text, &own),
    };
    if foreign {
        return FolderFile::Foreign;
    }
    diags.extend(own);
    FolderFile::Spec(doc.and_then(|doc| lower_document(file, text, doc, diags)))
}

/// When `build` stopped at a second document, is the first one foreign?
fn first_of_several_is_foreign(text: &str, diags: &Diagnostics) -> bool {
    let second = diags.items.iter().find(|d| d.code == tree::MULTIPLE_DOCUMENTS).and_then(|d| d.primary());
    let Some(first) = second.and_then(|at| text.get(..at.start as usize)) else { return false };
    let mut ignored = Diagnostics::default();
    tree::build(0, first, &mut ignored).and_then(|doc| doc.root).is_some_and(|root| foreign::is_foreign(&root))
}

fn lower_document(file: u32, text: &str, doc: tree::Document, diags: &mut Diagnostics) -> Option<Body> {
    let Some(root) = doc.root else {
        // Empty, or only comments: a valid file declaring nothing.
        return Some(Body { span: Span::new(file, 0, text.len()), ..Body::default() });
    };
    expand::check_duplicate_keys(file, &root, diags);
    let root = expand::expand(file, &root, diags)?;
    lower::lower(file, text, &root, diags)
}

/// A YAML var file (`--var-file vars.yaml`): a top-level mapping of variable names to
/// values, each lowered as an attribute. `None` (with diagnostics) when unusable.
pub fn parse_attrs(file: u32, text: &str, diags: &mut Diagnostics) -> Option<Vec<Attr>> {
    let Some(root) = tree::build(file, text, diags)?.root else { return Some(Vec::new()) };
    expand::check_duplicate_keys(file, &root, diags);
    let root = expand::expand(file, &root, diags)?;
    lower::attrs_of(file, text, &root, diags)
}

/// Canonical formatting (`gpuplan fmt`). Comments are preserved. Returns `None` (with
/// diagnostics) when the input does not parse.
pub fn format(file: u32, text: &str, diags: &mut Diagnostics) -> Option<String> {
    fmt::format(file, text, diags)
}
