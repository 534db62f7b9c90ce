//! The plan-time check that a job's secrets exist (docs/design/secrets.md): each
//! reference in a job's (or its template's) `env` whose store the job's pool's cloud
//! answers for ([`SecretPort`](crate::providers::secrets::SecretPort): AWS `aws-sm:`,
//! `ssm:`) is asked once per provider and region, without reading its value. A missing
//! secret of a job the plan launches or keeps waiting is a plan error at the reference.
//! A check the cloud refuses (no permission to describe) is a warning, not a pass: the
//! plan says the reference was not checked.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::diag::Span;
use crate::model::Placement;
use crate::model::secret::{EnvValue, SecretRef};
use crate::plan::model::{Plan, PlanError};
use crate::providers::ProviderSet;
use crate::spec::Spec;

/// A job's secret that its cloud says does not exist.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingSecret {
    pub job: Address,
    /// The environment variable it was to fill.
    pub name: String,
    pub secret: SecretRef,
    /// Where the reference is written.
    pub span: Span,
    pub provider: String,
    pub region: String,
}

/// One reference to ask about, where it is written.
struct Ask<'s> {
    job: &'s Address,
    name: &'s str,
    secret: &'s SecretRef,
    span: Span,
    provider: String,
    region: String,
}

/// Every job secret whose cloud can say whether it exists, asked once per provider,
/// region and reference; the missing ones. Each check that fails is a warning on stderr.
pub async fn missing(spec: &Spec, providers: &ProviderSet) -> Vec<MissingSecret> {
    let asks = asks(spec, providers);
    let mut answers: BTreeMap<(&str, &str, &SecretRef), Option<bool>> = BTreeMap::new();
    for a in &asks {
        let key = (a.provider.as_str(), a.region.as_str(), a.secret);
        if answers.contains_key(&key) {
            continue;
        }
        let Some(port) = providers.get(&a.provider).and_then(|p| p.secrets()) else { continue };
        let answer = match port.secret_exists(&a.region, a.secret).await {
            Ok(found) => found,
            Err(e) => {
                eprintln!(
                    "warning: could not check that `{}` exists ({} in {}): {}; the job's node reads it at start",
                    a.secret, a.provider, a.region, e.message
                );
                None
            }
        };
        answers.insert(key, answer);
    }
    asks.iter()
        .filter(|a| answers.get(&(a.provider.as_str(), a.region.as_str(), a.secret)) == Some(&Some(false)))
        .map(|a| MissingSecret {
            job: a.job.clone(),
            name: a.name.to_string(),
            secret: a.secret.clone(),
            span: a.span,
            provider: a.provider.clone(),
            region: a.region.clone(),
        })
        .collect()
}

/// The secret references of every job, with the provider and region of each of its
/// pools whose cloud has a secret port.
fn asks<'s>(spec: &'s Spec, providers: &ProviderSet) -> Vec<Ask<'s>> {
    let cat = crate::catalog::catalog();
    let mut out = Vec::new();
    for (addr, job) in &spec.jobs {
        let Some(t) = spec.job_templates.get(&job.template.value) else { continue };
        let pools = std::iter::once(&job.pool.value).chain(&job.pool_choices);
        let places: Vec<(String, String)> = pools
            .filter_map(|p| spec.gpu_pools.get(p))
            .filter(|pool| pool.kubernetes.is_none())
            .filter_map(|pool| crate::plan::shape::shape(spec, pool, cat))
            .filter(|s| providers.get(&s.provider).is_some_and(|p| p.secrets().is_some()))
            .map(|s| (s.provider, s.region))
            .collect();
        for (name, v) in t.env.iter().chain(&job.env) {
            let EnvValue::Secret { secret } = &v.value else { continue };
            for (provider, region) in &places {
                let (provider, region) = (provider.clone(), region.clone());
                out.push(Ask { job: addr, name, secret, span: v.span, provider, region });
            }
        }
    }
    out
}

/// Plan errors for the missing secrets of jobs the plan launches or keeps waiting (a
/// running or finished job read its secrets already).
pub fn errors(plan: &Plan, missing: &[MissingSecret]) -> Vec<PlanError> {
    let pending = |job: &Address| {
        plan.jobs.iter().any(|j| j.address == *job && matches!(j.placement, Placement::Launch | Placement::Waiting))
    };
    missing
        .iter()
        .filter(|m| pending(&m.job))
        .map(|m| PlanError {
            address: m.job.clone(),
            message: format!(
                "`{}` reads `{}` from `{}`, which does not exist ({} in {})",
                m.job, m.name, m.secret, m.provider, m.region
            ),
            hint: Some(format!(
                "create the secret or fix the reference; gpuplan asked whether `{}` exists without reading it",
                m.secret
            )),
            location: None,
            span: Some(m.span),
        })
        .collect()
}
