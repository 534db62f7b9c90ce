//! The printer's state and the block layout: lines, indentation, comments, blank lines,
//! block mappings and sequences. Scalars and flow collections are in `inline.rs`.

use saphyr_parser::ScalarStyle;

use super::super::tree::{self, Node, NodeKind, skip_blank};

pub(super) struct Comment {
    pub(super) start: usize,
    /// End of the comment text, trailing whitespace excluded.
    pub(super) end: usize,
    pub(super) line: usize,
}

pub(super) struct Printer<'t> {
    pub(super) text: &'t str,
    /// Byte offset of each source line's start.
    pub(super) lines: Vec<usize>,
    pub(super) comments: Vec<Comment>,
    /// The first comment not printed yet.
    pub(super) next: usize,
    pub(super) out: String,
    /// Source line of the last thing printed (for blank lines and trailing comments).
    pub(super) last_line: Option<usize>,
    pub(super) cur_line: usize,
    /// The current line ends a block scalar (its trailing blanks are content).
    pub(super) in_block_scalar: bool,
    pub(super) unsupported: Option<&'static str>,
}

impl<'t> Printer<'t> {
    pub(super) fn new(text: &'t str, root: Option<&Node>) -> Self {
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

    pub(super) fn finish(mut self) -> String {
        let trimmed = self.out.trim_end_matches('\n').len();
        self.out.truncate(trimmed);
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.out
    }

    /// `#` starts a comment at a line start or after a blank, outside quoted and block scalars.
    pub(super) fn find_comments(&self, root: Option<&Node>) -> Vec<Comment> {
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

    pub(super) fn line_of(&self, pos: usize) -> usize {
        self.lines.partition_point(|&s| s <= pos).saturating_sub(1)
    }
    pub(super) fn line_text(&self, line: usize) -> &'t str {
        let start = self.lines.get(line).copied().unwrap_or(self.text.len());
        let end = self.lines.get(line + 1).map_or(self.text.len(), |e| e - 1);
        self.text.get(start..end.max(start)).unwrap_or("").trim_end_matches('\r')
    }
    /// Column (bytes, which are spaces here) of `pos` in its line.
    pub(super) fn col(&self, pos: usize) -> usize {
        pos - self.lines[self.line_of(pos)]
    }

    /// One blank line if the source had any between the last printed line and `line`.
    pub(super) fn gap(&mut self, line: usize) {
        let Some(last) = self.last_line else { return };
        let blank = (last + 1..line).any(|l| self.line_text(l).trim().is_empty());
        if blank && !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    pub(super) fn flush_comments(&mut self, before: usize, indent: usize) {
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

    pub(super) fn comment_before(&self, pos: usize) -> bool {
        self.comments.get(self.next).is_some_and(|c| c.start < pos)
    }

    /// Start an output line for the source content at `pos`.
    pub(super) fn open_line(&mut self, pos: usize, indent: usize) {
        self.flush_comments(pos, indent);
        self.gap(self.line_of(pos));
        self.out.extend(std::iter::repeat_n(' ', indent));
        self.cur_line = self.line_of(pos);
    }

    /// End the output line, keeping a comment that followed this content in the source.
    pub(super) fn close_line(&mut self) {
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

    pub(super) fn document(&mut self, doc: &tree::Document) {
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

    pub(super) fn block_collection(&mut self, n: &Node, indent: usize, compact: bool) {
        match &n.kind {
            NodeKind::Mapping { entries, .. } => self.block_mapping(entries, indent, compact),
            NodeKind::Sequence { items, .. } => self.block_sequence(n, items, indent, compact),
            _ => {}
        }
    }

    /// Entries at `indent`; `compact`: the first one continues the current line (`- a: 1`).
    pub(super) fn block_mapping(&mut self, entries: &[(Node, Node)], indent: usize, compact: bool) {
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

    pub(super) fn block_sequence(&mut self, seq: &Node, items: &[Node], indent: usize, compact: bool) {
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
    pub(super) fn value(&mut self, v: &Node, old_col: usize, new_col: usize) {
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
