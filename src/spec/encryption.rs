//! The `gpuplan { encryption { ... } }` block (docs/design/secrets.md, "Encryption at
//! rest"): which key provider seals the state, journal and saved plans, and the fallback
//! that still reads them during a rotation. YAML writes it `gpuplan: {encryption:
//! {key_provider: {passphrase: {passphrase_env: NAME}}, fallback: {key_provider: ...}}}`.
//!
//! Literal values only, as in the backend block: the state is opened before variables
//! exist. A secret itself never belongs here: a passphrase is named by its environment
//! variable, a KMS key by its id.

use crate::diag::{Diagnostic, Diagnostics, Span, did_you_mean};
use crate::model::encryption::{EncryptionConfig, KeyProviderConfig, KmsKey};
use crate::spec::raw::{Block, Expr, ExprKind, ObjectKey, TemplatePart};

/// The key provider kinds and their settings (required ones marked `*`).
const KINDS: &[(&str, &[&str])] =
    &[("passphrase", &["*passphrase_env"]), ("aws_kms", &["*key_id", "*region", "endpoint"])];

const CODE: &str = "gpuplan::encryption";

/// A block or a YAML mapping, seen the same way: settings and nested sections.
struct Section<'a> {
    span: Span,
    attrs: Vec<(&'a str, Span, &'a Expr)>,
    /// `(kind, label, section)`: HCL `key_provider "passphrase" { }`, YAML
    /// `key_provider: {passphrase: {...}}`.
    children: Vec<(&'a str, Option<(String, Span)>, Section<'a>)>,
}

/// Decode the `encryption` of every `gpuplan` block (at most one may set it).
pub fn decode(blocks: &[&Block], diags: &mut Diagnostics) -> Option<EncryptionConfig> {
    let mut sections = Vec::new();
    for b in blocks {
        sections.extend(b.body.blocks.iter().filter(|i| i.kind.name == "encryption").map(|i| of_block(i, diags)));
        for a in b.body.attrs.iter().filter(|a| a.key.name == "encryption") {
            sections.extend(of_mapping(&a.value, diags));
        }
    }
    let (first, rest) = sections.split_first()?;
    for again in rest {
        diags.push(
            Diagnostic::error(CODE, "encryption is configured twice")
                .at(again.span, "second `encryption` block")
                .at(first.span, "first configured here")
                .help("keep one `encryption` block for the whole spec directory"),
        );
    }
    encryption(first, diags)
}

fn of_block<'a>(b: &'a Block, diags: &mut Diagnostics) -> Section<'a> {
    // A key provider's label is its kind; no other block here takes one.
    for extra in b.labels.iter().filter(|_| b.kind.name != "key_provider") {
        diags.push(Diagnostic::error(CODE, format!("`{}` takes no label", b.kind.name)).at(extra.span, "a label"));
    }
    Section {
        span: b.span,
        attrs: b.body.attrs.iter().map(|a| (a.key.name.as_str(), a.key.span, &a.value)).collect(),
        children: b
            .body
            .blocks
            .iter()
            .map(|c| {
                let label = c.labels.first().map(|l| (l.name.clone(), l.span));
                (c.kind.name.as_str(), label, of_block(c, diags))
            })
            .collect(),
    }
}

/// YAML: a mapping whose mapping-valued keys are sections; `key_provider` maps its kind
/// to the settings.
fn of_mapping<'a>(e: &'a Expr, diags: &mut Diagnostics) -> Option<Section<'a>> {
    let ExprKind::Object(items) = &e.kind else {
        diags.push(Diagnostic::error(CODE, "expected a mapping").at(e.span, "not a mapping"));
        return None;
    };
    let mut section = Section { span: e.span, attrs: Vec::new(), children: Vec::new() };
    for (key, value) in items {
        let ObjectKey::Name(id) = key else {
            diags.push(Diagnostic::error(CODE, "setting names must be plain names").at(value.span, "here"));
            continue;
        };
        match (&value.kind, id.name.as_str()) {
            (ExprKind::Object(kinds), "key_provider") if kinds.len() == 1 => {
                let (ObjectKey::Name(kind), inner) = &kinds[0] else { continue };
                let label = Some((kind.name.clone(), kind.span));
                section.children.extend(of_mapping(inner, diags).map(|s| ("key_provider", label, s)));
            }
            (ExprKind::Object(_), "key_provider") => diags.push(
                Diagnostic::error(CODE, "`key_provider` must map one kind to its settings")
                    .at(value.span, "expected one kind")
                    .help("write `key_provider: {passphrase: {passphrase_env: NAME}}`"),
            ),
            (ExprKind::Object(_), name) => section.children.extend(of_mapping(value, diags).map(|s| (name, None, s))),
            (_, name) => section.attrs.push((name, id.span, value)),
        }
    }
    Some(section)
}

fn encryption(s: &Section, diags: &mut Diagnostics) -> Option<EncryptionConfig> {
    let errors = diags.error_count();
    for (name, span, _) in &s.attrs {
        unknown(
            name,
            *span,
            "the `encryption` block holds `key_provider \"KIND\" { ... }` and `fallback { ... }`",
            diags,
        );
    }
    let mut key_provider = None;
    let mut fallback = None;
    for (kind, label, child) in &s.children {
        match *kind {
            "key_provider" => set(&mut key_provider, provider(label.as_ref(), child, diags), child.span, diags),
            "fallback" => set(&mut fallback, fallback_of(child, diags), child.span, diags),
            other => unknown(other, child.span, "the `encryption` block holds `key_provider` and `fallback`", diags),
        }
    }
    let Some(key_provider) = key_provider else {
        if diags.error_count() == errors {
            diags.push(
                Diagnostic::error(CODE, "`encryption` needs a `key_provider`")
                    .at(s.span, "no key provider")
                    .help("add `key_provider \"passphrase\" { passphrase_env = \"GPUPLAN_STATE_PASSPHRASE\" }`"),
            );
        }
        return None;
    };
    (diags.error_count() == errors).then_some(EncryptionConfig { key_provider, fallback })
}

fn fallback_of(s: &Section, diags: &mut Diagnostics) -> Option<KeyProviderConfig> {
    for (name, span, _) in &s.attrs {
        unknown(name, *span, "`fallback` holds one `key_provider \"KIND\" { ... }`", diags);
    }
    let mut found = None;
    for (kind, label, child) in &s.children {
        if *kind == "key_provider" {
            set(&mut found, provider(label.as_ref(), child, diags), child.span, diags);
        } else {
            unknown(kind, child.span, "`fallback` holds one `key_provider \"KIND\" { ... }`", diags);
        }
    }
    if found.is_none() && s.children.is_empty() {
        diags.push(
            Diagnostic::error(CODE, "`fallback` needs a `key_provider`")
                .at(s.span, "empty fallback")
                .help("put the old key provider here while `gpuplan state rekey` moves the files to the new one"),
        );
    }
    found
}

fn provider(label: Option<&(String, Span)>, s: &Section, diags: &mut Diagnostics) -> Option<KeyProviderConfig> {
    let Some((kind, kind_span)) = label else {
        diags.push(
            Diagnostic::error(CODE, "`key_provider` needs its kind")
                .at(s.span, "no kind")
                .help("write `key_provider \"passphrase\" { ... }` or `key_provider \"aws_kms\" { ... }`"),
        );
        return None;
    };
    let Some((_, names)) = KINDS.iter().find(|(k, _)| k == kind) else {
        let d = Diagnostic::error(CODE, format!("unknown key provider `{kind}`")).at(*kind_span, "not a key provider");
        diags.push(match did_you_mean(kind, KINDS.iter().map(|(k, _)| *k)) {
            Some(m) => d.help(format!("did you mean `{m}`? key providers: passphrase, aws_kms")),
            None => d.help("key providers: passphrase, aws_kms"),
        });
        return None;
    };
    let plain: Vec<&str> = names.iter().map(|n| n.trim_start_matches('*')).collect();
    let mut values = std::collections::BTreeMap::new();
    for (name, span, value) in &s.attrs {
        if !plain.contains(name) {
            let d =
                Diagnostic::error(CODE, format!("key provider `{kind}` has no setting `{name}`")).at(*span, "unknown");
            diags.push(
                match (did_you_mean(name, plain.iter().copied()), *kind == "passphrase" && *name == "passphrase") {
                    (_, true) => d.help("name the environment variable that holds it: `passphrase_env = \"NAME\"`"),
                    (Some(m), _) => d.help(format!("did you mean `{m}`? settings: {}", plain.join(", "))),
                    (None, _) => d.help(format!("settings: {}", plain.join(", "))),
                },
            );
            continue;
        }
        match literal(value).filter(|v| !v.trim().is_empty()) {
            Some(v) => {
                values.insert(*name, v);
            }
            None => diags.push(
                Diagnostic::error(CODE, format!("`{name}` must be a literal, non-empty string"))
                    .at(value.span, "not a literal")
                    .help("encryption is set up before variables exist: write the value itself"),
            ),
        }
    }
    for (child, _, c) in &s.children {
        unknown(child, c.span, &format!("key provider `{kind}` takes settings, not blocks"), diags);
    }
    let missing: Vec<&str> =
        names.iter().filter_map(|n| n.strip_prefix('*')).filter(|n| !s.attrs.iter().any(|a| a.0 == *n)).collect();
    if !missing.is_empty() {
        diags.push(
            Diagnostic::error(CODE, format!("key provider `{kind}` needs `{}`", missing.join("`, `")))
                .at(*kind_span, "missing settings")
                .help(format!("required: {}", missing.join(", "))),
        );
        return None;
    }
    let get = |n: &str| values.get(n).cloned();
    match kind.as_str() {
        "passphrase" => Some(KeyProviderConfig::Passphrase { passphrase_env: get("passphrase_env")? }),
        _ => Some(KeyProviderConfig::AwsKms(KmsKey {
            key_id: get("key_id")?,
            region: get("region")?,
            endpoint: get("endpoint"),
        })),
    }
}

fn set<T>(found: &mut Option<T>, value: Option<T>, span: Span, diags: &mut Diagnostics) {
    match (found.is_some(), value) {
        (true, Some(_)) => diags.push(
            Diagnostic::error(CODE, "one `key_provider` per place")
                .at(span, "a second one")
                .help("the old key goes in `fallback { key_provider ... }`"),
        ),
        (false, Some(v)) => *found = Some(v),
        (_, None) => {}
    }
}

fn unknown(name: &str, span: Span, help: &str, diags: &mut Diagnostics) {
    diags.push(
        Diagnostic::error(CODE, format!("`{name}` is not a setting here")).at(span, "unknown").help(help.to_string()),
    );
}

/// The text of a literal string (a template with no interpolation).
fn literal(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::String(s) => Some(s.clone()),
        ExprKind::Template(parts) => parts
            .iter()
            .map(|p| match p {
                TemplatePart::Literal(s) => Some(s.as_str()),
                TemplatePart::Interp(_) => None,
            })
            .collect(),
        _ => None,
    }
}

/// Whether a `gpuplan` block's attribute or nested block is this module's.
pub fn owns(name: &str) -> bool {
    name == "encryption"
}
