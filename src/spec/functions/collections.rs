//! The collection and conversion functions: lists, maps and type conversions.

use std::collections::BTreeMap;

use super::args::{Call, bad};
use crate::spec::value::{EvalResult, Scope, Value};

pub(super) fn concat(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let mut out = Vec::new();
    for i in 0..c.args.len() {
        out.extend(c.list(i)?);
    }
    Ok(Value::List(out))
}

pub(super) fn flatten(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
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

pub(super) fn distinct(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let mut out: Vec<Value> = Vec::new();
    for v in c.list(0)? {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(Value::List(out))
}

pub(super) fn reverse(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let mut l = c.list(0)?;
    l.reverse();
    Ok(Value::List(l))
}

pub(super) fn sort(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let mut s = c.list_of_strings(0)?;
    s.sort();
    Ok(Value::List(s.into_iter().map(Value::String).collect()))
}

pub(super) fn element(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let l = c.list_ref(0)?;
    let i = c.number(1)?;
    if l.is_empty() {
        return Err(bad(c.args[0].1, "`element` of an empty list", "empty"));
    }
    if i < 0.0 || i.fract() != 0.0 {
        return Err(bad(c.args[1].1, "the index must be a whole number ≥ 0", "bad index"));
    }
    Ok(l[(i as usize) % l.len()].clone())
}

pub(super) fn contains(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::Bool(c.list_ref(0)?.contains(c.arg(1).0)))
}

pub(super) fn keys(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::List(c.object_ref(0)?.keys().map(|k| Value::String(k.clone())).collect()))
}

pub(super) fn values(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::List(c.object_ref(0)?.values().cloned().collect()))
}

pub(super) fn merge(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let mut out = BTreeMap::new();
    for i in 0..c.args.len() {
        out.extend(c.object(i)?);
    }
    Ok(Value::Object(out))
}

pub(super) fn zipmap(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let (ks, vs) = (c.list(0)?, c.list(1)?);
    if ks.len() != vs.len() {
        return Err(bad(c.span, "`zipmap` needs two lists of the same length", "length mismatch"));
    }
    let keys = c.strings_of(ks, c.args[0].1)?;
    Ok(Value::Object(keys.into_iter().zip(vs).collect()))
}

pub(super) fn lookup(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let o = c.object_ref(0)?;
    let k = c.string(1)?;
    match (o.get(&k), c.args.get(2)) {
        (Some(v), _) => Ok(v.clone()),
        (None, Some((d, _))) => Ok(d.as_ref().clone()),
        (None, None) => Err(bad(c.args[1].1, format!("no key {k:?} and no default given"), "missing key")),
    }
}

pub(super) fn coalesce(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    c.args
        .iter()
        .find(|(v, _)| !matches!(**v, Value::Null) && v.as_str() != Some(""))
        .map(|(v, _)| v.as_ref().clone())
        .ok_or_else(|| bad(c.span, "`coalesce`: every argument is null or empty", "no value"))
}

// ---- conversions ---------------------------------------------------------------------------

pub(super) fn tostring(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    c.string(0).map(Value::String)
}

pub(super) fn tonumber(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    c.number(0).map(Value::Number)
}

pub(super) fn tobool(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    match c.arg(0) {
        (Value::Bool(b), _) => Ok(Value::Bool(*b)),
        (Value::String(s), _) if s == "true" || s == "false" => Ok(Value::Bool(s == "true")),
        (v, sp) => Err(bad(sp, format!("cannot convert {} to bool", v.type_name()), "not a bool")),
    }
}

pub(super) fn tolist(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    c.list(0).map(Value::List)
}
