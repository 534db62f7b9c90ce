//! The module graph stays one-way (`ARCHITECTURE.md`, "Layers"): reads every
//! `crate::` path in `src/` (comments and string literals skipped, grouped `use crate::{a,
//! b::c}` expanded) and fails on any cycle between top-level modules, and on any use of a
//! module from a higher layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of ARCHITECTURE.md's module map, lowest first. A module may use modules of its own
/// layer or below (never in a cycle); `lib.rs` and `main.rs` are the crate's roots.
const LAYERS: &[&[&str]] = &[
    &["model", "addr", "diag", "json_text", "par", "hex"],
    &["spec", "catalog", "health"],
    &["state", "graph"],
    &["providers"],
    &["plan", "jobs", "cost", "policy", "autoscale"],
    &["apply"],
    &["engine", "reconcile", "render", "testing"],
    &["cli", "metrics", "schema"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Top-level modules: `src/NAME.rs` and `src/NAME/`.
fn top_modules() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(src()).expect("src/ reads") {
        let path = e.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).expect("utf-8 name").to_string();
        if path.is_dir() || (path.extension().is_some_and(|x| x == "rs") && name != "lib" && name != "main") {
            out.insert(name);
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("dir reads") {
        let path = e.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The code of a Rust file with comments and string/char literals blanked out, so that
/// doc links and messages that mention `crate::x` are not counted as uses.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            // Block comments nest in Rust.
            let mut depth = 0;
            let mut j = 0;
            while j < rest.len() {
                if rest[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            i += j;
            out.push(' ');
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let prefix = usize::from(rest.starts_with('b'));
            let open_len = prefix + 2 + hashes; // (b) r, hashes, quote
            let body = &rest[open_len..];
            let end = body.find(&close).map(|e| e + close.len()).unwrap_or(body.len());
            i += open_len + end;
            out.push_str("\"\"");
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < b.len() - i {
                match b[i + j] {
                    b'\\' => j += 2,
                    b'"' => {
                        j += 1;
                        break;
                    }
                    _ => j += 1,
                }
            }
            i += j;
            out.push_str("\"\"");
        } else if let Some(len) = char_literal_len(rest) {
            i += len;
            out.push_str("' '");
        } else {
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `r"`, `r#"`, `br##"`…: the number of `#`s of a raw string starting here.
fn raw_string_start(s: &str) -> Option<usize> {
    let s = s.strip_prefix('b').unwrap_or(s);
    let s = s.strip_prefix('r')?;
    let hashes = s.bytes().take_while(|c| *c == b'#').count();
    (s.as_bytes().get(hashes) == Some(&b'"')).then_some(hashes)
}

/// `'x'`, `'\n'`, `'\''`, `'"'`: a char literal's length; `None` for a lifetime.
fn char_literal_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.first() != Some(&b'\'') {
        return None;
    }
    if b.get(1) == Some(&b'\\') {
        let close = s[2..].find('\'')?;
        return Some(2 + close + 1);
    }
    let c = s[1..].chars().next()?;
    let after = 1 + c.len_utf8();
    (b.get(after) == Some(&b'\'')).then_some(after + 1)
}

/// The top-level modules a file's code names through `crate::`.
fn uses(code: &str, tops: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `foo_crate::x`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a, b::{c, d}, e}`: the first segment of each top-level item.
            let mut depth = 0;
            let mut item_start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => {
                        let name: String =
                            group[k..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                        if tops.contains(&name) {
                            found.insert(name);
                        }
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if tops.contains(&name) {
                found.insert(name);
            }
        }
    }
    found
}

/// Edges `from → to` with one file that makes each.
fn module_graph() -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let tops = top_modules();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut edges: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src()).expect("under src/");
        let first = rel.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
        let from = first.strip_suffix(".rs").unwrap_or(&first).to_string();
        if !tops.contains(&from) {
            continue; // lib.rs, main.rs
        }
        let text = std::fs::read_to_string(&file).expect("source reads");
        for to in uses(&code_only(&text), &tops) {
            if to != from {
                edges.entry(from.clone()).or_default().entry(to).or_insert_with(|| rel.to_path_buf());
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeMap<String, PathBuf>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, PathBuf>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        if let Some(next) = t.edges.get(v) {
            for w in next.keys() {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    t.low.insert(v, t.low[v].min(lw));
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    t.low.insert(v, t.low[v].min(iw));
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

#[test]
fn no_cycle_between_top_level_modules() {
    let edges = module_graph();
    let found = cycles(&edges);
    let mut msg = String::new();
    for comp in &found {
        msg.push_str(&format!("cycle: {}\n", comp.join(", ")));
        for a in comp {
            for (b, file) in edges.get(a).into_iter().flatten() {
                if comp.contains(b) {
                    msg.push_str(&format!("  {a} -> {b}  (e.g. src/{})\n", file.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "the module graph must be one-way:\n{msg}");
}

#[test]
fn modules_use_only_their_layer_and_below() {
    let tops = top_modules();
    let unplaced: Vec<&String> = tops.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(unplaced.is_empty(), "place these modules in LAYERS (and ARCHITECTURE.md's map): {unplaced:?}");
    let mut upward = Vec::new();
    for (from, tos) in module_graph() {
        for (to, file) in tos {
            if layer_of(&to) > layer_of(&from) {
                upward.push(format!(
                    "{from} (layer {:?}) -> {to} (layer {:?}) in src/{}",
                    layer_of(&from),
                    layer_of(&to),
                    file.display()
                ));
            }
        }
    }
    assert!(upward.is_empty(), "uses of a higher layer:\n{}", upward.join("\n"));
}

/// The scanner itself: comments, strings and grouped imports.
#[test]
fn the_scanner_reads_paths_not_prose() {
    let tops: BTreeSet<String> = ["spec", "plan", "state", "cost"].map(String::from).into();
    let code = code_only(
        "//! see [`crate::plan`]\nuse crate::{spec::Spec, state::{State, x}};\nlet s = \"crate::cost\";\n/* crate::cost */ let c = '\"'; fn f<'a>() { crate::plan::x() }",
    );
    assert_eq!(uses(&code, &tops), ["plan", "spec", "state"].map(String::from).into());
    let edges: BTreeMap<String, BTreeMap<String, PathBuf>> = [
        ("a".to_string(), [("b".to_string(), PathBuf::from("a.rs"))].into()),
        ("b".to_string(), [("a".to_string(), PathBuf::from("b.rs"))].into()),
    ]
    .into();
    assert_eq!(cycles(&edges), vec![vec!["a".to_string(), "b".to_string()]]);
}

/// Files outside `src/providers/kube/` that may still name `k8s_openapi`, each with why.
const K8S_WIRE_ELSEWHERE: &[(&str, &str)] = &[(
    "reconcile/leader.rs",
    "leader election on a coordination.k8s.io Lease: the reconcile runtime's, not a provider's",
)];

/// Kubernetes wire types (`k8s_openapi`) stay inside the Kubernetes backend: jobs, plans
/// and the CLI speak the crate's own types (ARCHITECTURE.md, "providers").
#[test]
fn kubernetes_wire_types_stay_in_providers_kube() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let kube = src().join("providers").join("kube");
    let mut outside = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(&kube)) {
        let rel = file.strip_prefix(src()).expect("under src/").to_string_lossy().replace('\\', "/");
        if K8S_WIRE_ELSEWHERE.iter().any(|(f, _)| *f == rel) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("source reads");
        if names_k8s_wire(&code_only(&text)) {
            outside.push(format!("src/{rel}"));
        }
    }
    assert!(
        outside.is_empty(),
        "k8s_openapi is named outside src/providers/kube/ (build the objects there):\n{}",
        outside.join("\n")
    );
}

/// Does this code (comments and strings already blanked) name the `k8s_openapi` crate?
fn names_k8s_wire(code: &str) -> bool {
    code.match_indices("k8s_openapi").any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + "k8s_openapi".len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn the_wire_scanner_reads_paths_not_prose() {
    assert!(names_k8s_wire(&code_only("use k8s_openapi::api::batch::v1::Job;")));
    assert!(names_k8s_wire(&code_only("fn f() -> ::k8s_openapi::api::core::v1::Pod { todo!() }")));
    assert!(!names_k8s_wire(&code_only("//! typed `k8s_openapi` objects\nlet s = \"k8s_openapi\";")));
    assert!(!names_k8s_wire(&code_only("use my_k8s_openapi_shim::X;")));
}
