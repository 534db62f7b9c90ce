//! A multi-node job's headless Service ([`super::manifest::service`]): created beside its
//! Job once the Job exists, owned by it (an `ownerReference` to the Job's uid), so the
//! cluster removes it with the Job and gpuplan never leaves one behind. Found again (a
//! retried apply, another replica's launch) when it is this Job's.

use ::kube::api::{Api, PostParams};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::{api_error, not_ours};
use crate::providers::{ErrorClass, KubeLaunch, ProviderError};

/// Make the Service `k.service` asks for, owned by the Job `k.name`.
pub(super) async fn ensure(
    client: &::kube::Client,
    k: &KubeLaunch,
    service: &serde_json::Value,
) -> Result<(), ProviderError> {
    let (loc, ns, name) = (k.cluster.as_str(), k.namespace.as_str(), k.name.as_str());
    let mut svc: Service = serde_json::from_value(service.clone()).map_err(|e| {
        ProviderError::new(ErrorClass::Invalid, "BadManifest", format!("the plan's Service for `{ns}/{name}`: {e}"))
    })?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let job = jobs.get(name).await.map_err(|e| api_error(e, loc, ns, name))?;
    let uid = job.metadata.uid.unwrap_or_default();
    svc.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name: name.to_string(),
        uid: uid.clone(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let owned = |s: &Service| {
        s.metadata.owner_references.as_ref().is_some_and(|o| o.iter().any(|o| o.kind == "Job" && o.uid == uid))
    };
    // Made by another replica's launch (every replica carries the same Service).
    if let Some(there) = services.get_opt(name).await.map_err(|e| api_error(e, loc, ns, name))? {
        return if owned(&there) { Ok(()) } else { Err(not_ours(loc, ns, name)) };
    }
    match services.create(&PostParams::default(), &svc).await {
        Ok(_) => Ok(()),
        Err(::kube::Error::Api(s)) if s.code == 409 => {
            let there = services.get(name).await.map_err(|e| api_error(e, loc, ns, name))?;
            if owned(&there) { Ok(()) } else { Err(not_ours(loc, ns, name)) }
        }
        Err(e) => Err(api_error(e, loc, ns, name)),
    }
}
