//! What the Tencent Cloud and Alibaba Cloud credential chains share: the resolved
//! credentials with their expiry and the name of the source that answered, the cache that
//! keeps them until shortly before they expire (a long `reconcile` refreshes them), and
//! the small readers every source uses (environment, files, instance metadata).
//!
//! Each cloud's chain (which sources, in which order, how its STS is called) lives in its
//! own folder (`tencentcloud/credentials.rs`, `alicloud/credentials.rs`). Nothing here
//! prints or returns a secret except to the signer: messages name sources, variables and
//! files, never values.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::model::Endpoint;
use crate::providers::{ErrorClass, ProviderError};

/// A secret that never shows up in `Debug`, `Display`, logs or serialized output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    /// The secret itself, for signing only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// An access key pair (and an optional STS session token).
#[derive(Clone, Debug)]
pub struct Credentials {
    pub id: String,
    pub secret: Secret,
    pub token: Option<Secret>,
}

/// Temporary credentials are fetched again once they have less than this left: a call
/// signed now must still be valid when it arrives, and a run never waits for a refusal.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(180);

/// How long an instance-metadata request may take. Off an instance the address answers
/// nothing (or is unroutable), so the chain must give up quickly, as the SDKs do.
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(1);

/// Credentials as a source gave them.
#[derive(Clone)]
pub struct Resolved {
    pub credentials: Credentials,
    /// `None`: long-lived keys.
    pub expires: Option<SystemTime>,
    /// Which source answered, for `gpuplan check` and messages (never a value).
    pub source: String,
}

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolved").field("source", &self.source).field("expires", &self.expires).finish()
    }
}

/// A cloud's credential chain: asked again whenever the cached credentials near expiry.
#[async_trait]
pub trait Resolve: Send + Sync {
    async fn resolve(&self, http: &reqwest::Client) -> Result<Resolved, ProviderError>;
}

/// The credentials of one provider block: resolved on first use (so `plan
/// --refresh=false` needs none), kept while fresh, resolved again before they expire.
pub struct CredentialCache {
    chain: Box<dyn Resolve>,
    current: tokio::sync::Mutex<Option<Resolved>>,
    answered: std::sync::Mutex<Option<String>>,
}

impl fmt::Debug for CredentialCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialCache").field("answered", &self.source()).finish()
    }
}

/// A chain of one source that always gives the same long-lived keys.
struct Fixed(Resolved);

#[async_trait]
impl Resolve for Fixed {
    async fn resolve(&self, _http: &reqwest::Client) -> Result<Resolved, ProviderError> {
        Ok(self.0.clone())
    }
}

impl CredentialCache {
    pub fn new(chain: Box<dyn Resolve>) -> Self {
        CredentialCache { chain, current: tokio::sync::Mutex::new(None), answered: std::sync::Mutex::new(None) }
    }

    /// Long-lived keys given directly (tests, embedders).
    pub fn fixed(credentials: Credentials, source: &str) -> Self {
        CredentialCache::new(Box::new(Fixed(Resolved { credentials, expires: None, source: source.to_string() })))
    }

    /// Credentials valid for a while yet: the cached ones, else the chain's answer.
    pub async fn get(&self, http: &reqwest::Client) -> Result<Credentials, ProviderError> {
        let mut current = self.current.lock().await;
        if let Some(r) = current.as_ref()
            && fresh(r.expires, SystemTime::now())
        {
            return Ok(r.credentials.clone());
        }
        let r = self.chain.resolve(http).await?;
        *self.answered.lock().unwrap_or_else(|e| e.into_inner()) = Some(r.source.clone());
        let credentials = r.credentials.clone();
        *current = Some(r);
        Ok(credentials)
    }

    /// The source that answered last, once any has.
    pub fn source(&self) -> Option<String> {
        self.answered.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Whether credentials expiring at `expires` can still be used at `now`.
pub fn fresh(expires: Option<SystemTime>, now: SystemTime) -> bool {
    expires.is_none_or(|t| t.duration_since(now).is_ok_and(|left| left > REFRESH_BEFORE))
}

/// The first of `names` set to something non-blank: (name, trimmed value).
pub fn env_first<'a>(env: &BTreeMap<String, String>, names: &[&'a str]) -> Option<(&'a str, String)> {
    names.iter().find_map(|n| env.get(*n).map(|v| v.trim()).filter(|v| !v.is_empty()).map(|v| (*n, v.to_string())))
}

/// The home directory the environment names (`HOME`).
pub fn home(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    env.get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// A configuration error of a source that is set up but cannot work: the chain stops
/// here rather than fall through to another identity.
pub fn setup_error(cloud: &str, message: String) -> ProviderError {
    ProviderError::new(ErrorClass::Auth, "CredentialSource", format!("{cloud} credentials: {message}"))
}

/// A token file's contents (an OIDC token), read anew at each refresh: the platform
/// rotates the file.
pub fn read_token(cloud: &str, var: &str, path: &str) -> Result<String, ProviderError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| setup_error(cloud, format!("cannot read the token file `{path}` named by `{var}`: {e}")))?;
    let token = text.trim().to_string();
    if token.is_empty() {
        return Err(setup_error(cloud, format!("the token file `{path}` named by `{var}` is empty")));
    }
    Ok(token)
}

/// An endpoint from an override variable, else `default`.
pub fn endpoint(
    cloud: &str,
    env: &BTreeMap<String, String>,
    var: &str,
    default: Endpoint,
) -> Result<Endpoint, ProviderError> {
    match env_first(env, &[var]) {
        Some((_, v)) => Endpoint::parse(&v).map_err(|m| setup_error(cloud, format!("`{var}`: {m}"))),
        None => Ok(default),
    }
}

/// What instance metadata answered.
#[derive(Debug, PartialEq)]
pub enum Metadata {
    Answer(String),
    /// 404: the path (a role) is not there.
    Missing,
    /// No answer at all: not on an instance of this cloud.
    Unreachable,
}

/// One instance-metadata request; an answer other than 200 or 404 is an error.
pub async fn metadata(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, String)],
) -> Result<Metadata, String> {
    let mut req = http.request(method, url).timeout(METADATA_TIMEOUT);
    for (k, v) in headers {
        req = req.header(*k, v.as_str());
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) if e.is_connect() || e.is_timeout() => return Ok(Metadata::Unreachable),
        Err(e) => return Err(format!("the instance metadata service failed: {e}")),
    };
    let status = resp.status();
    if status.as_u16() == 404 {
        return Ok(Metadata::Missing);
    }
    let text = resp.text().await.map_err(|e| format!("the instance metadata service failed: {e}"))?;
    if !status.is_success() {
        return Err(format!("the instance metadata service answered HTTP {status}"));
    }
    Ok(Metadata::Answer(text))
}

/// An RFC 3339 time (`2026-01-01T00:00:00Z`), as STS and metadata write expiries.
pub fn parse_time(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s.trim().trim_end_matches('Z')).ok()
}

/// A session name for AssumeRole calls that names the tool and is unique per process.
pub fn session_name() -> String {
    format!("gpuplan-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A chain that counts its calls and hands out credentials living `ttl`.
    struct Counting(Arc<AtomicU32>, Option<Duration>);

    #[async_trait]
    impl Resolve for Counting {
        async fn resolve(&self, _http: &reqwest::Client) -> Result<Resolved, ProviderError> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Ok(Resolved {
                credentials: Credentials { id: format!("id-{n}"), secret: Secret::new("s"), token: None },
                expires: self.1.map(|ttl| SystemTime::now() + ttl),
                source: "counting".into(),
            })
        }
    }

    fn http() -> reqwest::Client {
        crate::model::tls::install_ring();
        reqwest::Client::new()
    }

    #[tokio::test]
    async fn credentials_are_kept_while_fresh_and_fetched_again_near_expiry() {
        let calls = Arc::new(AtomicU32::new(0));
        let lasting = CredentialCache::new(Box::new(Counting(calls.clone(), Some(Duration::from_secs(3600)))));
        assert_eq!(lasting.source(), None);
        for _ in 0..3 {
            assert_eq!(lasting.get(&http()).await.unwrap().id, "id-0");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(lasting.source().as_deref(), Some("counting"));

        // Less than REFRESH_BEFORE left: every use asks the chain again.
        let calls = Arc::new(AtomicU32::new(0));
        let short = CredentialCache::new(Box::new(Counting(calls.clone(), Some(Duration::from_secs(60)))));
        assert_eq!(short.get(&http()).await.unwrap().id, "id-0");
        assert_eq!(short.get(&http()).await.unwrap().id, "id-1");
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        let calls = Arc::new(AtomicU32::new(0));
        let static_keys = CredentialCache::new(Box::new(Counting(calls.clone(), None)));
        static_keys.get(&http()).await.unwrap();
        static_keys.get(&http()).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn freshness_keeps_a_margin_before_expiry() {
        let now = SystemTime::now();
        assert!(fresh(None, now));
        assert!(fresh(Some(now + Duration::from_secs(3600)), now));
        assert!(!fresh(Some(now + Duration::from_secs(60)), now));
        assert!(!fresh(Some(now - Duration::from_secs(1)), now));
    }

    #[test]
    fn expiry_times_parse_with_or_without_the_zone_letter() {
        let t = parse_time("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(t, parse_time("2026-01-01T00:00:00").unwrap());
        assert!(parse_time("tomorrow").is_none());
    }

    #[test]
    fn debug_shows_the_source_never_the_keys() {
        let r = Resolved {
            credentials: Credentials { id: "AKIDSECRETID".into(), secret: Secret::new("k3y"), token: None },
            expires: None,
            source: "environment".into(),
        };
        let text = format!("{r:?}");
        assert!(text.contains("environment") && !text.contains("AKIDSECRETID") && !text.contains("k3y"), "{text}");
    }
}
