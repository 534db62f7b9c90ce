//! A quick look at a state file before it is written over: its lineage, serial and
//! format version, and whether the whole file is well-formed JSON, in one pass over its
//! bytes.
//!
//! `LocalBackend` checks the file on disk twice in an apply (when the journal opens and
//! before the new state replaces it). `serde_json` streaming over a 130 MB state (100,000
//! pools) took about 0.4 s each time, reading byte by byte. This scanner reads the file in
//! blocks and answers only when it is sure: a file it accepts is one `serde_json`
//! accepts, with the same three values. Anything it does not follow to the letter
//! (non-ASCII bytes, escapes in the top-level keys or the lineage, a number that is not
//! plain digits, a repeated header key, deep nesting, any defect) is [`Scan::Unsure`], and
//! the caller reads the file with `serde_json` as before, which also words every error.

use std::io::Read;

/// The three values a state file's header holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub format_version: u32,
    pub serial: u64,
    pub lineage: String,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// Well-formed JSON, an object holding each header key once, with these values.
    Sure(Found),
    /// Read it with `serde_json`.
    Unsure,
}

/// Nesting deeper than this is left to `serde_json` (which stops at 128).
const MAX_DEPTH: usize = 100;

/// Where the scanner is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before the document's first byte.
    Start,
    /// A value comes next.
    Value,
    /// After `[`: a value or `]`.
    FirstItem,
    /// After `{`: a key or `}`.
    FirstKey,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value: `,`, the container's end, or (at depth 0) nothing but whitespace.
    After,
    /// Inside a string (a key when `key`).
    Str {
        key: bool,
    },
    /// After a backslash in a string.
    Escape {
        key: bool,
    },
    /// In a `\u` escape, this many hex digits to go.
    Unicode {
        key: bool,
        left: u8,
        value: u16,
    },
    /// In a number, after what.
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpInt,
    /// In `true`, `false` or `null`: the literal and how much of it was read.
    Literal {
        word: &'static [u8],
        read: u8,
    },
}

/// Which header key, if any, the value being read belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    FormatVersion,
    Serial,
    Lineage,
}

struct Scanner {
    at: At,
    /// Open containers, `true` for objects.
    stack: Vec<bool>,
    /// The current top-level key's bytes (keys at depth 1 only).
    key: Vec<u8>,
    /// The header key whose value is being read, and its bytes.
    field: Option<Field>,
    value: Vec<u8>,
    format_version: Option<u32>,
    serial: Option<u64>,
    lineage: Option<String>,
}

/// Scan a state file's bytes from `read`. I/O errors are [`Scan::Unsure`] too: the
/// `serde_json` reading after it meets them again and reports them.
pub(crate) fn scan(mut read: impl Read) -> Scan {
    let mut s = Scanner {
        at: At::Start,
        stack: Vec::new(),
        key: Vec::new(),
        field: None,
        value: Vec::new(),
        format_version: None,
        serial: None,
        lineage: None,
    };
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match read.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Scan::Unsure,
        };
        if s.feed(&buf[..n]).is_none() {
            return Scan::Unsure;
        }
    }
    s.finish().map_or(Scan::Unsure, Scan::Sure)
}

impl Scanner {
    /// Take a block; `None` as soon as the scanner is unsure.
    fn feed(&mut self, bytes: &[u8]) -> Option<()> {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match self.at {
                At::Str { key } => {
                    i = self.string_run(key, bytes, i)?;
                    continue;
                }
                At::Escape { .. } | At::Unicode { .. } => self.escaped(b)?,
                At::Literal { word, read } => {
                    if word.get(read as usize) != Some(&b) {
                        return None;
                    }
                    let read = read + 1;
                    self.at = if read as usize == word.len() { At::After } else { At::Literal { word, read } };
                }
                At::Minus | At::Zero | At::Int | At::Dot | At::Frac | At::Exp | At::ExpSign | At::ExpInt => {
                    if let Some(next) = number_step(self.at, b) {
                        if self.field.is_some() {
                            self.value.push(b);
                        }
                        self.at = next;
                    } else {
                        // The number ended at `b`, which is read again after it.
                        self.end_number()?;
                        continue;
                    }
                }
                _ if is_space(b) => {
                    // Indentation is a third of a pretty-printed file: skip it in one run.
                    while i < bytes.len() && is_space(bytes[i]) {
                        i += 1;
                    }
                    continue;
                }
                At::Start | At::Value | At::FirstItem => {
                    if self.at == At::Start && b != b'{' {
                        return None;
                    }
                    if self.at == At::FirstItem && b == b']' {
                        self.close(false)?;
                    } else {
                        self.start_value(b)?;
                    }
                }
                At::FirstKey | At::Key => match b {
                    b'"' => {
                        self.key.clear();
                        self.at = At::Str { key: true };
                    }
                    b'}' if self.at == At::FirstKey => self.close(true)?,
                    _ => return None,
                },
                At::Colon => {
                    if b != b':' {
                        return None;
                    }
                    self.at = At::Value;
                }
                At::After => match (b, self.stack.last()) {
                    (b',', Some(true)) => self.at = At::Key,
                    (b',', Some(false)) => self.at = At::Value,
                    (b'}', Some(true)) => self.close(true)?,
                    (b']', Some(false)) => self.close(false)?,
                    _ => return None,
                },
            }
            i += 1;
        }
        Some(())
    }

    /// Inside a string at `bytes[i]`: run to the next byte that means anything (the bulk
    /// of a state file), keep what matters, and read that byte; returns where to go on.
    fn string_run(&mut self, key: bool, bytes: &[u8], mut i: usize) -> Option<usize> {
        let start = i;
        while i < bytes.len() && !matches!(bytes[i], b'"' | b'\\' | 0..=0x1f | 0x80..=0xff) {
            i += 1;
        }
        self.keep(key, &bytes[start..i])?;
        let Some(&b) = bytes.get(i) else { return Some(i) };
        match b {
            b'"' => self.end_string(key)?,
            b'\\' => {
                // An escape in a top-level key or a kept value is left to serde.
                if (key && self.stack.len() == 1) || self.field.is_some() {
                    return None;
                }
                self.at = At::Escape { key };
            }
            _ => return None,
        }
        Some(i + 1)
    }

    /// One byte of an escape (`\n`, `\u00e9`) in a string that is not kept.
    fn escaped(&mut self, b: u8) -> Option<()> {
        self.at = match self.at {
            At::Escape { key } => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => At::Str { key },
                b'u' => At::Unicode { key, left: 4, value: 0 },
                _ => return None,
            },
            At::Unicode { key, left, value } => {
                let digit = (b as char).to_digit(16)? as u16;
                let value = value << 4 | digit;
                if left > 1 {
                    At::Unicode { key, left: left - 1, value }
                } else if (0xd800..=0xdfff).contains(&value) {
                    // Surrogates (paired or not) are left to serde.
                    return None;
                } else {
                    At::Str { key }
                }
            }
            _ => return None,
        };
        Some(())
    }

    /// Keep a string's bytes where they matter: a top-level key, or a header value.
    fn keep(&mut self, key: bool, bytes: &[u8]) -> Option<()> {
        if key && self.stack.len() == 1 {
            if self.key.len() + bytes.len() > 64 {
                // No header key is this long; only its being one of them matters.
                self.key.truncate(0);
                self.key.extend_from_slice(b"\0long");
            } else {
                self.key.extend_from_slice(bytes);
            }
        } else if !key && self.field.is_some() {
            self.value.extend_from_slice(bytes);
        }
        Some(())
    }

    fn start_value(&mut self, b: u8) -> Option<()> {
        // A header value is kept only where it is a value of the top-level object.
        let field = self.field;
        let wants = |ok: bool| if field.is_some() && !ok { None } else { Some(()) };
        match b {
            b'{' | b'[' => {
                wants(false)?;
                if self.stack.len() >= MAX_DEPTH {
                    return None;
                }
                let object = b == b'{';
                self.stack.push(object);
                self.at = if object { At::FirstKey } else { At::FirstItem };
            }
            b'"' => {
                wants(field == Some(Field::Lineage))?;
                self.at = At::Str { key: false };
            }
            b'0'..=b'9' | b'-' => {
                wants(matches!(field, Some(Field::FormatVersion | Field::Serial)) && b != b'-')?;
                if field.is_some() {
                    self.value.push(b);
                }
                self.at = if b == b'-' {
                    At::Minus
                } else if b == b'0' {
                    At::Zero
                } else {
                    At::Int
                };
            }
            b't' | b'f' | b'n' => {
                wants(false)?;
                let word: &'static [u8] = match b {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                self.at = At::Literal { word, read: 1 };
            }
            _ => return None,
        }
        Some(())
    }

    fn end_string(&mut self, key: bool) -> Option<()> {
        if key {
            if self.stack.len() == 1 {
                self.field = match self.key.as_slice() {
                    b"format_version" => Some(Field::FormatVersion),
                    b"serial" => Some(Field::Serial),
                    b"lineage" => Some(Field::Lineage),
                    _ => None,
                };
                self.value.clear();
            }
            self.at = At::Colon;
            return Some(());
        }
        if self.field == Some(Field::Lineage) {
            if self.lineage.is_some() {
                return None;
            }
            // Not UTF-8: unsure (`None`), and `serde_json` reads the file and words the error.
            self.lineage = Some(String::from_utf8(std::mem::take(&mut self.value)).ok()?);
            self.field = None;
        }
        self.at = At::After;
        Some(())
    }

    fn end_number(&mut self) -> Option<()> {
        if !matches!(self.at, At::Zero | At::Int | At::Frac | At::ExpInt) {
            return None;
        }
        if let Some(field) = self.field.take() {
            // Only plain digits reach here for a header field (`number_step` keeps the rest).
            if !self.value.iter().all(u8::is_ascii_digit) {
                return None;
            }
            // Digits only (checked above), so these cannot fail but on overflow: then unsure
            // (`None`), and `serde_json` reads the file and words the error.
            let text = std::str::from_utf8(&self.value).ok()?;
            match field {
                Field::FormatVersion if self.format_version.is_none() => self.format_version = Some(text.parse().ok()?),
                Field::Serial if self.serial.is_none() => self.serial = Some(text.parse().ok()?),
                _ => return None,
            }
        }
        self.at = At::After;
        Some(())
    }

    fn close(&mut self, object: bool) -> Option<()> {
        if self.stack.pop() != Some(object) {
            return None;
        }
        self.at = At::After;
        Some(())
    }

    /// The end of the file: a whole document, and the three values found.
    fn finish(mut self) -> Option<Found> {
        if matches!(self.at, At::Zero | At::Int | At::Frac | At::ExpInt) {
            self.end_number()?;
        }
        if self.at != At::After || !self.stack.is_empty() {
            return None;
        }
        Some(Found { format_version: self.format_version?, serial: self.serial?, lineage: self.lineage? })
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The next state of a number after byte `b`, `None` when `b` is not part of it.
fn number_step(at: At, b: u8) -> Option<At> {
    Some(match (at, b) {
        (At::Minus, b'0') => At::Zero,
        (At::Minus, b'1'..=b'9') => At::Int,
        (At::Int, b'0'..=b'9') => At::Int,
        (At::Zero | At::Int, b'.') => At::Dot,
        (At::Dot | At::Frac, b'0'..=b'9') => At::Frac,
        (At::Zero | At::Int | At::Frac, b'e' | b'E') => At::Exp,
        (At::Exp, b'+' | b'-') => At::ExpSign,
        (At::Exp | At::ExpSign | At::ExpInt, b'0'..=b'9') => At::ExpInt,
        _ => return None,
    })
}
