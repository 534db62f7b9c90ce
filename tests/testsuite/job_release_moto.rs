//! `release_job_node` of the aws provider against moto's EC2 (the real SDK): the node of a
//! run that ended is terminated, that instance alone, with no console read, tag write or
//! SSM call (a release is not a cancel); an instance already gone counts as released; an
//! instance that is not a gpuplan job node is refused; a warm node's run has no node of its
//! own to release. The apply's callers: `apply/jobs.rs` (`release_ended_nodes`,
//! `cancel_removed`) and `apply/jobs/orphans.rs`.

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{Filter, InstanceStateName, InstanceType, ResourceType, Tag, TagSpecification};
use gpuplan::providers::aws::{AwsProvider, AwsSettings};
use gpuplan::providers::{ErrorClass, JobPort};

use crate::sigterm_moto::endpoint;

/// A region of its own: moto keeps one account for the whole run.
const REGION: &str = "ap-south-1";

fn settings() -> AwsSettings {
    AwsSettings {
        name: "aws".into(),
        endpoint: Some(endpoint()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..Default::default()
    }
}

async fn client() -> Client {
    AwsSettings::client(&settings().load().await, REGION)
}

/// One running instance with `tags`.
async fn instance(c: &Client, tags: &[(&str, &str)]) -> String {
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    let out = c
        .run_instances()
        .image_id("ami-0123456789abcdef0")
        .instance_type(InstanceType::G5Xlarge)
        .min_count(1)
        .max_count(1)
        .tag_specifications(spec.build())
        .send()
        .await
        .expect("RunInstances");
    out.instances()[0].instance_id().unwrap().to_string()
}

/// gpuplan's ownership tags of a test of its own, plus `extra`.
fn owned<'a>(lineage: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut t = vec![("gpuplan:managed", "true"), ("gpuplan:lineage", lineage), ("gpuplan:address", "gpu_pool.train")];
    t.extend_from_slice(extra);
    t
}

async fn state_of(c: &Client, id: &str) -> InstanceStateName {
    let out = c
        .describe_instances()
        .filters(Filter::builder().name("instance-id").values(id).build())
        .send()
        .await
        .expect("DescribeInstances");
    out.reservations()[0].instances()[0].state().unwrap().name().unwrap().clone()
}

/// The calls `p` made, by action, without the ones it made nothing with.
fn calls(p: &AwsProvider) -> Vec<(&'static str, u64)> {
    p.calls().into_iter().filter(|(_, n)| *n > 0).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn releasing_an_ended_run_s_node_terminates_that_instance_alone_and_again_is_done() {
    let c = client().await;
    let lineage = "release-ended";
    let done = instance(&c, &owned(lineage, &[("gpuplan:job", "job.done"), ("gpuplan:attempt", "1")])).await;
    let busy = instance(&c, &owned(lineage, &[("gpuplan:job", "job.busy"), ("gpuplan:attempt", "1")])).await;
    let warm = instance(&c, &owned(lineage, &[])).await;
    // The job ended: its node powered off, as a job script does.
    c.stop_instances().instance_ids(&done).send().await.expect("StopInstances");

    let p = AwsProvider::new(settings());
    p.release_job_node(REGION, &done).await.expect("release");
    assert_eq!(state_of(&c, &done).await, InstanceStateName::Terminated);
    assert_eq!(state_of(&c, &busy).await, InstanceStateName::Running, "another job's node was touched");
    assert_eq!(state_of(&c, &warm).await, InstanceStateName::Running, "a pool node was touched");
    // One read and one terminate: no console read, no `gpuplan:cancelled` tag, no SSM.
    assert_eq!(calls(&p), [("DescribeInstances", 1), ("TerminateInstances", 1)]);

    // Again: the node is gone, which is what a release asks. Nothing more is terminated.
    p.release_job_node(REGION, &done).await.expect("a second release is done");
    // A node no longer listed at all (EC2 forgets terminated instances within the hour).
    p.release_job_node(REGION, "i-0aaaaaaaaaaaaaaaa").await.expect("a node no longer listed is released");
    assert_eq!(calls(&p), [("DescribeInstances", 3), ("TerminateInstances", 1)]);
}

/// The node of a run whose record ended while the cloud still runs it (a boot check
/// failed it, or no run owns the node) goes the same way, and is not marked cancelled.
#[tokio::test(flavor = "multi_thread")]
async fn releasing_a_node_that_still_runs_terminates_it_without_cancelling_its_run() {
    let c = client().await;
    let node = instance(&c, &owned("release-running", &[("gpuplan:job", "job.stuck")])).await;
    let p = AwsProvider::new(settings());
    p.release_job_node(REGION, &node).await.expect("release");
    assert_eq!(state_of(&c, &node).await, InstanceStateName::Terminated);
    let out = c.describe_tags().filters(Filter::builder().name("resource-id").values(&node).build()).send().await;
    let keys: Vec<String> =
        out.expect("DescribeTags").tags().iter().filter_map(|t| t.key().map(String::from)).collect();
    assert!(!keys.iter().any(|k| k == "gpuplan:cancelled"), "{keys:?}");
    assert_eq!(calls(&p), [("DescribeInstances", 1), ("TerminateInstances", 1)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn release_refuses_an_instance_that_is_not_a_gpuplan_job_node() {
    let c = client().await;
    let lineage = "release-refuses";
    let warm = instance(&c, &owned(lineage, &[])).await;
    // Carries a job tag (copied from an image or by hand) but not gpuplan's ownership.
    let stray = instance(&c, &[("gpuplan:job", "job.done"), ("team", "someone-else")]).await;
    let p = AwsProvider::new(settings());
    let err = p.release_job_node(REGION, &stray).await.expect_err("an instance gpuplan does not own is released");
    assert!(err.message.contains("lacks the tag gpuplan:managed=true"), "{err}");
    let err = p.release_job_node(REGION, &warm).await.unwrap_err();
    assert_eq!((err.class, err.code.as_str()), (ErrorClass::Invalid, "NotAJob"), "{err}");
    assert!(err.message.contains("lacks the gpuplan:job tag"), "{err}");
    assert_eq!(state_of(&c, &warm).await, InstanceStateName::Running);
    assert_eq!(state_of(&c, &stray).await, InstanceStateName::Running);
    assert_eq!(p.calls().get("TerminateInstances"), None, "no terminate call was made");
}

/// A job on a warm node runs as `<node>/<command>`: it has no node of its own, and a
/// release neither terminates the node nor cancels its command.
#[tokio::test(flavor = "multi_thread")]
async fn releasing_a_warm_node_s_run_touches_neither_the_node_nor_its_command() {
    let c = client().await;
    let warm = instance(&c, &owned("release-warm", &[])).await;
    let p = AwsProvider::new(settings());
    p.release_job_node(REGION, &format!("{warm}/0b1c2d3e-aaaa-bbbb-cccc-0123456789ab")).await.expect("release");
    assert_eq!(state_of(&c, &warm).await, InstanceStateName::Running);
    assert_eq!(calls(&p), [], "no call at all");
}
