//! The Alibaba Cloud credential chain, in the order of Alibaba's credentials SDK:
//!
//! 1. `access_key`/`secret_key` in the provider block;
//! 2. the environment: `ALIBABA_CLOUD_ACCESS_KEY_ID`, `ALIBABA_CLOUD_ACCESS_KEY_SECRET`
//!    (and `ALIBABA_CLOUD_SECURITY_TOKEN` for STS keys);
//! 3. OIDC (RRSA on ACK, CI): `ALIBABA_CLOUD_ROLE_ARN`, `ALIBABA_CLOUD_OIDC_PROVIDER_ARN`,
//!    `ALIBABA_CLOUD_OIDC_TOKEN_FILE` → STS `AssumeRoleWithOIDC`;
//! 4. the CLI's `~/.aliyun/config.json`, profile `ALIBABA_CLOUD_PROFILE` else `current`,
//!    in mode `AK`, `StsToken`, `RamRoleArn` (STS `AssumeRole`), `EcsRamRole` or `OIDC`;
//! 5. the ECS RAM role, from instance metadata (IMDSv2 token first), unless
//!    `ALIBABA_CLOUD_ECS_METADATA_DISABLED=true`; `ALIBABA_CLOUD_ECS_METADATA` names it.
//!
//! STS keys are sent with their token (`x-acs-security-token`) and fetched again before
//! they expire ([`CredentialCache`]). STS is `sts.aliyuncs.com` (`sts.<region>.aliyuncs.com`
//! with `ALIBABA_CLOUD_STS_REGION` or a profile's `sts_region`). Test and private
//! endpoints: `GPUPLAN_ALICLOUD_STS_ENDPOINT`, `GPUPLAN_ALICLOUD_METADATA_ENDPOINT`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::Value;

use super::client::{Acs3, Call};
use crate::model::Endpoint;
use crate::providers::credentials::{
    Credentials, Metadata, Resolve, Resolved, Secret, endpoint, env_first, home, metadata, parse_time, read_token,
    session_name, setup_error,
};
use crate::providers::signed_json::client::send;
use crate::providers::{ErrorClass, ProviderError};

const CLOUD: &str = "Alibaba Cloud";
const STS_VERSION: &str = "2015-04-01";
pub const ENV_STS_ENDPOINT: &str = "GPUPLAN_ALICLOUD_STS_ENDPOINT";
pub const ENV_METADATA_ENDPOINT: &str = "GPUPLAN_ALICLOUD_METADATA_ENDPOINT";
const METADATA: &str = "http://100.100.100.200";
const ROLE_PATH: &str = "/latest/meta-data/ram/security-credentials/";

const LOOKED: &str = "`access_key`/`secret_key` in the provider block, ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, OIDC (ALIBABA_CLOUD_OIDC_TOKEN_FILE), ~/.aliyun/config.json and the ECS RAM role in instance metadata";

/// The chain of one provider block.
pub struct Chain {
    pub name: String,
    pub block: Option<(String, Secret)>,
    pub env: BTreeMap<String, String>,
    /// The block's (or `GPUPLAN_ALICLOUD_ENDPOINT`'s) endpoint, which STS uses too unless
    /// `GPUPLAN_ALICLOUD_STS_ENDPOINT` names another.
    pub api_endpoint: Option<Endpoint>,
}

/// What an OIDC exchange needs, from the environment or a profile.
struct Oidc {
    role: String,
    provider: String,
    token_file: String,
    token_var: &'static str,
    session: Option<String>,
    sts_region: Option<String>,
}

#[async_trait]
impl Resolve for Chain {
    async fn resolve(&self, http: &reqwest::Client) -> Result<Resolved, ProviderError> {
        if let Some((id, secret)) = &self.block {
            let credentials = Credentials { id: id.clone(), secret: secret.clone(), token: None };
            return Ok(long_lived(credentials, "`access_key`/`secret_key` in the provider block".into()));
        }
        if let Some(r) = self.environment()? {
            return Ok(r);
        }
        if let Some(oidc) = self.oidc_env()? {
            return self.oidc(http, &oidc, "OIDC (ALIBABA_CLOUD_OIDC_TOKEN_FILE, STS AssumeRoleWithOIDC)".into()).await;
        }
        if let Some(r) = self.profile(http).await? {
            return Ok(r);
        }
        let disabled = env_first(&self.env, &["ALIBABA_CLOUD_ECS_METADATA_DISABLED"]).is_some_and(|(_, v)| v == "true");
        if !disabled && let Some(r) = self.ecs_role(http, None).await? {
            return Ok(r);
        }
        Err(ProviderError::new(
            ErrorClass::Auth,
            "MissingCredentials",
            format!(
                "{CLOUD} `{}`: no credentials found (looked at {LOOKED})\nhint: export ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, or set up RRSA (OIDC), a profile or an ECS RAM role",
                self.name
            ),
        ))
    }
}

impl Chain {
    fn environment(&self) -> Result<Option<Resolved>, ProviderError> {
        let id = env_first(&self.env, &["ALIBABA_CLOUD_ACCESS_KEY_ID"]);
        let secret = env_first(&self.env, &["ALIBABA_CLOUD_ACCESS_KEY_SECRET"]);
        match (id, secret) {
            (Some((_, id)), Some((_, secret))) => {
                let token = env_first(&self.env, &["ALIBABA_CLOUD_SECURITY_TOKEN"]).map(|(_, t)| Secret::new(t));
                let credentials = Credentials { id, secret: Secret::new(secret), token };
                Ok(Some(long_lived(credentials, "the environment (ALIBABA_CLOUD_ACCESS_KEY_ID)".into())))
            }
            (None, None) => Ok(None),
            (id, _) => {
                let missing =
                    if id.is_none() { "ALIBABA_CLOUD_ACCESS_KEY_ID" } else { "ALIBABA_CLOUD_ACCESS_KEY_SECRET" };
                Err(setup_error(CLOUD, format!("`{missing}` is not set, but its pair is")))
            }
        }
    }

    /// RRSA: all three variables, or none (one or two set is a half-done setup).
    fn oidc_env(&self) -> Result<Option<Oidc>, ProviderError> {
        let names = ["ALIBABA_CLOUD_ROLE_ARN", "ALIBABA_CLOUD_OIDC_PROVIDER_ARN", "ALIBABA_CLOUD_OIDC_TOKEN_FILE"];
        let got: Vec<Option<String>> = names.iter().map(|n| env_first(&self.env, &[n]).map(|(_, v)| v)).collect();
        match got.as_slice() {
            [Some(role), Some(provider), Some(file)] => Ok(Some(Oidc {
                role: role.clone(),
                provider: provider.clone(),
                token_file: file.clone(),
                token_var: "ALIBABA_CLOUD_OIDC_TOKEN_FILE",
                session: env_first(&self.env, &["ALIBABA_CLOUD_ROLE_SESSION_NAME"]).map(|(_, v)| v),
                sts_region: env_first(&self.env, &["ALIBABA_CLOUD_STS_REGION"]).map(|(_, v)| v),
            })),
            [None, None, None] | [Some(_), None, None] => Ok(None),
            _ => {
                let missing: Vec<&str> = names.iter().zip(&got).filter(|(_, v)| v.is_none()).map(|(n, _)| *n).collect();
                Err(setup_error(CLOUD, format!("OIDC (RRSA) is half set up: `{}` is not set", missing.join("`, `"))))
            }
        }
    }

    fn sts_endpoint(&self, sts_region: Option<&str>) -> Result<Endpoint, ProviderError> {
        let host = match sts_region {
            Some(r) => format!("sts.{r}.aliyuncs.com"),
            None => "sts.aliyuncs.com".to_string(),
        };
        let default = self.api_endpoint.clone().unwrap_or(Endpoint { scheme: "https".into(), authority: host });
        endpoint(CLOUD, &self.env, ENV_STS_ENDPOINT, default)
    }

    async fn oidc(&self, http: &reqwest::Client, o: &Oidc, source: String) -> Result<Resolved, ProviderError> {
        let token = read_token(CLOUD, o.token_var, &o.token_file)?;
        let params = vec![
            ("RoleArn".to_string(), o.role.clone()),
            ("OIDCProviderArn".to_string(), o.provider.clone()),
            ("OIDCToken".to_string(), token),
            ("RoleSessionName".to_string(), o.session.clone().unwrap_or_else(session_name)),
        ];
        let endpoint = self.sts_endpoint(o.sts_region.as_deref())?;
        self.sts(http, &endpoint, "AssumeRoleWithOIDC", &params, None, source).await
    }

    /// STS `AssumeRole` with long-lived keys.
    async fn assume_role(
        &self,
        http: &reqwest::Client,
        p: &Value,
        keys: &Credentials,
        source: String,
    ) -> Result<Resolved, ProviderError> {
        let role = text(p, "ram_role_arn").ok_or_else(|| setup_error(CLOUD, format!("{source}: no `ram_role_arn`")))?;
        let duration = p["expired_seconds"].as_u64().filter(|d| *d > 0).unwrap_or(3600);
        let mut params = vec![
            ("RoleArn".to_string(), role),
            ("RoleSessionName".to_string(), text(p, "ram_session_name").unwrap_or_else(session_name)),
            ("DurationSeconds".to_string(), duration.to_string()),
        ];
        for (key, param) in [("policy", "Policy"), ("external_id", "ExternalId")] {
            if let Some(v) = text(p, key) {
                params.push((param.to_string(), v));
            }
        }
        let endpoint = self.sts_endpoint(text(p, "sts_region").as_deref())?;
        self.sts(http, &endpoint, "AssumeRole", &params, Some(keys), source).await
    }

    async fn sts(
        &self,
        http: &reqwest::Client,
        endpoint: &Endpoint,
        action: &str,
        params: &[(String, String)],
        keys: Option<&Credentials>,
        source: String,
    ) -> Result<Resolved, ProviderError> {
        let call =
            Call { version: STS_VERSION, method: "POST", path: "/", action, region: "STS", query: params, body: b"" };
        let v = send::<Acs3>(http, endpoint, &call, keys).await?;
        temporary(&v["Credentials"], "SecurityToken", source)
    }

    /// `~/.aliyun/config.json`: absent means "not configured here"; a profile that is
    /// named but missing, or in a mode gpuplan does not read, is an error.
    async fn profile(&self, http: &reqwest::Client) -> Result<Option<Resolved>, ProviderError> {
        let Some(path) = home(&self.env).map(|h| h.join(".aliyun").join("config.json")) else { return Ok(None) };
        let shown = path.display().to_string();
        let text_of = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(setup_error(CLOUD, format!("cannot read `{shown}`: {e}"))),
        };
        let conf: Value =
            serde_json::from_str(&text_of).map_err(|e| setup_error(CLOUD, format!("`{shown}` is not JSON: {e}")))?;
        let name = env_first(&self.env, &["ALIBABA_CLOUD_PROFILE"])
            .map(|(_, v)| v)
            .or_else(|| text(&conf, "current"))
            .unwrap_or_else(|| "default".to_string());
        let profiles = conf["profiles"].as_array().cloned().unwrap_or_default();
        let Some(p) = profiles.iter().find(|p| p["name"].as_str() == Some(name.as_str())) else {
            return Err(setup_error(CLOUD, format!("`{shown}` has no profile `{name}`")));
        };
        let mode = text(p, "mode").unwrap_or_default();
        let source = format!("profile `{name}` ({mode}) in `{shown}`");
        let keys = |token: Option<&str>| -> Result<Credentials, ProviderError> {
            let (Some(id), Some(secret)) = (text(p, "access_key_id"), text(p, "access_key_secret")) else {
                return Err(setup_error(CLOUD, format!("{source}: no `access_key_id` and `access_key_secret`")));
            };
            let token = match token {
                Some(k) => {
                    Some(Secret::new(text(p, k).ok_or_else(|| setup_error(CLOUD, format!("{source}: no `{k}`")))?))
                }
                None => None,
            };
            Ok(Credentials { id, secret: Secret::new(secret), token })
        };
        let resolved = match mode.as_str() {
            "AK" => long_lived(keys(None)?, source),
            "StsToken" => long_lived(keys(Some("sts_token"))?, source),
            "RamRoleArn" => self.assume_role(http, p, &keys(None)?, format!("STS AssumeRole with {source}")).await?,
            "EcsRamRole" => match self.ecs_role(http, text(p, "ram_role_name")).await? {
                Some(r) => Resolved { source: format!("{} from {source}", r.source), ..r },
                None => return Err(setup_error(CLOUD, format!("{source}: instance metadata did not answer"))),
            },
            "OIDC" => {
                let need = |k: &str| text(p, k).ok_or_else(|| setup_error(CLOUD, format!("{source}: no `{k}`")));
                let o = Oidc {
                    role: need("ram_role_arn")?,
                    provider: need("oidc_provider_arn")?,
                    token_file: need("oidc_token_file")?,
                    token_var: "oidc_token_file",
                    session: text(p, "ram_session_name"),
                    sts_region: text(p, "sts_region"),
                };
                self.oidc(http, &o, format!("STS AssumeRoleWithOIDC with {source}")).await?
            }
            other => {
                return Err(setup_error(
                    CLOUD,
                    format!(
                        "{source}: mode `{other}` is not supported (use AK, StsToken, RamRoleArn, EcsRamRole or OIDC)"
                    ),
                ));
            }
        };
        Ok(Some(resolved))
    }

    /// The ECS RAM role: `None` off ECS. IMDSv2 first (a session token), IMDSv1 when
    /// the token is refused, unless `ALIBABA_CLOUD_IMDSV1_DISABLED=true`.
    async fn ecs_role(&self, http: &reqwest::Client, named: Option<String>) -> Result<Option<Resolved>, ProviderError> {
        let base = endpoint(CLOUD, &self.env, ENV_METADATA_ENDPOINT, Endpoint::parse(METADATA).expect("a URL"))?;
        let failed = |m: String| setup_error(CLOUD, format!("ECS RAM role: {m}"));
        let ttl = [("X-aliyun-ecs-metadata-token-ttl-seconds", "21600".to_string())];
        let token = match metadata(http, reqwest::Method::PUT, &base.url("/latest/api/token"), &ttl).await {
            Ok(Metadata::Answer(t)) => Some(t.trim().to_string()),
            Ok(Metadata::Unreachable) => return Ok(None),
            _ if env_first(&self.env, &["ALIBABA_CLOUD_IMDSV1_DISABLED"]).is_some_and(|(_, v)| v == "true") => {
                return Err(failed("no IMDSv2 token, and ALIBABA_CLOUD_IMDSV1_DISABLED is true".into()));
            }
            _ => None,
        };
        let headers: Vec<(&str, String)> = token.into_iter().map(|t| ("X-aliyun-ecs-metadata-token", t)).collect();
        let get = |path: String| {
            let url = base.url(&path);
            let headers = headers.clone();
            async move { metadata(http, reqwest::Method::GET, &url, &headers).await }
        };
        let role = match named.or_else(|| env_first(&self.env, &["ALIBABA_CLOUD_ECS_METADATA"]).map(|(_, v)| v)) {
            Some(r) => r,
            None => match get(ROLE_PATH.to_string()).await.map_err(failed)? {
                Metadata::Answer(names) => match names.lines().map(str::trim).find(|l| !l.is_empty()) {
                    Some(r) => r.to_string(),
                    None => return Ok(None),
                },
                _ => return Ok(None),
            },
        };
        let Metadata::Answer(body) = get(format!("{ROLE_PATH}{role}")).await.map_err(failed)? else {
            return Err(failed(format!("the role `{role}` has no credentials in instance metadata")));
        };
        let v: Value = serde_json::from_str(&body).map_err(|e| failed(format!("not JSON ({e})")))?;
        if v["Code"].as_str().is_some_and(|c| c != "Success") {
            return Err(failed(format!("instance metadata answered `{}`", v["Code"].as_str().unwrap_or(""))));
        }
        temporary(&v, "SecurityToken", format!("the ECS RAM role `{role}` (instance metadata)")).map(Some)
    }
}

fn long_lived(credentials: Credentials, source: String) -> Resolved {
    Resolved { credentials, expires: None, source }
}

/// A non-blank string field.
fn text(v: &Value, key: &str) -> Option<String> {
    v[key].as_str().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// STS keys (`AccessKeyId`, `AccessKeySecret`, the token, `Expiration`).
fn temporary(keys: &Value, token_key: &str, source: String) -> Result<Resolved, ProviderError> {
    let (Some(id), Some(secret), Some(token)) =
        (text(keys, "AccessKeyId"), text(keys, "AccessKeySecret"), text(keys, token_key))
    else {
        return Err(setup_error(CLOUD, format!("{source}: the answer holds no STS keys")));
    };
    // An expiry that does not parse is refused: cached as "never expires", the keys would
    // be used after STS let them lapse.
    let expires = match text(keys, "Expiration") {
        None => None,
        Some(e) => Some(parse_time(&e).ok_or_else(|| {
            setup_error(CLOUD, format!("{source}: the keys' Expiration `{e}` is not an RFC 3339 time"))
        })?),
    };
    let credentials = Credentials { id, secret: Secret::new(secret), token: Some(Secret::new(token)) };
    Ok(Resolved { credentials, expires, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sts_keys_carry_their_token_and_expiry() {
        let v = json!({"AccessKeyId": "STS.x", "AccessKeySecret": "s", "SecurityToken": "t", "Expiration": "2030-01-01T00:00:00Z"});
        let r = temporary(&v, "SecurityToken", "STS".into()).unwrap();
        assert_eq!(r.credentials.token.as_ref().map(Secret::expose), Some("t"));
        assert!(r.expires.is_some());
        assert!(temporary(&json!({"AccessKeyId": "x"}), "SecurityToken", "STS".into()).is_err());
        let bad = json!({"AccessKeyId": "STS.x", "AccessKeySecret": "s", "SecurityToken": "t", "Expiration": "soon"});
        let err = temporary(&bad, "SecurityToken", "STS".into()).unwrap_err();
        assert!(err.to_string().contains("Expiration `soon`"), "{err}");
    }
}
