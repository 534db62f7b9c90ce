//! Alibaba's [`Wire`] for the shared signed-JSON client (`signed_json::client`): RPC
//! style for ECS and KMS (parameters in the query, `/` signed) and ROA style for ACK (the
//! resource path signed), both ACS3-HMAC-SHA256, with the provider block's credentials
//! ([`Client::ecs`], [`Client::cs`]) or given ones (`signed_json::client::send`: STS).

use std::collections::BTreeMap;

use serde_json::Value;

use super::errors::api_error;
use crate::providers::ProviderError;
use crate::providers::http::{Endpoint, unix_now};
use crate::providers::signed_json::{
    self,
    client::{To, Wire, http_error},
};
use crate::providers::signing::{acs3, iso8601, sha256_hex};

pub const ECS_VERSION: &str = "2014-05-26";
pub const CS_VERSION: &str = "2015-12-15";
pub const KMS_VERSION: &str = "2016-01-20";

/// Alibaba Cloud's wire: RPC and ROA calls signed with ACS3-HMAC-SHA256.
pub struct Acs3;

/// The provider block's client: RPC ([`Client::ecs`], [`Client::kms`]) and ROA
/// ([`Client::cs`], [`Client::cs_json`]) calls.
pub type Client = signed_json::client::Client<Acs3>;

/// An RPC product: its endpoint prefix and API version.
type Product = (&'static str, &'static str);
const ECS: Product = ("ecs", ECS_VERSION);
const KMS: Product = ("kms", KMS_VERSION);

impl signed_json::client::Client<Acs3> {
    /// An ECS RPC call; `RegionId` is added.
    pub async fn ecs(&self, action: &str, region: &str, params: Vec<(String, String)>) -> Result<Value, ProviderError> {
        self.rpc(ECS, action, region, params).await
    }

    /// A KMS RPC call; `RegionId` is added.
    pub async fn kms(&self, action: &str, region: &str, params: Vec<(String, String)>) -> Result<Value, ProviderError> {
        self.rpc(KMS, action, region, params).await
    }

    /// An RPC call of `product` (ECS, KMS); `RegionId` is added.
    async fn rpc(
        &self,
        (product, version): Product,
        action: &str,
        region: &str,
        mut params: Vec<(String, String)>,
    ) -> Result<Value, ProviderError> {
        params.push(("RegionId".into(), region.into()));
        let call = Call { version, method: "POST", path: "/", action, region, query: &params, body: b"" };
        self.call(product, &call).await
    }

    /// A CS (ACK) ROA call.
    pub async fn cs(
        &self,
        method: &str,
        path: &str,
        action: &str,
        region: &str,
        query: &[(String, String)],
    ) -> Result<Value, ProviderError> {
        self.call("cs", &Call { version: CS_VERSION, method, path, action, region, query, body: b"" }).await
    }

    /// A CS (ROA) call with a JSON body, e.g. `POST /clusters/{id}/attach`.
    pub async fn cs_json(&self, path: &str, action: &str, region: &str, body: &Value) -> Result<Value, ProviderError> {
        let bytes = serde_json::to_vec(body).expect("a JSON value always serializes");
        let call = Call { version: CS_VERSION, method: "POST", path, action, region, query: &[], body: &bytes };
        self.call("cs", &call).await
    }

    /// `call` to the block's endpoint, else `product`'s public one in the call's region.
    async fn call(&self, product: &str, call: &Call<'_>) -> Result<Value, ProviderError> {
        let endpoint = self.config().endpoint.clone().unwrap_or_else(|| Endpoint {
            scheme: "https".into(),
            authority: format!("{product}.{}.aliyuncs.com", call.region),
        });
        self.signed(&endpoint, call).await
    }
}

/// One request: RPC (`path` `/`, parameters in `query`) or ROA (a resource path).
#[derive(Clone, Copy)]
pub struct Call<'a> {
    pub version: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub action: &'a str,
    /// For messages.
    pub region: &'a str,
    pub query: &'a [(String, String)],
    pub body: &'a [u8],
}

impl Wire for Acs3 {
    const CLOUD: &'static str = "Alibaba Cloud";
    type Call<'a> = Call<'a>;

    /// Signed with `creds` (their STS token in `x-acs-security-token`), or anonymous for
    /// the calls Alibaba serves without a signature (`AssumeRoleWithOIDC`).
    fn request(to: &To<'_>, call: &Call<'_>) -> (String, reqwest::RequestBuilder) {
        let (Call { version, method, path, action, region, query, body }, To { http, endpoint, creds }) = (*call, *to);
        let payload_hash = sha256_hex(body);
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        if !body.is_empty() {
            headers.insert("content-type".into(), "application/json".into());
        }
        headers.insert("host".into(), endpoint.authority.clone());
        headers.insert("x-acs-action".into(), action.into());
        headers.insert("x-acs-version".into(), version.into());
        headers.insert("x-acs-date".into(), iso8601(unix_now()));
        headers.insert("x-acs-signature-nonce".into(), uuid::Uuid::new_v4().simple().to_string());
        headers.insert("x-acs-content-sha256".into(), payload_hash.clone());
        if let Some(t) = creds.and_then(|c| c.token.as_ref()) {
            headers.insert("x-acs-security-token".into(), t.expose().to_string());
        }
        let authorization = creds.map(|c| {
            let request = acs3::Request { method, path, query, headers: &headers, payload_hash: &payload_hash };
            acs3::sign(&c.id, c.secret.expose(), &request).authorization
        });
        let qs = acs3::canonical_query(query);
        let url = endpoint.url(&format!("{}{}{qs}", acs3::canonical_uri(path), if qs.is_empty() { "" } else { "?" }));
        let method_v = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let mut req = http.request(method_v, url).header("Accept", "application/json");
        for (k, v) in headers.iter().filter(|(k, _)| k.as_str() != "host") {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(a) = authorization {
            req = req.header("Authorization", a);
        }
        if !body.is_empty() {
            req = req.body(body.to_vec());
        }
        (format!("{action} in {region}"), req)
    }

    /// The answer's JSON. Errors come as 4xx/5xx with a `Code`, and some gateways answer
    /// 200 with one.
    fn answer(status: reqwest::StatusCode, text: &str, what: &str) -> Result<Value, ProviderError> {
        let code_n = status.as_u16();
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            return Err(http_error(Self::CLOUD, what, status, &format!("{code_n} without JSON"), text));
        };
        let code = v.get("Code").and_then(Value::as_str).or_else(|| v.get("code").and_then(Value::as_str));
        if code_n >= 300 || code.is_some_and(|c| !c.is_empty() && c != "200") {
            let code = code.unwrap_or("UnknownError");
            let message = v.get("Message").or_else(|| v.get("message")).and_then(Value::as_str).unwrap_or("");
            let rid = v.get("RequestId").or_else(|| v.get("requestId")).and_then(Value::as_str).unwrap_or("");
            return Err(api_error(what, code, message, rid, code_n));
        }
        Ok(v)
    }
}
