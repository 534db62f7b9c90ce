//! saphyr-parser events → a syntax tree with byte positions.
//!
//! This is the only file that talks to saphyr-parser. The tree keeps what both the
//! parser and the formatter need: scalar text and style, tags, anchors, aliases (not yet
//! expanded), whether a collection was written in flow style, and byte offsets. Syntax
//! errors, a second document and nesting deeper than [`MAX_DEPTH`] are reported here.
//! The tree is built with an explicit stack, never by recursion over the input.

use std::collections::HashSet;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Tag};

use super::text::{find_block_header, quoted_end, trim_end};
pub(super) use super::text::{skip_blank, skip_props};
use crate::diag::{Diagnostic, Diagnostics, Span};

/// Deepest nesting of collections accepted (keeps every later recursion shallow).
pub(super) const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Node {
    pub kind: NodeKind,
    /// Byte offset of the node's first character, properties (`&a`, `!!str`) included.
    pub start: usize,
    /// Byte offset where the content begins, after properties: the opening quote, the
    /// `|`/`>` header of a block scalar, the `{`/`[`, the first key or the first `-`.
    pub body: usize,
    /// Byte offset just past the content (trailing blank lines of block scalars excluded).
    pub end: usize,
    /// Anchor id as numbered by saphyr-parser (0: none).
    pub anchor: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum NodeKind {
    Scalar(Scalar),
    /// `flow`: written with braces (`{a: 1}`), not as indented lines.
    Mapping {
        entries: Vec<(Node, Node)>,
        flow: bool,
    },
    Sequence {
        items: Vec<Node>,
        flow: bool,
    },
    /// `*name`, pointing at the anchor id of an earlier node.
    Alias(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Scalar {
    pub value: String,
    pub style: ScalarStyle,
    /// Resolved tag, e.g. `tag:yaml.org,2002:str` for `!!str`.
    pub tag: Option<String>,
    /// For block scalars, the end of the token including trailing blank lines (which are
    /// content under `|+`); equal to the node end otherwise.
    pub raw_end: usize,
}

pub(super) const TAG_STR: &str = "tag:yaml.org,2002:str";

impl Node {
    pub fn scalar(&self) -> Option<&Scalar> {
        match &self.kind {
            NodeKind::Scalar(s) => Some(s),
            _ => None,
        }
    }
    /// An empty plain scalar without properties: `key:` with nothing after it.
    pub fn is_empty_null(&self) -> bool {
        matches!(&self.kind, NodeKind::Scalar(s) if s.value.is_empty() && s.style == ScalarStyle::Plain && s.tag.is_none())
            && self.anchor == 0
    }
    pub fn span(&self, file: u32) -> Span {
        Span::new(file, self.body, self.end)
    }
}

/// The code of the error for a second document (the foreign-file check reads its span).
pub(super) const MULTIPLE_DOCUMENTS: &str = "gpuplan::yaml::multiple_documents";

/// The parsed stream: at most one document.
#[derive(Debug)]
pub(super) struct Document {
    /// `None` for a stream without any document (empty, or only comments).
    pub root: Option<Node>,
    /// Byte range of an explicit `---` starting the document.
    pub start_marker: Option<(usize, usize)>,
}

/// Converts saphyr's character indexes into byte offsets.
pub(super) struct Offsets {
    /// Byte offset of each char index; `None` when the text is ASCII (identity).
    table: Option<Vec<usize>>,
    len: usize,
}

impl Offsets {
    pub fn new(text: &str) -> Self {
        let table = (!text.is_ascii()).then(|| text.char_indices().map(|(b, _)| b).collect());
        Offsets { table, len: text.len() }
    }
    pub fn byte(&self, char_index: usize) -> usize {
        match &self.table {
            None => char_index.min(self.len),
            Some(t) => t.get(char_index).copied().unwrap_or(self.len),
        }
    }
}

/// A collection being filled.
struct Frame {
    start: usize,
    body: usize,
    anchor: usize,
    flow: bool,
    mapping: bool,
    items: Vec<Node>,
}

struct Builder<'t> {
    file: u32,
    text: &'t str,
    stack: Vec<Frame>,
    root: Option<Node>,
    /// Anchors whose node is complete; an alias to any other is recursive.
    complete: HashSet<usize>,
    /// Byte end of the previous event (block scalar headers sit between it and the content).
    last_end: usize,
}

/// Parse `text` into a syntax tree. Returns `None` after pushing a diagnostic when the
/// text is not one well-formed YAML document of acceptable depth.
pub(super) fn build(file: u32, text: &str, diags: &mut Diagnostics) -> Option<Document> {
    let offsets = Offsets::new(text);
    let mut b = Builder { file, text, stack: Vec::new(), root: None, complete: HashSet::new(), last_end: 0 };
    let mut start_marker = None;
    let mut documents = 0;
    for event in Parser::new_from_str(text) {
        let (event, span) = match event {
            Ok(ok) => ok,
            Err(e) => {
                diags.push(syntax_error(file, text, &offsets, &e));
                return None;
            }
        };
        let s = offsets.byte(span.start.index());
        // Quoted scalars and flow brackets may be reported with the blanks after them.
        let raw_e = offsets.byte(span.end.index()).max(s);
        let e = s + text[s..raw_e].trim_end().len();
        // An implicit document start is reported with the span of the first node; only a
        // real `---` precedes the content (and a block scalar header searched after it).
        let advance = !matches!(event, Event::DocumentStart(false) | Event::StreamStart);
        let result = match event {
            Event::DocumentStart(explicit) => {
                documents += 1;
                if documents > 1 {
                    diags.push(
                        Diagnostic::error(MULTIPLE_DOCUMENTS, "a spec file must hold one YAML document")
                            .at(Span::new(file, s, e), "a second document starts here")
                            .help("split the documents into separate files, or remove this `---` line"),
                    );
                    return None;
                }
                if explicit {
                    start_marker = Some((s, e));
                }
                Ok(())
            }
            Event::Scalar(value, style, anchor, tag) => {
                b.scalar(value.into_owned(), style, anchor, tag.as_deref(), s, raw_e)
            }
            Event::Alias(id) => b.alias(id, s, e),
            Event::MappingStart(anchor, tag) => b.open(true, anchor, tag.is_some(), s, e),
            Event::SequenceStart(anchor, tag) => b.open(false, anchor, tag.is_some(), s, e),
            Event::MappingEnd | Event::SequenceEnd => b.close(s, e),
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => Ok(()),
        };
        if let Err(d) = result {
            diags.push(d);
            return None;
        }
        if advance {
            b.last_end = b.last_end.max(e);
        }
    }
    Some(Document { root: b.root, start_marker })
}

impl Builder<'_> {
    fn scalar(
        &mut self,
        value: String,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<&Tag>,
        s: usize,
        raw_e: usize,
    ) -> Result<(), Diagnostic> {
        // Trailing blanks end a block scalar's content; elsewhere they are noise.
        let block = matches!(style, ScalarStyle::Literal | ScalarStyle::Folded);
        let e = if block { raw_e } else { s + self.text[s..raw_e].trim_end().len() };
        let has_props = anchor != 0 || tag.is_some();
        let props_end = if has_props { skip_props(self.text, s) } else { s };
        let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
        let node = match style {
            ScalarStyle::Literal | ScalarStyle::Folded => {
                // saphyr's span starts at the content; the `|`/`>` header lies before it.
                let from = if has_props { props_end } else { self.last_end };
                let found = find_block_header(self.text, from, s);
                let header = found.unwrap_or(s);
                let end = trim_end(self.text, found.map_or(s, |h| h + 1), e);
                let start = if has_props { s } else { header };
                let kind = NodeKind::Scalar(Scalar { value, style, tag, raw_end: e.max(end) });
                Node { kind, start, body: header, end, anchor }
            }
            _ if value.is_empty() && style == ScalarStyle::Plain && !has_props => {
                // An empty value is reported with the span of a neighbouring token (often
                // the `:`); make it a zero-width span just after that indicator.
                let at = if matches!(self.text.get(s..e), Some(":" | "-" | "?")) { e } else { s };
                let kind = NodeKind::Scalar(Scalar { value, style, tag, raw_end: at });
                Node { kind, start: at, body: at, end: at, anchor }
            }
            _ => {
                let body = if has_props { skip_blank(self.text, props_end).min(e) } else { s };
                // saphyr's span of a quoted scalar runs on over blanks and a comment.
                let end = match style {
                    ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => quoted_end(self.text, body, e),
                    _ => e,
                };
                let kind = NodeKind::Scalar(Scalar { value, style, tag, raw_end: end });
                Node { kind, start: s, body, end: end.max(body), anchor }
            }
        };
        self.attach(node)
    }

    fn alias(&mut self, id: usize, s: usize, e: usize) -> Result<(), Diagnostic> {
        if !self.complete.contains(&id) {
            return Err(Diagnostic::error(
                "gpuplan::yaml::recursive_alias",
                "an alias refers to the node that contains it",
            )
            .at(Span::new(self.file, s, e), "this alias is inside its own anchor")
            .help("a value cannot include itself; copy the parts you need instead"));
        }
        self.attach(Node { kind: NodeKind::Alias(id), start: s, body: s, end: e, anchor: 0 })
    }

    fn open(&mut self, mapping: bool, anchor: usize, tagged: bool, s: usize, e: usize) -> Result<(), Diagnostic> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(too_deep(self.file, s, e));
        }
        let opener = if mapping { '{' } else { '[' };
        let has_props = anchor != 0 || tagged;
        let first = skip_blank(self.text, if has_props { skip_props(self.text, s) } else { s });
        // A block collection's event ends where its first entry starts; a flow one's
        // covers the bracket.
        let flow = e > first && self.text[first..].starts_with(opener);
        let body = if flow {
            first
        } else {
            let mut body = first;
            // An indentless sequence (`key:\n- a`) is reported at its first item, after the dash.
            if !mapping && !self.text[body..].starts_with('-') {
                let before = self.text[..body].trim_end_matches([' ', '\t']);
                if before.ends_with('-') {
                    body = before.len() - 1;
                }
            }
            body
        };
        let start = if has_props { s } else { body };
        self.stack.push(Frame { start, body, anchor, flow, mapping, items: Vec::new() });
        Ok(())
    }

    fn close(&mut self, s: usize, e: usize) -> Result<(), Diagnostic> {
        let Some(frame) = self.stack.pop() else {
            return Ok(());
        };
        // saphyr's span of a closing bracket runs on over blanks and a comment.
        let bracket = if self.text[s..].starts_with(['}', ']']) { s + 1 } else { e };
        let end = if frame.flow { bracket } else { frame.items.iter().map(|n| n.end).max().unwrap_or(frame.body) };
        let kind = if frame.mapping {
            let mut entries = Vec::with_capacity(frame.items.len() / 2);
            let mut items = frame.items.into_iter();
            while let (Some(k), Some(v)) = (items.next(), items.next()) {
                entries.push((k, v));
            }
            NodeKind::Mapping { entries, flow: frame.flow }
        } else {
            NodeKind::Sequence { items: frame.items, flow: frame.flow }
        };
        self.attach(Node { kind, start: frame.start, body: frame.body, end: end.max(frame.body), anchor: frame.anchor })
    }

    fn attach(&mut self, node: Node) -> Result<(), Diagnostic> {
        if node.anchor != 0 {
            self.complete.insert(node.anchor);
        }
        match self.stack.last_mut() {
            Some(frame) => frame.items.push(node),
            None => self.root = Some(node),
        }
        Ok(())
    }
}

pub(super) fn too_deep(file: u32, s: usize, e: usize) -> Diagnostic {
    Diagnostic::error("gpuplan::yaml::too_deep", format!("YAML nesting is deeper than {MAX_DEPTH} levels"))
        .at(Span::new(file, s, e), "too deeply nested")
        .help("flatten this structure; a gpuplan spec never needs this much nesting")
}

/// One `gpuplan::syntax` diagnostic for a saphyr-parser error, with a hint by cause.
fn syntax_error(file: u32, text: &str, offsets: &Offsets, e: &ScanError) -> Diagnostic {
    let info = e.info();
    let mut at = offsets.byte(e.marker().index());
    let at_end = text[at..].trim().is_empty();
    // "unprintable" contains "tab" too: test it first.
    let (label, help) = if info.contains("unprintable") {
        (
            "control character here",
            "spec files must be plain text: remove the control character (NUL, escape, ...), or write it as an escape in a double-quoted string",
        )
    } else if at_end && info.contains("did not find expected") {
        // Pointing past the end shows nothing; point at the last thing written instead.
        at = text.trim_end().len().saturating_sub(1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        (
            "the file ends before this is complete",
            "close the `[...]`, `{...}` or quoted string that is still open, or give the last key a value",
        )
    } else if info.contains("tab") {
        // Point at the offending tab rather than at the text after it.
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        if let Some(i) = text[line_start..at].find('\t') {
            at = line_start + i;
        } else if let Some(i) = text[at..].find('\t') {
            at += i;
        }
        ("tab character here", "YAML indentation must use spaces; replace the tabs with spaces")
    } else if info.contains("quoted scalar") {
        ("this quoted string is not closed", "add the missing closing quote")
    } else if info.contains("flow sequence") || info.contains("flow mapping") {
        ("expected `,` or the closing bracket", "close the `[...]` or `{...}` and separate its items with `,`")
    } else if info.contains("unknown anchor") {
        ("no anchor with this name", "define the anchor with `&name` before using `*name`")
    } else if info.contains("mapping values are not allowed") {
        ("unexpected `:` here", "check the indentation of this line, or quote a value that contains `: `")
    } else if info.contains("did not find expected") || info.contains("indent") || info.contains("block") {
        (
            "unexpected indentation or content",
            "keys of one mapping must start in the same column; indent nested values by 2 spaces",
        )
    } else {
        ("here", "check the YAML syntax near this location")
    };
    let width = text[at..].chars().next().map_or(0, char::len_utf8);
    Diagnostic::error("gpuplan::syntax", format!("invalid YAML syntax: {info}"))
        .at(Span::new(file, at, at + width), label)
        .help(help)
}
