//! The attribute lines of a resource created or destroyed, read straight from its
//! configuration's canonical JSON text: no `serde_json::Value` is built, and each leaf's
//! text is the slice of the configuration's text that [`super::facts::value`] would
//! print for it. A 2,000-pool `plan --out` rendered each pool's lines from a parsed tree,
//! about a fifth of the text view's instructions.
//!
//! Only what reads the same both ways is taken this way: compact text whose object keys
//! come in strictly increasing order (as `Value`'s map iterates them), strings without
//! escapes, integers that `Value` keeps as integers, arrays of those. Anything else (an
//! escape, a float, an object in an array, a secret reference, an empty key, whitespace)
//! answers `None`, and the caller reads the tree as before.

/// Every leaf of `text` as `(path, value text)`, in key order, as `facts::leaves` and
/// `facts::value` give them; empty and `null` leaves are left out (the caller drops
/// empty ones anyway). `None` when the text is not one the fast reading covers.
pub(super) fn leaves(text: &str) -> Option<Vec<(String, String)>> {
    let mut walk = Walk { b: text.as_bytes(), s: text, i: 0 };
    let mut out = Vec::new();
    if walk.peek()? != b'{' {
        return None;
    }
    let mut path = String::new();
    walk.object(&mut path, &mut out)?;
    (walk.i == walk.b.len()).then_some(out)
}

struct Walk<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
}

impl<'a> Walk<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// The object at `{`, its leaves under `path` (which is left as it was).
    fn object(&mut self, path: &mut String, out: &mut Vec<(String, String)>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            // An empty object: an empty leaf, which no view shows.
            return Some(());
        }
        let base = path.len();
        let mut prev: Option<&str> = None;
        let mut members = 0;
        loop {
            let key = self.string()?;
            // Keys in strictly increasing order (no repeats), none empty: as the map reads.
            if key.is_empty() || prev.is_some_and(|p| p >= key) {
                return None;
            }
            prev = Some(key);
            members += 1;
            self.eat(b':')?;
            if base > 0 {
                path.push('.');
            }
            path.push_str(key);
            self.member(path, out)?;
            path.truncate(base);
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    break;
                }
                _ => return None,
            }
        }
        // `{"secret": …}` may be a secret reference, printed its own way.
        if members == 1 && prev == Some("secret") {
            return None;
        }
        Some(())
    }

    /// One member's value at `path`: an object's leaves, or one leaf.
    fn member(&mut self, path: &mut String, out: &mut Vec<(String, String)>) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(path, out),
            b'n' => self.literal("null").map(|_| ()),
            _ => {
                let mut text = String::new();
                self.value(&mut text)?;
                out.push((path.clone(), text));
                Some(())
            }
        }
    }

    /// A leaf's text as `facts::value` prints it, pushed onto `text`.
    fn value(&mut self, text: &mut String) -> Option<()> {
        match self.peek()? {
            b'"' => {
                let start = self.i;
                self.string()?;
                text.push_str(&self.s[start..self.i]);
            }
            b'[' => {
                self.i += 1;
                text.push('[');
                if self.eat(b']').is_none() {
                    loop {
                        self.value(text)?;
                        match self.peek()? {
                            b',' => {
                                self.i += 1;
                                text.push_str(", ");
                            }
                            b']' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                text.push(']');
            }
            b't' => text.push_str(self.literal("true")?),
            b'f' => text.push_str(self.literal("false")?),
            b'n' => text.push_str(self.literal("null")?),
            b'-' | b'0'..=b'9' => text.push_str(self.integer()?),
            _ => return None,
        }
        Some(())
    }

    /// A string at `"`, without escapes: its contents.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let len = self.b[start..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        self.i = start + len;
        self.eat(b'"')?;
        Some(&self.s[start..start + len])
    }

    fn literal(&mut self, word: &'static str) -> Option<&'static str> {
        self.b[self.i..].starts_with(word.as_bytes()).then(|| {
            self.i += word.len();
            word
        })
    }

    /// An integer that `Value` reads and prints back as it is: `0`, or an optional minus
    /// and up to 18 digits without a leading zero (no `-0`, no fraction, no exponent).
    fn integer(&mut self) -> Option<&'a str> {
        let start = self.i;
        let neg = self.eat(b'-').is_some();
        let digits = self.b[self.i..].iter().take_while(|c| c.is_ascii_digit()).count();
        let first = self.peek()?;
        if digits == 0 || digits > 18 || (first == b'0' && (digits > 1 || neg)) {
            return None;
        }
        self.i += digits;
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(&self.s[start..self.i])
    }
}
