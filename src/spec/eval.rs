//! Expression evaluation: references, interpolation, arithmetic and functions.
//!
//! Evaluation is pure: the environment (`env("NAME")`) and variable overrides come in
//! through [`EvalContext`], never from the process directly, so tests are deterministic.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::addr::Kind;
use crate::diag::{Diagnostic, Span, did_you_mean};
use crate::spec::raw::{BinaryOp, Expr, ExprKind, ForExpr, Ident, ObjectKey, Step, TemplatePart, UnaryOp};
pub use crate::spec::value::{EnvReads, EvalError, EvalResult, Scope, Value, format_number};

fn err(span: Span, message: impl Into<String>, label: impl Into<String>) -> EvalError {
    Diagnostic::error("gpuplan::eval", message).at(span, label).into()
}

/// Evaluate an expression in a scope.
pub fn eval(expr: &Expr, scope: &mut Scope<'_>) -> EvalResult {
    let span = expr.span;
    match &expr.kind {
        ExprKind::Null => Ok(Value::Null),
        ExprKind::Bool(b) => Ok(Value::Bool(*b)),
        ExprKind::Number(n) => Ok(Value::Number(*n)),
        ExprKind::String(s) => Ok(Value::String(s.clone())),
        ExprKind::Template(parts) => eval_template(parts, scope),
        ExprKind::Array(items) => items.iter().map(|e| eval(e, scope)).collect::<Result<_, _>>().map(Value::List),
        ExprKind::Object(items) => {
            let mut out = BTreeMap::new();
            for (k, v) in items {
                let (key, kspan) = match k {
                    ObjectKey::Name(id) => (id.name.clone(), id.span),
                    ObjectKey::Expr(e) => (key_string(eval(e, scope)?, e.span)?, e.span),
                };
                if out.contains_key(&key) {
                    return Err(err(kspan, format!("duplicate key `{key}` in object"), "defined again here"));
                }
                out.insert(key, eval(v, scope)?);
            }
            Ok(Value::Object(out))
        }
        ExprKind::Traversal { root, steps } => traverse(root, steps, scope).map(Cow::into_owned),
        ExprKind::Access { expr, steps } => {
            let base = eval(expr, scope)?;
            apply_steps(base, steps, scope)
        }
        ExprKind::Call { name, args, expand_final } => {
            let mut vals = Vec::with_capacity(args.len());
            for (i, a) in args.iter().enumerate() {
                let v = eval_arg(a, scope)?;
                if *expand_final && i + 1 == args.len() {
                    match v {
                        Cow::Owned(Value::List(items)) => {
                            vals.extend(items.into_iter().map(|v| (Cow::Owned(v), a.span)))
                        }
                        Cow::Borrowed(Value::List(items)) => {
                            vals.extend(items.iter().map(|v| (Cow::Borrowed(v), a.span)))
                        }
                        other => {
                            return Err(err(
                                a.span,
                                format!("`...` expects a list, found {}", other.type_name()),
                                "not a list",
                            ));
                        }
                    }
                } else {
                    vals.push((v, a.span));
                }
            }
            crate::spec::functions::call(&name.name, name.span, span, vals, scope)
        }
        ExprKind::Unary { op, expr: inner } => {
            let v = eval(inner, scope)?;
            match (op, v) {
                (UnaryOp::Neg, Value::Number(n)) => Ok(Value::Number(-n)),
                (UnaryOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
                (UnaryOp::Neg, v) => {
                    Err(err(inner.span, format!("cannot negate a {}", v.type_name()), "expected a number"))
                }
                (UnaryOp::Not, v) => {
                    Err(err(inner.span, format!("`!` needs a bool, found {}", v.type_name()), "expected a bool"))
                }
            }
        }
        ExprKind::Binary { op, lhs, rhs } => eval_binary(*op, lhs, rhs, scope),
        ExprKind::Conditional { cond, then, otherwise } => match eval(cond, scope)? {
            Value::Bool(true) => eval(then, scope),
            Value::Bool(false) => eval(otherwise, scope),
            v => Err(err(
                cond.span,
                format!("a condition must be a bool, found {}", v.type_name()),
                "expected true or false",
            )),
        },
        ExprKind::For(f) => eval_for(f, scope, span),
        ExprKind::Invalid => Err(EvalError::Poisoned),
        ExprKind::Unsupported(what) => {
            Err(Diagnostic::error("gpuplan::eval::unsupported", format!("{what} are not supported"))
                .at(span, "not supported here")
                .help("use a function or a conditional expression instead")
                .into())
        }
    }
}

/// A function's argument: a reference is read in place ([`traverse`]), anything else
/// evaluated.
pub fn eval_arg<'a>(expr: &Expr, scope: &mut Scope<'a>) -> Result<Cow<'a, Value>, EvalError> {
    match &expr.kind {
        ExprKind::Traversal { root, steps } => traverse(root, steps, scope),
        ExprKind::Call { name, args, expand_final: false } if name.name == "lookup" => {
            lookup_in_place(name, expr.span, args, scope)
        }
        _ => eval(expr, scope).map(Cow::Owned),
    }
}

/// `lookup(OBJECT, KEY, ...)` of an object read in place: the member found, lent where it
/// lies (policies look pools up in `plan.pools`; a copy was a pool's facts each time).
/// Every argument is evaluated first, as for any call; any other case is the function's.
fn lookup_in_place<'a>(
    name: &Ident,
    span: Span,
    args: &[Expr],
    scope: &mut Scope<'a>,
) -> Result<Cow<'a, Value>, EvalError> {
    let mut vals = Vec::with_capacity(args.len());
    for a in args {
        vals.push((eval_arg(a, scope)?, a.span));
    }
    if (2..=3).contains(&vals.len())
        && let Cow::Borrowed(object) = &vals[0].0
        && let (Value::Object(members), Value::String(key)) = (*object, vals[1].0.as_ref())
        && let Some(found) = members.get(key)
    {
        return Ok(Cow::Borrowed(found));
    }
    crate::spec::functions::call(&name.name, name.span, span, vals, scope).map(Cow::Owned)
}

fn key_string(v: Value, span: Span) -> Result<String, EvalError> {
    match v {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(format_number(n)),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(err(span, format!("an object key must be a string, found {}", other.type_name()), "not a string")),
    }
}

/// A traversal's value, read in place: only the value it ends at is copied, never the
/// objects it passes through (`plan.pools[p].gpu` copies one string, not the plan), and a
/// value in the data the scope borrows (variables, locals, resources, `plan`) is not
/// copied at all, so a function argument such as `keys(plan.pools)` reads it where it is.
/// An index's key is an expression: it is evaluated (with the scope) when the walk reaches
/// it, and the walk starts again from the root with the key known, so errors come in the
/// order of the reference.
fn traverse<'a>(root: &Ident, steps: &[Step], scope: &mut Scope<'a>) -> Result<Cow<'a, Value>, EvalError> {
    let mut keys: Vec<Value> = Vec::new();
    loop {
        let (base, rest) = resolve_root(&root.name, root.span, steps, scope)?;
        let (found, tail) = match base {
            Root::Data(v) => match walk(v, rest, &keys)? {
                Walked::At(v, []) => return Ok(Cow::Borrowed(v)),
                Walked::At(v, tail) => (v.clone(), tail),
                Walked::Key(e) => {
                    keys.push(eval(e, scope)?);
                    continue;
                }
            },
            Root::Scope(v) => match walk(v, rest, &keys)? {
                Walked::At(v, tail) => (v.clone(), tail),
                Walked::Key(e) => {
                    keys.push(eval(e, scope)?);
                    continue;
                }
            },
            Root::Owned(v) => match walk(&v, rest, &keys)? {
                Walked::At(v, tail) => (v.clone(), tail),
                Walked::Key(e) => {
                    keys.push(eval(e, scope)?);
                    continue;
                }
            },
        };
        // The rest starts at a splat, which maps over copies.
        return apply_steps(found, tail, scope).map(Cow::Owned);
    }
}

/// Where a traversal's root is: in the data the scope borrows for `'a`, in the scope
/// itself (`for` variables, `each`), or made for the reference (`count.index`).
enum Root<'a, 's> {
    Data(&'a Value),
    Scope(&'s Value),
    Owned(Value),
}

/// How far a walk by reference got: to a value (and the steps left from a splat on), or
/// to an index whose key is not evaluated yet.
enum Walked<'v, 'e> {
    At(&'v Value, &'e [Step]),
    Key(&'e Expr),
}

/// Walk `steps` from `v` by reference, up to a splat; `keys` are the index keys evaluated
/// so far, in order.
fn walk<'v, 'e>(mut v: &'v Value, steps: &'e [Step], keys: &[Value]) -> Result<Walked<'v, 'e>, EvalError> {
    let mut index_at = 0;
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Attr(id) => v = get_attr_ref(v, &id.name, id.span)?,
            Step::Index(e) => {
                let Some(key) = keys.get(index_at) else { return Ok(Walked::Key(e)) };
                index_at += 1;
                v = index_ref(v, key, e.span)?;
            }
            Step::Splat(_) => return Ok(Walked::At(v, &steps[i..])),
        }
    }
    Ok(Walked::At(v, &[]))
}

/// A value bound in the scope: where it is lent from data the scope borrows, a root in
/// that data, so a reference through it (`pool.labels` in a function call) is read in
/// place as well.
fn lent<'a, 's>(v: &'s Cow<'a, Value>) -> Root<'a, 's> {
    match v {
        Cow::Borrowed(data) => Root::Data(data),
        Cow::Owned(own) => Root::Scope(own),
    }
}

/// Resolve the root of a traversal, consuming the steps it needs (`var.x` takes one).
fn resolve_root<'a, 's, 'e>(
    root: &str,
    span: Span,
    steps: &'e [Step],
    scope: &'s Scope<'a>,
) -> Result<(Root<'a, 's>, &'e [Step]), EvalError> {
    if let Some((_, v)) = scope.bound.iter().rev().find(|(n, _)| n == root) {
        return Ok((lent(v), steps));
    }
    if let Some(v) = scope.extra.and_then(|e| e.get(root)) {
        return Ok((Root::Data(v), steps));
    }
    let first_attr = |what: &str| -> Result<(&'e str, Span), EvalError> {
        match steps.first() {
            Some(Step::Attr(id)) => Ok((id.name.as_str(), id.span)),
            _ => Err(err(
                span,
                format!("`{root}` must be followed by a {what} name, e.g. `{root}.NAME`"),
                "incomplete reference",
            )),
        }
    };
    match root {
        "var" => {
            let (name, nspan) = first_attr("variable")?;
            if scope.poisoned.is_some_and(|p| p.contains(&format!("var.{name}"))) {
                return Err(EvalError::Poisoned);
            }
            let vars = scope.vars.ok_or_else(|| err(span, "variables are not available here", "not allowed here"))?;
            match vars.get(name) {
                Some(v) => Ok((Root::Data(v), &steps[1..])),
                None => Err(undeclared("variable", name, nspan.join(span), vars.keys().map(String::as_str))),
            }
        }
        "local" => {
            let (name, nspan) = first_attr("local")?;
            if scope.poisoned.is_some_and(|p| p.contains(&format!("local.{name}"))) {
                return Err(EvalError::Poisoned);
            }
            let locals = scope.locals.ok_or_else(|| err(span, "locals are not available here", "not allowed here"))?;
            match locals.get(name) {
                Some(v) => Ok((Root::Data(v), &steps[1..])),
                None => Err(undeclared("local value", name, nspan.join(span), locals.keys().map(String::as_str))),
            }
        }
        "count" => match (steps.first(), scope.count_index) {
            (Some(Step::Attr(id)), Some(i)) if id.name == "index" => {
                Ok((Root::Owned(Value::Number(i as f64)), &steps[1..]))
            }
            (_, None) => {
                Err(Diagnostic::error("gpuplan::eval", "`count.index` is only available in a block that sets `count`")
                    .at(span, "no `count` here")
                    .help("add `count = N` to this block, or remove the reference")
                    .into())
            }
            _ => Err(err(span, "`count` only has the attribute `index`", "use `count.index`")),
        },
        "each" => match (steps.first(), &scope.each) {
            (Some(Step::Attr(id)), Some((k, v))) => match id.name.as_str() {
                "key" => Ok((Root::Scope(k), &steps[1..])),
                "value" => Ok((lent(v), &steps[1..])),
                _ => Err(err(id.span, "`each` only has the attributes `key` and `value`", "unknown attribute")),
            },
            (_, None) => {
                Err(Diagnostic::error("gpuplan::eval", "`each` is only available in a block that sets `for_each`")
                    .at(span, "no `for_each` here")
                    .into())
            }
            _ => Err(err(span, "use `each.key` or `each.value`", "incomplete reference")),
        },
        _ => match Kind::parse(root) {
            Some(kind) => {
                let (name, nspan) = first_attr(kind.as_str())?;
                Ok((Root::Data(resource_value(kind, name, nspan.join(span), span, scope)?), &steps[1..]))
            }
            None => Err(unknown_name(root, span)),
        },
    }
}

/// The value of resource `kind.name` (`reference` spans the whole reference), or why not.
fn resource_value<'a>(
    kind: Kind,
    name: &str,
    reference: Span,
    span: Span,
    scope: &Scope<'a>,
) -> Result<&'a Value, EvalError> {
    if scope.poisoned.is_some_and(|p| p.contains(&format!("{kind}.{name}"))) {
        return Err(EvalError::Poisoned);
    }
    let resources = scope.resources.ok_or_else(|| err(span, "resources are not available here", "not allowed"))?;
    match resources.get(&(kind, name.to_string())) {
        Some(v) => Ok(v),
        None => match scope.declared {
            // All of them, not only those before this one in the decoding
            // order: the hint is the same whatever the order.
            Some(declared) => {
                let names = declared.get(&kind).into_iter().flatten().map(String::as_str);
                Err(undeclared(kind.as_str(), name, reference, names))
            }
            None => {
                let names = resources.keys().filter(|(k, _)| *k == kind).map(|(_, n)| n.as_str());
                Err(undeclared(kind.as_str(), name, reference, names))
            }
        },
    }
}

/// A traversal whose root is no variable, local, resource kind, `count` or `each`.
fn unknown_name(root: &str, span: Span) -> EvalError {
    let mut known: Vec<&str> = vec!["var", "local", "count", "each"];
    known.extend(Kind::ALL.iter().map(|k| k.as_str()));
    let d = Diagnostic::error("gpuplan::eval::unknown_name", format!("unknown name `{root}`"))
        .at(span, "not a variable, local or resource");
    match did_you_mean(root, known.iter().copied()) {
        Some(s) => d.help(format!("did you mean `{s}`?")),
        None => {
            d.help("references start with `var.`, `local.` or a block kind such as `gpu_pool.`; quote plain strings")
        }
    }
    .into()
}

/// The "X is not declared" error with a did-you-mean hint.
pub fn undeclared<'a>(what: &str, name: &str, span: Span, candidates: impl Iterator<Item = &'a str>) -> EvalError {
    let mut d = Diagnostic::error("gpuplan::spec::undeclared", format!("reference to undeclared {what} `{name}`"))
        .at(span, "not declared anywhere in the spec");
    d = match did_you_mean(name, candidates) {
        Some(s) => d.help(format!("did you mean `{s}`?")),
        None => d.help(format!("declare the {what} or fix the name")),
    };
    d.into()
}

fn apply_steps(mut v: Value, steps: &[Step], scope: &mut Scope<'_>) -> EvalResult {
    let mut i = 0;
    while i < steps.len() {
        match &steps[i] {
            Step::Attr(id) => v = get_attr(v, &id.name, id.span)?,
            Step::Index(e) => {
                let key = eval(e, scope)?;
                v = index(v, key, e.span)?;
            }
            Step::Splat(sspan) => {
                let rest = &steps[i + 1..];
                let items = match v {
                    Value::List(items) => items,
                    Value::Null => vec![],
                    other => vec![other],
                };
                let _ = sspan;
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(apply_steps(item, rest, scope)?);
                }
                return Ok(Value::List(out));
            }
        }
        i += 1;
    }
    Ok(v)
}

fn get_attr(v: Value, name: &str, span: Span) -> EvalResult {
    match v {
        Value::Object(mut o) if o.contains_key(name) => Ok(o.remove(name).unwrap_or_default()),
        other => get_attr_ref(&other, name, span).cloned(),
    }
}

fn get_attr_ref<'v>(v: &'v Value, name: &str, span: Span) -> Result<&'v Value, EvalError> {
    match v {
        Value::Object(o) => match o.get(name) {
            Some(v) => Ok(v),
            None => {
                let mut d = Diagnostic::error("gpuplan::eval::no_attribute", format!("no attribute `{name}`"))
                    .at(span, "not an attribute of this object");
                if let Some(s) = did_you_mean(name, o.keys().map(String::as_str)) {
                    d = d.help(format!("did you mean `{s}`?"));
                } else if !o.is_empty() {
                    let keys: Vec<_> = o.keys().map(String::as_str).collect();
                    d = d.help(format!("it has: {}", keys.join(", ")));
                }
                Err(d.into())
            }
        },
        Value::List(_) => Err(Diagnostic::error("gpuplan::eval", format!("cannot read `{name}` of a list"))
            .at(span, "this is a list")
            .help("pick one element first, e.g. `[0]`, or use a splat `[*]`")
            .into()),
        other => Err(err(span, format!("cannot read `{name}` of a {}", other.type_name()), "not an object")),
    }
}

fn index(v: Value, key: Value, span: Span) -> EvalResult {
    match (v, &key) {
        (Value::List(items), Value::Number(n)) if index_in(*n, items.len()) => {
            Ok(items.into_iter().nth(*n as usize).unwrap_or_default())
        }
        (Value::Object(mut o), Value::String(k)) if o.contains_key(k) => Ok(o.remove(k).unwrap_or_default()),
        (v, _) => index_ref(&v, &key, span).cloned(),
    }
}

/// Whether `n` indexes a list of `len`.
fn index_in(n: f64, len: usize) -> bool {
    n.fract() == 0.0 && n >= 0.0 && (n as usize) < len
}

fn index_ref<'v>(v: &'v Value, key: &Value, span: Span) -> Result<&'v Value, EvalError> {
    match (v, key) {
        (Value::List(items), Value::Number(n)) => {
            let len = items.len();
            if !index_in(*n, len) {
                return Err(err(
                    span,
                    format!("index {} is out of range for a list of {len}", format_number(*n)),
                    "out of range",
                ));
            }
            Ok(&items[*n as usize])
        }
        (Value::Object(o), Value::String(k)) => {
            o.get(k).ok_or_else(|| err(span, format!("no key {k:?}"), "no such key"))
        }
        (Value::Object(o), Value::Number(n)) => {
            let k = format_number(*n);
            o.get(&k).ok_or_else(|| err(span, format!("no key {k:?}"), "no such key"))
        }
        (v, k) => {
            Err(err(span, format!("cannot index a {} with a {}", v.type_name(), k.type_name()), "wrong index type"))
        }
    }
}

fn eval_template(parts: &[TemplatePart], scope: &mut Scope<'_>) -> EvalResult {
    if let [TemplatePart::Interp(e)] = parts {
        return eval(e, scope);
    }
    let mut out = String::new();
    for p in parts {
        match p {
            TemplatePart::Literal(s) => out.push_str(s),
            TemplatePart::Interp(e) => match eval(e, scope)? {
                Value::String(s) => out.push_str(&s),
                Value::Number(n) => out.push_str(&format_number(n)),
                Value::Bool(b) => out.push_str(&b.to_string()),
                Value::Null => return Err(err(e.span, "cannot put null into a string", "this is null")),
                v => {
                    return Err(Diagnostic::error(
                        "gpuplan::eval",
                        format!("cannot put a {} into a string", v.type_name()),
                    )
                    .at(e.span, "not a string, number or bool")
                    .help("use `join(\", \", ...)` for lists or pick one attribute")
                    .into());
                }
            },
        }
    }
    Ok(Value::String(out))
}

fn num(v: Value, span: Span, op: &str) -> Result<f64, EvalError> {
    match v {
        Value::Number(n) => Ok(n),
        Value::String(s) if s.trim().parse::<f64>().is_ok() => Ok(s.trim().parse().unwrap_or(0.0)),
        other => Err(err(span, format!("`{op}` needs numbers, found {}", other.type_name()), "not a number")),
    }
}

fn boolean(v: Value, span: Span, op: &str) -> Result<bool, EvalError> {
    match v {
        Value::Bool(b) => Ok(b),
        other => Err(err(span, format!("`{op}` needs bools, found {}", other.type_name()), "not a bool")),
    }
}

fn eval_binary(op: BinaryOp, lhs: &Expr, rhs: &Expr, scope: &mut Scope<'_>) -> EvalResult {
    let sym = op.symbol();
    // && and || short-circuit, as users expect from `var.x != null && var.x > 0`.
    if matches!(op, BinaryOp::And | BinaryOp::Or) {
        let l = boolean(eval(lhs, scope)?, lhs.span, sym)?;
        if (op == BinaryOp::And && !l) || (op == BinaryOp::Or && l) {
            return Ok(Value::Bool(l));
        }
        return Ok(Value::Bool(boolean(eval(rhs, scope)?, rhs.span, sym)?));
    }
    if matches!(op, BinaryOp::Eq | BinaryOp::NotEq) {
        // Compared where they lie: `lookup(plan.pools, p, null) != null` copies no pool.
        let l = eval_arg(lhs, scope)?;
        let r = eval_arg(rhs, scope)?;
        return Ok(Value::Bool((l == r) == (op == BinaryOp::Eq)));
    }
    let l = eval(lhs, scope)?;
    let r = eval(rhs, scope)?;
    if op == BinaryOp::Add && (matches!(l, Value::String(_)) || matches!(r, Value::String(_))) {
        let both_numeric = [&l, &r]
            .iter()
            .all(|v| matches!(v, Value::Number(_)) || v.as_str().is_some_and(|s| s.trim().parse::<f64>().is_ok()));
        if !both_numeric {
            return Err(Diagnostic::error("gpuplan::eval", "`+` adds numbers; it does not join strings")
                .at(lhs.span.join(rhs.span), "string operand")
                .help("use interpolation: \"${local.a}${local.b}\"")
                .into());
        }
    }
    let a = num(l, lhs.span, sym)?;
    let b = num(r, rhs.span, sym)?;
    let span = lhs.span.join(rhs.span);
    let out = match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div | BinaryOp::Mod if b == 0.0 => return Err(err(rhs.span, "division by zero", "this is zero")),
        BinaryOp::Div => a / b,
        BinaryOp::Mod => a % b,
        BinaryOp::Lt => return Ok(Value::Bool(a < b)),
        BinaryOp::LtEq => return Ok(Value::Bool(a <= b)),
        BinaryOp::Gt => return Ok(Value::Bool(a > b)),
        BinaryOp::GtEq => return Ok(Value::Bool(a >= b)),
        BinaryOp::Eq | BinaryOp::NotEq | BinaryOp::And | BinaryOp::Or => unreachable!("handled above"),
    };
    if !out.is_finite() {
        return Err(err(span, "arithmetic result is out of range", "overflows"));
    }
    Ok(Value::Number(out))
}

fn eval_for<'a>(f: &ForExpr, scope: &mut Scope<'a>, span: Span) -> EvalResult {
    // The collection is read in place when it is a reference (`for p in plan.pools`):
    // each item is bound by reference, and only what the `for` yields is copied.
    let pairs: Vec<(Value, Cow<'a, Value>)> = match eval_arg(&f.collection, scope)? {
        Cow::Owned(Value::List(items)) => {
            items.into_iter().enumerate().map(|(i, v)| (Value::Number(i as f64), Cow::Owned(v))).collect()
        }
        Cow::Borrowed(Value::List(items)) => {
            items.iter().enumerate().map(|(i, v)| (Value::Number(i as f64), Cow::Borrowed(v))).collect()
        }
        Cow::Owned(Value::Object(o)) => o.into_iter().map(|(k, v)| (Value::String(k), Cow::Owned(v))).collect(),
        Cow::Borrowed(Value::Object(o)) => {
            o.iter().map(|(k, v)| (Value::String(k.clone()), Cow::Borrowed(v))).collect()
        }
        other => {
            return Err(err(
                f.collection.span,
                format!("`for` needs a list or object, found {}", other.type_name()),
                "not iterable",
            ));
        }
    };
    let mut list = Vec::new();
    let mut obj: BTreeMap<String, Value> = BTreeMap::new();
    for (k, v) in pairs {
        let depth = scope.bound.len();
        if let Some(kv) = &f.key_var {
            scope.bound.push((kv.name.clone(), Cow::Owned(k)));
        }
        scope.bound.push((f.value_var.name.clone(), v));
        let result = (|| -> Result<(), EvalError> {
            if let Some(c) = &f.cond
                && !boolean(eval(c, scope)?, c.span, "if")?
            {
                return Ok(());
            }
            let val = eval(&f.value_expr, scope)?;
            match &f.key_expr {
                None => list.push(val),
                Some(ke) => {
                    let key = key_string(eval(ke, scope)?, ke.span)?;
                    if f.grouping {
                        match obj.entry(key).or_insert_with(|| Value::List(vec![])) {
                            Value::List(l) => l.push(val),
                            _ => unreachable!("grouping entries are lists"),
                        }
                    } else if obj.insert(key.clone(), val).is_some() {
                        return Err(Diagnostic::error(
                            "gpuplan::eval",
                            format!("duplicate key {key:?} in `for` result"),
                        )
                        .at(ke.span, "produces the same key twice")
                        .help("add `...` after the value to group duplicates into lists")
                        .into());
                    }
                }
            }
            Ok(())
        })();
        scope.bound.truncate(depth);
        result?;
    }
    let _ = span;
    Ok(if f.key_expr.is_some() { Value::Object(obj) } else { Value::List(list) })
}

#[cfg(test)]
#[path = "eval_tests.rs"]
mod tests;
