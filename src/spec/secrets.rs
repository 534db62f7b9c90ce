//! Where each secret source can reach a job (`docs/design/secrets.md`): a job's secret
//! references, checked against the pools it may run on, so a value that could only be
//! delivered by writing it somewhere (user data, a manifest) is refused before any plan.
//!
//! - a pool in a Kubernetes cluster: `k8s:SECRET/KEY` only (a `secretKeyRef`);
//! - an AWS VM pool: `aws-sm:` and `ssm:` (the node reads them with its instance role),
//!   `env:` (gpuplan reads it at send time; only a warm node's run-command takes it);
//! - a Tencent Cloud VM pool: `env:`, and `tencent-ssm:` (gpuplan reads it from Secrets
//!   Manager at send time; only a warm node's run-command takes it);
//! - an Alibaba Cloud VM pool: `env:`, and `alicloud-kms:` (likewise, from KMS);
//! - the sim cloud: every source (it keeps references and never reads a value).

use crate::addr::Address;
use crate::diag::{Diagnostic, Diagnostics};
use crate::model::secret::{EnvValue, SecretSource};
use crate::spec::Spec;
use crate::spec::model::{GpuPool, Job, JobTemplate, ProviderKind};
use crate::spec::spanned::Spanned;

/// Where a pool runs its jobs, as far as secrets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Kubernetes,
    Vm(ProviderKind),
}

/// The sources a backend can deliver.
fn delivers(b: Backend, s: SecretSource) -> bool {
    use SecretSource::*;
    match b {
        Backend::Kubernetes => s == K8s,
        Backend::Vm(ProviderKind::Sim) => true,
        Backend::Vm(ProviderKind::Aws) => matches!(s, AwsSm | Ssm | Env),
        Backend::Vm(ProviderKind::Tencentcloud) => matches!(s, TencentSsm | Env),
        Backend::Vm(ProviderKind::Alicloud) => matches!(s, AlicloudKms | Env),
    }
}

fn hint(b: Backend, s: SecretSource) -> String {
    match b {
        Backend::Kubernetes => {
            "a job in a cluster reads its secrets from the cluster: create a Secret in the job's namespace and write `secret(\"k8s:SECRET/KEY\")`".into()
        }
        Backend::Vm(ProviderKind::Aws) => format!(
            "on AWS VM pools use `aws-sm:NAME[#KEY]` or `ssm:/PATH` (read by the node's instance role) or `env:NAME`{}",
            if s == SecretSource::K8s { "; `k8s:` is for pools with a `kubernetes {}` block" } else { "" }
        ),
        Backend::Vm(kind) => format!(
            "on {kind} VM pools use `{}` or `env:NAME` (gpuplan reads the value at send time into a warm node's run-command agent){}",
            if kind == ProviderKind::Alicloud { "alicloud-kms:NAME" } else { "tencent-ssm:NAME" },
            if s == SecretSource::K8s { "; `k8s:` is for pools with a `kubernetes {}` block" } else { "" }
        ),
    }
}

/// Report each secret of `job` (its template's and its own) that one of its pools cannot
/// deliver, at the reference.
pub fn check_job(spec: &Spec, addr: &Address, job: &Job, t: &JobTemplate, diags: &mut Diagnostics) {
    let pools: Vec<&Address> = std::iter::once(&job.pool.value).chain(&job.pool_choices).collect();
    for (name, v) in t.env.iter().chain(&job.env) {
        let Spanned { value: EnvValue::Secret { secret }, span } = v else { continue };
        for p in &pools {
            let Some(pool) = spec.gpu_pools.get(*p) else { continue };
            let Some(b) = backend(spec, pool) else { continue };
            if !delivers(b, secret.source) {
                let on = match b {
                    Backend::Kubernetes => format!("`{p}` runs jobs in a Kubernetes cluster"),
                    Backend::Vm(kind) => format!("`{p}` runs jobs on {kind} nodes"),
                };
                diags.push(
                    Diagnostic::error(
                        "gpuplan::spec::secret_source",
                        format!("`{addr}` cannot receive `{name}` from `{secret}`: {on}"),
                    )
                    .at(*span, "this secret")
                    .help(hint(b, secret.source)),
                );
                break;
            }
        }
    }
}

fn backend(spec: &Spec, pool: &GpuPool) -> Option<Backend> {
    if pool.kubernetes.is_some() {
        return Some(Backend::Kubernetes);
    }
    let kind = spec.providers.get(&pool.provider.value).and_then(|p| p.kind.value)?;
    Some(Backend::Vm(kind))
}
