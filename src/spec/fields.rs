//! Typed, located access to the attributes of one block, for the decoders.
//!
//! A [`Fields`] wraps a block body (HCL block, YAML mapping, or an object value) and
//! hands out attributes as typed [`Spanned`] values, reporting wrong types, ranges and
//! bad enum values at the value's span. Attributes nobody asked for are reported by
//! [`Fields::finish`] as unknown, with a "did you mean" hint. A getter returns
//! `Err(Reported)` when it already reported a problem, `Ok(None)` when the attribute is
//! absent.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::addr::{Address, Kind};
use crate::diag::{Diagnostic, Diagnostics, Span, did_you_mean};
use crate::spec::eval::{EvalError, Scope, Value, eval, format_number};
use crate::spec::raw::{Block, Body, Expr, ExprKind, Ident, ObjectKey, Step};
use crate::spec::spanned::{Duration, Spanned};

mod what;
pub use what::What;
use what::{name_bit, name_bits};

/// A problem was already pushed to the diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported;

pub type Got<T> = Result<Option<Spanned<T>>, Reported>;

/// Evaluation context for one block: the scope plus the diagnostics sink.
pub struct Cx<'a, 'd> {
    pub scope: Scope<'a>,
    pub diags: &'d mut Diagnostics,
    /// Declared resource names per kind, for address checks.
    pub declared: &'a BTreeMap<Kind, BTreeSet<String>>,
    /// Files written in YAML, so hints use that spelling there.
    pub yaml_files: &'a BTreeSet<u32>,
}

impl Cx<'_, '_> {
    pub fn eval(&mut self, expr: &Expr) -> Result<Value, Reported> {
        match eval(expr, &mut self.scope) {
            Ok(v) => Ok(v),
            Err(EvalError::Diag(d)) => {
                self.diags.push(*d);
                Err(Reported)
            }
            Err(EvalError::Poisoned) => Err(Reported),
        }
    }
    pub fn error(&mut self, d: Diagnostic) -> Reported {
        self.diags.push(d);
        Reported
    }
}

#[derive(Debug, Clone)]
enum Entry<'r> {
    Raw(&'r Expr),
    Val(Value, Span),
}

#[derive(Debug, Clone)]
struct Field<'r> {
    /// Borrowed from the spec's tree unless evaluated (a YAML map, a computed key).
    key: Cow<'r, str>,
    key_span: Span,
    entry: Entry<'r>,
}

/// The attributes and nested blocks of one block being decoded.
#[derive(Debug, Clone)]
pub struct Fields<'r> {
    /// How to name this block in messages, e.g. `gpu_pool "train"`.
    pub what: Rc<What<'r>>,
    /// Where to point when something is missing: the block header.
    pub head: Span,
    fields: Vec<Field<'r>>,
    blocks: Vec<&'r Block>,
    /// Which of `fields`, then which of `blocks`, a getter asked for by name (what
    /// [`Fields::finish`] does not report). Flags rather than a set of names: a block is
    /// asked for a score of names, most of them absent, for each of thousands of pools.
    used: Vec<bool>,
    /// The [`name_bit`]s of every attribute's and block's name: a name whose bit is not
    /// here is absent, found so without a comparison (most names a decoder asks for are).
    names: u64,
    /// Some getter reported a problem; the decoder must not build a value.
    pub failed: bool,
}

pub fn type_error(what: &str, expected: &str, v: &Value, span: Span) -> Diagnostic {
    let found = match v {
        Value::String(s) => format!("string {s:?}"),
        Value::Number(n) => format!("number {}", format_number(*n)),
        Value::Bool(b) => format!("bool {b}"),
        other => other.type_name().to_string(),
    };
    // `what` is an attribute name, or already a phrase such as "the `nodes` block of ...".
    let what = if what.contains(' ') { what.to_string() } else { format!("`{what}`") };
    Diagnostic::error("gpuplan::spec::type", format!("{what} must be {expected}, found {found}"))
        .at(span, format!("expected {expected}"))
}

impl<'r> Fields<'r> {
    pub fn from_body(what: impl Into<What<'r>>, head: Span, body: &'r Body, diags: &mut Diagnostics) -> Self {
        let what = Rc::new(what.into());
        let mut fields: Vec<Field<'r>> = Vec::with_capacity(body.attrs.len());
        for a in &body.attrs {
            if let Some(prev) = fields.iter().find(|f| f.key == a.key.name) {
                diags.push(
                    Diagnostic::error(
                        "gpuplan::spec::duplicate_attribute",
                        format!("`{}` is set twice in {what}", a.key.name),
                    )
                    .at(a.key.span, "set again here")
                    .at(prev.key_span, "first set here")
                    .help("remove one of them"),
                );
                continue;
            }
            fields.push(Field { key: Cow::Borrowed(&a.key.name), key_span: a.key.span, entry: Entry::Raw(&a.value) });
        }
        let blocks: Vec<&'r Block> = body.blocks.iter().collect();
        let used = vec![false; fields.len() + blocks.len()];
        let names = name_bits(fields.iter().map(|f| &*f.key).chain(blocks.iter().map(|b| b.kind.name.as_str())));
        Fields { what, head, fields, blocks, used, names, failed: false }
    }

    fn from_entry(what: Rc<What<'r>>, head: Span, entry: Entry<'r>, cx: &mut Cx<'_, '_>) -> Result<Self, Reported> {
        let mut fields = Vec::new();
        match entry {
            Entry::Raw(Expr { kind: ExprKind::Object(items), .. }) => {
                for (k, v) in items {
                    let (key, key_span) = match k {
                        ObjectKey::Name(id) => (Cow::Borrowed(id.name.as_str()), id.span),
                        ObjectKey::Expr(e) => {
                            let kv = cx.eval(e)?;
                            (Cow::Owned(kv.to_string()), e.span)
                        }
                    };
                    fields.push(Field { key, key_span, entry: Entry::Raw(v) });
                }
            }
            Entry::Raw(expr) => {
                let v = cx.eval(expr)?;
                return Self::from_entry(what, head, Entry::Val(v, expr.span), cx);
            }
            Entry::Val(Value::Object(o), span) => {
                for (k, v) in o {
                    fields.push(Field { key: Cow::Owned(k), key_span: span, entry: Entry::Val(v, span) });
                }
            }
            Entry::Val(Value::Null, _) => {}
            Entry::Val(v, span) => {
                return Err(cx.error(type_error(&what.to_string(), "a block (an object)", &v, span)));
            }
        }
        let used = vec![false; fields.len()];
        let names = name_bits(fields.iter().map(|f| &*f.key));
        Ok(Fields { what, head, fields, blocks: vec![], used, names, failed: false })
    }

    /// The first attribute called `name`; marks it and every block so called as asked
    /// for. One pass over the attributes: decoders ask each block for dozens of names.
    fn take(&mut self, name: &str) -> Option<Field<'r>> {
        if self.names & name_bit(name) == 0 {
            return None;
        }
        let mut found = None;
        for (i, f) in self.fields.iter().enumerate() {
            if f.key == name {
                self.used[i] = true;
                found = found.or(Some(i));
            }
        }
        let blocks = self.blocks.iter().map(|b| b.kind.name.as_str());
        for (used, n) in self.used[self.fields.len()..].iter_mut().zip(blocks) {
            *used |= n == name;
        }
        found.map(|i| self.fields[i].clone())
    }

    /// Every attribute and block called `name` counts as asked for.
    fn mark_used(&mut self, name: &str) {
        if self.names & name_bit(name) == 0 {
            return;
        }
        let names = self.fields.iter().map(|f| &*f.key).chain(self.blocks.iter().map(|b| b.kind.name.as_str()));
        for (used, n) in self.used.iter_mut().zip(names) {
            *used |= n == name;
        }
    }

    /// Is the attribute written at all?
    pub fn has(&self, name: &str) -> bool {
        if self.names & name_bit(name) == 0 {
            return false;
        }
        self.fields.iter().any(|f| f.key == name) || self.blocks.iter().any(|b| b.kind.name == name)
    }

    /// The raw expression of an attribute, if it is written as one.
    pub fn raw(&mut self, name: &str) -> Option<&'r Expr> {
        match self.take(name)?.entry {
            Entry::Raw(e) => Some(e),
            Entry::Val(..) => None,
        }
    }

    /// The evaluated value of an attribute.
    pub fn try_value(&mut self, cx: &mut Cx<'_, '_>, name: &str) -> Got<Value> {
        let Some(f) = self.take(name) else { return Ok(None) };
        match f.entry {
            Entry::Raw(e) => cx.eval(e).map(|v| Some(Spanned::new(v, e.span))),
            Entry::Val(v, s) => Ok(Some(Spanned::new(v, s))),
        }
    }

    /// Report a missing required attribute.
    pub fn missing(&self, cx: &mut Cx<'_, '_>, name: &str, example: &str) -> Reported {
        cx.error(
            Diagnostic::error(
                "gpuplan::spec::missing_attribute",
                format!("{} is missing the required attribute `{name}`", self.what),
            )
            .at(self.head, format!("`{name}` is required here"))
            .help(if cx.yaml_files.contains(&self.head.file) {
                format!("add `{name}: {}`", yaml_example(example))
            } else {
                format!("add `{name} = {example}`")
            }),
        )
    }

    /// A required attribute: reports it when missing (the getter reported other problems).
    pub fn required<T>(
        &mut self,
        cx: &mut Cx<'_, '_>,
        got: Option<Spanned<T>>,
        name: &str,
        example: &str,
    ) -> Option<Spanned<T>> {
        if got.is_none() && !self.has(name) {
            self.missing(cx, name, example);
            self.failed = true;
        }
        got
    }

    /// A value or its default, spanned at the block header.
    pub fn or<T>(&self, got: Option<Spanned<T>>, default: T) -> Spanned<T> {
        got.unwrap_or(Spanned::new(default, self.head))
    }

    pub fn flag<T>(&mut self, got: Result<Option<T>, Reported>) -> Option<T> {
        got.unwrap_or_else(|_| {
            self.failed = true;
            None
        })
    }

    /// `Err(Reported)` if any getter or nested block failed.
    pub fn done(&self) -> Result<(), Reported> {
        if self.failed { Err(Reported) } else { Ok(()) }
    }

    pub fn try_string(&mut self, cx: &mut Cx<'_, '_>, name: &str) -> Got<String> {
        let Some(v) = self.try_value(cx, name)? else { return Ok(None) };
        match v.value {
            t @ (Value::String(_) | Value::Number(_) | Value::Bool(_)) => Ok(Some(Spanned::new(t.into_text(), v.span))),
            other => Err(cx.error(type_error(name, "a string", &other, v.span))),
        }
    }

    pub fn try_number(&mut self, cx: &mut Cx<'_, '_>, name: &str, min: f64, max: f64) -> Got<f64> {
        let Some(v) = self.try_value(cx, name)? else { return Ok(None) };
        let n = match &v.value {
            Value::Number(n) => *n,
            Value::String(s) if s.trim().parse::<f64>().is_ok_and(f64::is_finite) => s.trim().parse().unwrap_or(0.0),
            other => return Err(cx.error(type_error(name, "a number", other, v.span))),
        };
        if !(min..=max).contains(&n) {
            return Err(cx.error(range_error(
                name,
                &format_number(n),
                &format_number(min),
                &format_number(max),
                v.span,
            )));
        }
        Ok(Some(Spanned::new(n, v.span)))
    }

    pub fn try_uint(&mut self, cx: &mut Cx<'_, '_>, name: &str, min: u64, max: u64) -> Got<u64> {
        let Some(v) = self.try_value(cx, name)? else { return Ok(None) };
        let n = match &v.value {
            Value::Number(n) => *n,
            Value::String(s) if s.trim().parse::<f64>().is_ok() => s.trim().parse().unwrap_or(f64::NAN),
            other => return Err(cx.error(type_error(name, "a whole number", other, v.span))),
        };
        if n.fract() != 0.0 || !n.is_finite() {
            return Err(cx.error(type_error(name, "a whole number", &Value::Number(n), v.span)));
        }
        if n < min as f64 || n > max as f64 {
            return Err(cx.error(range_error(name, &format_number(n), &min.to_string(), &max.to_string(), v.span)));
        }
        Ok(Some(Spanned::new(n as u64, v.span)))
    }

    pub fn try_u32(&mut self, cx: &mut Cx<'_, '_>, name: &str, min: u32, max: u32) -> Got<u32> {
        Ok(self.try_uint(cx, name, min as u64, max as u64)?.map(|v| v.map(|n| n as u32)))
    }

    pub fn try_bool(&mut self, cx: &mut Cx<'_, '_>, name: &str) -> Got<bool> {
        let Some(v) = self.try_value(cx, name)? else { return Ok(None) };
        match &v.value {
            Value::Bool(b) => Ok(Some(Spanned::new(*b, v.span))),
            Value::String(s) if s == "true" || s == "false" => Ok(Some(Spanned::new(s == "true", v.span))),
            other => Err(cx.error(type_error(name, "a bool (true or false)", other, v.span))),
        }
    }

    pub fn try_duration(&mut self, cx: &mut Cx<'_, '_>, name: &str) -> Got<Duration> {
        let Some(v) = self.try_value(cx, name)? else { return Ok(None) };
        match &v.value {
            Value::String(s) => match humantime::parse_duration(s.trim()) {
                Ok(d) => match crate::model::time::check_duration(d) {
                    Ok(()) => Ok(Some(Spanned::new(Duration(d), v.span))),
                    Err(why) => Err(cx.error(
                        Diagnostic::error("gpuplan::spec::duration", format!("`{name}` is too long: {why}"))
                            .at(v.span, "too long")
                            .help(format!("give at most \"{}\"", crate::model::time::MAX_DURATION_TEXT)),
                    )),
                },
                // humantime's own messages ("expected number at 8") mean little to users.
                Err(_) => Err(cx.error(
                    Diagnostic::error("gpuplan::spec::duration", format!("`{name}` is not a duration: {s:?}"))
                        .at(v.span, "not a duration")
                        .help("write durations like \"90s\", \"15m\", \"2h\" or \"1h 30m\""),
                )),
            },
            Value::Number(n) => Err(cx.error(
                type_error(name, "a duration", &v.value, v.span)
                    .help(format!("add a unit, e.g. \"{}s\"", format_number(*n))),
            )),
            other => Err(cx.error(type_error(name, "a duration", other, v.span))),
        }
    }

    /// A string that must be one of `variants`.
    pub fn try_enumeration<T: Copy>(&mut self, cx: &mut Cx<'_, '_>, name: &str, variants: &[(&str, T)]) -> Got<T> {
        let Some(s) = self.try_string(cx, name)? else { return Ok(None) };
        match variants.iter().find(|(n, _)| *n == s.value) {
            Some((_, t)) => Ok(Some(Spanned::new(*t, s.span))),
            None => Err(cx.error(enum_error(name, &s.value, variants.iter().map(|(n, _)| *n), s.span))),
        }
    }

    pub fn try_string_list(&mut self, cx: &mut Cx<'_, '_>, name: &str) -> Got<Vec<Spanned<String>>> {
        let Some(f) = self.take(name) else { return Ok(None) };
        match f.entry {
            // Literal arrays keep one span per element.
            Entry::Raw(Expr { kind: ExprKind::Array(items), span }) => {
                let mut out = Vec::new();
                let mut failed = false;
                for item in items {
                    match cx.eval(item) {
                        Ok(Value::List(inner)) => {
                            out.extend(inner.into_iter().map(|v| Spanned::new(v.into_text(), item.span)))
                        }
                        Ok(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
                            out.push(Spanned::new(v.into_text(), item.span))
                        }
                        Ok(other) => {
                            cx.error(type_error(name, "a list of strings", &other, item.span));
                            failed = true;
                        }
                        Err(_) => failed = true,
                    }
                }
                if failed { Err(Reported) } else { Ok(Some(Spanned::new(out, *span))) }
            }
            entry => {
                let (v, span) = match entry {
                    Entry::Raw(e) => (cx.eval(e)?, e.span),
                    Entry::Val(v, s) => (v, s),
                };
                match v {
                    Value::List(items) => {
                        let mut out = Vec::new();
                        for item in items {
                            match item {
                                Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                                    out.push(Spanned::new(item.into_text(), span))
                                }
                                other => return Err(cx.error(type_error(name, "a list of strings", &other, span))),
                            }
                        }
                        Ok(Some(Spanned::new(out, span)))
                    }
                    Value::String(s) => Err(cx.error(
                        type_error(name, "a list of strings", &Value::String(s.clone()), span)
                            .help(format!("write [\"{s}\"]")),
                    )),
                    other => Err(cx.error(type_error(name, "a list of strings", &other, span))),
                }
            }
        }
    }

    pub fn try_string_map(&mut self, cx: &mut Cx<'_, '_>, name: &str) -> Got<BTreeMap<String, Spanned<String>>> {
        self.try_map(cx, name, Fields::try_string)
    }

    /// A map attribute whose every value `get` reads (by its key, from the map's fields).
    pub fn try_map<T>(
        &mut self,
        cx: &mut Cx<'_, '_>,
        name: &str,
        get: impl Fn(&mut Fields<'r>, &mut Cx<'_, '_>, &str) -> Got<T>,
    ) -> Got<BTreeMap<String, Spanned<T>>> {
        let Some(f) = self.take(name) else { return Ok(None) };
        let what = Rc::new(What::Text(format!("`{name}`")));
        let head = f.key_span;
        let span = match &f.entry {
            Entry::Raw(e) => e.span,
            Entry::Val(_, s) => *s,
        };
        let mut inner = Fields::from_entry(what, head, f.entry, cx)?;
        let keys: Vec<String> = inner.fields.iter().map(|f| f.key.to_string()).collect();
        let mut out = BTreeMap::new();
        let mut failed = false;
        for k in keys {
            match get(&mut inner, cx, &k) {
                Ok(Some(v)) => {
                    out.insert(k, v);
                }
                Ok(None) => {}
                Err(_) => failed = true,
            }
        }
        if failed { Err(Reported) } else { Ok(Some(Spanned::new(out, span))) }
    }

    /// A nested block (`nodes { ... }` in HCL, `nodes: {...}` in YAML, or `nodes = {...}`).
    pub fn block(&mut self, cx: &mut Cx<'_, '_>, name: &'static str) -> Result<Option<Fields<'r>>, Reported> {
        if self.names & name_bit(name) == 0 {
            return Ok(None);
        }
        let mut named = self.blocks.iter().copied().filter(|b| b.kind.name == name);
        if let Some(b) = named.next() {
            if let Some(second) = named.next() {
                cx.error(
                    Diagnostic::error(
                        "gpuplan::spec::duplicate_block",
                        format!("{} has more than one `{name}` block", self.what),
                    )
                    .at(second.kind.span, "second block here")
                    .at(b.kind.span, "first block here")
                    .help("merge them into one block"),
                );
            }
            if let Some(l) = b.labels.first() {
                cx.error(
                    Diagnostic::error("gpuplan::spec::unexpected_label", format!("the `{name}` block takes no labels"))
                        .at(l.span, "remove this label"),
                );
            }
            self.mark_used(name);
            let f = Fields::from_body(What::Nested(name, self.what.clone()), b.kind.span, &b.body, cx.diags);
            return Ok(Some(f));
        }
        let Some(f) = self.take(name) else { return Ok(None) };
        Fields::from_entry(Rc::new(What::Nested(name, self.what.clone())), f.key_span, f.entry, cx).map(Some)
    }

    /// A list of objects (`candidates = [{ ... }, { ... }]`, a YAML list of maps): one
    /// [`Fields`] per element, each spanned at its own element. `None` when absent; a
    /// value that is not a list of objects is reported.
    pub fn object_list(&mut self, cx: &mut Cx<'_, '_>, name: &str) -> Option<Spanned<Vec<Fields<'r>>>> {
        let f = self.take(name)?;
        let r = match f.entry {
            Entry::Raw(Expr { kind: ExprKind::Array(items), span }) => {
                let mut out = Vec::new();
                let mut failed = false;
                for (i, item) in items.iter().enumerate() {
                    let what = Rc::new(What::Text(format!("element {} of `{name}`", i + 1)));
                    match Fields::from_entry(what, item.span, Entry::Raw(item), cx) {
                        Ok(inner) => out.push(inner),
                        Err(_) => failed = true,
                    }
                }
                if failed { Err(Reported) } else { Ok(Spanned::new(out, *span)) }
            }
            entry => {
                let (v, span) = match entry {
                    Entry::Raw(e) => match cx.eval(e) {
                        Ok(v) => (v, e.span),
                        Err(r) => return self.flag(Err(r)),
                    },
                    Entry::Val(v, s) => (v, s),
                };
                match v {
                    Value::List(items) => {
                        let mut out = Vec::new();
                        let mut failed = false;
                        for (i, item) in items.into_iter().enumerate() {
                            let what = Rc::new(What::Text(format!("element {} of `{name}`", i + 1)));
                            match Fields::from_entry(what, span, Entry::Val(item, span), cx) {
                                Ok(inner) => out.push(inner),
                                Err(_) => failed = true,
                            }
                        }
                        if failed { Err(Reported) } else { Ok(Spanned::new(out, span)) }
                    }
                    other => Err(cx.error(type_error(name, "a list of objects", &other, span))),
                }
            }
        };
        self.flag(r.map(Some))
    }

    /// A reference to a declared resource of `kind`: `gpu_pool.train` (a reference),
    /// `"gpu_pool.train"` or just `"train"`.
    pub fn try_address(&mut self, cx: &mut Cx<'_, '_>, name: &str, kind: Kind) -> Got<Address> {
        let Some(f) = self.take(name) else { return Ok(None) };
        address_of(cx, name, kind, f.entry).map(Some)
    }

    /// A reference like [`Self::try_address`], or the keyword `word` written as a string
    /// (`"open"`), which gives `None` in place of an address.
    pub fn try_address_or_word(
        &mut self,
        cx: &mut Cx<'_, '_>,
        name: &str,
        kind: Kind,
        word: &str,
    ) -> Got<Option<Address>> {
        let Some(f) = self.take(name) else { return Ok(None) };
        if let Entry::Raw(Expr { kind: ExprKind::String(s), span }) = f.entry
            && s == word
        {
            return Ok(Some(Spanned::new(None, *span)));
        }
        address_of(cx, name, kind, f.entry).map(|a| Some(a.map(Some)))
    }

    /// A list of references (`depends_on`, `pools`). `kind = None` accepts any kind.
    pub fn try_address_list(
        &mut self,
        cx: &mut Cx<'_, '_>,
        name: &str,
        kind: Option<Kind>,
    ) -> Got<Vec<Spanned<Address>>> {
        let Some(f) = self.take(name) else { return Ok(None) };
        let items: Vec<Entry<'r>> = match f.entry {
            Entry::Raw(Expr { kind: ExprKind::Array(items), .. }) => items.iter().map(Entry::Raw).collect(),
            Entry::Raw(e) => match cx.eval(e)? {
                Value::List(l) => l.into_iter().map(|v| Entry::Val(v, e.span)).collect(),
                other => return Err(cx.error(type_error(name, "a list of references", &other, e.span))),
            },
            Entry::Val(Value::List(l), s) => l.into_iter().map(|v| Entry::Val(v, s)).collect(),
            Entry::Val(other, s) => return Err(cx.error(type_error(name, "a list of references", &other, s))),
        };
        let span = f.key_span;
        let mut out = Vec::new();
        let mut failed = false;
        for item in items {
            let r = match kind {
                Some(k) => address_of(cx, name, k, item),
                None => any_address_of(cx, name, item),
            };
            match r {
                Ok(a) => out.push(a),
                Err(_) => failed = true,
            }
        }
        if failed { Err(Reported) } else { Ok(Some(Spanned::new(out, span))) }
    }

    /// Report attributes and blocks nobody asked for, suggesting known names.
    pub fn finish(self, cx: &mut Cx<'_, '_>, known: &[&str]) {
        let (fields_used, blocks_used) = self.used.split_at(self.fields.len());
        for (f, _) in self.fields.iter().zip(fields_used).filter(|(_, used)| !**used) {
            cx.error(unknown_attr(&self.what.to_string(), &f.key, f.key_span, known));
        }
        for (b, _) in self.blocks.iter().zip(blocks_used).filter(|(_, used)| !**used) {
            cx.error(unknown_attr(&self.what.to_string(), &b.kind.name, b.kind.span, known));
        }
    }
}

/// An HCL example value in YAML spelling: `{ min = 0 }` → `{min: 0}`, `"sim"` → `sim`.
fn yaml_example(hcl: &str) -> String {
    let s = hcl.replace(" = ", ": ").replace("{ ", "{").replace(" }", "}");
    match s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) if !inner.contains([':', '#', '"']) => inner.to_string(),
        _ => s,
    }
}

pub fn unknown_attr(what: &str, key: &str, span: Span, known: &[&str]) -> Diagnostic {
    let d = Diagnostic::error("gpuplan::spec::unknown_attribute", format!("unknown attribute `{key}` in {what}"))
        .at(span, "not a known attribute");
    match did_you_mean(key, known.iter().copied()) {
        Some(s) => d.help(format!("did you mean `{s}`?")),
        None => d.help(format!("known attributes: {}", known.join(", "))),
    }
}

pub fn range_error(name: &str, value: &str, min: &str, max: &str, span: Span) -> Diagnostic {
    Diagnostic::error("gpuplan::spec::range", format!("`{name}` must be between {min} and {max}, found {value}"))
        .at(span, format!("out of range {min}..{max}"))
}

pub fn enum_error<'a>(
    name: &str,
    value: &str,
    variants: impl Iterator<Item = &'a str> + Clone,
    span: Span,
) -> Diagnostic {
    let list: Vec<&str> = variants.clone().collect();
    let d = Diagnostic::error(
        "gpuplan::spec::enum",
        format!("`{name}` must be one of {}, found {value:?}", list.join(" | ")),
    )
    .at(span, "not an allowed value");
    match did_you_mean(value, variants) {
        Some(s) => d.help(format!("did you mean \"{s}\"?")),
        None => d.help(format!("use one of: {}", list.join(", "))),
    }
}

/// Parse `[0]` / `["a"]` written after a reference.
fn key_from_step(step: &Step) -> Option<crate::addr::InstanceKey> {
    use crate::addr::InstanceKey;
    match step {
        Step::Index(Expr { kind: ExprKind::Number(n), .. }) if n.fract() == 0.0 && *n >= 0.0 => {
            Some(InstanceKey::Int(*n as u64))
        }
        Step::Index(Expr { kind: ExprKind::String(s), .. }) => Some(InstanceKey::Str(s.clone())),
        _ => None,
    }
}

fn check_declared(cx: &mut Cx<'_, '_>, addr: Address, span: Span) -> Result<Spanned<Address>, Reported> {
    let names = cx.declared.get(&addr.kind);
    if names.is_some_and(|n| n.contains(&addr.name)) {
        return Ok(Spanned::new(addr, span));
    }
    let candidates: Vec<&str> = names.map(|n| n.iter().map(String::as_str).collect()).unwrap_or_default();
    let d = match crate::spec::eval::undeclared(addr.kind.as_str(), &addr.name, span, candidates.into_iter()) {
        EvalError::Diag(d) => *d,
        EvalError::Poisoned => return Err(Reported),
    };
    Err(cx.error(d))
}

/// `KIND.NAME` (or `KIND.NAME[KEY]`) written as a reference: its kind, name and the steps
/// after the kind. An address-valued attribute resolves such a reference from the syntax
/// and never evaluates it ([`address_of`]); decoding relies on that (`order::references`).
pub(crate) fn named_reference(e: &Expr) -> Option<(Kind, &Ident, &[Step])> {
    let ExprKind::Traversal { root, steps } = &e.kind else { return None };
    let kind = Kind::parse(&root.name)?;
    let Some(Step::Attr(id)) = steps.first() else { return None };
    Some((kind, id, steps))
}

fn address_of(cx: &mut Cx<'_, '_>, name: &str, kind: Kind, entry: Entry<'_>) -> Result<Spanned<Address>, Reported> {
    if let Entry::Raw(e @ Expr { span, .. }) = entry
        && let Some((k, id, steps)) = named_reference(e)
    {
        if k != kind {
            return Err(cx.error(
                Diagnostic::error(
                    "gpuplan::spec::reference_kind",
                    format!("`{name}` must refer to a {kind}, not a {k}"),
                )
                .at(*span, format!("this is a {k}"))
                .help(format!("write `{name} = {kind}.NAME`")),
            ));
        }
        let mut addr = Address::new(k, id.name.clone());
        if let Some(key) = steps.get(1).and_then(key_from_step) {
            addr.key = Some(key);
        }
        return check_declared(cx, addr, *span);
    }
    let (v, span) = match entry {
        Entry::Raw(e) => (cx.eval(e)?, e.span),
        Entry::Val(v, s) => (v, s),
    };
    let Value::String(s) = v else {
        return Err(cx.error(type_error(name, &format!("a reference to a {kind} (e.g. `{kind}.NAME`)"), &v, span)));
    };
    let addr = if s.contains('.') {
        match s.parse::<Address>() {
            Ok(a) if a.kind == kind => a,
            Ok(a) => {
                return Err(cx.error(
                    Diagnostic::error(
                        "gpuplan::spec::reference_kind",
                        format!("`{name}` must refer to a {kind}, not a {}", a.kind),
                    )
                    .at(span, format!("this is a {}", a.kind)),
                ));
            }
            Err(e) => {
                return Err(
                    cx.error(Diagnostic::error("gpuplan::spec::address", e.to_string()).at(span, "not an address"))
                );
            }
        }
    } else if crate::addr::is_ident(&s) {
        Address::new(kind, s)
    } else {
        return Err(cx.error(
            Diagnostic::error("gpuplan::spec::address", format!("`{name}` must name a {kind}, found {s:?}"))
                .at(span, "not a name")
                .help(format!("write `{kind}.NAME` or just the name")),
        ));
    };
    check_declared(cx, addr, span)
}

fn any_address_of(cx: &mut Cx<'_, '_>, name: &str, entry: Entry<'_>) -> Result<Spanned<Address>, Reported> {
    if let Entry::Raw(Expr { kind: ExprKind::Traversal { root, .. }, .. }) = &entry
        && let Some(k) = Kind::parse(&root.name)
    {
        return address_of(cx, name, k, entry);
    }
    let (v, span) = match entry {
        Entry::Raw(e) => (cx.eval(e)?, e.span),
        Entry::Val(v, s) => (v, s),
    };
    match v.as_str().map(str::parse::<Address>) {
        Some(Ok(a)) => check_declared(cx, a, span),
        Some(Err(e)) => Err(cx.error(
            Diagnostic::error("gpuplan::spec::address", e.to_string())
                .at(span, "not an address")
                .help("write references like `gpu_pool.train`"),
        )),
        None => Err(cx.error(type_error(name, "a reference such as `gpu_pool.train`", &v, span))),
    }
}

macro_rules! flagging {
    ($($name:ident => $inner:ident ( $($arg:ident : $ty:ty),* ) -> $t:ty;)*) => {
        impl<'r> Fields<'r> {
            $(
                pub fn $name(&mut self, cx: &mut Cx<'_, '_>, $($arg: $ty),*) -> Option<Spanned<$t>> {
                    let r = self.$inner(cx, $($arg),*);
                    self.flag(r)
                }
            )*
        }
    };
}

flagging! {
    value => try_value(name: &str) -> Value;
    string => try_string(name: &str) -> String;
    number => try_number(name: &str, min: f64, max: f64) -> f64;
    uint => try_uint(name: &str, min: u64, max: u64) -> u64;
    u32 => try_u32(name: &str, min: u32, max: u32) -> u32;
    bool => try_bool(name: &str) -> bool;
    duration => try_duration(name: &str) -> Duration;
    string_list => try_string_list(name: &str) -> Vec<Spanned<String>>;
    string_map => try_string_map(name: &str) -> BTreeMap<String, Spanned<String>>;
    address => try_address(name: &str, kind: Kind) -> Address;
    address_list => try_address_list(name: &str, kind: Option<Kind>) -> Vec<Spanned<Address>>;
}

impl<'r> Fields<'r> {
    pub fn enumeration<T: Copy>(
        &mut self,
        cx: &mut Cx<'_, '_>,
        name: &str,
        variants: &[(&str, T)],
    ) -> Option<Spanned<T>> {
        let r = self.try_enumeration(cx, name, variants);
        self.flag(r)
    }

    /// A nested block; `None` when absent or broken (then `failed` is set).
    pub fn nested(&mut self, cx: &mut Cx<'_, '_>, name: &'static str) -> Option<Fields<'r>> {
        let r = self.block(cx, name);
        self.flag(r)
    }

    /// Mark this block failed when a nested decoder failed.
    pub fn check<T>(&mut self, r: Result<T, Reported>) -> Option<T> {
        self.flag(r.map(Some))
    }
}
