//! Source files, spans and diagnostics.
//!
//! Every value read from a spec keeps a [`Span`]: a file id plus a byte range. Problems
//! are collected as [`Diagnostic`]s in a [`Diagnostics`] sink so that one run reports every
//! problem, then rendered either through miette (file:line:col, the source line, a label,
//! a hint) or as JSON for editors and CI. This module does no I/O.

use std::collections::HashSet;
use std::fmt::Write as _;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan};
use serde::Serialize;

/// A byte range in one source file. `file` indexes [`Sources`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub file: u32,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: u32, start: usize, end: usize) -> Self {
        let clamp = |n: usize| n.min(u32::MAX as usize) as u32;
        Span { file, start: clamp(start), end: clamp(end.max(start)) }
    }
    /// The smallest span covering both (same file assumed).
    pub fn join(self, other: Span) -> Span {
        if self.file != other.file {
            return self;
        }
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }
    /// A span shifted by `offset` bytes (for text parsed out of a larger file).
    pub fn offset(self, offset: usize) -> Span {
        Span::new(self.file, self.start as usize + offset, self.end as usize + offset)
    }
}

/// One loaded spec file.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as shown to users (relative to the working directory when possible).
    pub name: String,
    pub text: String,
}

/// All source files of one run; spans index into it.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    files: Vec<SourceFile>,
}

impl Sources {
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> u32 {
        self.files.push(SourceFile { name: name.into(), text: text.into() });
        (self.files.len() - 1) as u32
    }
    pub fn get(&self, file: u32) -> Option<&SourceFile> {
        self.files.get(file as usize)
    }
    pub fn files(&self) -> impl Iterator<Item = (u32, &SourceFile)> {
        self.files.iter().enumerate().map(|(i, f)| (i as u32, f))
    }
    pub fn text(&self, span: Span) -> &str {
        self.get(span.file).and_then(|f| f.text.get(span.start as usize..span.end as usize)).unwrap_or("")
    }
    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, file: u32, offset: u32) -> (usize, usize) {
        let Some(f) = self.get(file) else {
            return (0, 0);
        };
        let mut off = (offset as usize).min(f.text.len());
        while !f.text.is_char_boundary(off) {
            off -= 1;
        }
        let before = &f.text[..off];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let col = f.text[line_start..off].chars().count() + 1;
        (line, col)
    }
    /// `path:line:col` of the start of a span.
    pub fn location(&self, span: Span) -> String {
        let (l, c) = self.line_col(span.file, span.start);
        let name = self.get(span.file).map(|f| f.name.as_str()).unwrap_or("?");
        format!("{name}:{l}:{c}")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem, with a primary location, optional secondary labels and a hint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable machine-readable code, e.g. `gpuplan::spec::unknown_attribute`.
    pub code: &'static str,
    pub message: String,
    /// Labelled spans; the first is the primary location.
    pub labels: Vec<(Span, String)>,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Error, code, message: message.into(), labels: vec![], help: None }
    }
    pub fn warning(code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(code, message) }
    }
    /// Add a labelled span (the first one added is the primary location).
    pub fn at(mut self, span: Span, label: impl Into<String>) -> Self {
        self.labels.push((span, label.into()));
        self
    }
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
    pub fn primary(&self) -> Option<Span> {
        self.labels.first().map(|(s, _)| *s)
    }
}

/// A sink for diagnostics; passes continue after errors so one run reports everything.
#[derive(Debug, Default, Clone)]
pub struct Diagnostics {
    pub items: Vec<Diagnostic>,
    /// What `push` added, so that deduplicating is O(1) per push rather than a scan of
    /// every earlier item (quadratic for a spec with many problems). If `items` was
    /// shortened by hand, a repeat is confirmed against `items` before it is dropped.
    seen: HashSet<Diagnostic>,
}

impl Diagnostics {
    /// Add `d` unless an equal diagnostic is already there.
    pub fn push(&mut self, d: Diagnostic) {
        if self.seen.contains(&d) && (self.items.len() >= self.seen.len() || self.items.contains(&d)) {
            return;
        }
        self.seen.insert(d.clone());
        self.items.push(d);
    }
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(|d| d.severity == Severity::Error)
    }
    pub fn error_count(&self) -> usize {
        self.items.iter().filter(|d| d.severity == Severity::Error).count()
    }
    pub fn extend(&mut self, other: Diagnostics) {
        for d in other.items {
            self.push(d);
        }
    }
    /// Sort by file, then position, for stable output.
    pub fn sort(&mut self) {
        self.items.sort_by_key(|d| d.primary().map(|s| (s.file, s.start, s.end)).unwrap_or((u32::MAX, 0, 0)));
    }
}

/// A miette view of one diagnostic restricted to the labels in one file.
#[derive(Debug)]
struct MietteView {
    message: String,
    /// `None` for related views: the code is already in the main header.
    code: Option<&'static str>,
    severity: miette::Severity,
    help: Option<String>,
    src: NamedSource<String>,
    labels: Vec<LabeledSpan>,
    related: Vec<MietteView>,
}

impl std::fmt::Display for MietteView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for MietteView {}
impl miette::Diagnostic for MietteView {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.code.map(|c| Box::new(c) as Box<dyn std::fmt::Display>)
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(self.severity)
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn std::fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.src)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        if self.related.is_empty() {
            None
        } else {
            Some(Box::new(self.related.iter().map(|r| r as &dyn miette::Diagnostic)))
        }
    }
}

fn miette_view(sources: &Sources, d: &Diagnostic) -> MietteView {
    let severity = match d.severity {
        Severity::Error => miette::Severity::Error,
        Severity::Warning => miette::Severity::Warning,
    };
    // Group labels by file: the primary file carries the diagnostic, others become
    // related entries so a cycle across files still labels every member.
    let mut files: Vec<u32> = Vec::new();
    for (s, _) in &d.labels {
        if !files.contains(&s.file) {
            files.push(s.file);
        }
    }
    let view_for = |file: Option<u32>, message: String, help: Option<String>, code: Option<&'static str>| {
        let (name, raw) = match file.and_then(|f| sources.get(f)) {
            Some(sf) => (sf.name.clone(), sf.text.as_str()),
            None => (String::new(), ""),
        };
        let (text, shifts) = visible(raw);
        let labels = d
            .labels
            .iter()
            .filter(|(s, _)| Some(s.file) == file)
            .map(|(s, l)| {
                let start = shifted(&shifts, (s.start as usize).min(raw.len()));
                let len = shifted(&shifts, (s.end as usize).min(raw.len())).saturating_sub(start);
                LabeledSpan::new_with_span(Some(l.clone()), SourceSpan::new(start.into(), len))
            })
            .collect();
        MietteView { message, code, severity, help, src: NamedSource::new(name, text), labels, related: vec![] }
    };
    let mut main = view_for(files.first().copied(), d.message.clone(), d.help.clone(), Some(d.code));
    for f in files.iter().skip(1) {
        let name = sources.get(*f).map(|s| s.name.as_str()).unwrap_or("?");
        main.related.push(view_for(Some(*f), format!("continued in `{name}`"), None, None));
    }
    main
}

/// `text` with control characters (other than line breaks and tabs) replaced by visible
/// symbols (NUL → `␀`), so rendering never writes raw control bytes to a terminal. Also
/// returns, per replacement, its original byte offset and how many bytes it added.
fn visible(text: &str) -> (String, Vec<(usize, usize)>) {
    let hidden = |c: char| c.is_control() && !matches!(c, '\n' | '\r' | '\t');
    if !text.chars().any(hidden) {
        return (text.to_string(), Vec::new());
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut shifts = Vec::new();
    for (i, c) in text.char_indices() {
        if hidden(c) {
            let shown = match c as u32 {
                n @ 0..=0x1f => char::from_u32(0x2400 + n).unwrap_or('\u{fffd}'),
                0x7f => '\u{2421}',
                _ => '\u{fffd}',
            };
            out.push(shown);
            shifts.push((i, shown.len_utf8() - c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    (out, shifts)
}

/// An original byte offset mapped into the text [`visible`] returned.
fn shifted(shifts: &[(usize, usize)], offset: usize) -> usize {
    offset + shifts.iter().take_while(|(at, _)| *at < offset).map(|(_, n)| n).sum::<usize>()
}

/// Render diagnostics for a terminal (or, with `color = false`, for logs and snapshots).
pub fn render_text(sources: &Sources, diags: &[Diagnostic], width: usize, color: bool) -> String {
    let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    let handler =
        GraphicalReportHandler::new_themed(theme).with_width(width).with_links(false).with_show_related_as_nested(true);
    let mut out = String::new();
    for d in diags {
        let view = miette_view(sources, d);
        let mut s = String::new();
        if handler.render_report(&mut s, &view).is_err() {
            let _ = writeln!(s, "{}: {}", d.code, d.message);
        }
        out.push_str(&s);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// One diagnostic as JSON for editors and CI.
#[derive(Debug, Serialize)]
pub struct JsonDiagnostic {
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
    pub file: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub end_line: Option<usize>,
    pub end_column: Option<usize>,
    pub label: Option<String>,
    pub help: Option<String>,
    pub related: Vec<JsonLocation>,
}

#[derive(Debug, Serialize)]
pub struct JsonLocation {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub label: String,
}

pub fn to_json(sources: &Sources, diags: &[Diagnostic]) -> serde_json::Value {
    let items: Vec<JsonDiagnostic> = diags
        .iter()
        .map(|d| {
            let primary = d.labels.first();
            let name = |s: &Span| sources.get(s.file).map(|f| f.name.clone());
            let (line, column) = primary.map(|(s, _)| sources.line_col(s.file, s.start)).unzip();
            let (end_line, end_column) = primary.map(|(s, _)| sources.line_col(s.file, s.end)).unzip();
            JsonDiagnostic {
                severity: d.severity,
                code: d.code,
                message: d.message.clone(),
                file: primary.and_then(|(s, _)| name(s)),
                line,
                column,
                end_line,
                end_column,
                label: primary.map(|(_, l)| l.clone()),
                help: d.help.clone(),
                related: d
                    .labels
                    .iter()
                    .skip(1)
                    .map(|(s, l)| {
                        let (line, column) = sources.line_col(s.file, s.start);
                        JsonLocation { file: name(s).unwrap_or_default(), line, column, label: l.clone() }
                    })
                    .collect(),
            }
        })
        .collect();
    let errors = diags.iter().filter(|d| d.severity == Severity::Error).count();
    let warnings = diags.len() - errors;
    serde_json::json!({ "format_version": "1", "valid": errors == 0, "error_count": errors, "warning_count": warnings, "diagnostics": items })
}

/// Closest candidate by edit distance, for "did you mean" hints. Jaro-Winkler first; for
/// short words, where it misses a swap (`dve` for `dev` scores 0.56), one typo apart
/// (one edit or one swap of neighbours, two for words of six letters or more).
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lw = word.to_ascii_lowercase();
    let candidates: Vec<&str> = candidates.into_iter().collect();
    let similar = candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(&lw, &c.to_ascii_lowercase()), *c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c);
    let letters = lw.chars().count();
    let typos = match letters {
        0..3 => return similar,
        3..6 => 1,
        _ => 2,
    };
    similar.or_else(|| {
        candidates
            .iter()
            .map(|c| (strsim::osa_distance(&lw, &c.to_ascii_lowercase()), *c))
            .filter(|(d, _)| *d <= typos)
            .min_by_key(|(d, _)| *d)
            .map(|(_, c)| c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(code: &'static str, message: &str, at: u32) -> Diagnostic {
        Diagnostic::error(code, message).at(Span::new(0, at as usize, at as usize + 1), "here")
    }

    #[test]
    fn did_you_mean_catches_a_swap_in_a_short_word() {
        assert_eq!(did_you_mean("dve", ["default", "dev"]), Some("dev"));
        assert_eq!(did_you_mean("prdo", ["default", "prod", "staging"]), Some("prod"));
        assert_eq!(did_you_mean("stagign", ["default", "staging"]), Some("staging"));
        assert_eq!(did_you_mean("xyz", ["default", "dev"]), None);
        assert_eq!(did_you_mean("ab", ["cb"]), None, "two letters are too few to guess from");
    }

    #[test]
    fn push_drops_exact_duplicates_and_keeps_first_order() {
        let mut diags = Diagnostics::default();
        diags.push(d("gpuplan::a", "one", 1));
        diags.push(d("gpuplan::b", "two", 2));
        diags.push(d("gpuplan::a", "one", 1));
        // Differs only in the label, the span, the help or the severity: all kept.
        diags.push(d("gpuplan::a", "one", 3));
        diags.push(Diagnostic::error("gpuplan::a", "one").at(Span::new(0, 1, 2), "elsewhere"));
        diags.push(d("gpuplan::a", "one", 1).help("try this"));
        diags.push(Diagnostic::warning("gpuplan::a", "one").at(Span::new(0, 1, 2), "here"));
        diags.push(d("gpuplan::b", "two", 2));
        let codes: Vec<(&str, &str, Option<Span>)> =
            diags.items.iter().map(|d| (d.code, d.message.as_str(), d.primary())).collect();
        assert_eq!(diags.items.len(), 6, "{codes:?}");
        assert_eq!(diags.items[0], d("gpuplan::a", "one", 1));
        assert_eq!(diags.items[1], d("gpuplan::b", "two", 2));
    }

    #[test]
    fn dedup_holds_after_extend_and_after_items_are_removed() {
        let mut a = Diagnostics::default();
        a.push(d("gpuplan::a", "one", 1));
        let mut b = Diagnostics::default();
        b.push(d("gpuplan::a", "one", 1));
        b.push(d("gpuplan::c", "three", 5));
        a.extend(b);
        assert_eq!(a.items.len(), 2);
        // Removing an item by hand must not stop an equal one from being added again.
        a.items.remove(0);
        a.push(d("gpuplan::a", "one", 1));
        assert_eq!(a.items.len(), 2);
        a.sort();
        a.push(d("gpuplan::c", "three", 5));
        assert_eq!(a.items.len(), 2);
    }

    #[test]
    fn many_distinct_diagnostics_are_all_kept() {
        let mut diags = Diagnostics::default();
        for i in 0..50_000 {
            diags.push(d("gpuplan::many", "same message", i));
        }
        for i in 0..50_000 {
            diags.push(d("gpuplan::many", "same message", i));
        }
        assert_eq!(diags.items.len(), 50_000);
    }
}
