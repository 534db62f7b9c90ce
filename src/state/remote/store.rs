//! The object store a backend block names: S3 and S3-compatible stores (with the lock
//! mode the block configures), Google Cloud Storage and Azure Blob, each with short
//! timeouts and a few quick retries; the small runtime the store's calls run on; and how
//! a store's errors read as the state layer reports them.

use std::sync::Arc;
use std::time::Duration;

use object_store::ClientConfigKey;
use object_store::ObjectStore;
use object_store::azure::AzureConfigKey;
use object_store::gcp::GoogleConfigKey;

use super::LockMode;
use crate::spec::backend::BackendConfig;
use crate::state::error::StateError;

const CONNECT_TIMEOUT: &str = "10s";
const REQUEST_TIMEOUT: &str = "60s";

/// The backend's runtime, shut down without blocking (it may be dropped inside another).
pub(super) struct RuntimeBox(pub Option<tokio::runtime::Runtime>);

impl Drop for RuntimeBox {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The backend's own small runtime, boxed at once: dropped on an early return, it must
/// not block (we may be inside the CLI's runtime).
pub(super) fn runtime(key: &str) -> Result<RuntimeBox, StateError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("gpuplan-state")
        .enable_all()
        .build()
        .map_err(|e| StateError::Remote {
            action: "start the client for",
            url: key.to_string(),
            message: e.to_string(),
            hint: String::new(),
        })?;
    Ok(RuntimeBox(Some(rt)))
}

/// What [`build`] makes of a backend block.
pub(super) struct Built {
    /// For state reads and conditional writes.
    pub store: Arc<dyn ObjectStore>,
    /// For the create-only lock object (with the vendor header where the mode needs one).
    pub lock_store: Arc<dyn ObjectStore>,
    pub mode: LockMode,
    pub url: String,
    /// The block names a store whose preconditions gpuplan cannot take on trust.
    pub probe_before_lock: bool,
}

/// What a store call failed with, as the state layer reports it.
pub(super) fn store_error(url: &str, action: &'static str, e: object_store::Error) -> StateError {
    use object_store::Error as E;
    let text = e.to_string();
    let code = ["NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"]
        .into_iter()
        .find(|c| text.contains(&format!("<Code>{c}</Code>")));
    let (message, hint) = match (&e, code) {
        (_, Some("NoSuchBucket")) => (
            "the bucket does not exist (NoSuchBucket)".to_string(),
            "create the bucket first; gpuplan never creates buckets",
        ),
        (_, Some(c @ ("AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch" | "ExpiredToken"))) => (
            format!("access denied ({c})"),
            "check the credentials in the environment and that they may read and write this bucket and key",
        ),
        _ => match &e {
            E::PermissionDenied { .. } => {
                ("access denied".to_string(), "the credentials in the environment may not read and write this object")
            }
            E::Unauthenticated { .. } => (
                "the store did not accept the credentials".to_string(),
                "check the store's credentials in the environment (for s3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)",
            ),
            E::NotFound { .. } => (
                "not found (does the bucket exist?)".to_string(),
                "create the bucket first; gpuplan never creates buckets",
            ),
            _ if text.contains("no usable AWS credentials") => (
                one_line(&text),
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE (static keys, role_arn, SSO), or run where web identity, a container or an instance role gives credentials; `gpuplan check` says which source answered",
            ),
            _ => (
                one_line(&e.to_string()),
                "check the backend's endpoint, region and bucket, and that the store is reachable",
            ),
        },
    };
    StateError::Remote { action, url: url.to_string(), message, hint: hint.to_string() }
}

pub(super) fn one_line(s: &str) -> String {
    let s = s.replace('\n', " ");
    match s.char_indices().nth(400) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s,
    }
}

/// A backend block the store's client refused.
fn configure_error(url: &str, e: object_store::Error) -> StateError {
    StateError::Remote {
        action: "configure",
        url: url.to_string(),
        message: one_line(&e.to_string()),
        hint: "check the backend block's settings and the store's environment variables".into(),
    }
}

/// The stores for `cfg`, its lock mode and the state object's URL.
pub(super) fn build(
    cfg: &BackendConfig,
    key: &str,
    s3_credentials: Option<object_store::aws::AwsCredentialProvider>,
) -> Result<Built, StateError> {
    let client = object_store::ClientOptions::new()
        .with_connect_timeout(Duration::from_secs(10))
        .with_timeout(Duration::from_secs(60));
    // A few quick retries: a state call that waits minutes on a dead endpoint helps nobody.
    let retry =
        object_store::RetryConfig { max_retries: 2, retry_timeout: Duration::from_secs(20), ..Default::default() };
    match cfg.kind.as_str() {
        "s3" => s3(cfg, key, s3_credentials, client, retry),
        "gcs" => gcs(cfg, key, retry),
        "azurerm" => azurerm(cfg, key, retry),
        other => Err(StateError::Remote {
            action: "use",
            url: format!("{other}://{key}"),
            message: format!("unknown backend kind `{other}`"),
            hint: "kinds: local, s3, gcs, azurerm".into(),
        }),
    }
}

/// S3 or an S3-compatible store, with the lock mode the block configures.
fn s3(
    cfg: &BackendConfig,
    key: &str,
    s3_credentials: Option<object_store::aws::AwsCredentialProvider>,
    client: object_store::ClientOptions,
    retry: object_store::RetryConfig,
) -> Result<Built, StateError> {
    crate::model::tls::install_ring();
    let bucket = cfg.get("bucket").unwrap_or_default();
    let url = format!("s3://{bucket}/{key}");
    let endpoint = cfg.get("endpoint");
    // Configured, never guessed from the host name: a store behind another name
    // (a proxy, a private endpoint) would be guessed wrong.
    let mode = match cfg.get("lock_mode") {
        Some("cos") => LockMode::Cos,
        Some("oss") => LockMode::Oss,
        _ => LockMode::Conditional,
    };
    // AWS S3 documents If-None-Match and If-Match, and so does a store whose block
    // says `lock_mode = "conditional"`. Any other store is probed before each lock.
    let probe_before_lock = mode != LockMode::Conditional || (endpoint.is_some() && cfg.get("lock_mode").is_none());
    // COS and OSS address buckets by virtual host; others by path unless told.
    let path_style = match cfg.get("force_path_style") {
        Some(v) => v == "true",
        None => mode == LockMode::Conditional,
    };
    let builder = |headers: Option<&'static str>| {
        let mut client = client.clone();
        if let Some(h) = headers {
            let mut map = http::HeaderMap::new();
            map.insert(h, http::HeaderValue::from_static("true"));
            client = client.with_default_headers(map);
        }
        let mut b = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_client_options(client)
            .with_retry(retry.clone());
        if let Some(c) = &s3_credentials {
            b = b.with_credentials(c.clone());
        }
        if let Some(region) = cfg.get("region") {
            b = b.with_region(region);
        }
        if let Some(e) = endpoint {
            let e = e.trim_end_matches('/');
            b = b.with_allow_http(e.starts_with("http://"));
            if path_style {
                b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
            } else {
                let (scheme, rest) = e.split_once("://").unwrap_or(("https", e));
                b = b.with_endpoint(format!("{scheme}://{bucket}.{rest}")).with_virtual_hosted_style_request(true);
            }
        }
        b.build()
    };
    let store: Arc<dyn ObjectStore> = Arc::new(builder(None).map_err(|e| configure_error(&url, e))?);
    let lock_store: Arc<dyn ObjectStore> = match mode.header() {
        None => store.clone(),
        Some(h) => Arc::new(builder(Some(h)).map_err(|e| configure_error(&url, e))?),
    };
    Ok(Built { store, lock_store, mode, url, probe_before_lock })
}

/// Google Cloud Storage.
fn gcs(cfg: &BackendConfig, key: &str, retry: object_store::RetryConfig) -> Result<Built, StateError> {
    crate::model::tls::install_ring();
    let bucket = cfg.get("bucket").unwrap_or_default();
    let url = format!("gs://{bucket}/{key}");
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::gcp::GoogleCloudStorageBuilder::from_env()
            .with_bucket_name(bucket)
            // Key by key, not `with_client_options`: that would drop the client
            // settings the environment gave (`GOOGLE_ALLOW_HTTP` for a test server).
            .with_config(GoogleConfigKey::Client(ClientConfigKey::ConnectTimeout), CONNECT_TIMEOUT)
            .with_config(GoogleConfigKey::Client(ClientConfigKey::Timeout), REQUEST_TIMEOUT)
            .with_retry(retry)
            .build()
            .map_err(|e| configure_error(&url, e))?,
    );
    Ok(Built { lock_store: store.clone(), store, mode: LockMode::Conditional, url, probe_before_lock: false })
}

/// Azure Blob storage.
fn azurerm(cfg: &BackendConfig, key: &str, retry: object_store::RetryConfig) -> Result<Built, StateError> {
    crate::model::tls::install_ring();
    let account = cfg.get("storage_account_name").unwrap_or_default();
    let container = cfg.get("container_name").unwrap_or_default();
    let url = format!("az://{account}/{container}/{key}");
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::azure::MicrosoftAzureBuilder::from_env()
            .with_account(account)
            .with_container_name(container)
            .with_config(AzureConfigKey::Client(ClientConfigKey::ConnectTimeout), CONNECT_TIMEOUT)
            .with_config(AzureConfigKey::Client(ClientConfigKey::Timeout), REQUEST_TIMEOUT)
            .with_retry(retry)
            .build()
            .map_err(|e| configure_error(&url, e))?,
    );
    Ok(Built { lock_store: store.clone(), store, mode: LockMode::Conditional, url, probe_before_lock: false })
}
