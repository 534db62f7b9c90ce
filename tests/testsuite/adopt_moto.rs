//! Adopting hand-made EC2 instances on moto (`scripts/test` starts it): `gpuplan import`
//! writes their pool and import block, `plan` shows them as imports, `apply` tags them
//! with `CreateTags` and launches or terminates nothing (every call is counted on a
//! proxy), the next plan is empty; a `moved` rename keeps every instance ID.

use std::collections::BTreeMap;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{
    Filter, InstanceMarketOptionsRequest, InstanceStateName, InstanceType, MarketType, ResourceType, Tag,
    TagSpecification,
};

use crate::aws::cli::run;
use crate::aws::fake_ec2::FakeEc2;
use gpuplan::providers::aws::AwsSettings;

fn endpoint() -> String {
    match std::env::var("GPUPLAN_TEST_MOTO_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => e,
        _ => panic!("GPUPLAN_TEST_MOTO_ENDPOINT is not set: run the tests with `scripts/test`, which starts moto"),
    }
}

async fn client(region: &str) -> Client {
    let settings = AwsSettings {
        name: "aws".into(),
        endpoint: Some(endpoint()),
        access_key: Some("testing".into()),
        secret_key: Some("testing".into()),
        ..Default::default()
    };
    let sdk = settings.load().await;
    AwsSettings::client(&sdk, region)
}

/// `count` p4d.24xlarge instances made by hand (no gpuplan tag), tagged `run=<mark>` so
/// this test finds only its own in moto's shared account.
async fn hand_made(c: &Client, zone: &str, count: i32, spot: bool, mark: &str) -> Vec<String> {
    let mut req = c
        .run_instances()
        .image_id("ami-0123456789abcdef0")
        .instance_type(InstanceType::P4d24xlarge)
        .placement(aws_sdk_ec2::types::Placement::builder().availability_zone(zone).build())
        .min_count(count)
        .max_count(count)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(Tag::builder().key("run").value(mark).build())
                .build(),
        );
    if spot {
        req =
            req.instance_market_options(InstanceMarketOptionsRequest::builder().market_type(MarketType::Spot).build());
    }
    let out = req.send().await.expect("RunInstances");
    out.instances().iter().map(|i| i.instance_id().unwrap().to_string()).collect()
}

/// The instances tagged `run=<mark>`: id → (state, tags).
async fn marked(c: &Client, mark: &str) -> BTreeMap<String, (InstanceStateName, BTreeMap<String, String>)> {
    let out = c
        .describe_instances()
        .filters(Filter::builder().name("tag:run").values(mark).build())
        .send()
        .await
        .expect("DescribeInstances");
    let mut m = BTreeMap::new();
    for r in out.reservations() {
        for i in r.instances() {
            let tags =
                i.tags().iter().map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string())).collect();
            m.insert(i.instance_id().unwrap().to_string(), (i.state().unwrap().name().unwrap().clone(), tags));
        }
    }
    m
}

const LAUNCHES: [&str; 4] = ["RunInstances", "CreateFleet", "TerminateInstances", "StopInstances"];

fn launches(proxy: &FakeEc2) -> Vec<String> {
    proxy.requests().into_iter().map(|r| r.action).filter(|a| LAUNCHES.contains(&a.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn hand_made_instances_are_imported_with_create_tags_and_renamed_in_place() {
    let region = "us-east-1";
    let zone = "us-east-1b";
    let mark = format!("adopt-{}", std::process::id());
    let c = client(region).await;
    let mut ids = hand_made(&c, zone, 2, false, &mark).await;
    ids.extend(hand_made(&c, zone, 1, true, &mark).await);
    ids.sort();

    let proxy = FakeEc2::proxy(&endpoint());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let provider = format!("provider \"aws\" {{\n  region   = \"{region}\"\n  endpoint = \"{}\"\n}}\n", proxy.url);
    std::fs::write(dir.join("main.hcl"), &provider).unwrap();

    let filter = format!("run={mark}");
    let r = run(dir, &["import", "--provider", "aws", "--filter", &filter, "--generate-config-out", "adopted.hcl"]);
    assert_eq!(r.code, 0, "import:\n{}\n{}", r.stdout, r.stderr);
    let generated = std::fs::read_to_string(dir.join("adopted.hcl")).unwrap();
    for id in &ids {
        assert!(generated.contains(id.as_str()), "{generated}");
    }
    assert!(generated.contains("on_demand_base = 2") && generated.contains("desired = 3"), "{generated}");

    let plan = run(dir, &["plan"]);
    assert_eq!(plan.code, 0, "plan:\n{}\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("Plan: 3 to import, 0 to add, 0 to change, 0 to destroy."), "{}", plan.stdout);

    let before = proxy.requests().len();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply:\n{}\n{}", r.stdout, r.stderr);
    let applied: Vec<String> = proxy.requests()[before..].iter().map(|q| q.action.clone()).collect();
    assert!(launches(&proxy).is_empty(), "no launch, stop or terminate: {applied:?}");
    assert!(applied.iter().any(|a| a == "CreateTags"), "{applied:?}");

    let after = marked(&c, &mark).await;
    assert_eq!(after.keys().cloned().collect::<Vec<_>>(), ids, "the same instances");
    for (id, (state, tags)) in &after {
        assert_eq!(*state, InstanceStateName::Running, "{id}");
        assert_eq!(tags.get("gpuplan:managed").map(String::as_str), Some("true"), "{id}: {tags:?}");
        assert_eq!(tags.get("gpuplan:address").map(String::as_str), Some("gpu_pool.imported_p4d_24xlarge"));
    }
    let plan = run(dir, &["plan"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(plan.stdout.contains("No changes."), "{}", plan.stdout);

    // Renamed with `moved {}`: every instance keeps its ID; only the address tag changes.
    let renamed = generated.replace("imported_p4d_24xlarge", "legacy");
    let moved = "moved {\n  from = gpu_pool.imported_p4d_24xlarge\n  to   = gpu_pool.legacy\n}\n";
    std::fs::write(dir.join("adopted.hcl"), format!("{renamed}{moved}")).unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "apply the move:\n{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("has moved to gpu_pool.legacy"), "{}", r.stdout);
    assert!(launches(&proxy).is_empty(), "a rename launches and terminates nothing");
    let after = marked(&c, &mark).await;
    assert_eq!(after.keys().cloned().collect::<Vec<_>>(), ids);
    assert!(
        after.values().all(|(s, t)| *s == InstanceStateName::Running
            && t.get("gpuplan:address").map(String::as_str) == Some("gpu_pool.legacy")),
        "{after:?}"
    );
    let plan = run(dir, &["plan"]);
    assert!(plan.stdout.contains("No changes."), "{}", plan.stdout);

    // Let go of them: untagged, still running; then nothing of gpuplan's is left there.
    std::fs::write(
        dir.join("adopted.hcl"),
        "removed {\n  from = gpu_pool.legacy\n  lifecycle {\n    destroy = false\n  }\n}\n",
    )
    .unwrap();
    let r = run(dir, &["apply", "--auto-approve"]);
    assert_eq!(r.code, 0, "forget:\n{}\n{}", r.stdout, r.stderr);
    assert!(launches(&proxy).is_empty());
    let after = marked(&c, &mark).await;
    assert!(
        after.values().all(|(s, t)| *s == InstanceStateName::Running && !t.contains_key("gpuplan:managed")),
        "{after:?}"
    );
}
