//! Jobs on AWS: one instance per launch, booted with [`userdata::job_script`].
//!
//! `launch_job` runs `RunInstances` for one instance of the job's shape (the first
//! allowed type with capacity), with the script as user data, the pool's ownership tags
//! plus `gpuplan:job` and `gpuplan:attempt`, and `stop` as the shutdown behaviour so the
//! console output stays readable after the job powers the node off. The job's id is the
//! instance id. `job_status` reads the instance: pending → queued, running → running,
//! stopped or terminated by a spot interruption → preempted, otherwise the exit code the
//! script printed on the console (`GetConsoleOutput`) → succeeded or failed; no exit
//! code yet → stopped, exit code awaited (console output arrives late; `jobs::refresh`
//! fails the run after a grace), or preempted when the node was terminated before it
//! reported one. `cancel_job`
//! marks the instance `gpuplan:cancelled=true`, then terminates it; `release_job_node`
//! only terminates the node of a run that has ended (or that no run owns), checked to be a
//! gpuplan job node, and counts one already gone as released. Job nodes are not pool
//! nodes: `list_nodes` skips them.

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    BlockDeviceMapping, EbsBlockDevice, HttpTokensState, IamInstanceProfileSpecification, InstanceMarketOptionsRequest,
    InstanceStateName, InstanceType, MarketType, Placement, ResourceType, ShutdownBehavior, SpotMarketOptions, Tag,
    VolumeType,
};
use base64::Engine;
use sha2::{Digest, Sha256};

use super::errors::from_sdk;
use super::fleet::{price, tag_specs};
use super::nodes::{filter, is_managed, split, spot_reclaimed, tag_filter, tags};
use super::{AwsProvider, Bucket, read};
use crate::addr::Address;
use crate::providers::boot;
use crate::providers::launch::{carries, command_run_id, is_command_run};
use crate::providers::ports::LogSink;
use crate::providers::userdata::{self, TIMED_OUT};
use crate::providers::{
    Capacity, CreateNodes, ErrorClass, JobPort, JobState, JobStatus, LaunchJob, ListFilter, LogPort, Node,
    ProviderError, TAG_ATTEMPT, TAG_JOB, TAG_MANAGED,
};
use aws_sdk_ec2::operation::run_instances::builders::RunInstancesFluentBuilder;

/// Set on a job's instance by `cancel_job` before it terminates it.
pub const TAG_CANCELLED: &str = "gpuplan:cancelled";

/// An idempotency token EC2 accepts (at most 64 ASCII characters).
fn client_token(token: &str, suffix: usize) -> String {
    let t = if suffix == 0 { token.to_string() } else { format!("{token}-t{suffix}") };
    if t.len() <= 64 && t.is_ascii() {
        return t;
    }
    let h = crate::hex::hex(&Sha256::digest(t.as_bytes()));
    format!("gp-{}", &h[..48])
}

impl AwsProvider {
    /// Where a job's node of type `t` launches: the subnet of its zone (else the zone),
    /// a multi-node job's cluster placement group, and its security groups, on its EFA
    /// interfaces when its pool has `fabric = "efa"` (`efa.rs`).
    async fn place_job_node(
        &self,
        call: RunInstancesFluentBuilder,
        shape: &CreateNodes,
        t: &str,
    ) -> Result<RunInstancesFluentBuilder, ProviderError> {
        let region = shape.region.as_str();
        let group = super::fleet::group_of(shape).map(str::to_string);
        let subnet = self.subnet_for(region, &shape.zone).await?;
        let groups = &self.settings.security_groups;
        let efa = match super::efa::wants_efa(shape) {
            true => self.efa_groups(region, &[t.to_string()]).await?.first().map(|(n, _)| *n),
            false => None,
        };
        let mut call = match (efa, subnet) {
            (Some(n), subnet) => {
                let call =
                    call.set_network_interfaces(Some(super::efa::launch_interfaces(n, subnet.as_deref(), groups)));
                let zone = subnet.is_none().then(|| shape.zone.clone());
                return Ok(
                    call.placement(Placement::builder().set_availability_zone(zone).set_group_name(group).build())
                );
            }
            (None, Some(s)) => {
                call.subnet_id(s).set_placement(group.map(|g| Placement::builder().group_name(g).build()))
            }
            (None, None) => {
                call.placement(Placement::builder().availability_zone(&shape.zone).set_group_name(group).build())
            }
        };
        if !groups.is_empty() {
            call = call.set_security_group_ids(Some(groups.clone()));
        }
        Ok(call)
    }

    pub(super) async fn launch(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        let Some(shape) = &req.shape else {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "MissingShape",
                format!(
                    "job `{}`: the aws provider runs each job on a node made for it, but no shape was given",
                    req.job
                ),
            ));
        };
        let region = shape.region.as_str();
        let types = self.usable_types(region, &shape.instance_types).await?;
        let image = super::template::image_of(self, shape)?;
        let client = self.client(region).await?;
        let user_data = base64::engine::general_purpose::STANDARD.encode(userdata::job_script(req)?);
        let mut job_req = shape.clone();
        job_req.tags.insert(TAG_JOB, req.job.to_string());
        job_req.tags.insert(TAG_ATTEMPT, req.attempt.to_string());
        // `disk {}`: the pool's disks on the job's node too, tagged like it.
        let disks = self.job_disks(region, &image, shape).await?;
        let mut last = None;
        for (i, t) in types.iter().enumerate() {
            let mut call = client
                .run_instances()
                .image_id(&image)
                .instance_type(InstanceType::from(t.as_str()))
                .min_count(1)
                .max_count(1)
                .user_data(&user_data)
                .instance_initiated_shutdown_behavior(ShutdownBehavior::Stop)
                .metadata_options(
                    aws_sdk_ec2::types::InstanceMetadataOptionsRequest::builder()
                        .http_tokens(HttpTokensState::Required)
                        .build(),
                )
                .set_key_name(self.settings.key_name.clone())
                .set_tag_specifications(Some(tag_specs(&job_req, &[ResourceType::Instance, ResourceType::Volume])))
                .set_block_device_mappings(disks.clone())
                .client_token(client_token(&req.token, i));
            call = self.place_job_node(call, shape, t).await?;
            if let Some(p) = &self.settings.iam_instance_profile {
                let spec = IamInstanceProfileSpecification::builder();
                call =
                    call.iam_instance_profile(if p.starts_with("arn:") { spec.arn(p) } else { spec.name(p) }.build());
            }
            if shape.capacity == Capacity::Spot {
                call = call.instance_market_options(
                    InstanceMarketOptionsRequest::builder()
                        .market_type(MarketType::Spot)
                        .spot_options(
                            SpotMarketOptions::builder().set_max_price(shape.max_spot_price.map(price)).build(),
                        )
                        .build(),
                );
            }
            self.pace(region, "RunInstances", Bucket::RunInstances, Some((Bucket::RunInstancesResource, 1))).await;
            match call.send().await.map_err(|e| from_sdk("RunInstances", e)) {
                Ok(out) => {
                    // Replica 0 of a multi-node job: the others rendezvous on this address.
                    let address = out.instances().first().and_then(|i| i.private_ip_address()).map(String::from);
                    let id = out
                        .instances()
                        .first()
                        .and_then(|i| i.instance_id())
                        .ok_or_else(|| {
                            ProviderError::new(
                                ErrorClass::Retryable,
                                "BadResponse",
                                "RunInstances returned no instance",
                            )
                        })?
                        .to_string();
                    return Ok(JobStatus {
                        id: id.clone(),
                        job: req.job.clone(),
                        node_id: id,
                        state: JobState::Queued,
                        attempt: req.attempt,
                        message: Some(format!("{} {} in {}", shape.capacity, t, shape.zone)),
                        started_ms: None,
                        finished_ms: None,
                        address,
                    });
                }
                Err(e) if e.class == ErrorClass::OutOfCapacity => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            ProviderError::new(ErrorClass::OutOfCapacity, "InsufficientInstanceCapacity", "no capacity")
        }))
    }

    pub(super) async fn status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let found = self.describe_all(region, vec![filter("instance-id", [id])]).await?;
        let Some(i) = found.first() else {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "JobNotFound",
                format!("no job instance `{id}` in {region}"),
            ));
        };
        let tags = tags(i);
        let job: Address = tags.get(TAG_JOB).and_then(|j| j.parse().ok()).ok_or_else(|| {
            ProviderError::new(ErrorClass::Invalid, "NotAJob", format!("instance `{id}` carries no {TAG_JOB} tag"))
        })?;
        let attempt = tags.get(TAG_ATTEMPT).and_then(|a| a.parse().ok()).unwrap_or(0);
        let status = |state, message: Option<String>| JobStatus {
            id: id.to_string(),
            job: job.clone(),
            node_id: id.to_string(),
            state,
            attempt,
            message,
            started_ms: None,
            finished_ms: None,
            address: i.private_ip_address().map(String::from),
        };
        let name = i.state().and_then(|s| s.name()).cloned();
        match name {
            Some(InstanceStateName::Pending) => return Ok(status(JobState::Queued, None)),
            Some(InstanceStateName::Running) => {
                return Ok(self.boot_check(region, i, status(JobState::Running, None)).await);
            }
            _ => {}
        }
        if spot_reclaimed(i) {
            return Ok(status(JobState::Preempted, Some("the spot instance was reclaimed by EC2".into())));
        }
        if tags.get(TAG_CANCELLED).is_some_and(|v| v == "true") {
            return Ok(status(JobState::Cancelled, Some("cancelled".into())));
        }
        let reason = i.state_reason().and_then(|r| r.message());
        let console = match self.console(region, id).await {
            Ok(c) => c,
            // Unreadable for now: neither a success nor a failure that would spend a
            // retry; the next refresh reads it again (a stopped node's, within its grace).
            Err(e) => {
                let why = format!("{}; its console is not readable: {e}", reason.unwrap_or("no reason given"));
                return Ok(no_exit_code(i, &why, status));
            }
        };
        Ok(match userdata::exit_code(&console) {
            Some(0) => status(JobState::Succeeded, None),
            Some(TIMED_OUT) => status(JobState::Failed, Some("ran past max_runtime (exit code 124)".into())),
            Some(n) => status(JobState::Failed, Some(userdata::exit_message(n, &console, "console output"))),
            None => no_exit_code(i, reason.unwrap_or("no reason given"), status),
        })
    }
}

impl AwsProvider {
    /// A running job node past the boot deadline is asked through Systems Manager whether
    /// its job's log exists; one whose agent answers that it does not never started its
    /// job, and its run fails (see [`boot`]). The console cannot show this: EC2 posts it
    /// late, and a script that never ran prints nothing.
    async fn boot_check(&self, region: &str, i: &aws_sdk_ec2::types::Instance, running: JobStatus) -> JobStatus {
        let now = crate::providers::Provider::clock_ms(self);
        let Some(age_secs) = launched_ms(i).and_then(|at| boot::past_deadline(at, now)) else { return running };
        let check = self.job_log_exists(region, &running.node_id).await;
        boot::verdict(running, age_secs, "Systems Manager", check)
    }
}

/// An instance's launch time in ms since the epoch; `None` without one (no boot check).
fn launched_ms(i: &aws_sdk_ec2::types::Instance) -> Option<u64> {
    let t = i.launch_time()?;
    // A time before the epoch is not a launch time: no check rather than a guess.
    let secs = u64::try_from(t.secs()).unwrap_or(0);
    (secs > 0).then(|| secs * 1000 + u64::from(t.subsec_nanos()) / 1_000_000)
}

/// A job node that is no longer running but whose console shows no exit line (`why`:
/// EC2's state reason). EC2 posts console output late (minutes after a stop) and keeps
/// only the newest 64 KB, so a stopped node's exit code is awaited: the run is `stopped`
/// (`jobs::refresh` fails it once the grace from the stop has passed), with the stop time
/// EC2 gives. A node terminated before it reported one is gone without a verdict: its run
/// was interrupted, not failed (requeued, no retry spent), like a spot reclaim.
fn no_exit_code(
    i: &aws_sdk_ec2::types::Instance,
    why: &str,
    status: impl Fn(JobState, Option<String>) -> JobStatus,
) -> JobStatus {
    match i.state().and_then(|s| s.name()) {
        Some(InstanceStateName::Terminated | InstanceStateName::ShuttingDown) => status(
            JobState::Preempted,
            Some(format!("its node was terminated before it reported an exit code ({why}); requeued")),
        ),
        _ => JobStatus {
            finished_ms: i.state_transition_reason().and_then(stopped_ms),
            ..status(JobState::Stopped, Some(format!("{why}; no exit line on its console")))
        },
    }
}

/// When EC2 says the instance stopped, from its state transition reason, e.g. `User
/// initiated (2026-01-31 18:47:02 GMT)` (moto writes `UTC`). `None` when the reason
/// carries no time (the stop is then timed from when gpuplan first sees it).
fn stopped_ms(reason: &str) -> Option<u64> {
    let (_, rest) = reason.rsplit_once('(')?;
    let inner = rest.strip_suffix(')')?;
    let inner = inner.strip_suffix(" GMT").or_else(|| inner.strip_suffix(" UTC")).unwrap_or(inner);
    let at = humantime::parse_rfc3339_weak(inner.trim()).ok()?;
    u64::try_from(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()
}

impl AwsProvider {
    /// A job node's console output (the job's own output and its exit line).
    pub(super) async fn console(&self, region: &str, id: &str) -> Result<String, ProviderError> {
        let client = self.client(region).await?;
        let out = read(|| async {
            self.pace(region, "GetConsoleOutput", Bucket::NonMutating, None).await;
            client.get_console_output().instance_id(id).send().await.map_err(|e| from_sdk("GetConsoleOutput", e))
        })
        .await?;
        let Some(b64) = out.output() else { return Ok(String::new()) };
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64.trim()).map_err(|e| {
            ProviderError::new(ErrorClass::Fatal, "BadResponse", format!("GetConsoleOutput of {id} is not base64: {e}"))
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub(super) async fn cancel(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        let before = self.status(region, id).await?;
        let running = before.state.is_active();
        if running {
            let client = self.client(region).await?;
            self.pace(region, "CreateTags", Bucket::CreateTags, None).await;
            client
                .create_tags()
                .resources(id)
                .tags(Tag::builder().key(TAG_CANCELLED).value("true").build())
                .send()
                .await
                .map_err(|e| from_sdk("CreateTags", e))?;
        }
        // The status call checked the instance is a gpuplan job node.
        self.terminate_owned(region, &[id.to_string()]).await?;
        Ok(if running {
            JobStatus { state: JobState::Cancelled, message: Some("cancelled".into()), ..before }
        } else {
            before
        })
    }
}

#[async_trait]
impl JobPort for AwsProvider {
    /// On a warm node when the plan chose one (Run Command, `ssm.rs`), else on a node
    /// made for it.
    async fn launch_job(&self, req: &LaunchJob) -> Result<JobStatus, ProviderError> {
        match (&req.shape, req.node_id.is_empty()) {
            (None, false) => self.launch_on_node(&req.region, req).await,
            _ => self.launch(req).await,
        }
    }

    /// The SSM command sent to warm node `node` under launch `token`, with its status:
    /// `ListCommands` of the node, page by page, until a comment carries the token (see
    /// `ssm.rs`).
    async fn find_sent(&self, region: &str, node: &str, token: &str) -> Result<Option<JobStatus>, ProviderError> {
        let mut next: Option<String> = None;
        loop {
            let mut body = serde_json::json!({"InstanceId": node, "MaxResults": 50});
            if let Some(t) = &next {
                body["NextToken"] = serde_json::json!(t);
            }
            let doc = read(|| self.ssm(region, "ListCommands", &body)).await?;
            let commands = doc["Commands"].as_array().into_iter().flatten();
            let found = commands
                .filter(|c| c["Comment"].as_str().is_some_and(|m| carries(m, token)))
                .find_map(|c| c["CommandId"].as_str());
            if let Some(command) = found {
                let id = command_run_id(node, command);
                return self.command_status(region, &id).await.map(Some);
            }
            next = doc["NextToken"].as_str().filter(|t| !t.is_empty()).map(String::from);
            if next.is_none() {
                return Ok(None);
            }
        }
    }

    /// A warm node's command (`ssm.rs`), or a job node's instance.
    async fn job_status(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.command_status(region, id).await } else { self.status(region, id).await }
    }

    /// Job nodes of a region: those the pool listing just saw, else one listing of them.
    async fn list_job_nodes(&self, filter: &ListFilter) -> Result<Vec<Node>, ProviderError> {
        if let Some(seen) = self.seen_job_nodes(filter) {
            return Ok(seen);
        }
        let instances = self.describe_all(&filter.region, tag_filter(filter)).await?;
        Ok(split(&instances, &filter.region).1)
    }

    /// The instance a job ran on, once gpuplan's record of the run has ended (or no run
    /// owns it): one `DescribeInstances`, then `TerminateInstances` of that instance alone.
    /// Not a cancel: no console read, no `gpuplan:cancelled` tag, no SSM call. An instance
    /// already gone (terminated, or no longer listed) is released; one that is not a
    /// gpuplan job node (no `gpuplan:managed=true` or no `gpuplan:job`) is refused; a warm
    /// node's run (`<node>/<command>`) has no node of its own, and its command is left alone.
    async fn release_job_node(&self, region: &str, id: &str) -> Result<(), ProviderError> {
        if is_command_run(id) {
            return Ok(());
        }
        let found = self.describe_all(region, vec![filter("instance-id", [id])]).await?;
        let Some(i) = found.first() else { return Ok(()) };
        let t = tags(i);
        if !is_managed(&t) || !t.contains_key(TAG_JOB) {
            return Err(ProviderError::new(
                ErrorClass::Invalid,
                "NotAJob",
                format!(
                    "refusing to release `{id}`: it lacks {}, so it is not a node gpuplan made for a job; nothing was terminated",
                    if is_managed(&t) { format!("the {TAG_JOB} tag") } else { format!("the tag {TAG_MANAGED}=true") }
                ),
            ));
        }
        match i.state().and_then(|s| s.name()) {
            Some(InstanceStateName::Terminated | InstanceStateName::ShuttingDown) => Ok(()),
            _ => self.terminate_owned(region, &[id.to_string()]).await,
        }
    }

    /// A job on a warm node: its command is cancelled and the node stays in its pool.
    async fn cancel_job(&self, region: &str, id: &str) -> Result<JobStatus, ProviderError> {
        if is_command_run(id) { self.cancel_command(region, id).await } else { self.cancel(region, id).await }
    }
}

#[async_trait]
impl LogPort for AwsProvider {
    /// The job's own output: what its warm node's command or its job node's console holds
    /// (one replica per node).
    async fn job_logs(&self, region: &str, id: &str, _follow: bool, out: &LogSink<'_>) -> Result<(), ProviderError> {
        let text =
            if is_command_run(id) { self.command_output(region, id).await? } else { self.console(region, id).await? };
        for line in userdata::job_output(&text) {
            out(0, line);
        }
        Ok(())
    }
}

impl AwsProvider {
    /// The block device mappings of a job node's `disk {}`; `None` without one.
    async fn job_disks(
        &self,
        region: &str,
        image: &str,
        shape: &crate::providers::CreateNodes,
    ) -> Result<Option<Vec<BlockDeviceMapping>>, ProviderError> {
        let Some(d) = shape.hardware.as_ref().and_then(|h| h.disks.as_ref()) else { return Ok(None) };
        let root = self.root_device(region, image).await?;
        let mappings = super::template::block_devices(d, &root)
            .into_iter()
            .map(|(name, size, kind)| {
                BlockDeviceMapping::builder()
                    .device_name(name)
                    .ebs(
                        EbsBlockDevice::builder()
                            .volume_size(size)
                            .volume_type(VolumeType::from(kind.as_str()))
                            .delete_on_termination(true)
                            .build(),
                    )
                    .build()
            })
            .collect();
        Ok(Some(mappings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_time_is_read_from_ec2s_state_transition_reason() {
        // 2026-01-31T18:47:02Z
        assert_eq!(stopped_ms("User initiated (2026-01-31 18:47:02 GMT)"), Some(1_769_885_222_000));
        assert_eq!(stopped_ms("User initiated (2026-01-31 18:47:02 UTC)"), Some(1_769_885_222_000));
        assert_eq!(stopped_ms("Client.InstanceInitiatedShutdown"), None);
        assert_eq!(stopped_ms("User initiated (not a time)"), None);
    }

    #[test]
    fn client_tokens_fit_ec2s_limit() {
        assert_eq!(client_token("gp-abc", 0), "gp-abc");
        assert_eq!(client_token("gp-abc", 2), "gp-abc-t2");
        let long = client_token(&"x".repeat(80), 0);
        assert!(long.len() <= 64 && long.starts_with("gp-"), "{long}");
    }
}
