//! What the self-signed HTTP providers (Tencent Cloud, Alibaba Cloud) share: the HTTP
//! client, endpoint overrides and a client-side rate limit; credentials (that never
//! print) come from [`crate::providers::credentials`].
//!
//! Nothing here knows a cloud's wire format; each provider folder signs and parses its
//! own requests.

use std::time::{Duration, Instant};

use crate::providers::{Capacity, ErrorClass, ProviderError};

pub use crate::providers::credentials::{CredentialCache, Credentials, Secret};

pub use crate::model::Endpoint;

/// The HTTP client: rustls on ring (installed once as the process default), HTTP/1.1,
/// bounded connect and request times.
pub fn client() -> Result<reqwest::Client, ProviderError> {
    crate::model::tls::install_ring();
    reqwest::Client::builder()
        .http1_only()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| ProviderError::new(ErrorClass::Fatal, "HttpClient", format!("cannot build the HTTP client: {e}")))
}

/// A network failure as a provider error: retryable (the executor backs off and reuses
/// the same idempotency token, so a request that did arrive is not repeated).
pub fn network_error(what: &str, e: &reqwest::Error) -> ProviderError {
    let cause = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "could not connect".to_string()
    } else {
        "failed".to_string()
    };
    // `reqwest::Error` shows the URL but never headers, so no credential leaks here.
    ProviderError::new(ErrorClass::Retryable, "NetworkError", format!("{what} {cause}: {e}"))
}

/// Client-side rate limit: at most one call per `interval` (10 per second for Tencent's
/// RunInstances and TerminateInstances).
#[derive(Debug)]
pub struct RateLimit {
    interval: Duration,
    next: tokio::sync::Mutex<Option<Instant>>,
}

impl RateLimit {
    pub fn per_second(n: u32) -> Self {
        RateLimit { interval: Duration::from_secs(1) / n.max(1), next: tokio::sync::Mutex::new(None) }
    }

    /// Wait for this call's slot.
    pub async fn wait(&self) {
        let slot = {
            let mut next = self.next.lock().await;
            let now = Instant::now();
            let slot = next.map_or(now, |n| n.max(now));
            *next = Some(slot + self.interval);
            slot
        };
        tokio::time::sleep_until(slot.into()).await;
    }
}

/// Catalog offers of one cloud for a GPU model (prices converted at `cny_per_usd`).
pub fn catalog_offers(
    kind: crate::spec::model::ProviderKind,
    gpu: &str,
    region: Option<&str>,
    cny_per_usd: f64,
) -> Vec<crate::providers::Offer> {
    use crate::catalog::{catalog, gpu_models_like};
    use crate::providers::{Capacity, Offer};
    let models: Vec<&str> = match catalog().gpu_model(gpu) {
        Some(m) => vec![m.name],
        None => gpu_models_like(gpu).into_iter().map(|m| m.name).collect(),
    };
    let mut offers = Vec::new();
    let Some(cloud) = catalog().cloud(kind) else { return offers };
    for t in catalog().instance_types(kind).into_iter().filter(|t| models.contains(&t.gpu.as_str())) {
        for r in cloud.regions.iter().filter(|r| t.offered_in(&r.name) && region.is_none_or(|x| x == r.name)) {
            let zones: Vec<String> = t.zones_in(r).into_iter().map(String::from).collect();
            for (capacity, price) in
                [(Capacity::OnDemand, t.price_usd(cny_per_usd)), (Capacity::Spot, t.spot_price_usd(cny_per_usd))]
            {
                offers.push(Offer {
                    provider: kind,
                    instance_type: t.name.clone(),
                    gpu: t.gpu.clone(),
                    gpus: t.gpus,
                    region: r.name.clone(),
                    zones: zones.clone(),
                    capacity,
                    price_usd: price,
                    live_price: false,
                    as_of: t.as_of.clone(),
                });
            }
        }
    }
    offers.sort_by(|a, b| {
        (a.price_usd / f64::from(a.gpus.max(1)))
            .total_cmp(&(b.price_usd / f64::from(b.gpus.max(1))))
            .then_with(|| a.instance_type.cmp(&b.instance_type))
    });
    offers
}

/// The node request of a user-data job launch: one node of `req.shape`, booted with
/// [`crate::providers::userdata::job_script`], tagged with the job and its attempt, under
/// the launch's own idempotency token.
pub fn job_node_request(req: &crate::providers::LaunchJob) -> Result<crate::providers::CreateNodes, ProviderError> {
    use crate::providers::{TAG_ATTEMPT, TAG_JOB, TAG_MANAGED};
    let mut shape = req.shape.clone().ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "MissingJobShape",
            format!("`{}`: this cloud runs a job on a node made for it, but the launch names no node shape", req.job),
        )
    })?;
    shape.count = 1;
    shape.token = req.token.clone();
    shape.user_data = Some(crate::providers::userdata::job_script(req)?);
    shape.tags.extend([
        (TAG_MANAGED, "true".to_string()),
        (TAG_JOB, req.job.to_string()),
        (TAG_ATTEMPT, req.attempt.to_string()),
    ]);
    Ok(shape)
}

/// `ids` without repeats, first occurrence kept.
pub fn dedup(ids: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    ids.iter().filter(|id| seen.insert(id.as_str())).cloned().collect()
}

/// Current unix time in seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A token the cloud accepts as `ClientToken` (ASCII, at most 64 characters): `base`
/// with `suffix`, hashed down when too long. Deterministic, so retries reuse it.
pub fn client_token(base: &str, suffix: &str) -> String {
    let t = format!("{base}{suffix}");
    if t.len() <= 64 && t.is_ascii() {
        t
    } else {
        format!("gp-{}", &crate::providers::signing::sha256_hex(t.as_bytes())[..60])
    }
}

/// A provider block's settings for a self-signed HTTP cloud, resolved once when the
/// providers are built. Credentials stay here (redacted) and go nowhere else.
#[derive(Debug, Clone)]
pub struct CloudConfig {
    /// The provider block's local name (`tencentcloud`, or its alias).
    pub name: String,
    /// `endpoint` in the block, else the `GPUPLAN_<CLOUD>_ENDPOINT` variable.
    pub endpoint: Option<Endpoint>,
    /// The provider's credential chain, resolved at the first call (so `plan
    /// --refresh=false` needs none) and again before temporary keys expire.
    pub credentials: std::sync::Arc<CredentialCache>,
    pub image: Option<String>,
    /// Zone → subnet (Tencent `vpc-…/subnet-…`, Alibaba vSwitch id).
    pub subnets: std::collections::BTreeMap<String, String>,
    pub security_groups: Vec<String>,
    pub key_name: Option<String>,
    pub cluster_id: Option<String>,
    /// CNY per USD: `max_spot_price` is given in USD, the clouds bid in CNY.
    pub cny_per_usd: f64,
}

/// Live quotes per run: (region, instance type, capacity) → (USD per node-hour, quoted at).
pub type QuoteCache = tokio::sync::Mutex<std::collections::HashMap<(String, String, Capacity), (f64, String)>>;

/// The catalog's offers with live quotes where the cloud gives a believable one:
/// `quote(region, instance type, zone, capacity)` answers USD per node-hour. A quote far
/// from the catalog's on-demand price is refused with a warning and the catalog price
/// stands; a failed call fails the whole answer (the caller keeps catalog prices and
/// says why). Quotes are cached for the run with the time they were given.
pub async fn quoted_offers<F, Fut>(
    kind: crate::spec::model::ProviderKind,
    mut offers: Vec<crate::providers::Offer>,
    cache: &QuoteCache,
    quote: F,
) -> Result<Vec<crate::providers::Offer>, crate::providers::ProviderError>
where
    F: Fn(String, String, String, Capacity) -> Fut,
    Fut: std::future::Future<Output = Result<f64, crate::providers::ProviderError>>,
{
    let on_demand: std::collections::HashMap<(String, String), f64> = offers
        .iter()
        .filter(|o| o.capacity == Capacity::OnDemand)
        .map(|o| ((o.region.clone(), o.instance_type.clone()), o.price_usd))
        .collect();
    for o in offers.iter_mut() {
        let Some(zone) = o.zones.first().cloned() else { continue };
        let key = (o.region.clone(), o.instance_type.clone(), o.capacity);
        let cached = cache.lock().await.get(&key).cloned();
        let (price, at) = match cached {
            Some(hit) => hit,
            None => {
                let p = quote(o.region.clone(), o.instance_type.clone(), zone, o.capacity).await?;
                let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
                cache.lock().await.insert(key, (p, at.clone()));
                (p, at)
            }
        };
        let catalog_od = on_demand.get(&(o.region.clone(), o.instance_type.clone())).copied().unwrap_or(o.price_usd);
        if crate::providers::sane_quote(price, catalog_od) {
            o.price_usd = price;
            o.live_price = true;
            o.as_of = at;
        } else {
            eprintln!(
                "warning: {kind} quoted {price} USD/h for {} {} in {} (catalog on-demand {catalog_od:.4} USD/h); ignoring it and using the catalog price",
                o.capacity, o.instance_type, o.region
            );
        }
    }
    crate::providers::sort_offers(&mut offers);
    Ok(offers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let c = Credentials { id: "AKID".into(), secret: Secret::new("s3cr3t"), token: None };
        assert!(!format!("{c:?}").contains("s3cr3t"));
    }

    #[test]
    fn endpoints_parse_and_refuse_nonsense() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:8080/").unwrap(),
            Endpoint { scheme: "http".into(), authority: "127.0.0.1:8080".into() }
        );
        assert!(Endpoint::parse("cvm.tencentcloudapi.com").is_err());
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("https://x/path").is_err());
    }

    #[test]
    fn client_tokens_stay_within_64_ascii_characters() {
        assert_eq!(client_token("gp-abc", "-1"), "gp-abc-1");
        let long = client_token(&"x".repeat(70), "-1");
        assert_eq!(long.len(), 63);
        assert_eq!(long, client_token(&"x".repeat(70), "-1"));
    }
}
