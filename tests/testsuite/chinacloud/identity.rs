//! The identity side of the fake clouds: STS (Tencent `AssumeRole` and
//! `AssumeRoleWithWebIdentity`; Alibaba `AssumeRole` and `AssumeRoleWithOIDC`) and the
//! instance-metadata endpoints that hand out an instance role's keys (Tencent's CVM role,
//! Alibaba's ECS RAM role with IMDSv2 tokens).
//!
//! Keys issued here are temporary: each carries a token, and the fakes' signature checks
//! accept them only with that token in `X-TC-Token` / `x-acs-security-token` (signed) and
//! only until they expire, so a request signed with them proves the chain used them.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use crate::chinacloud::server::{self, Request, Response, query_pairs};

#[derive(Default)]
pub struct Identity {
    /// Issued temporary keys: id → (secret, token, expires at, unix seconds).
    pub issued: HashMap<String, (String, String, u64)>,
    pub counter: u64,
    /// How long issued keys live, in seconds (default an hour).
    pub ttl: Option<u64>,
    /// The role instance metadata serves (`None`: no role on this instance).
    pub instance_role: Option<String>,
    /// The OIDC token STS accepts.
    pub oidc_token: Option<String>,
    /// Metadata session tokens handed out (Alibaba IMDSv2).
    pub metadata_tokens: HashSet<String>,
    /// Identity calls: (what, detail), e.g. ("AssumeRole", role ARN).
    pub calls: Vec<(String, String)>,
}

impl Identity {
    /// New temporary keys: (id, secret, token, expires at).
    pub fn issue(&mut self, prefix: &str) -> (String, String, String, u64) {
        self.counter += 1;
        let n = self.counter;
        let expires = server::now() + self.ttl.unwrap_or(3600);
        let (id, secret, token) =
            (format!("{prefix}{n:04}"), format!("tmp-secret-{n}-b7"), format!("tmp-token-{n}-c9"));
        self.issued.insert(id.clone(), (secret.clone(), token.clone(), expires));
        (id, secret, token, expires)
    }

    /// The secret of temporary key `id`, if its token matches and it has not expired.
    pub fn temporary(&self, id: &str, token: &str) -> Result<String, &'static str> {
        let Some((secret, want, expires)) = self.issued.get(id) else { return Err("unknown key") };
        if token != want {
            return Err("the temporary key's token is missing or wrong");
        }
        if *expires <= server::now() {
            return Err("the temporary key has expired");
        }
        Ok(secret.clone())
    }

    pub fn count(&self, what: &str) -> usize {
        self.calls.iter().filter(|(w, _)| w == what).count()
    }

    fn record(&mut self, what: &str, detail: &str) {
        self.calls.push((what.to_string(), detail.to_string()));
    }
}

fn rfc3339(unix: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix)).to_string()
}

// --- Tencent ---------------------------------------------------------------------------

fn tc_ok(mut body: Value) -> Response {
    body["RequestId"] = json!(uuid::Uuid::new_v4().to_string());
    Response { status: 200, body: json!({"Response": body}).to_string() }
}

fn tc_err(code: &str, message: &str) -> Response {
    tc_ok(json!({"Error": {"Code": code, "Message": message}}))
}

fn tc_keys((tid, secret, token, expires): (String, String, String, u64)) -> Value {
    json!({
        "Credentials": {"TmpSecretId": tid, "TmpSecretKey": secret, "Token": token},
        "ExpiredTime": expires,
        "Expiration": rfc3339(expires),
    })
}

/// CVM metadata: `GET /latest/meta-data/cam/security-credentials/[ROLE]`.
pub fn tencent_metadata(id: &mut Identity, req: &Request) -> Option<Response> {
    let rest = req.path.strip_prefix("/latest/meta-data/cam/security-credentials/")?;
    let not_found = Response { status: 404, body: "Not Found".into() };
    let Some(role) = id.instance_role.clone() else { return Some(not_found) };
    if rest.is_empty() {
        return Some(Response { status: 200, body: role });
    }
    if rest != role {
        return Some(not_found);
    }
    id.record("metadata", &role);
    let keys = id.issue("AKIDcvm");
    let mut body = tc_keys(keys);
    let creds = body["Credentials"].clone();
    for k in ["TmpSecretId", "TmpSecretKey", "Token"] {
        body[k] = creds[k].clone();
    }
    body["Code"] = json!("Success");
    Some(Response { status: 200, body: body.to_string() })
}

/// `AssumeRoleWithWebIdentity`: unsigned (`Authorization: SKIP`), the token must match.
pub fn tencent_web_identity(id: &mut Identity, req: &Request) -> Response {
    if req.headers.get("authorization").map(String::as_str) != Some("SKIP") {
        return tc_err("InvalidParameter", "AssumeRoleWithWebIdentity is called without a signature.");
    }
    let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
        return tc_err("InvalidParameter", "the request body is not JSON");
    };
    for k in ["ProviderId", "RoleArn", "RoleSessionName"] {
        if body[k].as_str().is_none_or(str::is_empty) {
            return tc_err("MissingParameter", &format!("The request is missing a required parameter `{k}`."));
        }
    }
    if id.oidc_token.is_none() || body["WebIdentityToken"].as_str() != id.oidc_token.as_deref() {
        return tc_err("InvalidParameter.WebIdentityTokenError", "The web identity token is invalid.");
    }
    id.record("AssumeRoleWithWebIdentity", body["RoleArn"].as_str().unwrap_or(""));
    let keys = id.issue("AKIDoidc");
    tc_ok(tc_keys(keys))
}

/// `AssumeRole`, already signature-checked by the fake.
pub fn tencent_assume_role(id: &mut Identity, body: &Value) -> Response {
    let Some(role) = body["RoleArn"].as_str().filter(|r| r.starts_with("qcs::cam::")) else {
        return tc_err("InvalidParameter.RoleArnError", "RoleArn is not a CAM role.");
    };
    id.record("AssumeRole", role);
    let keys = id.issue("AKIDrole");
    tc_ok(tc_keys(keys))
}

// --- Alibaba ---------------------------------------------------------------------------

fn ali_keys(id: &mut Identity, prefix: &str) -> Value {
    let (tid, secret, token, expires) = id.issue(prefix);
    json!({"AccessKeyId": tid, "AccessKeySecret": secret, "SecurityToken": token, "Expiration": rfc3339(expires)})
}

fn ali_err(status: u16, code: &str, message: &str) -> Response {
    Response { status, body: json!({"RequestId": "FAKE", "Code": code, "Message": message}).to_string() }
}

/// ECS metadata: `PUT /latest/api/token`, then `GET …/ram/security-credentials/[ROLE]`
/// with the token (IMDSv2 only: a request without one is refused).
pub fn alibaba_metadata(id: &mut Identity, req: &Request) -> Option<Response> {
    if req.method == "PUT" && req.path == "/latest/api/token" {
        let token = format!("imds-{}", uuid::Uuid::new_v4().simple());
        id.metadata_tokens.insert(token.clone());
        return Some(Response { status: 200, body: token });
    }
    let rest = req.path.strip_prefix("/latest/meta-data/ram/security-credentials/")?;
    let token = req.headers.get("x-aliyun-ecs-metadata-token").cloned().unwrap_or_default();
    if !id.metadata_tokens.contains(&token) {
        return Some(Response { status: 401, body: "Unauthorized".into() });
    }
    let not_found = Response { status: 404, body: "Not Found".into() };
    let Some(role) = id.instance_role.clone() else { return Some(not_found) };
    if rest.is_empty() {
        return Some(Response { status: 200, body: role });
    }
    if rest != role {
        return Some(not_found);
    }
    id.record("metadata", &role);
    let mut body = ali_keys(id, "STS.ecs");
    body["Code"] = json!("Success");
    Some(Response { status: 200, body: body.to_string() })
}

/// `AssumeRoleWithOIDC`: anonymous (no `Authorization`), the token must match.
pub fn alibaba_oidc(id: &mut Identity, req: &Request) -> Response {
    if req.headers.contains_key("authorization") {
        return ali_err(400, "InvalidParameter", "AssumeRoleWithOIDC is anonymous.");
    }
    let p: HashMap<String, String> = query_pairs(&req.query).into_iter().collect();
    for k in ["RoleArn", "OIDCProviderArn", "RoleSessionName"] {
        if p.get(k).is_none_or(|v| v.is_empty()) {
            return ali_err(400, "MissingParameter", &format!("{k} is mandatory for this action."));
        }
    }
    if id.oidc_token.is_none() || p.get("OIDCToken") != id.oidc_token.as_ref() {
        return ali_err(400, "AuthenticationFail.OIDCToken.Invalid", "The OIDC token is invalid.");
    }
    id.record("AssumeRoleWithOIDC", &p["RoleArn"]);
    let keys = ali_keys(id, "STS.oidc");
    Response { status: 200, body: json!({"RequestId": "FAKE", "Credentials": keys}).to_string() }
}

/// `AssumeRole`, already signature-checked by the fake.
pub fn alibaba_assume_role(id: &mut Identity, req: &Request) -> Response {
    let p: HashMap<String, String> = query_pairs(&req.query).into_iter().collect();
    let Some(role) = p.get("RoleArn").filter(|r| r.starts_with("acs:ram::")) else {
        return ali_err(400, "InvalidParameter.RoleArn", "The parameter RoleArn is wrongly formed.");
    };
    id.record("AssumeRole", role);
    let keys = ali_keys(id, "STS.role");
    Response { status: 200, body: json!({"RequestId": "FAKE", "Credentials": keys}).to_string() }
}
