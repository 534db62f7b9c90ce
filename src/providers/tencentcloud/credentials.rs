//! The Tencent Cloud credential chain, as the SDKs and the Terraform provider read it:
//!
//! 1. `access_key`/`secret_key` in the provider block;
//! 2. the environment: `TENCENTCLOUD_SECRET_ID`, `TENCENTCLOUD_SECRET_KEY` (and a session
//!    token in `TENCENTCLOUD_SESSION_TOKEN` or `TENCENTCLOUD_SECURITY_TOKEN`);
//! 3. OIDC federation (TKE workload identity, CI): a token file, a role and an identity
//!    provider (`TENCENTCLOUD_*` or `TKE_*` names) → STS `AssumeRoleWithWebIdentity`;
//! 4. the SDK's profile file (`TENCENTCLOUD_CREDENTIALS_FILE`, else
//!    `~/.tencentcloud/credentials`, section `[default]`);
//! 5. the CVM role, from instance metadata.
//!
//! With `TENCENTCLOUD_ASSUME_ROLE_ARN` set, the keys found are then exchanged with STS
//! `AssumeRole` for the role's (the Terraform provider's variables). Temporary keys are
//! sent with their token (`X-TC-Token`) and fetched again before they expire
//! ([`CredentialCache`]). Test and private endpoints: `GPUPLAN_TENCENTCLOUD_STS_ENDPOINT`,
//! `GPUPLAN_TENCENTCLOUD_METADATA_ENDPOINT`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::adopt::STS_VERSION;
use super::client::{Call, Tc3, endpoint_for};
use crate::model::Endpoint;
use crate::providers::credentials::{
    Credentials, Metadata, Resolve, Resolved, Secret, endpoint, env_first, home, metadata, read_token, session_name,
    setup_error,
};
use crate::providers::signed_json::client::send;
use crate::providers::{ErrorClass, ProviderError};

const CLOUD: &str = "Tencent Cloud";
/// STS's own region when nothing names one (the SDK's choice).
const STS_REGION: &str = "ap-guangzhou";
pub const ENV_STS_ENDPOINT: &str = "GPUPLAN_TENCENTCLOUD_STS_ENDPOINT";
pub const ENV_METADATA_ENDPOINT: &str = "GPUPLAN_TENCENTCLOUD_METADATA_ENDPOINT";
const METADATA: &str = "http://metadata.tencentyun.com";
const ROLE_PATH: &str = "/latest/meta-data/cam/security-credentials/";

const TOKEN_VARS: [&str; 2] = ["TENCENTCLOUD_SESSION_TOKEN", "TENCENTCLOUD_SECURITY_TOKEN"];
const OIDC_TOKEN_FILE: [&str; 2] = ["TENCENTCLOUD_WEB_IDENTITY_TOKEN_FILE", "TKE_WEB_IDENTITY_TOKEN_FILE"];
const OIDC_ROLE: [&str; 2] = ["TENCENTCLOUD_ROLE_ARN", "TKE_ROLE_ARN"];
const OIDC_PROVIDER: [&str; 2] = ["TENCENTCLOUD_PROVIDER_ID", "TKE_PROVIDER_ID"];
const OIDC_REGION: [&str; 2] = ["TENCENTCLOUD_REGION", "TKE_REGION"];
const ASSUME_ROLE: &str = "TENCENTCLOUD_ASSUME_ROLE_ARN";
const ASSUME_SESSION: &str = "TENCENTCLOUD_ASSUME_ROLE_SESSION_NAME";
const ASSUME_DURATION: &str = "TENCENTCLOUD_ASSUME_ROLE_SESSION_DURATION";

/// Where the chain looks, for the message when nothing answers.
const LOOKED: &str = "`access_key`/`secret_key` in the provider block, TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY, OIDC (TENCENTCLOUD_WEB_IDENTITY_TOKEN_FILE or TKE_WEB_IDENTITY_TOKEN_FILE), the profile file (TENCENTCLOUD_CREDENTIALS_FILE or ~/.tencentcloud/credentials) and the CVM role in instance metadata";

/// The chain of one provider block.
pub struct Chain {
    /// The provider block's local name, for messages.
    pub name: String,
    pub block: Option<(String, Secret)>,
    pub env: BTreeMap<String, String>,
    /// The block's (or `GPUPLAN_TENCENTCLOUD_ENDPOINT`'s) endpoint, which STS uses too
    /// unless `GPUPLAN_TENCENTCLOUD_STS_ENDPOINT` names another.
    pub api_endpoint: Option<Endpoint>,
}

#[async_trait]
impl Resolve for Chain {
    async fn resolve(&self, http: &reqwest::Client) -> Result<Resolved, ProviderError> {
        let base = self.base(http).await?;
        match env_first(&self.env, &[ASSUME_ROLE]) {
            Some((_, role)) => self.assume_role(http, &base, &role).await,
            None => Ok(base),
        }
    }
}

impl Chain {
    async fn base(&self, http: &reqwest::Client) -> Result<Resolved, ProviderError> {
        if let Some((id, secret)) = &self.block {
            let credentials = Credentials { id: id.clone(), secret: secret.clone(), token: None };
            return Ok(long_lived(credentials, "`access_key`/`secret_key` in the provider block"));
        }
        if let Some(r) = self.environment()? {
            return Ok(r);
        }
        if let Some(r) = self.oidc(http).await? {
            return Ok(r);
        }
        if let Some(r) = self.profile()? {
            return Ok(r);
        }
        if let Some(r) = self.cvm_role(http).await? {
            return Ok(r);
        }
        Err(ProviderError::new(
            ErrorClass::Auth,
            "MissingCredentials",
            format!(
                "{CLOUD} `{}`: no credentials found (looked at {LOOKED})\nhint: export TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY, or set up OIDC or a CVM role",
                self.name
            ),
        ))
    }

    fn environment(&self) -> Result<Option<Resolved>, ProviderError> {
        let id = env_first(&self.env, &["TENCENTCLOUD_SECRET_ID"]);
        let key = env_first(&self.env, &["TENCENTCLOUD_SECRET_KEY"]);
        match (id, key) {
            (Some((_, id)), Some((_, key))) => {
                let token = env_first(&self.env, &TOKEN_VARS).map(|(_, t)| Secret::new(t));
                let credentials = Credentials { id, secret: Secret::new(key), token };
                Ok(Some(long_lived(credentials, "the environment (TENCENTCLOUD_SECRET_ID)")))
            }
            (None, None) => Ok(None),
            (id, _) => {
                let missing = if id.is_none() { "TENCENTCLOUD_SECRET_ID" } else { "TENCENTCLOUD_SECRET_KEY" };
                Err(setup_error(CLOUD, format!("`{missing}` is not set, but its pair is")))
            }
        }
    }

    fn sts_endpoint(&self) -> Result<Endpoint, ProviderError> {
        endpoint(CLOUD, &self.env, ENV_STS_ENDPOINT, endpoint_for(self.api_endpoint.as_ref(), "sts"))
    }

    /// OIDC federation, when a token file is named: the role and the identity provider
    /// must be named too.
    async fn oidc(&self, http: &reqwest::Client) -> Result<Option<Resolved>, ProviderError> {
        let Some((file_var, file)) = env_first(&self.env, &OIDC_TOKEN_FILE) else { return Ok(None) };
        let need = |names: &[&str]| {
            env_first(&self.env, names).map(|(_, v)| v).ok_or_else(|| {
                setup_error(CLOUD, format!("`{file_var}` is set, so OIDC needs `{}` too", names.join("` or `")))
            })
        };
        let (role, provider) = (need(&OIDC_ROLE)?, need(&OIDC_PROVIDER)?);
        let region = env_first(&self.env, &OIDC_REGION).map_or(STS_REGION.to_string(), |(_, r)| r);
        let token = read_token(CLOUD, file_var, &file)?;
        let body = json!({
            "ProviderId": provider,
            "WebIdentityToken": token,
            "RoleArn": role,
            "RoleSessionName": session_name(),
            "DurationSeconds": 7200,
        });
        let call = Call {
            service: "sts",
            version: STS_VERSION,
            action: "AssumeRoleWithWebIdentity",
            region: &region,
            body: &body,
        };
        let resp = send::<Tc3>(http, &self.sts_endpoint()?, &call, None).await?;
        let source = format!("OIDC ({file_var}, STS AssumeRoleWithWebIdentity)");
        temporary(&resp, &resp["Credentials"], source).map(Some)
    }

    /// The SDK's profile file: a missing default file means "not configured here"; a
    /// file that is named, unreadable or without both keys is an error.
    fn profile(&self) -> Result<Option<Resolved>, ProviderError> {
        let (path, named) = match env_first(&self.env, &["TENCENTCLOUD_CREDENTIALS_FILE"]) {
            Some((_, p)) => (std::path::PathBuf::from(p), true),
            None => match home(&self.env) {
                Some(h) => (h.join(".tencentcloud").join("credentials"), false),
                None => return Ok(None),
            },
        };
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => return Ok(None),
            Err(e) => return Err(setup_error(CLOUD, format!("cannot read the profile file `{shown}`: {e}"))),
        };
        let section = ini_section(&text, "default");
        match (section.get("secret_id"), section.get("secret_key")) {
            (Some(id), Some(key)) if !id.is_empty() && !key.is_empty() => {
                let credentials = Credentials { id: id.clone(), secret: Secret::new(key.clone()), token: None };
                Ok(Some(long_lived(credentials, &format!("the profile file `{shown}` ([default])"))))
            }
            _ => Err(setup_error(
                CLOUD,
                format!("the profile file `{shown}` has no `secret_id` and `secret_key` in its [default] section"),
            )),
        }
    }

    /// The CVM role of this instance: its name, then its keys, from instance metadata.
    async fn cvm_role(&self, http: &reqwest::Client) -> Result<Option<Resolved>, ProviderError> {
        let base = endpoint(CLOUD, &self.env, ENV_METADATA_ENDPOINT, Endpoint::parse(METADATA).expect("a URL"))?;
        let failed = |m: String| setup_error(CLOUD, format!("CVM role: {m}"));
        let get = reqwest::Method::GET;
        let Metadata::Answer(names) = metadata(http, get.clone(), &base.url(ROLE_PATH), &[]).await.map_err(failed)?
        else {
            return Ok(None);
        };
        let Some(role) = names.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string) else {
            return Ok(None);
        };
        let url = base.url(&format!("{ROLE_PATH}{role}"));
        let Metadata::Answer(text) = metadata(http, get, &url, &[]).await.map_err(failed)? else {
            return Err(failed(format!("the role `{role}` has no credentials in instance metadata")));
        };
        let v: Value = serde_json::from_str(&text).map_err(|e| failed(format!("not JSON ({e})")))?;
        if v["Code"].as_str().is_some_and(|c| c != "Success") {
            return Err(failed(format!("instance metadata answered `{}`", v["Code"].as_str().unwrap_or(""))));
        }
        temporary(&v, &v, format!("the CVM role `{role}` (instance metadata)")).map(Some)
    }

    /// STS `AssumeRole`, signed with the keys the chain found.
    async fn assume_role(
        &self,
        http: &reqwest::Client,
        base: &Resolved,
        role: &str,
    ) -> Result<Resolved, ProviderError> {
        let duration: u64 = match env_first(&self.env, &[ASSUME_DURATION]) {
            Some((_, d)) => d
                .parse()
                .ok()
                .filter(|d| (1..=43_200).contains(d))
                .ok_or_else(|| setup_error(CLOUD, format!("`{ASSUME_DURATION}` must be 1 to 43200 seconds")))?,
            None => 7200,
        };
        let session = env_first(&self.env, &[ASSUME_SESSION]).map_or_else(session_name, |(_, s)| s);
        let body = json!({"RoleArn": role, "RoleSessionName": session, "DurationSeconds": duration});
        let call = Call { service: "sts", version: STS_VERSION, action: "AssumeRole", region: STS_REGION, body: &body };
        let resp = send::<Tc3>(http, &self.sts_endpoint()?, &call, Some(&base.credentials)).await?;
        let source = format!("STS AssumeRole ({ASSUME_ROLE}) with {}", base.source);
        temporary(&resp, &resp["Credentials"], source)
    }
}

fn long_lived(credentials: Credentials, source: &str) -> Resolved {
    Resolved { credentials, expires: None, source: source.to_string() }
}

/// Temporary keys (`TmpSecretId`, `TmpSecretKey`, `Token`) and their expiry
/// (`ExpiredTime`, unix seconds, else `Expiration`) from an STS or metadata answer.
fn temporary(outer: &Value, keys: &Value, source: String) -> Result<Resolved, ProviderError> {
    let field = |k: &str| keys[k].as_str().filter(|v| !v.is_empty()).map(str::to_string);
    let (Some(id), Some(secret), Some(token)) = (field("TmpSecretId"), field("TmpSecretKey"), field("Token")) else {
        return Err(setup_error(CLOUD, format!("{source}: the answer holds no temporary keys")));
    };
    // An expiry that does not parse is refused: cached as "never expires", the keys would
    // be used after STS let them lapse.
    let expires = match (outer["ExpiredTime"].as_u64(), outer["Expiration"].as_str()) {
        (Some(t), _) => Some(SystemTime::UNIX_EPOCH + Duration::from_secs(t)),
        (None, Some(e)) => Some(crate::providers::credentials::parse_time(e).ok_or_else(|| {
            setup_error(CLOUD, format!("{source}: the keys' Expiration `{e}` is not an RFC 3339 time"))
        })?),
        (None, None) => None,
    };
    let credentials = Credentials { id, secret: Secret::new(secret), token: Some(Secret::new(token)) };
    Ok(Resolved { credentials, expires, source })
}

/// The `key = value` pairs of one `[section]` of an INI file (`#` and `;` comments).
fn ini_section(text: &str, wanted: &str) -> BTreeMap<String, String> {
    let mut current = String::new();
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_string();
        } else if current == wanted
            && let Some((k, v)) = line.split_once('=')
        {
            out.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_file_is_read_from_its_default_section() {
        let text = "# keys\n[other]\nsecret_id = no\n\n[default]\nsecret_id = AKIDx\nsecret_key=abc\n";
        let s = ini_section(text, "default");
        assert_eq!((s["secret_id"].as_str(), s["secret_key"].as_str()), ("AKIDx", "abc"));
        assert!(ini_section(text, "missing").is_empty());
    }

    #[test]
    fn temporary_keys_carry_their_token_and_expiry() {
        let v = json!({"Credentials": {"TmpSecretId": "AKIDtmp", "TmpSecretKey": "k", "Token": "t"}, "ExpiredTime": 2_000_000_000u64});
        let r = temporary(&v, &v["Credentials"], "STS".into()).unwrap();
        assert_eq!(r.credentials.token.as_ref().map(Secret::expose), Some("t"));
        assert_eq!(r.expires, Some(SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000)));
        let bad =
            json!({"Credentials": {"TmpSecretId": "AKIDtmp", "TmpSecretKey": "k", "Token": "t"}, "Expiration": "soon"});
        let err = temporary(&bad, &bad["Credentials"], "STS".into()).unwrap_err();
        assert!(err.to_string().contains("Expiration `soon`"), "{err}");
        let e = temporary(&json!({}), &json!({}), "STS".into()).unwrap_err();
        assert_eq!(e.class, ErrorClass::Auth);
    }
}
