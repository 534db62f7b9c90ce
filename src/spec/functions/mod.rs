//! Built-in functions available in expressions: the ones Terraform users reach for.
//!
//! One table ([`TABLE`]) lists every function with its signature, doc, example, arity and
//! implementation: [`FUNCTIONS`] (hints and docs) and [`call`] both come from it.
//! Every function's arity is checked before it runs, and each checks its argument types
//! and reports a located error; none can panic. `env("NAME")` reads the environment
//! passed in through the scope.

mod args;
mod collections;

use crate::diag::{Diagnostic, Span, did_you_mean};
use crate::model::secret::SecretRef;
use crate::spec::value::{EvalError, EvalResult, Scope, Value};
use args::{Arg, Call, bad, finite};
use collections::*;

/// Names of all functions, for "did you mean" hints and docs: the names of [`TABLE`],
/// so the list and what [`call`] runs cannot disagree.
pub const FUNCTIONS: &[&str] = &names::<{ TABLE.len() }>();

const fn names<const N: usize>() -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = TABLE[i].name;
        i += 1;
    }
    out
}

/// One built-in function: what docs and hints show, and how it runs.
pub struct Function {
    pub name: &'static str,
    /// How it is called, e.g. `lookup(object, key, default?)`.
    pub signature: &'static str,
    /// One line for docs.
    pub doc: &'static str,
    /// A call and its result as JSON: docs show it, and a test runs it.
    pub example: (&'static str, &'static str),
    /// How many arguments it takes (min, max), checked before it runs.
    arity: (usize, usize),
    run: fn(&Call<'_>, &Scope<'_>) -> EvalResult,
}

/// Any number of arguments (the function checks them itself).
const ANY: (usize, usize) = (0, usize::MAX);

/// Every built-in function, sorted by name (a test checks it; [`call`] searches it).
pub const TABLE: &[Function] = &[
    f("abs", "abs(number)", "The absolute value.", ("abs(-2.5)", "2.5"), (1, 1), abs),
    f("ceil", "ceil(number)", "The smallest whole number ≥ the number.", ("ceil(1.2)", "2"), (1, 1), ceil),
    f(
        "coalesce",
        "coalesce(value...)",
        "The first argument that is neither null nor an empty string.",
        (r#"coalesce("", "b")"#, r#""b""#),
        ANY,
        coalesce,
    ),
    f(
        "concat",
        "concat(list...)",
        "The lists joined into one.",
        (r#"concat(["a"], ["b"])"#, r#"["a","b"]"#),
        ANY,
        concat,
    ),
    f(
        "contains",
        "contains(list, value)",
        "Whether the list holds the value.",
        (r#"contains(["a", "b"], "b")"#, "true"),
        (2, 2),
        contains,
    ),
    f(
        "distinct",
        "distinct(list)",
        "The list without repeated elements (first ones kept).",
        (r#"distinct(["a", "b", "a"])"#, r#"["a","b"]"#),
        (1, 1),
        distinct,
    ),
    f(
        "element",
        "element(list, index)",
        "The element at the index, wrapping around past the end.",
        (r#"element(["a", "b"], 3)"#, r#""b""#),
        (2, 2),
        element,
    ),
    f(
        "endswith",
        "endswith(string, suffix)",
        "Whether the string ends with the suffix.",
        (r#"endswith("train-01", "01")"#, "true"),
        (2, 2),
        endswith,
    ),
    f(
        "env",
        "env(name, default?)",
        "An environment variable; without a default, an unset one is an error.",
        (r#"env("GPUPLAN_UNSET_EXAMPLE", "fallback")"#, r#""fallback""#),
        (1, 2),
        env,
    ),
    f(
        "flatten",
        "flatten(list)",
        "Nested lists as one flat list.",
        (r#"flatten([["a"], ["b", ["c"]]])"#, r#"["a","b","c"]"#),
        (1, 1),
        flatten,
    ),
    f("floor", "floor(number)", "The largest whole number ≤ the number.", ("floor(1.8)", "1"), (1, 1), floor),
    f(
        "format",
        "format(spec, value...)",
        "A string from a spec with the verbs %s %d %f %.Nf %v %%.",
        (r#"format("%s-%d", "node", 7)"#, r#""node-7""#),
        (1, usize::MAX),
        format_fn,
    ),
    f(
        "join",
        "join(separator, list)",
        "The list's elements joined by the separator.",
        (r#"join("-", ["a", "b"])"#, r#""a-b""#),
        (2, 2),
        join,
    ),
    f(
        "jsonencode",
        "jsonencode(value)",
        "The value as JSON text.",
        (r#"jsonencode({ a = 1 })"#, r#""{\"a\":1}""#),
        (1, 1),
        jsonencode,
    ),
    f(
        "keys",
        "keys(object)",
        "The object's keys, sorted.",
        (r#"keys({ b = 1, a = 2 })"#, r#"["a","b"]"#),
        (1, 1),
        keys,
    ),
    f(
        "length",
        "length(list | object | string)",
        "The number of elements, keys or characters.",
        ("length([1, 2, 3])", "3"),
        (1, 1),
        length,
    ),
    f(
        "lookup",
        "lookup(object, key, default?)",
        "The object's value for the key, else the default.",
        (r#"lookup({ a = 1 }, "b", 0)"#, "0"),
        (2, 3),
        lookup,
    ),
    f("lower", "lower(string)", "The string in lower case.", (r#"lower("L4")"#, r#""l4""#), (1, 1), lower),
    f("max", "max(number...)", "The largest of the numbers (or of one list of them).", ("max(1, 4, 2)", "4"), ANY, max),
    f(
        "merge",
        "merge(object...)",
        "The objects merged; later keys win.",
        (r#"merge({ a = 1 }, { a = 2, b = 3 })"#, r#"{"a":2,"b":3}"#),
        ANY,
        merge,
    ),
    f(
        "min",
        "min(number...)",
        "The smallest of the numbers (or of one list of them).",
        ("min(3, 1, 2)", "1"),
        ANY,
        min,
    ),
    f(
        "parseint",
        "parseint(string, base)",
        "The integer a string spells in base 2 to 36.",
        (r#"parseint("ff", 16)"#, "255"),
        (2, 2),
        parseint,
    ),
    f("pow", "pow(base, exponent)", "The base raised to the exponent.", ("pow(2, 10)", "1024"), (2, 2), pow),
    f(
        "range",
        "range(end) | range(start, end, step?)",
        "Numbers from start (0) up to but not including end, by step (1).",
        ("range(1, 4)", "[1,2,3]"),
        (1, 3),
        range,
    ),
    f(
        "replace",
        "replace(string, search, replacement)",
        "The string with every occurrence of search replaced.",
        (r#"replace("a-b-c", "-", "_")"#, r#""a_b_c""#),
        (3, 3),
        replace,
    ),
    f("reverse", "reverse(list)", "The list in reverse order.", ("reverse([1, 2, 3])", "[3,2,1]"), (1, 1), reverse),
    f(
        "secret",
        "secret(reference)",
        "A reference to a job secret (`aws-sm:NAME[#KEY]`, `ssm:/PATH`, `tencent-ssm:NAME`, `alicloud-kms:NAME`, `k8s:SECRET/KEY`, `env:NAME`) for a job's `env`: never its value.",
        (r#"secret("aws-sm:ml/hf-token")"#, r#"{"secret":"aws-sm:ml/hf-token"}"#),
        (1, 1),
        secret,
    ),
    f("signum", "signum(number)", "-1, 0 or 1: the sign of the number.", ("signum(-7)", "-1"), (1, 1), signum),
    f(
        "sort",
        "sort(list)",
        "The list's elements as strings, sorted.",
        (r#"sort(["b", "a"])"#, r#"["a","b"]"#),
        (1, 1),
        sort,
    ),
    f(
        "split",
        "split(separator, string)",
        "The parts of the string between separators.",
        (r#"split(",", "a,b")"#, r#"["a","b"]"#),
        (2, 2),
        split,
    ),
    f(
        "startswith",
        "startswith(string, prefix)",
        "Whether the string starts with the prefix.",
        (r#"startswith("train-01", "train")"#, "true"),
        (2, 2),
        startswith,
    ),
    f(
        "substr",
        "substr(string, offset, length)",
        "Characters from the offset (negative: from the end); length -1 means to the end.",
        (r#"substr("hello", 1, 3)"#, r#""ell""#),
        (3, 3),
        substr,
    ),
    f("sum", "sum(number...)", "The sum of the numbers (or of one list of them).", ("sum([1, 2, 3])", "6"), ANY, sum),
    f(
        "title",
        "title(string)",
        "The string with each word's first letter in upper case.",
        (r#"title("gpu pool")"#, r#""Gpu Pool""#),
        (1, 1),
        title,
    ),
    f(
        "tobool",
        "tobool(value)",
        "A bool, or the string \"true\" or \"false\".",
        (r#"tobool("true")"#, "true"),
        (1, 1),
        tobool,
    ),
    f("tolist", "tolist(list)", "The value, which must be a list.", (r#"tolist(["a"])"#, r#"["a"]"#), (1, 1), tolist),
    f(
        "tonumber",
        "tonumber(value)",
        "A number, or a string that spells one.",
        (r#"tonumber("42")"#, "42"),
        (1, 1),
        tonumber,
    ),
    f(
        "tostring",
        "tostring(value)",
        "A string, number or bool as a string.",
        ("tostring(42)", r#""42""#),
        (1, 1),
        tostring,
    ),
    f(
        "trimspace",
        "trimspace(string)",
        "The string without leading and trailing whitespace.",
        (r#"trimspace("  a  ")"#, r#""a""#),
        (1, 1),
        trimspace,
    ),
    f("upper", "upper(string)", "The string in upper case.", (r#"upper("l4")"#, r#""L4""#), (1, 1), upper),
    f(
        "values",
        "values(object)",
        "The object's values, by sorted key.",
        (r#"values({ b = 1, a = 2 })"#, "[2,1]"),
        (1, 1),
        values,
    ),
    f(
        "zipmap",
        "zipmap(keys, values)",
        "An object from a list of keys and a list of values of the same length.",
        (r#"zipmap(["a", "b"], [1, 2])"#, r#"{"a":1,"b":2}"#),
        (2, 2),
        zipmap,
    ),
];

const fn f(
    name: &'static str,
    signature: &'static str,
    doc: &'static str,
    example: (&'static str, &'static str),
    arity: (usize, usize),
    run: fn(&Call<'_>, &Scope<'_>) -> EvalResult,
) -> Function {
    Function { name, signature, doc, example, arity, run }
}

/// Call a built-in function: check its arity, then run it.
pub fn call(name: &str, name_span: Span, span: Span, args: Vec<Arg<'_>>, scope: &mut Scope<'_>) -> EvalResult {
    let Ok(i) = TABLE.binary_search_by(|f| f.name.cmp(name)) else { return Err(unknown(name, name_span)) };
    let function = &TABLE[i];
    let c = Call { name, span, args };
    c.arity(function.arity.0, function.arity.1)?;
    (function.run)(&c, scope)
}

fn unknown(name: &str, name_span: Span) -> EvalError {
    let mut d = Diagnostic::error("gpuplan::eval::unknown_function", format!("unknown function `{name}`"))
        .at(name_span, "no such function");
    d = match did_you_mean(name, FUNCTIONS.iter().copied()) {
        Some(s) => d.help(format!("did you mean `{s}`?")),
        None => d.help(format!("available functions: {}", FUNCTIONS.join(", "))),
    };
    d.into()
}

// ---- numbers -------------------------------------------------------------------------------

/// `min`, `max`, `sum`: numbers as arguments or one list of them; at least one.
fn aggregate(c: &Call<'_>, fold: fn(&[f64]) -> f64) -> EvalResult {
    let ns = c.numbers()?;
    if ns.is_empty() {
        return Err(bad(c.span, format!("`{}` needs at least one number", c.name), "no arguments"));
    }
    finite(fold(&ns), c.span)
}

fn min(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    aggregate(c, |ns| ns.iter().copied().fold(f64::INFINITY, f64::min))
}

fn max(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    aggregate(c, |ns| ns.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}

fn sum(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    aggregate(c, |ns| ns.iter().sum())
}

fn abs(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::Number(c.number(0)?.abs()))
}

fn ceil(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::Number(c.number(0)?.ceil()))
}

fn floor(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::Number(c.number(0)?.floor()))
}

fn signum(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::Number(c.number(0)?.signum()))
}

fn pow(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    finite(c.number(0)?.powf(c.number(1)?), c.span)
}

fn parseint(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let s = c.string(0)?;
    let base = c.number(1)?;
    if !(2.0..=36.0).contains(&base) || base.fract() != 0.0 {
        return Err(bad(c.args[1].1, "base must be a whole number from 2 to 36", "bad base"));
    }
    i64::from_str_radix(s.trim(), base as u32)
        .map(|n| Value::Number(n as f64))
        .map_err(|_| bad(c.args[0].1, format!("{s:?} is not a base-{} integer", base as u32), "cannot parse"))
}

fn range(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let (start, end, step) = match c.args.len() {
        1 => (0.0, c.number(0)?, 1.0),
        2 => (c.number(0)?, c.number(1)?, 1.0),
        _ => (c.number(0)?, c.number(1)?, c.number(2)?),
    };
    if step == 0.0 || ((end - start) / step) > 10_000.0 {
        return Err(bad(c.span, "`range` would produce no end or more than 10000 elements", "bad range"));
    }
    let mut out = Vec::new();
    let mut x = start;
    while (step > 0.0 && x < end) || (step < 0.0 && x > end) {
        out.push(Value::Number(x));
        x += step;
    }
    Ok(Value::List(out))
}

// ---- strings -------------------------------------------------------------------------------

fn env(c: &Call<'_>, scope: &Scope<'_>) -> EvalResult {
    let key = c.string(0)?;
    if let Some(reads) = scope.env_read {
        reads.note(&key);
    }
    match scope.env.and_then(|e| e.get(&key)) {
        Some(v) => Ok(Value::String(v.clone())),
        None if c.args.len() == 2 => Ok(c.arg(1).0.clone()),
        None => Err(Diagnostic::error("gpuplan::eval::env", format!("environment variable `{key}` is not set"))
            .at(c.args[0].1, "not set")
            .help(format!("export {key}=..., or give a default: env(\"{key}\", \"fallback\")"))
            .into()),
    }
}

/// `secret("SOURCE:NAME")`: the reference as the object a YAML spec writes
/// (`{secret: "…"}`), checked here so a bad one is reported where it is written.
fn secret(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let text = c.string(0)?;
    match SecretRef::parse(&text) {
        Ok(r) => Ok(Value::Object([("secret".to_string(), Value::String(r.to_string()))].into())),
        Err(e) => Err(Diagnostic::error("gpuplan::spec::secret", e.why)
            .at(c.args[0].1, "not a secret reference")
            .help(e.hint)
            .into()),
    }
}

fn length(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::Number(match c.arg(0).0 {
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

fn upper(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::String(c.string(0)?.to_uppercase()))
}

fn lower(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::String(c.string(0)?.to_lowercase()))
}

fn trimspace(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::String(c.string(0)?.trim().to_string()))
}

fn title(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let s = c.string(0)?;
    Ok(Value::String(
        s.split(' ')
            .map(|w| {
                let mut ch = w.chars();
                ch.next().map(|f| f.to_uppercase().collect::<String>() + ch.as_str()).unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join(" "),
    ))
}

fn startswith(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let (s, p) = (c.string(0)?, c.string(1)?);
    Ok(Value::Bool(s.starts_with(&p)))
}

fn endswith(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let (s, p) = (c.string(0)?, c.string(1)?);
    Ok(Value::Bool(s.ends_with(&p)))
}

fn substr(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let s: Vec<char> = c.string(0)?.chars().collect();
    let (off, len) = (c.number(1)?, c.number(2)?);
    let start = if off < 0.0 { (s.len() as f64 + off).max(0.0) as usize } else { (off as usize).min(s.len()) };
    let end = if len < 0.0 { s.len() } else { (start + len as usize).min(s.len()) };
    Ok(Value::String(s[start..end].iter().collect()))
}

fn replace(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::String(c.string(0)?.replace(&c.string(1)?, &c.string(2)?)))
}

fn format_fn(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    format(c)
}

fn join(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let sep = c.string(0)?;
    let parts = c.list_of_strings(1)?;
    Ok(Value::String(parts.join(&sep)))
}

fn split(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    let (sep, s) = (c.string(0)?, c.string(1)?);
    if sep.is_empty() {
        return Err(bad(c.args[0].1, "the separator must not be empty", "empty separator"));
    }
    Ok(Value::List(s.split(sep.as_str()).map(|p| Value::String(p.to_string())).collect()))
}

// ---- collections ---------------------------------------------------------------------------

fn jsonencode(c: &Call<'_>, _: &Scope<'_>) -> EvalResult {
    Ok(Value::String(c.args[0].0.to_json().to_string()))
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
            // Only ASCII digits were collected: `None` means `%.f` without digits (or a
            // number too long to parse), both meaning "default precision", as before.
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
            Some('s') | Some('v') => out.push_str(&match c.arg(next).0 {
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

#[cfg(test)]
mod tests;
