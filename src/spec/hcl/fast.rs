//! A fast path for the plain HCL most spec files are made of: blocks, attributes and
//! literal values, read straight into the raw tree in one pass over the bytes.
//!
//! hcl-edit keeps every byte of whitespace and every comment (it exists to edit files),
//! which cost about 12 ms of CPU per 2,000 pools (with the conversion of its tree). Spec
//! files of a fleet are mostly `gpu_pool "x" { gpu = "L4" ... }`: no operators, no
//! interpolation. This reader accepts only that subset and returns `None` at the first
//! thing outside it; the caller then parses the whole file with hcl-edit, which stays the
//! one parser of record (syntax errors, templates, expressions, `fmt`).
//!
//! What it accepts, and nothing more:
//! - bodies of attributes (`key = value`) and blocks (`kind "label" ident {` + newline
//!   ... `}`), one per line; blank lines, `#` and `//` comments;
//! - values: `"strings"` of printable ASCII without `\`, `${` or `%{`; unsigned decimal
//!   numbers of at most 15 digits; `true`, `false`, `null`; traversals made of names
//!   (`gpu_pool.a.gpu`); `[tuples]` and `{ objects }` of those; blocks, tuples and
//!   objects nested at most [`MAX_NESTING`] deep; no key given twice in a body or an
//!   object (hcl-edit's error for that is the one users see).
//!
//! `None` is never an error swallowed: it only means "not plain", and hcl-edit then reads
//! the file and reports whatever is wrong with it, as it always did. (The UTF-8 and number
//! conversions below cannot fail on the ASCII runs they are given; if one did, the same
//! fallback applies.)
//!
//! Anything else (`\r`, non-ASCII outside strings, `/* */`, one-line blocks, operators,
//! calls, indexes, heredocs, negative numbers, `for`) ends the fast path. Whatever it
//! returns is the tree hcl-edit and `convert.rs` would give, spans included: debug builds
//! (every test) parse each accepted file both ways and compare (`parse` in `mod.rs`), and
//! `tests.rs` compares them over generated files.

use crate::diag::Span;
use crate::spec::raw::{Attr, Block, Body, Expr, ExprKind, Ident, ObjectKey, Step};

/// Deeper blocks, tuples and objects go to hcl-edit (whose pre-check refuses more than
/// 64); it also bounds this reader's recursion.
const MAX_NESTING: usize = 16;

/// Bodies and objects with more items go to hcl-edit (keys are checked for repeats by
/// a scan of the ones before).
const MAX_ITEMS: usize = 64;

/// Longest number literal read here: 15 decimal digits are exact in an f64.
const MAX_DIGITS: usize = 15;

/// The raw tree of `text`, or `None` when it holds anything outside the subset.
pub(super) fn parse(file: u32, text: &str) -> Option<Body> {
    let b = text.as_bytes();
    if b.len() >= u32::MAX as usize || b.contains(&b'\r') {
        return None;
    }
    let mut r = Reader { text, b, i: 0, file, depth: 0 };
    let body = r.body(Span::new(file, 0, b.len()), false)?;
    (r.i == b.len()).then_some(body)
}

/// Where an expression ends decides which byte may follow it.
#[derive(Clone, Copy, PartialEq)]
enum Context {
    Attribute,
    Tuple,
    Object,
}

struct Reader<'a> {
    /// The text, for slices of it at char boundaries (no UTF-8 check per name).
    text: &'a str,
    b: &'a [u8],
    i: usize,
    file: u32,
    depth: usize,
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_name_continue(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn at(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    fn span(&self, start: usize) -> Span {
        Span::new(self.file, start, self.i)
    }

    /// Spaces and tabs.
    fn spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// A `#` or `//` comment up to (not including) its newline; false if none is here.
    fn line_comment(&mut self) -> bool {
        let starts = match self.peek() {
            Some(b'#') => true,
            Some(b'/') => self.at(1) == Some(b'/'),
            _ => false,
        };
        if starts {
            self.i = match self.b[self.i..].iter().position(|&c| c == b'\n') {
                Some(n) => self.i + n,
                None => self.b.len(),
            };
        }
        starts
    }

    /// Blank lines, spaces and line comments.
    fn blank(&mut self) {
        loop {
            self.spaces();
            if self.line_comment() {
                continue;
            }
            if self.peek() == Some(b'\n') {
                self.i += 1;
                continue;
            }
            return;
        }
    }

    /// The end of a line: spaces, an optional comment, then a newline or the end of the
    /// text. `/*` (and any other byte) ends the fast path.
    fn line_end(&mut self) -> Option<()> {
        self.spaces();
        self.line_comment();
        match self.peek() {
            None => Some(()),
            Some(b'\n') => {
                self.i += 1;
                Some(())
            }
            Some(_) => None,
        }
    }

    fn name(&mut self) -> Option<Ident> {
        let start = self.i;
        if !is_name_start(self.peek()?) {
            return None;
        }
        while self.peek().is_some_and(is_name_continue) {
            self.i += 1;
        }
        // ASCII only, so at char boundaries; if not, `None` sends the file to hcl-edit.
        let name = self.text.get(start..self.i)?;
        Some(Ident::new(name, self.span(start)))
    }

    /// A quoted string with nothing to unescape or interpolate: its value and span.
    fn string(&mut self) -> Option<(String, Span)> {
        let start = self.i;
        self.i += 1; // the opening quote
        loop {
            match self.peek()? {
                b'"' => break,
                b'\\' | b'\n' => return None,
                b'$' | b'%' if self.at(1) == Some(b'{') => return None,
                c if !(b' '..=b'~').contains(&c) && c != b'\t' => return None,
                _ => self.i += 1,
            }
        }
        // Printable ASCII only (checked above): cannot fail; `None` would mean hcl-edit reads it.
        let value = self.text.get(start + 1..self.i)?.to_string();
        self.i += 1; // the closing quote
        Some((value, self.span(start)))
    }

    fn body(&mut self, span: Span, nested: bool) -> Option<Body> {
        let mut body = Body { attrs: vec![], blocks: vec![], span };
        loop {
            self.blank();
            match self.peek() {
                None if !nested => return Some(body),
                Some(b'}') if nested => return Some(body),
                None | Some(b'}') => return None,
                Some(_) => {}
            }
            let start = self.i;
            let key = self.name()?;
            self.spaces();
            if self.peek() == Some(b'=') && self.at(1) != Some(b'=') {
                self.i += 1;
                self.spaces();
                // hcl-edit refuses a key given twice in one body: it reports that.
                if body.attrs.len() >= MAX_ITEMS || body.attrs.iter().any(|a| a.key.name == key.name) {
                    return None;
                }
                let value = self.expr(Context::Attribute)?;
                self.line_end()?;
                body.attrs.push(Attr { key, value });
            } else {
                body.blocks.push(self.block(start, key)?);
            }
        }
    }

    /// After the block's type: labels, `{`, a newline, the body, `}`, the line's end.
    fn block(&mut self, start: usize, kind: Ident) -> Option<Block> {
        let mut labels = vec![];
        loop {
            match self.peek()? {
                b'{' => break,
                b'"' => {
                    let (name, span) = self.string()?;
                    labels.push(Ident::new(name, span));
                }
                _ => labels.push(self.name()?),
            }
            self.spaces();
        }
        self.nest()?;
        let open = self.i;
        self.i += 1;
        // `kind { attr = 1 }` on one line is a different form: hcl-edit reads it.
        self.line_end()?;
        let mut body = self.body(Span::new(self.file, open, open), true)?;
        self.i += 1; // the closing brace
        self.depth -= 1;
        let span = self.span(start);
        body.span = Span::new(self.file, open, self.i);
        self.line_end()?;
        Some(Block { kind, labels, body, span })
    }

    fn expr(&mut self, context: Context) -> Option<Expr> {
        let start = self.i;
        let kind = match self.peek()? {
            b'"' => ExprKind::String(self.string()?.0),
            b'0'..=b'9' => self.number()?,
            b'[' => self.tuple()?,
            b'{' => self.object()?,
            c if is_name_start(c) => return self.traversal(context),
            _ => return None,
        };
        let expr = Expr::new(kind, self.span(start));
        self.ends(context)?;
        Some(expr)
    }

    /// What may follow an expression here (an operator, a call or an index may not).
    fn ends(&self, context: Context) -> Option<()> {
        let mut k = self.i;
        while matches!(self.b.get(k), Some(b' ' | b'\t')) {
            k += 1;
        }
        let ok = match self.b.get(k) {
            None | Some(b'\n' | b'#') => true,
            Some(b'/') => self.b.get(k + 1) == Some(&b'/'),
            Some(b',') => context != Context::Attribute,
            Some(b']') => context == Context::Tuple,
            Some(b'}') => context == Context::Object,
            Some(_) => false,
        };
        ok.then_some(())
    }

    fn number(&mut self) -> Option<ExprKind> {
        let start = self.i;
        let digits = |r: &mut Self| {
            let from = r.i;
            while r.peek().is_some_and(|c| c.is_ascii_digit()) {
                r.i += 1;
            }
            r.i - from
        };
        let mut count = digits(self);
        if count > 1 && self.b[start] == b'0' {
            return None;
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            let fraction = digits(self);
            if fraction == 0 {
                return None;
            }
            count += fraction;
        }
        if count > MAX_DIGITS || self.peek().is_some_and(|c| is_name_continue(c) || c == b'.') {
            return None;
        }
        // Digits with at most one `.`: both conversions succeed; `None` would mean hcl-edit reads it.
        let n: f64 = self.text.get(start..self.i)?.parse().ok()?;
        Some(ExprKind::Number(n))
    }

    fn traversal(&mut self, context: Context) -> Option<Expr> {
        let start = self.i;
        let root = self.name()?;
        let literal = match root.name.as_str() {
            "true" => Some(ExprKind::Bool(true)),
            "false" => Some(ExprKind::Bool(false)),
            "null" => Some(ExprKind::Null),
            // `for` opens a for expression; the other keywords are hcl-edit's to judge.
            "for" | "in" | "if" => return None,
            _ => None,
        };
        let mut steps = vec![];
        while self.peek() == Some(b'.') && literal.is_none() {
            self.i += 1;
            steps.push(Step::Attr(self.name()?));
        }
        let expr = Expr::new(literal.unwrap_or(ExprKind::Traversal { root, steps }), self.span(start));
        self.ends(context)?;
        Some(expr)
    }

    fn nest(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_NESTING).then_some(())
    }

    /// `[a, b,]` over any number of lines.
    fn tuple(&mut self) -> Option<ExprKind> {
        self.nest()?;
        self.i += 1;
        let mut items = vec![];
        loop {
            self.blank();
            if self.peek()? == b']' {
                break;
            }
            items.push(self.expr(Context::Tuple)?);
            self.blank();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => break,
                _ => return None,
            }
        }
        self.i += 1;
        self.depth -= 1;
        Some(ExprKind::Array(items))
    }

    /// `{ key = value, "key" = value }`, items split by commas or newlines.
    fn object(&mut self) -> Option<ExprKind> {
        self.nest()?;
        self.i += 1;
        let mut items = vec![];
        loop {
            self.blank();
            let start = self.i;
            let key = match self.peek()? {
                b'}' => break,
                b'"' => {
                    let (name, span) = self.string()?;
                    Ident::new(name, span)
                }
                _ => {
                    let key = self.name()?;
                    if matches!(key.name.as_str(), "true" | "false" | "null" | "for") {
                        return None;
                    }
                    key
                }
            };
            // A key given twice (in either spelling): hcl-edit reports or reads that.
            if items.len() >= MAX_ITEMS
                || items.iter().any(|(k, _)| matches!(k, ObjectKey::Name(n) if n.name == key.name))
            {
                return None;
            }
            debug_assert!(self.i > start);
            self.spaces();
            match self.peek()? {
                b'=' if self.at(1) != Some(b'=') => self.i += 1,
                b':' => self.i += 1,
                _ => return None,
            }
            self.spaces();
            let value = self.expr(Context::Object)?;
            items.push((ObjectKey::Name(key), value));
            self.spaces();
            self.line_comment();
            match self.peek()? {
                b',' => self.i += 1,
                b'\n' | b'}' => {}
                _ => return None,
            }
        }
        self.i += 1;
        self.depth -= 1;
        Some(ExprKind::Object(items))
    }
}
