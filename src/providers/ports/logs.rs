//! The log port: a job's own output, for `gpuplan jobs logs`. Clouds that cannot read it
//! (the sim cloud) lack it.

use async_trait::async_trait;

use crate::model::ProviderError;

/// Where the lines go: each with the replica that wrote it.
pub type LogSink<'a> = dyn for<'l> Fn(u32, &'l str) + Send + Sync + 'a;

#[async_trait]
pub trait LogPort: Send + Sync {
    /// The job's own output, line by line with its replica (`follow`: until it ends).
    async fn job_logs(&self, region: &str, id: &str, follow: bool, out: &LogSink<'_>) -> Result<(), ProviderError>;
}
