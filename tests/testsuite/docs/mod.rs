//! The docs are checked like code: `docs/` (an mdBook source), `ARCHITECTURE.md`,
//! `CONTRIBUTING.md` and the other Markdown files of the repository.
//!
//! - `links`: every relative link and `#anchor` resolves;
//! - `spec_blocks`: every block fenced as ```` ```hcl spec ````, ```` ```yaml spec ```` or
//!   ```` ```hcl policy ```` passes `gpuplan validate`;
//! - `getting_started`: every command of `docs/guide/getting-started.md` runs against the
//!   embedded cloud and prints what the page shows;
//! - `reference`: the CLI and spec references are generated (from clap and from the JSON
//!   Schema's source) and must match the committed pages;
//! - `cloud_policies`: each cloud's least-privilege policy lists exactly the API actions the
//!   provider code calls;
//! - `architecture`: `ARCHITECTURE.md` names every top-level module of `src/`, and no file
//!   cites contracts outside the repository.
//!
//! Generated text is rewritten in place with `GPUPLAN_BLESS=1`:
//! `GPUPLAN_BLESS=1 cargo nextest run -E 'test(/^docs::/)'` (or `cargo test --test testsuite docs::`).

mod architecture;
mod cloud_policies;
mod getting_started;
mod links;
mod reference;
mod spec_blocks;

use std::path::{Path, PathBuf};

/// The command that rewrites generated docs, named by every staleness failure.
pub const BLESS: &str = "GPUPLAN_BLESS=1 cargo nextest run -E 'test(/^docs::/)'";

pub fn bless() -> bool {
    std::env::var("GPUPLAN_BLESS").is_ok_and(|v| v == "1")
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A path relative to the repository root, for messages.
pub fn rel(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

/// Folders never searched for docs: build output, installed tools, VCS data, and local
/// state that runs leave beside examples.
fn skipped(name: &str) -> bool {
    name.starts_with("target") || name.starts_with('.') || name == "node_modules" || name == "book" || name == "state"
}

/// Every Markdown file of the repository (sorted), docs and READMEs alike.
pub fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = e.expect("entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            if path.is_dir() {
                if !skipped(&name) {
                    walk(&path, out);
                }
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &mut out);
    out.sort();
    out
}

/// One fenced code block of a Markdown file.
#[derive(Debug, Clone)]
pub struct Fence {
    /// The info string after the opening fence (`hcl spec`).
    pub info: String,
    /// The text between the fences, each line ending in `\n`.
    pub body: String,
    /// 1-based line of the opening fence.
    pub line: usize,
    /// Byte range of `body` in the file, for rewriting it.
    pub body_range: std::ops::Range<usize>,
    /// Byte range of the whole block, fence lines included.
    pub range: std::ops::Range<usize>,
    /// The last non-blank line before the fence (an HTML comment marker, say).
    pub before: String,
}

/// The fenced code blocks (```` ``` ```` or `~~~`, at most three spaces of indent) of `text`.
pub fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut offset = 0;
    // fence, info, line, block start, body start, before
    let mut open: Option<(String, String, usize, usize, usize, String)> = None;
    let mut before = String::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let start = offset;
        offset += line.len();
        match &open {
            None => {
                let marker: String = trimmed.chars().take_while(|c| *c == '`' || *c == '~').collect();
                if indent <= 3 && marker.len() >= 3 && marker.chars().all(|c| c == marker.chars().next().unwrap()) {
                    let info = trimmed[marker.len()..].trim().to_string();
                    open = Some((marker, info, i + 1, start, offset, before.clone()));
                } else if !line.trim().is_empty() {
                    before = line.trim().to_string();
                }
            }
            Some((marker, info, line_no, block_start, body_start, fence_before)) => {
                let t = trimmed.trim_end();
                if t.starts_with(marker.as_str()) && t.chars().all(|c| c == marker.chars().next().unwrap()) {
                    out.push(Fence {
                        info: info.clone(),
                        body: text[*body_start..start].to_string(),
                        line: *line_no,
                        body_range: *body_start..start,
                        range: *block_start..offset,
                        before: fence_before.clone(),
                    });
                    open = None;
                    before.clear();
                }
            }
        }
    }
    out
}

/// `text` with fenced code blocks and inline code spans blanked (lengths and line breaks
/// kept), so that links are looked for in prose only.
pub fn prose_only(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for f in fences(text) {
        for b in &mut bytes[f.range.clone()] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    // Inline code: a run of N backticks up to the next run of exactly N in the same
    // paragraph (a span never crosses a blank line).
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let n = bytes[i..].iter().take_while(|b| **b == b'`').count();
        let mut j = i + n;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j..].starts_with(b"\n\n") {
                break;
            }
            if bytes[j] == b'`' {
                let m = bytes[j..].iter().take_while(|b| **b == b'`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(c) => {
                for b in &mut bytes[i..c + n] {
                    if *b != b'\n' {
                        *b = b' ';
                    }
                }
                i = c + n;
            }
            None => i += n,
        }
    }
    String::from_utf8(bytes).expect("blanking keeps UTF-8: only ASCII bytes and whole code spans change")
}
