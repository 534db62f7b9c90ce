//! Policies and their results.

use serde::{Deserialize, Serialize};

use crate::diag::Span;
use crate::spec::raw::Expr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// Reported, never blocks.
    Advisory,
    /// Blocks unless overridden with `--override-policy NAME`.
    Soft,
    /// Always blocks.
    Hard,
}

impl Enforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::Advisory => "advisory",
            Enforcement::Soft => "soft",
            Enforcement::Hard => "hard",
        }
    }
}

/// A `policy "NAME" { ... }` block from `policies/*.hcl`.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub enforcement: Enforcement,
    pub description: Option<String>,
    /// Evaluated once per element when set; `each.key` / `each.value` inside.
    pub for_each: Option<Expr>,
    pub assert: Expr,
    /// A string template; defaults to "policy NAME failed".
    pub message: Option<Expr>,
    pub span: Span,
    /// `policies/fleet.hcl:3`, for messages.
    pub location: String,
}

/// The verdict of one policy (or one element of a `for_each` policy), or of a quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    pub name: String,
    pub enforcement: Enforcement,
    pub passed: bool,
    pub message: String,
    /// The `for_each` key (an address, usually) this result is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A soft failure accepted with `--override-policy`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overridden: bool,
    /// Where the policy is defined (`policies/x.hcl:3`, `quota.ml_team`).
    pub source: String,
    /// Passed, but close to a limit (quota warnings).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warning: bool,
}

impl PolicyResult {
    /// Does this result stop the plan from being applied?
    pub fn denies(&self) -> bool {
        // `overridden` is only honoured on soft policies, even in a hand-edited plan file.
        match self.enforcement {
            Enforcement::Advisory => false,
            Enforcement::Soft => !self.passed && !self.overridden,
            Enforcement::Hard => !self.passed,
        }
    }
}
