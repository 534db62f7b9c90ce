//! The AWS EC2 provider, on the official `aws-sdk-ec2` crate: `provider "aws"`.
//!
//! - Pools: one launch template per pool (created and versioned by gpuplan, tagged),
//!   then one `CreateFleet` of type `instant` per [`CreateNodes`] batch (one per capacity
//!   type), with overrides for every allowed instance type in every zone of the batch,
//!   so EC2 places the nodes (`fleet.rs`).
//! - Refresh: one paged `DescribeInstances` per region by tag filter, 1,000 per page;
//!   terminate in batches of at most 1,000 after checking every id's tags (`nodes.rs`).
//! - Prices and shapes: live spot prices from `DescribeSpotPriceHistory` and GPU checks
//!   against `DescribeInstanceTypes`, both cached per run (`prices.rs`).
//! - Jobs: one instance per launch booted with the user-data job script (`jobs.rs`), or
//!   the same script on an idle warm node of the pool through Systems Manager Run
//!   Command when its agent is online (`ssm.rs`).
//! - Credentials: aws-config's chain behind one cache (`credentials.rs`).
//! - KMS data keys for `encryption { key_provider "aws_kms" }` (`kms.rs`).
//! - The SDK's HTTP client reads the system's root certificates only for https
//!   endpoints (`roots.rs`).
//! - Errors become [`ErrorClass`]es in `errors.rs`; calls are paced by token buckets that
//!   follow EC2's documented limits (`throttle.rs`).
//!
//! SDK types never leave this folder. Nothing here decides retries of mutating calls or
//! fallbacks: the executor does, from the error class.

mod adopt;
mod ahead;
mod config;
pub mod credentials;
mod efa;
mod eks;
mod errors;
mod fleet;
mod health;
mod jobs;
pub mod kms;
mod nodes;
mod placement;
mod prices;
mod provider;
mod reservations;
mod reserved_launch;
mod roots;
mod secrets;
mod ssm;
mod template;
mod throttle;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

pub use config::AwsSettings;
pub use throttle::{Bucket, Limit};

use crate::providers::{ErrorClass, ProviderError};
use throttle::Throttle;

/// Ids per `TerminateInstances` call and instances per `DescribeInstances` page.
pub const PAGE: usize = 1_000;

/// The provider for one `provider "aws"` block.
pub struct AwsProvider {
    settings: AwsSettings,
    /// The block's credential chain, shared by every EC2 client and the SSM calls.
    credentials: Arc<credentials::AwsCredentials>,
    sdk: OnceCell<aws_config::SdkConfig>,
    clients: Mutex<HashMap<String, aws_sdk_ec2::Client>>,
    throttle: Throttle,
    calls: Mutex<BTreeMap<&'static str, u64>>,
    total_calls: AtomicU64,
    caches: prices::Caches,
    templates: template::Templates,
    warned: Mutex<std::collections::HashSet<String>>,
    /// (region, zone) → the zone's default subnet, when `subnets` names none.
    default_subnets: tokio::sync::Mutex<HashMap<(String, String), Option<String>>>,
    /// The job nodes the last pool listing of a (region, lineage) saw: refresh's one
    /// `DescribeInstances` serves the orphan-job-node check that follows it.
    seen_job_nodes: Mutex<HashMap<(String, Option<String>), Vec<crate::providers::Node>>>,
}

impl AwsProvider {
    pub fn new(settings: AwsSettings) -> Self {
        let credentials = credentials::AwsCredentials::new(settings.chain_settings());
        AwsProvider {
            settings,
            credentials,
            sdk: OnceCell::new(),
            clients: Mutex::new(HashMap::new()),
            throttle: Throttle::default(),
            calls: Mutex::new(BTreeMap::new()),
            total_calls: AtomicU64::new(0),
            caches: prices::Caches::default(),
            templates: template::Templates::default(),
            warned: Mutex::new(Default::default()),
            default_subnets: Default::default(),
            seen_job_nodes: Default::default(),
        }
    }

    pub fn settings(&self) -> &AwsSettings {
        &self.settings
    }

    /// API calls made so far, by EC2 action name (for benchmarks and tests).
    pub fn calls(&self) -> BTreeMap<&'static str, u64> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn total_calls(&self) -> u64 {
        self.total_calls.load(Ordering::Relaxed)
    }

    /// The EC2 client of a region, built on first use (credentials load lazily too).
    async fn client(&self, region: &str) -> Result<aws_sdk_ec2::Client, ProviderError> {
        if region.trim().is_empty() {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "MissingRegion",
                "no AWS region: set `region` on the pool or in the provider \"aws\" block",
            ));
        }
        let sdk = self.sdk.get_or_init(|| self.settings.load_with(self.credentials.clone())).await;
        let mut map = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.entry(region.to_string()).or_insert_with(|| AwsSettings::client(sdk, region)).clone())
    }

    /// Wait for the call's tokens, and count it.
    async fn pace(&self, region: &str, api: &'static str, bucket: Bucket, resources: Option<(Bucket, u32)>) {
        self.throttle.acquire(region, bucket, 1).await;
        if let Some((b, n)) = resources {
            self.throttle.acquire(region, b, n).await;
        }
        *self.calls.lock().unwrap_or_else(|p| p.into_inner()).entry(api).or_default() += 1;
        self.total_calls.fetch_add(1, Ordering::Relaxed);
    }
}

/// Retry a read (Describe*/Get*) on throttling and transient faults: reads have no
/// executor around them during refresh, and repeating one is always safe.
async fn read<T, F, Fut>(mut op: F) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ProviderError>>,
{
    let mut attempt: u32 = 0;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if matches!(e.class, ErrorClass::Throttled | ErrorClass::Retryable) && attempt < READ_RETRIES => {
                attempt += 1;
                let base = if e.class == ErrorClass::Throttled { 400 } else { 100 };
                let ms = (base * (1u64 << attempt.min(6))).min(10_000);
                let told = e.retry_after_secs.map(|s| (s * 1000.0) as u64).unwrap_or(0);
                tokio::time::sleep(std::time::Duration::from_millis(ms.max(told))).await;
            }
            Err(e) => return Err(e),
        }
    }
}

const READ_RETRIES: u32 = 5;
