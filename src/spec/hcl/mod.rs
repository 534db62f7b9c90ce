//! HCL → raw tree (hcl-edit, spans kept), and canonical HCL formatting.
//!
//! - `lex.rs`: a forgiving tokenizer, run before parsing to refuse deep nesting (so the
//!   recursive parser cannot overflow the stack) and to guess the cause of syntax errors.
//! - `convert.rs`: hcl-edit's tree → [`raw`](crate::spec::raw) nodes with file spans.
//! - `fmt.rs`: `gpuplan fmt`, a token re-indenter that keeps comments; `same.rs` proves
//!   each result still parses to the same tree.
//!
//! Nothing here panics on any input, and nothing gives meaning to blocks.

mod convert;
mod fast;
mod fmt;
mod lex;
mod same;
#[cfg(test)]
mod tests;

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::spec::raw::{Body, Expr, ExprKind};

use lex::{Lexed, Mode};

/// Parse one HCL file. Syntax errors are pushed to `diags` (located); returns `None`
/// when the file could not be parsed at all.
pub fn parse(file: u32, text: &str, diags: &mut Diagnostics) -> Option<Body> {
    if let Some(body) = fast::parse(file, text) {
        #[cfg(debug_assertions)]
        same_as_hcl_edit(file, text, &body);
        return Some(body);
    }
    parse_with_hcl_edit(file, text, diags)
}

/// Debug builds (every test) check each file the fast path read against hcl-edit.
#[cfg(debug_assertions)]
fn same_as_hcl_edit(file: u32, text: &str, fast: &Body) {
    let mut scratch = Diagnostics::default();
    let slow = parse_with_hcl_edit(file, text, &mut scratch);
    assert!(
        slow.as_ref() == Some(fast) && scratch.items.is_empty(),
        "the fast HCL path read this text differently from hcl-edit:\n{text}\nfast: {fast:#?}\nhcl-edit: {slow:#?}"
    );
}

/// The parser of record: hcl-edit, then its tree converted.
fn parse_with_hcl_edit(file: u32, text: &str, diags: &mut Diagnostics) -> Option<Body> {
    let lexed = precheck(file, text, 0, Mode::Code, diags)?;
    match hcl_edit::parser::parse_body(text) {
        Ok(body) => {
            let mut conv = convert::Conv { file, text, base: 0, diags };
            Some(conv.body(&body, Span::new(file, 0, text.len())))
        }
        Err(e) => {
            syntax_error(file, text, 0, &e, &lexed, diags);
            None
        }
    }
}

/// Parse the *content* of a string (e.g. a YAML scalar) that may contain `${...}`
/// interpolations. `offset` is the byte offset of `text` inside file `file`, so spans
/// point into the real file. Plain strings come back as `ExprKind::String`.
pub fn parse_template(file: u32, text: &str, offset: usize, diags: &mut Diagnostics) -> Option<Expr> {
    let span = Span::new(file, offset, offset + text.len());
    // Fast path, and the common case: nothing to interpolate (`$${` and `%%{` escapes
    // still need the parser to unescape them).
    if !text.contains("${") && !text.contains("%{") {
        return Some(Expr::new(ExprKind::String(text.to_string()), span));
    }
    let lexed = precheck(file, text, offset, Mode::Template, diags)?;
    match hcl_edit::parser::parse_template(text) {
        Ok(t) => {
            let mut conv = convert::Conv { file, text, base: offset, diags };
            Some(Expr::new(conv.template(&t, span), span))
        }
        Err(e) => {
            syntax_error(file, text, offset, &e, &lexed, diags);
            None
        }
    }
}

/// Parse a standalone HCL expression (used for `--var` values and policy asserts).
pub fn parse_expression(file: u32, text: &str, offset: usize, diags: &mut Diagnostics) -> Option<Expr> {
    let lexed = precheck(file, text, offset, Mode::Code, diags)?;
    match hcl_edit::parser::parse_expr(text) {
        Ok(e) => {
            let mut conv = convert::Conv { file, text, base: offset, diags };
            Some(conv.expr(&e, Span::new(file, offset, offset + text.len())))
        }
        Err(e) => {
            syntax_error(file, text, offset, &e, &lexed, diags);
            None
        }
    }
}

/// Canonical formatting (`gpuplan fmt`). Returns `None` (with diagnostics) when the
/// file does not parse. Comments are preserved.
pub fn format(file: u32, text: &str, diags: &mut Diagnostics) -> Option<String> {
    let before = parse(file, text, diags)?;
    let out = fmt::format_tokens(text, &lex::lex(text, Mode::Code).tokens);
    // The formatter only moves whitespace, but it works on tokens, not on the tree; check
    // that the result still means the same before handing it out.
    let mut scratch = Diagnostics::default();
    let same = parse(file, &out, &mut scratch).is_some_and(|after| same::same_tree(&before, &after));
    if !same {
        diags.push(
            Diagnostic::warning("gpuplan::fmt", "could not format this file safely; left unchanged")
                .at(Span::new(file, 0, 0), "this file")
                .help("please report this file to the gpuplan maintainers"),
        );
        return Some(text.to_string());
    }
    Some(out)
}

/// Refuses what the recursive parser must not see: nesting deeper than [`lex::MAX_DEPTH`].
fn precheck(file: u32, text: &str, base: usize, mode: Mode, diags: &mut Diagnostics) -> Option<Lexed> {
    let lexed = lex::check(text, mode);
    if let Some(at) = lexed.too_deep {
        diags.push(
            Diagnostic::error("gpuplan::syntax", format!("nesting too deep (more than {} levels)", lex::MAX_DEPTH))
                .at(char_span(file, text, base, at), "this bracket is too deep")
                .help("flatten the structure, e.g. move inner values into `locals`"),
        );
        return None;
    }
    Some(lexed)
}

/// A span covering the char at `at` (empty at the end of the text), shifted by `base`.
fn char_span(file: u32, text: &str, base: usize, at: usize) -> Span {
    let mut start = at.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let end = text[start..].chars().next().map_or(start, |c| start + c.len_utf8());
    Span::new(file, base + start, base + end)
}

fn syntax_error(
    file: u32,
    text: &str,
    base: usize,
    err: &hcl_edit::parser::Error,
    lexed: &Lexed,
    diags: &mut Diagnostics,
) {
    let at = err.location().offset();
    // hcl-edit reports a too-large literal as an unexpected token somewhere on its line.
    let line_end = lex::find(text.as_bytes(), at, b"\n").unwrap_or(text.len());
    if let Some((s, e)) = lexed.bad_number.filter(|(s, _)| *s <= line_end) {
        diags.push(
            Diagnostic::error("gpuplan::syntax", "number out of range")
                .at(Span::new(file, base + s, base + e), "does not fit a 64-bit float")
                .help("numbers must be finite 64-bit floats (at most about 1.8e308)"),
        );
        return;
    }
    let guess = guess_cause(text, at, err.message(), lexed);
    let mut d = Diagnostic::error("gpuplan::syntax", format!("invalid HCL syntax: {}", guess.reason));
    match guess.opened {
        // hcl-edit backtracks out of an unclosed string to the start of its attribute or
        // block; the opening quote is the better primary location then.
        Some((open, what)) if at <= open => {
            d = d.at(char_span(file, text, base, open), format!("{what}, never closed"));
        }
        Some((open, what)) => {
            d = d.at(char_span(file, text, base, at), guess.label).at(char_span(file, text, base, open), what);
        }
        None => d = d.at(char_span(file, text, base, at), guess.label),
    }
    d = d.help(guess.help);
    diags.push(d);
}

struct Guess {
    reason: String,
    label: String,
    help: String,
    /// Where an unclosed bracket or string was opened, with a label.
    opened: Option<(usize, String)>,
}

impl Guess {
    fn new(reason: &str, label: &str, help: &str) -> Guess {
        Guess { reason: reason.to_string(), label: label.to_string(), help: help.to_string(), opened: None }
    }
}

/// Best guess at what the user got wrong, from the parser message and the token scan.
fn guess_cause(text: &str, at: usize, message: &str, lexed: &Lexed) -> Guess {
    let guess = Guess::new;
    if message.contains("redefined attribute") {
        return guess("attribute defined twice", "defined again here", "remove one of the two definitions");
    }
    if message.contains("nesting depth") {
        return guess(
            "nesting too deep (more than 64 levels)",
            "too deep",
            "flatten the structure, e.g. move inner values into `locals`",
        );
    }
    if let Some(g) = unbalanced(text, lexed) {
        return g;
    }
    if let Some(c) = text.get(at..).and_then(|t| t.chars().next()).filter(|c| c.is_control() && !c.is_whitespace()) {
        return guess(
            &format!("unexpected control character U+{:04X}", c as u32),
            "control character here",
            "spec files must be plain text: remove it, or write it as an escape such as `\\u0000` inside a string",
        );
    }
    if unquoted_label(text, at) {
        return guess(
            "block labels must be quoted",
            "quote this label",
            "write block headers as `kind \"label\" { ... }`, e.g. `gpu_pool \"train\" {`",
        );
    }
    if missing_equals(text, at) {
        return guess(
            "missing `=`",
            "expected `=` here",
            "attributes are written `name = value`; blocks are `kind \"label\" { ... }`",
        );
    }
    from_parser_message(text, at, message)
}

/// A string or bracket left open, or a closer with nothing to close, from the token scan.
fn unbalanced(text: &str, lexed: &Lexed) -> Option<Guess> {
    let guess = Guess::new;
    let unclosed = lexed.unclosed.last().copied();
    let string_open = unclosed.filter(|(_, c)| matches!(c, b'"' | b'$'));
    // An opening quote without its partner pairs every later quote wrongly; the first
    // string that runs over a line break is where the partner went missing.
    if let (Some((open, b'"')), Some(m)) = (string_open, lexed.multiline_string)
        && m <= open
    {
        return Some(Guess {
            opened: Some((m, "this string is not closed on its line".to_string())),
            ..guess(
                "unclosed string",
                "expected `\"` by here",
                "add the closing `\"`; for text over several lines use a heredoc (`<<EOT`)",
            )
        });
    }
    // `[ ... }`: the `]` was forgotten, whatever else is still open at the end.
    if let (None, Some((_, open, c))) = (string_open, lexed.mismatched) {
        let closer = closer_of(c);
        return Some(Guess {
            opened: Some((open, format!("`{}` opened here", c as char))),
            ..guess(
                &format!("unclosed `{}`", c as char),
                &format!("expected `{closer}` by here"),
                &format!("add the matching `{closer}`"),
            )
        });
    }
    if let Some((open, c)) = unclosed {
        let (reason, what, help) = match c {
            b'"' => ("unclosed string", "string starts here", "add the closing `\"`"),
            b'$' => ("unclosed interpolation", "`${` opened here", "close the interpolation with `}`"),
            b'{' => ("unclosed `{`", "`{` opened here", "add the matching `}`"),
            b'[' => ("unclosed `[`", "`[` opened here", "add the matching `]`"),
            _ => ("unclosed `(`", "`(` opened here", "add the matching `)`"),
        };
        let closer = match c {
            b'"' => "\"",
            b'[' => "]",
            b'(' => ")",
            _ => "}",
        };
        return Some(Guess {
            opened: Some((open, what.to_string())),
            ..guess(reason, &format!("expected `{closer}` by here"), help)
        });
    }
    if let Some(u) = lexed.unmatched {
        let c = text.as_bytes().get(u).map_or('}', |b| *b as char);
        return Some(Guess {
            opened: None,
            ..guess(
                &format!("unexpected `{c}`"),
                "nothing to close here",
                "remove it, or add the opening bracket it should match",
            )
        });
    }
    None
}

/// What the parser's own message says, shortened, with a hint for the usual slips.
fn from_parser_message(text: &str, at: usize, message: &str) -> Guess {
    let guess = Guess::new;
    // hcl-edit lists every token it would accept; past a few, the list is noise.
    let short = match message.split_once("; expected ") {
        Some((what, expected)) if expected.matches(", ").count() > 2 => match what {
            "invalid expression" => "expected a value".to_string(),
            _ => what.to_string(),
        },
        _ => message.chars().take(100).collect(),
    };
    let help = if message.contains("expected `]`") || message.contains("expected `)`") {
        "separate items with `,`"
    } else {
        "check the syntax near here: attributes are `name = value`, blocks `kind \"label\" { ... }`"
    };
    // `name =` with nothing after it on the line.
    let before = text.get(..at.min(text.len())).unwrap_or("");
    let line_before = before.rsplit('\n').next().unwrap_or("");
    if short == "expected a value" && line_before.trim_end().ends_with('=') {
        return guess(
            "missing value after `=`",
            "a value is missing here",
            "write a value after `=`: a string \"...\", a number, true/false, a list [...] or a map { ... }",
        );
    }
    guess(&short, "unexpected here", help)
}

fn closer_of(open: u8) -> char {
    match open {
        b'{' => '}',
        b'[' => ']',
        _ => ')',
    }
}

/// True when the error is at a bare word or number between a block type and its `{`:
/// `gpu_pool train {` or `gpu_pool 42 {`.
fn unquoted_label(text: &str, at: usize) -> bool {
    let at = at.min(text.len());
    let line_start = text.as_bytes()[..at].iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
    let line_end = lex::find(text.as_bytes(), at, b"\n").unwrap_or(text.len());
    let (Some(before), Some(after)) = (text.get(line_start..at), text.get(at..line_end)) else {
        return false;
    };
    let is_word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    let mut head = before.split_whitespace();
    let label_end = after.find(|c: char| c.is_whitespace() || c == '{').unwrap_or(after.len());
    matches!((head.next(), head.next()), (Some(kind), None) if is_word(kind))
        && is_word(&after[..label_end])
        && after.trim_end().ends_with('{')
}

/// True when the error line reads `name value` (an identifier followed by something that
/// can only be a value): the classic forgotten `=`.
fn missing_equals(text: &str, at: usize) -> bool {
    let at = at.min(text.len());
    let line_start = text.as_bytes()[..at].iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
    let line_end = lex::find(text.as_bytes(), at, b"\n").unwrap_or(text.len());
    let Some(line) = text.get(line_start..line_end) else {
        return false;
    };
    let line = line.trim_start();
    let ident_len = line.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-')).unwrap_or(line.len());
    let rest = &line[ident_len..];
    if ident_len == 0 || !rest.starts_with([' ', '\t']) {
        return false;
    }
    let rest = rest.trim();
    match rest.chars().next() {
        Some(c) if c.is_ascii_digit() || c == '[' || c == '-' => true,
        // `kind "label" {` is a block header, not a forgotten `=`.
        Some('"') => !rest.ends_with('{'),
        _ => false,
    }
}
