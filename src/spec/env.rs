//! A job's or job template's `env`: each value a string, or a secret reference
//! (`secret("aws-sm:ml/hf-token")` in HCL, `{secret: "aws-sm:ml/hf-token"}` in YAML; see
//! `docs/design/secrets.md`). A bad reference is reported at its `file:line:col` with how
//! to write it. Only decoding; where a source may be used is `validate`'s (`secrets.rs`).

use std::collections::BTreeMap;

use crate::diag::Diagnostic;
use crate::model::secret::{EnvValue, SecretRef};
use crate::spec::fields::{Cx, Fields, Got, type_error};
use crate::spec::spanned::Spanned;
use crate::spec::value::Value;

/// The `env` attribute of `f`: empty when absent; `None` (and `f` failed) when broken.
pub fn env_map(f: &mut Fields<'_>, cx: &mut Cx<'_, '_>) -> BTreeMap<String, Spanned<EnvValue>> {
    let got = f.try_map(cx, "env", env_value);
    f.flag(got).map(|m| m.value).unwrap_or_default()
}

/// One value of `env`: text, or an object whose one key is `secret`.
fn env_value(f: &mut Fields<'_>, cx: &mut Cx<'_, '_>, key: &str) -> Got<EnvValue> {
    let Some(v) = f.try_value(cx, key)? else { return Ok(None) };
    let span = v.span;
    match v.value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => {
            Ok(Some(Spanned::new(EnvValue::Text(v.value.to_string()), span)))
        }
        Value::Object(o) if o.len() == 1 && o.contains_key("secret") => match &o["secret"] {
            Value::String(text) => match SecretRef::parse(text) {
                Ok(secret) => Ok(Some(Spanned::new(EnvValue::Secret { secret }, span))),
                Err(e) => Err(cx.error(
                    Diagnostic::error("gpuplan::spec::secret", e.why).at(span, "not a secret reference").help(e.hint),
                )),
            },
            other => Err(cx.error(type_error(key, "a secret reference such as \"aws-sm:NAME\"", other, span))),
        },
        other => Err(cx.error(
            type_error(key, "a string or a secret reference", &other, span)
                .help("write a string, or `secret(\"aws-sm:NAME\")` (YAML: `{secret: \"aws-sm:NAME\"}`)"),
        )),
    }
}
