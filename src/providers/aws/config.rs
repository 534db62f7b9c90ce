//! The `provider "aws"` settings and the EC2 clients built from them.
//!
//! Credentials come from the block's chain (`credentials.rs`: the standard AWS chain, or
//! the block's `access_key`/`secret_key`). The endpoint is the block's `endpoint`, else the
//! SDK's own `AWS_ENDPOINT_URL_EC2` / `AWS_ENDPOINT_URL`. The secret key is never
//! printed: `Debug` shows it as `<redacted>` and nothing here serializes it.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_ec2::config::Region;
use std::sync::Arc;

use super::credentials::{AwsCredentials, ChainSettings};

use crate::spec::model::Provider as ProviderBlock;

/// Everything the AWS provider needs from its block.
#[derive(Clone, Default, PartialEq)]
pub struct AwsSettings {
    /// The block's local name (`aws`, or its alias), for messages and tags.
    pub name: String,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub profile: Option<String>,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    /// Subnet id per zone.
    pub subnets: BTreeMap<String, String>,
    pub security_groups: Vec<String>,
    pub key_name: Option<String>,
    pub iam_instance_profile: Option<String>,
    pub image: Option<String>,
    /// The spec folder and home directory: where a pool's kubeconfig is read (EKS joins).
    pub spec_dir: Option<std::path::PathBuf>,
    pub home: Option<std::path::PathBuf>,
}

impl fmt::Debug for AwsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsSettings")
            .field("name", &self.name)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("profile", &self.profile)
            .field("access_key", &self.access_key.as_ref().map(|_| "<set>"))
            .field("secret_key", &self.secret_key.as_ref().map(|_| "<redacted>"))
            .field("subnets", &self.subnets)
            .field("security_groups", &self.security_groups)
            .field("key_name", &self.key_name)
            .field("iam_instance_profile", &self.iam_instance_profile)
            .field("image", &self.image)
            .finish()
    }
}

impl AwsSettings {
    pub fn from_block(name: &str, b: &ProviderBlock) -> Self {
        let s = |v: &Option<crate::spec::model::Spanned<String>>| {
            v.as_ref().map(|x| x.value.trim().to_string()).filter(|x| !x.is_empty())
        };
        AwsSettings {
            name: name.to_string(),
            region: s(&b.region),
            endpoint: s(&b.endpoint),
            profile: s(&b.profile),
            access_key: s(&b.access_key),
            secret_key: s(&b.secret_key),
            subnets: b.subnets.iter().map(|(z, v)| (z.clone(), v.value.clone())).collect(),
            security_groups: b.security_groups.iter().map(|g| g.value.clone()).collect(),
            key_name: s(&b.key_name),
            iam_instance_profile: s(&b.iam_instance_profile),
            image: s(&b.image),
            spec_dir: None,
            home: None,
        }
    }

    /// Load the shared SDK configuration: credentials chain, endpoint, timeouts. SDK-level
    /// retries are off: the executor retries with the same idempotency token, and the
    /// provider retries its own reads (see `AwsProvider::read`).
    pub async fn load(&self) -> aws_config::SdkConfig {
        self.load_with(AwsCredentials::new(self.chain_settings())).await
    }

    /// What the block's credential chain is built from.
    pub fn chain_settings(&self) -> ChainSettings {
        ChainSettings {
            profile: self.profile.clone(),
            region: self.region.clone(),
            keys: self.access_key.clone().zip(self.secret_key.clone()),
        }
    }

    /// [`AwsSettings::load`] with a chain the caller keeps (to share it, and to ask it
    /// which source answered).
    pub async fn load_with(&self, credentials: Arc<AwsCredentials>) -> aws_config::SdkConfig {
        // Root certificates are read only once a request goes to an https URL (`roots.rs`).
        let http = super::roots::http_client();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_attempt_timeout(Duration::from_secs(120))
                    .build(),
            );
        // Every client gets its call's region; the loader's own region only matters to
        // credential providers. Without one, the SDK would probe instance metadata.
        let env_region = ["AWS_REGION", "AWS_DEFAULT_REGION"].iter().any(|k| std::env::var_os(k).is_some());
        match &self.region {
            Some(r) => loader = loader.region(Region::new(r.clone())),
            None if !env_region && self.profile.is_none() => loader = loader.region(Region::new("us-east-1")),
            None => {}
        }
        if let Some(e) = &self.endpoint {
            loader = loader.endpoint_url(e.clone());
        }
        if let Some(p) = &self.profile {
            loader = loader.profile_name(p.clone());
        }
        let shared: Arc<dyn aws_credential_types::provider::ProvideCredentials> = credentials;
        loader
            .credentials_provider(aws_credential_types::provider::SharedCredentialsProvider::from(shared))
            .load()
            .await
    }

    /// An EC2 client for one region.
    pub fn client(sdk: &aws_config::SdkConfig, region: &str) -> aws_sdk_ec2::Client {
        let conf = aws_sdk_ec2::config::Builder::from(sdk).region(Region::new(region.to_string())).build();
        aws_sdk_ec2::Client::from_conf(conf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let s = AwsSettings {
            access_key: Some("AKIAEXAMPLE".into()),
            secret_key: Some("wJalrXUtnFEMI/K7MDENG".into()),
            ..Default::default()
        };
        let text = format!("{s:?}");
        assert!(!text.contains("wJalrXUtnFEMI"), "{text}");
        assert!(!text.contains("AKIAEXAMPLE"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
}
