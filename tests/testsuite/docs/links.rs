//! Every relative link in the repository's Markdown resolves: the file or folder exists,
//! and a `#anchor` names a heading of the target page (GitHub's and mdBook's slugs).
//! Links to the web are not fetched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{markdown_files, prose_only, read, rel};

/// The anchors a page offers: its headings' slugs (repeated ones get `-1`, `-2`, as on
/// GitHub) and explicit `<a id="..">`/`<a name="..">` anchors.
pub fn anchors(text: &str) -> BTreeSet<String> {
    let prose = prose_only(text);
    let mut out = BTreeSet::new();
    for (line, original) in prose.lines().zip(text.lines()) {
        if line.starts_with('#') {
            let title = original.trim_start_matches('#');
            if title.starts_with(' ') || title.is_empty() {
                let base = slug(title);
                let mut id = base.clone();
                let mut n = 0;
                while out.contains(&id) {
                    n += 1;
                    id = format!("{base}-{n}");
                }
                out.insert(id);
            }
        }
        for key in ["id=\"", "name=\""] {
            for (i, _) in line.match_indices(&format!("<a {key}")) {
                let rest = &line[i + 3 + key.len()..];
                if let Some(end) = rest.find('"') {
                    out.insert(rest[..end].to_string());
                }
            }
        }
    }
    out
}

/// A heading's anchor: links reduced to their text, lower case, only letters, digits,
/// `-` and `_` kept, spaces turned into `-`.
pub fn slug(title: &str) -> String {
    let mut text = String::new();
    let mut rest = title.trim();
    // `[text](url)` → `text`
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else { break };
        let Some(close) = rest[open + mid..].find(')') else { break };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The link targets of a page's prose, with their 1-based lines: inline links and images
/// `[t](target "title")` and reference definitions `[id]: target`.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let prose = prose_only(text);
    let mut out = Vec::new();
    for (n, line) in prose.lines().enumerate() {
        for (i, _) in line.match_indices("](") {
            let rest = &line[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split_whitespace().next().unwrap_or("").trim_matches(['<', '>']);
            if !target.is_empty() {
                out.push((n + 1, target.to_string()));
            }
        }
        let t = line.trim_start();
        if t.starts_with('[')
            && let Some(i) = t.find("]: ")
            && !t[..i].contains(']')
        {
            let target = t[i + 3..].split_whitespace().next().unwrap_or("");
            out.push((n + 1, target.to_string()));
        }
    }
    out
}

fn external(target: &str) -> bool {
    ["http://", "https://", "mailto:", "ftp://"].iter().any(|p| target.starts_with(p))
}

/// What is wrong with `target` in `page`, if anything.
fn check(page: &Path, target: &str) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file: PathBuf = if path.is_empty() { page.to_path_buf() } else { page.parent().unwrap().join(path) };
    if !file.exists() {
        return Some(format!("`{target}`: no such file {}", rel(&file)));
    }
    let anchor = anchor?;
    if file.is_dir() || file.extension().is_none_or(|e| e != "md") {
        return Some(format!("`{target}`: an anchor into a file that is not Markdown"));
    }
    let have = anchors(&read(&file));
    if have.contains(anchor) {
        return None;
    }
    Some(format!("`{target}`: {} has no heading `#{anchor}`", rel(&file)))
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let pages = markdown_files();
    assert!(pages.iter().any(|p| p.ends_with("docs/SUMMARY.md")), "docs/SUMMARY.md is gone");
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in &pages {
        for (line, target) in links(&read(page)) {
            if external(&target) {
                continue;
            }
            checked += 1;
            if let Some(why) = check(page, &target) {
                broken.push(format!("{}:{line}: {why}", rel(page)));
            }
        }
    }
    assert!(checked > 100, "only {checked} relative links found: is the parser still reading links?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn slugs_follow_github_and_mdbook() {
    assert_eq!(slug(" Team state: remote backends and locking"), "team-state-remote-backends-and-locking");
    assert_eq!(slug(" `gpuplan plan`"), "gpuplan-plan");
    assert_eq!(slug(" Floating pools: replay"), "floating-pools-replay");
    assert_eq!(slug(" [Spend](#spend) and more"), "spend-and-more");
    let page = "# A\n\n## Same\n\n```\n# not a heading\n```\n\n## Same\n";
    assert_eq!(anchors(page), ["a", "same", "same-1"].map(String::from).into_iter().collect());
    // Fence lines are not inline code: a heading between two fenced blocks still counts.
    let page = "```text\none\n```\n\n## Between\n\n```text\ntwo\n```\n";
    assert!(anchors(page).contains("between"), "{:?}", anchors(page));
}

#[test]
fn links_in_code_are_not_links() {
    let page = "See [a](a.md) and `[b](b.md)`.\n\n```\n[c](c.md)\n```\n[d]: d.md#x\n";
    let found: Vec<String> = links(page).into_iter().map(|(_, t)| t).collect();
    assert_eq!(found, ["a.md", "d.md#x"]);
}
