//! Policies and their results.

use crate::diag::Span;
pub use crate::plan::report::{Enforcement, PolicyResult};
use crate::spec::raw::Expr;

/// A `policy "NAME" { ... }` block from `policies/*.hcl`.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub enforcement: Enforcement,
    pub description: Option<String>,
    /// Evaluated once per element when set; `each.key` / `each.value` inside.
    pub for_each: Option<Expr>,
    pub assert: Expr,
    /// A string template; defaults to the description, or "`assert` is false".
    pub message: Option<Expr>,
    pub span: Span,
    /// `policies/fleet.hcl:3`, for messages.
    pub location: String,
}
