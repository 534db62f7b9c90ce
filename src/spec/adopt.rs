//! `moved {}`, `removed {}` and `import {}` blocks (YAML `moves:`, `removals:`,
//! `imports:`): how a spec takes over what already runs, renames what it manages, or lets
//! go of it. Decoding only; what they do is planned in `plan::adopt`.
//!
//! Addresses here are read as written, never evaluated: `from` names something that is no
//! longer declared, so it cannot be a reference.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::addr::{Address, InstanceKey, Kind};
use crate::diag::{Diagnostic, Span};
use crate::spec::eval::Value;
use crate::spec::fields::{Cx, Fields, Reported, type_error};
use crate::spec::raw::{Block, Expr, ExprKind, Step};
use crate::spec::spanned::Spanned;

/// `moved { from = gpu_pool.a  to = gpu_pool.b }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Moved {
    #[schemars(with = "String")]
    pub from: Spanned<Address>,
    #[schemars(with = "String")]
    pub to: Spanned<Address>,
    /// The whole block: plan errors about it point here.
    #[serde(skip)]
    pub span: Span,
}

/// `removed { from = gpu_pool.x  lifecycle { destroy = false } }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Removed {
    #[schemars(with = "String")]
    pub from: Spanned<Address>,
    /// `lifecycle { destroy = false }` forgets without destroying; without it (or with
    /// `destroy = true`) this is a plain destroy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<RemovedLifecycle>,
    #[serde(skip)]
    pub span: Span,
}

/// `import { to = gpu_pool.legacy  ids = ["i-0abc"] }`.
/// `lifecycle { destroy = BOOL }` of a `removed` block.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemovedLifecycle {
    pub destroy: bool,
}

impl Removed {
    /// Does gpuplan destroy what it lets go of?
    pub fn destroys(&self) -> bool {
        self.lifecycle.is_none_or(|l| l.destroy)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Import {
    #[schemars(with = "String")]
    pub to: Spanned<Address>,
    /// Instance IDs on the pool's provider.
    pub ids: Vec<Spanned<String>>,
    #[serde(skip)]
    pub span: Span,
}

/// Block kinds this module decodes (label-less, top level).
pub const KINDS: [&str; 3] = ["moved", "removed", "import"];

/// Decode one `moved`, `removed` or `import` block into `out`.
pub fn decode(cx: &mut Cx<'_, '_>, b: &Block, out: &mut crate::spec::Spec) {
    let kind = b.kind.name.as_str();
    let mut f = Fields::from_body(format!("a `{kind}` block"), b.kind.span, &b.body, cx.diags);
    match kind {
        "moved" => {
            let from = address(cx, &mut f, "from");
            let to = address(cx, &mut f, "to");
            f.finish(cx, &["from", "to"]);
            if let (Some(from), Some(to)) = (from, to) {
                moved(cx, from, to, b.span, out);
            }
        }
        "removed" => {
            let from = address(cx, &mut f, "from");
            let lifecycle = lifecycle(cx, &mut f);
            f.finish(cx, &["from", "lifecycle"]);
            if let (Some(from), Ok(lifecycle)) = (from, lifecycle) {
                out.removals.push(Removed { from, lifecycle, span: b.span });
            }
        }
        _ => {
            let to = address(cx, &mut f, "to");
            let ids = f.string_list(cx, "ids");
            let ids = f.required(cx, ids, "ids", "[\"i-0abc\"]");
            f.finish(cx, &["to", "ids"]);
            if let (Some(to), Some(ids)) = (to, ids) {
                import(cx, to, ids.value, b.span, out);
            }
        }
    }
}

fn moved(cx: &mut Cx<'_, '_>, from: Spanned<Address>, to: Spanned<Address>, span: Span, out: &mut crate::spec::Spec) {
    if from.kind != to.kind {
        cx.error(
            Diagnostic::error(
                "gpuplan::spec::moved_kind",
                format!("`{}` cannot move to `{}`: a move keeps the kind", from.value, to.value),
            )
            .at(to.span, format!("this is a {}", to.kind)),
        );
        return;
    }
    if from.value == to.value {
        cx.error(
            Diagnostic::error("gpuplan::spec::moved_self", format!("`{}` is moved onto itself", from.value))
                .at(to.span, "same address as `from`"),
        );
        return;
    }
    out.moves.push(Moved { from, to, span });
}

fn import(
    cx: &mut Cx<'_, '_>,
    to: Spanned<Address>,
    ids: Vec<Spanned<String>>,
    span: Span,
    out: &mut crate::spec::Spec,
) {
    if to.kind != Kind::GpuPool {
        cx.error(
            Diagnostic::error(
                "gpuplan::spec::import_kind",
                format!("only GPU pools import instances, not `{}`", to.value),
            )
            .at(to.span, "not a gpu_pool")
            .help("write `to = gpu_pool.NAME`"),
        );
        return;
    }
    if ids.is_empty() {
        cx.error(
            Diagnostic::error("gpuplan::spec::import_ids", "an `import` block needs at least one instance ID")
                .at(span, "no `ids`"),
        );
        return;
    }
    out.imports.push(Import { to, ids, span });
}

/// `lifecycle { destroy = BOOL }`, if written.
fn lifecycle(cx: &mut Cx<'_, '_>, f: &mut Fields<'_>) -> Result<Option<RemovedLifecycle>, Reported> {
    let Some(mut l) = f.nested(cx, "lifecycle") else { return if f.failed { Err(Reported) } else { Ok(None) } };
    let destroy = l.bool(cx, "destroy");
    let failed = l.failed;
    l.finish(cx, &["destroy"]);
    if failed {
        return Err(Reported);
    }
    Ok(Some(RemovedLifecycle { destroy: destroy.is_none_or(|d| d.value) }))
}

/// A required address attribute, read as written: `gpu_pool.a`, `gpu_pool.a[0]`,
/// `gpu_pool.a["x"]`, or the same as a string (YAML).
fn address(cx: &mut Cx<'_, '_>, f: &mut Fields<'_>, name: &str) -> Option<Spanned<Address>> {
    let example = "gpu_pool.NAME";
    if !f.has(name) {
        f.missing(cx, name, example);
        f.failed = true;
        return None;
    }
    let parsed = match f.raw(name) {
        Some(e) => from_expr(cx, name, e),
        None => match f.try_value(cx, name) {
            Ok(Some(v)) => from_value(cx, name, &v.value, v.span),
            _ => Err(Reported),
        },
    };
    match parsed {
        Ok(a) => Some(a),
        Err(Reported) => {
            f.failed = true;
            None
        }
    }
}

fn from_expr(cx: &mut Cx<'_, '_>, name: &str, e: &Expr) -> Result<Spanned<Address>, Reported> {
    match &e.kind {
        ExprKind::Traversal { root, steps } => {
            let (Some(kind), Some(Step::Attr(id))) = (Kind::parse(&root.name), steps.first()) else {
                return Err(cx.error(not_an_address(name, e.span)));
            };
            let mut addr = Address::new(kind, id.name.clone());
            match steps.get(1) {
                None => {}
                Some(Step::Index(Expr { kind: ExprKind::Number(n), .. })) if n.fract() == 0.0 && *n >= 0.0 => {
                    addr.key = Some(InstanceKey::Int(*n as u64));
                }
                Some(Step::Index(Expr { kind: ExprKind::String(s), .. })) => {
                    addr.key = Some(InstanceKey::Str(s.clone()))
                }
                Some(_) => return Err(cx.error(not_an_address(name, e.span))),
            }
            if steps.len() > 2 || kind == Kind::Provider {
                return Err(cx.error(not_an_address(name, e.span)));
            }
            Ok(Spanned::new(addr, e.span))
        }
        ExprKind::String(s) => parse_text(cx, name, s, e.span),
        _ => {
            let v = cx.eval(e)?;
            from_value(cx, name, &v, e.span)
        }
    }
}

fn from_value(cx: &mut Cx<'_, '_>, name: &str, v: &Value, span: Span) -> Result<Spanned<Address>, Reported> {
    match v {
        Value::String(s) => parse_text(cx, name, s, span),
        other => Err(cx.error(type_error(name, "an address such as `gpu_pool.train`", other, span))),
    }
}

fn parse_text(cx: &mut Cx<'_, '_>, name: &str, s: &str, span: Span) -> Result<Spanned<Address>, Reported> {
    match s.parse::<Address>() {
        Ok(a) if a.kind != Kind::Provider => Ok(Spanned::new(a, span)),
        _ => Err(cx.error(not_an_address(name, span))),
    }
}

fn not_an_address(name: &str, span: Span) -> Diagnostic {
    Diagnostic::error("gpuplan::spec::address", format!("`{name}` must be a resource address"))
        .at(span, "not an address")
        .help("write e.g. `gpu_pool.train`, `gpu_pool.train[0]` or `gpu_pool.train[\"a\"]`")
}
