//! The graph between files: an edge from a file to the file of every module its code
//! names by a `crate::`, `super::` or `self::` path (grouped `use a::{b, c::d}` expanded to
//! `a::b` and `a::c`), resolved to the longest path that is a module of `src/`. A file's
//! own module and its ancestors make no edge (a child may use its parent's items); a
//! strongly connected group of two or more files is a circle.

use std::collections::{BTreeMap, BTreeSet};

use super::Source;

/// Module (`plan/pool`) → modules it names → one path that names it.
pub type Edges = BTreeMap<String, BTreeMap<String, String>>;

pub fn file_graph(sources: &[Source]) -> Edges {
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let mut edges = Edges::new();
    for s in sources {
        let from = s.module.join("/");
        let out = edges.entry(from).or_default();
        for (path, targets) in paths(&s.code) {
            for segs in targets {
                let Some(to) = resolve(&s.module, &segs, &modules) else { continue };
                if to != s.module && !s.module.starts_with(&to) {
                    out.entry(to.join("/")).or_insert_with(|| path.clone());
                }
            }
        }
    }
    edges
}

/// Every `crate::`/`super::`/`self::` path in `code`, with the segment lists it names.
fn paths(code: &str) -> Vec<(String, Vec<Vec<String>>)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let Some(word) = ["crate::", "super::", "self::"].into_iter().find(|w| rest.starts_with(w)) else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        if code[..i].chars().next_back().is_some_and(ident) {
            i += word.len();
            continue;
        }
        let (len, targets) = segments(rest);
        out.push((rest[..len].to_string(), targets));
        i += len.max(word.len());
    }
    out
}

/// The segments of the path that starts `s` (`super::a::{b, c::d}` → `[super, a, b]`,
/// `[super, a, c]`), and its length.
fn segments(s: &str) -> (usize, Vec<Vec<String>>) {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut prefix = Vec::new();
    let mut at = 0;
    loop {
        let name: String = s[at..].chars().take_while(|c| ident(*c)).collect();
        if name.is_empty() {
            return (at, vec![prefix]);
        }
        prefix.push(name.clone());
        at += name.len();
        if !s[at..].starts_with("::") {
            return (at, vec![prefix]);
        }
        at += 2;
        if s[at..].starts_with('{') {
            let (len, items) = group(&s[at..]);
            let kept: Vec<Vec<String>> = items
                .into_iter()
                .filter(|i| i != "self" && i != "*")
                .map(|i| prefix.iter().cloned().chain([i]).collect())
                .collect();
            return (at + len, if kept.is_empty() { vec![prefix] } else { kept });
        }
    }
}

/// `{a, b::c, d::{e}}` → the first segment of each item (`a`, `b`, `d`), and its length.
fn group(s: &str) -> (usize, Vec<String>) {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, true);
    for (k, c) in s.char_indices() {
        match c {
            '{' => {
                depth += 1;
                start = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return (k + 1, items);
                }
            }
            ',' if depth == 1 => start = true,
            c if start && depth == 1 && (c.is_alphanumeric() || c == '_' || c == '*') => {
                let name: String =
                    s[k..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '*').collect();
                items.push(name);
                start = false;
            }
            c if c.is_whitespace() => {}
            _ => start = false,
        }
    }
    (s.len(), items)
}

/// The module a path names: `crate` is the root, `self` the file's module, `super` its
/// parent; the longest prefix of what follows that is a module.
fn resolve(module: &[String], segs: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.to_vec();
    let mut i = 0;
    if segs.first().is_some_and(|s| s == "crate") {
        base.clear();
        i = 1;
    } else {
        while let Some(s) = segs.get(i).filter(|s| *s == "self" || *s == "super") {
            if s == "super" {
                base.pop();
            }
            i += 1;
        }
    }
    let mut parts: Vec<String> = base.into_iter().chain(segs[i..].iter().cloned()).collect();
    while !parts.is_empty() && !modules.contains(&parts) {
        parts.pop();
    }
    (!parts.is_empty()).then_some(parts)
}

/// Strongly connected groups of two or more modules, each sorted (Tarjan).
pub fn circles(edges: &Edges) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a Edges,
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
        for w in t.edges.get(v).into_iter().flat_map(BTreeMap::keys) {
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
    t.out.sort();
    t.out
}

/// A circle and the paths that make it, for the failure message.
pub fn explain(circle: &[String], edges: &Edges) -> String {
    let mut msg = format!("circle: {}", circle.join(" <-> "));
    for a in circle {
        for (b, path) in edges.get(a).into_iter().flatten().filter(|(b, _)| circle.contains(b)) {
            msg.push_str(&format!("\n  src/{a} -> src/{b}: `{path}`"));
        }
    }
    msg
}
