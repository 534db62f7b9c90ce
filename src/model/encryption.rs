//! Client-side encryption settings as plain data (docs/design/secrets.md, "Encryption at
//! rest"): the spec's `gpuplan { encryption { ... } }` block decoded, which the state
//! layer seals files with and the engine wires to a key service. Also [`DataKeys`], the
//! seam through which a key provider that lives in a cloud (AWS KMS) wraps and unwraps
//! data keys: the state layer calls it, the providers layer implements it.
//!
//! No key, passphrase or credential is ever held here: only where to find them.

/// The `encryption {}` block: the provider new files are sealed with, and an optional
/// read-only fallback (the old key during a rotation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptionConfig {
    pub key_provider: KeyProviderConfig,
    pub fallback: Option<KeyProviderConfig>,
}

/// One `key_provider "KIND" { ... }`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyProviderConfig {
    /// A passphrase read from the environment variable `passphrase_env`, stretched with
    /// PBKDF2-HMAC-SHA512.
    Passphrase { passphrase_env: String },
    /// A data key from AWS KMS (`GenerateDataKey`), stored wrapped and unwrapped with
    /// `Decrypt`.
    AwsKms(KmsKey),
}

/// Where an `aws_kms` key provider's key lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct KmsKey {
    pub key_id: String,
    pub region: String,
    /// A KMS-compatible endpoint (a test server); else `AWS_ENDPOINT_URL_KMS`,
    /// `AWS_ENDPOINT_URL`, or `https://kms.<region>.amazonaws.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

impl KeyProviderConfig {
    /// `passphrase (GPUPLAN_STATE_PASSPHRASE)`, `aws_kms (alias/gpuplan-state)`: how
    /// messages name a provider (never with a secret).
    pub fn describe(&self) -> String {
        match self {
            KeyProviderConfig::Passphrase { passphrase_env } => format!("passphrase ({passphrase_env})"),
            KeyProviderConfig::AwsKms(k) => format!("aws_kms ({})", k.key_id),
        }
    }
}

/// A data key: its 32 bytes in the clear, and as the key service wrapped it.
pub struct DataKey {
    pub plain: [u8; 32],
    pub wrapped: Vec<u8>,
}

/// A key service that wraps data keys (AWS KMS). Blocking: the state layer is
/// synchronous. Errors are messages for the user, naming no secret.
pub trait DataKeys: Send + Sync {
    /// A new data key under `key` (`GenerateDataKey`, AES_256).
    fn generate(&self, key: &KmsKey) -> Result<DataKey, String>;
    /// The clear bytes of a data key `key`'s service wrapped (`Decrypt`).
    fn unwrap(&self, key: &KmsKey, wrapped: &[u8]) -> Result<[u8; 32], String>;
}
