//! The expanded YAML tree → the raw tree (see `raw.rs` for how the spellings map).
//!
//! The top level is a mapping of plural kind keys (`gpu_pools:`) to mappings of
//! NAME → attributes; each entry becomes one [`Block`]. `locals:` becomes one label-less
//! block. A provider entry may name its cloud with `type`, so one file can declare two
//! providers of one cloud: `{aws_eu: {type: aws}}` is `provider "aws" { alias = "aws_eu" }`.

use super::scalar::scalar_expr;
use super::tree::{Node, NodeKind};
use crate::diag::{Diagnostic, Diagnostics, Span, did_you_mean};
use crate::spec::raw::{Attr, Block, Body, Expr, ExprKind, Ident, ObjectKey};

/// Top-level keys and the block kind each declares (resources first, in `Kind::ALL` order).
pub(super) const TOP_LEVEL: [(&str, &str); 14] = [
    ("providers", "provider"),
    ("gpu_pools", "gpu_pool"),
    ("quotas", "quota"),
    ("job_templates", "job_template"),
    ("jobs", "job"),
    ("autoscalers", "autoscaler"),
    ("reservations", "reservation"),
    ("variables", "variable"),
    ("locals", "locals"),
    ("outputs", "output"),
    ("gpuplan", "gpuplan"),
    ("moves", "moved"),
    ("removals", "removed"),
    ("imports", "import"),
];

/// The top-level mapping of a var file as attributes (`nodes: 4` → `nodes = 4`). `None`
/// when the top level is not a mapping.
pub(super) fn attrs_of(file: u32, text: &str, root: &Node, diags: &mut Diagnostics) -> Option<Vec<Attr>> {
    if root.is_empty_null() {
        return Some(Vec::new());
    }
    let mut l = Lower { file, text, diags };
    let entries = l.mapping(root, "a YAML var file", "variable names to values")?;
    Some(l.attrs(entries))
}

struct Lower<'a> {
    file: u32,
    text: &'a str,
    diags: &'a mut Diagnostics,
}

/// Lower the document root. `None` when the top level is not a mapping.
pub(super) fn lower(file: u32, text: &str, root: &Node, diags: &mut Diagnostics) -> Option<Body> {
    let whole = Span::new(file, 0, text.len());
    if root.is_empty_null() {
        return Some(Body { span: whole, ..Body::default() });
    }
    let NodeKind::Mapping { entries, .. } = &root.kind else {
        diags.push(
            Diagnostic::error("gpuplan::yaml::not_a_mapping", "the top level of a YAML spec must be a mapping")
                .at(root.span(file), "expected keys such as `gpu_pools:`")
                .help("start the file with block kinds as keys, e.g. `providers:` and `gpu_pools:`"),
        );
        return None;
    };
    let mut l = Lower { file, text, diags };
    let mut body = Body { span: whole, ..Body::default() };
    for (key, value) in entries {
        let Some(kind) = l.key(key) else { continue };
        let Some(&(_, singular)) = TOP_LEVEL.iter().find(|(plural, _)| *plural == kind.name) else {
            l.diags.push(unknown_block(&kind));
            continue;
        };
        let kind = Ident::new(singular, kind.span);
        if value.is_empty_null() {
            continue;
        }
        if crate::spec::adopt::KINDS.contains(&singular) {
            l.adopt_list(&kind, value, key_text(key), &mut body);
            continue;
        }
        let Some(items) = l.mapping(value, &format!("`{}`", key_text(key)), "names to their attributes") else {
            continue;
        };
        if singular == "locals" || singular == "gpuplan" {
            let attrs = l.attrs(items);
            let span = value.span(file);
            body.blocks.push(Block {
                kind: kind.clone(),
                labels: vec![],
                body: Body { attrs, blocks: vec![], span },
                span: kind.span.join(span),
            });
            continue;
        }
        for (name_node, v) in items {
            let Some(name) = l.key(name_node) else { continue };
            let what = format!("`{}.{}`", key_text(key), name.name);
            let block_body = if v.is_empty_null() {
                Body { span: name.span, ..Body::default() }
            } else {
                match l.mapping(v, &what, "attribute names to values") {
                    Some(attrs) => Body { attrs: l.attrs(attrs), blocks: vec![], span: v.span(file) },
                    None => continue,
                }
            };
            let span = name.span.join(block_body.span);
            let mut block = Block { kind: kind.clone(), labels: vec![name], body: block_body, span };
            if singular == "provider" {
                l.provider_type(&mut block);
            }
            body.blocks.push(block);
        }
    }
    Some(body)
}

fn key_text(key: &Node) -> &str {
    key.scalar().map_or("?", |s| s.value.as_str())
}

fn unknown_block(key: &Ident) -> Diagnostic {
    let plurals = TOP_LEVEL.map(|t| t.0);
    let singular = TOP_LEVEL.iter().find(|(p, s)| *s == key.name || p.strip_suffix('s') == Some(key.name.as_str()));
    let help = match (singular, did_you_mean(&key.name, plurals)) {
        (Some((plural, _)), _) if *plural != key.name => {
            format!("did you mean `{plural}`? YAML uses the plural, with one entry per name under it")
        }
        (_, Some(best)) => format!("did you mean `{best}`?"),
        _ => format!("top-level keys are: {}", plurals.join(", ")),
    };
    Diagnostic::error("gpuplan::spec::unknown_block", format!("unknown top-level key `{}`", key.name))
        .at(key.span, "not a kind of block")
        .help(help)
}

impl Lower<'_> {
    /// A mapping key as an identifier (keys must be scalars).
    fn key(&mut self, key: &Node) -> Option<Ident> {
        match key.scalar() {
            Some(s) => Some(Ident::new(s.value.clone(), key.span(self.file))),
            None => {
                self.diags.push(
                    Diagnostic::error("gpuplan::yaml::complex_key", "mapping keys must be plain names")
                        .at(key.span(self.file), "a list or mapping used as a key")
                        .help("use a name such as `train` as the key"),
                );
                None
            }
        }
    }

    /// `moves:` (and `removals:`, `imports:`): a list of maps, each one label-less block.
    fn adopt_list(&mut self, kind: &Ident, value: &Node, plural: &str, body: &mut Body) {
        let NodeKind::Sequence { items, .. } = &value.kind else {
            self.diags.push(
                Diagnostic::error("gpuplan::yaml::expected_list", format!("`{plural}` must be a list of mappings"))
                    .at(value.span(self.file), "expected a list here")
                    .help(format!("write `{plural}:` then one `- from: ...` entry per block")),
            );
            return;
        };
        for item in items {
            let what = format!("an entry of `{plural}`");
            let Some(entries) = self.mapping(item, &what, "attribute names to values") else { continue };
            let span = item.span(self.file);
            let attrs = self.attrs(entries);
            body.blocks.push(Block {
                kind: Ident::new(kind.name.clone(), span),
                labels: vec![],
                body: Body { attrs, blocks: vec![], span },
                span,
            });
        }
    }

    fn mapping<'n>(&mut self, node: &'n Node, what: &str, of: &str) -> Option<&'n [(Node, Node)]> {
        if let NodeKind::Mapping { entries, .. } = &node.kind {
            return Some(entries);
        }
        self.diags.push(
            Diagnostic::error("gpuplan::yaml::expected_mapping", format!("{what} must be a mapping of {of}"))
                .at(node.span(self.file), "expected a mapping here")
                .help("write `name:` on its own line and indent the entries under it by 2 spaces"),
        );
        None
    }

    fn attrs(&mut self, entries: &[(Node, Node)]) -> Vec<Attr> {
        let mut attrs: Vec<Attr> = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            // A duplicate key was reported already; keep the first so it is not reported twice.
            let Some(key) = self.key(k) else { continue };
            if attrs.iter().all(|a| a.key.name != key.name) {
                let value = self.expr(v);
                attrs.push(Attr { key, value });
            }
        }
        attrs
    }

    fn expr(&mut self, node: &Node) -> Expr {
        let span = node.span(self.file);
        match &node.kind {
            NodeKind::Scalar(s) => scalar_expr(self.file, self.text, node, s, self.diags),
            NodeKind::Sequence { items, .. } => {
                Expr::new(ExprKind::Array(items.iter().map(|n| self.expr(n)).collect()), span)
            }
            NodeKind::Mapping { entries, .. } => {
                let items =
                    entries.iter().filter_map(|(k, v)| Some((ObjectKey::Name(self.key(k)?), self.expr(v)))).collect();
                Expr::new(ExprKind::Object(items), span)
            }
            // Expansion replaced every alias; an empty value is the safe reading if one is left.
            NodeKind::Alias(_) => Expr::new(ExprKind::Null, span),
        }
    }

    /// `NAME: {type: aws}` → label `aws`, and `alias = NAME` unless an alias is given.
    fn provider_type(&mut self, block: &mut Block) {
        let Some(i) = block.body.attrs.iter().position(|a| a.key.name == "type") else { return };
        let attr = block.body.attrs.remove(i);
        let ExprKind::String(cloud) = &attr.value.kind else {
            self.diags.push(
                Diagnostic::error("gpuplan::yaml::provider_type", "a provider's `type` must be a provider name")
                    .at(attr.value.span, "expected a name such as `aws` or `sim`")
                    .help("write e.g. `type: aws`; the entry's key then becomes the provider's alias"),
            );
            return;
        };
        let Some(name) = block.labels.first().cloned() else { return };
        if name.name != *cloud && block.body.attr("alias").is_none() {
            let value = Expr::new(ExprKind::String(name.name.clone()), name.span);
            block.body.attrs.push(Attr { key: Ident::new("alias", attr.key.span), value });
        }
        block.labels = vec![Ident::new(cloud.clone(), attr.value.span)];
    }
}
