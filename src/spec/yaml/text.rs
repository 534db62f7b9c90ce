//! Byte-level helpers over YAML source text, for positions saphyr-parser does not
//! report exactly (properties, block scalar headers, closing quotes).

/// Skip `&anchor` / `!tag` properties (and blanks, comments between them) from `at`.
pub(super) fn skip_props(text: &str, mut at: usize) -> usize {
    loop {
        let next = skip_blank(text, at);
        match text[next..].chars().next() {
            Some('&' | '!') => {
                at = next + text[next..].find(|c: char| c.is_whitespace()).unwrap_or(text.len() - next);
            }
            _ => return at,
        }
    }
}

/// Skip spaces, tabs, line breaks and comments.
pub(super) fn skip_blank(text: &str, mut at: usize) -> usize {
    let bytes = text.as_bytes();
    while at < bytes.len() {
        match bytes[at] {
            b' ' | b'\t' | b'\r' | b'\n' => at += 1,
            b'#' => at += text[at..].find('\n').unwrap_or(text.len() - at),
            _ => break,
        }
    }
    at
}

/// The `|` or `>` that opens a block scalar whose content starts at `content`.
pub(super) fn find_block_header(text: &str, from: usize, content: usize) -> Option<usize> {
    let region = text.get(from..content)?;
    let mut in_comment = false;
    for (i, c) in region.char_indices() {
        match c {
            '\n' => in_comment = false,
            '#' => in_comment = true,
            '|' | '>' if !in_comment => return Some(from + i),
            _ => {}
        }
    }
    None
}

/// Just past the closing quote of the quoted scalar opening at `body` (`fallback` if
/// it cannot be found, which saphyr would already have reported).
pub(super) fn quoted_end(text: &str, body: usize, fallback: usize) -> usize {
    let bytes = text.as_bytes();
    let Some(&quote @ (b'"' | b'\'')) = bytes.get(body) else { return fallback };
    let mut i = body + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote == b'"' => i += 2,
            b'\'' if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    fallback
}

/// `end` moved back over trailing whitespace, but not before `min`.
pub(super) fn trim_end(text: &str, min: usize, end: usize) -> usize {
    let trimmed = text.get(..end).map(|t| t.trim_end().len()).unwrap_or(end);
    trimmed.max(min).min(end.max(min))
}
