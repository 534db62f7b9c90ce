//! Typing of YAML scalars (YAML 1.2 core schema) and `${...}` templates in strings.
//!
//! Only plain scalars are typed: `null`/`~`/empty, `true`/`false` spellings, integers
//! (decimal, `0x`, `0o`) and floats (`.inf`, `.nan` included). Quoted and block scalars,
//! and anything tagged `!!str`, are strings. Strings holding `${` are parsed as HCL
//! templates so YAML specs can use references like HCL ones.

use saphyr_parser::ScalarStyle;

use super::tree::{Node, Scalar, TAG_STR};
use crate::diag::{Diagnostic, Diagnostics};
use crate::spec::raw::{Expr, ExprKind};

/// What a plain scalar's text means.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Plain {
    Null,
    Bool(bool),
    Number(f64),
    /// Written as a number but too large for an f64.
    OutOfRange,
    String,
}

pub(super) fn classify(s: &str) -> Plain {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        "true" | "True" | "TRUE" => return Plain::Bool(true),
        "false" | "False" | "FALSE" => return Plain::Bool(false),
        ".nan" | ".NaN" | ".NAN" => return Plain::Number(f64::NAN),
        _ => {}
    }
    let (negative, unsigned) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
        return Plain::Number(if negative { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    let radix = |prefix: &str, radix: u32| {
        let digits = unsigned.strip_prefix(prefix)?;
        let mut v = 0f64;
        for c in digits.chars() {
            v = v * f64::from(radix) + f64::from(c.to_digit(radix)?);
        }
        (!digits.is_empty()).then_some(v)
    };
    let value = match radix("0x", 16).or_else(|| radix("0o", 8)) {
        Some(v) => v,
        None if is_decimal(unsigned) => match unsigned.parse::<f64>() {
            Ok(v) => v,
            Err(_) => return Plain::String,
        },
        None => return Plain::String,
    };
    if value.is_infinite() {
        return Plain::OutOfRange;
    }
    Plain::Number(if negative { -value } else { value })
}

/// `[0-9]+ (. [0-9]*)? | . [0-9]+`, then an optional exponent: the core schema's
/// number forms (Rust's float parser alone would also accept `inf` and `nan`).
fn is_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |mut i: usize| {
        let from = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        (i, i - from)
    };
    let (mut i, int_digits) = digits(0);
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        (i, frac_digits) = digits(i + 1);
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let (j, exp_digits) = digits(i);
        if exp_digits == 0 {
            return false;
        }
        i = j;
    }
    i == b.len()
}

/// The expression for one scalar node.
pub(super) fn scalar_expr(file: u32, text: &str, node: &Node, scalar: &Scalar, diags: &mut Diagnostics) -> Expr {
    let span = node.span(file);
    let forced_string = scalar.tag.as_deref() == Some(TAG_STR);
    if scalar.style == ScalarStyle::Plain && !forced_string {
        match classify(&scalar.value) {
            Plain::Null => return Expr::new(ExprKind::Null, span),
            Plain::Bool(b) => return Expr::new(ExprKind::Bool(b), span),
            Plain::Number(n) => return Expr::new(ExprKind::Number(n), span),
            Plain::OutOfRange => {
                diags.push(
                    Diagnostic::error("gpuplan::yaml::number_out_of_range", "number out of range")
                        .at(span, "too large for a number")
                        .help("numbers must fit in a 64-bit float; quote the value to keep it as text"),
                );
                return Expr::new(ExprKind::Invalid, span);
            }
            Plain::String => {}
        }
    }
    if scalar.value.contains("${") {
        let offset = content_offset(text, node, scalar);
        if let Some(mut e) = crate::spec::hcl::parse_template(file, &scalar.value, offset, diags) {
            e.span = span;
            return e;
        }
    }
    Expr::new(ExprKind::String(scalar.value.clone()), span)
}

/// Byte offset of the scalar's content in the file, so template spans point at the
/// right characters. Exact when the source text equals the value (no escapes, no line
/// folding); otherwise the start of the scalar.
pub(super) fn content_offset(text: &str, node: &Node, scalar: &Scalar) -> usize {
    let candidate = match scalar.style {
        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => node.body + 1,
        _ => node.body,
    };
    let exact = text.get(candidate..candidate + scalar.value.len()) == Some(scalar.value.as_str());
    if exact { candidate } else { node.body }
}
