//! `gpuplan fmt` for YAML: re-print the syntax tree in canonical layout, keeping
//! comments and every scalar exactly as written.
//!
//! Layout: 2 spaces per mapping level, sequence items `- ` two spaces under their key,
//! `key: value` with one space, flow collections as `{a: 1, b: 2}` / `[a, b]`, at most
//! one blank line in a row, no leading `---`. Comments are re-attached by position: a
//! comment after content stays at the end of that line, a comment on its own line is
//! indented like the line that follows it.
//!
//! Where re-layout could change meaning the text is kept: block scalar content (shifted
//! as a whole), and flow collections that hold comments or multi-line scalars. As a
//! safety net the result is parsed again and must give the same tree as the input.

use saphyr_parser::ScalarStyle;

use super::tree::{self, Node, NodeKind, skip_blank};
use crate::diag::{Diagnostic, Diagnostics, Span};

pub(super) fn format(file: u32, text: &str, diags: &mut Diagnostics) -> Option<String> {
    let doc = tree::build(file, text, diags)?;
    let mut p = Printer::new(text, doc.root.as_ref());
    p.document(&doc);
    let whole = Span::new(file, 0, text.len());
    if let Some(reason) = p.unsupported {
        diags.push(
            Diagnostic::error("gpuplan::yaml::fmt_unsupported", format!("cannot format this file: {reason}"))
                .at(whole, "left unchanged")
                .help("rewrite that part in plain block style (`key: value` lines), then run `gpuplan fmt` again"),
        );
        return None;
    }
    let out = p.finish();
    let again = tree::build(file, &out, &mut Diagnostics::default());
    if !again.is_some_and(|d| same_tree(doc.root.as_ref(), d.root.as_ref())) {
        diags.push(
            Diagnostic::error("gpuplan::yaml::fmt_changed_meaning", "formatting would change what this file means")
                .at(whole, "left unchanged")
                .help("this is a bug in `gpuplan fmt`; please report it with the file"),
        );
        return None;
    }
    Some(out)
}

/// Structural equality ignoring positions; an absent document equals an empty one.
pub(super) fn same_tree(a: Option<&Node>, b: Option<&Node>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_node(a, b),
        (None, None) => true,
        (Some(n), None) | (None, Some(n)) => n.is_empty_null(),
    }
}

fn same_node(a: &Node, b: &Node) -> bool {
    a.anchor == b.anchor
        && match (&a.kind, &b.kind) {
            (NodeKind::Scalar(x), NodeKind::Scalar(y)) => x.value == y.value && x.style == y.style && x.tag == y.tag,
            (NodeKind::Alias(x), NodeKind::Alias(y)) => x == y,
            (NodeKind::Sequence { items: x, flow: f }, NodeKind::Sequence { items: y, flow: g }) => {
                f == g && x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_node(x, y))
            }
            (NodeKind::Mapping { entries: x, flow: f }, NodeKind::Mapping { entries: y, flow: g }) => {
                f == g
                    && x.len() == y.len()
                    && x.iter().zip(y).all(|((xk, xv), (yk, yv))| same_node(xk, yk) && same_node(xv, yv))
            }
            _ => false,
        }
}

struct Comment {
    start: usize,
    /// End of the comment text, trailing whitespace excluded.
    end: usize,
    line: usize,
}

struct Printer<'t> {
    text: &'t str,
    /// Byte offset of each source line's start.
    lines: Vec<usize>,
    comments: Vec<Comment>,
    /// The first comment not printed yet.
    next: usize,
    out: String,
    /// Source line of the last thing printed (for blank lines and trailing comments).
    last_line: Option<usize>,
    cur_line: usize,
    /// The current line ends a block scalar (its trailing blanks are content).
    in_block_scalar: bool,
    unsupported: Option<&'static str>,
}

impl<'t> Printer<'t> {
    fn new(text: &'t str, root: Option<&Node>) -> Self {
        let lines = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        let mut p = Printer {
            text,
            lines,
            comments: vec![],
            next: 0,
            out: String::new(),
            last_line: None,
            cur_line: 0,
            in_block_scalar: false,
            unsupported: None,
        };
        p.comments = p.find_comments(root);
        p
    }

    fn finish(mut self) -> String {
        let trimmed = self.out.trim_end_matches('\n').len();
        self.out.truncate(trimmed);
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.out
    }

    /// `#` starts a comment at a line start or after a blank, outside quoted and block scalars.
    fn find_comments(&self, root: Option<&Node>) -> Vec<Comment> {
        let mut protected = Vec::new();
        if let Some(root) = root {
            collect_scalar_ranges(root, &mut protected);
        }
        protected.sort_unstable();
        let inside = |i: usize| {
            let k = protected.partition_point(|&(s, _)| s <= i);
            k > 0 && protected[k - 1].1 > i
        };
        let bytes = self.text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(found) = self.text[i..].find('#') {
            let at = i + found;
            let line_end = self.text[at..].find('\n').map_or(self.text.len(), |e| at + e);
            let after_blank = at == 0 || matches!(bytes[at - 1], b' ' | b'\t' | b'\n' | b'\r');
            if after_blank && !inside(at) {
                let end = at + self.text[at..line_end].trim_end().len();
                out.push(Comment { start: at, end, line: self.line_of(at) });
                i = line_end;
            } else {
                i = at + 1;
            }
        }
        out
    }

    fn line_of(&self, pos: usize) -> usize {
        self.lines.partition_point(|&s| s <= pos).saturating_sub(1)
    }
    fn line_text(&self, line: usize) -> &'t str {
        let start = self.lines.get(line).copied().unwrap_or(self.text.len());
        let end = self.lines.get(line + 1).map_or(self.text.len(), |e| e - 1);
        self.text.get(start..end.max(start)).unwrap_or("").trim_end_matches('\r')
    }
    /// Column (bytes, which are spaces here) of `pos` in its line.
    fn col(&self, pos: usize) -> usize {
        pos - self.lines[self.line_of(pos)]
    }

    /// One blank line if the source had any between the last printed line and `line`.
    fn gap(&mut self, line: usize) {
        let Some(last) = self.last_line else { return };
        let blank = (last + 1..line).any(|l| self.line_text(l).trim().is_empty());
        if blank && !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    fn flush_comments(&mut self, before: usize, indent: usize) {
        while let Some(c) = self.comments.get(self.next).filter(|c| c.start < before) {
            let (line, text) = (c.line, &self.text[c.start..c.end]);
            self.gap(line);
            self.out.extend(std::iter::repeat_n(' ', indent));
            self.out.push_str(text);
            self.out.push('\n');
            self.last_line = Some(line);
            self.next += 1;
        }
    }

    fn comment_before(&self, pos: usize) -> bool {
        self.comments.get(self.next).is_some_and(|c| c.start < pos)
    }

    /// Start an output line for the source content at `pos`.
    fn open_line(&mut self, pos: usize, indent: usize) {
        self.flush_comments(pos, indent);
        self.gap(self.line_of(pos));
        self.out.extend(std::iter::repeat_n(' ', indent));
        self.cur_line = self.line_of(pos);
    }

    /// End the output line, keeping a comment that followed this content in the source.
    fn close_line(&mut self) {
        if let Some(c) = self.comments.get(self.next).filter(|c| c.line == self.cur_line) {
            self.out.push(' ');
            self.out.push_str(&self.text[c.start..c.end]);
            self.next += 1;
        }
        // Trailing blanks on a block scalar's last line are part of its value.
        if !std::mem::take(&mut self.in_block_scalar) {
            let kept = self.out.trim_end_matches([' ', '\t']).len();
            self.out.truncate(kept);
        }
        self.out.push('\n');
        self.last_line = Some(self.cur_line);
    }

    fn document(&mut self, doc: &tree::Document) {
        if let Some((s, _)) = doc.start_marker {
            // `---` goes unless directives (`%YAML`, `%TAG`) need it.
            let directives: Vec<&str> = self.text[..s].lines().filter(|l| l.starts_with('%')).collect();
            if !directives.is_empty() {
                self.flush_comments(s, 0);
                for d in directives {
                    self.out.push_str(d.trim_end());
                    self.out.push('\n');
                }
                self.out.push_str("---");
                self.cur_line = self.line_of(s);
                self.close_line();
            }
        }
        if let Some(root) = &doc.root {
            match &root.kind {
                NodeKind::Mapping { flow: false, .. } | NodeKind::Sequence { flow: false, .. } => {
                    let props = self.props(root);
                    if !props.is_empty() {
                        self.open_line(root.start, 0);
                        self.out.push_str(&props);
                        self.close_line();
                    }
                    self.block_collection(root, 0, false);
                }
                _ if root.is_empty_null() => {}
                _ => {
                    self.open_line(root.start, 0);
                    self.inline(root, 0, 0);
                    self.close_line();
                }
            }
        }
        self.flush_comments(usize::MAX, 0);
    }

    fn block_collection(&mut self, n: &Node, indent: usize, compact: bool) {
        match &n.kind {
            NodeKind::Mapping { entries, .. } => self.block_mapping(entries, indent, compact),
            NodeKind::Sequence { items, .. } => self.block_sequence(n, items, indent, compact),
            _ => {}
        }
    }

    /// Entries at `indent`; `compact`: the first one continues the current line (`- a: 1`).
    fn block_mapping(&mut self, entries: &[(Node, Node)], indent: usize, compact: bool) {
        for (i, (k, v)) in entries.iter().enumerate() {
            if !(compact && i == 0) {
                self.open_line(k.start, indent);
            }
            let block_key =
                matches!(k.kind, NodeKind::Mapping { flow: false, .. } | NodeKind::Sequence { flow: false, .. });
            if block_key || self.text[k.start..k.end].contains('\n') {
                self.unsupported = Some("a multi-line mapping key (`? ...`)");
                return;
            }
            if !k.is_empty_null() {
                self.inline(k, self.col(k.body), indent);
            }
            // `*a:` would read as an alias named `a:`.
            self.out.push_str(if matches!(k.kind, NodeKind::Alias(_)) { " :" } else { ":" });
            self.value(v, self.col(k.body), indent);
        }
    }

    fn block_sequence(&mut self, seq: &Node, items: &[Node], indent: usize, compact: bool) {
        let mut prev_end = seq.body;
        for (i, item) in items.iter().enumerate() {
            let dash = if i == 0 { seq.body } else { skip_blank(self.text, prev_end) };
            if !(compact && i == 0) {
                self.open_line(dash, indent);
            }
            self.out.push('-');
            self.cur_line = self.line_of(dash);
            let no_props = item.start == item.body;
            let compactable =
                matches!(item.kind, NodeKind::Mapping { flow: false, .. } | NodeKind::Sequence { flow: false, .. });
            if compactable && no_props && !self.comment_before(item.body) {
                self.out.push(' ');
                self.block_collection(item, indent + 2, true);
            } else {
                self.value(item, self.col(dash), indent);
            }
            prev_end = item.end.max(dash + 1);
        }
    }

    /// The value after `key:` or `-` on the current line. `old_col`/`new_col`: where
    /// that key or dash was and now is (block scalar content moves with it).
    fn value(&mut self, v: &Node, old_col: usize, new_col: usize) {
        let child = new_col + 2;
        match &v.kind {
            _ if v.is_empty_null() => self.close_line(),
            NodeKind::Mapping { flow: false, .. } | NodeKind::Sequence { flow: false, .. } => {
                let props = self.props(v);
                if !props.is_empty() {
                    self.out.push(' ');
                    self.out.push_str(&props);
                    self.cur_line = self.line_of(v.start);
                }
                self.close_line();
                self.block_collection(v, child, false);
            }
            _ => {
                if self.comment_before(v.start) {
                    // Keep those comments before the value: move the value to its own line.
                    self.close_line();
                    self.open_line(v.start, child);
                } else {
                    self.out.push(' ');
                }
                self.inline(v, old_col, new_col);
                self.close_line();
            }
        }
    }

    /// A scalar, alias or flow collection at the current position.
    fn inline(&mut self, n: &Node, old_col: usize, new_col: usize) {
        let props = self.props(n);
        if !props.is_empty() {
            self.out.push_str(&props);
            if n.body < n.end {
                self.out.push(' ');
            }
        }
        let child = new_col + 2;
        match &n.kind {
            NodeKind::Scalar(s) if matches!(s.style, ScalarStyle::Literal | ScalarStyle::Folded) => {
                self.block_scalar(n, s.raw_end, old_col, new_col);
            }
            NodeKind::Mapping { .. } | NodeKind::Sequence { .. } if self.can_normalize(n) => {
                let flat = self.flow_body(n);
                self.out.push_str(&flat);
                self.cur_line = self.line_of(n.end.saturating_sub(1).max(n.body));
            }
            _ => {
                // Scalars and flow text kept as written; continuation lines of multi-line
                // flow text only need to be indented past the parent, so re-indent them.
                self.verbatim_lines(n.body, n.end, child);
                while self.comments.get(self.next).is_some_and(|c| c.start < n.end) {
                    self.next += 1;
                }
            }
        }
    }

    fn verbatim_lines(&mut self, start: usize, end: usize, indent: usize) {
        let text = &self.text[start..end];
        for (i, line) in text.split('\n').enumerate() {
            let line = line.trim_end();
            if i > 0 {
                self.out.push('\n');
                let content = line.trim_start();
                if !content.is_empty() {
                    self.out.extend(std::iter::repeat_n(' ', indent));
                    self.out.push_str(content);
                }
            } else {
                self.out.push_str(line);
            }
        }
        self.cur_line = self.line_of(end.saturating_sub(1).max(start));
    }

    /// `|`/`>` header as written, content lines shifted with their key or dash. Content
    /// keeps its relative indentation and trailing spaces (both are part of the value).
    fn block_scalar(&mut self, n: &Node, raw_end: usize, old_col: usize, new_col: usize) {
        let header_line = self.line_of(n.body);
        let header_end = self.lines.get(header_line + 1).map_or(self.text.len(), |e| e - 1);
        let header = self.text[n.body..header_end.max(n.body)].trim_end();
        self.out.push_str(header);
        let indicators = header.split_whitespace().next().unwrap_or("");
        let indicator = indicators.chars().any(|c| c.is_ascii_digit());
        let keep = indicators.contains('+');
        // saphyr ends the token at the next line's start or, when a less indented node
        // follows, at that node: then the last line is not the scalar's.
        let mut last = self.line_of(raw_end);
        let partial = &self.text[self.lines[last]..raw_end];
        let rest = self.line_text(last).get(partial.len()..).unwrap_or("");
        if last > header_line && (partial.is_empty() || !rest.trim().is_empty()) {
            last -= 1;
        }
        let mut lines: Vec<&str> = (header_line + 1..=last).map(|l| self.line_text(l)).collect();
        let indent_of = |l: &str| l.len() - l.trim_start_matches(' ').len();
        let base = lines.iter().find(|l| !l.trim().is_empty()).map_or(0, |l| indent_of(l));
        // Trailing empty lines are content only under `|+`; blanks past the indentation always are.
        while !keep && lines.last().is_some_and(|l| l.trim().is_empty() && l.len() <= base) {
            lines.pop();
            last -= 1;
        }
        let shift =
            if indicator { new_col as isize - old_col as isize } else { (new_col + 2) as isize - base as isize };
        for line in lines {
            self.out.push('\n');
            if line.trim().is_empty() && line.len() <= base {
                continue;
            }
            let width = (indent_of(line) as isize + shift).max(0) as usize;
            self.out.extend(std::iter::repeat_n(' ', width));
            self.out.push_str(line.trim_start_matches(' '));
        }
        self.cur_line = last.max(header_line);
        self.in_block_scalar = true;
    }

    /// Anchor and tag of a node, space separated (empty when none).
    fn props(&self, n: &Node) -> String {
        let mut parts = Vec::new();
        let mut at = n.start;
        loop {
            let s = skip_blank(self.text, at);
            if s >= n.body || !self.text[s..].starts_with(['&', '!']) {
                break;
            }
            let e = self.text[s..].find(char::is_whitespace).map_or(n.body, |i| (s + i).min(n.body));
            parts.push(&self.text[s..e]);
            at = e;
        }
        parts.join(" ")
    }

    /// Can this flow collection be printed on one line? Not if it holds comments,
    /// multi-line scalars, or empty keys/values whose spelling depends on the layout.
    fn can_normalize(&self, n: &Node) -> bool {
        let has_comment = self.comments.iter().any(|c| c.start > n.body && c.start < n.end);
        !has_comment && self.flat_ok(n)
    }
    fn flat_ok(&self, n: &Node) -> bool {
        match &n.kind {
            NodeKind::Scalar(_) | NodeKind::Alias(_) => !self.text[n.body..n.end].contains('\n'),
            NodeKind::Sequence { items, .. } => items.iter().all(|i| !i.is_empty_null() && self.flat_ok(i)),
            NodeKind::Mapping { entries, flow } => entries.iter().all(|(k, v)| {
                !k.is_empty_null() && (*flow || !v.is_empty_null()) && self.flat_ok(k) && self.flat_ok(v)
            }),
        }
    }

    /// A node in flow style: properties, then [`Self::flow_body`].
    fn flow_text(&self, n: &Node) -> String {
        let props = self.props(n);
        let body = self.flow_body(n);
        match (props.is_empty(), body.is_empty()) {
            (true, _) => body,
            (false, true) => props,
            (false, false) => format!("{props} {body}"),
        }
    }

    fn flow_body(&self, n: &Node) -> String {
        match &n.kind {
            NodeKind::Scalar(_) | NodeKind::Alias(_) => self.text[n.body..n.end].to_string(),
            NodeKind::Sequence { items, .. } => {
                format!("[{}]", items.iter().map(|i| self.flow_text(i)).collect::<Vec<_>>().join(", "))
            }
            NodeKind::Mapping { entries, flow } => {
                let inner = entries
                    .iter()
                    .map(|(k, v)| {
                        if v.is_empty_null() {
                            self.flow_text(k)
                        } else {
                            let colon = if matches!(k.kind, NodeKind::Alias(_)) { " :" } else { ":" };
                            format!("{}{colon} {}", self.flow_text(k), self.flow_text(v))
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                if *flow { format!("{{{inner}}}") } else { inner }
            }
        }
    }
}

/// Byte ranges of quoted and block scalars, where `#` is text, not a comment.
fn collect_scalar_ranges(n: &Node, out: &mut Vec<(usize, usize)>) {
    match &n.kind {
        NodeKind::Scalar(s) if s.style != ScalarStyle::Plain => out.push((n.body, s.raw_end.max(n.end))),
        NodeKind::Scalar(_) | NodeKind::Alias(_) => {}
        NodeKind::Mapping { entries, .. } => entries.iter().for_each(|(k, v)| {
            collect_scalar_ranges(k, out);
            collect_scalar_ranges(v, out);
        }),
        NodeKind::Sequence { items, .. } => items.iter().for_each(|i| collect_scalar_ranges(i, out)),
    }
}
