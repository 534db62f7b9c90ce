//! The house's limits between and inside files (issue 47), measured from the source text
//! the way `house.py` measures it: no circle between two files of `src/` (the paths are
//! the `crate::`, `super::` and `self::` paths the code names), no function over
//! [`MAX_FN_LINES`] lines, no source file over [`MAX_FILE_LINES`] lines, and no port
//! method of a provider that only forwards to an inherent method (`forwards.rs`). Test
//! code is left out: `tests.rs`, `*_tests.rs`, folders named `tests`, and `#[cfg(test)]`
//! items.
//!
//! The parts of the crate that other work is still reshaping carry their known exceptions
//! in [`ALLOWED_CIRCLES`], [`ALLOWED_LONG_FNS`] and [`ALLOWED_BIG_FILES`], each with its
//! issue. The lists only shrink: an entry that is no longer needed fails the test too, so
//! that whoever fixes one deletes it and the limit holds from then on.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod circles;
mod forwards;

const MAX_FN_LINES: usize = 100;
const MAX_FILE_LINES: usize = 800;

/// Circles between files still there, as the sorted module paths of their files.
const ALLOWED_CIRCLES: &[(&[&str], &str)] = &[];

/// Functions over [`MAX_FN_LINES`] still there: file under `src/`, function name.
const ALLOWED_LONG_FNS: &[(&str, &str, &str)] = &[];

/// Source files over [`MAX_FILE_LINES`] lines still there, under `src/`.
const ALLOWED_BIG_FILES: &[(&str, &str)] = &[];

/// One source file of `src/`, its code with comments, literals and test items blanked
/// (lines kept, so line numbers and counts are the file's).
struct Source {
    /// `src/`-relative path with `/`, e.g. `plan/pool/mod.rs`.
    rel: String,
    /// Module path, e.g. `["plan", "pool"]`.
    module: Vec<String>,
    code: String,
}

fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(&src).expect("under src/").to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&path).expect("source reads");
            let mut module: Vec<String> = rel.trim_end_matches(".rs").split('/').map(String::from).collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                module.pop();
            }
            Source { rel, module, code: without_test_items(&blank(&text)) }
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("dir reads") {
        let path = e.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if path.is_dir() {
            if !matches!(name.as_str(), "tests" | "testdata" | "fixtures") {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// Comments, string and char literals replaced by spaces; newlines kept.
fn blank(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let len = match literal_or_comment_len(rest) {
            Some(len) => {
                out.extend(rest[..len].chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
                len
            }
            None => {
                out.push(c);
                c.len_utf8()
            }
        };
        rest = &rest[len..];
    }
    out
}

/// The byte length of the comment or literal that starts `s`, if one does.
fn literal_or_comment_len(s: &str) -> Option<usize> {
    if s.starts_with("//") {
        return Some(s.find('\n').unwrap_or(s.len()));
    }
    if s.starts_with("/*") {
        let (mut depth, mut j) = (0, 0);
        while j < s.len() {
            if s[j..].starts_with("/*") {
                depth += 1;
                j += 2;
            } else if s[j..].starts_with("*/") {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    return Some(j);
                }
            } else {
                j += s[j..].chars().next().map_or(1, char::len_utf8);
            }
        }
        return Some(s.len());
    }
    let unprefixed = s.strip_prefix('b').unwrap_or(s);
    let prefix = s.len() - unprefixed.len();
    if let Some(raw) = unprefixed.strip_prefix('r') {
        let hashes = raw.bytes().take_while(|c| *c == b'#').count();
        if raw.as_bytes().get(hashes) == Some(&b'"') {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = prefix + 1 + hashes + 1;
            return Some(s[body..].find(&close).map_or(s.len(), |e| body + e + close.len()));
        }
    }
    if unprefixed.starts_with('"') {
        let b = s.as_bytes();
        let mut j = prefix + 1;
        while j < b.len() && b[j] != b'"' {
            j += if b[j] == b'\\' { 2 } else { 1 };
        }
        return Some((j + 1).min(s.len()));
    }
    if let Some(body) = unprefixed.strip_prefix('\'') {
        // A char literal (`'x'`, `'\n'`, `'\u{1F600}'`), not a lifetime (`'a`).
        let len = if body.starts_with('\\') {
            body.get(2..)?.find('\'').map(|e| 2 + e + 1)
        } else {
            let c = body.chars().next()?;
            (body[c.len_utf8()..].starts_with('\'')).then_some(c.len_utf8() + 1)
        };
        return len.map(|l| prefix + 1 + l);
    }
    None
}

/// `#[cfg(test)]` items (a `mod tests { … }`, a `use`, a function) blanked, lines kept.
fn without_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let (brace, semi) = (item.find('{'), item.find(';'));
        let end = match (brace, semi) {
            (_, Some(s)) if brace.is_none_or(|b| s < b) => s + 1,
            (Some(b), _) => b + block_len(&item[b..]),
            _ => item.len(),
        };
        out.extend(item[..end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The length of the `{ … }` block that starts `s`, up to and with its closing brace.
fn block_len(s: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

/// `(name, first line, lines)` of every function with a body, as `house.py` counts them:
/// from the line of `fn` to the line of its closing brace.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(found) = code[from..].find("fn") {
        let at = from + found;
        from = at + 2;
        let before_ok = code[..at].chars().next_back().is_none_or(|c| !ident(c));
        let after = &code[at + 2..];
        let gap = after.len() - after.trim_start().len();
        if !before_ok || gap == 0 {
            continue;
        }
        let name: String = after[gap..].chars().take_while(|c| ident(*c)).collect();
        if name.is_empty() {
            continue;
        }
        let sig_start = at + 2 + gap + name.len();
        let Some(open) = body_start(&code[sig_start..]) else { continue };
        let open = sig_start + open;
        let close = open + block_len(&code[open..]) - 1;
        let first = line_of(code, at);
        out.push((name, first, line_of(code, close) - first + 1));
    }
    out
}

/// Where a function's body opens after its name: the first `{` outside the signature's
/// brackets; `None` for a declaration without a body (it ends at `;`).
fn body_start(sig: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in sig.char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ';' if depth <= 0 => return None,
            '{' if depth <= 0 => return Some(i),
            _ => {}
        }
    }
    None
}

#[test]
fn no_function_over_the_limit_outside_tests() {
    let allowed: BTreeSet<(String, String)> =
        ALLOWED_LONG_FNS.iter().map(|(f, n, _)| (f.to_string(), n.to_string())).collect();
    let mut found = BTreeSet::new();
    let mut new = Vec::new();
    for s in sources() {
        for (name, line, n) in functions(&s.code) {
            if n > MAX_FN_LINES {
                let key = (s.rel.clone(), name);
                if !allowed.contains(&key) {
                    new.push(format!("src/{}:{line} fn {}: {n} lines", s.rel, key.1));
                }
                found.insert(key);
            }
        }
    }
    assert!(
        new.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them by the steps a reader would name):\n{new:#?}"
    );
    let stale: Vec<_> = allowed.difference(&found).collect();
    assert!(
        stale.is_empty(),
        "these are no longer over {MAX_FN_LINES} lines: delete them from ALLOWED_LONG_FNS: {stale:?}"
    );
}

#[test]
fn no_source_file_over_the_limit() {
    let mut found = BTreeSet::new();
    for s in sources() {
        let n = s.code.lines().count();
        if n > MAX_FILE_LINES {
            found.insert((s.rel, n));
        }
    }
    let allowed: BTreeSet<&str> = ALLOWED_BIG_FILES.iter().map(|(f, _)| *f).collect();
    let new: Vec<_> = found.iter().filter(|(f, _)| !allowed.contains(f.as_str())).collect();
    assert!(
        new.is_empty(),
        "source files over {MAX_FILE_LINES} lines (split them by what a reader would name): {new:?}"
    );
    let stale: Vec<_> = allowed.iter().filter(|a| !found.iter().any(|(f, _)| f == *a)).collect();
    assert!(
        stale.is_empty(),
        "these are no longer over {MAX_FILE_LINES} lines: delete them from ALLOWED_BIG_FILES: {stale:?}"
    );
}

/// Issue 47, item 4: a port method does the cloud's work (or dispatches), never only
/// hands its call to an inherent method ([`forwards`]).
#[test]
fn no_port_method_only_forwards() {
    let found = forwards::forwards(&sources());
    assert!(
        found.is_empty(),
        "port methods that only forward to an inherent method (move the body into the port method):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_circle_between_files() {
    let sources = sources();
    let edges = circles::file_graph(&sources);
    let found: Vec<Vec<String>> = circles::circles(&edges);
    let allowed: Vec<Vec<String>> =
        ALLOWED_CIRCLES.iter().map(|(c, _)| c.iter().map(|m| m.to_string()).collect()).collect();
    let new: Vec<String> = found.iter().filter(|c| !allowed.contains(c)).map(|c| circles::explain(c, &edges)).collect();
    assert!(
        new.is_empty(),
        "circles between files (move the shared piece down into a file below both):\n{}",
        new.join("\n")
    );
    let stale: Vec<_> = allowed.iter().filter(|c| !found.contains(c)).collect();
    assert!(stale.is_empty(), "these circles are gone or changed: update ALLOWED_CIRCLES: {stale:?}");
}

/// The measuring itself, on small sources: literals, comments and test items are not code;
/// a function's lines run from `fn` to its closing brace; paths make the edges.
#[test]
fn the_measures_read_code_not_prose() {
    let code = without_test_items(&blank(
        "// fn a() {\nfn b<'a>(x: &'a str) -> Vec<u8> {\n    let s = \"}\n\";\n    let c = '{';\n    vec![]\n}\n#[cfg(test)]\nmod tests {\n    fn c() {}\n}\ntrait T { fn d(&self); }\n",
    ));
    assert_eq!(code.lines().count(), 12, "lines are kept: {code:?}");
    assert_eq!(functions(&code), vec![("b".to_string(), 2, 6)]);
    let srcs = [
        ("a/x.rs", "use super::y::{Z, W};"),
        ("a/y.rs", "fn f() { crate::a::x::g() }"),
        ("a/mod.rs", "use self::x::X;"),
    ]
    .map(|(rel, code)| Source {
        rel: rel.to_string(),
        module: rel.trim_end_matches(".rs").split('/').filter(|s| *s != "mod").map(String::from).collect(),
        code: code.to_string(),
    });
    let edges = circles::file_graph(&srcs);
    assert_eq!(circles::circles(&edges), vec![vec!["a/x".to_string(), "a/y".to_string()]]);
    assert!(edges["a"].contains_key("a/x") && !edges["a/x"].contains_key("a"), "{edges:?}");
}
