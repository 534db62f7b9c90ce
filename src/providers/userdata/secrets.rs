//! The secrets step of a job script (`docs/design/secrets.md`): each secret variable is
//! read on the node, into the script's environment, and handed to the container by name
//! (`docker run -e NAME`), so its value is in no command line and no user data.
//!
//! - `aws-sm:` and `ssm:`: the node reads them with its own instance role through the AWS
//!   CLI (`secretsmanager get-secret-value`, `ssm get-parameter --with-decryption`; a
//!   `#KEY` of a JSON secret is picked with `python3`). A failed read ends the job with
//!   `gpuplan-job-error=` naming the reference, never a value.
//! - `env:`: gpuplan reads its own environment now, at send time, and only into a warm
//!   node's run-command (the script is the agent's parameter: `keep_node` and no node
//!   `shape`); a node made for the job would carry it in its user data, so that launch
//!   is refused (Tencent and Alibaba job nodes are kept up too, for their agent).
//! - `tencent-ssm:` and `alicloud-kms:`: likewise, with the value the provider read from
//!   its cloud's store just before the send, looked up by the reference's text.
//! - anything else cannot reach a VM (`spec::secrets` refuses it first): refused.

use super::shell_quote;
use crate::model::secret::{SecretRef, SecretSource};
use crate::providers::{ErrorClass, LaunchJob, ProviderError};

/// The script lines that set and export each secret variable, and the `docker run`
/// arguments that pass them on; `Err` when one cannot be delivered this way. `env` answers
/// the values gpuplan holds at send time: an `env:` source by its variable's name, a
/// store read at send time (`tencent-ssm:`, `alicloud-kms:`) by the reference's text.
pub fn steps_with(
    req: &LaunchJob,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, Vec<String>), ProviderError> {
    let region = req.shape.as_ref().map_or(req.region.as_str(), |s| s.region.as_str());
    let region = if region.is_empty() { String::new() } else { format!(" --region {}", shell_quote(region)) };
    let mut lines = String::new();
    let mut args = Vec::new();
    // Sent through a warm node's run-command agent: kept up, and no node made for it (a
    // Tencent or Alibaba job node is kept up too, and boots from user data).
    let by_agent = req.keep_node && req.shape.is_none();
    for (var, r) in &req.secrets {
        let why = shell_quote(&format!("secret {var} ({r}) could not be read with the node's role"));
        let value = match r.source {
            SecretSource::AwsSm => {
                let read = format!(
                    "aws secretsmanager get-secret-value{region} --secret-id {} --query SecretString --output text",
                    shell_quote(&r.name)
                );
                match &r.key {
                    Some(k) => format!(
                        "\"$(set -o pipefail; {read} | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' {})\" || need {why}",
                        shell_quote(k)
                    ),
                    None => format!("\"$({read})\" || need {why}"),
                }
            }
            SecretSource::Ssm => format!(
                "\"$(aws ssm get-parameter{region} --name {} --with-decryption --query Parameter.Value --output text)\" || need {why}",
                shell_quote(&r.name)
            ),
            SecretSource::Env | SecretSource::TencentSsm | SecretSource::AlicloudKms if by_agent => {
                match env(&if r.source == SecretSource::Env { r.name.clone() } else { r.to_string() }) {
                    Some(v) => {
                        // A literal, quoted: shellcheck's warnings about quotes in it and `$`
                        // not expanding are what is meant.
                        lines +=
                            &format!("# shellcheck disable=SC2016,SC2089,SC2090\nexport {var}={}\n", shell_quote(&v));
                        args.push(format!("-e {var}"));
                        continue;
                    }
                    None => return Err(not_set(req, var, r)),
                }
            }
            _ => return Err(not_deliverable(req, var, r)),
        };
        lines += &format!("{var}={value}\nexport {var}\n");
        args.push(format!("-e {var}"));
    }
    Ok((lines, args))
}

fn not_set(req: &LaunchJob, var: &str, r: &SecretRef) -> ProviderError {
    let why = match r.source {
        SecretSource::Env => format!("`{}` is not set in gpuplan's environment", r.name),
        _ => "it was not read before the send".to_string(),
    };
    ProviderError::new(
        ErrorClass::Invalid,
        "SecretNotSet",
        format!("`{}`: `{var}` comes from `{r}`, and {why}", req.job),
    )
}

fn not_deliverable(req: &LaunchJob, var: &str, r: &SecretRef) -> ProviderError {
    let why = match r.source {
        SecretSource::Env | SecretSource::TencentSsm | SecretSource::AlicloudKms => {
            "its value would be written into the user data of the node made for the job; such secrets reach warm nodes through their run-command agent, read at send time"
        }
        _ => "this node cannot read that source",
    };
    ProviderError::new(
        ErrorClass::Invalid,
        "SecretNotDeliverable",
        format!("`{}`: `{var}` comes from `{r}`: {why}", req.job),
    )
}

#[cfg(test)]
mod tests;
