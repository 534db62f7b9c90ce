//! Checks and rewrites on the syntax tree that give it its meaning: duplicate keys,
//! alias expansion (by cloning, with a size cap against "billion laughs" documents) and
//! `<<` merge keys. The formatter never runs this: it works on the text as written.

use std::collections::{HashMap, HashSet};

use saphyr_parser::ScalarStyle;

use super::tree::{MAX_DEPTH, Node, NodeKind, too_deep};
use crate::diag::{Diagnostic, Diagnostics};

/// Most nodes a document may expand to once aliases are replaced by copies.
pub(super) const MAX_NODES: usize = 100_000;

/// Report every key that appears twice in one mapping (keys compared by their text).
pub(super) fn check_duplicate_keys(file: u32, node: &Node, diags: &mut Diagnostics) {
    match &node.kind {
        NodeKind::Mapping { entries, .. } => {
            let mut seen: HashMap<&str, &Node> = HashMap::new();
            for (k, v) in entries {
                if let Some(s) = k.scalar() {
                    if let Some(first) = seen.get(s.value.as_str()) {
                        diags.push(
                            Diagnostic::error("gpuplan::yaml::duplicate_key", format!("duplicate key `{}`", s.value))
                                .at(k.span(file), "defined again here")
                                .at(first.span(file), "first defined here")
                                .help("a key may appear once per mapping; remove one of them or merge their contents"),
                        );
                    } else {
                        seen.insert(&s.value, k);
                    }
                }
                check_duplicate_keys(file, v, diags);
            }
        }
        NodeKind::Sequence { items, .. } => items.iter().for_each(|n| check_duplicate_keys(file, n, diags)),
        NodeKind::Scalar(_) | NodeKind::Alias(_) => {}
    }
}

/// The tree with every alias replaced by a copy of its anchored node and merge keys
/// applied. Fails (with a diagnostic pushed) past [`MAX_NODES`] nodes or [`MAX_DEPTH`].
pub(super) fn expand(file: u32, root: &Node, diags: &mut Diagnostics) -> Option<Node> {
    let mut anchors = HashMap::new();
    collect_anchors(root, &mut anchors);
    let mut ex = Expander { file, anchors, count: 0 };
    match ex.expand(root, 0) {
        Ok(n) => Some(n),
        Err(d) => {
            diags.push(d);
            None
        }
    }
}

fn collect_anchors<'t>(node: &'t Node, out: &mut HashMap<usize, &'t Node>) {
    if node.anchor != 0 {
        out.insert(node.anchor, node);
    }
    match &node.kind {
        NodeKind::Mapping { entries, .. } => entries.iter().for_each(|(k, v)| {
            collect_anchors(k, out);
            collect_anchors(v, out);
        }),
        NodeKind::Sequence { items, .. } => items.iter().for_each(|n| collect_anchors(n, out)),
        NodeKind::Scalar(_) | NodeKind::Alias(_) => {}
    }
}

struct Expander<'t> {
    file: u32,
    anchors: HashMap<usize, &'t Node>,
    count: usize,
}

impl Expander<'_> {
    /// `depth` is the nesting depth of `node` in the expanded tree, so recursion here is
    /// bounded by [`MAX_DEPTH`] however the aliases chain.
    fn expand(&mut self, node: &Node, depth: usize) -> Result<Node, Diagnostic> {
        self.count += 1;
        if self.count > MAX_NODES {
            return Err(Diagnostic::error(
                "gpuplan::yaml::too_large",
                format!("expanding aliases makes this document larger than {MAX_NODES} values"),
            )
            .at(node.span(self.file), "expansion stopped here")
            .help("aliases that repeat other aliases grow exponentially; write the values out instead"));
        }
        if depth > MAX_DEPTH {
            return Err(too_deep(self.file, node.body, node.end));
        }
        let kind = match &node.kind {
            NodeKind::Alias(id) => {
                let Some(target) = self.anchors.get(id).copied() else {
                    return Err(Diagnostic::error("gpuplan::yaml::unknown_alias", "alias to an unknown anchor")
                        .at(node.span(self.file), "no anchor for this alias"));
                };
                // The copy keeps the anchored node's inner spans but sits at the alias.
                let copy = self.expand(target, depth)?;
                return Ok(Node { start: node.start, body: node.body, end: node.end, anchor: 0, ..copy });
            }
            NodeKind::Scalar(_) => node.kind.clone(),
            NodeKind::Sequence { items, flow } => {
                let items = items.iter().map(|n| self.expand(n, depth + 1)).collect::<Result<_, _>>()?;
                NodeKind::Sequence { items, flow: *flow }
            }
            NodeKind::Mapping { entries, flow } => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    out.push((self.expand(k, depth + 1)?, self.expand(v, depth + 1)?));
                }
                NodeKind::Mapping { entries: self.merge(out)?, flow: *flow }
            }
        };
        Ok(Node { kind, start: node.start, body: node.body, end: node.end, anchor: node.anchor })
    }

    /// Apply `<<: *base` / `<<: [*a, *b]`: merged keys never override keys written in the
    /// mapping itself, and earlier sources win over later ones.
    fn merge(&self, entries: Vec<(Node, Node)>) -> Result<Vec<(Node, Node)>, Diagnostic> {
        if !entries.iter().any(|(k, _)| is_merge_key(k)) {
            return Ok(entries);
        }
        let explicit: HashSet<String> = entries
            .iter()
            .filter(|(k, _)| !is_merge_key(k))
            .filter_map(|(k, _)| k.scalar().map(|s| s.value.clone()))
            .collect();
        let mut merged_keys = HashSet::new();
        let mut out = Vec::new();
        for (k, v) in entries {
            if !is_merge_key(&k) {
                out.push((k, v));
                continue;
            }
            let sources = match v.kind {
                NodeKind::Mapping { .. } => vec![v],
                NodeKind::Sequence { items, .. } => items,
                _ => vec![v],
            };
            for source in sources {
                let NodeKind::Mapping { entries, .. } = source.kind else {
                    return Err(Diagnostic::error(
                        "gpuplan::yaml::bad_merge",
                        "`<<` must merge a mapping or a list of mappings",
                    )
                    .at(source.span(self.file), "not a mapping")
                    .help("write `<<: *anchor` where `&anchor` names a mapping"));
                };
                for (mk, mv) in entries {
                    let name = mk.scalar().map(|s| s.value.clone());
                    let keep = match &name {
                        Some(n) => !explicit.contains(n) && merged_keys.insert(n.clone()),
                        None => true,
                    };
                    if keep {
                        out.push((mk, mv));
                    }
                }
            }
        }
        Ok(out)
    }
}

fn is_merge_key(k: &Node) -> bool {
    matches!(&k.kind, NodeKind::Scalar(s) if s.value == "<<" && s.style == ScalarStyle::Plain && s.tag.is_none())
}
