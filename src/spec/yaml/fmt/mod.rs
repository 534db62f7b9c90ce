//! `gpuplan fmt` for YAML: re-print the syntax tree in canonical layout, keeping
//! comments and every scalar exactly as written.
//!
//! Layout: 2 spaces per mapping level, sequence items `- ` two spaces under their key,
//! `key: value` with one space, flow collections as `{a: 1, b: 2}` / `[a, b]`, at most
//! one blank line in a row, no leading `---`. Comments are re-attached by position: a
//! comment after content stays at the end of that line, a comment on its own line is
//! indented like the line that follows it.
//!
//! Where re-layout could change meaning the text is kept: block scalar content (shifted
//! as a whole), and flow collections that hold comments or multi-line scalars. As a
//! safety net the result is parsed again and must give the same tree as the input.

mod inline;
mod printer;

use printer::Printer;

use super::tree::{self, Node, NodeKind};
use crate::diag::{Diagnostic, Diagnostics, Span};

pub(super) fn format(file: u32, text: &str, diags: &mut Diagnostics) -> Option<String> {
    let doc = tree::build(file, text, diags)?;
    let mut p = Printer::new(text, doc.root.as_ref());
    p.document(&doc);
    let whole = Span::new(file, 0, text.len());
    if let Some(reason) = p.unsupported {
        diags.push(
            Diagnostic::error("gpuplan::yaml::fmt_unsupported", format!("cannot format this file: {reason}"))
                .at(whole, "left unchanged")
                .help("rewrite that part in plain block style (`key: value` lines), then run `gpuplan fmt` again"),
        );
        return None;
    }
    let out = p.finish();
    let again = tree::build(file, &out, &mut Diagnostics::default());
    if !again.is_some_and(|d| same_tree(doc.root.as_ref(), d.root.as_ref())) {
        diags.push(
            Diagnostic::error("gpuplan::yaml::fmt_changed_meaning", "formatting would change what this file means")
                .at(whole, "left unchanged")
                .help("this is a bug in `gpuplan fmt`; please report it with the file"),
        );
        return None;
    }
    Some(out)
}

/// Structural equality ignoring positions; an absent document equals an empty one.
pub(super) fn same_tree(a: Option<&Node>, b: Option<&Node>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_node(a, b),
        (None, None) => true,
        (Some(n), None) | (None, Some(n)) => n.is_empty_null(),
    }
}

fn same_node(a: &Node, b: &Node) -> bool {
    a.anchor == b.anchor
        && match (&a.kind, &b.kind) {
            (NodeKind::Scalar(x), NodeKind::Scalar(y)) => x.value == y.value && x.style == y.style && x.tag == y.tag,
            (NodeKind::Alias(x), NodeKind::Alias(y)) => x == y,
            (NodeKind::Sequence { items: x, flow: f }, NodeKind::Sequence { items: y, flow: g }) => {
                f == g && x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_node(x, y))
            }
            (NodeKind::Mapping { entries: x, flow: f }, NodeKind::Mapping { entries: y, flow: g }) => {
                f == g
                    && x.len() == y.len()
                    && x.iter().zip(y).all(|((xk, xv), (yk, yv))| same_node(xk, yk) && same_node(xv, yv))
            }
            _ => false,
        }
}
