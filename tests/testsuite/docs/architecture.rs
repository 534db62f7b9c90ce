//! `ARCHITECTURE.md` is the module map: it has a section (`` ### `NAME` ``) for every
//! top-level module of `src/`, so a new module cannot go unmapped. And the contracts live
//! in the repository (`docs/design/`): no file points at a folder outside it.

use std::path::Path;

use super::{read, rel, root};

/// Top-level modules: `src/NAME.rs` and `src/NAME/`, the crate roots left out.
fn top_modules() -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root().join("src")).expect("src/ reads") {
        let path = e.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).expect("utf-8 name").to_string();
        if path.is_dir() || (path.extension().is_some_and(|x| x == "rs") && name != "lib" && name != "main") {
            out.push(name);
        }
    }
    out.sort();
    out
}

#[test]
fn architecture_names_every_top_level_module() {
    let map = read(&root().join("ARCHITECTURE.md"));
    let modules = top_modules();
    assert!(modules.len() > 10 && modules.contains(&"par".to_string()), "{modules:?}");
    let missing: Vec<_> = modules.iter().filter(|m| !map.contains(&format!("### `{m}`"))).collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md has no `### `NAME`` section for: {missing:?}");
    let gone: Vec<_> = map
        .lines()
        .filter_map(|l| l.strip_prefix("### `")?.split('`').next())
        .filter(|m| !modules.iter().any(|x| x == m))
        .map(String::from)
        .collect();
    assert!(gone.is_empty(), "ARCHITECTURE.md maps modules that src/ no longer has: {gone:?}");
}

fn text_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            if !(name.starts_with("target") || name.starts_with('.') || name == "state" || name == "book") {
                text_files(&path, out);
            }
        } else if std::fs::read_to_string(&path).is_ok() {
            out.push(path);
        }
    }
}

#[test]
fn no_file_cites_contracts_outside_the_repository() {
    // Spelled in pieces so that this file does not match itself.
    let outside = [format!("../{}/", "shared"), format!("{}/reference/", "shared")];
    let old_names = [format!("{}.md", "DESIGN"), format!("{}.md", "STYLE")];
    let mut files = Vec::new();
    text_files(&root(), &mut files);
    let mut found = Vec::new();
    for f in &files {
        let text = read(f);
        for (n, line) in text.lines().enumerate() {
            let hit = outside.iter().chain(&old_names).find(|p| line.contains(p.as_str()));
            if let Some(p) = hit {
                found.push(format!("{}:{}: cites `{p}`", rel(f), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "cite the contracts in docs/design/ and the module map in ARCHITECTURE.md instead:\n{}",
        found.join("\n")
    );
}
