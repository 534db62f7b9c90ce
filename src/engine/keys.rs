//! The keyring a command seals and opens files with (`state::seal`), built from the
//! spec's `encryption {}` block: the one place the state layer's keys meet the AWS KMS
//! client of the providers layer.

use std::sync::Arc;

use crate::model::encryption::{DataKeys, EncryptionConfig, KeyProviderConfig};
use crate::state::seal::Keyring;

/// The keys for `config` (none: files are written plain, and sealed ones refused).
/// Building it costs nothing: no passphrase is read and no key service called until a
/// sealed file is read or written.
pub fn keyring(config: Option<&EncryptionConfig>) -> Keyring {
    let Some(config) = config else { return Keyring::default() };
    let uses_kms = std::iter::once(&config.key_provider)
        .chain(config.fallback.as_ref())
        .any(|p| matches!(p, KeyProviderConfig::AwsKms(_)));
    Keyring::new(Some(config.clone()), uses_kms.then(kms))
}

/// Keys that open a sealed file with the provider its own header names (`show
/// PLANFILE`, `apply PLANFILE`, `state rekey --decrypt`), and seal nothing.
pub fn from_headers() -> Keyring {
    Keyring::from_headers(Some(kms()))
}

fn kms() -> Arc<dyn DataKeys> {
    Arc::new(crate::providers::aws::kms::Kms::new())
}
