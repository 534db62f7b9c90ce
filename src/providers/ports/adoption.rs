//! The adoption port: instances gpuplan did not make (`import`) and tags changed in place
//! (`import`, `moved`, `removed`). Reads and retags only: nothing here launches, stops or
//! terminates.

use async_trait::async_trait;

use crate::model::ProviderError;
use crate::model::node::Node;
use crate::model::tags::Tags;

#[async_trait]
pub trait AdoptionPort: Send + Sync {
    /// Instances by id whatever their tags (`import`): the ones that exist, each with its
    /// pool from its `gpuplan:address` tag (or [`crate::providers::unowned_pool`] without
    /// one). Missing ids are simply absent. Reads only.
    async fn describe_nodes(&self, region: &str, ids: &[String]) -> Result<Vec<Node>, ProviderError>;

    /// Running GPU instances of a region that carry no `gpuplan:managed` tag, for
    /// `gpuplan import`; `filters` are exact tag matches (`KEY=VALUE`). Reads only.
    async fn list_unmanaged(&self, region: &str, filters: &[(String, String)]) -> Result<Vec<Node>, ProviderError>;

    /// Set `set` and remove the keys `remove` on instances in place (import, moved,
    /// removed). Never launches, stops, reboots or terminates anything; batched by the
    /// provider to its API limit.
    async fn tag_nodes(&self, region: &str, ids: &[String], set: &Tags, remove: &[String])
    -> Result<(), ProviderError>;
}
