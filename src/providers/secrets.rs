//! The secret-store port (docs/design/secrets.md): whether a job's secret reference names
//! a secret that exists, asked at plan time of the cloud that keeps it, without reading
//! its value (AWS `DescribeSecret`, SSM `DescribeParameters`). The value is read only
//! where the job runs. A cloud that keeps no secrets returns `None` from
//! [`super::Provider::secrets`], and its references are not checked.

use async_trait::async_trait;

use crate::model::ProviderError;
use crate::model::secret::SecretRef;

#[async_trait]
pub trait SecretPort: Send + Sync {
    /// Whether `secret` exists in `region`: `Some(true)` or `Some(false)`, or `None`
    /// when this cloud does not keep secrets of its source (they are not asked).
    async fn secret_exists(&self, region: &str, secret: &SecretRef) -> Result<Option<bool>, ProviderError>;
}
