//! `gpuplan fmt` over tokens: keeps the user's line breaks, comments, strings and heredocs
//! verbatim, and rewrites only the whitespace between tokens:
//! - indentation is 2 spaces per open bracket level (counted per line, so `func([` on one
//!   line indents its contents once, as `terraform fmt` does);
//! - one space around operators and `=`, after `,`, inside one-line `{ }`, none inside
//!   `( )` and `[ ]`;
//! - `=` aligned across runs of consecutive one-line `name = value` lines, trailing
//!   comments aligned within the same run;
//! - at most one blank line, none after an opening or before a closing bracket, none at
//!   the ends, one final newline.
//!
//! Working on tokens rather than on hcl-edit's tree keeps comments trivially in place; the
//! caller re-parses the result to prove the tree did not change.

use super::lex::{Kind, Token};

const INDENT: &str = "  ";

/// One output line before alignment.
struct Line {
    indent: usize,
    /// For one-line `key = value` lines: the key; `code` then holds what follows `=`.
    key: Option<String>,
    code: String,
    /// A trailing `#`/`//` comment after code.
    comment: Option<String>,
    blank: bool,
    starts_closing: bool,
    ends_opening: bool,
}

pub(super) fn format_tokens(text: &str, tokens: &[Token]) -> String {
    let mut lines = vec![];
    // Per indentation level, how many brackets opened on that level's line are still open.
    let mut stack: Vec<usize> = vec![];
    for toks in tokens.split(|t| t.kind == Kind::Newline) {
        lines.push(layout_line(text, toks, &mut stack));
    }
    let lines = drop_blank_lines(lines);
    render(&lines)
}

fn close_level(stack: &mut Vec<usize>) {
    if let Some(top) = stack.last_mut() {
        *top = top.saturating_sub(1);
        if *top == 0 {
            stack.pop();
        }
    }
}

fn layout_line(text: &str, toks: &[Token], stack: &mut Vec<usize>) -> Line {
    let mut line = Line {
        indent: 0,
        key: None,
        code: String::new(),
        comment: None,
        blank: false,
        starts_closing: false,
        ends_opening: false,
    };
    if toks.is_empty() {
        line.blank = true;
        return line;
    }
    let leading_closers = toks.iter().take_while(|t| matches!(t.kind, Kind::Close(_))).count();
    for _ in 0..leading_closers {
        close_level(stack);
    }
    line.indent = stack.len();
    let mut own = 0usize;
    let mut closed_outer = false;
    for t in &toks[leading_closers..] {
        match t.kind {
            Kind::Open(_) => own += 1,
            Kind::Close(_) if own > 0 => own -= 1,
            Kind::Close(_) => {
                close_level(stack);
                closed_outer = true;
            }
            _ => {}
        }
    }
    if own > 0 {
        stack.push(own);
    }

    let code_end = match toks.last() {
        Some(t) if t.kind == Kind::LineComment && toks.len() > 1 => toks.len() - 1,
        _ => toks.len(),
    };
    if code_end < toks.len() {
        line.comment = Some(tok_text(text, &toks[code_end]).trim_end().to_string());
    }
    let code = &toks[..code_end];
    line.starts_closing = leading_closers > 0;
    line.ends_opening = code.last().is_some_and(|t| matches!(t.kind, Kind::Open(_)));
    let one_line =
        leading_closers == 0 && own == 0 && !closed_outer && code.iter().all(|t| !tok_text(text, t).contains('\n'));
    let keyed = one_line
        && code.len() >= 3
        && matches!(code[0].kind, Kind::Word | Kind::Str)
        && code[1].kind == Kind::Punct
        && tok_text(text, &code[1]) == "=";
    if keyed {
        line.key = Some(tok_text(text, &code[0]).to_string());
        line.code = render_tokens(text, &code[2..]);
    } else {
        line.code = render_tokens(text, code);
    }
    line
}

fn tok_text<'a>(text: &'a str, t: &Token) -> &'a str {
    text.get(t.start..t.end).unwrap_or("")
}

fn is_keyword(text: &str, toks: &[Token], j: usize) -> bool {
    toks[j].kind == Kind::Word
        && matches!(tok_text(text, &toks[j]), "for" | "in" | "if")
        && !(j > 0 && matches!(tok_text(text, &toks[j - 1]), "." | "::"))
}

/// Whether `toks[j]` ends an operand, so a following `-` is binary and `[` indexes.
fn ends_operand(text: &str, toks: &[Token], j: usize) -> bool {
    match toks[j].kind {
        Kind::Word => !is_keyword(text, toks, j),
        Kind::Number | Kind::Str | Kind::Heredoc | Kind::Close(_) => true,
        // The `*` of a `.*` splat.
        Kind::Punct => tok_text(text, &toks[j]) == "*" && j > 0 && tok_text(text, &toks[j - 1]) == ".",
        _ => false,
    }
}

fn render_tokens(text: &str, toks: &[Token]) -> String {
    let mut unary = vec![false; toks.len()];
    let mut out = String::new();
    for j in 0..toks.len() {
        let t = tok_text(text, &toks[j]);
        unary[j] = matches!(t, "-" | "!") && (j == 0 || !ends_operand(text, toks, j - 1));
        if j > 0 && spaced(text, toks, j, unary[j - 1]) {
            out.push(' ');
        }
        if toks[j].kind == Kind::BlockComment {
            // Trailing whitespace inside a comment is never meaningful.
            let lines: Vec<&str> = t.split('\n').map(str::trim_end).collect();
            out.push_str(&lines.join("\n"));
        } else {
            out.push_str(t);
        }
    }
    out
}

/// Whether to put one space between `toks[j - 1]` and `toks[j]`.
fn spaced(text: &str, toks: &[Token], j: usize, prev_unary: bool) -> bool {
    let (p, n) = (toks[j - 1], toks[j]);
    let (pt, nt) = (tok_text(text, &p), tok_text(text, &n));
    if matches!(n.kind, Kind::LineComment | Kind::BlockComment) || p.kind == Kind::BlockComment {
        return true;
    }
    if let Kind::Close(c) = n.kind {
        return c == b'}' && p.kind != Kind::Open(b'{');
    }
    if matches!(nt, "," | "." | "::" | "...") || matches!(pt, "." | "::") || prev_unary {
        return false;
    }
    match p.kind {
        Kind::Open(b'{') => return true,
        Kind::Open(_) => return false,
        _ => {}
    }
    match n.kind {
        Kind::Open(b'[') => !ends_operand(text, toks, j - 1),
        // `f(` is a call; `if (` keeps its space.
        Kind::Open(b'(') => p.kind != Kind::Word || is_keyword(text, toks, j - 1),
        _ => true,
    }
}

fn drop_blank_lines(lines: Vec<Line>) -> Vec<Line> {
    let next_closes: Vec<bool> = {
        // For each line: does the next non-blank line start with a closing bracket?
        let mut v = vec![true; lines.len()];
        let mut acc = true; // end of file counts as "closing": no trailing blank lines
        for (i, l) in lines.iter().enumerate().rev() {
            v[i] = acc;
            if !l.blank {
                acc = l.starts_closing;
            }
        }
        v
    };
    let mut kept: Vec<Line> = vec![];
    for (i, l) in lines.into_iter().enumerate() {
        if l.blank {
            let after_open_or_blank = kept.last().is_none_or(|k| k.blank || k.ends_opening);
            if after_open_or_blank || next_closes[i] {
                continue;
            }
        }
        kept.push(l);
    }
    kept
}

fn render(lines: &[Line]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        // A run: consecutive keyed lines at one indentation.
        let mut end = i + 1;
        if lines[i].key.is_some() {
            while end < lines.len() && lines[end].key.is_some() && lines[end].indent == lines[i].indent {
                end += 1;
            }
        }
        let run = &lines[i..end];
        let key_width = run.iter().filter_map(|l| l.key.as_deref()).map(|k| k.chars().count()).max().unwrap_or(0);
        let heads: Vec<String> = run
            .iter()
            .map(|l| {
                let mut s = INDENT.repeat(l.indent);
                match &l.key {
                    Some(k) => {
                        s.push_str(k);
                        s.extend(std::iter::repeat_n(' ', key_width - k.chars().count()));
                        s.push_str(" = ");
                        s.push_str(&l.code);
                    }
                    None => s.push_str(&l.code),
                }
                s
            })
            .collect();
        let comment_col = run
            .iter()
            .zip(&heads)
            .filter(|(l, _)| l.comment.is_some())
            .map(|(_, h)| h.chars().count())
            .max()
            .unwrap_or(0);
        for (l, mut head) in run.iter().zip(heads) {
            if let Some(c) = &l.comment {
                let pad = comment_col - head.chars().count() + 1;
                head.extend(std::iter::repeat_n(' ', pad));
                head.push_str(c);
            }
            out.push_str(head.trim_end());
            out.push('\n');
        }
        i = end;
    }
    out
}
