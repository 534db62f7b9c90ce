//! The AWS credential chain, one per `provider "aws"` block and one for the s3 state
//! backend: aws-config's default chain (the environment, the shared files' profile with
//! `role_arn`/`source_profile` or `sso_*`, web identity, the ECS/EKS container endpoint,
//! the instance role), or the block's `access_key`/`secret_key`, behind one cache.
//!
//! aws-config's chain does not cache (each SDK client does, each on its own), so the cache
//! here lets the EC2 clients, the hand-signed Systems Manager calls and object_store's S3
//! client share one set of credentials, fetched again shortly before temporary ones expire
//! (a long `reconcile`), and remembers which source answered for `gpuplan check`. Nothing
//! here prints a key or token: messages name sources and variables only.

use std::fmt;
use std::sync::Arc;

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_config::provider_config::ProviderConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{self, ProvideCredentials, SharedCredentialsProvider, future};
use aws_sdk_ec2::config::Region;

/// What the chain is built from.
#[derive(Clone, Default)]
pub struct ChainSettings {
    /// The provider block's `profile` (else `AWS_PROFILE`, else `default`).
    pub profile: Option<String>,
    /// The region STS is called in (the block's or backend's), else the usual resolution.
    pub region: Option<String>,
    /// `access_key`/`secret_key` in the provider block: then no chain.
    pub keys: Option<(String, String)>,
}

/// The cached chain.
pub struct AwsCredentials {
    settings: ChainSettings,
    chain: tokio::sync::OnceCell<SharedCredentialsProvider>,
    current: tokio::sync::Mutex<Option<Credentials>>,
    answered: std::sync::Mutex<Option<String>>,
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials").field("answered", &self.source()).finish()
    }
}

const BLOCK: &str = "gpuplan-provider-block";

impl AwsCredentials {
    pub fn new(settings: ChainSettings) -> Arc<AwsCredentials> {
        Arc::new(AwsCredentials {
            settings,
            chain: tokio::sync::OnceCell::new(),
            current: tokio::sync::Mutex::new(None),
            answered: std::sync::Mutex::new(None),
        })
    }

    /// The source that answered last, once any has (never a value).
    pub fn source(&self) -> Option<String> {
        self.answered.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The profile the chain reads, for messages.
    fn profile(&self) -> String {
        self.settings
            .profile
            .clone()
            // Unset (or not Unicode, which no profile name is): the default profile, as the SDK does.
            .or_else(|| std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty()))
            .unwrap_or_else(|| "default".to_string())
    }

    async fn chain(&self) -> &SharedCredentialsProvider {
        self.chain
            .get_or_init(|| async {
                if let Some((id, secret)) = &self.settings.keys {
                    return SharedCredentialsProvider::new(Credentials::new(id, secret, None, None, BLOCK));
                }
                let config = ProviderConfig::without_region().with_http_client(super::roots::http_client());
                let mut builder = DefaultCredentialsChain::builder().configure(config);
                if let Some(p) = &self.settings.profile {
                    builder = builder.profile_name(p);
                }
                // Without any region the chain would ask instance metadata for one first.
                let env_region = ["AWS_REGION", "AWS_DEFAULT_REGION"].iter().any(|k| std::env::var_os(k).is_some());
                match &self.settings.region {
                    Some(r) => builder = builder.region(Region::new(r.clone())),
                    None if !env_region && self.settings.profile.is_none() => {
                        builder = builder.region(Region::new("us-east-1"))
                    }
                    None => {}
                }
                SharedCredentialsProvider::new(builder.build().await)
            })
            .await
    }

    /// Credentials valid for a while yet: the cached ones, else the chain's answer.
    pub async fn get(&self) -> provider::Result {
        let mut current = self.current.lock().await;
        if let Some(c) = current.as_ref()
            && crate::providers::credentials::fresh(c.expiry(), std::time::SystemTime::now())
        {
            return Ok(c.clone());
        }
        let c = self.chain().await.provide_credentials().await?;
        *self.answered.lock().unwrap_or_else(|e| e.into_inner()) = Some(self.describe(provider_name(&c)));
        *current = Some(c.clone());
        Ok(c)
    }

    /// The source behind aws-config's provider name.
    fn describe(&self, provider_name: String) -> String {
        let profile = self.profile();
        match provider_name.as_str() {
            BLOCK => "`access_key`/`secret_key` in the provider block".into(),
            "EnvironmentVariable" => "the environment (AWS_ACCESS_KEY_ID)".into(),
            "ProfileFile" => format!("profile `{profile}` (static keys in the shared files)"),
            "AssumeRoleProvider" => format!("profile `{profile}` (role_arn, STS AssumeRole)"),
            "WebIdentityToken" => "web identity (AWS_WEB_IDENTITY_TOKEN_FILE, STS AssumeRoleWithWebIdentity)".into(),
            "EcsContainer" => "the container credentials endpoint (ECS, EKS Pod Identity)".into(),
            "IMDSv2" => "the instance role (instance metadata)".into(),
            "SSO" => format!("profile `{profile}` (IAM Identity Center, SSO)"),
            _ => provider_name,
        }
    }

    /// A failed chain as one line, with where it looked; a profile named in
    /// `AWS_PROFILE` is named (a typo there is the usual cause).
    pub fn explain(&self, e: &CredentialsError) -> String {
        let named = std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty() && self.settings.profile.is_none());
        let profile = named.map(|p| format!(" (AWS_PROFILE={p})")).unwrap_or_default();
        format!(
            "no usable AWS credentials{profile}: {} (looked in {})",
            aws_sdk_ec2::error::DisplayErrorContext(e),
            super::errors::CREDENTIAL_SOURCES
        )
    }
}

/// The name aws-config's provider gave the credentials (`EnvironmentVariable`,
/// `ProfileFile`, `AssumeRoleProvider`, `WebIdentityToken`, `EcsContainer`, `IMDSv2`,
/// `SSO`). `Credentials` keeps it private and shows it only in its `Debug` text (whose
/// secret field is redacted), so it is read from there; a test pins the format.
fn provider_name(c: &Credentials) -> String {
    let text = format!("{c:?}");
    text.split_once("provider_name: \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map_or_else(|| "an unnamed source".to_string(), |(name, _)| name.to_string())
}

impl ProvideCredentials for AwsCredentials {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.get())
    }
}

/// The chain as object_store's S3 client takes it (the s3 state backend).
#[derive(Debug)]
pub struct S3Credentials(pub Arc<AwsCredentials>);

#[async_trait::async_trait]
impl object_store::CredentialProvider for S3Credentials {
    type Credential = object_store::aws::AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<Self::Credential>> {
        let c = self
            .0
            .get()
            .await
            .map_err(|e| object_store::Error::Generic { store: "S3", source: self.0.explain(&e).into() })?;
        Ok(Arc::new(object_store::aws::AwsCredential {
            key_id: c.access_key_id().to_string(),
            secret_key: c.secret_access_key().to_string(),
            token: c.session_token().map(str::to_string),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn block_keys_answer_as_the_block_and_never_print() {
        let c = AwsCredentials::new(ChainSettings {
            keys: Some(("AKIAEXAMPLE".into(), "wJalrSECRET".into())),
            ..Default::default()
        });
        assert_eq!(c.source(), None);
        let got = c.get().await.unwrap();
        assert_eq!(got.access_key_id(), "AKIAEXAMPLE");
        assert_eq!(c.source().as_deref(), Some("`access_key`/`secret_key` in the provider block"));
        let text = format!("{c:?}");
        assert!(!text.contains("AKIAEXAMPLE") && !text.contains("wJalrSECRET"), "{text}");
    }

    /// A source that counts its calls and hands out keys living `ttl`.
    #[derive(Debug)]
    struct Counting(std::sync::atomic::AtomicU32, std::time::Duration);

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let expiry = std::time::SystemTime::now() + self.1;
            future::ProvideCredentials::ready(Ok(Credentials::new(
                "ASIA",
                "s",
                Some("t".into()),
                Some(expiry),
                "IMDSv2",
            )))
        }
    }

    async fn calls_for(ttl: std::time::Duration) -> u32 {
        let source = Arc::new(Counting(std::sync::atomic::AtomicU32::new(0), ttl));
        let c = AwsCredentials::new(ChainSettings::default());
        let shared: Arc<dyn ProvideCredentials> = source.clone();
        assert!(c.chain.set(SharedCredentialsProvider::from(shared)).is_ok());
        for _ in 0..3 {
            c.get().await.unwrap();
        }
        assert_eq!(c.source().as_deref(), Some("the instance role (instance metadata)"));
        source.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Role keys are kept while fresh (every EC2 client, SSM call and S3 request shares
    /// them) and fetched again once less than the margin is left, as in a long reconcile.
    #[tokio::test]
    async fn temporary_keys_are_shared_while_fresh_and_fetched_again_near_expiry() {
        assert_eq!(calls_for(std::time::Duration::from_secs(3600)).await, 1);
        assert_eq!(calls_for(std::time::Duration::from_secs(60)).await, 3);
    }

    #[test]
    fn the_provider_name_is_read_from_the_credentials() {
        let c = Credentials::new("AKIAEXAMPLE", "wJalrSECRET", Some("tok".into()), None, "AssumeRoleProvider");
        assert_eq!(provider_name(&c), "AssumeRoleProvider");
    }
}
