//! Terminal styling for the text view: ANSI colour when asked for, plain text otherwise,
//! and word wrapping for prose (reasons, messages, hints).
//!
//! Callers decide whether colour is on (`--no-color`, `NO_COLOR`, not a terminal); this
//! file never looks at the environment, so a view with colour off holds no escape codes.

use crate::plan::model::Action;

/// Paints strings when `on`; returns them unchanged otherwise.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paint {
    on: bool,
}

const RED: &str = "31";
const GREEN: &str = "32";
const YELLOW: &str = "33";
const MAGENTA: &str = "35";
const CYAN: &str = "36";
const BOLD: &str = "1";

impl Paint {
    pub(crate) fn new(on: bool) -> Self {
        Paint { on }
    }

    fn code(&self, code: &str, s: &str) -> String {
        if self.on && !s.is_empty() { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() }
    }

    /// Is colour on?
    pub(crate) fn is_on(&self) -> bool {
        self.on
    }

    /// [`Paint::symbol`], written at the end of `out`.
    pub(crate) fn push_symbol(&self, out: &mut String, symbol: &str) {
        if self.on {
            out.push_str(&self.symbol(symbol));
        } else {
            out.push_str(symbol);
        }
    }

    pub(crate) fn bold(&self, s: &str) -> String {
        self.code(BOLD, s)
    }
    pub(crate) fn red(&self, s: &str) -> String {
        self.code(RED, s)
    }
    pub(crate) fn green(&self, s: &str) -> String {
        self.code(GREEN, s)
    }
    pub(crate) fn yellow(&self, s: &str) -> String {
        self.code(YELLOW, s)
    }
    pub(crate) fn cyan(&self, s: &str) -> String {
        self.code(CYAN, s)
    }
    pub(crate) fn error(&self, s: &str) -> String {
        self.code("1;31", s)
    }

    /// A change or attribute marker in its colour: green `+`, yellow `~`, red `-`,
    /// magenta `-/+`.
    pub(crate) fn symbol(&self, symbol: &str) -> String {
        match symbol {
            "+" => self.green(symbol),
            "~" => self.yellow(symbol),
            "-" => self.red(symbol),
            "-/+" => self.code(MAGENTA, symbol),
            "<=" => self.cyan(symbol),
            _ => symbol.to_string(),
        }
    }

    pub(crate) fn action(&self, action: Action) -> String {
        self.symbol(action.symbol())
    }
}

/// Word-wrap `text` into lines of at most `width` characters (a word longer than the
/// width gets a line of its own). `width == 0` means no wrapping.
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    if width == 0 {
        return vec![text.to_string()];
    }
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// A wrapped paragraph: the first line after `prefix` (painted as `painted`), the next
/// ones indented by `indent` spaces. Ends with a newline.
pub(crate) fn paragraph(prefix: &str, painted: &str, indent: usize, text: &str, width: usize) -> String {
    let room = if width == 0 { 0 } else { width.saturating_sub(prefix.chars().count()).max(20) };
    let mut out = String::new();
    for (i, line) in wrap(text, room).into_iter().enumerate() {
        if i == 0 {
            out.push_str(painted);
        } else {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&line);
    }
    out.push('\n');
    out
}
