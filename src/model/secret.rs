//! Secret references (`docs/design/secrets.md`): where a job's secret lives, never its
//! value. [`SecretRef`] is what `secret("aws-sm:ml/hf-token")` (YAML `{secret: "…"}`)
//! evaluates to and what the spec, the plan, the state and every view carry; the value is
//! read only where the job runs (a node with its own role, a Kubernetes `secretKeyRef`) or,
//! for a run-command send, by gpuplan at send time, and is never written anywhere. Parsing
//! and display only.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a secret is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SecretSource {
    /// AWS Secrets Manager: `aws-sm:NAME[#KEY]` (KEY: a field of a JSON secret).
    AwsSm,
    /// AWS Systems Manager Parameter Store (SecureString): `ssm:/PATH`.
    Ssm,
    /// Tencent Cloud Secrets Manager: `tencent-ssm:NAME`.
    TencentSsm,
    /// Alibaba Cloud KMS secrets: `alicloud-kms:NAME`.
    AlicloudKms,
    /// A Kubernetes Secret in the job's namespace: `k8s:SECRET/KEY`.
    K8s,
    /// gpuplan's own environment at send time (CI): `env:NAME`.
    Env,
}

/// Every source with its prefix, in the order messages list them.
pub const SOURCES: &[(&str, SecretSource, &str)] = &[
    ("aws-sm", SecretSource::AwsSm, "aws-sm:NAME[#KEY]"),
    ("ssm", SecretSource::Ssm, "ssm:/PATH"),
    ("tencent-ssm", SecretSource::TencentSsm, "tencent-ssm:NAME"),
    ("alicloud-kms", SecretSource::AlicloudKms, "alicloud-kms:NAME"),
    ("k8s", SecretSource::K8s, "k8s:SECRET/KEY"),
    ("env", SecretSource::Env, "env:NAME"),
];

impl SecretSource {
    pub fn prefix(self) -> &'static str {
        SOURCES.iter().find(|(_, s, _)| *s == self).map_or("", |(p, _, _)| p)
    }
    /// How a reference of this source is written.
    pub fn syntax(self) -> &'static str {
        SOURCES.iter().find(|(_, s, _)| *s == self).map_or("", |(_, _, f)| f)
    }
}

/// A reference to one secret: `SOURCE:NAME`, kept and shown as written, never resolved
/// into anything stored. Serialized as its text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SecretRef {
    pub source: SecretSource,
    /// The secret's name, parameter path, Kubernetes Secret or variable.
    pub name: String,
    /// `aws-sm` `#KEY` (a field of a JSON secret) or the `k8s` Secret's key.
    pub key: Option<String>,
}

/// Why a reference does not parse, and how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRef {
    pub why: String,
    pub hint: String,
}

impl SecretRef {
    pub fn parse(text: &str) -> Result<SecretRef, BadRef> {
        let sources = SOURCES.iter().map(|(_, _, f)| format!("`{f}`")).collect::<Vec<_>>().join(", ");
        let Some((prefix, rest)) = text.split_once(':') else {
            return Err(BadRef {
                why: format!("`{text}` names no secret source"),
                hint: format!("write `SOURCE:NAME`, one of {sources}"),
            });
        };
        let Some(&(_, source, syntax)) = SOURCES.iter().find(|(p, _, _)| *p == prefix) else {
            return Err(BadRef {
                why: format!("`{prefix}` is not a secret source"),
                hint: format!("the sources are {sources}"),
            });
        };
        let bad = |why: String| BadRef { why, hint: format!("write `{syntax}`") };
        let (name, key) = match source {
            SecretSource::AwsSm => match rest.split_once('#') {
                Some((n, k)) => (n, Some(k)),
                None => (rest, None),
            },
            SecretSource::K8s => match rest.split_once('/') {
                Some((n, k)) => (n, Some(k)),
                None => return Err(bad(format!("`{text}` names no key of the Secret"))),
            },
            _ => (rest, None),
        };
        if name.is_empty() {
            return Err(bad(format!("`{text}` names no secret")));
        }
        if key.is_some_and(str::is_empty) {
            return Err(bad(format!("`{text}` has an empty key")));
        }
        if let Some(c) = name.chars().find(|c| !name_char(source, *c)) {
            return Err(bad(format!("`{name}` may not contain {c:?} in a {prefix} name")));
        }
        if let Some(c) = key.and_then(|k| k.chars().find(|c| !key_char(source, *c))) {
            return Err(bad(format!("the key of `{text}` may not contain {c:?}")));
        }
        match source {
            SecretSource::Ssm if !name.starts_with('/') => {
                return Err(bad(format!("`{name}` is not a parameter path (it starts with `/`)")));
            }
            SecretSource::Env if name.starts_with(|c: char| c.is_ascii_digit()) => {
                return Err(bad(format!("`{name}` is not an environment variable's name")));
            }
            _ => {}
        }
        Ok(SecretRef { source, name: name.to_string(), key: key.map(String::from) })
    }
}

/// Characters each store allows in a name (as its API documents them).
fn name_char(source: SecretSource, c: char) -> bool {
    let alnum = c.is_ascii_alphanumeric();
    match source {
        SecretSource::AwsSm | SecretSource::AlicloudKms => alnum || "/_+=.@-".contains(c),
        SecretSource::Ssm => alnum || "/_.-".contains(c),
        SecretSource::TencentSsm => alnum || "_-".contains(c),
        SecretSource::K8s => c.is_ascii_lowercase() || c.is_ascii_digit() || ".-".contains(c),
        SecretSource::Env => alnum || c == '_',
    }
}

fn key_char(source: SecretSource, c: char) -> bool {
    match source {
        SecretSource::K8s => c.is_ascii_alphanumeric() || "._-".contains(c),
        _ => !c.is_control() && c != '"' && c != '\'' && c != '\\',
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sep = if self.source == SecretSource::K8s { "/" } else { "#" };
        write!(f, "{}:{}", self.source.prefix(), self.name)?;
        match &self.key {
            Some(k) => write!(f, "{sep}{k}"),
            None => Ok(()),
        }
    }
}

impl SecretRef {
    /// How every view prints the reference in place of a value.
    pub fn shown(&self) -> String {
        format!("(secret: {self})")
    }
}

impl SecretRef {
    /// The reference a stored configuration holds at `v`: an object whose one key is
    /// `secret` and whose value parses (how an `env` secret is kept in plans and state).
    /// Views print it as one value, [`SecretRef::shown`], never as an object.
    pub fn in_json(v: &serde_json::Value) -> Option<SecretRef> {
        let o = v.as_object().filter(|o| o.len() == 1)?;
        SecretRef::parse(o.get("secret")?.as_str()?).ok()
    }
}

impl TryFrom<String> for SecretRef {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        SecretRef::parse(&s).map_err(|e| format!("{}: {}", e.why, e.hint))
    }
}

impl From<SecretRef> for String {
    fn from(r: SecretRef) -> String {
        r.to_string()
    }
}

impl JsonSchema for SecretRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SecretRef".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A secret reference: `aws-sm:NAME[#KEY]`, `ssm:/PATH`, `tencent-ssm:NAME`, `alicloud-kms:NAME`, `k8s:SECRET/KEY` or `env:NAME`",
            "pattern": "^(aws-sm|ssm|tencent-ssm|alicloud-kms|k8s|env):."
        })
    }
}

/// One value of a job's `env`: text, or a reference to a secret (`{secret: "…"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum EnvValue {
    Text(String),
    Secret { secret: SecretRef },
}

impl EnvValue {
    /// The text every view prints: the value, or `(secret: SOURCE:NAME)`.
    pub fn shown(&self) -> String {
        match self {
            EnvValue::Text(t) => t.clone(),
            EnvValue::Secret { secret } => secret.shown(),
        }
    }
}

#[cfg(test)]
mod tests;
