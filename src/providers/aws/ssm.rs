//! Jobs on warm pool nodes through AWS Systems Manager Run Command, without an SSM SDK.
//!
//! Another `aws-sdk-*` crate costs minutes of cold build on a small machine, and gpuplan
//! needs four SSM calls, so they are JSON 1.1 requests (`X-Amz-Target: AmazonSSM.<Action>`)
//! signed with SigV4 by the `aws-sigv4` crate the EC2 SDK already builds, sent over the
//! project's reqwest client, with the credentials of the provider's SDK configuration.
//!
//! - `DescribeInstanceInformation`: which pool nodes' SSM agents are online (only those are
//!   warm for jobs).
//! - `SendCommand` (`AWS-RunShellScript`): the job script on one node; the run's id is
//!   `<instance id>/<command id>`, so status, logs and cancel need no lookup.
//! - `GetCommandInvocation`: the run's state, exit code and output.
//! - `CancelCommand`: cancel or preempt the run; the node stays in its pool.
//! - `ListCommands` (by instance, `find_sent` in `jobs.rs`): after an apply stopped between a `SendCommand` and its
//!   record, whether that send happened. `SendCommand` takes no idempotency token, so the
//!   launch's token goes first in the command's `Comment` (100 characters at most), and
//!   the intent to send is in state before the send (`JobRecord::sending`).
//!
//! The boot check of a job node past its boot deadline (see [`crate::providers::boot`])
//! uses the same calls: is its agent online, then a short `SendCommand` of the check and
//! `GetCommandInvocation` for its answer.
//!
//! The endpoint is `AWS_ENDPOINT_URL_SSM`, else the provider block's `endpoint`, else
//! `AWS_ENDPOINT_URL`, else `https://ssm.<region>.amazonaws.com`.

use std::collections::BTreeMap;
use std::time::SystemTime;

use async_trait::async_trait;
use aws_credential_types::provider::ProvideCredentials;
use serde_json::{Value, json};

use super::AwsProvider;
use crate::providers::launch::{command_run_id, queued_on_warm_node, split_command_run as split};
use crate::providers::{AgentState, ErrorClass, JobState, JobStatus, LaunchJob, ProviderError, RunCommandPort};
use crate::providers::{boot, userdata};

/// Instance ids per `DescribeInstanceInformation` filter (the API's limit on its values).
const AGENT_BATCH: usize = 50;

/// Seconds SSM may take to deliver a command to an online agent before it gives up.
const DELIVERY_TIMEOUT_SECS: u64 = 600;

/// Systems Manager, as a JSON 1.1 service.
const SSM: JsonService = JsonService { signing_name: "ssm", target: "AmazonSSM" };

/// `AWS-RunShellScript`'s `executionTimeout` ceiling (48 hours).
const MAX_EXECUTION_SECS: u64 = 172_800;

impl AwsProvider {
    /// The SSM endpoint for a region (see the module docs).
    fn ssm_endpoint(&self, region: &str) -> String {
        self.service_endpoint("AWS_ENDPOINT_URL_SSM", "ssm", region)
    }

    /// A service's endpoint: `var` (`AWS_ENDPOINT_URL_<SERVICE>`), else the provider
    /// block's `endpoint`, else `AWS_ENDPOINT_URL`, else `https://<host>.<region>.amazonaws.com`.
    pub(super) fn service_endpoint(&self, var: &str, host: &str, region: &str) -> String {
        let env = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        env(var)
            .or_else(|| self.settings.endpoint.clone())
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://{host}.{region}.amazonaws.com"))
    }

    /// One signed SSM call: `action` with `body`, answering the JSON document.
    pub(super) async fn ssm(&self, region: &str, action: &'static str, body: &Value) -> Result<Value, ProviderError> {
        let url = format!("{}/", self.ssm_endpoint(region).trim_end_matches('/'));
        self.json_call(SSM, region, &url, action, body).await
    }

    /// One signed JSON 1.1 call of `service` at `url` (`X-Amz-Target: <target>.<action>`),
    /// counted with the provider's calls; answers the JSON document or the service's error.
    pub(super) async fn json_call(
        &self,
        service: JsonService,
        region: &str,
        url: &str,
        action: &'static str,
        body: &Value,
    ) -> Result<Value, ProviderError> {
        let sdk = self.sdk.get_or_init(|| self.settings.load_with(self.credentials.clone())).await;
        let creds = match sdk.credentials_provider() {
            Some(p) => p.provide_credentials().await.map_err(|e| {
                ProviderError::new(ErrorClass::Auth, "NoCredentials", format!("no AWS credentials for {action}: {e}"))
            })?,
            None => {
                return Err(ProviderError::new(
                    ErrorClass::Auth,
                    "NoCredentials",
                    format!("no AWS credentials for {action}"),
                ));
            }
        };
        let payload = serde_json::to_vec(body).unwrap_or_default();
        let target = format!("{}.{action}", service.target);
        let headers = [("content-type", "application/x-amz-json-1.1"), ("x-amz-target", target.as_str())];
        let signed = sign(&creds, service.signing_name, region, url, &headers, &payload)?;
        *self.calls.lock().unwrap_or_else(|p| p.into_inner()).entry(action).or_default() += 1;
        self.total_calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut req = crate::providers::http::client()?.post(url).body(payload);
        for (k, v) in headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).chain(signed) {
            req = req.header(k, v);
        }
        let resp = req.send().await.map_err(|e| crate::providers::http::network_error(action, &e))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| crate::providers::http::network_error(action, &e))?;
        let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status >= 300 {
            return Err(ssm_error(action, status, &doc, &text));
        }
        Ok(doc)
    }

    /// The SSM agents of `ids` asked once, without retrying a throttled or failed call:
    /// for a best-effort read (GPU health) that the next plan makes again, which must not
    /// hold a plan up for seconds of backoff. [`RunCommandPort::agents`] retries.
    pub(super) async fn agent_states_once(
        &self,
        region: &str,
        ids: &[String],
    ) -> Result<BTreeMap<String, AgentState>, ProviderError> {
        let mut out = unregistered(ids);
        for batch in ids.chunks(AGENT_BATCH) {
            self.agent_batch(region, batch, false, &mut out).await?;
        }
        Ok(out)
    }

    /// One batch's `DescribeInstanceInformation`, page by page, into `out`.
    async fn agent_batch(
        &self,
        region: &str,
        batch: &[String],
        retry: bool,
        out: &mut BTreeMap<String, AgentState>,
    ) -> Result<(), ProviderError> {
        let mut token: Option<String> = None;
        loop {
            let mut body = json!({"Filters": [{"Key": "InstanceIds", "Values": batch}], "MaxResults": 50});
            if let Some(t) = &token {
                body["NextToken"] = json!(t);
            }
            let call = || self.ssm(region, "DescribeInstanceInformation", &body);
            let doc = if retry { super::read(call).await? } else { call().await? };
            for info in doc["InstanceInformationList"].as_array().into_iter().flatten() {
                let Some(id) = info["InstanceId"].as_str() else { continue };
                let ping = info["PingStatus"].as_str().unwrap_or("unknown");
                let state = if ping == "Online" {
                    AgentState::Online
                } else {
                    AgentState::Offline(format!("SSM agent {ping}"))
                };
                out.insert(id.to_string(), state);
            }
            token = doc["NextToken"].as_str().filter(|t| !t.is_empty()).map(String::from);
            if token.is_none() {
                return Ok(());
            }
        }
    }

    /// Run the job's script on its warm node (`req.node_id`); the node stays in its pool.
    pub(super) async fn launch_on_node(&self, region: &str, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        let script = userdata::job_script(&LaunchJob { keep_node: true, ..req.clone() })?;
        let timeout = req.max_runtime_secs.map_or(MAX_EXECUTION_SECS, |s| (s + 300).min(MAX_EXECUTION_SECS));
        let comment = send_comment(req);
        let body = json!({
            "DocumentName": "AWS-RunShellScript",
            "InstanceIds": [req.node_id],
            "Comment": comment,
            "TimeoutSeconds": DELIVERY_TIMEOUT_SECS,
            "Parameters": {"commands": [script], "executionTimeout": [timeout.to_string()]},
        });
        let doc = self.ssm(region, "SendCommand", &body).await?;
        let command = doc["Command"]["CommandId"].as_str().filter(|c| !c.is_empty()).ok_or_else(|| {
            ProviderError::new(ErrorClass::Retryable, "BadResponse", "SendCommand returned no CommandId")
        })?;
        Ok(queued_on_warm_node(req, command, &format!("SSM command {command}")))
    }

    /// The command's invocation on its node.
    pub(super) async fn invocation(&self, region: &str, id: &str) -> Result<Value, ProviderError> {
        let (instance, command) = split(id)?;
        let body = json!({"CommandId": command, "InstanceId": instance});
        super::read(|| self.ssm(region, "GetCommandInvocation", &body)).await
    }

    pub(super) async fn command_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let doc = self.invocation(region, id).await?;
        let (instance, _) = split(id)?;
        let output = doc["StandardOutputContent"].as_str().unwrap_or("");
        let code = doc["ResponseCode"].as_i64().unwrap_or(-1);
        let detail = doc["StatusDetails"].as_str().unwrap_or("");
        let (state, message) = invocation_state(doc["Status"].as_str().unwrap_or(""), code, detail, output);
        Ok(JobStatus {
            id: id.to_string(),
            job: crate::addr::Address::new(crate::addr::Kind::Job, "unknown"),
            node_id: instance.to_string(),
            state,
            attempt: 0,
            message,
            started_ms: None,
            finished_ms: None,
            address: None,
        })
    }

    /// The job's output as SSM holds it (the first 24,000 characters).
    pub(super) async fn command_output(&self, region: &str, id: &str) -> Result<String, ProviderError> {
        let doc = self.invocation(region, id).await?;
        Ok(doc["StandardOutputContent"].as_str().unwrap_or("").to_string())
    }

    /// Whether the job's log exists on job node `id`, asked through Run Command.
    /// `Ok(None)`: its agent is not online, or gave no answer in time.
    pub(super) async fn job_log_exists(&self, region: &str, id: &str) -> Result<Option<bool>, ProviderError> {
        let agents = self.agents(region, &[id.to_string()]).await?;
        if agents.get(id) != Some(&AgentState::Online) {
            return Ok(None);
        }
        let body = json!({
            "DocumentName": "AWS-RunShellScript",
            "InstanceIds": [id],
            "Comment": "gpuplan boot check",
            "TimeoutSeconds": 30,
            "Parameters": {"commands": [boot::probe_script()], "executionTimeout": ["30"]},
        });
        let doc = self.ssm(region, "SendCommand", &body).await?;
        let command = doc["Command"]["CommandId"].as_str().filter(|c| !c.is_empty()).ok_or_else(|| {
            ProviderError::new(ErrorClass::Retryable, "BadResponse", "SendCommand returned no CommandId")
        })?;
        let run = command_run_id(id, command);
        boot::wait_answer(|| async {
            match self.invocation(region, &run).await {
                Ok(doc) => Ok(match doc["Status"].as_str().unwrap_or("") {
                    "Pending" | "InProgress" | "Delayed" => boot::Check::Pending,
                    "Success" => boot::Check::Output(doc["StandardOutputContent"].as_str().unwrap_or("").to_string()),
                    _ => boot::Check::Ended,
                }),
                // SSM lists an invocation a moment after SendCommand.
                Err(e) if e.code == "JobNotFound" => Ok(boot::Check::Pending),
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// Cancel the command (the job's container stops with it); the node stays.
    pub(super) async fn cancel_command(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let before = self.command_status(region, id).await?;
        if !matches!(before.state, JobState::Queued | JobState::Running) {
            return Ok(before);
        }
        let (instance, command) = split(id)?;
        self.ssm(region, "CancelCommand", &json!({"CommandId": command, "InstanceIds": [instance]})).await?;
        Ok(JobStatus { state: JobState::Cancelled, message: Some("cancelled".into()), ..before })
    }
}

/// Every id offline until SSM says otherwise: instances SSM does not know are not
/// registered with it.
fn unregistered(ids: &[String]) -> BTreeMap<String, AgentState> {
    ids.iter().map(|id| (id.clone(), AgentState::Offline("not registered with Systems Manager".into()))).collect()
}

#[async_trait]
impl RunCommandPort for AwsProvider {
    /// The SSM agent state of each of `ids`, 50 ids a `DescribeInstanceInformation`
    /// filter, throttled or failed reads retried.
    async fn agents(&self, region: &str, ids: &[String]) -> Result<BTreeMap<String, AgentState>, ProviderError> {
        let mut out = unregistered(ids);
        for batch in ids.chunks(AGENT_BATCH) {
            self.agent_batch(region, batch, true, &mut out).await?;
        }
        Ok(out)
    }
}

/// The `Comment` of a job's `SendCommand`: the launch's token first, so that the
/// 100-character limit never cuts it (`gpuplan gj-… job.x attempt 2`).
fn send_comment(req: &LaunchJob) -> String {
    format!("gpuplan {} {} attempt {}", req.token, req.job, req.attempt).chars().take(100).collect()
}

/// A run's state from its invocation's `Status` and `ResponseCode`.
fn invocation_state(status: &str, code: i64, detail: &str, output: &str) -> (JobState, Option<String>) {
    let code32 = i32::try_from(code).unwrap_or(-1);
    match status {
        "Pending" | "Delayed" => (JobState::Queued, None),
        "InProgress" | "Cancelling" => (JobState::Running, None),
        "Success" => (JobState::Succeeded, Some(userdata::exit_message(0, output, "Run Command"))),
        "Cancelled" => (JobState::Cancelled, Some("cancelled".into())),
        "TimedOut" if code32 == userdata::TIMED_OUT || code < 0 => {
            (JobState::Failed, Some(format!("timed out ({detail})")))
        }
        _ if code >= 0 => (JobState::Failed, Some(userdata::exit_message(code32, output, "Run Command"))),
        other => (JobState::Failed, Some(format!("Run Command ended {other}: {detail}"))),
    }
}

/// SigV4 headers for one SSM request (`authorization`, `x-amz-date`, and the session
/// token when there is one).
/// A JSON 1.1 service: the name its requests are signed for, and its target prefix.
#[derive(Debug, Clone, Copy)]
pub(super) struct JsonService {
    pub signing_name: &'static str,
    pub target: &'static str,
}

fn sign(
    creds: &aws_credential_types::Credentials,
    service: &str,
    region: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(String, String)>, ProviderError> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let bad =
        |e: String| ProviderError::new(ErrorClass::Fatal, "SigningFailed", format!("cannot sign the request: {e}"));
    let identity = creds.clone().into();
    let params: aws_sigv4::http_request::SigningParams<'_> = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| bad(e.to_string()))?
        .into();
    let request = SignableRequest::new("POST", url, headers.iter().copied(), SignableBody::Bytes(body))
        .map_err(|e| bad(e.to_string()))?;
    let (instructions, _) = sign(request, &params).map_err(|e| bad(e.to_string()))?.into_parts();
    Ok(instructions.headers().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

/// An SSM error answer as a provider error.
fn ssm_error(action: &str, status: u16, doc: &Value, text: &str) -> ProviderError {
    let kind = doc["__type"].as_str().unwrap_or("").rsplit('#').next().unwrap_or("").to_string();
    // A body that is not SSM's JSON (an HTML error page from a proxy or an emulator)
    // says nothing the status does not: it is left out of the message.
    let message = match doc["message"].as_str().or_else(|| doc["Message"].as_str()) {
        Some(m) => m.trim().to_string(),
        None if doc.is_null() => {
            format!("HTTP {status}{}", if text.trim().is_empty() { "" } else { " (not a JSON answer)" })
        }
        None => text.trim().to_string(),
    };
    let class = match kind.as_str() {
        "ThrottlingException" => ErrorClass::Throttled,
        "InvalidInstanceId" | "InvocationDoesNotExist" | "InvalidCommandId" | "InvalidDocument" => ErrorClass::Invalid,
        "UnrecognizedClientException" | "AccessDeniedException" | "InvalidSignatureException" => ErrorClass::Auth,
        _ if status >= 500 => ErrorClass::Retryable,
        _ => ErrorClass::Fatal,
    };
    // A run whose invocation SSM no longer has is a run the cloud does not know.
    let code = match kind.as_str() {
        "InvocationDoesNotExist" | "InvalidCommandId" => "JobNotFound".to_string(),
        "" => format!("HTTP{status}"),
        k => k.to_string(),
    };
    ProviderError::new(class, code, format!("{action}: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invocation_states_map_to_job_states_with_the_exit_code() {
        assert_eq!(invocation_state("Pending", -1, "", "").0, JobState::Queued);
        assert_eq!(invocation_state("InProgress", -1, "", "").0, JobState::Running);
        assert_eq!(invocation_state("Success", 0, "Success", "").0, JobState::Succeeded);
        let (s, m) = invocation_state("Failed", 3, "Failed", "boom\n");
        assert_eq!((s, m.as_deref()), (JobState::Failed, Some("exited 3 (Run Command)")));
        let out = "gpuplan-job-error=driver install failed: no package manager\ngpuplan-job-exit=125\n";
        let (_, m) = invocation_state("Failed", 125, "Failed", out);
        assert_eq!(m.as_deref(), Some("the node could not run the job: driver install failed: no package manager"));
        assert_eq!(invocation_state("Cancelled", -1, "", "").0, JobState::Cancelled);
        assert_eq!(invocation_state("TimedOut", -1, "DeliveryTimedOut", "").0, JobState::Failed);
    }

    #[test]
    fn errors_are_classed_and_a_gone_invocation_is_job_not_found() {
        let doc = json!({"__type": "InvocationDoesNotExist", "message": "no"});
        let e = ssm_error("GetCommandInvocation", 400, &doc, "");
        assert_eq!((e.class, e.code.as_str()), (ErrorClass::Invalid, "JobNotFound"));
        let e = ssm_error("DescribeInstanceInformation", 500, &Value::Null, "internal");
        assert_eq!((e.class, e.code.as_str()), (ErrorClass::Retryable, "HTTP500"));
        let doc = json!({"__type": "com.amazonaws#ThrottlingException", "message": "slow"});
        assert_eq!(ssm_error("SendCommand", 400, &doc, "").class, ErrorClass::Throttled);
    }

    #[test]
    fn requests_are_signed_for_ssm_in_their_region() {
        let creds = aws_credential_types::Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        let headers = [("content-type", "application/x-amz-json-1.1"), ("x-amz-target", "AmazonSSM.SendCommand")];
        let signed = sign(&creds, "ssm", "eu-west-1", "https://ssm.eu-west-1.amazonaws.com/", &headers, b"{}").unwrap();
        let auth = signed.iter().find(|(k, _)| k == "authorization").map(|(_, v)| v.as_str()).unwrap_or("");
        assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"), "{auth}");
        assert!(auth.contains("/eu-west-1/ssm/aws4_request"), "{auth}");
        assert!(auth.contains("x-amz-target"), "the target header is signed: {auth}");
        assert!(signed.iter().any(|(k, _)| k == "x-amz-date"), "{signed:?}");
    }
}
