//! Printing what sits on one line after `key:` or `-`: scalars as written (block
//! scalars shifted with their key), aliases, and flow collections, normalized to
//! `{a: 1, b: 2}` / `[a, b]` when that cannot change their meaning.

use saphyr_parser::ScalarStyle;

use super::super::tree::{Node, NodeKind, skip_blank};
use super::printer::Printer;

impl Printer<'_> {
    /// A scalar, alias or flow collection at the current position.
    pub(super) fn inline(&mut self, n: &Node, old_col: usize, new_col: usize) {
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

    pub(super) fn verbatim_lines(&mut self, start: usize, end: usize, indent: usize) {
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
    pub(super) fn block_scalar(&mut self, n: &Node, raw_end: usize, old_col: usize, new_col: usize) {
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
    pub(super) fn props(&self, n: &Node) -> String {
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
    pub(super) fn can_normalize(&self, n: &Node) -> bool {
        let has_comment = self.comments.iter().any(|c| c.start > n.body && c.start < n.end);
        !has_comment && self.flat_ok(n)
    }
    pub(super) fn flat_ok(&self, n: &Node) -> bool {
        match &n.kind {
            NodeKind::Scalar(_) | NodeKind::Alias(_) => !self.text[n.body..n.end].contains('\n'),
            NodeKind::Sequence { items, .. } => items.iter().all(|i| !i.is_empty_null() && self.flat_ok(i)),
            NodeKind::Mapping { entries, flow } => entries.iter().all(|(k, v)| {
                !k.is_empty_null() && (*flow || !v.is_empty_null()) && self.flat_ok(k) && self.flat_ok(v)
            }),
        }
    }

    /// A node in flow style: properties, then [`Self::flow_body`].
    pub(super) fn flow_text(&self, n: &Node) -> String {
        let props = self.props(n);
        let body = self.flow_body(n);
        match (props.is_empty(), body.is_empty()) {
            (true, _) => body,
            (false, true) => props,
            (false, false) => format!("{props} {body}"),
        }
    }

    pub(super) fn flow_body(&self, n: &Node) -> String {
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
