//! Built-in functions available in expressions: the ones Terraform users reach for.
//!
//! Every function checks its arity and argument types and reports a located error;
//! none can panic. `env("NAME")` reads the environment passed in through the scope.

use std::collections::BTreeMap;

use crate::diag::{Diagnostic, Span, did_you_mean};
use crate::spec::eval::{EvalError, EvalResult, Scope, Value, format_number};

/// Names of all functions, for "did you mean" hints and docs.
pub const FUNCTIONS: &[&str] = &[
    "abs",
    "ceil",
    "coalesce",
    "concat",
    "contains",
    "distinct",
    "element",
    "endswith",
    "env",
    "flatten",
    "floor",
    "format",
    "join",
    "jsonencode",
    "keys",
    "length",
    "lookup",
    "lower",
    "max",
    "merge",
    "min",
    "parseint",
    "pow",
    "range",
    "replace",
    "reverse",
    "signum",
    "sort",
    "split",
    "startswith",
    "substr",
    "sum",
    "title",
    "tobool",
    "tolist",
    "tonumber",
    "tostring",
    "trimspace",
    "upper",
    "values",
    "zipmap",
];

type Arg = (Value, Span);

fn bad(span: Span, message: impl Into<String>, label: impl Into<String>) -> EvalError {
    Diagnostic::error("gpuplan::eval::function", message).at(span, label).into()
}

struct Call<'a> {
    name: &'a str,
    span: Span,
    args: Vec<Arg>,
}

impl Call<'_> {
    fn arity(&self, min: usize, max: usize) -> Result<(), EvalError> {
        let n = self.args.len();
        if n < min || n > max {
            let want = if min == max {
                format!("{min}")
            } else if max == usize::MAX {
                format!("at least {min}")
            } else {
                format!("{min} to {max}")
            };
            return Err(bad(
                self.span,
                format!("`{}` takes {want} argument(s), got {n}", self.name),
                "wrong number of arguments",
            ));
        }
        Ok(())
    }
    fn number(&self, i: usize) -> Result<f64, EvalError> {
        match &self.args[i] {
            (Value::Number(n), _) => Ok(*n),
            (Value::String(s), sp) => s
                .trim()
                .parse()
                .map_err(|_| bad(*sp, format!("`{}` expects a number, found string {s:?}", self.name), "not a number")),
            (v, sp) => {
                Err(bad(*sp, format!("`{}` expects a number, found {}", self.name, v.type_name()), "not a number"))
            }
        }
    }
    fn string(&self, i: usize) -> Result<String, EvalError> {
        match &self.args[i] {
            (Value::String(s), _) => Ok(s.clone()),
            (Value::Number(n), _) => Ok(format_number(*n)),
            (Value::Bool(b), _) => Ok(b.to_string()),
            (v, sp) => {
                Err(bad(*sp, format!("`{}` expects a string, found {}", self.name, v.type_name()), "not a string"))
            }
        }
    }
    fn list(&self, i: usize) -> Result<Vec<Value>, EvalError> {
        match &self.args[i] {
            (Value::List(l), _) => Ok(l.clone()),
            (v, sp) => Err(bad(*sp, format!("`{}` expects a list, found {}", self.name, v.type_name()), "not a list")),
        }
    }
    fn object(&self, i: usize) -> Result<BTreeMap<String, Value>, EvalError> {
        match &self.args[i] {
            (Value::Object(o), _) => Ok(o.clone()),
            (v, sp) => {
                Err(bad(*sp, format!("`{}` expects an object, found {}", self.name, v.type_name()), "not an object"))
            }
        }
    }
    fn numbers(&self) -> Result<Vec<f64>, EvalError> {
        // min(1, 2) and min([1, 2]...) both work; a single list argument is spread too.
        if let [(Value::List(items), sp)] = self.args.as_slice() {
            let inner =
                Call { name: self.name, span: self.span, args: items.iter().map(|v| (v.clone(), *sp)).collect() };
            return inner.numbers();
        }
        (0..self.args.len()).map(|i| self.number(i)).collect()
    }
}

fn finite(n: f64, span: Span) -> EvalResult {
    if n.is_finite() { Ok(Value::Number(n)) } else { Err(bad(span, "result is out of range", "overflows")) }
}

/// Call a built-in function.
pub fn call(name: &str, name_span: Span, span: Span, args: Vec<Arg>, scope: &mut Scope<'_>) -> EvalResult {
    let c = Call { name, span, args };
    match name {
        "env" => {
            c.arity(1, 2)?;
            let key = c.string(0)?;
            match scope.env.and_then(|e| e.get(&key)) {
                Some(v) => Ok(Value::String(v.clone())),
                None if c.args.len() == 2 => Ok(c.args[1].0.clone()),
                None => {
                    Err(Diagnostic::error("gpuplan::eval::env", format!("environment variable `{key}` is not set"))
                        .at(c.args[0].1, "not set")
                        .help(format!("export {key}=..., or give a default: env(\"{key}\", \"fallback\")"))
                        .into())
                }
            }
        }
        "min" | "max" | "sum" => {
            let ns = c.numbers()?;
            if ns.is_empty() {
                return Err(bad(span, format!("`{name}` needs at least one number"), "no arguments"));
            }
            let r = match name {
                "min" => ns.iter().copied().fold(f64::INFINITY, f64::min),
                "max" => ns.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                _ => ns.iter().sum(),
            };
            finite(r, span)
        }
        "abs" | "ceil" | "floor" | "signum" => {
            c.arity(1, 1)?;
            let n = c.number(0)?;
            Ok(Value::Number(match name {
                "abs" => n.abs(),
                "ceil" => n.ceil(),
                "floor" => n.floor(),
                _ => n.signum(),
            }))
        }
        "pow" => {
            c.arity(2, 2)?;
            finite(c.number(0)?.powf(c.number(1)?), span)
        }
        "parseint" => {
            c.arity(2, 2)?;
            let s = c.string(0)?;
            let base = c.number(1)?;
            if !(2.0..=36.0).contains(&base) || base.fract() != 0.0 {
                return Err(bad(c.args[1].1, "base must be a whole number from 2 to 36", "bad base"));
            }
            i64::from_str_radix(s.trim(), base as u32)
                .map(|n| Value::Number(n as f64))
                .map_err(|_| bad(c.args[0].1, format!("{s:?} is not a base-{} integer", base as u32), "cannot parse"))
        }
        "length" => {
            c.arity(1, 1)?;
            Ok(Value::Number(match &c.args[0].0 {
                Value::List(l) => l.len(),
                Value::Object(o) => o.len(),
                Value::String(s) => s.chars().count(),
                v => {
                    return Err(bad(
                        c.args[0].1,
                        format!("`length` needs a list, object or string, found {}", v.type_name()),
                        "no length",
                    ));
                }
            } as f64))
        }
        "upper" | "lower" | "title" | "trimspace" => {
            c.arity(1, 1)?;
            let s = c.string(0)?;
            Ok(Value::String(match name {
                "upper" => s.to_uppercase(),
                "lower" => s.to_lowercase(),
                "trimspace" => s.trim().to_string(),
                _ => s
                    .split(' ')
                    .map(|w| {
                        let mut ch = w.chars();
                        ch.next().map(|f| f.to_uppercase().collect::<String>() + ch.as_str()).unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            }))
        }
        "startswith" | "endswith" => {
            c.arity(2, 2)?;
            let (s, p) = (c.string(0)?, c.string(1)?);
            Ok(Value::Bool(if name == "startswith" { s.starts_with(&p) } else { s.ends_with(&p) }))
        }
        "substr" => {
            c.arity(3, 3)?;
            let s: Vec<char> = c.string(0)?.chars().collect();
            let (off, len) = (c.number(1)?, c.number(2)?);
            let start = if off < 0.0 { (s.len() as f64 + off).max(0.0) as usize } else { (off as usize).min(s.len()) };
            let end = if len < 0.0 { s.len() } else { (start + len as usize).min(s.len()) };
            Ok(Value::String(s[start..end].iter().collect()))
        }
        "replace" => {
            c.arity(3, 3)?;
            Ok(Value::String(c.string(0)?.replace(&c.string(1)?, &c.string(2)?)))
        }
        "format" => {
            c.arity(1, usize::MAX)?;
            format(&c)
        }
        "join" => {
            c.arity(2, 2)?;
            let sep = c.string(0)?;
            let items = c.list(1)?;
            let inner = Call { name, span, args: items.into_iter().map(|v| (v, c.args[1].1)).collect() };
            let parts = (0..inner.args.len()).map(|i| inner.string(i)).collect::<Result<Vec<_>, _>>()?;
            Ok(Value::String(parts.join(&sep)))
        }
        "split" => {
            c.arity(2, 2)?;
            let (sep, s) = (c.string(0)?, c.string(1)?);
            if sep.is_empty() {
                return Err(bad(c.args[0].1, "the separator must not be empty", "empty separator"));
            }
            Ok(Value::List(s.split(sep.as_str()).map(|p| Value::String(p.to_string())).collect()))
        }
        "concat" => {
            let mut out = Vec::new();
            for i in 0..c.args.len() {
                out.extend(c.list(i)?);
            }
            Ok(Value::List(out))
        }
        "flatten" => {
            c.arity(1, 1)?;
            fn flat(v: Vec<Value>, out: &mut Vec<Value>) {
                for item in v {
                    match item {
                        Value::List(l) => flat(l, out),
                        other => out.push(other),
                    }
                }
            }
            let mut out = Vec::new();
            flat(c.list(0)?, &mut out);
            Ok(Value::List(out))
        }
        "distinct" => {
            c.arity(1, 1)?;
            let mut out: Vec<Value> = Vec::new();
            for v in c.list(0)? {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
            Ok(Value::List(out))
        }
        "reverse" => {
            c.arity(1, 1)?;
            let mut l = c.list(0)?;
            l.reverse();
            Ok(Value::List(l))
        }
        "sort" => {
            c.arity(1, 1)?;
            let items = c.list(0)?;
            let inner = Call { name, span, args: items.into_iter().map(|v| (v, c.args[0].1)).collect() };
            let mut s = (0..inner.args.len()).map(|i| inner.string(i)).collect::<Result<Vec<_>, _>>()?;
            s.sort();
            Ok(Value::List(s.into_iter().map(Value::String).collect()))
        }
        "element" => {
            c.arity(2, 2)?;
            let l = c.list(0)?;
            let i = c.number(1)?;
            if l.is_empty() {
                return Err(bad(c.args[0].1, "`element` of an empty list", "empty"));
            }
            if i < 0.0 || i.fract() != 0.0 {
                return Err(bad(c.args[1].1, "the index must be a whole number ≥ 0", "bad index"));
            }
            Ok(l[(i as usize) % l.len()].clone())
        }
        "range" => {
            c.arity(1, 3)?;
            let (start, end, step) = match c.args.len() {
                1 => (0.0, c.number(0)?, 1.0),
                2 => (c.number(0)?, c.number(1)?, 1.0),
                _ => (c.number(0)?, c.number(1)?, c.number(2)?),
            };
            if step == 0.0 || ((end - start) / step) > 10_000.0 {
                return Err(bad(span, "`range` would produce no end or more than 10000 elements", "bad range"));
            }
            let mut out = Vec::new();
            let mut x = start;
            while (step > 0.0 && x < end) || (step < 0.0 && x > end) {
                out.push(Value::Number(x));
                x += step;
            }
            Ok(Value::List(out))
        }
        "contains" => {
            c.arity(2, 2)?;
            Ok(Value::Bool(c.list(0)?.contains(&c.args[1].0)))
        }
        "keys" | "values" => {
            c.arity(1, 1)?;
            let o = c.object(0)?;
            Ok(Value::List(if name == "keys" {
                o.into_keys().map(Value::String).collect()
            } else {
                o.into_values().collect()
            }))
        }
        "merge" => {
            let mut out = BTreeMap::new();
            for i in 0..c.args.len() {
                out.extend(c.object(i)?);
            }
            Ok(Value::Object(out))
        }
        "zipmap" => {
            c.arity(2, 2)?;
            let (ks, vs) = (c.list(0)?, c.list(1)?);
            if ks.len() != vs.len() {
                return Err(bad(span, "`zipmap` needs two lists of the same length", "length mismatch"));
            }
            let inner = Call { name, span, args: ks.into_iter().map(|v| (v, c.args[0].1)).collect() };
            let keys = (0..inner.args.len()).map(|i| inner.string(i)).collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Object(keys.into_iter().zip(vs).collect()))
        }
        "lookup" => {
            c.arity(2, 3)?;
            let o = c.object(0)?;
            let k = c.string(1)?;
            match (o.get(&k), c.args.get(2)) {
                (Some(v), _) => Ok(v.clone()),
                (None, Some((d, _))) => Ok(d.clone()),
                (None, None) => Err(bad(c.args[1].1, format!("no key {k:?} and no default given"), "missing key")),
            }
        }
        "coalesce" => c
            .args
            .iter()
            .find(|(v, _)| !matches!(v, Value::Null) && v.as_str() != Some(""))
            .map(|(v, _)| v.clone())
            .ok_or_else(|| bad(span, "`coalesce`: every argument is null or empty", "no value")),
        "tostring" => {
            c.arity(1, 1)?;
            c.string(0).map(Value::String)
        }
        "tonumber" => {
            c.arity(1, 1)?;
            c.number(0).map(Value::Number)
        }
        "tobool" => {
            c.arity(1, 1)?;
            match &c.args[0] {
                (Value::Bool(b), _) => Ok(Value::Bool(*b)),
                (Value::String(s), _) if s == "true" || s == "false" => Ok(Value::Bool(s == "true")),
                (v, sp) => Err(bad(*sp, format!("cannot convert {} to bool", v.type_name()), "not a bool")),
            }
        }
        "tolist" => {
            c.arity(1, 1)?;
            c.list(0).map(Value::List)
        }
        "jsonencode" => {
            c.arity(1, 1)?;
            Ok(Value::String(c.args[0].0.to_json().to_string()))
        }
        _ => {
            let mut d = Diagnostic::error("gpuplan::eval::unknown_function", format!("unknown function `{name}`"))
                .at(name_span, "no such function");
            d = match did_you_mean(name, FUNCTIONS.iter().copied()) {
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None => d.help(format!("available functions: {}", FUNCTIONS.join(", "))),
            };
            Err(d.into())
        }
    }
}

/// `format("%s-%d", a, b)`: verbs %s %d %f %.Nf %v %%.
fn format(c: &Call<'_>) -> EvalResult {
    let spec = c.string(0)?;
    let mut out = String::new();
    let mut next = 1;
    let mut chars = spec.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        let mut precision: Option<usize> = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut digits = String::new();
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                digits.push(*d);
                chars.next();
            }
            precision = digits.parse().ok().map(|p: usize| p.min(20));
        }
        let verb = chars.next();
        if verb == Some('%') {
            out.push('%');
            continue;
        }
        if next >= c.args.len() {
            return Err(bad(c.span, "`format` has more verbs than arguments", "missing argument"));
        }
        match verb {
            Some('s') | Some('v') => out.push_str(&match &c.args[next].0 {
                Value::List(_) | Value::Object(_) => c.args[next].0.to_json().to_string(),
                _ => c.string(next)?,
            }),
            Some('d') => out.push_str(&format!("{}", c.number(next)?.trunc() as i64)),
            Some('f') => out.push_str(&format!("{:.*}", precision.unwrap_or(6), c.number(next)?)),
            other => {
                return Err(bad(
                    c.args[0].1,
                    format!("unsupported format verb `%{}`", other.map(String::from).unwrap_or_default()),
                    "use %s, %d, %f, %v or %%",
                ));
            }
        }
        next += 1;
    }
    Ok(Value::String(out))
}
