//! A forgiving HCL tokenizer: just enough to check nesting before the recursive parser runs,
//! to guess the cause of a syntax error, and to re-indent and re-space a file in `fmt`.
//!
//! It never fails and never panics: unknown bytes become one-byte punctuation, and it only
//! splits the text at ASCII bytes or at the ends of non-ASCII runs, so every token range is
//! on char boundaries. Quoted strings (with their `${...}`) and heredocs come out as single
//! opaque tokens because `fmt` keeps them verbatim.

/// Deepest nesting of `{`, `[`, `(` and `${`/`%{` accepted before parsing.
pub(super) const MAX_DEPTH: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Identifiers and keywords.
    Word,
    Number,
    /// A whole quoted string, interpolations included.
    Str,
    /// `<<EOF` through the closing delimiter.
    Heredoc,
    /// `# ...` or `// ...`, without the line ending.
    LineComment,
    BlockComment,
    Newline,
    Open(u8),
    Close(u8),
    /// Operators and separators (`=`, `==`, `...`, `,`, unknown bytes).
    Punct,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

/// How the text starts: HCL code, or the inside of a string template (YAML values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    Code,
    Template,
}

#[derive(Debug, Default)]
pub(super) struct Lexed {
    /// Tokens outside strings (empty for template mode, where only the checks matter).
    pub tokens: Vec<Token>,
    /// Offset of the first bracket nested deeper than [`MAX_DEPTH`]; lexing stops there.
    pub too_deep: Option<usize>,
    /// First numeric literal that does not fit a finite f64.
    pub bad_number: Option<(usize, usize)>,
    /// Brackets and quotes still open at the end: (offset, opening byte), outermost first.
    pub unclosed: Vec<(usize, u8)>,
    /// First closing bracket that matches no opener.
    pub unmatched: Option<usize>,
    /// First closing bracket of the wrong kind: (its offset, the opener's offset, the opener).
    /// `[ ... }` almost always means a forgotten `]`.
    pub mismatched: Option<(usize, usize, u8)>,
    /// Start of the first quoted string whose literal text runs over a line break. HCL
    /// allows that, but it is nearly always a missing closing quote.
    pub multiline_string: Option<usize>,
}

#[derive(Clone, Copy, Debug)]
enum Frame {
    Bracket(u8, usize),
    /// A quoted string; only the outermost one yields a token.
    Quoted(usize),
    /// `${` or `%{` inside a string.
    Interp(usize),
    /// The implicit template around text lexed in [`Mode::Template`].
    Raw,
}

fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn is_word_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b >= 0x80
}

fn closer_of(open: u8) -> u8 {
    match open {
        b'{' => b'}',
        b'[' => b']',
        _ => b')',
    }
}

/// Tokens and checks, for `fmt`.
pub(super) fn lex(text: &str, mode: Mode) -> Lexed {
    Lexer { b: text.as_bytes(), i: 0, stack: vec![], out: Lexed::default(), keep_tokens: true, last: None }.run(mode)
}

/// The checks only, with `tokens` left empty: what every parse runs first. Collecting the
/// tokens of a big spec was a fifth of a no-op plan at 2,000 pools, nearly all of it the
/// kernel handing out fresh pages for the growing vector (README, Benchmarks).
pub(super) fn check(text: &str, mode: Mode) -> Lexed {
    Lexer { b: text.as_bytes(), i: 0, stack: vec![], out: Lexed::default(), keep_tokens: false, last: None }.run(mode)
}

struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
    stack: Vec<Frame>,
    out: Lexed,
    keep_tokens: bool,
    /// The last token outside strings, kept or not (numbers after `.` depend on it).
    last: Option<Token>,
}

impl Lexer<'_> {
    fn run(mut self, mode: Mode) -> Lexed {
        if mode == Mode::Template {
            self.stack.push(Frame::Raw);
        }
        while self.i < self.b.len() && self.out.too_deep.is_none() {
            match self.stack.last() {
                Some(Frame::Quoted(_)) | Some(Frame::Raw) => self.string_step(),
                _ => self.code_step(),
            }
        }
        for f in &self.stack {
            match *f {
                Frame::Bracket(c, at) => self.out.unclosed.push((at, c)),
                Frame::Quoted(at) => self.out.unclosed.push((at, b'"')),
                Frame::Interp(at) => self.out.unclosed.push((at, b'$')),
                Frame::Raw => {}
            }
        }
        self.out
    }

    fn at(&self, k: usize) -> u8 {
        self.b.get(self.i + k).copied().unwrap_or(0)
    }

    fn starts(&self, s: &[u8]) -> bool {
        self.b.get(self.i..).is_some_and(|r| r.starts_with(s))
    }

    /// True while inside a string, where tokens are swallowed into the string's own token.
    fn in_string(&self) -> bool {
        self.stack.iter().any(|f| matches!(f, Frame::Quoted(_) | Frame::Raw))
    }

    fn emit(&mut self, kind: Kind, start: usize, end: usize) {
        if !self.in_string() {
            let token = Token { kind, start, end };
            self.last = Some(token);
            if self.keep_tokens {
                self.out.tokens.push(token);
            }
        }
        self.i = end;
    }

    fn push(&mut self, frame: Frame) {
        let depth = self.stack.iter().filter(|f| matches!(f, Frame::Bracket(..) | Frame::Interp(_))).count();
        if matches!(frame, Frame::Bracket(..) | Frame::Interp(_)) && depth >= MAX_DEPTH {
            self.out.too_deep = Some(self.i);
        }
        self.stack.push(frame);
    }

    fn string_step(&mut self) {
        let raw = matches!(self.stack.last(), Some(Frame::Raw));
        match self.at(0) {
            b'\\' if !raw => self.i += 2,
            b'$' | b'%' if self.at(1) == self.at(0) && self.at(2) == b'{' => self.i += 3,
            b'$' | b'%' if self.at(1) == b'{' => {
                self.push(Frame::Interp(self.i));
                self.i += 2;
            }
            b'\n' if !raw => {
                if let Some(Frame::Quoted(s)) = self.stack.last()
                    && self.out.multiline_string.is_none()
                {
                    self.out.multiline_string = Some(*s);
                }
                self.i += 1;
            }
            b'"' if !raw => {
                let start = match self.stack.pop() {
                    Some(Frame::Quoted(s)) => s,
                    _ => self.i,
                };
                self.emit(Kind::Str, start, self.i + 1);
            }
            _ => self.i += 1,
        }
        self.i = self.i.min(self.b.len());
    }

    fn code_step(&mut self) {
        let start = self.i;
        let c = self.at(0);
        match c {
            b' ' | b'\t' | b'\r' => self.i += 1,
            b'\n' => self.emit(Kind::Newline, start, start + 1),
            b'#' => self.line_comment(),
            b'/' if self.at(1) == b'/' => self.line_comment(),
            b'/' if self.at(1) == b'*' => {
                let end = find(self.b, start + 2, b"*/").map_or(self.b.len(), |p| p + 2);
                self.emit(Kind::BlockComment, start, end);
            }
            b'"' => {
                self.push(Frame::Quoted(start));
                self.i += 1;
            }
            b'<' if self.at(1) == b'<' => match self.heredoc_end() {
                Some(end) => self.emit(Kind::Heredoc, start, end),
                None => self.emit(Kind::Punct, start, start + 2),
            },
            b'0'..=b'9' => self.number(),
            _ if is_word_start(c) => {
                let mut end = start;
                while end < self.b.len() && is_word_continue(self.b[end]) {
                    end += 1;
                }
                self.emit(Kind::Word, start, end);
            }
            b'{' | b'[' | b'(' => {
                self.push(Frame::Bracket(c, start));
                self.emit(Kind::Open(c), start, start + 1);
            }
            b'}' | b']' | b')' => self.close(c),
            _ => {
                const MULTI: [&[u8]; 9] = [b"...", b"=>", b"==", b"!=", b"<=", b">=", b"&&", b"||", b"::"];
                let len = MULTI.iter().find(|m| self.starts(m)).map_or(1, |m| m.len());
                self.emit(Kind::Punct, start, start + len);
            }
        }
    }

    fn line_comment(&mut self) {
        let start = self.i;
        let mut end = find(self.b, start, b"\n").unwrap_or(self.b.len());
        while end > start && self.b[end - 1] == b'\r' {
            end -= 1;
        }
        self.emit(Kind::LineComment, start, end);
    }

    fn close(&mut self, c: u8) {
        let start = self.i;
        match self.stack.last().copied() {
            Some(Frame::Interp(_)) if c == b'}' => {
                self.stack.pop();
                self.i += 1;
            }
            Some(Frame::Bracket(open, open_at)) => {
                if closer_of(open) != c && self.out.unmatched.is_none() {
                    self.out.unmatched = Some(start);
                    self.out.mismatched = Some((start, open_at, open));
                }
                self.stack.pop();
                self.emit(Kind::Close(c), start, start + 1);
            }
            _ => {
                if self.out.unmatched.is_none() {
                    self.out.unmatched = Some(start);
                }
                self.emit(Kind::Close(c), start, start + 1);
            }
        }
    }

    /// HCL numbers: digits, optional fraction, optional exponent. After `.` only digits,
    /// since `a.0.1` is two legacy index steps, not `a` then `0.1`.
    fn number(&mut self) {
        let start = self.i;
        let digits = |mut p: usize| {
            while p < self.b.len() && self.b[p].is_ascii_digit() {
                p += 1;
            }
            p
        };
        let mut end = digits(start);
        let after_dot = self.last.is_some_and(|t| t.kind == Kind::Punct && self.b[t.start] == b'.');
        if !after_dot {
            if self.b.get(end) == Some(&b'.') && self.b.get(end + 1).is_some_and(u8::is_ascii_digit) {
                end = digits(end + 1);
            }
            if matches!(self.b.get(end), Some(b'e' | b'E')) {
                let mut p = end + 1;
                if matches!(self.b.get(p), Some(b'+' | b'-')) {
                    p += 1;
                }
                if self.b.get(p).is_some_and(u8::is_ascii_digit) {
                    end = digits(p);
                }
            }
        }
        let finite = std::str::from_utf8(&self.b[start..end])
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .is_some_and(f64::is_finite);
        if !finite && self.out.bad_number.is_none() {
            self.out.bad_number = Some((start, end));
        }
        self.emit(Kind::Number, start, end);
    }

    /// End of a heredoc starting at `self.i` (`<<EOF` or `<<-EOF`, then a line ending): just
    /// after the delimiter on its closing line, or the end of input when it is never closed.
    fn heredoc_end(&self) -> Option<usize> {
        let mut p = self.i + 2;
        if self.b.get(p) == Some(&b'-') {
            p += 1;
        }
        let id_start = p;
        if !self.b.get(p).copied().is_some_and(is_word_start) {
            return None;
        }
        while p < self.b.len() && is_word_continue(self.b[p]) {
            p += 1;
        }
        let delim = &self.b[id_start..p];
        if self.b.get(p) == Some(&b'\r') {
            p += 1;
        }
        if self.b.get(p) != Some(&b'\n') {
            return None;
        }
        let mut line = p + 1;
        while line <= self.b.len() {
            let mut q = line;
            while matches!(self.b.get(q), Some(b' ' | b'\t')) {
                q += 1;
            }
            let rest = &self.b[q..];
            if rest.starts_with(delim) && !rest.get(delim.len()).copied().is_some_and(is_word_continue) {
                return Some(q + delim.len());
            }
            match find(self.b, line, b"\n") {
                Some(nl) => line = nl + 1,
                None => break,
            }
        }
        Some(self.b.len())
    }
}

/// Offset of the first `needle` at or after `from`.
pub(super) fn find(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}
