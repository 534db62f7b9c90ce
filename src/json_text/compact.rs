//! Whether a [`JsonText`](super::JsonText)'s text is canonical as it is, found by one
//! scan of the text (no parse, no print of every member): such text a compact writer can
//! copy as it is ([`super::verbatim`], a saved plan's configurations).
//!
//! [`canonical`] answers only where the answer is plain: it gives up (`None`, and the
//! caller walks the text the full way) on any string with an escape, any number that is
//! not an integer `serde_json` prints as written, and any object whose keys do not come
//! strictly in order. Whatever it answers is the text the full way gives.

/// The compact text of `text` (valid JSON, as `serde_json` checked it), when that is its
/// canonical text; `None` when it might not be.
pub(super) fn canonical(text: &str) -> Option<String> {
    let mut scan = Scan { text: text.as_bytes(), at: 0, out: Vec::with_capacity(text.len()) };
    scan.value()?;
    scan.blank();
    if scan.at != scan.text.len() {
        return None;
    }
    // Only whole ASCII tokens and whole strings of the (UTF-8) input were copied.
    String::from_utf8(scan.out).ok()
}

/// Whether `text` is canonical JSON text as it is (compact, and as [`canonical`] reads).
pub(super) fn is_canonical(text: &str) -> bool {
    canonical(text).is_some_and(|compact| compact == text)
}

struct Scan<'a> {
    text: &'a [u8],
    at: usize,
    out: Vec<u8>,
}

impl<'a> Scan<'a> {
    fn blank(&mut self) {
        while self.text.get(self.at).is_some_and(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    /// The next byte after blanks, taken.
    fn next(&mut self) -> Option<u8> {
        self.blank();
        let b = *self.text.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn peek(&mut self) -> Option<u8> {
        self.blank();
        self.text.get(self.at).copied()
    }

    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string().map(|_| ()),
            b't' => self.word("true"),
            b'f' => self.word("false"),
            b'n' => self.word("null"),
            _ => self.integer(),
        }
    }

    fn word(&mut self, word: &str) -> Option<()> {
        let end = self.at + word.len();
        (self.text.get(self.at..end)? == word.as_bytes()).then_some(())?;
        self.out.extend_from_slice(word.as_bytes());
        self.at = end;
        Some(())
    }

    /// A string without escapes, copied; its contents (which are its value).
    fn string(&mut self) -> Option<&'a [u8]> {
        let text = self.text;
        let start = self.at + 1;
        let len = text.get(start..)?.iter().position(|b| matches!(b, b'"' | b'\\'))?;
        let end = start + len;
        (text[end] == b'"').then_some(())?;
        self.out.extend_from_slice(&text[self.at..=end]);
        self.at = end + 1;
        Some(&text[start..end])
    }

    /// An integer as `serde_json` prints it: no fraction or exponent, no leading zero, no
    /// `-0`, within `i64` (negative) or `u64`.
    fn integer(&mut self) -> Option<()> {
        let text = self.text;
        let start = self.at;
        let sign = usize::from(text[start] == b'-');
        let digits = text[start + sign..].iter().take_while(|b| b.is_ascii_digit()).count();
        let end = start + sign + digits;
        // A sign and ASCII digits are UTF-8; `None` would only send the text the full way.
        let token = std::str::from_utf8(&text[start..end]).ok()?;
        if digits == 0 || matches!(text.get(end), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let fits = if sign == 1 { token.parse::<i64>().is_ok_and(|n| n != 0) } else { token.parse::<u64>().is_ok() };
        if !fits || (digits > 1 && text[start + sign] == b'0') {
            return None;
        }
        self.out.extend_from_slice(token.as_bytes());
        self.at = end;
        Some(())
    }

    fn array(&mut self) -> Option<()> {
        self.at += 1;
        self.out.push(b'[');
        if self.peek()? == b']' {
            self.at += 1;
        } else {
            loop {
                self.value()?;
                match self.next()? {
                    b',' => self.out.push(b','),
                    b']' => break,
                    _ => return None,
                }
            }
        }
        self.out.push(b']');
        Some(())
    }

    /// An object whose keys come strictly in order (no key twice).
    fn object(&mut self) -> Option<()> {
        self.at += 1;
        self.out.push(b'{');
        if self.peek()? == b'}' {
            self.at += 1;
        } else {
            let mut last: Option<&[u8]> = None;
            loop {
                (self.peek()? == b'"').then_some(())?;
                let key = self.string()?;
                if last.is_some_and(|last| last >= key) {
                    return None;
                }
                last = Some(key);
                (self.next()? == b':').then_some(())?;
                self.out.push(b':');
                self.value()?;
                match self.next()? {
                    b',' => self.out.push(b','),
                    b'}' => break,
                    _ => return None,
                }
            }
        }
        self.out.push(b'}');
        Some(())
    }
}
