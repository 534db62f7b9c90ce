//! One signed JSON call, alike for both clouds: the provider block's credentials, the
//! request the cloud's [`Wire`] builds and signs (`signing/`), the send over the shared
//! HTTP client of `providers/http.rs`, and the answer read by the cloud's envelope.
//!
//! What differs per cloud is its [`Wire`]: how a call is addressed and signed (Tencent's
//! `X-TC-*` headers and TC3, Alibaba's `x-acs-*` headers and ACS3), and how its answer
//! says an error. Retries and backoff are the executor's (`apply::policy`), by the class
//! each error carries.

use std::marker::PhantomData;

use serde_json::Value;

use crate::providers::http::{CloudConfig, Credentials, Endpoint, network_error};
use crate::providers::{ErrorClass, ProviderError};

/// Where a call goes, and the credentials that sign it: `None` for the few calls a cloud
/// serves without a signature (the OIDC token exchanges of the credential chains).
#[derive(Clone, Copy)]
pub struct To<'a> {
    pub http: &'a reqwest::Client,
    pub endpoint: &'a Endpoint,
    pub creds: Option<&'a Credentials>,
}

/// How one cloud addresses, signs and answers a call.
pub trait Wire: Send + Sync + 'static {
    /// The cloud as messages name it (`Tencent Cloud`).
    const CLOUD: &'static str;

    /// One request in the cloud's terms (action, version, region, parameters).
    type Call<'a>;

    /// The HTTP request of `call` to `to`, and the call as messages name it (its action
    /// and region).
    fn request(to: &To<'_>, call: &Self::Call<'_>) -> (String, reqwest::RequestBuilder);

    /// The answer's JSON, or the error its envelope or HTTP status says (`what` names the
    /// call in the message).
    fn answer(status: reqwest::StatusCode, text: &str, what: &str) -> Result<Value, ProviderError>;
}

/// Send one call to `endpoint` and read its answer. A network failure is retryable (the
/// executor backs off and reuses the same idempotency token).
pub async fn send<W: Wire>(
    http: &reqwest::Client,
    endpoint: &Endpoint,
    call: &W::Call<'_>,
    creds: Option<&Credentials>,
) -> Result<Value, ProviderError> {
    let (what, req) = W::request(&To { http, endpoint, creds }, call);
    let failed = |e: reqwest::Error| network_error(&format!("{} {what}", W::CLOUD), &e);
    let resp = req.send().await.map_err(failed)?;
    let status = resp.status();
    let text = resp.text().await.map_err(failed)?;
    W::answer(status, &text, &what)
}

/// An HTTP failure without the cloud's error envelope: 5xx and 429 are retryable, the
/// rest fatal; the message shows `status` as `shown` and the first 200 characters.
pub fn http_error(cloud: &str, what: &str, status: reqwest::StatusCode, shown: &str, text: &str) -> ProviderError {
    let class =
        if status.is_server_error() || status.as_u16() == 429 { ErrorClass::Retryable } else { ErrorClass::Fatal };
    let snippet: String = text.chars().take(200).collect();
    ProviderError::new(
        class,
        format!("HTTP{}", status.as_u16()),
        format!("{cloud} {what} answered HTTP {shown}: {snippet}"),
    )
}

/// A signed-JSON cloud's client: the HTTP client and the provider block's settings, whose
/// credential chain signs every call.
pub struct Client<W> {
    http: reqwest::Client,
    config: CloudConfig,
    wire: PhantomData<fn() -> W>,
}

impl<W: Wire> Client<W> {
    pub fn new(config: CloudConfig) -> Result<Self, ProviderError> {
        Ok(Client { http: crate::providers::http::client()?, config, wire: PhantomData })
    }

    pub fn config(&self) -> &CloudConfig {
        &self.config
    }

    /// `call` to `endpoint`, signed with the provider block's credentials (resolved at
    /// the first call, and again before temporary keys expire).
    pub async fn signed(&self, endpoint: &Endpoint, call: &W::Call<'_>) -> Result<Value, ProviderError> {
        let creds = self.config.credentials.get(&self.http).await?;
        send::<W>(&self.http, endpoint, call, Some(&creds)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_failures_without_an_envelope_are_classed_by_status() {
        let e = http_error("X", "A in r", reqwest::StatusCode::TOO_MANY_REQUESTS, "429", &"y".repeat(300));
        assert_eq!((e.class, e.code.as_str()), (ErrorClass::Retryable, "HTTP429"));
        assert_eq!(e.message, format!("X A in r answered HTTP 429: {}", "y".repeat(200)));
        let e = http_error("X", "A in r", reqwest::StatusCode::FORBIDDEN, "403 Forbidden", "no");
        assert_eq!(e.class, ErrorClass::Fatal);
        let e = http_error("X", "A in r", reqwest::StatusCode::BAD_GATEWAY, "502", "");
        assert_eq!(e.class, ErrorClass::Retryable);
    }
}
