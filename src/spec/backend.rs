//! The `gpuplan { backend "KIND" { ... } }` block: where the state lives
//! (docs/design/state-and-locks.md, "Team state"). YAML writes it `gpuplan: {backend: {s3:
//! {...}}}`.
//!
//! Only literal values are accepted (as in Terraform's backend blocks): the backend is
//! needed before anything else is evaluated, and credentials never belong here; they
//! come from each store's own environment and profile chain.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diag::{Diagnostic, Diagnostics, Span, did_you_mean};
use crate::spec::raw::{Attr, Block, Expr, ExprKind, ObjectKey, TemplatePart};

/// The backend kinds and, for each, its attributes (required ones first, marked `*`).
const KINDS: &[(&str, &[&str])] = &[
    ("local", &["path"]),
    ("s3", &["*bucket", "*key", "region", "endpoint", "force_path_style", "lock_mode", "profile"]),
    ("gcs", &["*bucket", "*key"]),
    ("azurerm", &["*storage_account_name", "*container_name", "*key"]),
];

/// Attribute names that would put a secret in the spec.
const SECRETS: &[&str] = &[
    "access_key",
    "secret_key",
    "access_key_id",
    "secret_access_key",
    "session_token",
    "token",
    "credentials",
    "service_account_key",
    "account_key",
    "sas_token",
    "client_secret",
    "password",
];

/// A configured backend, validated: its kind is known, its required settings are present
/// and every setting is one the kind reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    /// `local`, `s3`, `gcs` or `azurerm`.
    pub kind: String,
    /// The settings as written; booleans and numbers as their text.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    #[serde(skip)]
    #[schemars(skip)]
    pub span: Span,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig { kind: "local".into(), settings: BTreeMap::new(), span: Span::default() }
    }
}

impl BackendConfig {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.settings.get(name).map(String::as_str)
    }

    pub fn is_local(&self) -> bool {
        self.kind == "local"
    }
}

/// Decode the `gpuplan` blocks of all files (at most one may set a backend).
pub fn decode(blocks: &[&Block], diags: &mut Diagnostics) -> Option<BackendConfig> {
    let mut found: Option<BackendConfig> = None;
    for b in blocks {
        for a in &b.body.attrs {
            if crate::spec::encryption::owns(&a.key.name) {
                continue;
            }
            if a.key.name == "backend" {
                if let Some((cfg, span)) = backend_mapping(a, diags) {
                    set(&mut found, cfg, span, diags);
                }
            } else {
                diags.push(
                    Diagnostic::error(
                        "gpuplan::backend::attribute",
                        format!("`{}` is not a setting of the `gpuplan` block", a.key.name),
                    )
                    .at(a.key.span, "unknown")
                    .help("the `gpuplan` block holds `backend \"KIND\" { ... }` and `encryption { ... }`"),
                );
            }
        }
        for inner in &b.body.blocks {
            if crate::spec::encryption::owns(&inner.kind.name) {
                continue;
            }
            if inner.kind.name != "backend" {
                diags.push(
                    Diagnostic::error(
                        "gpuplan::backend::attribute",
                        format!("`{}` is not a block of the `gpuplan` block", inner.kind.name),
                    )
                    .at(inner.kind.span, "unknown")
                    .help("the `gpuplan` block holds `backend \"KIND\" { ... }` and `encryption { ... }`"),
                );
                continue;
            }
            if let Some(cfg) = backend_block(inner, diags) {
                set(&mut found, cfg, inner.span, diags);
            }
        }
    }
    found
}

/// YAML's `backend: {s3: {...}}`: the one kind it maps to its settings, decoded (`None`
/// inside where the settings are wrong), with the span to report a second backend at;
/// `None` when its shape is wrong (reported).
fn backend_mapping(a: &Attr, diags: &mut Diagnostics) -> Option<(Option<BackendConfig>, Span)> {
    let ExprKind::Object(items) = &a.value.kind else {
        diags.push(
            Diagnostic::error("gpuplan::backend::shape", "`backend` must map one kind to its settings")
                .at(a.value.span, "expected a mapping")
                .help("write `backend: {s3: {bucket: NAME, key: PATH}}`"),
        );
        return None;
    };
    if items.len() != 1 {
        diags.push(
            Diagnostic::error("gpuplan::backend::shape", "`backend` must name exactly one kind")
                .at(a.value.span, format!("{} kinds here", items.len()))
                .help("kinds: local, s3, gcs, azurerm"),
        );
        return None;
    }
    let (key, value) = &items[0];
    let (kind, kind_span) = match key {
        ObjectKey::Name(id) => (id.name.clone(), id.span),
        ObjectKey::Expr(e) => match literal(e) {
            Some(s) => (s, e.span),
            None => {
                diags.push(
                    Diagnostic::error("gpuplan::backend::kind", "the backend kind must be a plain name")
                        .at(e.span, "not a name"),
                );
                return None;
            }
        },
    };
    let settings = match &value.kind {
        ExprKind::Object(fields) => fields
            .iter()
            .map(|(k, v)| {
                let (name, span) = match k {
                    ObjectKey::Name(id) => (id.name.clone(), id.span),
                    ObjectKey::Expr(e) => (literal(e).unwrap_or_default(), e.span),
                };
                (name, span, v)
            })
            .collect(),
        ExprKind::Null => vec![],
        _ => {
            diags.push(
                Diagnostic::error("gpuplan::backend::shape", format!("backend `{kind}` needs a mapping"))
                    .at(value.span, "expected a mapping of settings"),
            );
            return None;
        }
    };
    let span = kind_span.join(value.span);
    let cfg = one(&kind, kind_span, span, settings, diags);
    Some((cfg, span))
}

/// HCL's `backend "s3" { ... }` block, decoded (inner `None` where the settings are
/// wrong); `None` when it does not name exactly one kind (reported).
fn backend_block(inner: &Block, diags: &mut Diagnostics) -> Option<Option<BackendConfig>> {
    let [label] = inner.labels.as_slice() else {
        diags.push(
            Diagnostic::error("gpuplan::backend::kind", "a `backend` block takes exactly one kind")
                .at(inner.labels.get(1).map_or(inner.kind.span, |l| l.span), "one label: the kind")
                .help("write `backend \"s3\" { ... }`; kinds: local, s3, gcs, azurerm"),
        );
        return None;
    };
    for nested in &inner.body.blocks {
        diags.push(
            Diagnostic::error("gpuplan::backend::attribute", "backend settings are attributes, not blocks")
                .at(nested.kind.span, "a block"),
        );
    }
    let settings = inner.body.attrs.iter().map(|a| (a.key.name.clone(), a.key.span, &a.value)).collect();
    Some(one(&label.name, label.span, inner.span, settings, diags))
}

fn set(found: &mut Option<BackendConfig>, cfg: Option<BackendConfig>, span: Span, diags: &mut Diagnostics) {
    let Some(cfg) = cfg else { return };
    if let Some(prev) = found {
        diags.push(
            Diagnostic::error("gpuplan::backend::duplicate", "the backend is configured twice")
                .at(span, "second backend")
                .at(prev.span, "first configured here")
                .help("keep one `backend` block for the whole spec directory"),
        );
        return;
    }
    *found = Some(cfg);
}

fn one(
    kind: &str,
    kind_span: Span,
    span: Span,
    settings: Vec<(String, Span, &Expr)>,
    diags: &mut Diagnostics,
) -> Option<BackendConfig> {
    let Some((_, attrs)) = KINDS.iter().find(|(k, _)| *k == kind) else {
        let d = Diagnostic::error("gpuplan::backend::kind", format!("unknown backend kind `{kind}`"))
            .at(kind_span, "not a backend kind");
        let names = KINDS.iter().map(|(k, _)| *k);
        diags.push(match did_you_mean(kind, names) {
            Some(s) => d.help(format!("did you mean `{s}`? kinds: local, s3, gcs, azurerm")),
            None => d.help("kinds: local, s3, gcs, azurerm"),
        });
        return None;
    };
    let names: Vec<&str> = attrs.iter().map(|a| a.trim_start_matches('*')).collect();
    let mut failed = false;
    let mut out = BTreeMap::new();
    let settings_written: Vec<&str> = settings.iter().map(|(n, _, _)| n.as_str()).collect();
    for (name, name_span, value) in &settings {
        let (name, name_span, value) = (name.clone(), *name_span, *value);
        if SECRETS.contains(&name.as_str()) {
            failed = true;
            diags.push(
                Diagnostic::error("gpuplan::backend::secret", format!("`{name}` would put a credential in the spec"))
                    .at(name_span, "credentials are not spec settings")
                    .help(credential_hint(kind)),
            );
            continue;
        }
        if !names.contains(&name.as_str()) {
            failed = true;
            let d =
                Diagnostic::error("gpuplan::backend::attribute", format!("backend `{kind}` has no setting `{name}`"))
                    .at(name_span, "unknown setting");
            diags.push(match did_you_mean(&name, names.iter().copied()) {
                Some(s) => d.help(format!("did you mean `{s}`? settings: {}", names.join(", "))),
                None => d.help(format!("settings: {}", names.join(", "))),
            });
            continue;
        }
        let Some(text) = literal(value) else {
            failed = true;
            diags.push(
                Diagnostic::error("gpuplan::backend::literal", format!("`{name}` must be a literal value"))
                    .at(value.span, "not a literal")
                    .help("the backend is read before variables and locals exist, so write the value itself"),
            );
            continue;
        };
        if let Some(problem) = check_value(kind, &name, &text) {
            failed = true;
            diags.push(
                Diagnostic::error("gpuplan::backend::value", format!("`{name}` = {text:?}: {problem}"))
                    .at(value.span, "invalid value"),
            );
            continue;
        }
        out.insert(name, text);
    }
    for required in attrs.iter().filter_map(|a| a.strip_prefix('*')) {
        // Reported even beside other problems, unless the setting was there but invalid.
        let written = settings_written.contains(&required);
        if !out.contains_key(required) && !written {
            failed = true;
            diags.push(
                Diagnostic::error("gpuplan::backend::missing", format!("backend `{kind}` needs `{required}`"))
                    .at(kind_span, format!("`{required}` missing"))
                    .help(format!("required settings: {}", required_list(attrs))),
            );
        }
    }
    (!failed).then(|| BackendConfig { kind: kind.to_string(), settings: out, span })
}

fn required_list(attrs: &[&str]) -> String {
    attrs.iter().filter_map(|a| a.strip_prefix('*')).collect::<Vec<_>>().join(", ")
}

fn credential_hint(kind: &str) -> &'static str {
    match kind {
        "s3" => {
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment, name a profile (`profile` or AWS_PROFILE), or run with web identity, a container or an instance role"
        }
        "gcs" => "set GOOGLE_APPLICATION_CREDENTIALS (or GOOGLE_SERVICE_ACCOUNT) in the environment",
        "azurerm" => "set AZURE_STORAGE_ACCOUNT_KEY (or AZURE_CLIENT_ID and AZURE_CLIENT_SECRET) in the environment",
        _ => "credentials come from the environment",
    }
}

fn check_value(kind: &str, name: &str, v: &str) -> Option<String> {
    match name {
        "key" if v.is_empty() || v.starts_with('/') || v.ends_with('/') => {
            Some("an object key must be non-empty and not start or end with `/`".into())
        }
        "key" if v.contains("//") || v.split('/').any(|p| p == "." || p == "..") => {
            Some("an object key may not hold `//`, `.` or `..` segments".into())
        }
        "bucket" | "container_name" | "storage_account_name" if v.is_empty() || v.contains('/') => {
            Some("must be a plain name".into())
        }
        "force_path_style" if v != "true" && v != "false" => Some("must be true or false".into()),
        "lock_mode" if !matches!(v, "conditional" | "cos" | "oss") => Some(format!(
            "must be `conditional` (If-None-Match/If-Match), `cos` (x-cos-forbid-overwrite) or `oss` (x-oss-forbid-overwrite) for {kind}"
        )),
        "endpoint" if !(v.starts_with("https://") || v.starts_with("http://")) => {
            Some("must be a URL starting with https:// (or http:// for a local test store)".into())
        }
        "path" if v.is_empty() => Some("must not be empty".into()),
        _ => None,
    }
}

/// The text of a literal: a string (a template with no interpolation), a bool or a number.
fn literal(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::String(s) => Some(s.clone()),
        ExprKind::Bool(b) => Some(b.to_string()),
        ExprKind::Number(n) => Some(n.to_string()),
        ExprKind::Template(parts) => parts
            .iter()
            .map(|p| match p {
                TemplatePart::Literal(s) => Some(s.as_str()),
                TemplatePart::Interp(_) => None,
            })
            .collect::<Option<String>>(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::diag::Sources;

    fn load(text: &str) -> crate::spec::Loaded {
        let mut sources = Sources::default();
        sources.add("main.hcl", text);
        crate::spec::load_sources(sources, &Default::default())
    }

    #[test]
    fn gcs_and_azurerm_blocks_decode_to_their_settings() {
        let gcs =
            load("gpuplan {\n  backend \"gcs\" {\n    bucket = \"acme\"\n    key = \"fleets/prod.json\"\n  }\n}\n");
        assert!(!gcs.diags.has_errors(), "{:?}", gcs.diags.items);
        let b = gcs.spec.backend.expect("a backend");
        assert_eq!((b.kind.as_str(), b.get("bucket"), b.get("key")), ("gcs", Some("acme"), Some("fleets/prod.json")));

        let az = load(
            "gpuplan {\n  backend \"azurerm\" {\n    storage_account_name = \"acme\"\n    container_name = \"state\"\n    key = \"prod.json\"\n  }\n}\n",
        );
        assert!(!az.diags.has_errors(), "{:?}", az.diags.items);
        let b = az.spec.backend.expect("a backend");
        assert_eq!(b.get("container_name"), Some("state"));
        assert!(!b.is_local());
    }

    #[test]
    fn gcs_and_azurerm_settings_are_checked_like_s3() {
        let gcs = load("gpuplan {\n  backend \"gcs\" {\n    bucket = \"a/b\"\n    credentials = \"{}\"\n  }\n}\n");
        let codes: Vec<&str> = gcs.diags.items.iter().map(|d| d.code).collect();
        assert_eq!(codes, ["gpuplan::backend::missing", "gpuplan::backend::value", "gpuplan::backend::secret"]);
        let az = load(
            "gpuplan {\n  backend \"azurerm\" {\n    storage_account_name = \"acme\"\n    container = \"x\"\n  }\n}\n",
        );
        let messages: Vec<String> = az.diags.items.iter().map(|d| d.message.clone()).collect();
        assert!(messages.iter().any(|m| m.contains("needs `container_name`")), "{messages:?}");
        assert!(messages.iter().any(|m| m.contains("needs `key`")), "{messages:?}");
        assert!(messages.iter().any(|m| m.contains("no setting `container`")), "{messages:?}");
        assert!(gcs.spec.backend.is_none() && az.spec.backend.is_none(), "a broken backend is never used");
    }
}
